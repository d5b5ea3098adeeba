//! Where each I/O goes: sequential, or a random order that visits every block
//! exactly once per pass (fio's default random map) without keeping a map.
//!
//! The random order is a keyed bijection on `[0, 2^k)` (a small Feistel
//! network) restricted to `[0, blocks)` by cycle-walking: O(1) memory for any
//! file size, reproducible from the seed, and a fresh order on every pass.
//! With sizes that vary (`bsrange`, `bssplit`) a block is the smallest size,
//! and `Sizes` draws each I/O's size.

use crate::random::SplitMix;
use dc_jobfile::{BlockSizes, RandomDistribution, ZoneSize};
use rand_distr::{Distribution, Normal, Zipf};

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
    /// A sequential job's bytes skipped after each I/O (`rw=read:8k`;
    /// negative goes backwards), and where its next I/O goes.
    hole: i64,
    hole_next: u64,
    /// A random job's I/Os per drawn offset (`rw=randread:8`), how many of
    /// the current run are done, whether they repeat the offset
    /// (`rw_sequencer=identical`), and the run's last offset.
    run: u32,
    in_run: u32,
    repeat: bool,
    last: u64,
    /// `zonemode=strided`: blocks per zone, blocks skipped after one, and
    /// blocks done in the current zone.
    zone: u64,
    zone_skip: u64,
    in_zone: u64,
}

enum Kind {
    Sequential,
    Random {
        seed: u64,
        perm: Permutation,
    },
    /// norandommap: independent uniform picks; blocks may repeat or be missed.
    Uniform(SplitMix),
    /// `random_distribution` other than uniform. With the random map
    /// (`taken`), a block picked twice in a pass gives way to the next free
    /// one, as fio's map does; the skew then fades as the pass fills.
    Skewed {
        draw: Draw,
        taken: Option<Vec<u64>>,
    },
}

/// Draws block numbers from a skewed distribution. Zipf, Pareto and normal
/// draw a rank (0 the hottest, or the peak); the rank is scattered over
/// the file by a keyed permutation and shifted, as fio hashes and shifts
/// it, so the hot blocks are not all at the start. Zones are contiguous
/// from the file's start, uniform inside.
pub struct Draw {
    rng: SplitMix,
    blocks: u64,
    shape: Shape,
}

enum Shape {
    Zipf(Zipf<f64>, Scatter),
    /// `rank = (blocks - 1) * u ^ pow`, `pow = ln(h) / ln(1 - h)`.
    Pareto(f64, Scatter),
    Normal(Normal<f64>, Scatter),
    Uniform,
    /// (cumulative access percentage, first block, blocks) per zone.
    Zoned(Vec<(u32, u64, u64)>),
    Sequence {
        blocks: Vec<u64>,
        stride: bool,
        next: usize,
        round: u64,
    },
}

struct Scatter {
    perm: Permutation,
    shift: u64,
}

impl Scatter {
    fn new(blocks: u64, center: Option<f64>, rng: &mut SplitMix) -> Scatter {
        let perm = Permutation::new(blocks, rng.next_u64());
        let shift = match center {
            Some(c) => ((blocks as f64 * c) as u64).min(blocks - 1),
            None => rng.below(blocks),
        };
        Scatter { perm, shift }
    }

    fn place(&self, rank: u64, blocks: u64) -> u64 {
        (self.perm.get(rank.min(blocks - 1)) + self.shift) % blocks
    }
}

impl Draw {
    /// `bs` turns `zoned_abs` sizes into blocks; zones past the file's end
    /// are clipped to its last block.
    fn new(dist: &RandomDistribution, stride: bool, blocks: u64, bs: u64, seed: u64) -> Draw {
        let mut rng = SplitMix::new(seed ^ 0xD157);
        let n = blocks as f64;
        let shape = match dist {
            RandomDistribution::Uniform => Shape::Uniform,
            RandomDistribution::Zipf { theta, center } => {
                let zipf = Zipf::new(n, *theta).expect("theta > 0 and blocks >= 1, checked when parsed");
                Shape::Zipf(zipf, Scatter::new(blocks, *center, &mut rng))
            }
            RandomDistribution::Pareto { h, center } => {
                Shape::Pareto(h.ln() / (1.0 - h).ln(), Scatter::new(blocks, *center, &mut rng))
            }
            RandomDistribution::Normal { dev_pct, .. } if *dev_pct == 0.0 => Shape::Uniform,
            RandomDistribution::Normal { dev_pct, center } => {
                // The deviation is capped at half the file, as fio caps it.
                let sd = (n * dev_pct / 100.0).min(n / 2.0).max(1.0);
                let normal = Normal::new(n / 2.0, sd).expect("a finite, positive deviation");
                Shape::Normal(normal, Scatter::new(blocks, *center, &mut rng))
            }
            RandomDistribution::Zoned(zones) => {
                let mut out = Vec::with_capacity(zones.len());
                let (mut access, mut first, mut pct) = (0u32, 0u64, 0u64);
                for z in zones {
                    let end = match z.size {
                        ZoneSize::Percent(p) => {
                            pct += u64::from(p);
                            blocks * pct / 100
                        }
                        ZoneSize::Bytes(b) => first + b / bs,
                    };
                    let start = first.min(blocks - 1);
                    let len = end.min(blocks).saturating_sub(start).max(1);
                    access += z.access_pct;
                    out.push((access, start, len));
                    first = end;
                }
                Shape::Zoned(out)
            }
            RandomDistribution::Sequence(list) => Shape::Sequence { blocks: list.clone(), stride, next: 0, round: 0 },
        };
        Draw { rng, blocks, shape }
    }

    /// Whether a block this draws may be given way to by the random map
    /// (a `sequence` names its blocks exactly, repeats included).
    fn uses_map(&self) -> bool {
        !matches!(self.shape, Shape::Sequence { .. })
    }

    fn next(&mut self) -> u64 {
        let n = self.blocks;
        match &mut self.shape {
            Shape::Uniform => self.rng.below(n),
            Shape::Zipf(zipf, scatter) => scatter.place(zipf.sample(&mut self.rng) as u64 - 1, n),
            Shape::Pareto(pow, scatter) => {
                let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                scatter.place(((n - 1) as f64 * u.powf(*pow)) as u64, n)
            }
            Shape::Normal(normal, scatter) => {
                let x = normal.sample(&mut self.rng);
                scatter.place(x.clamp(0.0, (n - 1) as f64) as u64, n)
            }
            Shape::Zoned(zones) => {
                let pick = self.rng.below(100) as u32;
                let &(_, start, len) = zones.iter().find(|z| pick < z.0).unwrap_or(&zones[zones.len() - 1]);
                start + self.rng.below(len)
            }
            Shape::Sequence { blocks, stride, next, round } => {
                let b = blocks[*next] + if *stride { *round * blocks.len() as u64 } else { 0 };
                *next += 1;
                if *next == blocks.len() {
                    *next = 0;
                    *round += 1;
                }
                b % n
            }
        }
    }
}

/// The first block at or after `b` (wrapping) not yet in `taken`; marks it.
fn take_free(taken: &mut [u64], b: u64, blocks: u64) -> u64 {
    let mut i = b;
    loop {
        let (w, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        if taken[w] & bit == 0 {
            taken[w] |= bit;
            return i;
        }
        // Skip whole words that are full.
        if taken[w] == u64::MAX {
            i = (i / 64 + 1) * 64;
        } else {
            i += 1;
        }
        if i >= blocks {
            i = 0;
        }
    }
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
        Offsets::with_kind(blocks, bs, kind)
    }

    fn with_kind(blocks: u64, bs: u64, kind: Kind) -> Offsets {
        Offsets {
            blocks,
            bs,
            index: 0,
            pass: 0,
            kind,
            hole: 0,
            hole_next: 0,
            run: 1,
            in_run: 0,
            repeat: false,
            last: 0,
            zone: 0,
            zone_skip: 0,
            in_zone: 0,
        }
    }

    /// `rw=PATTERN:N`: for a sequential job `hole` bytes skipped after each
    /// I/O, for a random one `ios_per_offset` I/Os per drawn offset that
    /// continue from it or, with `repeat`, repeat it.
    pub fn with_modifier(mut self, hole: i64, ios_per_offset: u32, repeat: bool) -> Offsets {
        if let Kind::Sequential = self.kind {
            self.hole = hole;
        } else {
            (self.run, self.repeat) = (ios_per_offset.max(1), repeat);
        }
        self
    }

    /// Random offsets drawn from `dist` (`random_distribution`), `stride`
    /// for a `sequence` that moves on (`random_sequence_stride`).
    pub fn skewed(
        size: u64,
        bs: u64,
        norandommap: bool,
        seed: u64,
        dist: &RandomDistribution,
        stride: bool,
    ) -> Offsets {
        let blocks = (size / bs).max(1);
        let draw = Draw::new(dist, stride, blocks, bs, seed);
        let taken = (!norandommap && draw.uses_map()).then(|| vec![0u64; blocks.div_ceil(64) as usize]);
        Offsets::with_kind(blocks, bs, Kind::Skewed { draw, taken })
    }

    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// How many passes over the blocks have begun before the current one.
    pub fn pass(&self) -> u64 {
        self.pass
    }

    /// The next offset; after `blocks()` calls a new pass starts.
    /// A sequential job's I/O covered `blocks` more blocks than the one its
    /// offset named (a larger I/O of a varying size): the next starts after
    /// them. Random offsets are drawn as they are.
    #[inline]
    /// `zonemode=strided` for a sequential job: `zone_bytes` of I/O, then
    /// `skip_bytes` skipped, and again, wrapping at the file's end.
    pub fn with_zones(mut self, zone_bytes: u64, skip_bytes: u64) -> Offsets {
        if let Kind::Sequential = self.kind {
            (self.zone, self.zone_skip) = ((zone_bytes / self.bs).max(1), skip_bytes / self.bs);
        }
        self
    }

    pub fn skip(&mut self, blocks: u64) {
        self.in_zone += blocks;
        if let Kind::Sequential = self.kind {
            self.index = (self.index + blocks).min(self.blocks);
            self.hole_next = (self.hole_next + blocks * self.bs).min(self.blocks * self.bs);
        }
        if self.in_run > 0 && !self.repeat {
            self.last += blocks * self.bs;
        }
    }

    #[inline]
    pub fn next_offset(&mut self) -> u64 {
        if self.hole != 0 {
            return self.next_with_hole();
        }
        if self.zone > 0 {
            if self.in_zone >= self.zone {
                self.index += self.zone_skip;
                self.in_zone = 0;
            }
            self.in_zone += 1;
        }
        if self.run > 1 {
            if self.in_run > 0 {
                self.in_run = (self.in_run + 1) % self.run;
                if !self.repeat {
                    self.last = (self.last + self.bs) % (self.blocks * self.bs);
                }
                return self.last;
            }
            self.in_run = 1;
            self.last = self.draw_offset();
            return self.last;
        }
        self.draw_offset()
    }

    /// As fio: past the end, a forward job starts again at the file's
    /// start and a backward one `hole` bytes before its end.
    fn next_with_hole(&mut self) -> u64 {
        let size = (self.blocks * self.bs) as i64;
        let off = self.hole_next;
        let mut next = off as i64 + self.bs as i64 + self.hole;
        if next < 0 || next + self.bs as i64 > size {
            next = if self.hole > 0 { 0 } else { size + self.hole };
            if next < 0 || next + self.bs as i64 > size {
                next = 0;
            }
        }
        self.hole_next = next as u64;
        off
    }

    #[inline]
    fn draw_offset(&mut self) -> u64 {
        if self.index >= self.blocks {
            self.index = 0;
            self.pass += 1;
            match &mut self.kind {
                Kind::Random { seed, perm } => *perm = Permutation::new(self.blocks, seed.wrapping_add(self.pass)),
                Kind::Skewed { taken: Some(taken), .. } => taken.fill(0),
                _ => {}
            }
        }
        let block = match &mut self.kind {
            Kind::Sequential => self.index,
            Kind::Random { perm, .. } => perm.get(self.index),
            Kind::Uniform(rng) => rng.below(self.blocks),
            Kind::Skewed { draw, taken } => {
                let b = draw.next();
                match taken {
                    Some(taken) => take_free(taken, b, self.blocks),
                    None => b,
                }
            }
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

    /// The next I/O's size in direction `dir` (0 read, 1 write, 2 trim).
    #[inline]
    pub fn next_size(&mut self, dir: usize) -> u64 {
        let (bs, sizes) = self.sizes.of_direction(dir, self.bs);
        match sizes {
            BlockSizes::Fixed | BlockSizes::PerDirection(_) => bs,
            BlockSizes::Range { min, max } => min * (1 + self.rng.below(max / min)),
            BlockSizes::Split(split) => {
                let mut pick = self.rng.below(100) as u32;
                for &(size, pct) in split {
                    if pick < pct {
                        return size;
                    }
                    pick -= pct;
                }
                split.last().map_or(bs, |&(size, _)| size)
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
        let drawn: Vec<u64> = (0..4000).map(|_| r.next_size(0)).collect();
        assert!(drawn.iter().all(|&s| s % 512 == 0 && (512..=4096).contains(&s)));
        assert!(drawn.contains(&512) && drawn.contains(&4096));
        let mut sp = Sizes::new(&BlockSizes::Split(vec![(4096, 10), (65536, 90)]), 65536, 7);
        let small = (0..10_000).filter(|_| sp.next_size(0) == 4096).count();
        assert!((800..1200).contains(&small), "{small} of 10,000 at 10%");
    }

    #[test]
    fn sequential_wraps() {
        let mut o = Offsets::new(3 * 1024 + 100, 1024, false, false, 0);
        let v: Vec<_> = (0..5).map(|_| o.next_offset()).collect();
        assert_eq!(v, [0, 1024, 2048, 0, 1024]);
    }

    use dc_jobfile::{RandomDistribution as D, Zone};

    fn pct(access_pct: u32, range: u32) -> Zone {
        Zone { access_pct, size: ZoneSize::Percent(range) }
    }

    fn skewed(dist: D, norandommap: bool, blocks: u64) -> Offsets {
        Offsets::skewed(blocks * 4096, 4096, norandommap, 5, &dist, false)
    }

    /// The share of `n` picks that land on the `top` most picked blocks.
    fn hottest_share(o: &mut Offsets, n: usize, top: usize) -> f64 {
        let mut counts = std::collections::HashMap::<u64, usize>::new();
        for _ in 0..n {
            *counts.entry(o.next_offset()).or_default() += 1;
        }
        let mut c: Vec<usize> = counts.into_values().collect();
        c.sort_unstable_by(|a, b| b.cmp(a));
        c.iter().take(top).sum::<usize>() as f64 / n as f64
    }

    #[test]
    fn skewed_distributions_concentrate_as_their_parameters_say() {
        let blocks = 10_000;
        // Uniform picks put ~1% of 100,000 picks on the hottest 1% (a little
        // more: the hottest of random counts).
        let uniform = hottest_share(&mut Offsets::new(blocks * 4096, 4096, true, true, 5), 100_000, 100);
        assert!(uniform < 0.02, "{uniform}");
        let zipf = hottest_share(&mut skewed(D::Zipf { theta: 1.2, center: None }, true, blocks), 100_000, 100);
        assert!(zipf > 0.5, "zipf:1.2 puts {zipf} of the picks on 1% of the blocks");
        // fio's Pareto h: h of the accesses to 1 - h of the blocks.
        let pareto = hottest_share(&mut skewed(D::Pareto { h: 0.9, center: None }, true, blocks), 100_000, 1_000);
        assert!((0.8..0.97).contains(&pareto), "pareto:0.9 puts {pareto} on 10% of the blocks");
        // A normal with a deviation of 1% of the file: ~95% within 4% of it.
        let normal = hottest_share(&mut skewed(D::Normal { dev_pct: 1.0, center: None }, true, blocks), 100_000, 400);
        assert!(normal > 0.9, "normal:1 puts {normal} on 4% of the blocks");
    }

    #[test]
    fn zones_get_their_share_of_the_accesses_in_order() {
        let mut o = skewed(D::Zoned(vec![pct(50, 5), pct(30, 15), pct(20, 80)]), true, 10_000);
        let (mut first, mut second, n) = (0, 0, 100_000);
        for _ in 0..n {
            let b = o.next_offset() / 4096;
            assert!(b < 10_000);
            if b < 500 {
                first += 1;
            } else if b < 2_000 {
                second += 1;
            }
        }
        assert!((48_000..52_000).contains(&first), "{first} of {n} in the first 5%");
        assert!((28_000..32_000).contains(&second), "{second} of {n} in the next 15%");
    }

    #[test]
    fn with_the_random_map_a_skewed_pass_still_visits_every_block_once() {
        let dists = [
            D::Zipf { theta: 1.2, center: None },
            D::Pareto { h: 0.5, center: Some(0.5) },
            D::Normal { dev_pct: 5.0, center: None },
            D::Zoned(vec![pct(90, 10), pct(10, 90)]),
        ];
        for dist in dists {
            let mut o = skewed(dist.clone(), false, 1000);
            for _pass in 0..2 {
                let mut seen = vec![false; 1000];
                for _ in 0..1000 {
                    let b = (o.next_offset() / 4096) as usize;
                    assert!(!seen[b], "{dist:?}: block {b} twice in a pass");
                    seen[b] = true;
                }
            }
        }
    }

    #[test]
    fn a_sequence_repeats_or_moves_on_by_its_length() {
        let job = |stride: bool| {
            let mut o = Offsets::skewed(48 * 1024, 4096, false, 1, &D::Sequence(vec![2, 0, 1]), stride);
            (0..6).map(|_| o.next_offset() / 4096).collect::<Vec<_>>()
        };
        assert_eq!(job(false), [2, 0, 1, 2, 0, 1]);
        assert_eq!(job(true), [2, 0, 1, 5, 3, 4]);
    }

    #[test]
    fn holes_skip_forward_and_backward_as_fio_does() {
        let take = |hole: i64| {
            let mut o = Offsets::new(8 * 4096, 4096, false, false, 0).with_modifier(hole, 1, false);
            (0..6).map(|_| o.next_offset() / 4096).collect::<Vec<_>>()
        };
        assert_eq!(take(4096), [0, 2, 4, 6, 0, 2]);
        // Backwards (rw=read:-8k with bs=4k): 0, then from the end down.
        assert_eq!(take(-8192), [0, 6, 5, 4, 3, 2]);
    }

    #[test]
    fn strided_zones_skip_after_each_zone_and_wrap() {
        let mut o = Offsets::new(10 * 4096, 4096, false, false, 0).with_zones(2 * 4096, 3 * 4096);
        let v: Vec<_> = (0..7).map(|_| o.next_offset() / 4096).collect();
        assert_eq!(v, [0, 1, 5, 6, 0, 1, 5]);
    }

    #[test]
    fn runs_continue_or_repeat_a_random_offset() {
        let runs = |repeat: bool| {
            let mut o = Offsets::new(1 << 30, 4096, true, true, 3).with_modifier(0, 4, repeat);
            (0..8).map(|_| o.next_offset() / 4096).collect::<Vec<_>>()
        };
        let v = runs(false);
        assert!(v[1] == v[0] + 1 && v[2] == v[0] + 2 && v[3] == v[0] + 3 && v[4] != v[3] + 1, "{v:?}");
        assert_eq!(v[5..8], [v[4] + 1, v[4] + 2, v[4] + 3]);
        let v = runs(true);
        assert!(v[..4].iter().all(|&b| b == v[0]) && v[4..].iter().all(|&b| b == v[4]) && v[0] != v[4], "{v:?}");
    }

    #[test]
    fn uniform_stays_in_range() {
        let mut o = Offsets::new(10 * 512, 512, true, true, 9);
        assert!((0..1000).all(|_| o.next_offset() < 10 * 512));
    }
}
