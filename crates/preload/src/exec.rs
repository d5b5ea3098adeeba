//! `exec`: the new image keeps nothing of the engine's (its descriptors
//! close on exec), so the files are settled first (`settle_before_exec`).
//! The `execl` family is variadic, which stable Rust cannot define: glibc
//! builds their argument vectors and calls its own `execve` inside, where
//! the shim cannot see it. Shells (bash, dash), Python and coreutils'
//! wrappers (`env`, `nice`, `timeout`, `xargs`) use only the vector forms
//! below (their imports, `nm -D`); Perl too, but for a command it gives to
//! `/bin/sh`, which goes through `execl`.

use std::ffi::{c_char, c_int};

use crate::real;

type Vector = *const *const c_char;

#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Vector, envp: Vector) -> c_int {
    crate::settle_before_exec();
    // SAFETY: the caller's arguments, as execve(2) takes them.
    unsafe { real::execve()(path, argv, envp) }
}

#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Vector) -> c_int {
    crate::settle_before_exec();
    // SAFETY: as execv(3) takes them.
    unsafe { real::execv()(path, argv) }
}

#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Vector) -> c_int {
    crate::settle_before_exec();
    // SAFETY: as execvp(3) takes them.
    unsafe { real::execvp()(file, argv) }
}

#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Vector, envp: Vector) -> c_int {
    crate::settle_before_exec();
    // SAFETY: as execvpe(3) takes them.
    unsafe { real::execvpe()(file, argv, envp) }
}

#[no_mangle]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: Vector, envp: Vector) -> c_int {
    crate::settle_before_exec();
    // SAFETY: as fexecve(3) takes them.
    unsafe { real::fexecve()(fd, argv, envp) }
}

#[no_mangle]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: Vector,
    envp: Vector,
    flags: c_int,
) -> c_int {
    crate::settle_before_exec();
    // SAFETY: as execveat(2) takes them.
    unsafe { real::execveat()(dirfd, path, argv, envp, flags) }
}
