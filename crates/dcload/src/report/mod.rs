//! Turning a [`Report`] into output. Each format is an [`Exporter`]; the
//! command line picks one or more (`--output-format=normal,json`). The
//! terse lines are read from the JSON document, so they share its figures.

mod json;
mod terse;
mod text;

pub use json::JsonExporter;
pub use terse::TerseExporter;
pub use text::TextExporter;

use crate::results::Report;
use crate::stats::DirStats;

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

/// cachestat's verdict on one file in words: what a glance must catch.
pub fn cache_percent(cached: u64, pages: u64) -> f64 {
    if pages == 0 {
        0.0
    } else {
        cached as f64 * 100.0 / pages as f64
    }
}
