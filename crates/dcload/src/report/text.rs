//! The human summary: fio's layout where it helps (IOPS/BW line, latency
//! lines, percentiles), plus the cache line that proves the mode.

use super::{cache_percent, depth_shares, latency_shares, rates, Exporter};
use crate::results::{JobReport, Report};
use crate::stats::Latency;
use std::fmt::Write;

pub struct TextExporter;

/// `ctime(3)` without the newline, in local time.
pub fn ctime(secs: u64) -> String {
    let t = secs as libc::time_t;
    let mut buf = [0 as libc::c_char; 64];
    // SAFETY: buf is larger than the 26 bytes ctime_r writes.
    let p = unsafe { libc::ctime_r(&t, buf.as_mut_ptr()) };
    if p.is_null() {
        return secs.to_string();
    }
    // SAFETY: ctime_r NUL-terminated buf.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().trim_end().to_string()
}

/// Pick the unit fio would print latencies of this size in.
fn unit_for(max_ns: u64) -> (&'static str, f64) {
    if max_ns >= 10_000_000_000 {
        ("msec", 1e6)
    } else if max_ns >= 10_000 {
        ("usec", 1e3)
    } else {
        ("nsec", 1.0)
    }
}

fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if v >= 100.0 || i == 0 {
        format!("{v:.0}{}", UNITS[i])
    } else {
        format!("{v:.1}{}", UNITS[i])
    }
}

fn lat_line(out: &mut String, label: &str, l: &Latency) {
    if l.summary.n == 0 {
        return;
    }
    let s = &l.summary;
    let (unit, div) = unit_for(s.max);
    let _ = writeln!(
        out,
        "    {label:>4} ({unit}): min={:.0}, max={:.0}, avg={:.2}, stdev={:.2}",
        s.min as f64 / div,
        s.max as f64 / div,
        s.mean() / div,
        s.stddev() / div
    );
}

/// fio's distribution lines: latencies per range (only ranges with I/Os,
/// five to a line), CPU, depths and batch sizes, I/O counts, latency target.
fn distribution_lines(out: &mut String, j: &JobReport) {
    for (unit, shares) in ["nsec", "usec", "msec"].into_iter().zip(latency_shares(j)) {
        let shown: Vec<String> = shares.iter().filter(|s| s.1 > 0.0).map(|(k, v)| format!("{k}={v:3.2}%")).collect();
        for line in shown.chunks(5) {
            let _ = writeln!(out, "  lat ({unit})   : {}", line.join(", "));
        }
    }
    let _ = writeln!(
        out,
        "  cpu          : usr={:.2}%, sys={:.2}%, ctx={}, majf={}, minf={}",
        j.cpu_percent(j.cpu.user),
        j.cpu_percent(j.cpu.system),
        j.cpu.context_switches,
        j.cpu.major_faults,
        j.cpu.minor_faults
    );
    let [levels, submits, completes] = depth_shares(&j.depths);
    for (label, shares) in
        [("  IO depths    : ", levels), ("     submit    : ", submits), ("     complete  : ", completes)]
    {
        let cells: Vec<String> = shares.iter().map(|(k, v)| format!("{k}={v:.1}%")).collect();
        let _ = writeln!(out, "{label}{}", cells.join(", "));
    }
    let [r, w, t] = [&j.read, &j.write, &j.trim].map(|d| d.as_ref().map_or((0, 0), |d| (d.ios, d.short_ios)));
    let _ = writeln!(
        out,
        "     issued rwts: total={},{},{},0 short={},{},{},0 dropped=0,0,0,0",
        r.0, w.0, t.0, r.1, w.1, t.1
    );
    let lt = &j.job.latency;
    let _ = writeln!(
        out,
        "     latency   : target={}, window={}, percentile={:.2}%, depth={}",
        lt.target.map_or(0, |t| t.as_nanos()),
        lt.window.as_micros(),
        lt.percentile,
        j.latency_depth
    );
}

/// One job in fio's text layout.
// One piece: fio's report of a job, section by section in fio's order, so it
// can be held line by line against fio's own output.
fn job_text(out: &mut String, j: &JobReport) {
    let err = j.failure.as_ref().map_or(0, |f| f.errno);
    let _ = writeln!(
        out,
        "{}: (groupid={}, jobs={}): err={err:>2}: mode={} ioengine={} bs={} iodepth={}",
        j.name,
        j.groupid,
        j.instances,
        j.mode.name(),
        j.job.ioengine.name(),
        match j.job.block_sizes.is_fixed() {
            true => human_bytes(j.job.bs as f64),
            false =>
                format!("{}-{}", human_bytes(j.job.block_sizes.smallest(j.job.bs) as f64), human_bytes(j.job.bs as f64)),
        },
        j.job.iodepth
    );
    for (name, d) in [("read", &j.read), ("write", &j.write), ("trim", &j.trim)] {
        let Some(d) = d else { continue };
        let r = rates(d, j.runtime_ns);
        let _ = writeln!(
            out,
            "  {name}: IOPS={:.0}, BW={}/s ({:.1}MB/s)({}/{}msec)",
            r.iops,
            human_bytes(r.bw_bytes as f64),
            r.bw_bytes as f64 / 1e6,
            human_bytes(d.bytes as f64),
            r.runtime_ms
        );
        lat_line(out, "slat", &d.slat);
        lat_line(out, "clat", &d.clat);
        lat_line(out, "lat", &d.lat);
        let job = &j.job;
        for (on, name, l) in [
            (job.slat_percentiles, "slat", &d.slat),
            (job.clat_percentiles, "clat", &d.clat),
            (job.lat_percentiles, "lat", &d.lat),
        ] {
            if !on || l.summary.n == 0 {
                continue;
            }
            let (unit, div) = unit_for(l.percentile(99.99));
            let _ = writeln!(out, "    {name} percentiles ({unit}):");
            for row in job.percentile_list.chunks(4) {
                let cells: Vec<String> =
                    row.iter().map(|&p| format!("{p:5.2}th=[{:>7.0}]", l.percentile(p) as f64 / div)).collect();
                let _ = writeln!(out, "     | {}", cells.join(", "));
            }
        }
    }
    lat_line(out, "sync", &j.sync);
    distribution_lines(out, j);
    for f in &j.files {
        match f.cache {
            Some(c) => {
                let _ = writeln!(
                    out,
                    "  page cache   : {:5.1}% of {} cached ({} of {} pages), {} dirty, {} writeback after the run [{} on {}] {}",
                    cache_percent(c.nr_cache, f.pages),
                    human_bytes(f.size as f64),
                    c.nr_cache,
                    f.pages,
                    c.nr_dirty,
                    c.nr_writeback,
                    f.mode.name(),
                    f.fs_type,
                    f.path.display()
                );
            }
            None if f.fs_type == "nfs" => {
                let _ = writeln!(
                    out,
                    "  page cache   : not measured (a file on an NFS server: the cache is the server's) {}",
                    f.path.display()
                );
            }
            // The diskless engines' (null, the file operations) "file" is a
            // size only: nothing of it went through the page cache.
            None if f.fs_type == "none" => {
                let _ = writeln!(
                    out,
                    "  page cache   : not measured (no data moved: ioengine={}) {}",
                    j.job.ioengine.name(),
                    f.path.display()
                );
            }
            None => {
                let _ = writeln!(out, "  page cache   : not measured (cachestat unavailable) {}", f.path.display());
            }
        }
    }
    if j.verified_blocks > 0 {
        let _ = writeln!(out, "  verify       : {} blocks checked", j.verified_blocks);
    }
    if let Some(ss) = &j.steady {
        let how = if ss.by_slope { "slope" } else { "mean dev" };
        let _ = writeln!(
            out,
            "  steadystate  : attained={}, bw={}/s, iops={}, {} {how}={:.3}{}",
            if ss.attained { "yes" } else { "no" },
            human_bytes(ss.bw_mean() as f64),
            ss.iops_mean(),
            ss.measure,
            ss.criterion,
            if ss.percent { "%" } else { "" }
        );
    }
    // fio's line for continue_on_error jobs.
    if j.job.continue_on_error != 0 {
        let text = crate::error::errno_text(j.first_error);
        let first = text.split(" (os error").next().unwrap_or_default();
        let _ = writeln!(out, "     errors    : total={}, first_error={}/<{first}>", j.errors_passed, j.first_error);
    }
    for n in &j.notes {
        let _ = writeln!(out, "  !!! {n}");
    }
    if let Some(f) = &j.failure {
        let _ = writeln!(out, "  ERROR: {}", f.message);
    }
    for l in &j.logs {
        let _ = writeln!(out, "  log          : {}", l.display());
    }
}

impl Exporter for TextExporter {
    fn render(&self, report: &Report) -> String {
        let mut out = String::new();
        for w in &report.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        for j in &report.jobs {
            job_text(&mut out, j);
        }
        let mut groups: Vec<u32> = report.jobs.iter().map(|j| j.groupid).collect();
        groups.dedup();
        out.push('\n');
        for g in groups {
            let _ = writeln!(out, "Run status group {g} (all jobs):");
            for (name, pick) in [("READ", 0usize), ("WRITE", 1), ("TRIM", 2)] {
                let mut bytes = 0u64;
                let mut runtime = 0u64;
                for j in report.jobs.iter().filter(|j| j.groupid == g) {
                    let d = [&j.read, &j.write, &j.trim][pick];
                    if let Some(d) = d {
                        bytes += d.bytes;
                        runtime = runtime.max(j.runtime_ns);
                    }
                }
                if bytes > 0 && runtime > 0 {
                    let bw = bytes as f64 / (runtime as f64 / 1e9);
                    let _ = writeln!(
                        out,
                        "  {name:>5}: bw={}/s ({:.1}MB/s), io={}, run={}msec",
                        human_bytes(bw),
                        bw / 1e6,
                        human_bytes(bytes as f64),
                        runtime / 1_000_000
                    );
                }
            }
        }
        if !report.disk_util.is_empty() {
            out.push_str("\nDisk stats (read/write):\n");
            for d in &report.disk_util {
                let _ = writeln!(
                    out,
                    "  {}: ios={}/{}, merge={}/{}, ticks={}/{}, in_queue={}, util={:.2}%",
                    d.name,
                    d.read_ios,
                    d.write_ios,
                    d.read_merges,
                    d.write_merges,
                    d.read_ticks,
                    d.write_ticks,
                    d.in_queue,
                    d.util
                );
            }
        }
        if report.interrupted {
            out.push_str("\nINTERRUPTED: the run was stopped by a signal; the figures cover only what ran.\n");
        }
        out
    }
}
