//! A process that a stop signal (SIGINT, SIGTERM, SIGHUP, SIGPIPE) kills
//! at its default action settles its files first, under the shim alone
//! and under `dontcache run`, and still dies of that signal; the program
//! sees its signals' actions as they would be without the shim.

mod common;
use common::*;

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Writes up to `argv[2]` MiB of `w` to `argv[1]`, saying "writing" after
/// the first 64, and then waits for a signal (with `argv[3]`, says "done"
/// and exits instead).
const WRITER: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    static char buf[1 << 20];
    memset(buf, 'w', sizeof buf);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 2;
    for (int i = 0; i < atoi(argv[2]); i++) {
        if (write(fd, buf, sizeof buf) != sizeof buf) return 3;
        if (i == 64) { puts("writing"); fflush(stdout); }
    }
    if (argc > 3) { puts("done"); fflush(stdout); return 0; }
    pause();
    return 0;
}
"#;

/// Reads `argv[2]` bytes from each file from `argv[3]` on (keeping them
/// open), after `argv[1]` ms; says "read" and waits for a signal.
const READER: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    static char buf[1 << 20];
    usleep(atoi(argv[1]) * 1000);
    for (int f = 3; f < argc; f++) {
        int fd = open(argv[f], O_RDONLY);
        if (fd < 0) return 2;
        for (long left = atol(argv[2]), off = 0; left > 0; ) {
            ssize_t n = pread(fd, buf, left < (long)sizeof buf ? left : (long)sizeof buf, off);
            if (n <= 0) return 3;
            left -= n;
            off += n;
        }
    }
    puts("read");
    fflush(stdout);
    pause();
    return 0;
}
"#;

/// Says what it sees of its stop signals' actions, then sets its own: a
/// handler for SIGINT (which must run), SIG_IGN for SIGHUP (which must be
/// ignored), and exits 0 after both were raised.
const VIEWER: &str = r#"
#include <signal.h>
#include <stdio.h>
static volatile sig_atomic_t caught;
static void on_int(int sig) { caught = sig; }
static const char *name(void (*h)(int)) {
    return h == SIG_DFL ? "default" : h == SIG_IGN ? "ignore" : "handler";
}
int main(void) {
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    for (int i = 0; i < 4; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old)) return 2;
        printf("%d %s %d\n", sigs[i], name(old.sa_handler), old.sa_flags);
    }
    struct sigaction act = {0};
    act.sa_handler = on_int;
    struct sigaction old;
    if (sigaction(SIGINT, &act, &old)) return 3;
    printf("old %s\n", name(old.sa_handler));
    printf("signal %s\n", name(signal(SIGHUP, SIG_IGN)));
    raise(SIGHUP);
    raise(SIGINT);
    printf("caught %d\n", caught);
    return 0;
}
"#;

fn preload() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_dontcache")).with_file_name("libdontcache_preload.so")
}

/// Waits until the child says `word` on its stdout.
fn until_it_says(child: &mut Child, word: &str) {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), word, "the program's first line");
}

/// `cmd` with the stop signals at their default action, as these tests
/// expect of the program: a harness started under `nohup`, or as a
/// shell's background job, hands them on ignored, and the shim rightly
/// keeps them ignored (the writer then lived through SIGHUP, and the test
/// waited for it forever).
fn at_default_signals(cmd: &mut Command) -> &mut Command {
    // SAFETY: signal(2) is async-signal-safe, and the closure touches
    // nothing else between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGPIPE] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        })
    }
}

fn send(pid: i32, sig: i32) {
    dc_sys::kill(pid, sig).unwrap();
}

fn all_bytes_are(path: &Path, byte: u8) -> bool {
    std::fs::read(path).unwrap().iter().all(|&b| b == byte)
}

/// The file's writer stopped mid-stream, as Ctrl-C or `kill` stop it:
/// alone under the shim (SIGTERM, SIGHUP, SIGPIPE), under `dontcache
/// run` sent to `run` (which passes it on), and to `run`'s process group
/// (as `kill -INT -PGID` does: the command gets it twice). Without the
/// shim's handler each left 71-119 MiB of the file cached.
#[test]
fn a_writer_stopped_by_a_signal_leaves_nothing_cached() {
    let s = scratch!("signals-writer");
    let exe = compile_c(&s.dir, "writer", WRITER, &[]);
    let dst = s.path("out");
    let shim = preload();
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
        let mut child = at_default_signals(Command::new(&exe).arg(&dst).arg("2048"))
            .env("LD_PRELOAD", &shim)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        until_it_says(&mut child, "writing");
        send(child.id() as i32, sig);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(sig), "the writer dies of the signal, as without the shim: {status:?}");
        assert_eq!(cached_pages(&dst), 0, "signal {sig}: the written pages left cached");
        assert!(all_bytes_are(&dst, b'w'), "signal {sig}: the file holds what was written");
    }
    let run = |group: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dontcache"));
        at_default_signals(cmd.args(["run", "--"]).arg(&exe).arg(&dst).arg("2048").stdout(Stdio::piped()));
        if group {
            // SAFETY: setsid is async-signal-safe.
            unsafe { cmd.pre_exec(|| (libc::setsid() >= 0).then_some(()).ok_or_else(std::io::Error::last_os_error)) };
        }
        cmd.spawn().unwrap()
    };
    for (group, sig) in [(false, libc::SIGTERM), (true, libc::SIGINT)] {
        let mut child = run(group);
        until_it_says(&mut child, "writing");
        let pid = child.id() as i32;
        send(if group { -pid } else { pid }, sig);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(sig), "run dies of the command's signal: {status:?}");
        assert_eq!(cached_pages(&dst), 0, "under run, signal {sig} (group {group}): the written pages left cached");
        assert!(all_bytes_are(&dst, b'w'));
    }
}

/// A stop signal that comes while the exit hook settles the files (256
/// MiB left dirty under a 1 GiB mark take a while to write back) takes
/// effect once they are settled: the process dies of it, nothing cached.
#[test]
fn a_signal_during_the_exits_settling_waits_for_it() {
    let s = scratch!("signals-exit");
    let exe = compile_c(&s.dir, "writer", WRITER, &[]);
    let dst = s.path("out");
    let mut died_of_it = 0;
    for round in 0..3 {
        let mut child = at_default_signals(&mut Command::new(&exe))
            .arg(&dst)
            .args(["256", "exit"])
            .env("LD_PRELOAD", preload())
            .env("DONTCACHE_HIGH_WATER", "1g")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut said = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        while said.lines().count() < 2 && out.read_line(&mut said).unwrap() > 0 {}
        assert_eq!(said, "writing\ndone\n");
        send(child.id() as i32, libc::SIGTERM);
        let status = child.wait().unwrap();
        // A writer already done (a zombie takes the signal too) exits 0.
        assert!(
            status.signal() == Some(libc::SIGTERM) || status.success(),
            "round {round}: the writer dies of the signal or exits: {status:?}"
        );
        died_of_it += usize::from(status.signal().is_some());
        assert_eq!(cached_pages(&dst), 0, "round {round}: pages left cached");
    }
    assert!(died_of_it > 0, "no round's signal came while the exit settled (138-193 ms here)");
}

/// A reader stopped while it holds its inputs open: a big one read in
/// part through a handle (drop-behind goes half a high-water mark at a
/// time, so 16 MiB of it are still cached), which the shim's settling
/// thread finishes, and, in a process with no handle, small ones read
/// without one, which the handler drops itself. (The reader reads at
/// offsets: what a small input's reads at the file position bring in, the
/// kernel drops as they go.)
#[test]
fn a_reader_stopped_by_a_signal_leaves_its_inputs_uncached() {
    let s = scratch!("signals-reader");
    let exe = compile_c(&s.dir, "reader", READER, &[]);
    let big = s.path("big");
    std::fs::write(&big, vec![7u8; 64 << 20]).unwrap();
    let smalls: Vec<PathBuf> = (0..4).map(|i| s.path(&format!("small{i}"))).collect();
    for f in &smalls {
        std::fs::write(f, vec![3u8; 64 << 10]).unwrap();
    }
    // Past the age at which a process gets its settling thread (20 ms).
    let cases: [(&str, Vec<&Path>, u64); 2] =
        [("100", vec![big.as_path()], 16 << 20), ("100", smalls.iter().map(PathBuf::as_path).collect(), 64 << 10)];
    for (delay, files, bytes) in cases {
        for f in &files {
            std::fs::File::open(f).unwrap().sync_all().unwrap();
            drop_cache_of(f);
            assert_eq!(cached_pages(f), 0);
        }
        let mut child = at_default_signals(&mut Command::new(&exe))
            .arg(delay)
            .arg(bytes.to_string())
            .args(&files)
            .env("LD_PRELOAD", preload())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        until_it_says(&mut child, "read");
        let held: u64 = files.iter().map(|f| cached_pages(f)).sum();
        assert!(held > 0, "the inputs are cached while the reader holds them: the test tests nothing");
        send(child.id() as i32, libc::SIGTERM);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
        for f in &files {
            assert_eq!(cached_pages(f), 0, "{} left cached ({held} pages were before the signal)", f.display());
        }
    }
}

/// `cat big | head -c 100`: `head` exits, `cat`'s next write to the pipe
/// raises SIGPIPE, and `cat` settles its input before it dies of it (128
/// pages, its last read and the readahead, stayed cached before).
#[test]
fn a_pipeline_reader_cut_short_leaves_its_input_uncached() {
    let s = scratch!("signals-pipe");
    let big = s.path("big");
    std::fs::write(&big, vec![9u8; 64 << 20]).unwrap();
    let script = format!("cat '{}' | head -c 100 > /dev/null", p(&big));
    for round in 0..3 {
        drop_cache_of(&big);
        let out = Command::new("sh").args(["-c", &script]).env("LD_PRELOAD", preload()).output().unwrap();
        assert!(out.status.success(), "{}", said(&out));
        assert_eq!(cached_pages(&big), 0, "round {round}: cat's input left cached");
    }
}

/// The program sees its stop signals at their default action, as without
/// the shim, or ignored where it started with them ignored; a handler it
/// sets runs, SIG_IGN it sets ignores.
#[test]
fn the_program_sees_its_signals_as_without_the_shim() {
    let s = scratch!("signals-view");
    let exe = compile_c(&s.dir, "viewer", VIEWER, &[]);
    let run = |shim: bool, ignore_pipe: bool| {
        let mut cmd = Command::new("sh");
        let script = format!("{}exec '{}'", if ignore_pipe { "trap '' PIPE; " } else { "" }, p(&exe));
        cmd.args(["-c", &script]);
        if shim {
            cmd.env("LD_PRELOAD", preload());
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", said(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    for ignore_pipe in [false, true] {
        let plain = run(false, ignore_pipe);
        assert_eq!(run(true, ignore_pipe), plain, "with the shim as without (SIGPIPE ignored: {ignore_pipe})");
        assert!(plain.contains(&format!("caught {}", libc::SIGINT)), "{plain}");
    }
}

/// `run` passes SIGTERM to the command and then dies of it; the command
/// is gone by then. `run` blocks the signals it passes on before it starts
/// any thread: one that did not block them took the SIGTERM, `run` died
/// of it at once and the command ran on. Dying of it, `run` runs no
/// destructor: its late-error report is removed before, not left in the
/// temporary directory (one a run, each test run left hundreds).
#[test]
fn run_passes_a_sigterm_on_and_leaves_no_command_behind() {
    let s = scratch!("signals-run");
    let pidfile = s.path("pid");
    let tmp = s.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let script = format!("echo $$ > '{}'; exec sleep 60", p(&pidfile));
    let mut child = Command::new(env!("CARGO_BIN_EXE_dontcache"))
        .args(["run", "--", "sh", "-c", &script])
        .env("TMPDIR", &tmp)
        .spawn()
        .unwrap();
    let t = Instant::now();
    let pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
            break pid;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "the command never started");
        std::thread::sleep(Duration::from_millis(10));
    };
    send(child.id() as i32, libc::SIGTERM);
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    assert!(t.elapsed() < Duration::from_secs(30), "run waited for the whole sleep: the signal never reached it");
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "the command ({pid}) still runs after run died");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "run left {left:?} in its temporary directory");
}
