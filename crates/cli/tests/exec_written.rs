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
}
