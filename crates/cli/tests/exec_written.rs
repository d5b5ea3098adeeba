//! A program just written runs under `dontcache run` as without it: the
//! library's duplicate of the file (or `run`'s copy of a file an exited
//! process handed over) kept it open for writing after the program's
//! close, and the kernel refused to execute it ("Text file busy"), which
//! `cc -o t t.c && ./t` met.

mod common;
use common::*;

/// Copies `argv[1]` to `argv[2]` (executable), closes it, and runs the
/// copy at once with `posix_spawn`; exits with the copy's status.
const SPAWN_WRITTEN: &str = r#"
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
int main(int argc, char **argv) {
    static char buf[1 << 16];
    int in = open(argv[1], O_RDONLY), out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0755);
    ssize_t n;
    if (in < 0 || out < 0) return 2;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, n) != n) return 3;
    if (n < 0 || close(in) || close(out)) return 4;
    pid_t pid;
    char *args[] = {argv[2], NULL};
    int e = posix_spawn(&pid, argv[2], NULL, NULL, args, environ);
    if (e) { fprintf(stderr, "posix_spawn: %d\n", e); return 5; }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 6;
    return WEXITSTATUS(st);
}
"#;

/// For each of `execl`, `execlp`, `execle` and `execv`, and `execv` after
/// `vfork`: copies `argv[1]` to `argv[2]` and a suffix (executable), closes
/// it, and has a forked (or vforked) child exec the copy at once with
/// three arguments; exits 0 if every copy ran and exited with their count,
/// else with what went wrong (26: ETXTBSY).
const EXECL_WRITTEN: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
static int copy(const char *from, const char *to) {
    static char buf[1 << 16];
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    ssize_t n;
    if (in < 0 || out < 0) return -1;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, n) != n) return -1;
    return n < 0 || close(in) || close(out) ? -1 : 0;
}
int main(int argc, char **argv) {
    const char *kinds = "lpevV";
    for (const char *k = kinds; *k; k++) {
        char to[4096];
        snprintf(to, sizeof to, "%s-%c", argv[2], *k);
        if (copy(argv[1], to)) return 2;
        char *args[] = {to, "-c", "exit $#", "sh", "a", "b", "c", NULL};
        if (*k == 'V') {
            pid_t pid = vfork();
            if (pid == 0) {
                execv(to, args);
                _exit(errno == ETXTBSY ? 26 : 27);
            }
            int st;
            if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 3;
            if (WEXITSTATUS(st) != 3) return WEXITSTATUS(st) ? WEXITSTATUS(st) : 4;
            continue;
        }
        pid_t pid = fork();
        if (pid == 0) {
            if (*k == 'l') execl(to, to, "-c", "exit $#", "sh", "a", "b", "c", (char *)NULL);
            if (*k == 'p') execlp(to, to, "-c", "exit $#", "sh", "a", "b", "c", (char *)NULL);
            if (*k == 'e') execle(to, to, "-c", "exit $#", "sh", "a", "b", "c", (char *)NULL, environ);
            if (*k == 'v') execv(to, args);
            fprintf(stderr, "exec%c: %s\n", *k, strerror(errno));
            _exit(errno == ETXTBSY ? 26 : 27);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 3;
        if (WEXITSTATUS(st) != 3) return WEXITSTATUS(st) ? WEXITSTATUS(st) : 4;
    }
    return 0;
}
"#;

/// An `execl` that fails returns -1 with the errno; one of 300 arguments
/// (more than the shim reads itself) still gets them all: the shell exits
/// with their count, 300 % 256.
fn listed_calls() -> String {
    let args: Vec<String> = (0..300).map(|i| format!("\"a{i}\"")).collect();
    format!(
        r#"
#include <errno.h>
#include <unistd.h>
int main(void) {{
    if (execl("/nonexistent/x", "x", (char *)NULL) != -1 || errno != ENOENT) return 2;
    execl("/bin/sh", "sh", "-c", "exit $#", "sh", {}, (char *)NULL);
    return 3;
}}
"#,
        args.join(", ")
    )
}

#[test]
fn execl_fails_as_libcs_and_passes_long_lists_on() {
    let s = scratch!("exec-listed");
    let exe = compile_c(&s.dir, "listed", &listed_calls(), &[]);
    let out = dontcache(&["run", "--", p(&exe)]);
    assert_eq!(out.status.code(), Some(300 % 256), "{}", said(&out));
}

#[test]
fn a_program_just_written_runs() {
    let s = scratch!("exec-written");
    let truth = std::fs::canonicalize("/bin/true").unwrap();

    // Written by a process that has exited (its file handed to `run`), run
    // by the shell through execve.
    let copied = s.path("copied");
    let script = format!("cp {} {c} && {c}", p(&truth), c = p(&copied));
    let out = dontcache(&["run", "--", "sh", "-c", &script]);
    assert!(out.status.success(), "cp, then run the copy: {}", said(&out));

    // Written by this process, run by a vfork child (Python's subprocess).
    let py = format!(
        "import os, subprocess\np = {:?}\nwith open(p, 'w') as f: f.write('#!/bin/sh\\nexit 0\\n' + '#' * 3000000 + '\\n')\nos.chmod(p, 0o755)\nassert subprocess.run([p]).returncode == 0\n",
        p(&s.path("script"))
    );
    let out = dontcache(&["run", "--", "python3", "-c", &py]);
    assert!(out.status.success(), "a script written and run by one process: {}", said(&out));

    // Written by this process, run through posix_spawn.
    let exe = compile_c(&s.dir, "spawn", SPAWN_WRITTEN, &[]);
    let out = dontcache(&["run", "--", p(&exe), p(&truth), p(&s.path("spawned"))]);
    assert!(out.status.success(), "copy, then posix_spawn the copy: {}", said(&out));

    // Written by this process, run by a forked child (which holds a copy of
    // the library's duplicate) through execl, execlp, execle and execv, and
    // by a vfork child through execv (a shell, given more arguments than
    // the registers hold: it exits with their count).
    let exe = compile_c(&s.dir, "execl", EXECL_WRITTEN, &[]);
    let shell = std::fs::canonicalize("/bin/dash").unwrap_or_else(|_| std::fs::canonicalize("/bin/sh").unwrap());
    let out = dontcache(&["run", "--", p(&exe), p(&shell), p(&s.path("listed"))]);
    assert!(
        out.status.success(),
        "copy, then fork and execl, execlp, execle, execv the copy, and vfork and execv it: {}",
        said(&out)
    );
}
