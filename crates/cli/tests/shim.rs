//! The shim behaves exactly like the system calls it stands in for: the
//! same results and errno for bad offsets, bad iovecs and bad counts (where
//! it crashed or wrote at the file position before), and no crash and no
//! write into the wrong file when descriptors are closed and reused while
//! other threads write.

mod common;
use common::*;

use std::process::Command;

/// Every call on a regular file that the kernel refuses, one line each:
/// "name return errno".
const BAD_CALLS: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#define TRY(name, call) do { errno = 0; long r = (long)(call); printf("%s %ld %d\n", name, r, r < 0 ? errno : 0); } while (0)
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    char buf[16] = "abcdefghijklmno";
    struct iovec iov[1] = {{buf, 3}};
    TRY("write", write(fd, buf, 8));
    TRY("pwrite-1", pwrite(fd, buf, 3, -1));
    TRY("pwrite-5", pwrite(fd, buf, 3, -5));
    TRY("pwritev-1", pwritev(fd, iov, 1, -1));
    TRY("pwritev2-2", pwritev2(fd, iov, 1, -2, 0));
    TRY("writev-null", writev(fd, NULL, 3));
    TRY("pwritev-5000", pwritev(fd, iov, 5000, 0));
    TRY("writev-intmax", writev(fd, iov, INT_MAX));
    TRY("writev-neg", writev(fd, iov, -1));
    TRY("write-badbuf", write(fd, (void *)16, 4096));
    TRY("pread-1", pread(fd, buf, 3, -1));
    TRY("readv-null", readv(fd, NULL, 3));
    TRY("preadv-5000", preadv(fd, iov, 5000, 0));
    TRY("read-badbuf", pread(fd, (void *)16, 8, 0));
    TRY("pwritev2-badflag", pwritev2(fd, iov, 1, 0, 0x40000000));
    TRY("ftruncate-neg", ftruncate(fd, -1));
    TRY("close", close(fd));
    TRY("close-again", close(fd));
    TRY("write-closed", write(fd, buf, 1));
    /* The number of a tracked file replaced behind the shim's back (a raw
       system call): close(2) closes whatever the number holds now. */
    int a = open(argv[1], O_RDWR);
    int other = open("/dev/null", O_RDONLY);
    TRY("dup3-unseen", syscall(SYS_dup3, other, a, 0) == a);
    TRY("close-replaced", close(a));
    TRY("closed-replaced", fcntl(a, F_GETFD));
    TRY("close-other", close(other));
    /* A small input with nothing of it cached (read with RWF_DONTCACHE
       under the shim), closed behind the shim's back and its number
       reused by a pipe the shim did not see made: reads of the number
       read the pipe. */
    int in = open(argv[2], O_RDONLY);
    TRY("read-cold", read(in, buf, 4));
    TRY("close-unseen", syscall(SYS_close, in));
    int pipe_fds[2];
    TRY("pipe-unseen", syscall(SYS_pipe2, pipe_fds, 0));
    TRY("pipe-reuses-it", pipe_fds[0] == in);
    TRY("pipe-write", write(pipe_fds[1], "xyzxyz", 6));
    TRY("pipe-read", read(pipe_fds[0], buf, 3));
    TRY("pipe-readv", readv(pipe_fds[0], iov, 1));
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    /* The limit calls with no struct or a bad one (the shim shows the
       program its own limit through them). */
    TRY("getrlimit-null", getrlimit(RLIMIT_NOFILE, NULL));
    TRY("getrlimit-badbuf", getrlimit(RLIMIT_NOFILE, (void *)16));
    TRY("setrlimit-null", setrlimit(RLIMIT_NOFILE, NULL));
    TRY("setrlimit-badbuf", setrlimit(RLIMIT_NOFILE, (void *)16));
    TRY("prlimit-badnew", prlimit(0, RLIMIT_NOFILE, (void *)16, NULL));
    TRY("prlimit-badold", prlimit(0, RLIMIT_NOFILE, NULL, (void *)16));
    TRY("prlimit-none", prlimit(0, RLIMIT_NOFILE, NULL, NULL));
    TRY("getrlimit-badres", getrlimit(1000, NULL));
    return 0;
}
"#;

#[test]
fn bad_calls_get_the_kernels_answer() {
    let s = scratch!("shim-bad");
    let exe =
        compile_c(&s.dir, "bad", BAD_CALLS, &["-Wno-nonnull", "-Wno-stringop-overflow", "-Wno-stringop-overread"]);
    let cold = s.path("cold");
    std::fs::write(&cold, b"small input").unwrap();
    drop_cache_of(&cold);
    let native = Command::new(&exe).arg(s.path("native")).arg(&cold).output().unwrap();
    assert!(native.status.success(), "{}", said(&native));
    drop_cache_of(&cold);
    let shimmed = dontcache(&["run", "--", p(&exe), p(&s.path("shimmed")), p(&cold)]);
    assert!(shimmed.status.success(), "the program must not crash under the shim: {}", said(&shimmed));
    let (n, sh) = (String::from_utf8_lossy(&native.stdout), String::from_utf8_lossy(&shimmed.stdout));
    for (a, b) in n.lines().zip(sh.lines()) {
        assert_eq!(a, b, "native (left) and under the shim (right) differ");
    }
    assert_eq!(n.lines().count(), sh.lines().count(), "native:\n{n}\nshim:\n{sh}");
    assert_eq!(std::fs::read(s.path("native")).unwrap(), std::fs::read(s.path("shimmed")).unwrap());
}

/// Writers keep writing their own files while another thread closes and
/// opens files as fast as it can, so descriptor numbers are reused all the
/// time, and a third closes a descriptor other threads are writing to.
const CHURN: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#define WRITERS 8
#define ROUNDS 3000
static const char *dir;
static void *writer(void *arg) {
    long t = (long)arg;
    char path[4096], buf[512];
    snprintf(path, sizeof path, "%s/w%ld", dir, t);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    memset(buf, 'A' + (int)t, sizeof buf);
    for (int i = 0; i < ROUNDS; i++)
        if (write(fd, buf, sizeof buf) != sizeof buf) return (void *)1;
    return close(fd) ? (void *)1 : NULL;
}
static void *churn(void *arg) {
    char path[4096], buf[64];
    memset(buf, 'z', sizeof buf);
    for (int i = 0; i < ROUNDS; i++) {
        snprintf(path, sizeof path, "%s/c%d", dir, i % 16);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (write(fd, buf, sizeof buf) != sizeof buf) return (void *)1;
        close(fd);
    }
    return arg;
}
static int shared_fd = -1;
static void *shared_writer(void *arg) {
    char buf[256];
    memset(buf, 's', sizeof buf);
    for (int i = 0; i < ROUNDS; i++) {
        int fd = __atomic_load_n(&shared_fd, __ATOMIC_ACQUIRE);
        if (fd >= 0) (void)!write(fd, buf, sizeof buf);
    }
    return arg;
}
static void *shared_closer(void *arg) {
    char path[4096];
    for (int i = 0; i < ROUNDS / 10; i++) {
        snprintf(path, sizeof path, "%s/s%d", dir, i % 4);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int old = __atomic_exchange_n(&shared_fd, fd, __ATOMIC_ACQ_REL);
        if (old >= 0) close(old);
    }
    return arg;
}
int main(int argc, char **argv) {
    dir = argv[1];
    pthread_t w[WRITERS], c, sw[2], sc;
    for (long t = 0; t < WRITERS; t++) pthread_create(&w[t], NULL, writer, (void *)t);
    pthread_create(&c, NULL, churn, NULL);
    for (int t = 0; t < 2; t++) pthread_create(&sw[t], NULL, shared_writer, NULL);
    pthread_create(&sc, NULL, shared_closer, NULL);
    int bad = 0;
    void *r;
    for (int t = 0; t < WRITERS; t++) { pthread_join(w[t], &r); bad |= r != NULL; }
    pthread_join(c, &r); bad |= r != NULL;
    for (int t = 0; t < 2; t++) pthread_join(sw[t], NULL);
    pthread_join(sc, NULL);
    return bad;
}
"#;

#[test]
fn concurrent_close_and_reuse_never_crash_or_misdirect() {
    let s = scratch!("shim-churn");
    let exe = compile_c(&s.dir, "churn", CHURN, &["-pthread"]);
    for round in 0..5 {
        let dir = s.path(&format!("r{round}"));
        std::fs::create_dir(&dir).unwrap();
        let out = dontcache(&["run", "--", p(&exe), p(&dir)]);
        assert!(out.status.success(), "round {round}: {}", said(&out));
        for t in 0..8u8 {
            let data = std::fs::read(dir.join(format!("w{t}"))).unwrap();
            assert_eq!(data.len(), 512 * 3000, "round {round}: writer {t}'s file");
            assert!(data.iter().all(|&b| b == b'A' + t), "round {round}: writer {t}'s file holds another file's bytes");
        }
        for i in 0..16 {
            let data = std::fs::read(dir.join(format!("c{i}"))).unwrap();
            assert!(data.iter().all(|&b| b == b'z'), "round {round}: churn file {i} holds another file's bytes");
        }
        for i in 0..4 {
            if let Ok(data) = std::fs::read(dir.join(format!("s{i}"))) {
                assert!(data.iter().all(|&b| b == b's'), "round {round}: shared file {i} holds another file's bytes");
            }
        }
    }
}

/// A program that closed its standard input and opens a file gets number
/// 0, as without the shim, also after the library's flusher has made its
/// own descriptors (rings, an eventfd) for a file the program wrote.
/// Exit status 0, or 10 plus the number the last open got.
const LOWEST_NUMBER: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    static char buf[1 << 16];
    memset(buf, 'n', sizeof buf);
    close(0);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, sizeof buf) != sizeof buf || close(fd)) return 1;
    usleep(300 * 1000); /* the flusher writes the file back and waits for it meanwhile */
    int again = open("/dev/null", O_RDONLY);
    return again == 0 ? 0 : 10 + again;
}
"#;

#[test]
fn the_librarys_own_descriptors_never_take_the_programs_lowest_number() {
    let s = scratch!("shim-lowest");
    let exe = compile_c(&s.dir, "lowest", LOWEST_NUMBER, &[]);
    let cold = s.path("cold");
    std::fs::write(&cold, b"small input").unwrap();
    drop_cache_of(&cold);
    let native = Command::new(&exe).arg(s.path("native")).arg(&cold).output().unwrap();
    assert!(native.status.success(), "{}", said(&native));
    drop_cache_of(&cold);
    let shimmed = dontcache(&["run", "--", p(&exe), p(&s.path("shimmed")), p(&cold)]);
    assert!(
        shimmed.status.success(),
        "under the shim the open after close(0) must get 0 (exit 10 + the number it got): {}",
        said(&shimmed)
    );
    assert_eq!(std::fs::read(s.path("shimmed")).unwrap(), vec![b'n'; 1 << 16]);
}

/// A program that closes every descriptor above 2, by `closefrom(3)` or by
/// a `close` loop up to its limit, believes it owns them all; the
/// library's own (its duplicates, its eventfd and rings) must stay open,
/// or a tracked file's writes, through a number the library reuses, go
/// into another file; a `dup2` onto one of them is refused. Standard
/// output is a tracked file here.
const CLOSES_ALL: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    static char buf[1 << 16];
    char path[4096];
    if (write(1, "first\n", 6) != 6) return 1;
    snprintf(path, sizeof path, "%s/a", argv[1]);
    int a = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    memset(buf, 'a', sizeof buf);
    if (a < 0 || write(a, buf, sizeof buf) != sizeof buf) return 2;
    usleep(100 * 1000); /* the flusher at work: its eventfd, its rings */
    /* A dup2 onto the first of the library's numbers is refused. */
    long limit = sysconf(_SC_OPEN_MAX);
    for (long fd = limit / 2; fd < limit; fd++) {
        if (fcntl(fd, F_GETFD) < 0) continue;
        if (dup2(0, fd) != -1 || errno != EBUSY) return 6;
        break;
    }
    if (strcmp(argv[2], "closefrom") == 0) {
        closefrom(3);
    } else {
        for (long fd = 3; fd < sysconf(_SC_OPEN_MAX); fd++) close(fd);
    }
    memset(buf, 'b', sizeof buf);
    for (int i = 0; i < 10; i++) {
        snprintf(path, sizeof path, "%s/b%d", argv[1], i);
        int b = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        for (int k = 0; k < 4; k++)
            if (write(b, buf, sizeof buf) != sizeof buf) return 3;
        usleep(20 * 1000);
        if (close(b)) return 4;
    }
    if (write(1, "second\n", 7) != 7) return 5;
    return 0;
}
"#;

#[test]
fn closing_every_descriptor_spares_the_librarys_own() {
    let s = scratch!("shim-closes-all");
    let exe = compile_c(&s.dir, "closes_all", CLOSES_ALL, &[]);
    for how in ["closefrom", "loop"] {
        let dir = s.path(how);
        std::fs::create_dir(&dir).unwrap();
        let stdout = std::fs::File::create(dir.join("stdout")).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_dontcache"))
            .args(["run", "--", p(&exe), p(&dir), how])
            .stdout(stdout)
            .output()
            .unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{how}: {}", said(&out));
        assert_eq!(std::fs::read(dir.join("stdout")).unwrap(), b"first\nsecond\n", "{how}: standard output");
        assert_eq!(std::fs::read(dir.join("a")).unwrap(), vec![b'a'; 1 << 16], "{how}: a");
        for i in 0..10 {
            let b = dir.join(format!("b{i}"));
            assert_eq!(cached_pages(&b), 0, "{how}: b{i} left cached");
            assert_eq!(std::fs::read(&b).unwrap(), vec![b'b'; 1 << 18], "{how}: b{i} holds other bytes");
        }
    }
}

/// A program that fills its descriptor table (a limit of 64, all but the few
/// numbers the library keeps for itself, its eventfd, rings and socket, taken
/// by files it holds open for writing) gets every descriptor
/// it would get without the library, whether the hard limit leaves the
/// library numbers above the program's or is 64 too: then the library's
/// duplicates of those files take the upper half of the table, and the
/// program's opens failed with `EMFILE` from its 28th file before the
/// library gave them back. Its opens (or `mkstemp`s, whose call made
/// again must be given its template back), a pipe, a dup and an `fopen`
/// find room, its files are whole, and a file written after it closed them
/// all is tracked again and left uncached.
const FILLS_THE_TABLE: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int hard = argc > 2 && strstr(argv[2], "hard"), temp = argc > 2 && strstr(argv[2], "mkstemp");
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit)) return 2;
    limit.rlim_cur = 64;
    if (hard) limit.rlim_max = 64;
    if (setrlimit(RLIMIT_NOFILE, &limit)) return 2;
    static char buf[1 << 18];
    char path[4096], made[4096];
    int fds[50];
    for (int i = 0; i < 50; i++) {
        snprintf(path, sizeof path, "%s/f%d", argv[1], i);
        if (temp) {
            snprintf(made, sizeof made, "%s/f%d-XXXXXX", argv[1], i);
            fds[i] = mkstemp(made);
            if (fds[i] >= 0 && rename(made, path)) return 3;
        } else {
            fds[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        }
        if (fds[i] < 0) { printf("open of file %d: %s\n", i, strerror(errno)); return 3; }
        memset(buf, 'a' + i % 26, sizeof buf);
        if (write(fds[i], buf, sizeof buf) != sizeof buf) return 4;
    }
    int ends[2];
    if (pipe(ends)) { printf("pipe: %s\n", strerror(errno)); return 5; }
    int copy = dup(fds[0]);
    if (copy < 0) { printf("dup: %s\n", strerror(errno)); return 6; }
    FILE *stream = fopen(path, "r");
    if (!stream) { printf("fopen: %s\n", strerror(errno)); return 7; }
    if (fclose(stream) || close(copy) || close(ends[0]) || close(ends[1])) return 8;
    for (int i = 0; i < 50; i++)
        if (close(fds[i])) return 9;
    snprintf(path, sizeof path, "%s/after", argv[1]);
    int after = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    memset(buf, 'z', sizeof buf);
    for (int k = 0; k < 64; k++)
        if (write(after, buf, sizeof buf) != sizeof buf) return 10;
    if (close(after)) return 11;
    puts("ok");
    return 0;
}
"#;

#[test]
fn a_program_that_fills_its_descriptor_table_gets_every_descriptor() {
    let s = scratch!("shim-fills-table");
    let exe = compile_c(&s.dir, "fills", FILLS_THE_TABLE, &[]);
    for (how, shimmed, hard) in [
        ("native", false, &[][..]),
        ("shimmed", true, &[][..]),
        ("shimmed-hard-64", true, &["hard"][..]),
        ("native-mkstemp", false, &["mkstemp"][..]),
        ("shimmed-hard-64-mkstemp", true, &["hard-mkstemp"][..]),
    ] {
        let dir = s.path(how);
        std::fs::create_dir(&dir).unwrap();
        let out = if shimmed {
            dontcache(&[&["run", "--", p(&exe), p(&dir)][..], hard].concat())
        } else {
            Command::new(&exe).arg(&dir).args(hard).output().unwrap()
        };
        assert!(out.status.success() && out.stdout == b"ok\n", "{how}: {}", said(&out));
        for i in 0..50u8 {
            let f = dir.join(format!("f{i}"));
            assert_eq!(std::fs::read(&f).unwrap(), vec![b'a' + i % 26; 1 << 18], "{how}: f{i} holds other bytes");
        }
        let after = dir.join("after");
        if shimmed {
            assert_eq!(cached_pages(&after), 0, "the file written after the table emptied left cached");
        }
        assert_eq!(std::fs::read(&after).unwrap(), vec![b'z'; 1 << 24], "{how}: after holds other bytes");
    }
}

/// Eight threads, each holding five files open for writing at a time, in a
/// table of 64: 43 numbers without the library, over 64 with a duplicate
/// of each file. Every open must succeed, with the library's numbers above
/// the program's limit and with the hard limit at 64 too (3,600 of 8,000
/// failed with `EMFILE` then before the library gave its duplicates back),
/// with threads meeting the full table at once.
const THREADS_FILL_THE_TABLE: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
static const char *dir;
static int failed;
/* Which call failed and why, on stderr: a rare failure says what it was. */
static void fail(const char *call, const char *path) {
    fprintf(stderr, "%s %s: %s\n", call, path, strerror(errno));
    __sync_fetch_and_add(&failed, 1);
}
static void *worker(void *arg) {
    long t = (long)arg;
    static __thread char buf[1 << 16];
    char path[4096];
    int held[5];
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 5; i++) {
            snprintf(path, sizeof path, "%s/t%ld-%d", dir, t, i);
            held[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            memset(buf, 'a' + (t + i + round) % 26, sizeof buf);
            if (held[i] < 0) fail("open", path);
            else if (write(held[i], buf, sizeof buf) != sizeof buf) fail("write", path);
        }
        for (int i = 0; i < 5; i++) {
            snprintf(path, sizeof path, "%s/t%ld-%d", dir, t, i);
            if (held[i] >= 0 && close(held[i])) fail("close", path);
        }
    }
    return 0;
}
int main(int argc, char **argv) {
    dir = argv[1];
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit)) return 2;
    limit.rlim_cur = 64;
    if (argc > 2) limit.rlim_max = 64;
    if (setrlimit(RLIMIT_NOFILE, &limit)) return 2;
    pthread_t threads[8];
    for (long i = 0; i < 8; i++) pthread_create(&threads[i], 0, worker, (void *)i);
    for (int i = 0; i < 8; i++) pthread_join(threads[i], 0);
    printf("%d failed\n", failed);
    return failed != 0;
}
"#;

#[test]
fn threads_that_fill_the_table_together_get_every_descriptor() {
    let s = scratch!("shim-threads-fill-table");
    let exe = compile_c(&s.dir, "threads_fill", THREADS_FILL_THE_TABLE, &["-pthread"]);
    for hard in [&[][..], &["hard"][..]] {
        let out = dontcache(&[&["run", "--", p(&exe), p(&s.dir)][..], hard].concat());
        assert!(out.status.success() && out.stdout == b"0 failed\n", "{hard:?}: {}", said(&out));
        for t in 0..8u8 {
            for i in 0..5u8 {
                let expected = vec![b'a' + (t + i + 199) % 26; 1 << 16];
                let got = std::fs::read(s.path(&format!("t{t}-{i}"))).unwrap();
                assert_eq!(got, expected, "{hard:?}: t{t}-{i} holds other bytes");
            }
        }
    }
}

/// The library's duplicates of files the program closed, not yet written
/// back, fill the upper half of a small table (64 numbers, the hard limit
/// too: 20 files held open, up to 24 closed ones in flight, the flusher's
/// own): a file opened then waits for them rather than go untracked (left
/// cached). With room above the program's limit, likewise.
const CLOSES_MANY_BESIDE_OPEN_ONES: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit)) return 2;
    limit.rlim_cur = 64;
    if (argc > 2) limit.rlim_max = 64;
    if (setrlimit(RLIMIT_NOFILE, &limit)) return 2;
    static char buf[1 << 20];
    char path[4096];
    int held[20];
    for (int i = 0; i < 20; i++) {
        snprintf(path, sizeof path, "%s/held%d", argv[1], i);
        held[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        memset(buf, 'h', 1 << 16);
        if (held[i] < 0 || write(held[i], buf, 1 << 16) != 1 << 16) return 3;
    }
    for (int i = 0; i < 200; i++) {
        snprintf(path, sizeof path, "%s/c%d", argv[1], i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        memset(buf, 'a' + i % 26, sizeof buf);
        if (fd < 0 || write(fd, buf, sizeof buf) != sizeof buf || close(fd)) return 4;
    }
    for (int i = 0; i < 20; i++)
        if (close(held[i])) return 5;
    return 0;
}
"#;

#[test]
fn closed_files_in_flight_never_leave_a_new_file_untracked() {
    let s = scratch!("shim-closed-in-flight");
    let exe = compile_c(&s.dir, "closes_many", CLOSES_MANY_BESIDE_OPEN_ONES, &[]);
    for hard in [&[][..], &["hard"][..]] {
        let out = dontcache(&[&["run", "--", p(&exe), p(&s.dir)][..], hard].concat());
        assert!(out.status.success(), "{hard:?}: {}", said(&out));
        let cached: Vec<String> =
            (0..200).filter(|i| cached_pages(&s.path(&format!("c{i}"))) > 0).map(|i| format!("c{i}")).collect();
        assert!(cached.is_empty(), "{hard:?}: left cached: {cached:?}");
        for i in 0..200u8 {
            let c = s.path(&format!("c{i}"));
            assert_eq!(std::fs::read(&c).unwrap(), vec![b'a' + i % 26; 1 << 20], "{hard:?}: c{i} holds other bytes");
        }
    }
}

/// Forks while another thread opens, writes and closes files (the library
/// duplicating and closing its own descriptors all the while); each child
/// closes every descriptor above 2 and writes a file. A child must never
/// start with the library's guard held by a thread it does not have.
const FORKS_WHILE_WRITING: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static const char *dir;
static volatile int stop;
static void *churn(void *arg) {
    char path[4096], buf[4096];
    memset(buf, 'c', sizeof buf);
    for (long i = 0; !stop; i++) {
        snprintf(path, sizeof path, "%s/c%ld", dir, i % 64);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) { (void)!write(fd, buf, sizeof buf); close(fd); }
    }
    return arg;
}
int main(int argc, char **argv) {
    dir = argv[1];
    pthread_t t;
    pthread_create(&t, NULL, churn, NULL);
    for (int i = 0; i < 300; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            char path[4096];
            closefrom(3);
            snprintf(path, sizeof path, "%s/child%d", dir, i);
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            _exit(fd < 0 || write(fd, "x", 1) != 1 || close(fd) != 0);
        }
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) return 1;
    }
    stop = 1;
    pthread_join(t, NULL);
    return 0;
}
"#;

#[test]
fn a_fork_never_inherits_the_librarys_guard_held() {
    let s = scratch!("shim-forks");
    let exe = compile_c(&s.dir, "forks", FORKS_WHILE_WRITING, &["-pthread"]);
    let dir = s.path("out");
    std::fs::create_dir(&dir).unwrap();
    // A child that inherited the guard held would wait for it forever.
    let out = Command::new("timeout")
        .args(["120", env!("CARGO_BIN_EXE_dontcache"), "run", "--", p(&exe), p(&dir)])
        .output()
        .unwrap();
    assert!(out.status.success(), "a child hung or failed (timeout's 124 is a hang): {}", said(&out));
    for i in 0..300 {
        assert_eq!(std::fs::read(dir.join(format!("child{i}"))).unwrap(), b"x", "child {i}'s file");
    }
}

/// A `vfork` child (posix_spawn's way) dups and closes a file its parent
/// is writing, then leaves; the parent goes on writing it and writes new
/// files. The child shares the shim's memory, not its descriptors: what it
/// did must not reach the parent's files (a copy the child made once left
/// the parent a handle whose release closed one of the parent's numbers).
const VFORK_CHILD_DUPS_AND_CLOSES: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static char buf[1 << 20];
static int fill(int fd, int mib, char c) {
    memset(buf, c, sizeof buf);
    for (int i = 0; i < mib; i++)
        if (write(fd, buf, sizeof buf) != sizeof buf) { perror("write"); return 1; }
    return 0;
}
int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/kept", argv[1]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || fill(fd, 1, 'k')) return 2;
    pid_t pid = vfork();
    if (pid == 0) {
        int copy = dup(fd);
        int high = fcntl(fd, F_DUPFD, 10);
        _exit(copy < 0 || high < 0 || close(copy) || close(high) || close(fd));
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) return 3;
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/new%d", argv[1], i);
        int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (f < 0 || fill(f, 8, 'a' + i) || close(f)) return 4;
    }
    return fill(fd, 31, 'k') || close(fd) ? 5 : 0;
}
"#;

#[test]
fn a_vfork_childs_dups_and_closes_leave_the_parents_files() {
    let s = scratch!("shim-vfork");
    let exe = compile_c(&s.dir, "vforks", VFORK_CHILD_DUPS_AND_CLOSES, &[]);
    for round in 0..3 {
        let dir = s.path(&format!("out{round}"));
        std::fs::create_dir(&dir).unwrap();
        let out = dontcache(&["run", "--", p(&exe), p(&dir)]);
        assert!(out.status.success() && out.stderr.is_empty(), "round {round}: {}", said(&out));
        let mut expect = vec![(String::from("kept"), vec![b'k'; 32 << 20])];
        expect.extend((0..4u8).map(|i| (format!("new{i}"), vec![b'a' + i; 8 << 20])));
        for (name, bytes) in expect {
            let path = dir.join(&name);
            assert_eq!(cached_pages(&path), 0, "round {round}: pages of {name} left cached");
            assert!(std::fs::read(&path).unwrap() == bytes, "round {round}: {name} holds other bytes");
        }
    }
}

/// The shim carries its own copy of GCC's unwinder (no `libgcc_s.so`): a
/// C++ program's exceptions, unwound by `libgcc_s`, still work under it,
/// thrown while a file the shim tracks is open.
const THROWS: &str = r#"
#include <cstdio>
#include <fstream>
#include <stdexcept>
int main(int argc, char **argv) {
    int caught = 0;
    for (int i = 0; i < 1000; i++) {
        try {
            std::ofstream f(argv[1]);
            f << "line " << i << "\n";
            throw std::runtime_error("thrown");
        } catch (const std::exception &) {
            caught++;
        }
    }
    std::printf("%d\n", caught);
    return caught != 1000;
}
"#;

#[test]
fn a_cpp_programs_exceptions_unwind_under_the_shim() {
    let s = scratch!("shim-cpp");
    let src = s.path("throws.cpp");
    std::fs::write(&src, THROWS).unwrap();
    let exe = s.path("throws");
    let built = Command::new("c++").args(["-O2", "-o", p(&exe), p(&src)]).output().expect("c++ (build-essential)");
    assert!(built.status.success(), "{}", said(&built));
    let out = s.path("out");
    let run = dontcache(&["run", "--", p(&exe), p(&out)]);
    assert!(run.status.success(), "{}", said(&run));
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "1000");
    assert_eq!(std::fs::read(&out).unwrap(), b"line 999\n");
}
