//! fio's JSON output shape and units, so jq scripts and fio-plot written for
//! fio read dcload's output unchanged. dcload-only facts live under "dcload".

use super::{cache_percent, depth_shares, latency_shares, rates, Exporter};
use crate::results::{JobReport, Report};
use crate::stats::{DirStats, Latency};
use crate::steady::SteadyReport;
use dc_jobfile::JobSpec;
use serde_json::{json, Map, Value};
use std::time::UNIX_EPOCH;

/// `bins`: fio's `json+`, which adds each direction's completion-latency
/// histogram (`clat_ns.bins`: latency in ns -> I/Os) for fio's tools
/// (`fio_jsonplus_clat2csv`). Its buckets are the HDR histogram's (three
/// significant digits), not fio's own.
pub struct JsonExporter {
    pub bins: bool,
}

/// Each latency recorded, at its bucket's highest equivalent value, and how
/// many I/Os had it.
fn bins(l: &Latency) -> Value {
    let b: Map<String, Value> =
        l.hist.iter_recorded().map(|v| (v.value_iterated_to().to_string(), json!(v.count_at_value()))).collect();
    Value::Object(b)
}

/// `percentiles`: the job's list when this latency gets them, else none.
fn lat_json(l: &Latency, percentiles: &[f64]) -> Value {
    let s = &l.summary;
    let mut v = json!({
        "min": s.min,
        "max": s.max,
        "mean": s.mean(),
        "stddev": s.stddev(),
        "N": s.n,
    });
    if !percentiles.is_empty() && s.n > 0 {
        let p: Map<String, Value> = percentiles.iter().map(|&p| (format!("{p:.6}"), json!(l.percentile(p)))).collect();
        v["percentile"] = Value::Object(p);
    }
    v
}

fn dir_json(d: Option<&DirStats>, runtime_ns: u64, job: &JobSpec) -> Value {
    let list = |on: bool| if on { job.percentile_list.as_slice() } else { &[] };
    let empty = DirStats::default();
    let d = d.unwrap_or(&empty);
    let r = rates(d, runtime_ns);
    let bw = &d.bw_samples;
    let iops = &d.iops_samples;
    json!({
        "io_bytes": d.bytes,
        "io_kbytes": d.bytes / 1024,
        "bw_bytes": r.bw_bytes,
        "bw": r.bw_kib,
        "iops": r.iops,
        "runtime": if d.ios > 0 { r.runtime_ms } else { 0 },
        "total_ios": d.ios,
        "short_ios": d.short_ios,
        "drop_ios": 0,
        "slat_ns": lat_json(&d.slat, list(job.slat_percentiles)),
        "clat_ns": lat_json(&d.clat, list(job.clat_percentiles)),
        "lat_ns": lat_json(&d.lat, list(job.lat_percentiles)),
        "bw_min": bw.min,
        "bw_max": bw.max,
        "bw_agg": if bw.n > 0 && r.bw_kib > 0 { bw.mean() * 100.0 / r.bw_kib as f64 } else { 0.0 },
        "bw_mean": bw.mean(),
        "bw_dev": bw.stddev(),
        "bw_samples": bw.n,
        "iops_min": iops.min,
        "iops_max": iops.max,
        "iops_mean": iops.mean(),
        "iops_stddev": iops.stddev(),
        "iops_samples": iops.n,
    })
}

/// fio's latency distribution buckets as JSON objects (nsec, usec, msec).
fn latency_buckets(j: &JobReport) -> (Value, Value, Value) {
    let [ns, us, ms] = latency_shares(j)
        .map(|shares| Value::Object(shares.into_iter().map(|(k, v)| (k, json!(v))).collect::<Map<String, Value>>()));
    (ns, us, ms)
}

fn job_json(j: &JobReport) -> Value {
    // As fio: the options with a value, as the job's section and the command line gave them.
    let options: Map<String, Value> =
        j.job.options.iter().filter(|o| o.value.is_some()).map(|o| (o.key.clone(), json!(o.value_text()))).collect();
    let runtime_ms = j.runtime_ns / 1_000_000;
    let [level, submit, complete] = depth_shares(&j.depths).map(|shares| {
        Value::Object(shares.into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<String, Value>>())
    });
    let (lns, lus, lms) = latency_buckets(j);
    let files: Vec<Value> = j
        .files
        .iter()
        .map(|f| {
            let c = f.cache.unwrap_or_default();
            json!({
                "path": f.path,
                "fs_type": f.fs_type,
                "device": f.device,
                "size": f.size,
                "mode": f.mode.name(),
                "pages": f.pages,
                "cachestat": f.cache.map(|_| json!({
                    "nr_cache": c.nr_cache,
                    "nr_dirty": c.nr_dirty,
                    "nr_writeback": c.nr_writeback,
                    "nr_evicted": c.nr_evicted,
                    "nr_recently_evicted": c.nr_recently_evicted,
                    "cached_percent": cache_percent(c.nr_cache, f.pages),
                })),
            })
        })
        .collect();
    let error_message = j.failure.as_ref().map(|f| f.message.clone());
    let job = json!({
        "jobname": j.name,
        "groupid": j.groupid,
        "error": j.failure.as_ref().map_or(0, |f| f.errno),
        "eta": 0,
        "elapsed": j.runtime_ns.div_ceil(1_000_000_000),
        "job options": Value::Object(options),
        "read": dir_json(j.read.as_ref(), j.runtime_ns, &j.job),
        "write": dir_json(j.write.as_ref(), j.runtime_ns, &j.job),
        "trim": dir_json(j.trim.as_ref(), j.runtime_ns, &j.job),
        "sync": {"total_ios": j.sync.summary.n, "lat_ns": lat_json(&j.sync, &j.job.percentile_list)},
        "job_runtime": runtime_ms,
        "usr_cpu": j.cpu_percent(j.cpu.user),
        "sys_cpu": j.cpu_percent(j.cpu.system),
        "ctx": j.cpu.context_switches,
        "majf": j.cpu.major_faults,
        "minf": j.cpu.minor_faults,
        "iodepth_level": level,
        "iodepth_submit": submit,
        "iodepth_complete": complete,
        "latency_ns": lns,
        "latency_us": lus,
        "latency_ms": lms,
        "latency_depth": j.latency_depth,
        "latency_target": j.job.latency.target.map_or(0, |t| t.as_nanos() as u64),
        "latency_percentile": j.job.latency.percentile,
        "latency_window": j.job.latency.window.as_micros() as u64,
        "dcload": {
            "jobs": j.instances,
            "mode": j.mode.name(),
            "ioengine": j.job.ioengine.name(),
            "error_message": error_message,
            "error_offset": j.failure.as_ref().and_then(|f| f.offset),
            "files": files,
            "notes": j.notes,
            "logs": j.logs,
            "verify": j.job.verify.as_ref().map(|v| json!({"asked": v, "blocks_checked": j.verified_blocks})),
            "clock": {"start_monotonic_ns": j.start_monotonic_ns, "start_realtime_ns": j.start_realtime_ns},
            "runtime_ns": j.runtime_ns,
        },
    });
    with_fio_extras(job, j)
}

/// fio's `steadystate` object.
fn steady_json(ss: &SteadyReport) -> Value {
    json!({
        "ss": ss.name,
        "duration": ss.duration_s,
        "attained": u8::from(ss.attained),
        "criterion": format!("{:.6}{}", ss.criterion, if ss.percent { "%" } else { "" }),
        "max_deviation": ss.max_deviation,
        "slope": ss.slope,
        "data": {"bw_mean": ss.bw_mean(), "iops_mean": ss.iops_mean(), "iops": ss.iops, "bw": ss.bw},
    })
}

/// What fio adds to some jobs, where fio puts it: `total_err` and
/// `first_error` after `latency_ms` with `continue_on_error`; after the
/// latency-target fields, `desc` when the job has a description and
/// `steadystate` with a steady-state criterion.
fn with_fio_extras(job: Value, j: &JobReport) -> Value {
    let Value::Object(fields) = job else { return job };
    let mut out = serde_json::Map::new();
    for (k, v) in fields {
        if k == "dcload" {
            if let Some(d) = &j.job.description {
                out.insert("desc".into(), json!(d));
            }
            if let Some(ss) = &j.steady {
                out.insert("steadystate".into(), steady_json(ss));
            }
        }
        let after = k == "latency_ms";
        out.insert(k, v);
        if after && j.job.continue_on_error != 0 {
            out.insert("total_err".into(), json!(j.errors_passed));
            out.insert("first_error".into(), json!(j.first_error));
        }
    }
    Value::Object(out)
}

impl Exporter for JsonExporter {
    fn render(&self, report: &Report) -> String {
        let mut s = serde_json::to_string_pretty(&document(report, self.bins))
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        s.push('\n');
        s
    }
}

/// The whole JSON document (with each direction's histogram under `bins`):
/// what the JSON output prints, and what the terse output is read from.
pub(super) fn document(report: &Report, bins_too: bool) -> Value {
    let since = report.started.duration_since(UNIX_EPOCH).unwrap_or_default();
    let global: Map<String, Value> =
        report.global_options.iter().map(|o| (o.key.clone(), json!(o.value_text()))).collect();
    let mut top = json!({
        "fio version": format!("dcload-{}", env!("CARGO_PKG_VERSION")),
        "timestamp": since.as_secs(),
        "timestamp_ms": since.as_millis() as u64,
        "time": crate::report::text::ctime(since.as_secs()),
    });
    if !global.is_empty() {
        top["global options"] = Value::Object(global);
    }
    top["jobs"] = Value::Array(report.jobs.iter().map(job_json).collect());
    if bins_too {
        for (j, out) in report.jobs.iter().zip(top["jobs"].as_array_mut().into_iter().flatten()) {
            for (name, d) in [("read", &j.read), ("write", &j.write), ("trim", &j.trim)] {
                if let Some(d) = d.as_ref().filter(|d| d.clat.summary.n > 0) {
                    out[name]["clat_ns"]["bins"] = bins(&d.clat);
                }
            }
        }
    }
    top["disk_util"] = Value::Array(
        report
            .disk_util
            .iter()
            .map(|d| {
                json!({
                    "name": d.name,
                    "read_ios": d.read_ios,
                    "write_ios": d.write_ios,
                    "read_merges": d.read_merges,
                    "write_merges": d.write_merges,
                    "read_ticks": d.read_ticks,
                    "write_ticks": d.write_ticks,
                    "in_queue": d.in_queue,
                    "util": (d.util * 100.0).round() / 100.0,
                })
            })
            .collect(),
    );
    top["dcload"] = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "kernel": report.kernel,
        "warnings": report.warnings,
        "interrupted": report.interrupted,
    });
    top
}
