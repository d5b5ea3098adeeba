//! `sprandom=1`'s write order (fio's SPRandom): an SSD brought in one pass
//! to the state a long random write workload leaves it in.
//!
//! In that steady state a greedy garbage collector sees blocks of every
//! validity from full down to what it collects, and the share of the
//! device holding blocks of validity `v` goes as `1/v` (Desnoyers, "Analytic
//! Models of SSD Write Performance", 2012). The device is written as
//! `regions` equal regions, in order, each once with every logical block
//! in a random order (each block once over the job), and each region's
//! blocks are written again, in part, at the start of the next region: a
//! share `1 - v` of them, so the region is left with validity `v` once the
//! flash is full. Over-provisioning `op` sets the validity the collector
//! works at, `1 - 1/waf` with `waf = 0.5/op + 0.7`, and the job writes the
//! device's physical size, `(1 + op)` times its logical size.
//!
//! With a write cache (`spr_cs`), the overwrites of a region are put off
//! to the end of the next one, so they do not land while the region's
//! data may still be in the cache.

use crate::offsets::Offsets;
use crate::random::SplitMix;
use dc_jobfile::SpRandom;
use std::collections::VecDeque;

/// Overwrite shares are drawn in 1/10000ths, as fio draws them.
const PRECISION: u64 = 10_000;

/// What a job of `sprandom=1` writes, worked out before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The bytes the job writes: the device's physical size, in whole
    /// blocks.
    pub physical: u64,
    /// Writes per region.
    region_writes: u64,
    /// Per region, the share of its writes written again, in 1/10000ths.
    overwrite: Vec<u32>,
}

impl Plan {
    /// The plan for `logical` bytes written in blocks of `bs`; `Err` says
    /// why the options cannot work for that span.
    pub fn new(spec: &SpRandom, logical: u64, bs: u64) -> Result<Plan, String> {
        let op = spec.over_provisioning;
        let physical = logical + (logical as f64 * op).ceil() as u64;
        let physical = physical - physical % bs;
        let regions = u64::from(spec.regions);
        let region_bytes = physical / regions;
        if region_bytes < bs {
            return Err(format!(
                "sprandom: {regions} regions of {physical} bytes leave less than one block (bs={bs}) per region: \
                 lower spr_num_regions, or write more (size)"
            ));
        }
        if spec.cache_size > region_bytes {
            return Err(format!(
                "sprandom: spr_cs={} is larger than a region ({region_bytes} bytes, {physical} bytes in {regions} \
                 regions): lower spr_num_regions to {} or fewer, or spr_cs",
                spec.cache_size,
                (physical / spec.cache_size.max(1)).max(1)
            ));
        }
        let overwrite =
            validity(spec.regions as usize, op).iter().map(|v| ((1.0 - v) * PRECISION as f64).round() as u32).collect();
        Ok(Plan { physical, region_writes: region_bytes / bs, overwrite })
    }
}

/// The validity each region is left with, last region first: equal steps
/// of validity from 1 down to the collector's, each taking the share `1/v`
/// of the device, then read off at equal shares of the device.
fn validity(regions: usize, op: f64) -> Vec<f64> {
    let waf = 0.5 / op + 0.7;
    let collected = 1.0 - 1.0 / waf;
    let steps = linspace(1.0, collected, regions);
    let mut at = Vec::with_capacity(regions);
    let mut share = 0.0;
    for v in &steps {
        share += 1.0 / v;
        at.push(share);
    }
    let mut resampled: Vec<f64> =
        linspace(at[0], at[regions - 1], regions).iter().map(|&x| interpolate(x, &at, &steps)).collect();
    resampled.reverse();
    resampled
}

/// `n` values from `start` to `end`, both included (`start` alone for 1).
fn linspace(start: f64, end: f64, n: usize) -> Vec<f64> {
    if n == 1 {
        return vec![start];
    }
    let step = (end - start) / (n - 1) as f64;
    (0..n).map(|i| start + i as f64 * step).collect()
}

/// `ys` at `x` on the line through the points `(xs, ys)` (`xs` rising),
/// the end values beyond the ends.
fn interpolate(x: f64, xs: &[f64], ys: &[f64]) -> f64 {
    let last = xs.len() - 1;
    if x <= xs[0] {
        return ys[0];
    }
    if x >= xs[last] {
        return ys[last];
    }
    let i = xs.partition_point(|&p| p <= x).saturating_sub(1).min(last - 1);
    let (x1, x2) = (xs[i], xs[i + 1]);
    if (x2 - x1).abs() < 1e-9 {
        return ys[i];
    }
    ys[i] + (ys[i + 1] - ys[i]) * (x - x1) / (x2 - x1)
}

/// The offsets of a job of `sprandom=1`, in order.
pub struct SpRandomWrites {
    plan: Plan,
    /// Every block once, in a random order.
    order: Offsets,
    undrawn: u64,
    roll: SplitMix,
    cache: bool,
    /// Overwrites due now, and those picked in the current region, due at
    /// the start (or, with a cache, the end) of the next.
    due: VecDeque<u64>,
    picked: Vec<u64>,
    /// Overwrites picked, per phase (regions alternate phases).
    picked_count: [u64; 2],
    phase: usize,
    region: u32,
    writes_left: u64,
}

impl SpRandomWrites {
    /// Over `logical` bytes from the span's start in blocks of `bs`.
    pub fn new(spec: &SpRandom, plan: Plan, (logical, bs): (u64, u64), seed: u64) -> SpRandomWrites {
        let order = Offsets::new(logical, bs, true, false, seed);
        let undrawn = order.blocks();
        let writes_left = plan.region_writes;
        SpRandomWrites {
            plan,
            order,
            undrawn,
            roll: SplitMix::new(seed ^ 0x5e_ed5b),
            cache: spec.cache_size > 0,
            due: VecDeque::new(),
            picked: Vec::new(),
            picked_count: [0; 2],
            phase: 0,
            region: 0,
            writes_left,
        }
    }

    /// The bytes the job writes (the plan's physical size).
    pub fn physical(&self) -> u64 {
        self.plan.physical
    }

    /// The next offset to write; `None` once the last region is written or
    /// every block has been drawn (the job is done).
    pub fn next_offset(&mut self) -> Option<u64> {
        if !self.cache {
            if let Some(off) = self.due.pop_front() {
                self.maybe_pick(off);
                return Some(off);
            }
        }
        if self.writes_left == 0 {
            if self.cache {
                if let Some(off) = self.due.pop_front() {
                    self.maybe_pick(off);
                    return Some(off);
                }
            }
            if self.region as usize >= self.plan.overwrite.len() {
                return None;
            }
            self.picked_count[self.phase] = 0;
            self.region += 1;
            self.phase ^= 1;
            // The overwrites picked for this region count among its writes.
            self.writes_left = self.plan.region_writes.saturating_sub(self.picked_count[self.phase]);
            self.due.extend(self.picked.drain(..));
        }
        if self.undrawn == 0 {
            // Every block drawn: with a cache, the put-off overwrites still go.
            return if self.cache { self.due.pop_front() } else { None };
        }
        self.undrawn -= 1;
        let off = self.order.next_offset();
        self.writes_left = self.writes_left.saturating_sub(1);
        self.maybe_pick(off);
        Some(off)
    }

    /// Picks `off` to be written again, with the current region's share.
    fn maybe_pick(&mut self, off: u64) {
        // Past the last region (the overwrites of the last one being
        // written) the last region's share holds.
        let regions = self.plan.overwrite.len();
        let share = self.plan.overwrite[(self.region as usize).min(regions - 1)];
        if self.roll.below(PRECISION + 1) <= u64::from(share) {
            self.picked.push(off);
            self.picked_count[self.phase ^ 1] += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(op: f64, regions: u32, cache_size: u64) -> SpRandom {
        SpRandom { over_provisioning: op, regions, cache_size }
    }

    #[test]
    fn the_physical_size_is_the_logical_one_with_the_over_provisioning_in_whole_blocks() {
        let p = Plan::new(&spec(0.15, 10, 0), 100 << 20, 4096).unwrap();
        assert_eq!(p.physical, 120_586_240); // 100 MiB * 1.15 = 120,586,240, a multiple of 4096
        let p = Plan::new(&spec(0.07, 10, 0), 1 << 20, 4096).unwrap();
        assert_eq!(p.physical, 1_118_208); // 1,048,576 + ceil(73,400.32) = 1,121,977, down to a block
    }

    #[test]
    fn validity_falls_from_full_to_the_collectors_and_regions_are_overwritten_the_rest() {
        // op 0.15: waf = 0.5/0.15 + 0.7 = 4.033; the collector works at 1 - 1/waf = 0.752.
        let v = validity(100, 0.15);
        assert_eq!(v.len(), 100);
        assert!((v[99] - 1.0).abs() < 1e-9, "the last region stays whole: {}", v[99]);
        assert!((v[0] - 0.752).abs() < 0.001, "the first is left at the collector's validity: {}", v[0]);
        assert!(v.windows(2).all(|w| w[0] <= w[1]), "validity rises region by region");
        let p = Plan::new(&spec(0.15, 100, 0), 64 << 20, 4096).unwrap();
        assert_eq!(p.overwrite[0], 2479);
        assert_eq!(p.overwrite[99], 0);
    }

    #[test]
    fn a_cache_larger_than_a_region_or_a_region_smaller_than_a_block_is_refused() {
        let e = Plan::new(&spec(0.15, 100, 1 << 20), 64 << 20, 4096).unwrap_err();
        assert!(
            e.contains("spr_cs=1048576 is larger than a region") && e.contains("lower spr_num_regions to 73"),
            "{e}"
        );
        let e = Plan::new(&spec(0.15, 1000, 0), 1 << 20, 4096).unwrap_err();
        assert!(e.contains("less than one block"), "{e}");
    }

    /// Every block is written at least once and never outside the span; the
    /// writes add up to about the physical size, the overwrites falling
    /// region by region as the plan says.
    #[test]
    fn every_block_is_written_and_the_overwrites_follow_the_plan() {
        for cache in [0, 64 << 10] {
            let (logical, bs) = (16u64 << 20, 4096);
            let s = spec(0.15, 8, cache);
            let plan = Plan::new(&s, logical, bs).unwrap();
            let physical = plan.physical;
            let mut w = SpRandomWrites::new(&s, plan, (logical, bs), 7);
            let mut times = vec![0u32; (logical / bs) as usize];
            let mut n = 0u64;
            while let Some(off) = w.next_offset() {
                assert_eq!(off % bs, 0);
                times[(off / bs) as usize] += 1;
                n += 1;
                assert!(n < 2 * logical / bs, "the job ends");
            }
            assert!(times.iter().all(|&t| t >= 1), "cache {cache}: every block written");
            let written = n * bs;
            let ratio = written as f64 / physical as f64;
            assert!((0.9..=1.05).contains(&ratio), "cache {cache}: {written} bytes of a physical {physical}");
        }
    }
}
