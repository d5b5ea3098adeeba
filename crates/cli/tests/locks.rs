//! A program's file locks hold under the shim as they do without it. The
//! library keeps a descriptor of every file it tracks until the flusher is
//! done with the file, after the program's close: its close released a
//! POSIX lock the program had taken since (the file closed, opened again
//! and locked), and its life kept a `flock` or open-file-description lock
//! that the program's close should have released, and a lease was refused
//! while it lingered. What the program wrote or read of a locked file is
//! dropped through its own descriptor, at its close or its exit; what was
//! cached before stays.

mod common;
use common::*;

use std::process::Command;

/// Locks of each kind, each checked from another process (a forked child,
/// which opens the file itself); exits with the number of the first check
/// that fails.
const LOCKS: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#define MIB (1 << 20)
static char buf[4 * MIB];
static char path[4096];

static const char *in(const char *dir, const char *name) {
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* What another process finds: 1 if `how` (0: a POSIX lock, 1: an
   open-file-description lock, 2: a flock) conflicts with a write lock of
   the whole file, 0 if not. */
static int held_elsewhere(const char *p, int how) {
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(p, O_RDWR);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fd < 0) _exit(2);
        if (how == 2) _exit(flock(fd, LOCK_EX | LOCK_NB) != 0);
        if (fcntl(fd, how ? F_OFD_GETLK : F_GETLK, &fl) < 0) _exit(2);
        _exit(fl.l_type != F_UNLCK);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 2;
    return WEXITSTATUS(st);
}

static int fill(int fd, char c, size_t n, off_t at) {
    memset(buf, c, n);
    return pwrite(fd, buf, n, at) == (ssize_t)n ? 0 : -1;
}

int main(int argc, char **argv) {
    struct flock wr = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    /* A file written and closed, opened again and locked: the lock holds
       while the library finishes the first open (fcntl, then lockf). */
    for (int k = 0; k < 2; k++) {
        const char *p = in(argv[1], k ? "lockf" : "fcntl");
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || fill(fd, 'a', 2 * MIB, 0) || close(fd)) return 10 + k;
        fd = open(p, O_RDWR);
        if (fd < 0 || (k ? lockf(fd, F_LOCK, 0) : fcntl(fd, F_SETLKW, &wr))) return 12 + k;
        if (fill(fd, 'b', MIB, 2 * MIB)) return 14 + k;
        usleep(300 * 1000);
        if (held_elsewhere(p, 0) != 1) return 16 + k;
        if (close(fd)) return 18 + k;
    }
    /* Locked through a second descriptor while the first, written, is
       still open: the lock holds until either is closed. */
    {
        const char *p = in(argv[1], "second");
        int a = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (a < 0 || fill(a, 'c', 2 * MIB, 0)) return 20;
        int b = open(p, O_RDWR);
        if (b < 0 || fcntl(b, F_SETLK, &wr)) return 21;
        if (fill(a, 'd', MIB, 2 * MIB)) return 22;
        usleep(300 * 1000);
        if (held_elsewhere(p, 0) != 1) return 23;
        if (close(a) || held_elsewhere(p, 0) != 0 || close(b)) return 24;
    }
    /* A flock and an open-file-description lock end with the program's
       close of their open file. */
    for (int k = 0; k < 2; k++) {
        const char *p = in(argv[1], k ? "ofd" : "flock");
        int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || (k ? fcntl(fd, F_OFD_SETLK, &wr) : flock(fd, LOCK_EX))) return 30 + k;
        if (fill(fd, 'e', 4 * MIB, 0)) return 32 + k;
        if (held_elsewhere(p, k ? 1 : 2) != 1) return 34 + k;
        if (close(fd)) return 36 + k;
        if (held_elsewhere(p, k ? 1 : 2) != 0) return 38 + k;
    }
    /* A read lease is refused while any open of the file may write it:
       taken once the writer closed it. */
    {
        const char *p = in(argv[1], "lease");
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || fill(fd, 'f', 4 * MIB, 0) || close(fd)) return 40;
        fd = open(p, O_RDONLY);
        if (fd < 0 || fcntl(fd, F_SETLEASE, F_RDLCK)) return 41;
        if (fcntl(fd, F_SETLEASE, F_UNLCK) || close(fd)) return 42;
    }
    /* A file cached before, read under a read lock. */
    {
        int fd = open(in(argv[1], "warm"), O_RDONLY);
        struct flock rd = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
        if (fd < 0 || fcntl(fd, F_SETLK, &rd)) return 50;
        for (off_t at = 0; pread(fd, buf, MIB, at) > 0; at += MIB) {}
        if (close(fd)) return 51;
    }
    /* Locked, written, and still open at exit, or at an exec (argv[2]). */
    {
        int fd = open(in(argv[1], "open-at-exit"), O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || fcntl(fd, F_SETLK, &wr) || fill(fd, 'g', 4 * MIB, 0)) return 52;
    }
    if (argc > 2) {
        char *args[] = {argv[2], NULL};
        execv(argv[2], args);
        return 53;
    }
    return 0;
}
"#;

/// The files the program locks and writes, by name.
const WRITTEN: [&str; 7] = ["fcntl", "lockf", "second", "flock", "ofd", "lease", "open-at-exit"];

/// A file cached before the program runs, which it reads under a lock.
fn warm_file(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("warm");
    std::fs::write(&path, pattern(70, 0, 4 * MIB as usize)).unwrap();
    std::fs::File::open(&path).unwrap().sync_all().unwrap();
    let _ = std::fs::read(&path).unwrap();
    assert_eq!(cached_pages_in(&path, 0, 4 * MIB), 1024, "the setup: the warm file is cached");
    path
}

fn expect_contents(dir: &std::path::Path) {
    let mib = MIB as usize;
    let want = |parts: &[(u8, usize)]| parts.iter().flat_map(|&(c, n)| std::iter::repeat_n(c, n)).collect::<Vec<u8>>();
    for (name, parts) in [
        ("fcntl", vec![(b'a', 2 * mib), (b'b', mib)]),
        ("lockf", vec![(b'a', 2 * mib), (b'b', mib)]),
        ("second", vec![(b'c', 2 * mib), (b'd', mib)]),
        ("flock", vec![(b'e', 4 * mib)]),
        ("ofd", vec![(b'e', 4 * mib)]),
        ("lease", vec![(b'f', 4 * mib)]),
        ("open-at-exit", vec![(b'g', 4 * mib)]),
    ] {
        assert!(std::fs::read(dir.join(name)).unwrap() == want(&parts), "{name}: not the bytes written");
    }
}

#[test]
fn locks_hold_and_end_as_without_the_shim() {
    let s = scratch!("shim-locks");
    let exe = compile_c(&s.dir, "locks", LOCKS, &[]);
    let native = s.path("native");
    std::fs::create_dir(&native).unwrap();
    warm_file(&native);
    let out = Command::new(&exe).arg(&native).output().unwrap();
    assert!(out.status.success(), "natively (exit = the failed check): {}", said(&out));
    expect_contents(&native);
    // The last run ends with an exec of a program that knows nothing of
    // the lock, the file still open.
    for (policy, then) in [("flusher", None), ("lazy", None), ("kernel", None), ("flusher", Some("/bin/true"))] {
        let dir = s.path(&format!("{policy}-{}", then.is_some()));
        std::fs::create_dir(&dir).unwrap();
        let warm = warm_file(&dir);
        let mut args = vec!["run", "--policy", policy, "--", p(&exe), p(&dir)];
        args.extend(then);
        let out = dontcache(&args);
        assert!(
            out.status.success(),
            "{policy} {then:?}: a lock lost or held too long (exit = the failed check): {}",
            said(&out)
        );
        // Each is 3 or 4 MiB: 768 pages or more.
        for name in WRITTEN {
            let left = cached_pages_in(&dir.join(name), 0, 4 * MIB);
            assert!(left <= 16, "{policy} {then:?}: {name}, locked, left {left} pages cached");
        }
        // Counted with the pages the kernel's reclaim took meanwhile: this
        // machine's proactive reclaim took 512 of them once in CI.
        let kept = kept_or_reclaimed_in(&warm, 0, 4 * MIB);
        assert_eq!(kept, 1024, "{policy}: the file cached before lost pages");
        expect_contents(&dir);
    }
}
