//! `dontcache cp`: copies files through libdontcache, reading drop-behind
//! and writing write-behind.
//!
//! What it may touch, and how (docs/SECURITY.md says the same):
//! - A destination that does not exist is written under a temporary name
//!   in its directory and renamed into place only once the copy is written
//!   back without error, with RENAME_NOREPLACE (never over a file that
//!   appeared meanwhile). A failed or interrupted copy leaves nothing.
//! - An existing regular destination (a symlink to one is followed, as cp
//!   does) is overwritten in place, as coreutils cp does without
//!   `--remove-destination`: its inode, mode, owner and hard links stay. A
//!   copy that fails there leaves it incomplete, as cp would, and says so.
//! - Any other destination (a device, FIFO, socket, a directory where a file
//!   is meant, a dangling symlink) is refused before any I/O, exit 2.
//! - Holes in the source stay holes (SEEK_DATA/SEEK_HOLE).
//! - SIGINT, SIGTERM and SIGHUP remove every temporary before exiting.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use dontcache::{Handle, Options, Pending, Stats};

/// Copies whose writeback is awaited at once; beyond, the oldest is
/// finished first. Enough to batch small files in the flusher, few enough
/// that an interruption has little to clean up.
const WINDOW: usize = 64;

/// Temporaries that exist now, removed on a signal.
static TEMPS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn temps() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    TEMPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// An error, with the exit status it calls for.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

fn usage(message: String) -> Failure {
    Failure { code: 2, message }
}

/// Where one source goes.
enum Target {
    /// Nothing there: written under a temporary name, renamed into place.
    New(PathBuf),
    /// A regular file (perhaps behind a symlink): overwritten in place.
    Existing(PathBuf),
}

/// One copy in flight: its writeback, and what to do once it is done.
struct InFlight {
    pending: Pending,
    src: PathBuf,
    shown: PathBuf,
    temp: Option<PathBuf>,
    dst: PathBuf,
    stats: Stats,
}

/// Decides where `src` goes, refusing what is not a regular file or nothing.
fn target(src: &Path, dst: &Path) -> Result<Target, Failure> {
    let what = |kind: &str| {
        usage(format!(
            "{}: the destination is {kind}; dontcache cp writes regular files only (nothing was copied)",
            dst.display()
        ))
    };
    match std::fs::symlink_metadata(dst) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Target::New(dst.to_path_buf())),
        Err(e) => return Err(usage(format!("{}: {e}", dst.display()))),
        Ok(_) => {}
    }
    // Symlinks are followed, as cp follows them.
    let meta = match std::fs::metadata(dst) {
        Ok(m) => m,
        Err(_) => {
            return Err(usage(format!(
                "{}: not writing through a dangling symlink (nothing was copied)",
                dst.display()
            )))
        }
    };
    let ft = meta.file_type();
    if ft.is_dir() {
        return Err(what("a directory"));
    }
    if ft.is_block_device() || ft.is_char_device() {
        return Err(what("a device"));
    }
    if ft.is_fifo() {
        return Err(what("a FIFO"));
    }
    if ft.is_socket() {
        return Err(what("a socket"));
    }
    // A file of procfs or sysfs looks regular, but writing it is a call
    // into the kernel: cp's bytes would reach it as commands.
    if let Ok(fs) = dc_sys::fs_type_name(dst) {
        if dc_sys::is_generated_fs(&fs) {
            return Err(what(&format!("a file the kernel generates ({fs})")));
        }
    }
    if let Ok(s) = std::fs::metadata(src) {
        if (s.dev(), s.ino()) == (meta.dev(), meta.ino()) {
            return Err(usage(format!("{} and {} are the same file", src.display(), dst.display())));
        }
    }
    Ok(Target::Existing(std::fs::canonicalize(dst).unwrap_or_else(|_| dst.to_path_buf())))
}

/// Every source's target, decided before anything is written.
fn plan(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Target)>, Failure> {
    let (dst, srcs) = paths.split_last().expect("clap requires two paths");
    let into_dir = dst.is_dir();
    if srcs.len() > 1 && !into_dir {
        return Err(usage(format!(
            "copying {} files needs a directory as destination; {} is not one",
            srcs.len(),
            dst.display()
        )));
    }
    srcs.iter()
        .map(|src| {
            let to = if into_dir {
                match src.file_name() {
                    Some(n) => dst.join(n),
                    None => return Err(usage(format!("{}: cannot copy a path without a file name", src.display()))),
                }
            } else {
                dst.clone()
            };
            target(src, &to).map(|t| (src.clone(), t))
        })
        .collect()
}

/// Removes every temporary on SIGINT, SIGTERM or SIGHUP, then exits as the
/// signal would have (128 + its number).
fn clean_up_on_signals() {
    // SAFETY: sigset_t is plain data; the calls fill and apply it.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    std::thread::spawn(move || {
        let mut sig = 0;
        // SAFETY: set and sig are valid.
        if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
            for t in temps().iter() {
                let _ = std::fs::remove_file(t);
            }
            eprintln!("dontcache: interrupted; temporaries removed");
            std::process::exit(128 + sig);
        }
    });
}

pub fn cp(opts: Options, stats: bool, paths: &[PathBuf]) -> Result<(), Failure> {
    let plan = plan(paths)?;
    clean_up_on_signals();
    let mut failed = 0;
    let mut window: std::collections::VecDeque<InFlight> = std::collections::VecDeque::new();
    for (src, target) in plan {
        match start(&src, target, opts) {
            Ok(c) => window.push_back(c),
            Err(e) => {
                eprintln!("dontcache: {e}");
                failed += 1;
            }
        }
        while window.len() > WINDOW {
            failed += finish(window.pop_front().expect("non-empty"), stats) as usize;
        }
    }
    for c in window {
        failed += finish(c, stats) as usize;
    }
    if failed > 0 {
        return Err(Failure { code: 1, message: format!("{failed} of {} copies failed", paths.len() - 1) });
    }
    Ok(())
}

/// Copies `src` to its target and hands the output to the flusher.
fn start(src: &Path, target: Target, opts: Options) -> Result<InFlight, String> {
    let meta = std::fs::metadata(src).map_err(|e| format!("{}: {e}", src.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file (dontcache cp copies files, not directories)", src.display()));
    }
    let input = Handle::open(src, libc::O_RDONLY, 0, opts).map_err(|e| format!("{}: {e}", src.display()))?;
    let (out_path, temp, dst) = match &target {
        Target::New(dst) => {
            let name = dst.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let temp = dst.with_file_name(format!(".{name}.dontcache-{}", std::process::id()));
            (temp.clone(), Some(temp), dst.clone())
        }
        Target::Existing(dst) => (dst.clone(), None, dst.clone()),
    };
    let flags = match temp {
        Some(_) => libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        None => libc::O_WRONLY | libc::O_TRUNC,
    };
    if let Some(t) = &temp {
        temps().push(t.clone());
    }
    let output = match Handle::open(&out_path, flags, meta.permissions().mode() & 0o777, opts) {
        Ok(h) => h,
        Err(e) => {
            forget_temp(temp.as_deref(), false);
            return Err(format!("{}: {e}", out_path.display()));
        }
    };
    let copied = pump(&input, &output, meta.len()).map_err(|e| format!("{} -> {}: {e}", src.display(), dst.display()));
    let _ = input.close();
    let stats = output.stats();
    let (closed, pending) = output.close_deferred();
    let r = copied.and(closed.map_err(|e| format!("{}: {e}", dst.display())));
    if let Err(e) = r {
        let _ = pending.wait();
        forget_temp(temp.as_deref(), true);
        return Err(incomplete(e, temp.is_none()));
    }
    Ok(InFlight { pending, src: src.to_path_buf(), shown: dst.clone(), temp, dst, stats })
}

/// Waits for a copy's writeback, then puts it in place. Returns whether it
/// failed.
fn finish(c: InFlight, stats: bool) -> bool {
    let done = c.pending.wait().map_err(|e| format!("{}: {e}", c.dst.display())).and_then(|()| match &c.temp {
        Some(t) => dc_sys::rename_noreplace(t, &c.dst).map_err(|e| match e.raw_os_error() {
            Some(libc::EEXIST) => format!("{}: appeared while copying; not replaced", c.dst.display()),
            _ => format!("{}: {e}", c.dst.display()),
        }),
        None => Ok(()),
    });
    let existing = c.temp.is_none();
    forget_temp(c.temp.as_deref(), done.is_err());
    match done {
        Ok(()) => {
            if stats {
                let s = c.stats;
                println!(
                    "{} -> {}: {} bytes, written back {}, dropped {}, kicks {} (+{} coalesced), passes {}, stalls {}",
                    c.src.display(),
                    c.shown.display(),
                    s.bytes_written,
                    s.bytes_written_back,
                    s.bytes_dropped,
                    s.kicks,
                    s.coalesced_kicks,
                    s.passes,
                    s.highwater_stalls
                );
            }
            false
        }
        Err(e) => {
            eprintln!("dontcache: {}", incomplete(e, existing));
            true
        }
    }
}

fn incomplete(e: String, existing: bool) -> String {
    if existing {
        format!("{e} (the existing file was overwritten in place and is incomplete, as with cp)")
    } else {
        e
    }
}

/// Takes a temporary off the signal handler's list, removing it if `remove`.
fn forget_temp(temp: Option<&Path>, remove: bool) {
    let Some(t) = temp else { return };
    if remove {
        let _ = std::fs::remove_file(t);
    }
    temps().retain(|p| p != t);
}

/// Copies the data of `input` (`len` bytes) into `output`, leaving holes
/// where the source has them.
fn pump(input: &Handle, output: &Handle, len: u64) -> std::io::Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    let fd = std::os::fd::AsFd::as_fd(input);
    let mut at = 0u64;
    while at < len {
        // The next data and the hole after it; a filesystem without
        // SEEK_DATA has data everywhere.
        let data = match dc_sys::lseek(fd, at as i64, libc::SEEK_DATA) {
            Ok(d) => d,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => break,
            Err(_) => at,
        };
        let hole = dc_sys::lseek(fd, data as i64, libc::SEEK_HOLE).unwrap_or(len).min(len);
        let mut off = data;
        while off < hole {
            let want = ((hole - off) as usize).min(buf.len());
            let n = input.pread(&mut buf[..want], off)?;
            if n == 0 {
                // The source shrank under us: stop at its end.
                return output.truncate(off);
            }
            write_all(output, &buf[..n], off)?;
            off += n as u64;
        }
        at = hole;
    }
    output.truncate(len)
}

fn write_all(output: &Handle, mut data: &[u8], mut off: u64) -> std::io::Result<()> {
    while !data.is_empty() {
        match output.pwrite(data, off)? {
            0 => return Err(std::io::Error::new(std::io::ErrorKind::WriteZero, "the destination took 0 bytes")),
            n => {
                data = &data[n..];
                off += n as u64;
            }
        }
    }
    Ok(())
}
