//! Holding I/O back, as fio does: rate caps per direction (`rate`,
//! `rate_iops`; spaced evenly or as Poisson arrivals), rate floors a job
//! fails below (`rate_min`, `rate_iops_min` over `rate_cycle`), and flow
//! control between jobs (`flow` weights within a `flow_id`).

use crate::engine::Dir;
use crate::random::SplitMix;
use dc_jobfile::JobSpec;
use rand_distr::{Distribution, Exp};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A job ahead of its flow share with `flow_sleep=0` waits this long: fio
/// spins there, which on a small machine starves the jobs it waits for.
const FLOW_POLL: Duration = Duration::from_micros(100);

pub struct Pace {
    think: Option<Think>,
    /// Read, write, trim: trims have no rate options (`None`, floors of 0).
    caps: [Option<Cap>; 3],
    floors: [Floor; 3],
    flow: Option<Flow>,
    flow_sleep: Duration,
}

/// `thinktime`: after every `blocks` I/Os, once the last of them
/// completed, nothing is issued for `pause` (`spin` of it busy).
struct Think {
    pause: Duration,
    spin: Duration,
    blocks: u32,
    issued: u32,
    /// An I/O ending a run of `blocks` is in flight: wait for it.
    pending: bool,
    until: Option<Instant>,
}

/// One direction's cap: its next I/O waits until `next`.
struct Cap {
    bytes_per_s: u64,
    ios_per_s: u64,
    next: Option<Instant>,
    poisson: Option<SplitMix>,
}

/// One direction's floor, checked every `cycle`.
struct Floor {
    bytes_per_s: u64,
    ios_per_s: u64,
    cycle: Duration,
    since: Option<Instant>,
    bytes: u64,
    ios: u64,
}

impl Pace {
    /// Joins the job's flow group: called for every job before any runs,
    /// so each one's share is of the whole group's weight from the start.
    pub fn new(job: &JobSpec, seed: u64) -> Pace {
        let cap = |d: usize| {
            (job.rate[d] > 0 || job.rate_iops[d] > 0).then(|| Cap {
                bytes_per_s: job.rate[d],
                ios_per_s: job.rate_iops[d],
                next: None,
                poisson: job.rate_poisson.then(|| SplitMix::new(seed ^ 0x9015_5011 ^ d as u64)),
            })
        };
        let floor = |d: usize| Floor {
            bytes_per_s: job.rate_min.get(d).copied().unwrap_or(0),
            ios_per_s: job.rate_iops_min.get(d).copied().unwrap_or(0),
            cycle: job.rate_cycle,
            since: None,
            bytes: 0,
            ios: 0,
        };
        let think = (!job.thinktime.is_zero()).then(|| Think {
            pause: job.thinktime,
            spin: job.thinktime_spin.min(job.thinktime),
            blocks: job.thinktime_blocks.max(1),
            issued: 0,
            pending: false,
            until: None,
        });
        Pace {
            think,
            caps: [cap(0), cap(1), None],
            floors: [floor(0), floor(1), floor(2)],
            flow: (job.flow > 0).then(|| Flow::join(job.flow_id, job.flow)),
            flow_sleep: if job.flow_sleep.is_zero() { FLOW_POLL } else { job.flow_sleep },
        }
    }

    /// How long the next I/O of `dir` must wait; `None`: issue it now.
    pub fn hold(&self, dir: Dir, now: Instant) -> Option<Duration> {
        if let Some(t) = &self.think {
            if t.pending {
                // Reap the I/O the pause follows first.
                return Some(Duration::from_micros(1));
            }
            if let Some(until) = t.until.filter(|&u| u > now) {
                // The spinning part is waited out busily, as fio spins.
                let sleep_until = until - t.spin;
                if now >= sleep_until {
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    return None;
                }
                return Some(sleep_until - now);
            }
        }
        if self.flow.as_ref().is_some_and(Flow::ahead) {
            return Some(self.flow_sleep);
        }
        let next = self.caps[dir as usize].as_ref()?.next?;
        (next > now).then(|| next - now)
    }

    /// An I/O of `bytes` of `dir` was issued at `now`.
    pub fn issued(&mut self, dir: Dir, bytes: u64, now: Instant) {
        if let Some(f) = &mut self.flow {
            f.count();
        }
        if let Some(t) = &mut self.think {
            t.issued += 1;
            if t.issued % t.blocks == 0 {
                t.pending = true;
            }
        }
        let Some(cap) = &mut self.caps[dir as usize] else { return };
        // The time this I/O takes at the cap: the larger of its two shares.
        let by_bytes = if cap.bytes_per_s > 0 { bytes as f64 / cap.bytes_per_s as f64 } else { 0.0 };
        let by_ios = if cap.ios_per_s > 0 { 1.0 / cap.ios_per_s as f64 } else { 0.0 };
        let mean = by_bytes.max(by_ios);
        let gap = match &mut cap.poisson {
            Some(rng) => Exp::new(1.0 / mean).map_or(mean, |e| e.sample(rng)),
            None => mean,
        };
        // From when this I/O was due, so the rate holds on average; a job
        // that fell behind (a slow device) catches up, as fio's does.
        let due = cap.next.unwrap_or(now);
        cap.next = Some(due + Duration::from_secs_f64(gap));
    }

    /// An I/O of `bytes` of `dir` completed at `now`; `Err` when a cycle
    /// ended below a floor (floors count `measured` I/O only, not a ramp).
    pub fn completed(&mut self, dir: Dir, bytes: u64, now: Instant, measured: bool) -> Result<(), String> {
        if let Some(t) = self.think.as_mut().filter(|t| t.pending) {
            (t.pending, t.until) = (false, Some(now + t.pause));
        }
        let f = &mut self.floors[dir as usize];
        if !measured || (f.bytes_per_s == 0 && f.ios_per_s == 0) {
            return Ok(());
        }
        let since = *f.since.get_or_insert(now);
        f.bytes += bytes;
        f.ios += 1;
        let spent = now - since;
        if spent < f.cycle {
            return Ok(());
        }
        let secs = spent.as_secs_f64();
        let (bw, iops) = (f.bytes as f64 / secs, f.ios as f64 / secs);
        (f.since, f.bytes, f.ios) = (Some(now), 0, 0);
        let what = dir.name();
        if f.bytes_per_s > 0 && bw < f.bytes_per_s as f64 {
            return Err(format!(
                "{what} bandwidth {bw:.0} bytes/s over the last {} ms is below rate_min={}",
                spent.as_millis(),
                f.bytes_per_s
            ));
        }
        if f.ios_per_s > 0 && iops < f.ios_per_s as f64 {
            return Err(format!(
                "{what} {iops:.0} IOPS over the last {} ms is below rate_iops_min={}",
                spent.as_millis(),
                f.ios_per_s
            ));
        }
        Ok(())
    }
}

/// A job's place in its flow group: the group counts every member's I/Os,
/// and a job whose part of that count is above its part of the weights
/// waits. A job leaving takes its weight and its count with it, so the
/// others are not held to a ratio with a job that has ended.
struct Flow {
    group: Arc<FlowGroup>,
    weight: u64,
    done: u64,
}

#[derive(Default)]
struct FlowGroup {
    weight: AtomicU64,
    done: AtomicU64,
}

static FLOW_GROUPS: Mutex<BTreeMap<u32, Arc<FlowGroup>>> = Mutex::new(BTreeMap::new());

impl Flow {
    fn join(id: u32, weight: u32) -> Flow {
        let group = FLOW_GROUPS.lock().unwrap_or_else(|e| e.into_inner()).entry(id).or_default().clone();
        group.weight.fetch_add(u64::from(weight), Ordering::Relaxed);
        Flow { group, weight: u64::from(weight), done: 0 }
    }

    fn ahead(&self) -> bool {
        let total = self.group.done.load(Ordering::Relaxed);
        let weights = self.group.weight.load(Ordering::Relaxed);
        // done / total > weight / weights, without division.
        total > 0 && u128::from(self.done) * u128::from(weights) > u128::from(self.weight) * u128::from(total)
    }

    fn count(&mut self) {
        self.done += 1;
        self.group.done.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        self.group.weight.fetch_sub(self.weight, Ordering::Relaxed);
        self.group.done.fetch_sub(self.done, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job as the command line gives it (`--name=t` and `args`).
    fn job(args: &[&str]) -> JobSpec {
        let all: Vec<String> = ["--name=t", "--filename=f"].iter().chain(args).map(|a| a.to_string()).collect();
        let raw: Vec<_> = all.iter().enumerate().map(|(i, a)| dc_jobfile::cmdline_option(a, i + 1).unwrap()).collect();
        dc_jobfile::resolve(&[], &raw, false).unwrap().jobs.remove(0)
    }

    #[test]
    fn a_capped_direction_is_spaced_at_its_rate() {
        let mut p = Pace::new(&job(&["--rate=1000000"]), 1);
        let t0 = Instant::now();
        assert_eq!(p.hold(Dir::Write, t0), None, "the first I/O goes at once");
        p.issued(Dir::Write, 100_000, t0);
        assert_eq!(p.hold(Dir::Write, t0), Some(Duration::from_millis(100)), "100 KB at 1 MB/s");
        assert_eq!(p.hold(Dir::Read, t0), None, "each direction has its own cap");
        let mut p = Pace::new(&job(&["--rate_iops=50", "--rate_process=poisson"]), 1);
        let mut at = t0;
        for _ in 0..5000 {
            p.issued(Dir::Read, 4096, at);
            at += p.hold(Dir::Read, at).unwrap_or_default();
        }
        let mean = (at - t0).as_secs_f64() / 5000.0;
        assert!((0.018..0.022).contains(&mean), "Poisson gaps average 1/50 s: {mean}");
    }

    #[test]
    fn a_floor_fails_a_cycle_below_it() {
        let mut p = Pace::new(&job(&["--rate_min=,1000000"]), 1);
        let t0 = Instant::now();
        assert!(p.completed(Dir::Write, 4096, t0, true).is_ok());
        let e = p.completed(Dir::Write, 4096, t0 + Duration::from_secs(1), true).unwrap_err();
        assert!(e.contains("below rate_min=1000000"), "{e}");
        assert!(p.completed(Dir::Read, 1, t0 + Duration::from_secs(9), true).is_ok(), "reads have no floor");
    }

    #[test]
    fn flow_members_run_in_the_ratio_of_their_weights() {
        let (a, b) = (job(&["--flow=1", "--flow_id=77"]), job(&["--flow=3", "--flow_id=77"]));
        let (mut a, mut b) = (Pace::new(&a, 1), Pace::new(&b, 2));
        let now = Instant::now();
        let (mut na, mut nb) = (0, 0);
        for _ in 0..4000 {
            if a.hold(Dir::Read, now).is_none() {
                a.issued(Dir::Read, 4096, now);
                na += 1;
            }
            if b.hold(Dir::Read, now).is_none() {
                b.issued(Dir::Read, 4096, now);
                nb += 1;
            }
        }
        let ratio = f64::from(nb) / f64::from(na);
        assert!((2.9..3.1).contains(&ratio), "{nb} : {na}");
        drop(b);
        assert!(a.hold(Dir::Read, now).is_none(), "alone in the group, a job is never ahead");
    }
}
