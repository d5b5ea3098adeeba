//! The descriptor limit under the shim: the process's is raised so that the
//! library's descriptors have numbers above the program's, and the program
//! sees, meets and passes on the limit it was given, as without the
//! library.

mod common;
use common::*;

use std::process::{Command, Output};

/// The soft limit the programs here are started with.
const LIMIT: u64 = 256;

/// What a program learns of its limit and meets at it, one line each: the
/// limit as `getrlimit`, `prlimit`, `sysconf` and `getdtablesize` report
/// it; how many opens succeed before `EMFILE` and the last number given; a
/// pipe, a `dup2` and an `F_DUPFD` at the limit; with one number freed, an
/// open that takes it and one past it (its file, opened with `O_TRUNC`,
/// must keep its bytes), and an `fopen` past it. Last, the process's own
/// soft limit from /proc/self/limits, which differs.
const MEETS_ITS_LIMIT: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct rlimit r, pr;
    if (getrlimit(RLIMIT_NOFILE, &r) || prlimit(0, RLIMIT_NOFILE, 0, &pr)) return 2;
    printf("getrlimit %lu %lu\nprlimit %lu %lu\n", r.rlim_cur, r.rlim_max, pr.rlim_cur, pr.rlim_max);
    printf("sysconf %ld\ngetdtablesize %d\n", sysconf(_SC_OPEN_MAX), getdtablesize());
    char kept[4096];
    snprintf(kept, sizeof kept, "%s/kept", argv[1]);
    int n = 0, last = -1;
    for (;;) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd < 0) { printf("opens %d last %d: %s\n", n, last, strerror(errno)); break; }
        n++;
        last = fd;
    }
    int ends[2], x;
    x = pipe(ends);
    printf("pipe %d: %s\n", x, strerror(errno));
    errno = 0;
    x = dup2(0, (int)r.rlim_cur);
    printf("dup2 %d: %s\n", x, strerror(errno));
    errno = 0;
    x = fcntl(0, F_DUPFD, (int)r.rlim_cur);
    printf("F_DUPFD %d: %s\n", x, strerror(errno));
    close(last);
    x = open("/dev/null", O_RDONLY);
    printf("freed %d\n", x == last);
    errno = 0;
    x = open(kept, O_WRONLY | O_TRUNC);
    printf("past %d: %s\n", x, strerror(errno));
    errno = 0;
    FILE *f = fopen(kept, "w");
    printf("fopen %d: %s\n", f != 0, strerror(errno));
    FILE *limits = fopen("/proc/self/limits", "r");
    char line[256];
    if (!limits) { close(3); limits = fopen("/proc/self/limits", "r"); }
    while (limits && fgets(line, sizeof line, limits))
        if (!strncmp(line, "Max open files", 14)) printf("process %s", line);
    return 0;
}
"#;

/// `args` started under a soft limit of `LIMIT`.
fn under_limit(args: &[&str]) -> Output {
    Command::new("sh").args(["-c", &format!("ulimit -Sn {LIMIT} && exec \"$@\""), "sh"]).args(args).output().unwrap()
}

/// What `args` printed, started under `LIMIT`; they must succeed.
fn printed_under_limit(args: &[&str]) -> String {
    let out = under_limit(args);
    assert!(out.status.success(), "{}", said(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// What the C program `source` printed under `LIMIT`, natively and under
/// `dontcache run`; `None` (skipped) where the hard limit leaves the
/// library no room above `LIMIT`.
fn printed_natively_and_under_run(name: &str, source: &str) -> Option<(String, String)> {
    room_above_limit()?;
    let s = scratch!(&format!("open-files-{name}"));
    let exe = compile_c(&s.dir, name, source, &[]);
    let native = printed_under_limit(&[p(&exe)]);
    let shimmed = printed_under_limit(&[env!("CARGO_BIN_EXE_dontcache"), "run", "--", p(&exe)]);
    Some((native, shimmed))
}

/// The hard limit, where it leaves room above `LIMIT` for the library.
fn room_above_limit() -> Option<u64> {
    let (_, hard) = dc_sys::open_files_limits().unwrap();
    if hard < 2 * LIMIT {
        eprintln!("skipped: the hard descriptor limit ({hard}) leaves no room above {LIMIT}; raise it (ulimit -Hn)");
        return None;
    }
    Some(hard)
}

/// The soft limit on the "Max open files" line of /proc/self/limits.
fn process_soft_limit(out: &str) -> u64 {
    let (_, rest) = out.split_once("Max open files").expect("a limits line");
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn a_program_sees_and_meets_the_limit_it_was_given() {
    let Some(hard) = room_above_limit() else { return };
    let s = scratch!("open-files-limit");
    let exe = compile_c(&s.dir, "meets", MEETS_ITS_LIMIT, &[]);
    let run = |args: &[&str]| {
        std::fs::write(s.path("kept"), b"kept\n").unwrap();
        let printed = printed_under_limit(args);
        assert_eq!(std::fs::read(s.path("kept")).unwrap(), b"kept\n", "an open past the limit truncated its file");
        printed
    };
    let native = run(&[p(&exe), p(&s.dir)]);
    let shimmed = run(&[env!("CARGO_BIN_EXE_dontcache"), "run", "--", p(&exe), p(&s.dir)]);
    let without_process = |out: &str| out.lines().filter(|l| !l.starts_with("process ")).collect::<Vec<_>>().join("\n");
    assert_eq!(without_process(&shimmed), without_process(&native), "native:\n{native}\nshimmed:\n{shimmed}");
    assert!(native.contains(&format!("getrlimit {LIMIT} {hard}\n")), "{native}");
    assert!(native.contains("pipe -1: Too many open files\n"), "{native}");
    assert!(native.contains("past -1: Too many open files\n"), "{native}");
    assert_eq!(process_soft_limit(&native), LIMIT);
    assert!(
        process_soft_limit(&shimmed) > LIMIT,
        "the library's numbers were not raised above the program's:\n{shimmed}"
    );
}

#[test]
fn programs_it_starts_see_the_limit_it_set() {
    if room_above_limit().is_none() {
        return;
    }
    // Started by an exec (`sh`), by `posix_spawn` (Python's subprocess and
    // `os.system`, glibc's `system`), after the program changed its limit.
    let script = r#"ulimit -n; sh -c 'ulimit -n'; ulimit -Sn 200; sh -c 'ulimit -n'; python3 -c '
import os, resource, subprocess
resource.setrlimit(resource.RLIMIT_NOFILE, (150, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], os.sysconf("SC_OPEN_MAX"), flush=True)
subprocess.run(["sh", "-c", "ulimit -n"])
os.system("ulimit -n")'"#;
    let out = under_limit(&[env!("CARGO_BIN_EXE_dontcache"), "run", "--", "sh", "-c", script]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{LIMIT}\n{LIMIT}\n200\n150 150\n150\n150\n"));
}

#[test]
fn a_hard_limit_little_above_the_soft_one_is_left_as_it_is() {
    let (_, hard) = dc_sys::open_files_limits().unwrap();
    if hard < 1100 {
        eprintln!("skipped: the hard descriptor limit ({hard}) is under 1,100");
        return;
    }
    // 100 numbers above a limit of 1,000 are fewer than the 500 of the upper
    // half the library keeps to without them.
    let script = "ulimit -Sn 1000 && ulimit -Hn 1100 && exec \"$@\"";
    let out = Command::new("sh")
        .args(["-c", script, "sh", env!("CARGO_BIN_EXE_dontcache"), "run", "--", "cat", "/proc/self/limits"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(process_soft_limit(&String::from_utf8_lossy(&out.stdout)), 1000);
}

/// A writer that prints the numbers of the library's duplicates of its file
/// (the descriptors other than its own naming the same file), the size of
/// the process's descriptor table and the process's soft limit.
const WHERE_THE_LIBRARYS_NUMBERS_ARE: &str = r#"
import os, sys
f = open(sys.argv[1], "wb")
f.write(b"x" * (1 << 20))
f.flush()
path = os.path.realpath(sys.argv[1])
numbers = []
for name in os.listdir("/proc/self/fd"):
    try:
        if int(name) != f.fileno() and os.readlink("/proc/self/fd/" + name) == path:
            numbers.append(int(name))
    except OSError:
        pass
status = dict(l.split(":", 1) for l in open("/proc/self/status"))
limits = [l for l in open("/proc/self/limits") if l.startswith("Max open files")][0]
print(sorted(numbers), int(status["FDSize"]), int(limits.split()[3]))
"#;

/// The library's duplicates, table size and process soft limit of
/// `WHERE_THE_LIBRARYS_NUMBERS_ARE` under `dontcache run` with these limits.
fn librarys_numbers_under(soft: u64, hard: u64, out: &std::path::Path) -> (Vec<u64>, u64, u64) {
    let script = format!("ulimit -Hn {hard} && ulimit -Sn {soft} && exec \"$@\"");
    let run = Command::new("sh")
        .args(["-c", &script, "sh", env!("CARGO_BIN_EXE_dontcache"), "run", "--", "python3", "-c"])
        .args([WHERE_THE_LIBRARYS_NUMBERS_ARE, p(out)])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", said(&run));
    let printed = String::from_utf8_lossy(&run.stdout).into_owned();
    let (list, rest) = printed.trim().split_once("] ").unwrap_or_else(|| panic!("{printed}"));
    let numbers =
        list.trim_start_matches('[').split(", ").filter(|n| !n.is_empty()).map(|n| n.parse().unwrap()).collect();
    let mut rest = rest.split_whitespace().map(|n| n.parse().unwrap());
    (numbers, rest.next().unwrap(), rest.next().unwrap())
}

/// Under a high limit (containers are often given 1,048,576 both soft and
/// hard) the library's numbers do not start from half of it, nor above it:
/// every fork copies the descriptor table up to the highest open number.
#[test]
fn the_librarys_numbers_stay_low_under_a_high_limit() {
    let floor = dontcache::own::MAX_LIBRARY_FLOOR;
    let (_, hard) = dc_sys::open_files_limits().unwrap();
    let high = hard.min(20_000);
    if high <= 2 * floor + 64 {
        eprintln!("skipped: the hard descriptor limit ({hard}) is not above {}; raise it (ulimit -Hn)", 2 * floor + 64);
        return;
    }
    let s = scratch!("open-files-high");
    // The process's limit is the program's: the library keeps to the upper
    // half, from `floor`, and the table to 16,384 numbers.
    let (numbers, table, soft) = librarys_numbers_under(high, high, &s.path("shared"));
    assert_eq!(soft, high, "the limit was changed");
    assert!(!numbers.is_empty(), "no duplicate of the file was found: the test sees nothing");
    assert!(numbers.iter().all(|&n| (floor..floor + 64).contains(&n)), "the library's numbers {numbers:?}");
    assert!(table <= 2 * floor, "a table of {table} numbers");
    // A program's limit above `floor` is not raised, even where the hard
    // limit would allow it.
    let (numbers, table, soft) = librarys_numbers_under(floor + 64, high, &s.path("not-raised"));
    assert_eq!(soft, floor + 64, "the process's limit was raised above a program's of {}", floor + 64);
    assert!(numbers.iter().all(|&n| n < floor + 64), "the library's numbers {numbers:?}");
    assert!(table <= 2 * floor, "a table of {table} numbers");
    // Up to `floor` it still is, and the numbers start above it.
    let (numbers, _, soft) = librarys_numbers_under(1024, high, &s.path("raised"));
    assert!(soft > 1024, "a program's limit of 1,024 was not raised");
    assert!(numbers.iter().all(|&n| n >= 1024), "the library's numbers {numbers:?}");
}

/// A program that starts at a limit of 64, holds 20 files open for writing
/// (the library's duplicates of them numbered from 64 up), raises its limit
/// to 128 over those numbers and then opens until it is refused: it gets
/// as many descriptors as without the library but the few the library
/// keeps for itself (it gives its duplicates back as the table fills; 83
/// or fewer without that), and its files are whole.
const RAISES_OVER_THE_LIBRARYS: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit)) return 2;
    limit.rlim_cur = 64;
    if (setrlimit(RLIMIT_NOFILE, &limit)) return 2;
    static char buf[1 << 16];
    char path[4096];
    int held[20];
    for (int i = 0; i < 20; i++) {
        snprintf(path, sizeof path, "%s/held%d", argv[1], i);
        held[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        memset(buf, 'a' + i, sizeof buf);
        if (held[i] < 0 || write(held[i], buf, sizeof buf) != sizeof buf) return 3;
    }
    limit.rlim_cur = 128;
    if (setrlimit(RLIMIT_NOFILE, &limit)) return 4;
    int n = 0;
    while (open("/dev/null", O_RDONLY) >= 0) n++;
    printf("%d opens: %s\n", n, strerror(errno));
    for (int i = 0; i < 20; i++) {
        memset(buf, 'A' + i, sizeof buf);
        if (write(held[i], buf, sizeof buf) != sizeof buf) return 5;
    }
    return 0;
}
"#;

#[test]
fn a_program_that_raises_its_limit_over_the_librarys_numbers_gets_them_back() {
    let s = scratch!("open-files-raises");
    let exe = compile_c(&s.dir, "raises", RAISES_OVER_THE_LIBRARYS, &[]);
    let mut said_by = Vec::new();
    for (how, shimmed) in [("native", false), ("shimmed", true)] {
        let dir = s.path(how);
        std::fs::create_dir(&dir).unwrap();
        let out = if shimmed {
            dontcache(&["run", "--", p(&exe), p(&dir)])
        } else {
            Command::new(&exe).arg(&dir).output().unwrap()
        };
        assert!(out.status.success(), "{how}: {}", said(&out));
        for i in 0..20u8 {
            let expected = [vec![b'a' + i; 1 << 16], vec![b'A' + i; 1 << 16]].concat();
            assert_eq!(std::fs::read(dir.join(format!("held{i}"))).unwrap(), expected, "{how}: held{i}");
        }
        said_by.push(String::from_utf8(out.stdout).unwrap());
    }
    let opens = |said: &str| -> u64 {
        assert!(said.ends_with(" opens: Too many open files\n"), "{said}");
        said.split_whitespace().next().unwrap().parse().unwrap()
    };
    let (native, shimmed) = (opens(&said_by[0]), opens(&said_by[1]));
    // The few the library keeps for the process's life (an eventfd, a ring,
    // the /proc/meminfo it reads), made while its numbers began at 64, stay.
    assert!(shimmed <= native && shimmed + 4 >= native, "{shimmed} opens under the shim, {native} without");
}

/// A server with a connection waiting on its listener and its table full:
/// `accept` and `accept4` are refused with `EMFILE` and leave the
/// connection queued, and with a number freed the next `accept` takes it
/// and reads what the client sent. A refusal made after the accept (the
/// number past the limit closed) would have dropped the connection: the
/// listener does not block, so a lost connection is `EAGAIN`, not a hang.
const ACCEPTS_AT_ITS_LIMIT: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
int main(void) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "dontcache-accept-%d", getpid());
    socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(a.sun_path + 1);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0), c = socket(AF_UNIX, SOCK_STREAM, 0);
    if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&a, len) || listen(l, 4)) return 2;
    if (connect(c, (struct sockaddr *)&a, len) || write(c, "hi", 2) != 2) return 3;
    int last = -1, fd;
    while ((fd = open("/dev/null", O_RDONLY)) >= 0) last = fd;
    int x = accept(l, 0, 0);
    printf("accept %d: %s\n", x, strerror(errno));
    errno = 0;
    x = accept4(l, 0, 0, SOCK_CLOEXEC);
    printf("accept4 %d: %s\n", x, strerror(errno));
    close(last);
    errno = 0;
    x = accept(l, 0, 0);
    char got[3] = "";
    printf("accepted %d: %s, read %zd %s\n", x == last, strerror(errno), x < 0 ? -1 : read(x, got, 2), got);
    return 0;
}
"#;

#[test]
fn an_accept_refused_at_the_limit_leaves_the_connection_queued() {
    let Some((native, shimmed)) = printed_natively_and_under_run("accepts", ACCEPTS_AT_ITS_LIMIT) else { return };
    assert_eq!(
        native,
        "accept -1: Too many open files\naccept4 -1: Too many open files\naccepted 1: Success, read 2 hi\n"
    );
    assert_eq!(shimmed, native);
}

/// Descriptors glibc makes through its own `open` (`opendir`, `scandir`,
/// the `mkstemp` family, `tmpfile`, `shm_open`, `posix_openpt`) or `pipe2`
/// (`popen`, which needs two numbers) and the rarer calls that make one
/// (`mq_open`, `epoll_create`, `inotify_init`, `pidfd_open`), at the
/// program's limit: each refused with `EMFILE` and no file made, then with
/// one number freed each given it (`popen` with two). Temporary names go
/// in the directory `argv[1]`.
const LIBC_MAKES_AT_ITS_LIMIT: &str = r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <unistd.h>
static void said(const char *call, int made) { printf("%s %d: %s\n", call, made, strerror(errno)); errno = 0; }
int main(int argc, char **argv) {
    char shm[64];
    snprintf(shm, sizeof shm, "/dontcache-limit-%d", getpid());
    char t[4096];
    int last = -1, fd;
    while ((fd = open("/dev/null", O_RDONLY)) >= 0) last = fd;
    errno = 0;
    DIR *d = opendir(argv[1]);
    printf("opendir %d: %s\n", d != 0, strerror(errno));
    struct dirent **names;
    errno = 0;
    said("scandir", scandir(argv[1], &names, 0, alphasort));
    snprintf(t, sizeof t, "%s/a-XXXXXX", argv[1]);
    errno = 0;
    fd = mkstemp(t);
    printf("mkstemp %d: %s\n", fd, strerror(errno));
    snprintf(t, sizeof t, "%s/b-XXXXXX", argv[1]);
    errno = 0;
    fd = mkostemp(t, O_CLOEXEC);
    printf("mkostemp %d: %s\n", fd, strerror(errno));
    snprintf(t, sizeof t, "%s/c-XXXXXX.s", argv[1]);
    errno = 0;
    fd = mkstemps(t, 2);
    printf("mkstemps %d: %s\n", fd, strerror(errno));
    errno = 0;
    FILE *f = tmpfile();
    printf("tmpfile %d: %s\n", f != 0, strerror(errno));
    errno = 0;
    said("shm_open", shm_open(shm, O_RDWR | O_CREAT | O_EXCL, 0600));
    said("shm_unlink", shm_unlink(shm));
    said("mq_open", mq_open(shm, O_RDWR | O_CREAT | O_EXCL, 0600, 0));
    said("mq_unlink", mq_unlink(shm));
    said("posix_openpt", posix_openpt(O_RDWR | O_NOCTTY));
    said("epoll_create", epoll_create(1));
    said("inotify_init", inotify_init());
    said("pidfd_open", pidfd_open(getpid(), 0));
    FILE *p = popen("true", "r");
    printf("popen %d: %s\n", p != 0, strerror(errno));
    close(last);
    errno = 0;
    p = popen("true", "r");
    printf("popen, one number free %d: %s\n", p != 0, strerror(errno));
    d = opendir(argv[1]);
    printf("opendir %d\n", d && dirfd(d) == last);
    closedir(d);
    snprintf(t, sizeof t, "%s/kept-XXXXXX", argv[1]);
    fd = mkstemp(t);
    printf("mkstemp %d, written %zd\n", fd == last, write(fd, "kept\n", 5));
    close(fd);
    f = tmpfile();
    printf("tmpfile %d\n", f && fileno(f) == last);
    close(last - 1);
    close(last - 2);
    p = popen("echo hi", "r");
    char got[8] = "";
    printf("popen, two free %d, read %s", p != 0, p && fgets(got, sizeof got, p) ? got : "nothing\n");
    printf("pclose %d\n", p ? pclose(p) : -1);
    return 0;
}
"#;

#[test]
fn descriptors_libc_and_rarer_calls_make_are_refused_at_the_limit() {
    if room_above_limit().is_none() {
        return;
    }
    let s = scratch!("open-files-libc");
    let exe = compile_c(&s.dir, "libc-makes", LIBC_MAKES_AT_ITS_LIMIT, &[]);
    let run = |args: &[&str]| {
        let temps = s.path("temps");
        let _ = std::fs::remove_dir_all(&temps);
        std::fs::create_dir(&temps).unwrap();
        let printed = printed_under_limit(&[args, &[p(&temps)]].concat());
        let made: Vec<_> = std::fs::read_dir(&temps).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(made.len(), 1, "a refused call made a file: {made:?}");
        assert_eq!(std::fs::read(&made[0]).unwrap(), b"kept\n");
        printed
    };
    let native = run(&[p(&exe)]);
    let shimmed = run(&[env!("CARGO_BIN_EXE_dontcache"), "run", "--", p(&exe)]);
    assert_eq!(
        native,
        "opendir 0: Too many open files\nscandir -1: Too many open files\nmkstemp -1: Too many open files\nmkostemp -1: Too many open files\n\
         mkstemps -1: Too many open files\ntmpfile 0: Too many open files\nshm_open -1: Too many open files\n\
         shm_unlink -1: No such file or directory\nmq_open -1: Too many open files\n\
         mq_unlink -1: No such file or directory\nposix_openpt -1: Too many open files\n\
         epoll_create -1: Too many open files\ninotify_init -1: Too many open files\n\
         pidfd_open -1: Too many open files\npopen 0: Too many open files\n\
         popen, one number free 0: Too many open files\nopendir 1\nmkstemp 1, written 5\ntmpfile 1\n\
         popen, two free 1, read hi\npclose 0\n"
    );
    assert_eq!(shimmed, native);
}

/// Descriptors received in an `SCM_RIGHTS` message at the program's
/// limit: the kernel installs them in order until the table is full,
/// drops the rest and says `MSG_CTRUNC`, its control message counting only
/// those installed (none at all when none was). Three are sent each time:
/// with one number free, then none.
const RECEIVES_AT_ITS_LIMIT: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
static int ends[2];
static void send_three(void) {
    int fds[3] = {0, 1, 2};
    char space[CMSG_SPACE(sizeof fds)] = {0}, byte = 'x';
    struct iovec io = {&byte, 1};
    struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = space, .msg_controllen = sizeof space};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    if (sendmsg(ends[0], &m, 0) != 1) printf("sendmsg: %s\n", strerror(errno));
}
static void receive(const char *when) {
    char space[CMSG_SPACE(3 * sizeof(int))], byte;
    struct iovec io = {&byte, 1};
    struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = space, .msg_controllen = sizeof space};
    ssize_t n = recvmsg(ends[1], &m, 0);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    int got = c ? (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)) : 0;
    printf("%s: %zd byte, %d descriptors, truncated %d, control %zu\n", when, n, got,
           !!(m.msg_flags & MSG_CTRUNC), (size_t)m.msg_controllen);
}
int main(void) {
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, ends)) return 2;
    send_three();
    send_three();
    int last = -1, fd;
    while ((fd = open("/dev/null", O_RDONLY)) >= 0) last = fd;
    close(last);
    receive("one free");
    receive("none free");
    return 0;
}
"#;

#[test]
fn descriptors_received_at_the_limit_are_cut_as_the_kernel_cuts_them() {
    let Some((native, shimmed)) = printed_natively_and_under_run("receives", RECEIVES_AT_ITS_LIMIT) else { return };
    assert_eq!(
        native,
        "one free: 1 byte, 1 descriptors, truncated 1, control 24\n\
         none free: 1 byte, 0 descriptors, truncated 1, control 0\n"
    );
    assert_eq!(shimmed, native);
}
