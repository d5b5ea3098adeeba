//! fio-format interval logs: `<prefix>_bw.<n>.log`, `<prefix>_iops.<n>.log`
//! and `<prefix>_{lat,clat,slat}.<n>.log`, one line per window (or per I/O
//! when `log_avg_msec=0`), in fio's columns: `msec, value, direction, bs,
//! priority`, with
//! - a second value after the first under `log_window_value=both` (the
//!   window's maximum after its mean; 0 in per-I/O lines, as fio prints it);
//! - the I/O's offset before the priority under `log_offset=1`;
//! - the I/O's issue time last under `log_issue_time=1`: nanoseconds since
//!   the job's statistics started, in the clat and slat logs' per-I/O lines,
//!   0 in the others and in windows (fio keeps it for those two only).
//!
//! A window's bs (and offset) is 0, as fio prints it. The priority column
//! is the I/O's priority value as `0x%04x` under `log_prio=1`, else 1 when
//! its class is realtime and 0 otherwise (fio's two forms); a window's is
//! the job's own priority.
//!
//! `write_hist_log` writes `<prefix>_clat_hist.<n>.log`: every
//! `log_hist_msec`, per direction, `msec, direction, bs, ` and the counts of
//! completion latencies that fell in each of fio's histogram bins since the
//! direction's previous line (fio's 1856 bins of 64 per power of two, summed
//! in runs of `2^log_hist_coarseness`), which fio's `fiologparser_hist.py`
//! reads.
//!
//! `per_job_logs=0` leaves the instance number out of the names.
//!
//! Times are milliseconds since the job's statistics started; the JSON output
//! records that instant on CLOCK_MONOTONIC so other monitors can be aligned.

use crate::engine::Dir;
use dc_jobfile::{JobSpec, LogWindow};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The sum and the largest of a window's latencies of one kind.
#[derive(Default, Clone, Copy)]
struct Latencies {
    sum: u64,
    max: u64,
}

impl Latencies {
    fn add(&mut self, ns: u64) {
        self.sum += ns;
        self.max = self.max.max(ns);
    }
}

#[derive(Default, Clone, Copy)]
struct Window {
    bytes: u64,
    ios: u64,
    /// lat, clat, slat.
    lat: [Latencies; 3],
}

/// fio's latency histogram: 64 bins per power of two, 29 groups.
const PLAT_BITS: u32 = 6;
const PLAT_VAL: u64 = 1 << PLAT_BITS;
pub const PLAT_NR: usize = 29 * PLAT_VAL as usize;

/// The bin of fio's histogram a latency of `ns` falls in (fio's
/// `plat_val_to_idx`): exact below 128, then 64 bins per doubling.
pub fn plat_idx(ns: u64) -> usize {
    let msb = if ns == 0 { 0 } else { 63 - ns.leading_zeros() };
    if msb <= PLAT_BITS {
        return ns as usize;
    }
    let error_bits = msb - PLAT_BITS;
    let base = ((error_bits + 1) as u64) << PLAT_BITS;
    let offset = (PLAT_VAL - 1) & (ns >> error_bits);
    ((base + offset) as usize).min(PLAT_NR - 1)
}

/// `write_hist_log`'s file and each direction's counts.
struct HistLog {
    out: BufWriter<File>,
    period_ms: u64,
    /// Bins summed per printed column.
    stride: usize,
    /// Per direction: all completions so far, the counts at its last line,
    /// and when its window started (ms; `None` before its first completion).
    counts: [Vec<u64>; 3],
    printed: [Vec<u64>; 3],
    since_ms: [Option<u64>; 3],
}

impl HistLog {
    fn record(&mut self, s: &Sample) -> io::Result<()> {
        if self.period_ms == 0 {
            return Ok(()); // fio logs no histogram without log_hist_msec
        }
        let d = s.dir.log_code() as usize;
        self.counts[d][plat_idx(s.clat_ns)] += 1;
        let ms = s.now_ns / 1_000_000;
        let since = *self.since_ms[d].get_or_insert(ms);
        let window = ms.saturating_sub(since);
        if window < self.period_ms {
            return Ok(());
        }
        // As fio: the next window starts a period after this one did, less
        // any overshoot, so windows do not drift.
        self.since_ms[d] = Some(ms - (window - self.period_ms));
        write!(self.out, "{ms}, {d}, {}", s.bytes)?;
        for (now, before) in self.counts[d].chunks(self.stride).zip(self.printed[d].chunks(self.stride)) {
            write!(self.out, ", {}", now.iter().sum::<u64>() - before.iter().sum::<u64>())?;
        }
        writeln!(self.out)?;
        self.printed[d].copy_from_slice(&self.counts[d]);
        Ok(())
    }
}

/// One log line's figures; `second` is printed only under
/// `log_window_value=both` (0 in a per-I/O line, as fio prints it).
#[derive(Clone, Copy)]
struct Entry {
    ms: u64,
    value: u64,
    second: u64,
    dir: u8,
    bytes: u64,
    offset: u64,
    issued_ns: u64,
    prio: u16,
}

/// Which of fio's optional columns this job's logs carry.
#[derive(Clone, Copy)]
struct Columns {
    /// `log_window_value=both`: a second value.
    two_values: bool,
    /// `log_offset=1`.
    offset: bool,
    /// `log_issue_time=1`.
    issue_time: bool,
    /// `log_prio=1`: the priority column is the value, not "is realtime".
    prio_value: bool,
}

impl Columns {
    /// Writes `e` as one line, straight into the log's buffer.
    fn write(&self, f: &mut BufWriter<File>, e: Entry) -> io::Result<()> {
        write!(f, "{}, {}", e.ms, e.value)?;
        if self.two_values {
            write!(f, ", {}", e.second)?;
        }
        write!(f, ", {}, {}", e.dir, e.bytes)?;
        if self.offset {
            write!(f, ", {}", e.offset)?;
        }
        if self.prio_value {
            write!(f, ", 0x{:04x}", e.prio)?;
        } else {
            write!(f, ", {}", u8::from(e.prio >> 13 == 1))?;
        }
        if self.issue_time {
            write!(f, ", {}", e.issued_ns)?;
        }
        writeln!(f)
    }
}

pub struct IntervalLogs {
    hist: Option<HistLog>,
    period_ns: u64,
    bw: Option<BufWriter<File>>,
    iops: Option<BufWriter<File>>,
    lat: Option<[BufWriter<File>; 3]>,
    win_start_ns: u64,
    windows: [Window; 3],
    columns: Columns,
    window_value: LogWindow,
    /// The priority a window's line gives: the job's own.
    window_prio: u16,
    /// Paths created, for the JSON output.
    pub paths: Vec<PathBuf>,
}

/// One completed I/O as the logs see it.
pub struct Sample {
    pub now_ns: u64,
    pub dir: Dir,
    pub bytes: u64,
    pub offset: u64,
    pub prio: u16,
    pub lat_ns: u64,
    pub clat_ns: u64,
    /// `None` for synchronous engines, which have no submission latency.
    pub slat_ns: Option<u64>,
}

/// `n`: the instance's number in the file name, or none (`per_job_logs=0`).
fn create(
    dir: &Path,
    prefix: &str,
    kind: &str,
    n: Option<usize>,
    paths: &mut Vec<PathBuf>,
) -> io::Result<BufWriter<File>> {
    let path = match n {
        Some(n) => dir.join(format!("{prefix}_{kind}.{n}.log")),
        None => dir.join(format!("{prefix}_{kind}.log")),
    };
    let f =
        File::create(&path).map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display())))?;
    paths.push(path);
    Ok(BufWriter::with_capacity(64 * 1024, f))
}

impl IntervalLogs {
    /// The logs `job` asks for; `n` is the job instance's 1-based number in
    /// the invocation, as in fio. Log files go into `dir` (the current
    /// directory unless the prefix is a path).
    pub fn open(dir: &Path, n: usize, job: &JobSpec) -> io::Result<Option<IntervalLogs>> {
        let (bw, iops, lat) = (job.bw_log.as_deref(), job.iops_log.as_deref(), job.lat_log.as_deref());
        if bw.is_none() && iops.is_none() && lat.is_none() && job.hist_log.is_none() {
            return Ok(None);
        }
        let log_avg_msec = job.log_avg_msec;
        let n = job.per_job_logs.then_some(n);
        let mut paths = Vec::new();
        let bw = bw.map(|p| create(dir, p, "bw", n, &mut paths)).transpose()?;
        let iops = iops.map(|p| create(dir, p, "iops", n, &mut paths)).transpose()?;
        let lat = match lat {
            Some(p) => Some([
                create(dir, p, "lat", n, &mut paths)?,
                create(dir, p, "clat", n, &mut paths)?,
                create(dir, p, "slat", n, &mut paths)?,
            ]),
            None => None,
        };
        let hist = match job.hist_log.as_deref() {
            Some(p) => Some(HistLog {
                out: create(dir, p, "clat_hist", n, &mut paths)?,
                period_ms: u64::from(job.log_hist_msec),
                stride: 1 << job.log_hist_coarseness,
                counts: std::array::from_fn(|_| vec![0; PLAT_NR]),
                printed: std::array::from_fn(|_| vec![0; PLAT_NR]),
                since_ms: [None; 3],
            }),
            None => None,
        };
        Ok(Some(IntervalLogs {
            hist,
            period_ns: u64::from(log_avg_msec) * 1_000_000,
            bw,
            iops,
            lat,
            win_start_ns: 0,
            windows: [Window::default(); 3],
            columns: Columns {
                two_values: job.log_window == LogWindow::Both,
                offset: job.log_offset,
                issue_time: job.log_issue_time,
                prio_value: job.log_prio,
            },
            window_value: job.log_window,
            window_prio: job.ioprio.unwrap_or(0),
            paths,
        }))
    }

    #[inline]
    pub fn record(&mut self, s: &Sample) -> io::Result<()> {
        if let Some(h) = &mut self.hist {
            h.record(s)?;
        }
        if self.bw.is_none() && self.iops.is_none() && self.lat.is_none() {
            return Ok(());
        }
        if self.period_ns == 0 {
            return self.per_io(s);
        }
        let w = &mut self.windows[s.dir.log_code() as usize];
        w.bytes += s.bytes;
        w.ios += 1;
        w.lat[0].add(s.lat_ns);
        w.lat[1].add(s.clat_ns);
        w.lat[2].add(s.slat_ns.unwrap_or(0));
        if s.now_ns.saturating_sub(self.win_start_ns) >= self.period_ns {
            self.flush_window(s.now_ns, s.slat_ns.is_some())?;
        }
        Ok(())
    }

    fn per_io(&mut self, s: &Sample) -> io::Result<()> {
        let c = self.columns;
        let e = Entry {
            ms: s.now_ns / 1_000_000,
            value: 0,
            second: 0,
            dir: s.dir.log_code(),
            bytes: s.bytes,
            offset: s.offset,
            issued_ns: 0,
            prio: s.prio,
        };
        // fio keeps the issue time for the clat and slat logs only.
        let issued = Entry { issued_ns: s.now_ns.saturating_sub(s.clat_ns), ..e };
        if let Some(f) = &mut self.bw {
            c.write(f, Entry { value: s.bytes * 1_000_000_000 / 1024 / s.lat_ns.max(1), ..e })?;
        }
        if let Some(f) = &mut self.iops {
            c.write(f, Entry { value: 1, ..e })?;
        }
        if let Some([lat, clat, slat]) = &mut self.lat {
            c.write(lat, Entry { value: s.lat_ns, ..e })?;
            c.write(clat, Entry { value: s.clat_ns, ..issued })?;
            if let Some(v) = s.slat_ns {
                c.write(slat, Entry { value: v, ..issued })?;
            }
        }
        Ok(())
    }

    fn flush_window(&mut self, now_ns: u64, has_slat: bool) -> io::Result<()> {
        let (c, how) = (self.columns, self.window_value);
        let elapsed = now_ns.saturating_sub(self.win_start_ns).max(1);
        for d in 0..self.windows.len() {
            let w = std::mem::take(&mut self.windows[d]);
            if w.ios == 0 {
                continue;
            }
            let e = Entry {
                ms: now_ns / 1_000_000,
                value: 0,
                second: 0,
                dir: d as u8,
                bytes: 0,
                offset: 0,
                issued_ns: 0,
                prio: self.window_prio,
            };
            // A rate has one sample per window: its maximum is itself.
            let rate = |v: u64| Entry { value: v, second: v, ..e };
            // A latency's mean (rounded, as fio rounds it), maximum, or both.
            let latency = |l: Latencies| {
                let mean = (l.sum + w.ios / 2) / w.ios;
                match how {
                    LogWindow::Avg | LogWindow::Both => Entry { value: mean, second: l.max, ..e },
                    LogWindow::Max => Entry { value: l.max, ..e },
                }
            };
            if let Some(f) = &mut self.bw {
                c.write(f, rate(w.bytes * 1_000_000_000 / 1024 / elapsed))?;
            }
            if let Some(f) = &mut self.iops {
                c.write(f, rate(w.ios * 1_000_000_000 / elapsed))?;
            }
            if let Some([lat, clat, slat]) = &mut self.lat {
                c.write(lat, latency(w.lat[0]))?;
                c.write(clat, latency(w.lat[1]))?;
                if has_slat {
                    c.write(slat, latency(w.lat[2]))?;
                }
            }
        }
        self.win_start_ns = now_ns;
        Ok(())
    }

    /// Write the last partial window and flush the files.
    pub fn finish(&mut self, now_ns: u64, has_slat: bool) -> io::Result<()> {
        if self.period_ns > 0 {
            self.flush_window(now_ns, has_slat)?;
        }
        if let Some(h) = &mut self.hist {
            h.out.flush()?;
        }
        for f in self.bw.iter_mut().chain(self.iops.iter_mut()) {
            f.flush()?;
        }
        if let Some(l) = &mut self.lat {
            for f in l {
                f.flush()?;
            }
        }
        Ok(())
    }

    /// Restart the window clock (at the end of ramp_time, when statistics start).
    pub fn reset(&mut self) {
        self.win_start_ns = 0;
        self.windows = [Window::default(); 3];
        if let Some(h) = &mut self.hist {
            h.counts.iter_mut().chain(h.printed.iter_mut()).for_each(|c| c.fill(0));
            h.since_ms = [None; 3];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_fall_in_fio_s_bins() {
        // Exact up to 127 ns, then 64 bins per doubling (fio's stat.c).
        assert_eq!(plat_idx(0), 0);
        assert_eq!(plat_idx(127), 127);
        assert_eq!(plat_idx(128), 128);
        assert_eq!(plat_idx(129), 128, "two values per bin from 128");
        assert_eq!(plat_idx(130), 129);
        assert_eq!(plat_idx(256), 192);
        assert_eq!(plat_idx(1_000_000), 896 + ((1_000_000u64 >> 13) & 63) as usize, "2^19 <= 1e6 < 2^20");
        assert_eq!(plat_idx(u64::MAX), PLAT_NR - 1, "the last bin takes the rest");
    }
}
