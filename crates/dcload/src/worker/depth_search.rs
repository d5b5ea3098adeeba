//! fio's `latency_target`: the job looks for the deepest queue at which its
//! I/Os still complete within a latency, as fio does. It starts at depth 1
//! and doubles while each window of `latency_window` meets the target for
//! `latency_percentile` percent of its I/Os; a failed window (or, at 100%,
//! a single slow I/O) bisects back down between the last good and bad
//! depths. Each change drains the queue first, so a window measures only
//! its own depth. Once a depth repeats, the statistics restart and one last
//! window is run at it (unless `latency_run` keeps searching).

use dc_jobfile::LatencyTarget;
use std::time::{Duration, Instant};

/// What the loop does after a verdict.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Carry on at [`DepthSearch::depth`].
    Go,
    /// Let what is in flight complete before issuing at the new depth.
    Drain,
    /// The depth has settled: drain, restart the statistics, run one
    /// more window at it.
    Settle,
    /// The last window at the settled depth is over: the job ends.
    Done,
    /// An I/O missed the target at depth 1: nothing can meet it.
    Unreachable,
}

pub(super) struct DepthSearch {
    target_ns: u64,
    window: Duration,
    percentile: f64,
    keep_running: bool,
    /// The job's `iodepth`: the search never goes above it.
    max: usize,
    /// The depth I/Os are issued at now.
    depth: usize,
    /// The deepest depth that met the target, and the shallowest that did not.
    low: usize,
    high: usize,
    /// Successes in a row one below `high`, where doubling cannot go on.
    stable: u32,
    window_start: Instant,
    /// Completions in this window, and how many missed the target.
    completed: u64,
    missed: u64,
    /// The statistics have been restarted at the settled depth.
    final_window: bool,
    /// Issuing waits until the queue has drained.
    draining: bool,
}

impl DepthSearch {
    /// `None` without `latency_target`: the job runs at its `iodepth`.
    pub(super) fn new(lt: &LatencyTarget, iodepth: usize, now: Instant) -> Option<DepthSearch> {
        let target = lt.target?;
        Some(DepthSearch {
            target_ns: target.as_nanos() as u64,
            window: lt.window,
            percentile: lt.percentile,
            keep_running: lt.run,
            max: iodepth.max(1),
            depth: 1,
            low: 1,
            high: iodepth.max(1),
            stable: 0,
            window_start: now,
            completed: 0,
            missed: 0,
            final_window: false,
            draining: false,
        })
    }

    /// How many I/Os may be in flight now (0 while draining).
    pub(super) fn limit(&self) -> usize {
        if self.draining {
            0
        } else {
            self.depth
        }
    }

    /// The depth the search is at (fio's `latency_depth` in the report).
    pub(super) fn depth(&self) -> usize {
        self.depth
    }

    /// The queue is empty: a drain is over and a new window starts.
    pub(super) fn drained(&mut self, now: Instant) {
        if self.draining {
            self.draining = false;
            self.new_window(now);
        }
    }

    /// One completed read or write and its latency.
    pub(super) fn completed(&mut self, lat_ns: u64) -> Step {
        self.completed += 1;
        if lat_ns <= self.target_ns {
            return Step::Go;
        }
        if self.percentile < 100.0 {
            self.missed += 1;
            return Step::Go;
        }
        if self.depth == 1 {
            return Step::Unreachable;
        }
        self.lower()
    }

    /// After each round of completions: judges the window once it is over.
    pub(super) fn check(&mut self, now: Instant) -> Step {
        if self.draining || now.duration_since(self.window_start) < self.window || self.completed == 0 {
            return Step::Go;
        }
        let met = 100.0 * (self.completed - self.missed) as f64 / self.completed as f64;
        if met >= self.percentile {
            return self.raise(now);
        }
        if self.depth == 1 {
            // Nothing shallower to try: the next window tries depth 1 again.
            self.new_window(now);
            return Step::Go;
        }
        self.lower()
    }

    fn lower(&mut self) -> Step {
        self.high = self.depth;
        if self.depth == self.low {
            self.low = self.low.saturating_sub(1).max(1);
        }
        self.depth = ((self.depth + self.low) / 2).max(1);
        self.stable = 0;
        self.draining = true;
        Step::Drain
    }

    fn raise(&mut self, now: Instant) -> Step {
        let was = self.depth;
        self.low = self.depth;
        if self.depth + 1 == self.high {
            // Bisecting cannot go higher from here: after three good windows
            // in a row, try one deeper.
            self.stable += 1;
            if self.stable >= 3 {
                self.high += 1;
                self.stable = 0;
            }
        }
        // Double until a depth fails; then bisect below it.
        self.depth = if self.high != self.max { (self.depth + self.high) / 2 } else { self.depth * 2 };
        self.depth = self.depth.min(self.max);
        if !self.keep_running && self.depth == was {
            if self.final_window {
                return Step::Done;
            }
            self.final_window = true;
            self.draining = true;
            return Step::Settle;
        }
        self.new_window(now);
        Step::Go
    }

    fn new_window(&mut self, now: Instant) {
        self.window_start = now;
        self.completed = 0;
        self.missed = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(percentile: f64, iodepth: usize) -> (DepthSearch, Instant) {
        let lt = LatencyTarget {
            target: Some(Duration::from_micros(100)),
            window: Duration::from_millis(10),
            percentile,
            run: false,
        };
        let t = Instant::now();
        (DepthSearch::new(&lt, iodepth, t).unwrap(), t)
    }

    /// A device whose latency grows with depth: 30 us per I/O in flight.
    /// The target (100 us) holds up to depth 3.
    #[test]
    fn finds_the_deepest_depth_within_the_target_and_ends_after_a_last_window() {
        let (mut s, mut t) = search(100.0, 64);
        let mut depths = vec![];
        for _ in 0..200 {
            let mut step = Step::Go;
            for _ in 0..10 {
                step = s.completed(30_000 * s.depth() as u64);
                if step != Step::Go {
                    break;
                }
            }
            assert_ne!(step, Step::Unreachable);
            t += Duration::from_millis(11);
            if step == Step::Go {
                step = s.check(t);
            }
            if step == Step::Done {
                break;
            }
            s.drained(t);
            depths.push(s.depth());
        }
        assert_eq!(s.depth(), 3, "depths tried: {depths:?}");
        assert_eq!(&depths[..2], &[2, 4], "doubles until a depth fails: {depths:?}");
    }

    #[test]
    fn a_slow_io_at_depth_one_cannot_meet_the_target() {
        let (mut s, _) = search(100.0, 8);
        assert_eq!(s.completed(50_000), Step::Go);
        assert_eq!(s.completed(500_000), Step::Unreachable);
    }

    /// Below 100%, slow I/Os only count: the window's share decides.
    #[test]
    fn below_100_percent_the_window_decides() {
        let (mut s, t) = search(90.0, 8);
        for k in 0..100 {
            assert_eq!(s.completed(if k % 20 == 0 { 1_000_000 } else { 10_000 }), Step::Go);
        }
        assert_eq!(s.check(t + Duration::from_millis(11)), Step::Go, "95% met: deeper");
        assert_eq!(s.depth(), 2);
        for k in 0..100 {
            s.completed(if k % 5 == 0 { 1_000_000 } else { 10_000 });
        }
        assert_eq!(s.check(t + Duration::from_millis(30)), Step::Drain, "80% met: shallower");
        assert_eq!((s.depth(), s.limit()), (1, 0));
    }
}
