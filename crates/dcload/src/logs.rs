//! fio-format interval logs: `<prefix>_bw.<n>.log`, `<prefix>_iops.<n>.log`
//! and `<prefix>_{lat,clat,slat}.<n>.log`, one line per window (or per I/O
//! when `log_avg_msec=0`), in fio 3.33's columns: `msec, value, direction,
//! bs, priority`, with the I/O's offset before the priority under
//! `log_offset=1`. A window's bs (and offset) is 0, as fio prints it;
//! dcload sets no I/O priorities, so the priority is 0, fio's value then.
//!
//! `per_job_logs=0` leaves the instance number out of the names.
//!
//! Times are milliseconds since the job's statistics started; the JSON output
//! records that instant on CLOCK_MONOTONIC so other monitors can be aligned.

use crate::engine::Dir;
use dc_jobfile::JobSpec;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

#[derive(Default, Clone, Copy)]
struct Window {
    bytes: u64,
    ios: u64,
    lat_sum: u64,
    clat_sum: u64,
    slat_sum: u64,
}

pub struct IntervalLogs {
    period_ns: u64,
    bw: Option<BufWriter<File>>,
    iops: Option<BufWriter<File>>,
    lat: Option<[BufWriter<File>; 3]>,
    win_start_ns: u64,
    windows: [Window; 2],
    log_offset: bool,
    /// Paths created, for the JSON output.
    pub paths: Vec<PathBuf>,
}

/// One completed I/O as the logs see it.
pub struct Sample {
    pub now_ns: u64,
    pub dir: Dir,
    pub bytes: u64,
    pub offset: u64,
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
        if bw.is_none() && iops.is_none() && lat.is_none() {
            return Ok(None);
        }
        let (log_avg_msec, log_offset) = (job.log_avg_msec, job.log_offset);
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
        Ok(Some(IntervalLogs {
            period_ns: u64::from(log_avg_msec) * 1_000_000,
            bw,
            iops,
            lat,
            win_start_ns: 0,
            windows: [Window::default(); 2],
            log_offset,
            paths,
        }))
    }

    #[inline]
    pub fn record(&mut self, s: &Sample) -> io::Result<()> {
        if self.period_ns == 0 {
            return self.per_io(s);
        }
        let w = &mut self.windows[s.dir.log_code() as usize];
        w.bytes += s.bytes;
        w.ios += 1;
        w.lat_sum += s.lat_ns;
        w.clat_sum += s.clat_ns;
        w.slat_sum += s.slat_ns.unwrap_or(0);
        if s.now_ns.saturating_sub(self.win_start_ns) >= self.period_ns {
            self.flush_window(s.now_ns, s.slat_ns.is_some())?;
        }
        Ok(())
    }

    fn per_io(&mut self, s: &Sample) -> io::Result<()> {
        let ms = s.now_ns / 1_000_000;
        let d = s.dir.log_code();
        let tail = if self.log_offset { format!("{}, {}, 0", s.bytes, s.offset) } else { format!("{}, 0", s.bytes) };
        if let Some(f) = &mut self.bw {
            let kib_s = s.bytes * 1_000_000_000 / 1024 / s.lat_ns.max(1);
            writeln!(f, "{ms}, {kib_s}, {d}, {tail}")?;
        }
        if let Some(f) = &mut self.iops {
            writeln!(f, "{ms}, 1, {d}, {tail}")?;
        }
        if let Some([lat, clat, slat]) = &mut self.lat {
            writeln!(lat, "{ms}, {}, {d}, {tail}", s.lat_ns)?;
            writeln!(clat, "{ms}, {}, {d}, {tail}", s.clat_ns)?;
            if let Some(v) = s.slat_ns {
                writeln!(slat, "{ms}, {v}, {d}, {tail}")?;
            }
        }
        Ok(())
    }

    fn flush_window(&mut self, now_ns: u64, has_slat: bool) -> io::Result<()> {
        let elapsed = now_ns.saturating_sub(self.win_start_ns).max(1);
        let ms = now_ns / 1_000_000;
        let tail = if self.log_offset { "0, 0, 0" } else { "0, 0" };
        for (d, w) in self.windows.iter_mut().enumerate() {
            if w.ios == 0 {
                continue;
            }
            if let Some(f) = &mut self.bw {
                writeln!(f, "{ms}, {}, {d}, {tail}", w.bytes * 1_000_000_000 / 1024 / elapsed)?;
            }
            if let Some(f) = &mut self.iops {
                writeln!(f, "{ms}, {}, {d}, {tail}", w.ios * 1_000_000_000 / elapsed)?;
            }
            if let Some([lat, clat, slat]) = &mut self.lat {
                writeln!(lat, "{ms}, {}, {d}, {tail}", w.lat_sum / w.ios)?;
                writeln!(clat, "{ms}, {}, {d}, {tail}", w.clat_sum / w.ios)?;
                if has_slat {
                    writeln!(slat, "{ms}, {}, {d}, {tail}", w.slat_sum / w.ios)?;
                }
            }
            *w = Window::default();
        }
        self.win_start_ns = now_ns;
        Ok(())
    }

    /// Write the last partial window and flush the files.
    pub fn finish(&mut self, now_ns: u64, has_slat: bool) -> io::Result<()> {
        if self.period_ns > 0 {
            self.flush_window(now_ns, has_slat)?;
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
        self.windows = [Window::default(); 2];
    }
}
