//! Steady-state detection as fio does it: once per check interval (after
//! the steady-state ramp) the job's I/Os per second, bytes per second and
//! mean latency over the interval are sampled; once the window holds
//! `steadystate_duration` of samples, the criterion (the largest deviation
//! from the window's mean, or the least-squares slope, in percent of the
//! mean or absolute) is compared with the limit, and the job ends when it
//! is below it. Each job instance judges its own I/O.

use dc_jobfile::{SteadyMeasure, SteadyState};
use std::collections::VecDeque;
use std::time::Instant;

/// What the job did so far, as the detector samples it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    pub bytes: u64,
    pub ios: u64,
    /// Sum and count of total latencies, ns.
    pub lat_sum_ns: f64,
    pub lat_n: u64,
}

pub struct Steady {
    spec: SteadyState,
    /// `None` until the ramp is over; then the totals and time of the last sample.
    prev: Option<(Totals, Instant)>,
    ramp_end: Instant,
    /// The window's samples, oldest first: (iops, bytes/s, mean latency ns).
    window: VecDeque<(u64, u64, u64)>,
    report: SteadyReport,
}

/// The outcome, for the outputs (fio's `steadystate` object).
#[derive(Debug, Clone, Default)]
pub struct SteadyReport {
    /// fio's name of the criterion (`iops_slope:1.000000%`), and its parts.
    pub name: String,
    pub measure: &'static str,
    pub by_slope: bool,
    pub duration_s: u64,
    pub attained: bool,
    pub criterion: f64,
    pub percent: bool,
    pub max_deviation: f64,
    pub slope: f64,
    pub iops: Vec<u64>,
    pub bw: Vec<u64>,
}

impl SteadyReport {
    pub fn iops_mean(&self) -> u64 {
        mean(&self.iops) as u64
    }

    pub fn bw_mean(&self) -> u64 {
        mean(&self.bw) as u64
    }
}

fn mean(v: &[u64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<u64>() as f64 / v.len() as f64
    }
}

impl Steady {
    pub fn new(spec: &SteadyState, start: Instant) -> Steady {
        let report = SteadyReport {
            name: spec.name(),
            measure: spec.measure.name(),
            by_slope: spec.slope,
            duration_s: spec.duration.as_secs(),
            percent: spec.percent,
            ..SteadyReport::default()
        };
        Steady { spec: spec.clone(), prev: None, ramp_end: start + spec.ramp, window: VecDeque::new(), report }
    }

    /// The job's statistics restarted (at the end of `ramp_time`): count
    /// from zero again.
    pub fn restart(&mut self, now: Instant) {
        if self.prev.is_some() {
            self.prev = Some((Totals::default(), now));
        }
    }

    /// Takes a sample when an interval has passed; true once steady.
    pub fn check(&mut self, now: Instant, totals: Totals) -> bool {
        if now < self.ramp_end {
            return false;
        }
        let Some((prev, at)) = self.prev else {
            self.prev = Some((totals, now));
            return false;
        };
        let ms = now.duration_since(at).as_millis() as u64;
        if ms < self.spec.interval.as_millis() as u64 {
            return false;
        }
        let per_s = |d: u64| d * 1000 / ms.max(1);
        let lat_n = totals.lat_n - prev.lat_n;
        let lat = if lat_n == 0 { 0 } else { ((totals.lat_sum_ns - prev.lat_sum_ns) / lat_n as f64) as u64 };
        self.window.push_back((per_s(totals.ios - prev.ios), per_s(totals.bytes - prev.bytes), lat));
        if self.window.len() > self.spec.samples() {
            self.window.pop_front();
        }
        self.prev = Some((totals, now));
        self.report.iops = self.window.iter().map(|s| s.0).collect();
        self.report.bw = self.window.iter().map(|s| s.1).collect();
        if self.window.len() < self.spec.samples() {
            return false;
        }
        self.judge()
    }

    fn judge(&mut self) -> bool {
        let ys: Vec<f64> = self
            .window
            .iter()
            .map(|&(iops, bw, lat)| match self.spec.measure {
                SteadyMeasure::Iops => iops,
                SteadyMeasure::Bw => bw,
                SteadyMeasure::Lat => lat,
            } as f64)
            .collect();
        let n = ys.len() as f64;
        let mean = ys.iter().sum::<f64>() / n;
        let deviation = ys.iter().map(|y| (y - mean).abs()).fold(0.0, f64::max);
        // Least squares over x = 0, 1, ..., n-1 (fio takes the samples as evenly spaced).
        let x_mean = (n - 1.0) / 2.0;
        let sxx: f64 = (0..ys.len()).map(|i| (i as f64 - x_mean).powi(2)).sum();
        let sxy: f64 = ys.iter().enumerate().map(|(i, y)| (i as f64 - x_mean) * (y - mean)).sum();
        let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
        let value = if self.spec.slope { slope } else { deviation };
        let criterion = if self.spec.percent && mean > 0.0 { 100.0 * value / mean } else { value };
        self.report.max_deviation = deviation;
        self.report.slope = slope;
        self.report.criterion = criterion;
        self.report.attained = criterion.abs() < self.spec.limit;
        self.report.attained
    }

    pub fn report(&self) -> SteadyReport {
        self.report.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn spec(slope: bool, limit: f64) -> SteadyState {
        SteadyState {
            measure: SteadyMeasure::Iops,
            slope,
            limit,
            percent: true,
            duration: Duration::from_secs(4),
            ramp: Duration::ZERO,
            interval: Duration::from_secs(1),
        }
    }

    /// Feeds one sample per second of `rates` I/Os per second.
    fn feed(s: &mut Steady, t0: Instant, rates: &[u64]) -> Option<usize> {
        let mut totals = Totals::default();
        s.check(t0, totals);
        for (k, r) in rates.iter().enumerate() {
            totals.ios += r;
            if s.check(t0 + Duration::from_secs(k as u64 + 1), totals) {
                return Some(k + 1);
            }
        }
        None
    }

    #[test]
    fn a_settled_rate_is_steady_once_the_window_is_full() {
        let t0 = Instant::now();
        let mut s = Steady::new(&spec(false, 10.0), t0);
        // Rising, then within 10% of its mean for 4 samples.
        assert_eq!(feed(&mut s, t0, &[100, 300, 600, 1000, 1020, 990, 1010]), Some(7));
        let r = s.report();
        assert!(r.attained && r.iops == [1000, 1020, 990, 1010], "{r:?}");
        assert!((r.max_deviation - 15.0).abs() < 1e-9 && r.criterion < 10.0, "{r:?}");
    }

    #[test]
    fn a_slope_criterion_ignores_noise_around_a_flat_line_but_not_a_trend() {
        let t0 = Instant::now();
        let mut s = Steady::new(&spec(true, 1.0), t0);
        assert_eq!(feed(&mut s, t0, &[100, 200, 300, 400, 500, 600]), None, "a steady climb is no steady state");
        assert!(s.report().slope > 99.0);
        let mut s = Steady::new(&spec(true, 1.0), t0);
        assert_eq!(feed(&mut s, t0, &[1000, 1010, 1010, 1000]), Some(4), "zero slope");
    }
}
