//! `dontcache run` covers every way a program writes or reads a file:
//! redirections, stdio, sendfile, mmap, io_uring, children leaving with
//! _exit, and (with --watch) statically linked programs; inputs are dropped
//! too; late writeback errors reach the exit status; a neighbour's hot file
//! survives a big copy in a small memory cgroup.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

/// `len` bytes of text lines (sort and awk need lines), not cached.
fn text_source(s: &Scratch, name: &str, len: usize) -> PathBuf {
    let path = s.path(name);
    let mut text = String::with_capacity(len + 64);
    let mut i = 0u64;
    while text.len() < len {
        text.push_str(&format!("{:016x} {}\n", (i * 0x9e37_79b9_7f4a_7c15) >> 7, i));
        i += 1;
    }
    std::fs::write(&path, text).unwrap();
    drop_cache_of(&path);
    path
}

/// Pages of `path` cached, as a fraction of its pages.
fn cached_fraction(path: &Path) -> f64 {
    let pages = std::fs::metadata(path).unwrap().len().div_ceil(4096).max(1);
    cached_pages(path) as f64 / pages as f64
}

/// Each program shape writes `out` from `src`; under `dontcache run` both
/// are left (almost) uncached and the output is what the program writes
/// without the library.
#[test]
fn every_write_path_of_a_dynamic_program_is_seen() {
    let s = scratch!("cover");
    let src = text_source(&s, "src", 32 << 20);
    let (src_s, out) = (p(&src).to_string(), s.file("out"));
    let python_copy = format!("import shutil; shutil.copyfile('{src_s}', '{out}')");
    let python_mmap = format!(
        "import mmap, os\nd = open('{src_s}', 'rb').read()\nfd = os.open('{out}', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)\n\
         os.ftruncate(fd, len(d))\nm = mmap.mmap(fd, len(d))\nm[:] = d\nm.close()\nos.close(fd)\n"
    );
    let python_exit = format!(
        "import os\npid = os.fork()\nif pid == 0:\n    d = open('{src_s}', 'rb').read()\n    \
         fd = os.open('{out}', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n    os.write(fd, d)\n    os._exit(0)\n\
         os.waitpid(pid, 0)\n"
    );
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("a shell redirection", vec!["sh".into(), "-c".into(), format!("cat '{src_s}' > '{out}'")]),
        ("stdio (sort -o)", vec!["sort".into(), "-o".into(), out.clone(), src_s.clone()]),
        (
            "stdio through a redirection (awk)",
            vec!["sh".into(), "-c".into(), format!("awk '{{print}}' '{src_s}' > '{out}'")],
        ),
        ("sendfile (shutil.copyfile)", vec!["python3".into(), "-c".into(), python_copy]),
        ("stores through mmap", vec!["python3".into(), "-c".into(), python_mmap]),
        ("a child leaving with os._exit", vec!["python3".into(), "-c".into(), python_exit]),
        ("cp", vec!["cp".into(), src_s.clone(), out.clone()]),
    ];
    let expected = s.path("expected");
    for (what, argv) in &cases {
        // The same command without the library: the bytes to expect, and
        // the control that shows the checks below can fail.
        let _ = std::fs::remove_file(&out);
        let plain = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        assert!(plain.status.success(), "{what} without the library: {}", said(&plain));
        assert!(cached_fraction(Path::new(&out)) > 0.5, "{what}: plainly the output stays cached (the control)");
        std::fs::rename(&out, &expected).unwrap();
        drop_cache_of(&src);
        let mut args = vec!["run", "--"];
        args.extend(argv.iter().map(|a| a.as_str()));
        let run = dontcache(&args);
        assert!(run.status.success(), "{what}: {}", said(&run));
        let (o, i) = (cached_fraction(Path::new(&out)), cached_fraction(&src));
        assert!(o <= 0.05, "{what}: {:.1}% of the output left cached", o * 100.0);
        assert!(i <= 0.05, "{what}: {:.1}% of the input left cached", i * 100.0);
        assert!(std::fs::read(&out).unwrap() == std::fs::read(&expected).unwrap(), "{what}: the output differs");
    }
}

/// Whether `python3` has its `sqlite3` module (the SQLite tests need it).
fn python_has_sqlite() -> bool {
    Command::new("python3").args(["-c", "import sqlite3"]).output().is_ok_and(|o| o.status.success())
}

/// The row count and the sum of column `a` of table `t` in the database
/// `db`, as Python prints them (plainly, after the program under test).
fn rows_and_sum(db: &str) -> String {
    let query =
        format!("import sqlite3\nprint(sqlite3.connect('{db}').execute('select count(*), sum(a) from t').fetchone())");
    let out = Command::new("python3").args(["-c", &query]).output().unwrap();
    assert!(out.status.success(), "the query of {db} failed: {}", said(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// SQLite locks its database with `fcntl` locks, which any close of a
/// descriptor of the library's would release: the library keeps none, and
/// the program's own close drops the file through its descriptor. A
/// database made plainly stays cached (the control); under `dontcache run`
/// next to none of it does, in rollback-journal and WAL mode, and it holds
/// every row.
#[test]
fn a_sqlite_database_is_dropped_through_the_programs_descriptor() {
    if !python_has_sqlite() {
        return skip("a_sqlite_database_is_dropped_through_the_programs_descriptor", "python3 has no sqlite3");
    }
    let s = scratch!("sqlite");
    let db = s.file("db");
    for mode in ["delete", "wal"] {
        let insert = format!(
            "import sqlite3\nc = sqlite3.connect('{db}')\nc.execute('pragma journal_mode={mode}')\n\
             c.execute('create table t(a integer, b text)')\nwith c:\n    \
             c.executemany('insert into t values(?, ?)', ((i, 'x' * 100) for i in range(100000)))\nc.close()\n"
        );
        let _ = std::fs::remove_file(&db);
        let plain = Command::new("python3").args(["-c", &insert]).output().unwrap();
        assert!(plain.status.success(), "{mode} without the library: {}", said(&plain));
        assert!(cached_fraction(Path::new(&db)) > 0.5, "{mode}: plainly the database stays cached (the control)");
        std::fs::remove_file(&db).unwrap();
        let run = dontcache(&["run", "--", "python3", "-c", &insert]);
        assert!(run.status.success(), "{mode}: {}", said(&run));
        let left = cached_fraction(Path::new(&db));
        assert!(left <= 0.05, "{mode}: {:.1}% of the database left cached", left * 100.0);
        assert_eq!(rows_and_sum(&db), "(100000, 4999950000)", "{mode}: rows of the database");
    }
}

/// SQLite commits each small transaction with syncs of its journal (or
/// its write-ahead log) and writes on where it stopped, rewrites the
/// journal's header, writes the log over from its start after each
/// checkpoint and reads it back: none of that reads back from the disk
/// what the library dropped at every sync (2,000 transactions read 8 MB
/// back with the rollback journal and 24 MB in WAL mode; the log's first
/// round, read back to checkpoint it, is left). Two connections of one
/// process open the log twice, each open counting its own writes: 14-16
/// MB read in 3 of 12 runs where each open was swept alone, about 0.3 MB
/// otherwise. A pool, a connection opened for every tenth transaction's
/// query beside the one writing: the query read back what the writer's
/// syncs dropped of the log (and each close of a connection dropped the
/// files under the other), 43-59 MB against none.
#[test]
fn sqlite_transactions_do_not_read_back_what_the_library_dropped() {
    if !python_has_sqlite() {
        return skip("sqlite_transactions_do_not_read_back_what_the_library_dropped", "python3 has no sqlite3");
    }
    let s = scratch!("sqlite-transactions");
    let db = s.file("db");
    let cases = [("delete", 1, 0, 2 << 20), ("wal", 1, 0, 12 << 20), ("wal", 2, 0, 8 << 20), ("wal", 1, 1, 8 << 20)];
    for (mode, connections, pool, at_most) in cases {
        let insert = format!(
            "import sqlite3\ndef read():\n    \
             return int(next(l for l in open('/proc/self/io') if l.startswith('read_bytes')).split()[1])\n\
             c = sqlite3.connect('{db}')\nc.execute('pragma journal_mode={mode}')\n\
             c.execute('create table t(a integer, b text)')\nc.commit()\n\
             cs = [c] + [sqlite3.connect('{db}') for _ in range({connections} - 1)]\nbefore = read()\n\
             for k in range(2000):\n    if {pool} and k % 10 == 9:\n        \
             o = sqlite3.connect('{db}')\n        o.execute('select count(*) from t').fetchone()\n        o.close()\n    \
             with cs[k % len(cs)] as c:\n        \
             c.executemany('insert into t values(?, ?)', ((i, 'x' * 100) for i in range(k * 10, k * 10 + 10)))\n\
             for c in cs:\n    c.close()\nprint(read() - before)\n"
        );
        let what = format!("{mode}, {connections} connection(s){}", if pool == 1 { " and a pool's" } else { "" });
        let _ = std::fs::remove_file(&db);
        let run = dontcache(&["run", "--", "python3", "-c", &insert]);
        assert!(run.status.success(), "{what}: {}", said(&run));
        // Read during the transactions only: the interpreter's own start
        // reads megabytes where its files are not cached.
        let read: u64 = String::from_utf8_lossy(&run.stdout).trim().parse().unwrap();
        assert!(read <= at_most, "{what}: {read} bytes read from the disk by 2,000 transactions");
        assert!(cached_fraction(Path::new(&db)) <= 0.05, "{what}: the database left cached");
        assert_eq!(rows_and_sum(&db), "(20000, 199990000)", "{what}: rows of the database");
    }
}

/// fio writing through io_uring: writes the shim never sees, found by the
/// flusher's sweep and at close.
#[test]
fn an_io_uring_writer_is_swept() {
    if Command::new("fio").arg("--version").output().is_err() {
        return skip("an_io_uring_writer_is_swept", "fio is not installed (scripts/setup.sh installs it)");
    }
    let s = scratch!("uring");
    let out = s.file("f");
    let run = dontcache(&[
        "run",
        "--",
        "fio",
        "--name=u",
        &format!("--filename={out}"),
        "--size=128m",
        "--bs=64k",
        "--rw=write",
        "--ioengine=io_uring",
        "--iodepth=8",
        "--output=/dev/null",
    ]);
    assert!(run.status.success(), "{}", said(&run));
    let left = cached_fraction(Path::new(&out));
    assert!(left <= 0.05, "{:.1}% of fio's io_uring output left cached", left * 100.0);
}

const STDIO_READER: &str = r#"
#include <stdio.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "r");
    if (!f) return 2;
    static char buf[1 << 16];
    unsigned long total = 0;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) total += n;
    printf("%lu\n", total);
    return fclose(f) != 0;
}
"#;

/// A file read to its end through stdio (reads the shim does not see: the
/// flusher drops up to the file position, close drops the whole file)
/// leaves none of it cached, its partial last page included, for sizes
/// that are not a multiple of any folio size.
#[test]
fn a_stdio_reader_leaves_nothing_of_its_input() {
    let s = scratch!("stdio-read");
    let exe = compile_c(&s.dir, "reader", STDIO_READER, &[]);
    for (i, size) in [7_448_344usize, (3 << 20) + 1].into_iter().enumerate() {
        let src = s.path(&format!("src-{i}"));
        std::fs::write(&src, pattern(3, 0, size)).unwrap();
        drop_cache_of(&src);
        let run = dontcache(&["run", "--", p(&exe), p(&src)]);
        assert!(run.status.success(), "{}", said(&run));
        assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), size.to_string());
        assert_eq!(cached_pages(&src), 0, "pages of a {size}-byte input left cached");
    }
}

/// A reader that stops partway and exits (`dd count=`, `head -c`) leaves
/// nothing of its input cached, the readahead past where it stopped
/// included: its last drop, deferred while that readahead was still on
/// the disk, is retried. Under the shim alone (no `run` to finish it)
/// 640 pages (2.5 MiB) stayed in 3 of 3 runs of each before.
#[test]
fn a_reader_that_stops_partway_leaves_no_readahead() {
    let s = scratch!("partial-read");
    let src = s.path("src");
    std::fs::write(&src, pattern(5, 0, 64 << 20)).unwrap();
    let shim = Path::new(env!("CARGO_BIN_EXE_dontcache")).with_file_name("libdontcache_preload.so");
    let readers: [&[&str]; 2] =
        [&["dd", "of=/dev/null", "bs=1M", "count=16", "status=none"], &["head", "-c", "16777216"]];
    for round in 0..3 {
        for reader in readers {
            drop_cache_of(&src);
            let mut cmd = Command::new(reader[0]);
            cmd.args(&reader[1..]).env("LD_PRELOAD", &shim);
            if reader[0] == "dd" {
                cmd.arg(format!("if={}", p(&src)));
            } else {
                cmd.arg(&src);
            }
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{}", said(&out));
            assert_eq!(cached_pages(&src), 0, "{} (round {round}) left pages of its input cached", reader[0]);
        }
    }
}

/// Writes `argv[2]` MiB of `x` to `argv[1]`; `argv[3]` says what then:
/// `close` closes the file and execs `true`, `keep` execs it with the file
/// open, `fail` first tries an exec that fails and writes as much again.
/// `l`, `lp` and `le` exec `sh` with `execl`, `execlp` and `execle`
/// instead, the file open, with arguments past the registers (sh exits 3,
/// 4, and 5 from the environment given): the arguments arrived whole.
const EXECER: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    static char buf[1 << 20];
    memset(buf, 'x', sizeof buf);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644), n = atoi(argv[2]);
    char *args[] = {"true", NULL}, *env[] = {"DC_N=5", NULL};
    for (int i = 0; i < n; i++)
        if (write(fd, buf, sizeof buf) != sizeof buf) return 3;
    if (!strcmp(argv[3], "fail")) {
        execv("/nonexistent/true", args);
        for (int i = 0; i < n; i++)
            if (write(fd, buf, sizeof buf) != sizeof buf) return 4;
        return close(fd) ? 5 : 0;
    }
    if (!strcmp(argv[3], "l")) execl("/bin/sh", "sh", "-c", "exit $#", "x", "a", "b", "c", (char *)NULL);
    if (!strcmp(argv[3], "lp")) execlp("sh", "sh", "-c", "exit $#", "x", "a", "b", "c", "d", (char *)NULL);
    if (!strcmp(argv[3], "le")) execle("/bin/sh", "sh", "-c", "exit $DC_N", "x", "a", "b", (char *)NULL, env);
    if (!strcmp(argv[3], "close") && close(fd)) return 6;
    execv("/bin/true", args);
    return 7;
}
"#;

/// A process that writes and then execs another program (the new image
/// keeps nothing of the library's: its descriptors close on exec) has its
/// files written back and dropped first, whether it closed them or left
/// them open to the new image, and through the variadic `execl` family
/// too; an exec that fails goes on with its files tracked. Before,
/// 192-200 MiB of 200 stayed cached after the exec.
#[test]
fn a_writer_that_execs_leaves_nothing_cached() {
    let s = scratch!("exec");
    let exe = compile_c(&s.dir, "execer", EXECER, &[]);
    let dst = s.path("out");
    let shim = Path::new(env!("CARGO_BIN_EXE_dontcache")).with_file_name("libdontcache_preload.so");
    let cases =
        [("close", 128u64, 0), ("keep", 128, 0), ("fail", 64, 0), ("l", 128, 3), ("lp", 128, 4), ("le", 128, 5)];
    for (how, mib, status) in cases {
        for under_run in [false, true] {
            let out = if under_run {
                dontcache(&["run", "--", p(&exe), p(&dst), &mib.to_string(), how])
            } else {
                Command::new(&exe).arg(&dst).arg(mib.to_string()).arg(how).env("LD_PRELOAD", &shim).output().unwrap()
            };
            assert_eq!(out.status.code(), Some(status), "{how} (run: {under_run}): {}", said(&out));
            let want = if how == "fail" { 2 * mib } else { mib } << 20;
            assert_eq!(std::fs::metadata(&dst).unwrap().len(), want, "{how}");
            assert_eq!(cached_pages(&dst), 0, "{how} (run: {under_run}): pages left cached");
        }
    }
}

const MIXED_WRITER: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
/* Writes argv[2] small files in directory argv[1], each through write(2),
   which the shim sees, and a raw pwrite64 system call, which it does not. */
int main(int argc, char **argv) {
    int files = atoi(argv[2]);
    static char buf[3 * 4096];
    for (int i = 0; i < files; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/f%d", argv[1], i);
        for (size_t j = 0; j < sizeof buf; j++) buf[j] = (char)(i * 31 + j * 7);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) return 2;
        if (write(fd, buf, 5000) != 5000) return 3;
        if (syscall(SYS_pwrite64, fd, buf + 5000, sizeof buf - 5000, 5000L) != (long)(sizeof buf - 5000)) return 4;
        if (close(fd) != 0) return 5;
    }
    return 0;
}
"#;

/// Small files written in part through a call the shim does not see (a raw
/// system call) and closed at once: their last close waits for and drops
/// each whole file, so nothing of them stays cached, where the same
/// program without the library leaves them all cached (the control).
#[test]
fn small_files_written_partly_unseen_leave_nothing_cached() {
    let s = scratch!("mixed");
    let exe = compile_c(&s.dir, "mixed", MIXED_WRITER, &[]);
    let files = 300;
    let cached = |dir: &Path| -> u64 { (0..files).map(|i| cached_pages(&dir.join(format!("f{i}")))).sum() };
    let (native, shimmed) = (s.path("native"), s.path("shimmed"));
    for dir in [&native, &shimmed] {
        std::fs::create_dir(dir).unwrap();
    }
    let plain = Command::new(&exe).arg(&native).arg(files.to_string()).output().unwrap();
    assert!(plain.status.success(), "without the library: {}", said(&plain));
    assert_eq!(cached(&native), 3 * files, "plainly every page stays cached (the control)");
    let run = dontcache(&["run", "--", p(&exe), p(&shimmed), &files.to_string()]);
    assert!(run.status.success(), "{}", said(&run));
    assert_eq!(cached(&shimmed), 0, "pages left cached");
    for i in 0..files {
        let name = format!("f{i}");
        assert!(
            std::fs::read(native.join(&name)).unwrap() == std::fs::read(shimmed.join(&name)).unwrap(),
            "{name} differs"
        );
    }
}

const MADE_FILES: &str = r#"
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
/* argv[1] a directory, argv[2] files a thread, argv[3] threads, argv[4]
   seconds to sleep at the end. Each thread makes its files with
   O_CREAT|O_EXCL (5 to 68 KiB, every hundredth 3 MiB), writes each through
   write(2) but its last 4 KiB through a raw pwrite64 the shim does not
   see (the 51st also 4 KiB 32 MiB in, past a hole; the 61st 2 MiB 64 MiB
   in, which gives it a handle), and closes it; then "closed" is printed
   and the program sleeps. */
static const char *dir;
static int files;
static size_t size_of(int t, int i) {
    return i % 100 == 99 ? 3u << 20 : 5120 + (size_t)(t * 7919 + i * 104729) % (63 * 1024);
}
static void *writer(void *arg) {
    int t = (int)(long)arg;
    char *buf = malloc(3u << 20);
    for (int i = 0; i < files; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/t%d-f%d", dir, t, i);
        size_t n = size_of(t, i), seen = n - 4096;
        for (size_t j = 0; j < n; j++) buf[j] = (char)(t * 131 + i * 31 + j * 7);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) exit(2);
        for (size_t at = 0; at < seen;) {
            ssize_t w = write(fd, buf + at, seen - at > 65536 ? 65536 : seen - at);
            if (w <= 0) exit(3);
            at += (size_t)w;
        }
        if (syscall(SYS_pwrite64, fd, buf + seen, 4096, (long)seen) != 4096) exit(4);
        if (i == 50 && pwrite(fd, buf, 4096, 32 << 20) != 4096) exit(6);
        if (i == 60 && pwrite(fd, buf, 2u << 20, 64 << 20) != 2 << 20) exit(7);
        if (close(fd) != 0) exit(5);
    }
    free(buf);
    return 0;
}
int main(int argc, char **argv) {
    dir = argv[1];
    files = atoi(argv[2]);
    int threads = atoi(argv[3]);
    pthread_t th[16];
    for (int t = 0; t < threads; t++) pthread_create(&th[t], 0, writer, (void *)(long)t);
    for (int t = 0; t < threads; t++) pthread_join(th[t], 0);
    printf("closed\n");
    fflush(stdout);
    sleep((unsigned)atoi(argv[4]));
    return 0;
}
"#;

/// Files a program makes (`O_CREAT|O_EXCL`) get no handle while small:
/// each is handed over whole at its close, unseen writes included, and is
/// written back and dropped while the program goes on (not at its exit);
/// one that grows past a MiB gets its handle, and sparse ones (with a
/// handle or without) are dropped too. Four threads make 2,000 files;
/// without the library they stay cached (the control).
#[test]
fn files_the_program_made_are_dropped_after_their_close() {
    use std::io::BufRead;
    let s = scratch!("made");
    let exe = compile_c(&s.dir, "made", MADE_FILES, &["-pthread"]);
    let (per_thread, threads) = (500, 4);
    let names: Vec<String> = (0..threads).flat_map(|t| (0..per_thread).map(move |i| format!("t{t}-f{i}"))).collect();
    let cached = |dir: &Path| -> u64 { names.iter().map(|n| cached_pages(&dir.join(n))).sum() };
    // Pages with data: the sparse files' holes are none.
    let pages = |dir: &Path| -> u64 {
        use std::os::unix::fs::MetadataExt;
        names.iter().map(|n| std::fs::metadata(dir.join(n)).unwrap().blocks().div_ceil(8)).sum()
    };
    let (native, shimmed) = (s.path("native"), s.path("shimmed"));
    for dir in [&native, &shimmed] {
        std::fs::create_dir(dir).unwrap();
    }
    let args =
        |dir: &Path, sleep: &str| [p(dir).to_string(), per_thread.to_string(), threads.to_string(), sleep.into()];
    let plain = Command::new(&exe).args(args(&native, "0")).output().unwrap();
    assert!(plain.status.success(), "without the library: {}", said(&plain));
    assert!(cached(&native) * 10 > pages(&native) * 9, "plainly the files stay cached (the control)");
    let mut run = Command::new(env!("CARGO_BIN_EXE_dontcache"))
        .args(["run", "--", p(&exe)])
        .args(args(&shimmed, "5"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(run.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "closed\n");
    let since = std::time::Instant::now();
    while cached(&shimmed) > 0 && since.elapsed() < std::time::Duration::from_secs(3) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let left = cached(&shimmed);
    assert_eq!(left, 0, "{left} of {} pages still cached {:?} after the last close", pages(&shimmed), since.elapsed());
    assert!(run.wait().unwrap().success());
    for name in &names {
        assert!(
            std::fs::read(native.join(name)).unwrap() == std::fs::read(shimmed.join(name)).unwrap(),
            "{name} differs"
        );
    }
}

/// Small inputs with nothing of them cached are read without a handle and
/// dropped whole at close, at exit (also `_exit`) or when mapped: each
/// shape leaves none of them cached, where the same command without the
/// library leaves them cached (the control).
#[test]
fn small_inputs_are_dropped_by_every_way_of_reading_them() {
    let s = scratch!("small-inputs");
    let sizes = [1usize, 4095, 24 << 10, 200_001, 1 << 20];
    let files: Vec<PathBuf> = sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let path = s.path(&format!("in-{i}"));
            std::fs::write(&path, pattern(9, 0, len)).unwrap();
            path
        })
        .collect();
    let names: Vec<String> = files.iter().map(|f| format!("'{}'", p(f))).collect();
    let all = names.join(" ");
    let first = &names[2];
    let listed = names.join(", ");
    let python_mapped = [
        "import mmap".to_string(),
        format!("for n in [{listed}]:"),
        "    f = open(n, 'rb')".into(),
        "    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)".into(),
        "    assert len(m[:]) > 0".into(),
        "    m.close()".into(),
        "    f.close()".into(),
    ]
    .join("\n");
    let python_exit = [
        "import os".to_string(),
        format!("for n in [{listed}]:"),
        "    open(n, 'rb').read()".into(),
        "os._exit(0)".into(),
    ]
    .join("\n");
    let out = s.file("out");
    // What each shape does, and whether it reads every input or the third.
    let cases: Vec<(&str, Vec<String>, bool)> = vec![
        ("cat, read and closed", vec!["sh".into(), "-c".into(), format!("cat {all} > /dev/null")], true),
        ("an inherited standard input", vec!["sh".into(), "-c".into(), format!("cat < {first} > /dev/null")], false),
        (
            "a copy of the descriptor (exec 3<, <&3)",
            vec!["sh".into(), "-c".into(), format!("exec 3< {first}; cat <&3 > /dev/null; exec 3<&-")],
            false,
        ),
        ("mmap", vec!["python3".into(), "-c".into(), python_mapped], true),
        ("left open at os._exit", vec!["python3".into(), "-c".into(), python_exit], true),
        (
            "cp (copy_file_range)",
            vec!["sh".into(), "-c".into(), format!("rm -rf '{out}' && mkdir '{out}' && cp {all} '{out}'")],
            true,
        ),
    ];
    let cached = |files: &[PathBuf]| files.iter().map(|f| cached_pages(f)).sum::<u64>();
    for (what, argv, reads_all) in &cases {
        let read = if *reads_all { &files[..] } else { &files[2..3] };
        files.iter().for_each(|f| drop_cache_of(f));
        let plain = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        assert!(plain.status.success(), "{what} without the library: {}", said(&plain));
        assert!(cached(read) > 0, "{what}: plainly the inputs stay cached (the control)");
        files.iter().for_each(|f| drop_cache_of(f));
        let mut args = vec!["run", "--"];
        args.extend(argv.iter().map(|a| a.as_str()));
        let run = dontcache(&args);
        assert!(run.status.success(), "{what}: {}", said(&run));
        let left: Vec<u64> = files.iter().map(|f| cached_pages(f)).collect();
        assert!(left.iter().all(|&n| n == 0), "{what}: pages left cached per input {left:?}");
    }
}

/// A small cold input read through `read(2)` to its end, with its
/// descriptor still open: the kernel has dropped what was read already
/// (its reads carry `RWF_DONTCACHE`), where the same program without the
/// library finds it all cached (the control); the bytes read are the
/// file's. Skipped where the kernel does not take the flag on reads.
#[test]
fn a_small_inputs_reads_are_dropped_as_they_go() {
    let s = scratch!("small-input-reads");
    let len = 300_001;
    let path = s.path("in");
    std::fs::write(&path, pattern(12, 0, len)).unwrap();
    let expected = s.path("expected");
    std::fs::write(&expected, pattern(12, 0, len)).unwrap();
    let script = [
        "import ctypes, errno, os, sys",
        "fd = os.open(sys.argv[1], os.O_RDONLY)",
        "try:",
        "    os.preadv(fd, [bytearray(1)], os.fstat(fd).st_size, 0x80)",
        "except OSError as e:",
        "    assert e.errno == errno.EOPNOTSUPP, e",
        "    print('refused'); sys.exit(0)",
        "data = b''",
        "while True:",
        "    b = os.read(fd, 65536)",
        "    if not b: break",
        "    data += b",
        "assert data == open(sys.argv[2], 'rb').read(), 'bytes differ'",
        "libc = ctypes.CDLL(None, use_errno=True)",
        "rng, st = (ctypes.c_uint64 * 2)(0, 0), (ctypes.c_uint64 * 5)()",
        "assert libc.syscall(451, fd, rng, st, 0) == 0, ctypes.get_errno()",
        "print(st[0])",
    ]
    .join("\n");
    let argv = ["python3", "-c", &script, p(&path), p(&expected)];
    drop_cache_of(&path);
    let plain = Command::new(argv[0]).args(&argv[1..]).output().unwrap();
    assert!(plain.status.success(), "without the library: {}", said(&plain));
    let plain = String::from_utf8_lossy(&plain.stdout).trim().to_string();
    if plain == "refused" {
        return skip("a_small_inputs_reads_are_dropped_as_they_go", "the kernel refuses RWF_DONTCACHE on reads here");
    }
    assert!(plain.parse::<u64>().unwrap() > 0, "plainly what was read stays cached (the control)");
    drop_cache_of(&path);
    let mut args = vec!["run", "--"];
    args.extend(argv);
    let run = dontcache(&args);
    assert!(run.status.success(), "{}", said(&run));
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "0", "pages cached while the input is still open");
    assert_eq!(cached_pages(&path), 0, "pages left cached");
}

/// A forked child that exits leaves its parent's small input alone (a
/// shell's subshells exit while it reads a file): the parent, still
/// reading, finds the pages it read cached; its own close drops them. (It
/// reads at an offset: what a read at the file position brings in the
/// kernel drops at once, `a_small_inputs_reads_are_dropped_as_they_go`.)
#[test]
fn a_forked_childs_exit_leaves_its_parents_input() {
    let s = scratch!("fork-input");
    let src = s.path("src");
    std::fs::write(&src, pattern(5, 0, 200_000)).unwrap();
    drop_cache_of(&src);
    let script = [
        "import os, subprocess, sys".to_string(),
        format!("fd = os.open('{}', os.O_RDONLY)", p(&src)),
        "assert len(os.pread(fd, 200000, 0)) == 200000".into(),
        "pid = os.fork()".into(),
        "if pid == 0:".into(),
        "    os._exit(0)".into(),
        "os.waitpid(pid, 0)".into(),
        format!(
            "out = subprocess.run(['fincore', '-n', '-o', 'PAGES', '{}'], capture_output=True, text=True)",
            p(&src)
        ),
        "print(out.stdout.strip())".into(),
        "os.close(fd)".into(),
    ]
    .join("\n");
    let run = dontcache(&["run", "--", "python3", "-c", &script]);
    assert!(run.status.success(), "{}", said(&run));
    let after_child: u64 = String::from_utf8_lossy(&run.stdout).trim().parse().expect("fincore's count");
    assert_eq!(after_child, 200_000u64.div_ceil(4096), "pages the parent read left cached after its child's exit");
    assert_eq!(cached_pages(&src), 0, "pages left cached after the parent's close");
}

/// Small cold inputs read at an offset (which the kernel does not drop
/// as it goes) and closed are dropped a moment after their close while
/// the program runs on, more of them at once than the library queues
/// before a close drops them itself (128): counted by `fincore` from the
/// program, up to 5 s after the last close.
#[test]
fn small_inputs_are_dropped_after_their_close_while_the_program_runs() {
    let s = scratch!("small-inputs-after-close");
    let files: Vec<PathBuf> = (0..300)
        .map(|i| {
            let path = s.path(&format!("in-{i}"));
            std::fs::write(&path, pattern((i % 251) as u8, 0, 12_288 + i)).unwrap();
            drop_cache_of(&path);
            path
        })
        .collect();
    let listed: Vec<String> = files.iter().map(|f| format!("'{}'", p(f))).collect();
    let script = [
        "import os, subprocess, time".to_string(),
        format!("names = [{}]", listed.join(", ")),
        "for n in names:".into(),
        "    fd = os.open(n, os.O_RDONLY)".into(),
        "    assert len(os.pread(fd, 1 << 20, 0)) == os.fstat(fd).st_size".into(),
        "    os.close(fd)".into(),
        "for _ in range(100):".into(),
        "    out = subprocess.run(['fincore', '-n', '-o', 'PAGES'] + names, capture_output=True, text=True)".into(),
        "    left = sum(int(x) for x in out.stdout.split())".into(),
        "    if left == 0: break".into(),
        "    time.sleep(0.05)".into(),
        "print(left)".into(),
    ]
    .join("\n");
    let plain = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(plain.status.success(), "without the library: {}", said(&plain));
    let control: u64 = String::from_utf8_lossy(&plain.stdout).trim().parse().expect("fincore's count");
    assert!(control > 0, "plainly the inputs stay cached (the control)");
    files.iter().for_each(|f| drop_cache_of(f));
    let run = dontcache(&["run", "--", "python3", "-c", &script]);
    assert!(run.status.success(), "{}", said(&run));
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "0", "pages cached 5 s after the closes");
}

/// Reads the small file `argv[1]` at an offset (the kernel keeps what
/// such reads bring in), closes it and sends itself `SIGTERM`. It has no
/// file the shim tracks with a handle, so no settling thread.
const READ_CLOSE_AND_DIE: &str = r#"
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    static char buf[1 << 20];
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0 || pread(fd, buf, sizeof buf, 0) <= 0 || close(fd) != 0)
        return 2;
    kill(getpid(), SIGTERM);
    return 3;
}
"#;

/// A process a stop signal ends right after it closed a small cold input
/// (before the library's thread dropped it) leaves none of it cached: the
/// shim's handler drops the inputs whose drop is queued, where no
/// settling thread would.
#[test]
fn a_stop_signal_after_a_close_leaves_the_input_uncached() {
    let s = scratch!("small-input-stop");
    let exe = compile_c(&s.dir, "read_close_and_die", READ_CLOSE_AND_DIE, &[]);
    let src = s.path("src");
    std::fs::write(&src, pattern(7, 0, 200_000)).unwrap();
    drop_cache_of(&src);
    let plain = Command::new(&exe).arg(&src).output().unwrap();
    let signal = |st: &std::process::ExitStatus| std::os::unix::process::ExitStatusExt::signal(st);
    assert_eq!(signal(&plain.status), Some(libc::SIGTERM), "without the library: {}", said(&plain));
    assert!(cached_pages(&src) > 0, "plainly the input stays cached (the control)");
    for round in 0..5 {
        drop_cache_of(&src);
        let run = dontcache(&["run", "--", p(&exe), p(&src)]);
        assert_eq!(
            signal(&run.status),
            Some(libc::SIGTERM),
            "round {round}: `run` dies of the command's signal: {}",
            said(&run)
        );
        assert_eq!(cached_pages(&src), 0, "round {round}: pages left cached");
    }
}

/// An input's pages cached before the program ran stay cached, the rest
/// of what it read is dropped; an input cached whole is left as it was.
/// A small input partly cached too (it gets a handle, not the drop of the
/// whole file at close that a small input nothing of which is cached gets).
#[test]
fn an_inputs_pages_cached_before_stay() {
    let s = scratch!("precached-input");
    for size in [16 * MIB, MIB / 2] {
        let src = s.path(&format!("src-{size}"));
        std::fs::write(&src, pattern(4, 0, size as usize)).unwrap();
        for (what, cached_before) in [("a quarter", size / 4), ("all", size)] {
            let what = format!("{what} of {size} bytes");
            copy_keeps_what_was_cached(&s, &src, size, &what, cached_before);
        }
    }
}

fn copy_keeps_what_was_cached(s: &Scratch, src: &Path, size: u64, what: &str, cached_before: u64) {
    drop_cache_of(src);
    {
        use std::io::Read;
        use std::os::fd::AsFd;
        let mut f = std::fs::File::open(src).unwrap();
        // No readahead: exactly the bytes read are cached.
        dc_sys::fadvise(f.as_fd(), 0, 0, dc_sys::Advice::Random).unwrap();
        f.read_exact(&mut vec![0; cached_before as usize]).unwrap();
    }
    // Counted with the pages the machine's own reclaim takes meanwhile
    // (under `make stress` one of 4,096 went between the read and the
    // count): the library's drops leave no trace there, reclaim does.
    let before = kept_or_reclaimed_in(src, 0, cached_before);
    assert_eq!(before, cached_before / 4096, "{what}: the setup caches exactly the first bytes");
    let out = s.path("out");
    let _ = std::fs::remove_file(&out);
    let run = dontcache(&["run", "--", "cp", p(src), p(&out)]);
    assert!(run.status.success(), "{what}: {}", said(&run));
    assert_pattern(&out, 4, size);
    let kept = kept_or_reclaimed_in(src, 0, cached_before);
    assert!(kept >= before * 95 / 100, "{what}: {kept} of the {before} pages cached before are left");
    let rest = cached_pages(src) - cached_pages_in(src, 0, cached_before);
    assert!(rest <= 16, "{what}: {rest} pages the copy read are left cached");
}

const STATIC_WRITER: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 2;
    long mib = atol(argv[2]);
    char *buf = malloc(1 << 20);
    for (long i = 0; i < mib; i++) {
        memset(buf, (int)(i * 7 + 1), 1 << 20);
        if (write(fd, buf, 1 << 20) != 1 << 20) return 3;
    }
    return close(fd) ? 4 : 0;
}
"#;

/// A statically linked program is out of the shim's reach: `run` says so,
/// and `run --watch` covers it from outside.
#[test]
fn a_static_binary_is_covered_with_watch() {
    if !is_root() {
        return skip("a_static_binary_is_covered_with_watch", "--watch needs root (fanotify)");
    }
    let s = scratch!("static");
    let exe = compile_c(&s.dir, "writer", STATIC_WRITER, &["-static"]);
    let out = s.path("out");
    let run = dontcache(&["run", "--", p(&exe), p(&out), "64"]);
    assert!(run.status.success(), "{}", said(&run));
    assert!(String::from_utf8_lossy(&run.stderr).contains("statically linked"), "{}", said(&run));
    assert!(cached_fraction(&out) > 0.5, "without --watch the static writer's output stays cached (the control)");
    std::fs::remove_file(&out).unwrap();
    let run = dontcache(&["run", "--watch", "--", p(&exe), p(&out), "64"]);
    assert!(run.status.success(), "{}", said(&run));
    let left = cached_fraction(&out);
    assert!(left <= 0.05, "--watch: {:.1}% of the static writer's output left cached", left * 100.0);
    let data = std::fs::read(&out).unwrap();
    assert_eq!(data.len(), 64 << 20);
    assert!(data.chunks(1 << 20).enumerate().all(|(i, c)| c.iter().all(|&b| b == (i * 7 + 1) as u8)));
}

/// `tree.tar` in `s`: a directory `tree` of 64 files of `size` bytes each.
fn tree_archive(s: &Scratch, size: usize) -> PathBuf {
    let tree = s.path("tree");
    std::fs::create_dir(&tree).unwrap();
    for i in 0..64u64 {
        std::fs::write(tree.join(format!("f{i}")), pattern(i as u8, 0, size)).unwrap();
    }
    let tar = s.path("tree.tar");
    let made = Command::new("tar").args(["-cf", p(&tar), "-C", p(&s.dir), "tree"]).output().unwrap();
    assert!(made.status.success(), "{}", said(&made));
    tar
}

/// Writeback that fails after the program closed its file (a loop device
/// whose backing tmpfs fills) reaches `run`'s exit status and names the
/// file: through a descriptor the program inherited, and from a watched
/// static binary; and reaches `tar`, which makes its files without a
/// handle (`O_CREAT|O_EXCL`), by a later close, or `run`'s exit status.
#[test]
fn late_writeback_errors_reach_the_exit_status() {
    if !is_root() {
        return skip("late_writeback_errors_reach_the_exit_status", "needs root (loop devices)");
    }
    let s = scratch!("late");
    let src = s.path("src");
    std::fs::write(&src, pattern(40, 0, 48 << 20)).unwrap();
    // 128 MiB of ext4 on 24 MiB of tmpfs: writeback past ~24 MiB fails. The
    // high-water mark keeps the flusher from writing back before close.
    let fs = LoopFs::ext4_on_small_tmpfs(&s.dir, 128, 24);
    let dst = fs.mnt.join("inherited");
    let run =
        dontcache(&["run", "--high-water", "1g", "--", "sh", "-c", &format!("cat '{}' > '{}'", p(&src), p(&dst))]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_ne!(run.status.code(), Some(0), "{}", said(&run));
    assert!(err.contains(p(&dst)) || err.contains("Input/output error") || err.contains("No space"), "{}", said(&run));
    let exe = compile_c(&s.dir, "writer", STATIC_WRITER, &["-static"]);
    let dst = fs.mnt.join("watched");
    let run = dontcache(&["run", "--watch", "--high-water", "1g", "--", p(&exe), p(&dst), "48"]);
    assert_eq!(run.status.code(), Some(74), "{}", said(&run));
    assert!(String::from_utf8_lossy(&run.stderr).contains(p(&dst)), "the file is named: {}", said(&run));
    let tar = tree_archive(&s, 256 << 10);
    let run = dontcache(&["run", "--", "tar", "-xf", p(&tar), "-C", p(&fs.mnt)]);
    assert_ne!(run.status.code(), Some(0), "the writeback errors were lost: {}", said(&run));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("Input/output error") || err.contains("No space"), "{}", said(&run));
}

/// A container's root: `tar -xf` into an overlay whose upper layer's
/// writeback fails after tar closed its files. The error reaches tar (a
/// later close) or `run`'s exit status; tar opens every file relative to
/// a directory descriptor, the way the library finds each layer file.
#[test]
fn late_writeback_errors_on_an_overlay_reach_the_program() {
    if !is_root() {
        return skip("late_writeback_errors_on_an_overlay_reach_the_program", "needs root (loop devices, mounts)");
    }
    let s = scratch!("late-overlay");
    let tar = tree_archive(&s, 64 << 10);
    let fs = LoopFs::ext4_on_full_tmpfs(&s.dir, 64);
    for d in ["lower", "upper", "work"] {
        std::fs::create_dir(fs.mnt.join(d)).unwrap();
    }
    let merged = s.path("merged");
    std::fs::create_dir(&merged).unwrap();
    let m = p(&fs.mnt);
    let mount =
        format!("mount -t overlay dctest -o lowerdir={m}/lower,upperdir={m}/upper,workdir={m}/work {}", p(&merged));
    let mounted = sh(&mount);
    assert!(mounted.status.success(), "overlayfs: {}", said(&mounted));
    let run = dontcache(&["run", "--", "tar", "-xf", p(&tar), "-C", p(&merged)]);
    sh(&format!("umount -l {}", p(&merged)));
    assert_ne!(run.status.code(), Some(0), "the writeback errors were lost: {}", said(&run));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("Input/output error") || err.contains("No space"), "{}", said(&run));
}

/// A memory cgroup standing for a small machine: a hot file is read into
/// its cache, then a copy larger than the cgroup's memory runs in it.
/// Plain cp evicts the hot file; under `dontcache run` it stays.
#[test]
fn a_neighbours_hot_file_survives_a_big_copy() {
    // Room for the hot file (64 MiB) and what the library lets the copy
    // hold: a high-water mark dirty (64 MiB) and what is under writeback
    // (up to three marks, about one for a copy at the disk's pace: the
    // cgroup's peak was 187-196 MiB, the hot file in it, with a cap of two
    // marks or three) and the source's pages read but not yet dropped (a 32 MiB
    // batch gathering, and the one before it while the flusher waits on
    // writeback: up to 74 MiB at the peak, sampled with cachestat while
    // other tests loaded the disk). 256 MiB left a hot page evicted in one
    // run of five beside the other tests; the cgroup's share is not what
    // the library bounds, its own is.
    let Some(cg) = MemoryCgroup::new(320 << 20) else {
        return skip(
            "a_neighbours_hot_file_survives_a_big_copy",
            "no memory cgroup controller (v1 or v2) to use as root",
        );
    };
    let s = scratch!("neighbour");
    let hot = s.path("hot");
    std::fs::write(&hot, pattern(41, 0, 64 << 20)).unwrap();
    let big = s.path("big");
    std::fs::write(&big, pattern(42, 0, 512 << 20)).unwrap();
    drop_cache_of(&big);
    let dontcache_bin = env!("CARGO_BIN_EXE_dontcache");
    for (what, copy) in [
        ("plain cp", format!("cp '{}' '{}'", p(&big), s.file("copy"))),
        ("dontcache run -- cp", format!("'{dontcache_bin}' run -- cp '{}' '{}'", p(&big), s.file("copy"))),
    ] {
        // Each round starts from a cold cache: what the last copy left in
        // the cgroup would otherwise count as cached before this one.
        drop_cache_of(&hot);
        drop_cache_of(&big);
        let read = cg.run(&format!("cat '{}' > /dev/null", p(&hot)));
        assert!(read.status.success(), "{}", said(&read));
        assert!(
            cached_fraction(&hot) > 0.95,
            "the hot file is cached first: {:.2} {}",
            cached_fraction(&hot),
            said(&read)
        );
        let out = cg.run(&copy);
        assert!(out.status.success(), "{what}: {}", said(&out));
        let kept = cached_fraction(&hot);
        if what == "plain cp" {
            assert!(kept < 0.5, "plain cp evicts the hot file (the control): {:.0}% kept", kept * 100.0);
        } else {
            assert!(kept >= 0.95, "{what}: the hot file keeps {:.0}% of its pages", kept * 100.0);
        }
        let _ = std::fs::remove_file(s.path("copy"));
    }
}

/// A memory cgroup made for a test (v2 `memory.max`, or v1
/// `memory.limit_in_bytes`), removed when dropped.
struct MemoryCgroup {
    dir: PathBuf,
}

impl MemoryCgroup {
    fn new(limit: u64) -> Option<MemoryCgroup> {
        if !is_root() {
            return None;
        }
        let name = format!("dontcache-test-{}", std::process::id());
        let (dir, knob) = [
            ("/sys/fs/cgroup", "memory.max"),
            ("/sys/fs/cgroup/unified", "memory.max"),
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
        ]
        .into_iter()
        .map(|(root, knob)| (Path::new(root).join(&name), knob))
        .find(|(d, knob)| {
            d.parent().unwrap().join(knob).exists() || (knob == &"memory.max" && has_v2_memory(d.parent().unwrap()))
        })?;
        std::fs::create_dir(&dir).ok()?;
        std::fs::write(dir.join(knob), limit.to_string()).ok()?;
        Some(MemoryCgroup { dir })
    }

    fn run(&self, cmd: &str) -> std::process::Output {
        let procs = self.dir.join("cgroup.procs");
        sh(&format!("echo $$ > '{}' && {cmd}", procs.display()))
    }
}

fn has_v2_memory(root: &Path) -> bool {
    std::fs::read_to_string(root.join("cgroup.subtree_control"))
        .is_ok_and(|c| c.split_whitespace().any(|w| w == "memory"))
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}
