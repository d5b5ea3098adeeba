//! Turning a [`Report`] into output. Each format is an [`Exporter`]; the
//! command line picks one or more (`--output-format=normal,json`). The
//! terse lines are read from the JSON document, so they share its figures.

mod json;
mod terse;
mod text;

pub use json::JsonExporter;
pub use terse::TerseExporter;
pub use text::TextExporter;

use crate::results::{JobReport, Report};
use crate::stats::{DirStats, Latency};
use crate::worker::Depths;

pub trait Exporter {
    fn render(&self, report: &Report) -> String;
}

/// Derived throughput figures of one direction, computed as fio does.
pub struct Rates {
    pub runtime_ms: u64,
    pub bw_bytes: u64,
    pub bw_kib: u64,
    pub iops: f64,
}

pub fn rates(d: &DirStats, runtime_ns: u64) -> Rates {
    if runtime_ns == 0 || d.ios == 0 {
        return Rates { runtime_ms: runtime_ns / 1_000_000, bw_bytes: 0, bw_kib: 0, iops: 0.0 };
    }
    let secs = runtime_ns as f64 / 1e9;
    let bw_bytes = (d.bytes as f64 / secs) as u64;
    Rates {
        runtime_ms: (runtime_ns + 500_000) / 1_000_000,
        bw_bytes,
        bw_kib: bw_bytes / 1024,
        iops: d.ios as f64 / secs,
    }
}

/// fio's latency distribution: the percentage of I/Os whose completion
/// latency (clat, as fio counts it) falls in each range, per unit (nsec,
/// usec, msec), keyed by each range's upper edge.
pub fn latency_shares(j: &JobReport) -> [Vec<(String, f64)>; 3] {
    let mut all = Latency::new();
    for d in [&j.read, &j.write, &j.trim].into_iter().flatten() {
        all.merge(&d.clat);
    }
    let total = all.summary.n.max(1) as f64;
    let pct = |lo: u64, hi: u64| all.hist.count_between(lo, hi.saturating_sub(1)) as f64 * 100.0 / total;
    let scale = |unit: u64, edges: &[u64]| -> Vec<(String, f64)> {
        let mut lo = if unit == 1 { 0 } else { unit };
        edges
            .iter()
            .map(|&e| {
                let share = (e.to_string(), pct(lo, e * unit));
                lo = e * unit;
                share
            })
            .collect()
    };
    let ns_edges = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];
    let ms_edges = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000, 2000];
    let mut ms = scale(1_000_000, &ms_edges);
    ms.push((">=2000".into(), pct(2_000_000_000, u64::MAX)));
    [scale(1, &ns_edges), scale(1000, &ns_edges), ms]
}

/// fio's "IO depths", "submit" and "complete" distributions in percent,
/// keyed as fio keys them.
pub fn depth_shares(d: &Depths) -> [Vec<(&'static str, f64)>; 3] {
    let share = |keys: [&'static str; 7], counts: &[u64; 7]| {
        let total: u64 = counts.iter().sum();
        keys.into_iter()
            .zip(counts)
            .map(|(k, &n)| (k, if total > 0 { n as f64 * 100.0 / total as f64 } else { 0.0 }))
            .collect()
    };
    let batches = ["0", "4", "8", "16", "32", "64", ">=64"];
    [
        share(["1", "2", "4", "8", "16", "32", ">=64"], &d.levels),
        share(batches, &d.submits),
        share(batches, &d.completes),
    ]
}

/// cachestat's verdict on one file in words: what a glance must catch.
pub fn cache_percent(cached: u64, pages: u64) -> f64 {
    if pages == 0 {
        0.0
    } else {
        cached as f64 * 100.0 / pages as f64
    }
}
