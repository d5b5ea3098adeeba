//! `dontcache probe`: what the running kernel's `RWF_DONTCACHE` does on a
//! filesystem, so a user (or dcbench's manifest) can tell the inline-flush
//! generation (Linux 6.14-7.1) from the flusher-kick one (7.2+) by behaviour,
//! not only by version number: distribution kernels backport.
//!
//! The two generations differ in what a `RWF_DONTCACHE` write leaves behind
//! when it returns. The inline generation starts writeback of the written
//! range before returning, so none of it is dirty any more; the flusher-kick
//! generation only wakes the flusher, so the range is still dirty when the
//! call returns (writing back 32 MiB takes milliseconds, returning from the
//! call microseconds).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Bytes of one probing write: large enough that writeback cannot finish
/// between the call's return and the `cachestat` right after it.
const PROBE_BYTES: usize = 32 << 20;
/// Probing writes; the verdict takes their median.
const TRIALS: usize = 3;

/// Which `RWF_DONTCACHE` a kernel has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Generation {
    /// Before 6.14: the flag is refused.
    Unsupported,
    /// 6.14-7.1: the writer starts writeback of each write before returning.
    InlineFlush,
    /// 7.2+: the writer counts its dirty pages and kicks the flusher.
    FlusherKick,
    /// The probe's writes were neither clearly flushed nor clearly left dirty.
    Unclear,
}

impl Generation {
    fn describe(self) -> &'static str {
        match self {
            Generation::Unsupported => "no RWF_DONTCACHE (before Linux 6.14)",
            Generation::InlineFlush => "inline flush (the Linux 6.14-7.1 generation)",
            Generation::FlusherKick => "flusher kick (the Linux 7.2+ generation)",
            Generation::Unclear => "unclear (see the probe's figures)",
        }
    }

    /// What the release number alone says, for kernels as kernel.org numbers them.
    pub fn of_release(release: &str) -> Option<Generation> {
        let (major, minor) = release_version(release)?;
        Some(match (major, minor) {
            v if v < (6, 14) => Generation::Unsupported,
            v if v < (7, 2) => Generation::InlineFlush,
            _ => Generation::FlusherKick,
        })
    }
}

/// `(major, minor)` of a release string such as `6.18.0-1-amd64`.
fn release_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// One probing write and what `cachestat` saw of its range right after it returned.
#[derive(Debug, Serialize)]
pub struct Trial {
    pub pages: u64,
    pub dirty: u64,
    pub writeback: u64,
    pub cached: u64,
}

#[derive(Debug, Serialize)]
pub struct BlockProbe {
    pub device: PathBuf,
    /// `Some(true)` when an `RWF_DONTCACHE` read of the device succeeded,
    /// `Some(false)` when the kernel refused the flag, `None` when the probe could not tell.
    pub supported: Option<bool>,
    pub evidence: String,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub kernel: String,
    pub directory: PathBuf,
    pub fs_type: String,
    /// What the kernel's release number says.
    pub by_release: Option<Generation>,
    /// Whether this filesystem accepted `RWF_DONTCACHE` writes.
    pub filesystem_accepts: bool,
    /// What the probe's writes showed; `None` where the flag was refused.
    pub by_behaviour: Option<Generation>,
    /// The answer: behaviour where it was observed, else the release number's.
    pub generation: Option<Generation>,
    /// `behaviour` or `kernel release`: where `generation` comes from.
    pub source: &'static str,
    pub evidence: String,
    pub trials: Vec<Trial>,
    pub block_devices: Option<BlockProbe>,
}

/// A file in `dir` that disappears when closed (`O_TMPFILE`), or, where the
/// filesystem lacks that, a new file unlinked right after creation.
fn scratch_file(dir: &Path) -> io::Result<File> {
    match OpenOptions::new().read(true).write(true).custom_flags(libc::O_TMPFILE).mode(0o600).open(dir) {
        Ok(f) => Ok(f),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::EISDIR)) => {
            let path = dir.join(format!(".dontcache-probe-{}", std::process::id()));
            let f = OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path)?;
            std::fs::remove_file(&path)?;
            Ok(f)
        }
        Err(e) => Err(e),
    }
}

fn trial(file: &File, buf: &[u8], offset: u64) -> io::Result<Trial> {
    let mut done = 0;
    // One call: the inline generation flushes once per call, after all of it.
    while done < buf.len() {
        match dc_sys::pwritev2(file.as_fd(), &buf[done..], offset + done as u64, dc_sys::RWF_DONTCACHE)? {
            0 => return Err(io::Error::new(io::ErrorKind::WriteZero, "the probe file took 0 bytes")),
            n => done += n,
        }
    }
    let st = dc_sys::cachestat(file.as_fd(), offset, buf.len() as u64)?;
    Ok(Trial {
        pages: (buf.len() / dc_sys::page_size()) as u64,
        dirty: st.nr_dirty,
        writeback: st.nr_writeback,
        cached: st.nr_cache,
    })
}

fn verdict(trials: &[Trial]) -> Generation {
    let mut fractions: Vec<f64> = trials.iter().map(|t| t.dirty as f64 / t.pages as f64).collect();
    fractions.sort_by(f64::total_cmp);
    let median = fractions[fractions.len() / 2];
    // Measured on 6.18 (inline): 0 of 8,192 pages dirty at return in every
    // trial. A kicked flusher cannot have written half of 32 MiB in the
    // microseconds between return and cachestat.
    if median <= 0.1 {
        Generation::InlineFlush
    } else if median >= 0.5 {
        Generation::FlusherKick
    } else {
        Generation::Unclear
    }
}

/// The device to try block-device `RWF_DONTCACHE` on: the one named, else the
/// whole disk under `dir`.
fn block_device(dir: &Path, named: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = named {
        return Some(p.to_path_buf());
    }
    let st = std::fs::metadata(dir).ok()?;
    let dev = dc_sys::block_device_of(st.dev())?;
    Some(PathBuf::from("/dev").join(dev.disk))
}

/// Reads one page of `device` with `RWF_DONTCACHE`: a read changes nothing on
/// the device, and the kernel checks the flag the same way for reads and writes.
fn probe_block(device: &Path) -> BlockProbe {
    let answer = |supported, evidence: String| BlockProbe { device: device.to_path_buf(), supported, evidence };
    let file = match File::open(device) {
        Ok(f) => f,
        Err(e) => return answer(None, format!("cannot open {}: {e}", device.display())),
    };
    match file.metadata() {
        Ok(m) if m.file_type().is_block_device() => {}
        Ok(_) => return answer(None, format!("{} is not a block device", device.display())),
        Err(e) => return answer(None, format!("cannot stat {}: {e}", device.display())),
    }
    let mut page = vec![0u8; dc_sys::page_size()];
    match dc_sys::preadv2(file.as_fd(), &mut page, 0, dc_sys::RWF_DONTCACHE) {
        Ok(_) => answer(Some(true), format!("an RWF_DONTCACHE read of {} succeeded", device.display())),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            answer(Some(false), format!("an RWF_DONTCACHE read of {} was refused: {e}", device.display()))
        }
        Err(e) => answer(None, format!("an RWF_DONTCACHE read of {} failed: {e}", device.display())),
    }
}

/// Probes `dir`'s filesystem (and a block device) and says which generation the kernel has.
pub fn probe(dir: &Path, device: Option<&Path>) -> io::Result<Report> {
    let kernel = dc_sys::kernel_release();
    let by_release = Generation::of_release(&kernel);
    let fs_type = dc_sys::fs_type_name(dir)?;
    let file = scratch_file(dir)?;
    let mut buf = vec![0u8; PROBE_BYTES];
    // Not zeroes: a filesystem that compresses or dedups must not shortcut the write.
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i * 131 % 251) as u8;
    }
    let block_devices = block_device(dir, device).map(|d| probe_block(&d));
    let mut trials = Vec::new();
    for i in 0..TRIALS {
        match trial(&file, &buf, (i * PROBE_BYTES) as u64) {
            Ok(t) => trials.push(t),
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                let (generation, why) = match by_release {
                    Some(Generation::Unsupported) | None => (
                        Some(Generation::Unsupported),
                        format!("RWF_DONTCACHE writes are refused ({e}): kernel {kernel} predates the flag"),
                    ),
                    other => (
                        other,
                        format!(
                            "RWF_DONTCACHE writes are refused on {fs_type} ({e}); the generation comes from the \
                             kernel release only"
                        ),
                    ),
                };
                return Ok(Report {
                    kernel,
                    directory: dir.to_path_buf(),
                    fs_type,
                    by_release,
                    filesystem_accepts: false,
                    by_behaviour: None,
                    generation,
                    source: "kernel release",
                    evidence: why,
                    trials,
                    block_devices,
                });
            }
            Err(e) => return Err(e),
        }
    }
    let by_behaviour = verdict(&trials);
    let dirty: Vec<String> = trials.iter().map(|t| format!("{}/{}", t.dirty, t.pages)).collect();
    let mut evidence = format!(
        "{TRIALS} writes of {} MiB with RWF_DONTCACHE on {fs_type}: pages still dirty when each call returned: {}",
        PROBE_BYTES >> 20,
        dirty.join(", ")
    );
    if by_release.is_some() && by_release != Some(by_behaviour) {
        evidence.push_str(&format!(
            "; kernel {kernel}'s release number says {}, its behaviour wins",
            by_release.map(Generation::describe).unwrap_or_default()
        ));
    }
    Ok(Report {
        kernel,
        directory: dir.to_path_buf(),
        fs_type,
        by_release,
        filesystem_accepts: true,
        by_behaviour: Some(by_behaviour),
        generation: Some(by_behaviour),
        source: "behaviour",
        evidence,
        trials,
        block_devices,
    })
}

/// The report for a person.
pub fn render(r: &Report) -> String {
    let mut out = format!("kernel {} on {} ({})\n", r.kernel, r.directory.display(), r.fs_type);
    let generation = r.generation.map(Generation::describe).unwrap_or("unknown");
    out.push_str(&format!("RWF_DONTCACHE: {generation}, from its {}\n  {}\n", r.source, r.evidence));
    if let Some(b) = &r.block_devices {
        let said = match b.supported {
            Some(true) => "supported (the Linux 7.3+ generation)",
            Some(false) => "not supported (before Linux 7.3)",
            None => "unknown",
        };
        out.push_str(&format!("on block devices: {said}\n  {}\n", b.evidence));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_numbers_map_to_generations() {
        assert_eq!(Generation::of_release("6.13.7"), Some(Generation::Unsupported));
        assert_eq!(Generation::of_release("6.14.0-rc1"), Some(Generation::InlineFlush));
        assert_eq!(Generation::of_release("6.18.0-1-amd64"), Some(Generation::InlineFlush));
        assert_eq!(Generation::of_release("7.1.3"), Some(Generation::InlineFlush));
        assert_eq!(Generation::of_release("7.2.0"), Some(Generation::FlusherKick));
        assert_eq!(Generation::of_release("10.0"), Some(Generation::FlusherKick));
        assert_eq!(Generation::of_release("unknown"), None);
    }

    #[test]
    fn verdict_reads_the_median_dirty_fraction() {
        let t = |dirty| Trial { pages: 100, dirty, writeback: 0, cached: 100 };
        assert_eq!(verdict(&[t(0), t(0), t(90)]), Generation::InlineFlush);
        assert_eq!(verdict(&[t(100), t(95), t(0)]), Generation::FlusherKick);
        assert_eq!(verdict(&[t(30), t(30), t(30)]), Generation::Unclear);
    }
}
