//! `dontcache run`: the command runs as a child with the shim preloaded
//! (and, with `--watch`, its process tree watched with fanotify); its
//! processes hand the files they have not finished at exit to this one
//! (`handoff`), which finishes them before it exits. The command's exit
//! status is passed on, or, when it succeeded but a file's writeback
//! failed after the file was closed, `EXIT_LATE_ERROR`.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};

use dontcache::{handoff, Options};

use crate::handoff::Receiver;
use crate::watch::Watcher;

/// The command succeeded, but writeback of a file it had closed failed:
/// the data it wrote did not all reach the disk (sysexits' EX_IOERR).
pub const EXIT_LATE_ERROR: u8 = 74;

/// The shim sits next to this binary (target/release, or PREFIX/lib when
/// installed); DONTCACHE_PRELOAD (set and not empty) overrides. A path the
/// dynamic loader would not load is refused here: the loader only warns
/// and runs the command without the shim, every file cached.
fn preload_path() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("DONTCACHE_PRELOAD").filter(|p| !p.is_empty()) {
        // Absolute: the command's processes may change directory before
        // they start others.
        let shim = std::fs::canonicalize(&p)
            .ok()
            .filter(|c| c.is_file())
            .ok_or_else(|| format!("DONTCACHE_PRELOAD={} is not a file: point it at libdontcache_preload.so, or unset it to use the one installed with dontcache", Path::new(&p).display()))?;
        return loadable(shim);
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find my own path: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    for cand in [dir.join("libdontcache_preload.so"), dir.join("../lib/libdontcache_preload.so")] {
        if cand.exists() {
            return loadable(cand);
        }
    }
    Err(format!(
        "libdontcache_preload.so is not next to {} nor in ../lib: build it (cargo build --release) or set DONTCACHE_PRELOAD",
        exe.display()
    ))
}

/// `shim`, unless its path holds what LD_PRELOAD takes as a separator (a
/// colon or a space): the loader would look for pieces of it.
fn loadable(shim: PathBuf) -> Result<PathBuf, String> {
    if shim.as_os_str().as_encoded_bytes().iter().any(|b| matches!(b, b':' | b' ' | b'\t')) {
        return Err(format!(
            "the shim's path {} holds a colon or a space, which LD_PRELOAD reads as separators: put libdontcache_preload.so where its path has neither and set DONTCACHE_PRELOAD to it",
            shim.display()
        ));
    }
    Ok(shim)
}

/// Whether `prog` (as PATH finds it) is an ELF executable without an
/// interpreter: statically linked, out of the shim's reach.
fn statically_linked(prog: &std::ffi::OsStr) -> bool {
    let path = if Path::new(prog).components().count() > 1 {
        Some(PathBuf::from(prog))
    } else {
        std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(prog)).find(|c| c.is_file()))
    };
    let Some(Ok(mut f)) = path.map(std::fs::File::open) else { return false };
    let mut head = vec![0u8; 4096];
    let n = f.read(&mut head).unwrap_or(0);
    let head = &head[..n];
    // ELF64 little-endian: program headers at e_phoff (0x20), e_phentsize
    // (0x36), e_phnum (0x38); PT_INTERP is type 3.
    if n < 0x40 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(head[0x20..0x28].try_into().unwrap_or_default()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).all(|i| {
        let at = phoff + i * size;
        at + 4 > n || u32::from_le_bytes(head[at..at + 4].try_into().unwrap_or_default()) != 3
    })
}

/// A private file the shims of the command's processes append late errors
/// to ("errno\tescaped path" lines); removed when dropped.
struct Report(PathBuf);

impl Report {
    fn create() -> Result<Report, String> {
        let dir = std::env::temp_dir();
        for n in 0..100u32 {
            let p = dir.join(format!("dontcache-report-{}-{n}", std::process::id()));
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&p) {
                Ok(_) => return Ok(Report(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("cannot create the late-error report in {}: {e}", dir.display())),
            }
        }
        Err(format!("cannot create the late-error report in {}", dir.display()))
    }

    /// The late errors the command's processes reported: (errno, path).
    fn errors(&self) -> Vec<(i32, PathBuf)> {
        let text = std::fs::read(&self.0).unwrap_or_default();
        text.split(|&b| b == b'\n')
            .filter_map(|line| {
                let tab = line.iter().position(|&b| b == b'\t')?;
                let errno = std::str::from_utf8(&line[..tab]).ok()?.parse().ok()?;
                Some((errno, unescape(&line[tab + 1..])))
            })
            .collect()
    }
}

/// The shim's escaping undone: `\\`, `\n`, `\t`.
fn unescape(b: &[u8]) -> PathBuf {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b'\\', Some(b'n')) => out.push(b'\n'),
            (b'\\', Some(b't')) => out.push(b'\t'),
            (b'\\', Some(b'\\')) => out.push(b'\\'),
            (c, _) => {
                out.push(c);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(out))
}

impl Drop for Report {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The signals `run` takes over while the command runs.
fn forwarded() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset fill it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Passes signals sent to `run` on to the command. Signals the terminal
/// sent (Ctrl-C) reached the command's process group already, and are not
/// sent twice.
fn forward_signals(child: i32) {
    let set = forwarded();
    std::thread::spawn(move || loop {
        // SAFETY: siginfo_t is plain data filled by sigwaitinfo.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: set and info are valid.
        let sig = unsafe { libc::sigwaitinfo(&set, &mut info) };
        if sig > 0 && info.si_code <= 0 {
            // SAFETY: signals our own child.
            unsafe { libc::kill(child, sig) };
        }
    });
}

/// The soft `RLIMIT_NOFILE` `run` raises itself to, where the hard limit
/// allows: each file in escrow (`handoff`) is a descriptor, and up to half
/// the limit are held; under Debian's soft limit of 1,024 that was 512 for
/// every process of the command together.
const OPEN_FILES_WANTED: u64 = 65536;

/// `LD_PRELOAD` for the command: the shim first, then what was preloaded
/// already.
fn preload_with(shim: &Path) -> OsString {
    let mut preload = OsString::from(shim.as_os_str());
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    preload
}

pub fn run(opts: Options, watch: bool, cmd: &[OsString]) -> Result<u8, String> {
    // Blocked before any thread starts (the hand-over's receiver, the
    // watcher's), as threads inherit the mask: one that did not block them
    // would take a SIGTERM meant for the command and die of it, `run` with
    // it, and leave the command running.
    let set = forwarded();
    // SAFETY: blocks signals in this thread; the child gets its mask back.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    let shim = preload_path()?;
    let mut watcher = if watch { Some(Watcher::new(opts)?) } else { None };
    if !watch && statically_linked(&cmd[0]) {
        eprintln!(
            "dontcache: {} is statically linked: the shim cannot enter it, so its files stay cached; \
             run it with --watch (root) to cover it",
            cmd[0].to_string_lossy()
        );
    }
    // The limits as they were: the command starts with them.
    let commands_limits = dc_sys::raise_open_files_limit(OPEN_FILES_WANTED).ok();
    let report = Report::create()?;
    // Without it, each process waits for its own files at exit, as the
    // shim does outside `dontcache run`.
    let receiver = Receiver::start(opts).ok();
    if watch {
        // Orphans of the tree reparent here, so the watcher can tell they
        // are the command's.
        // SAFETY: plain prctl.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
    }
    let mut command = Command::new(&cmd[0]);
    command
        .args(&cmd[1..])
        .env("LD_PRELOAD", preload_with(&shim))
        .env("DONTCACHE_POLICY", opts.policy.name())
        .env("DONTCACHE_HIGH_WATER", opts.high_water.to_string())
        .env("DONTCACHE_REPORT", &report.0);
    match &receiver {
        Some(r) => command.env(handoff::ENV, r.name()),
        None => command.env_remove(handoff::ENV),
    };
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            if let Some((soft, hard)) = commands_limits {
                // The prlimit64 system call alone.
                dc_sys::set_open_files_limits(soft, hard)?;
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| format!("cannot run {}: {e}", cmd[0].to_string_lossy()))?;
    let pid = child.id() as i32;
    forward_signals(pid);
    let status = match &mut watcher {
        Some(w) => watch_until_exit(w, &mut child, pid)?,
        None => child.wait().map_err(|e| format!("waiting for the command: {e}"))?,
    };
    // The report goes before `run` raises the command's signal below, which
    // ends this process without running any destructor.
    let late = finish_files(report, receiver, watcher.as_mut());
    if let Some(sig) = status.signal() {
        // Die the way the command died, so the caller sees the same status.
        // SAFETY: restores the default action and raises the signal.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(sig);
        }
        return Ok(128 + sig as u8);
    }
    let code = status.code().unwrap_or(1) as u8;
    if code == 0 && late > 0 {
        eprintln!(
            "dontcache: {late} writeback error(s) the program was not told of (above); exit status {EXIT_LATE_ERROR}"
        );
        return Ok(EXIT_LATE_ERROR);
    }
    Ok(code)
}

/// After the command exited: finishes the files its processes handed over
/// and the watched ones, and says every late error, from the processes'
/// reports, this process's engine, and the files in escrow of processes
/// that ended before they were told, and removes the report. Returns how
/// many there were.
fn finish_files(report: Report, receiver: Option<Receiver>, watcher: Option<&mut Watcher>) -> usize {
    let untold = receiver.map(Receiver::finish).unwrap_or_default();
    let mut late = report.errors();
    if let Some(w) = watcher {
        w.finish();
        late.append(&mut w.late);
    }
    let _ = dontcache::flush();
    late.extend(dontcache::late_errors().into_iter().map(|e| (e.errno, e.path)));
    // A file finished here whose killed process had met an error in it
    // may fail again in this process's wait: one line a file.
    let mut seen = std::collections::HashSet::new();
    let lines = untold
        .iter()
        .map(|e| (e, "and its process ended before it was told"))
        .chain(late.iter().map(|e| (e, "after the program closed it")));
    let mut count = 0;
    for ((errno, path), when) in lines.filter(|((_, path), _)| seen.insert(path.clone())) {
        let e = std::io::Error::from_raw_os_error(*errno);
        eprintln!("dontcache: writeback of {} failed {when}: {e}", path.display());
        count += 1;
    }
    count
}

/// Under `--watch`: reads the tree's fanotify events until the command
/// exits, reaping the orphans it leaves (dontcache is their subreaper).
fn watch_until_exit(w: &mut Watcher, child: &mut Child, pid: i32) -> Result<ExitStatus, String> {
    w.set_root(pid);
    loop {
        w.poll(50);
        let exited = child.try_wait().map_err(|e| format!("waiting for the command: {e}"))?;
        // Orphans left by the tree; their events were read above.
        // SAFETY: reaps our own (subreaped) children.
        while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        if let Some(s) = exited {
            return Ok(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_paths_round_trip() {
        assert_eq!(unescape(b"/a\\tb\\nc\\\\d"), PathBuf::from("/a\tb\nc\\d"));
        assert_eq!(unescape(b"plain"), PathBuf::from("plain"));
    }

    #[test]
    fn tells_static_from_dynamic_binaries() {
        assert!(!statically_linked(std::ffi::OsStr::new("sh")), "sh is dynamically linked");
        assert!(!statically_linked(std::ffi::OsStr::new("/nonexistent/x")));
    }
}
