//! libdontcache_preload.so: interposes the file calls of any dynamically
//! linked program and routes regular files, written or read, through
//! libdontcache. Everything else goes straight to libc.
//!
//! Rules that keep this safe:
//! - The engine itself calls libc (pwritev2, close, fstat, ...), and those
//!   calls resolve to the functions here. A thread-local flag marks "inside
//!   the engine", and then every function here goes straight to libc.
//! - Real functions are found with dlsym(RTLD_NEXT) once and cached.
//! - A tracked descriptor's handle is reference counted (`table`): a close
//!   on one thread never frees it under a call on another.
//! - Calls behave like the system calls: the kernel validates the caller's
//!   buffers, counts and offsets first, and errno is left as it was on
//!   success.
//!
//! What the shim sees: `open*`/`creat*`/`fopen*`/`fdopen`, the read and
//! write families, `fsync`, `fdatasync`, `ftruncate`, every close
//! (`close`, `close_range`, `closefrom`, `fclose`, `dup2`/`dup3` over a
//! number), `copy_file_range`, `sendfile`, `splice`, `mmap`/`munmap`, and
//! locks (`fcntl`'s, `flock`, `lockf`: a file the program locks is let go
//! of first, `locks`), and unmounts (`umount`, `umount2`: the filesystem's
//! files are let go of first, `mounts`).
//! Descriptors inherited from the parent are looked at on first use, and
//! at startup (a shell redirection written by stdio is never "used" where
//! the shim can see it). What it cannot see (stdio's internal writes and
//! reads, io_uring, stores through a mapping) the flusher finds by sweeping
//! every tracked file for pages the library did not count.

#![allow(clippy::missing_safety_doc)]

mod copy;
mod exec;
mod fds;
mod handoff;
mod io;
mod limits;
mod locks;
mod mmap;
mod mounts;
mod real;
mod signals;
mod stdio;
mod table;

use std::io::Write;
use std::os::unix::ffi::OsStrExt;

use table::{engine, inside};

/// The process this image runs as. A `vfork` child shares the parent's
/// memory and runs no fork handler: its pid differs from this one, and it
/// must not touch the parent's table or engine.
pub(crate) static PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forked_child() {
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() }, std::sync::atomic::Ordering::Relaxed);
    mmap::after_fork();
    signals::forked();
    table::forget_handleless_files_of_parent();
    table::forget_room_wanted_of_parent();
}

extern "C" fn in_parent() {
    mmap::after_fork();
}

pub(crate) fn own_process() -> bool {
    // SAFETY: getpid has no preconditions.
    PID.load(std::sync::atomic::Ordering::Relaxed) == unsafe { libc::getpid() }
}

/// A `vfork` child (posix_spawn's, CPython's subprocess) shares its
/// parent's memory, the shim's table and the engine included, but not its
/// descriptors: what it opens, dups and closes before `exec` is its own,
/// and through the table it would change the parent's files (a
/// subprocess's `close_range` dropped the parent's open inputs; a `dup`
/// left the parent a handle on a number that was the child's, whose later
/// release closed one of the parent's). Such a child goes straight to
/// libc. Asked only where the table would change, as it costs a `getpid`.
pub(crate) fn in_vfork_child() -> bool {
    !own_process()
}

/// At load: the library's descriptors get numbers above the program's
/// limit (`limits`), and descriptors the program inherited (`cmd > file`,
/// `cmd < file`) are tracked from the start.
extern "C" fn track_inherited() {
    forked_child();
    dontcache::watch_forks_now();
    // SAFETY: registers handlers that store the pid, and take and give back
    // the list of mappings.
    unsafe { libc::pthread_atfork(Some(mmap::before_fork), Some(in_parent), Some(forked_child)) };
    signals::hold_default_stops();
    let fds: Vec<i32> = match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect(),
        Err(_) => Vec::new(),
    };
    limits::raise_at_load(&fds);
    for fd in fds {
        table::get(fd);
    }
}

#[used]
#[link_section = ".init_array"]
static TRACK_INHERITED: extern "C" fn() = track_inherited;

/// `\n`, `\t` and `\` escaped, so a report line is one line whatever the path.
fn escaped(path: &std::path::Path) -> String {
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            _ => out.push(b as char),
        }
    }
    out
}

/// At exit: files still open are handed to the flusher, every file's
/// writeback is waited for (or, under `dontcache run`, the files not
/// finished are handed to it to finish), and writeback errors nobody was
/// told about (late errors) go to stderr, one line per file, and to the
/// report file `dontcache run` reads for its exit status
/// (`DONTCACHE_REPORT`). Where a stop signal's settling is under way
/// (`signals`), that one ends the process.
extern "C" fn settle_at_exit() {
    if inside() || !own_process() {
        return;
    }
    if signals::claim_settling() {
        settle_files();
    } else {
        signals::await_settled();
    }
}

/// `settle_at_exit`'s work, for whoever claimed it; a stop signal that
/// came meanwhile ends the process once it is done.
pub(crate) fn settle_files() {
    mmap::settle_at_exit();
    let handles = table::take_all();
    engine(|| {
        let mut late: Vec<(i32, std::path::PathBuf)> = Vec::new();
        for h in handles {
            let path = dc_sys::fd_path(std::os::fd::AsFd::as_fd(&*h)).unwrap_or_default();
            if let (Err(e), _) = h.release_shared() {
                late.push((e.raw_os_error().unwrap_or(libc::EIO), path));
            }
        }
        if !handoff::hand_off_unfinished() {
            let _ = dontcache::flush();
        }
        late.extend(dontcache::locked::settle_still_open());
        report_late(late);
        let orphaned = dontcache::orphaned_pages();
        if orphaned > 0 {
            eprintln!(
                "libdontcache_preload: {orphaned} pages were under writeback with nothing to wait for them, \
                 found and written back late (a bug of the library: please report it)"
            );
        }
        let (pages, files) = dontcache::unaccounted();
        if pages > 0 || files > 0 {
            eprintln!(
                "libdontcache_preload: the exit stopped waiting for {pages} pages and {files} closed files \
                 still counted with nothing left to do for them (a bug of the library: please report it)"
            );
        }
    });
    signals::settled();
}

/// Before `exec`: the new image keeps nothing of this one's engine (its
/// descriptors close on exec, its threads and mappings go), so what this
/// one wrote or read is written back and dropped now, locked files'
/// through the program's descriptors, and its late errors (and those kept
/// for its open files) reported, as at exit. The files stay tracked: an
/// `exec` that fails goes on with them. A program that
/// wrote 200 MiB and then exec'd left 192-200 MiB of it cached.
pub(crate) fn settle_before_exec() {
    if inside() || !own_process() {
        return;
    }
    mmap::sync_writable();
    table::hand_over_made_files();
    let handles = table::tracked();
    engine(|| {
        let mut late: Vec<(i32, std::path::PathBuf)> = Vec::new();
        for h in handles {
            if let Some(e) = h.take_error() {
                let path = dc_sys::fd_path(std::os::fd::AsFd::as_fd(&*h)).unwrap_or_default();
                late.push((e.raw_os_error().unwrap_or(libc::EIO), path));
            }
        }
        let _ = dontcache::flush();
        late.extend(dontcache::locked::settle_still_open());
        report_late(late);
    });
}

/// Late errors, and the engine's own, to stderr (a line a file) and to the
/// report file `dontcache run` reads for its exit status.
fn report_late(mut late: Vec<(i32, std::path::PathBuf)>) {
    late.extend(dontcache::late_errors().into_iter().map(|e| (e.errno, e.path)));
    if late.is_empty() {
        return;
    }
    // The report's descriptor is the library's for a moment, while the
    // program's other threads may still open files.
    dontcache::own::making(|| {
        let mut report =
            std::env::var_os("DONTCACHE_REPORT").and_then(|p| std::fs::OpenOptions::new().append(true).open(p).ok());
        for (errno, path) in &late {
            let e = std::io::Error::from_raw_os_error(*errno);
            eprintln!("dontcache: writeback of {} failed after the program closed it: {e}", path.display());
            if let Some(f) = &mut report {
                let _ = writeln!(f, "{errno}\t{}", escaped(path));
            }
        }
    });
}

#[used]
#[link_section = ".fini_array"]
static SETTLE_AT_EXIT: extern "C" fn() = settle_at_exit;

/// `_exit` skips `.fini_array`; programs that leave that way (fio's job
/// processes, a Python child ending with `os._exit`) still get their files
/// settled first, as at exit.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: std::ffi::c_int) -> ! {
    settle_at_exit();
    real::_exit()(status)
}

#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn _Exit(status: std::ffi::c_int) -> ! {
    settle_at_exit();
    real::_Exit()(status)
}
