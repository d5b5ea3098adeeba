//! `exec`: the new image keeps nothing of the engine's (its descriptors
//! close on exec), so the files are settled first (`settle_before_exec`).
//! Shells (bash, dash), Python and coreutils' wrappers (`env`, `nice`,
//! `timeout`, `xargs`) use only the vector forms (their imports, `nm -D`);
//! Perl too, but for a command it gives to `/bin/sh`, which goes through
//! `execl`. The `execl` family is variadic, which stable Rust cannot
//! define, and glibc's builds the argument vector and calls its own
//! `execve` inside, where the shim cannot see it: on x86_64 each is a
//! trampoline that keeps the caller's arguments where they are, settles,
//! and jumps to libc's (elsewhere they are not seen).

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

/// `$name`, variadic: saves the argument registers (the arguments past
/// them stay on the caller's stack, untouched), calls `$hook`, which
/// settles the files and returns libc's `$name`, restores the registers
/// (`rax` too: a variadic call's count of vector registers) and jumps
/// there, so libc's sees the call exactly as it was made. Seven pushes
/// leave the stack 16-byte aligned for the call, as the ABI wants.
macro_rules! settle_then_jump {
    ($($name:ident, $hook:ident;)*) => {
        $(
            #[cfg(target_arch = "x86_64")]
            extern "C" fn $hook() -> usize {
                crate::settle_before_exec();
                real::$name() as usize
            }

            // SAFETY: the body is the whole function: it restores every
            // register the caller's arguments are in and the stack pointer
            // before the jump, and `$hook` is an ordinary C-ABI function
            // called with the stack aligned.
            #[cfg(target_arch = "x86_64")]
            #[unsafe(naked)]
            #[no_mangle]
            pub unsafe extern "C" fn $name() {
                std::arch::naked_asm!(
                    "push rdi", "push rsi", "push rdx", "push rcx", "push r8", "push r9", "push rax",
                    "call {hook}",
                    "mov r11, rax",
                    "pop rax", "pop r9", "pop r8", "pop rcx", "pop rdx", "pop rsi", "pop rdi",
                    "jmp r11",
                    hook = sym $hook,
                )
            }
        )*
    };
}

settle_then_jump! {
    execl, settle_for_execl;
    execlp, settle_for_execlp;
    execle, settle_for_execle;
}
