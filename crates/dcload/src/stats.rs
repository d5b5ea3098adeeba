//! Latency and throughput statistics of one job instance, mergeable for
//! group reporting.
//!
//! Latencies go into HDR histograms for percentiles; exact min, max, mean and
//! standard deviation are kept beside them because fio reports those exactly.

use hdrhistogram::Histogram;

/// fio's `bw_avg_time`/`iops_avg_time`: the width of one bandwidth sample.
pub const SAMPLE_WINDOW_NS: u64 = 500_000_000;

/// Exact running summary of a series.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub n: u64,
    pub min: u64,
    pub max: u64,
    sum: f64,
    sumsq: f64,
}

impl Summary {
    #[inline]
    pub fn add(&mut self, v: u64) {
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        self.n += 1;
        let f = v as f64;
        self.sum += f;
        self.sumsq += f * f;
    }

    pub fn merge(&mut self, o: &Summary) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 || o.min < self.min {
            self.min = o.min;
        }
        self.max = self.max.max(o.max);
        self.n += o.n;
        self.sum += o.sum;
        self.sumsq += o.sumsq;
    }

    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }

    /// Sample standard deviation (n - 1), as fio reports it.
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let n = self.n as f64;
        ((self.sumsq - self.sum * self.sum / n) / (n - 1.0)).max(0.0).sqrt()
    }
}

/// One latency series: histogram plus exact summary, in nanoseconds.
#[derive(Debug, Clone)]
pub struct Latency {
    pub hist: Histogram<u64>,
    pub summary: Summary,
}

impl Latency {
    pub fn new() -> Latency {
        // 1 ns .. 1 hour at 3 significant digits: finer than fio's own buckets.
        let hist = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static histogram bounds are valid");
        Latency { hist, summary: Summary::default() }
    }

    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.summary.add(ns);
        // Values past the top are clamped rather than dropped: an I/O slower than an hour still counts.
        self.hist.saturating_record(ns.max(1));
    }

    pub fn merge(&mut self, o: &Latency) {
        self.summary.merge(&o.summary);
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.hist.add(&o.hist);
    }

    pub fn percentile(&self, p: f64) -> u64 {
        if self.summary.n == 0 {
            0
        } else {
            self.hist.value_at_quantile(p / 100.0)
        }
    }
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

/// Everything recorded for one direction (read or write).
#[derive(Debug, Clone, Default)]
pub struct DirStats {
    /// Submission latency (io_uring only; synchronous engines have none, as in fio).
    pub slat: Latency,
    /// Completion latency: submitted to completed (sync engines: the whole call).
    pub clat: Latency,
    /// Total latency: issued to completed.
    pub lat: Latency,
    pub bytes: u64,
    pub ios: u64,
    pub short_ios: u64,
    /// Bandwidth samples in KiB/s over `SAMPLE_WINDOW_NS` windows.
    pub bw_samples: Summary,
    pub iops_samples: Summary,
    win_start_ns: u64,
    win_bytes: u64,
    win_ios: u64,
}

impl DirStats {
    /// Account one completion `now_ns` after the statistics started.
    #[inline]
    pub fn complete(&mut self, now_ns: u64, bytes: u64, short: bool) {
        self.bytes += bytes;
        self.ios += 1;
        self.short_ios += u64::from(short);
        self.win_bytes += bytes;
        self.win_ios += 1;
        let elapsed = now_ns.saturating_sub(self.win_start_ns);
        if elapsed >= SAMPLE_WINDOW_NS {
            self.bw_samples.add(self.win_bytes * 1_000_000_000 / 1024 / elapsed);
            self.iops_samples.add(self.win_ios * 1_000_000_000 / elapsed);
            self.win_start_ns = now_ns;
            self.win_bytes = 0;
            self.win_ios = 0;
        }
    }

    pub fn merge(&mut self, o: &DirStats) {
        self.slat.merge(&o.slat);
        self.clat.merge(&o.clat);
        self.lat.merge(&o.lat);
        self.bytes += o.bytes;
        self.ios += o.ios;
        self.short_ios += o.short_ios;
        self.bw_samples.merge(&o.bw_samples);
        self.iops_samples.merge(&o.iops_samples);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_matches_definition() {
        let mut s = Summary::default();
        for v in [2, 4, 4, 4, 5, 5, 7, 9] {
            s.add(v);
        }
        assert_eq!((s.n, s.min, s.max), (8, 2, 9));
        assert!((s.mean() - 5.0).abs() < 1e-12);
        assert!((s.stddev() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn percentiles_within_histogram_precision() {
        let mut l = Latency::new();
        for v in 1..=100_000u64 {
            l.record(v * 1000);
        }
        let p99 = l.percentile(99.0) as f64;
        assert!((p99 / 99_000_000.0 - 1.0).abs() < 0.001, "{p99}");
        assert_eq!(l.summary.min, 1000);
        assert_eq!(l.summary.max, 100_000_000);
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = DirStats::default();
        let mut b = DirStats::default();
        a.lat.record(10);
        a.complete(1, 4096, false);
        b.lat.record(30);
        b.complete(1, 4096, true);
        a.merge(&b);
        assert_eq!((a.ios, a.bytes, a.short_ios), (2, 8192, 1));
        assert_eq!((a.lat.summary.min, a.lat.summary.max), (10, 30));
        assert_eq!(a.lat.hist.len(), 2);
    }

    #[test]
    fn bandwidth_samples_per_window() {
        let mut d = DirStats::default();
        // 1 MiB every 100 ms for 2 s: 10 MiB/s = 10240 KiB/s in every window.
        for i in 1..=20u64 {
            d.complete(i * 100_000_000, 1 << 20, false);
        }
        assert_eq!(d.bw_samples.n, 4);
        assert_eq!((d.bw_samples.min, d.bw_samples.max), (10240, 10240));
    }
}
