//! Where each I/O goes: sequential, or a random order that visits every block
//! exactly once per pass (fio's default random map) without keeping a map.
//!
//! The random order is a keyed bijection on `[0, 2^k)` (a small Feistel
//! network) restricted to `[0, blocks)` by cycle-walking: O(1) memory for any
//! file size, reproducible from the seed, and a fresh order on every pass.
//! With sizes that vary (`bsrange`, `bssplit`) a block is the smallest size,
//! and `Sizes` draws each I/O's size.

use crate::random::SplitMix;
use dc_jobfile::BlockSizes;

/// A keyed permutation of `[0, n)`.
#[derive(Debug, Clone)]
struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Permutation {
    fn new(n: u64, seed: u64) -> Permutation {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mut rng = SplitMix::new(seed);
        Permutation { n, half_bits, keys: [rng.next_u64(), rng.next_u64(), rng.next_u64(), rng.next_u64()] }
    }

    #[inline]
    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = (x >> self.half_bits, x & mask);
        for k in self.keys {
            let f = {
                let mut z = r ^ k;
                z = z.wrapping_mul(0xBF58_476D_1CE4_E5B9);
                (z ^ (z >> 29)) & mask
            };
            (l, r) = (r, l ^ f);
        }
        (l << self.half_bits) | r
    }

    /// The image of `i` (< n); cycle-walking keeps it inside `[0, n)`.
    #[inline]
    fn get(&self, i: u64) -> u64 {
        let mut x = self.feistel(i);
        while x >= self.n {
            x = self.feistel(x);
        }
        x
    }
}

/// Offsets for one job instance.
pub struct Offsets {
    blocks: u64,
    bs: u64,
    index: u64,
    pass: u64,
    kind: Kind,
}

enum Kind {
    Sequential,
    Random {
        seed: u64,
        perm: Permutation,
    },
    /// norandommap: independent uniform picks; blocks may repeat or be missed.
    Uniform(SplitMix),
}

impl Offsets {
    /// `size` bytes of file in blocks of `bs` (a trailing partial block is not used, as in fio).
    pub fn new(size: u64, bs: u64, random: bool, norandommap: bool, seed: u64) -> Offsets {
        let blocks = (size / bs).max(1);
        let kind = match (random, norandommap) {
            (false, _) => Kind::Sequential,
            (true, false) => Kind::Random { seed, perm: Permutation::new(blocks, seed) },
            (true, true) => Kind::Uniform(SplitMix::new(seed)),
        };
        Offsets { blocks, bs, index: 0, pass: 0, kind }
    }

    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// The next offset; after `blocks()` calls a new pass starts.
    /// A sequential job's I/O covered `blocks` more blocks than the one its
    /// offset named (a larger I/O of a varying size): the next starts after
    /// them. Random offsets are drawn as they are.
    #[inline]
    pub fn skip(&mut self, blocks: u64) {
        if let Kind::Sequential = self.kind {
            self.index = (self.index + blocks).min(self.blocks);
        }
    }

    #[inline]
    pub fn next_offset(&mut self) -> u64 {
        if self.index == self.blocks {
            self.index = 0;
            self.pass += 1;
            if let Kind::Random { seed, perm } = &mut self.kind {
                *perm = Permutation::new(self.blocks, seed.wrapping_add(self.pass));
            }
        }
        let block = match &mut self.kind {
            Kind::Sequential => self.index,
            Kind::Random { perm, .. } => perm.get(self.index),
            Kind::Uniform(rng) => rng.below(self.blocks),
        };
        self.index += 1;
        block * self.bs
    }
}

/// Draws each I/O's size from a job's `BlockSizes`.
pub struct Sizes {
    sizes: BlockSizes,
    bs: u64,
    rng: SplitMix,
}

impl Sizes {
    pub fn new(sizes: &BlockSizes, bs: u64, seed: u64) -> Sizes {
        Sizes { sizes: sizes.clone(), bs, rng: SplitMix::new(seed ^ 0xB10C) }
    }

    #[inline]
    pub fn next_size(&mut self) -> u64 {
        match &self.sizes {
            BlockSizes::Fixed => self.bs,
            BlockSizes::Range { min, max } => min * (1 + self.rng.below(max / min)),
            BlockSizes::Split(split) => {
                let mut pick = self.rng.below(100) as u32;
                for &(size, pct) in split {
                    if pick < pct {
                        return size;
                    }
                    pick -= pct;
                }
                split.last().map_or(self.bs, |&(size, _)| size)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_visits_every_block_once_per_pass() {
        for blocks in [1u64, 2, 3, 7, 64, 1000, 4097] {
            let mut o = Offsets::new(blocks * 4096, 4096, true, false, 42);
            for _pass in 0..2 {
                let mut seen = vec![false; blocks as usize];
                for _ in 0..blocks {
                    let b = (o.next_offset() / 4096) as usize;
                    assert!(!seen[b], "block {b} twice in a pass of {blocks}");
                    seen[b] = true;
                }
                assert!(seen.iter().all(|&s| s));
            }
        }
    }

    #[test]
    fn random_is_not_sequential_and_is_reproducible() {
        let take = |seed| {
            let mut o = Offsets::new(1 << 20, 4096, true, false, seed);
            (0..256).map(|_| o.next_offset()).collect::<Vec<_>>()
        };
        let a = take(1);
        assert_eq!(a, take(1));
        assert_ne!(a, take(2));
        let in_order = a.windows(2).filter(|w| w[1] == w[0] + 4096).count();
        assert!(in_order < 16, "{in_order} sequential steps out of 255");
    }

    #[test]
    fn sizes_follow_the_range_and_the_split() {
        let mut r = Sizes::new(&BlockSizes::Range { min: 512, max: 4096 }, 4096, 7);
        let drawn: Vec<u64> = (0..4000).map(|_| r.next_size()).collect();
        assert!(drawn.iter().all(|&s| s % 512 == 0 && (512..=4096).contains(&s)));
        assert!(drawn.contains(&512) && drawn.contains(&4096));
        let mut sp = Sizes::new(&BlockSizes::Split(vec![(4096, 10), (65536, 90)]), 65536, 7);
        let small = (0..10_000).filter(|_| sp.next_size() == 4096).count();
        assert!((800..1200).contains(&small), "{small} of 10,000 at 10%");
    }

    #[test]
    fn sequential_wraps() {
        let mut o = Offsets::new(3 * 1024 + 100, 1024, false, false, 0);
        let v: Vec<_> = (0..5).map(|_| o.next_offset()).collect();
        assert_eq!(v, [0, 1024, 2048, 0, 1024]);
    }

    #[test]
    fn uniform_stays_in_range() {
        let mut o = Offsets::new(10 * 512, 512, true, true, 9);
        assert!((0..1000).all(|_| o.next_offset() < 10 * 512));
    }
}
