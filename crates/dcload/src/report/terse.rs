//! fio's terse output (`--minimal`, `--output-format=terse`): one line of
//! `;`-separated fields per reported job, in fio's order, for the scripts
//! that split them. Versions 3 (fio's default), 4 (a trim status after the
//! write status) and 5 (also each direction's bandwidth sample count and
//! IOPS statistics). Every figure is the JSON output's, in fio's units
//! (KiB, KiB/s, microseconds for latencies), so the two never disagree.

use super::Exporter;
use crate::results::Report;
use serde_json::Value;
use std::fmt::Write;

pub struct TerseExporter {
    pub version: u8,
}

/// fio's seven I/O depth buckets, ten microsecond and twelve millisecond
/// latency buckets, as the JSON output names them.
const DEPTHS: [&str; 7] = ["1", "2", "4", "8", "16", "32", ">=64"];
const LAT_US: [&str; 10] = ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000"];
const LAT_MS: [&str; 12] = ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000"];
/// fio prints this many percentile fields, `0%=0` for those not asked for.
const PERCENTILE_FIELDS: usize = 20;

fn int(v: &Value) -> u64 {
    v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)).unwrap_or(0)
}

fn float(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// min, max (integer microseconds), mean, deviation (microseconds) of one
/// latency, or zeros without samples, as fio prints them.
fn latency(out: &mut String, l: &Value) {
    if int(&l["N"]) == 0 {
        out.push_str(";0;0;0.000000;0.000000");
        return;
    }
    let _ = write!(
        out,
        ";{};{};{:.6};{:.6}",
        int(&l["min"]) / 1000,
        int(&l["max"]) / 1000,
        float(&l["mean"]) / 1000.0,
        float(&l["stddev"]) / 1000.0
    );
}

impl TerseExporter {
    fn direction(&self, out: &mut String, d: &Value, percentiles: &[f64], pick: &str) {
        let (bytes, runtime, ios) = (int(&d["io_bytes"]), int(&d["runtime"]), int(&d["total_ios"]));
        let per_s = |n: u64| (1000 * n).checked_div(runtime).unwrap_or(0);
        let (bw, iops) = (per_s(bytes) / 1024, per_s(ios));
        let _ = write!(out, ";{};{bw};{iops};{runtime}", bytes >> 10);
        latency(out, &d["slat_ns"]);
        latency(out, &d["clat_ns"]);
        // Every listed percentile, 0 for a direction without I/O, as fio.
        let listed = &d[pick]["percentile"];
        for i in 0..PERCENTILE_FIELDS {
            match percentiles.get(i) {
                Some(p) => {
                    let _ = write!(out, ";{p:.6}%={}", int(&listed[format!("{p:.6}")]) / 1000);
                }
                None => out.push_str(";0%=0"),
            }
        }
        latency(out, &d["lat_ns"]);
        let samples = int(&d["bw_samples"]);
        if samples > 0 {
            let _ = write!(
                out,
                ";{};{};{:.6}%;{:.6};{:.6}",
                int(&d["bw_min"]),
                int(&d["bw_max"]),
                float(&d["bw_agg"]).min(100.0),
                float(&d["bw_mean"]),
                float(&d["bw_dev"])
            );
        } else {
            out.push_str(";0;0;0.000000%;0.000000;0.000000");
        }
        if self.version == 5 {
            let _ = write!(out, ";{samples}");
            if int(&d["iops_samples"]) > 0 {
                let _ = write!(
                    out,
                    ";{};{};{:.6};{:.6};{}",
                    int(&d["iops_min"]),
                    int(&d["iops_max"]),
                    float(&d["iops_mean"]),
                    float(&d["iops_stddev"]),
                    int(&d["iops_samples"])
                );
            } else {
                out.push_str(";0;0;0.000000;0.000000;0");
            }
        }
    }
}

impl Exporter for TerseExporter {
    fn render(&self, report: &Report) -> String {
        let doc = super::json::document(report, false);
        let fio_version = format!("fio-{}", crate::cli::FIO_RELEASE);
        let mut out = String::new();
        let jobs = doc["jobs"].as_array().map_or(&[][..], Vec::as_slice);
        for (j, r) in jobs.iter().zip(&report.jobs) {
            let spec = &r.job;
            let _ = write!(out, "{};{fio_version};{};{};{}", self.version, r.name, r.groupid, int(&j["error"]));
            // As fio: total latency's percentiles when asked for, else
            // completion latency's, else none.
            let pick = if spec.lat_percentiles { "lat_ns" } else { "clat_ns" };
            let list = if spec.lat_percentiles || spec.clat_percentiles { &spec.percentile_list[..] } else { &[] };
            self.direction(&mut out, &j["read"], list, pick);
            self.direction(&mut out, &j["write"], list, pick);
            if self.version >= 4 {
                self.direction(&mut out, &j["trim"], list, pick);
            }
            let _ = write!(
                out,
                ";{:.6}%;{:.6}%;{};{};{}",
                float(&j["usr_cpu"]),
                float(&j["sys_cpu"]),
                int(&j["ctx"]),
                int(&j["majf"]),
                int(&j["minf"])
            );
            for k in DEPTHS {
                let _ = write!(out, ";{:.1}%", float(&j["iodepth_level"][k]));
            }
            // The first microsecond bucket takes every sub-microsecond
            // latency (fio's `stat_calc_lat_nu`).
            let under_us: f64 = j["latency_ns"].as_object().map_or(0.0, |m| m.values().map(float).sum());
            for (i, k) in LAT_US.iter().enumerate() {
                let extra = if i == 0 { under_us } else { 0.0 };
                let _ = write!(out, ";{:.2}%", float(&j["latency_us"][k]) + extra);
            }
            for k in LAT_MS {
                let _ = write!(out, ";{:.2}%", float(&j["latency_ms"][k]));
            }
            for d in doc["disk_util"].as_array().map_or(&[][..], Vec::as_slice) {
                let _ = write!(
                    out,
                    ";{};{};{};{};{};{};{};{};{:.2}%",
                    d["name"].as_str().unwrap_or(""),
                    int(&d["read_ios"]),
                    int(&d["write_ios"]),
                    int(&d["read_merges"]),
                    int(&d["write_merges"]),
                    int(&d["read_ticks"]),
                    int(&d["write_ticks"]),
                    int(&d["in_queue"]),
                    float(&d["util"])
                );
            }
            // A continue_on_error job's error count and first errno.
            if j.get("total_err").is_some() {
                let _ = write!(out, ";{};{}", int(&j["total_err"]), int(&j["first_error"]));
            }
            if let Some(text) = &spec.description {
                let _ = write!(out, ";{text}");
            }
            out.push('\n');
        }
        out
    }
}
