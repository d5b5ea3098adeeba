//! What a write's buffer holds under fio's `buffer_compress_percentage` and
//! `dedupe_percentage`, refilled before every write as fio refills it:
//! storage that compresses or deduplicates sees the share of each it was
//! asked for. A buffer is generated from one seed, so a repeat is the same
//! seed again: the previous new buffer (`dedupe_mode=repeat`), or one of a
//! fixed working set (`working_set`; one set for every job with
//! `dedupe_global`). Each `buffer_compress_chunk` of a buffer is random
//! bytes, then `buffer_compress_percentage` percent zeros.

use crate::random::{fill_random, SplitMix};
use dc_jobfile::BufferContents;

pub struct Contents {
    compress: u32,
    chunk: usize,
    dedupe: u32,
    /// The working set's seeds (empty: repeat the previous new buffer).
    working_set: Vec<u64>,
    /// Rolls which writes repeat, and which of the set they repeat.
    roll: SplitMix,
    /// New buffers' seeds.
    fresh: SplitMix,
    previous: Option<u64>,
}

impl Contents {
    /// `None` when the job asks for neither: its buffers are filled once.
    /// `seed` is the job instance's; `global_seed` the run's, for
    /// `dedupe_global`; the working set covers its share of `size` bytes
    /// in blocks of `bs`.
    pub fn new(c: &BufferContents, seed: u64, global_seed: u64, size: u64, bs: u64) -> Option<Contents> {
        if !c.is_set() {
            return None;
        }
        let working_set = if c.working_set && c.dedupe_percentage > 0 {
            let blocks = (size * u64::from(c.working_set_percentage) / 100 / bs.max(1)).max(1);
            let mut seeds = SplitMix::new(if c.global { global_seed } else { seed } ^ 0xDED0_5E75);
            (0..blocks).map(|_| seeds.next_u64()).collect()
        } else {
            Vec::new()
        };
        Some(Contents {
            compress: c.compress_percentage,
            chunk: c.compress_chunk as usize,
            dedupe: c.dedupe_percentage,
            working_set,
            roll: SplitMix::new(seed ^ 0xD1CE),
            fresh: SplitMix::new(seed ^ 0xF4E5),
            previous: None,
        })
    }

    /// Fills `buf` for the next write.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let seed = self.next_seed();
        for (k, chunk) in buf.chunks_mut(self.chunk).enumerate() {
            let random = chunk.len() - chunk.len() * self.compress as usize / 100;
            fill_random(&mut chunk[..random], seed.wrapping_add(k as u64));
            chunk[random..].fill(0);
        }
    }

    fn next_seed(&mut self) -> u64 {
        let repeat = self.dedupe > 0 && self.roll.below(100) < u64::from(self.dedupe);
        match (repeat, self.previous) {
            (true, _) if !self.working_set.is_empty() => {
                self.working_set[self.roll.below(self.working_set.len() as u64) as usize]
            }
            (true, Some(previous)) => previous,
            _ => {
                let seed = self.fresh.next_u64();
                self.previous = Some(seed);
                seed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn contents(compress: u32, dedupe: u32, working_set: bool) -> BufferContents {
        BufferContents {
            compress_percentage: compress,
            compress_chunk: 512,
            dedupe_percentage: dedupe,
            working_set,
            working_set_percentage: 10,
            global: false,
        }
    }

    #[test]
    fn each_chunk_is_random_then_zeros() {
        let mut c = Contents::new(&contents(25, 0, false), 1, 2, 1 << 20, 4096).unwrap();
        let mut buf = vec![0xAAu8; 4096];
        c.fill(&mut buf);
        for chunk in buf.chunks(512) {
            assert!(chunk[384..].iter().all(|&b| b == 0), "the last quarter of each chunk is zeros");
            assert!(chunk[..384].iter().filter(|&&b| b == 0).count() < 16, "the rest is random");
        }
    }

    #[test]
    fn the_asked_share_of_writes_repeat() {
        for working_set in [false, true] {
            let mut c = Contents::new(&contents(0, 40, working_set), 7, 8, 4 << 20, 4096).unwrap();
            let mut seen = HashSet::new();
            let mut buf = vec![0u8; 4096];
            let n = 2000;
            for _ in 0..n {
                c.fill(&mut buf);
                seen.insert(buf.clone());
            }
            let repeats = n - seen.len();
            assert!((600..1000).contains(&repeats), "working_set={working_set}: {repeats} of {n} repeated");
            if working_set {
                // About 60% of writes are new; repeats come from 10% of 4 MiB in
                // 4 KiB blocks: 102 buffers. (The seeds are fixed: 1,307 here.)
                assert!(seen.len() <= 1300 + 102, "{} different buffers", seen.len());
            }
        }
        assert!(Contents::new(&contents(0, 0, false), 1, 1, 1, 1).is_none(), "nothing asked: filled once");
    }
}
