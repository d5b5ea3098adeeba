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
//!
//! An exec of a file the program has just written and closed can find it
//! still open for writing in the library's hands (its duplicate, until the
//! flusher is done with the file) or in `dontcache run`'s (a file an
//! exited process handed over), and the kernel refuses it with ETXTBSY:
//! `cc -o t t.c && ./t` failed with "Text file busy" under `dontcache run`.
//! So an exec refused so is tried again until the file is let go of
//! (`retrying_text_busy`), in a vfork child too; `posix_spawn`, whose
//! child execs out of the shim's sight and reports the error, likewise.

use std::ffi::{c_char, c_int};
use std::time::Duration;

use crate::real;

type Vector = *const *const c_char;

/// How long an exec refused with ETXTBSY is tried again; a file really
/// open for writing elsewhere is refused that much later than without
/// the library.
const TEXT_BUSY_LIMIT: Duration = Duration::from_secs(5);

/// How long it waits between tries.
const TEXT_BUSY_PAUSE: Duration = Duration::from_millis(5);

/// Sleeps `TEXT_BUSY_PAUSE` and says whether `slept` (added to) is still
/// under `TEXT_BUSY_LIMIT`. Only a system call: a vfork child runs it.
fn pause_for_text_busy(slept: &mut Duration) -> bool {
    if *slept >= TEXT_BUSY_LIMIT {
        return false;
    }
    let ts = libc::timespec { tv_sec: 0, tv_nsec: TEXT_BUSY_PAUSE.as_nanos() as libc::c_long };
    // SAFETY: a valid timespec; a signal only ends the pause early.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
    *slept += TEXT_BUSY_PAUSE;
    true
}

/// `call` until `text_busy` says its result is not ETXTBSY, or
/// `TEXT_BUSY_LIMIT` is over.
fn retrying(call: impl Fn() -> c_int, text_busy: impl Fn(c_int) -> bool) -> c_int {
    let mut slept = Duration::ZERO;
    loop {
        let r = call();
        if !text_busy(r) || !pause_for_text_busy(&mut slept) {
            return r;
        }
    }
}

/// An exec (which returns only on failure, -1 with errno) tried again
/// while refused with ETXTBSY.
fn retrying_text_busy(exec: impl Fn() -> c_int) -> c_int {
    retrying(exec, |r| r == -1 && dc_sys::errno() == libc::ETXTBSY)
}

/// A spawn (which returns an error number, 0 on success) tried again
/// while it returns ETXTBSY.
fn spawn_retrying_text_busy(spawn: impl Fn() -> c_int) -> c_int {
    retrying(spawn, |r| r == libc::ETXTBSY)
}

#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Vector, envp: Vector) -> c_int {
    crate::settle_before_exec();
    // SAFETY: the caller's arguments, as execve(2) takes them.
    retrying_text_busy(|| unsafe { real::execve()(path, argv, envp) })
}

#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Vector) -> c_int {
    crate::settle_before_exec();
    // SAFETY: as execv(3) takes them.
    retrying_text_busy(|| unsafe { real::execv()(path, argv) })
}

#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Vector) -> c_int {
    crate::settle_before_exec();
    // SAFETY: as execvp(3) takes them.
    retrying_text_busy(|| unsafe { real::execvp()(file, argv) })
}

#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Vector, envp: Vector) -> c_int {
    crate::settle_before_exec();
    // SAFETY: as execvpe(3) takes them.
    retrying_text_busy(|| unsafe { real::execvpe()(file, argv, envp) })
}

#[no_mangle]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: Vector, envp: Vector) -> c_int {
    crate::settle_before_exec();
    // SAFETY: as fexecve(3) takes them.
    retrying_text_busy(|| unsafe { real::fexecve()(fd, argv, envp) })
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
    retrying_text_busy(|| unsafe { real::execveat()(dirfd, path, argv, envp, flags) })
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

type SpawnActions = *const libc::posix_spawn_file_actions_t;
type SpawnAttributes = *const libc::posix_spawnattr_t;

#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut libc::pid_t,
    path: *const c_char,
    actions: SpawnActions,
    attributes: SpawnAttributes,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    // SAFETY: as posix_spawn(3) takes them.
    spawn_retrying_text_busy(|| unsafe { real::posix_spawn()(pid, path, actions, attributes, argv, envp) })
}

#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut libc::pid_t,
    file: *const c_char,
    actions: SpawnActions,
    attributes: SpawnAttributes,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    // SAFETY: as posix_spawnp(3) takes them.
    spawn_retrying_text_busy(|| unsafe { real::posix_spawnp()(pid, file, actions, attributes, argv, envp) })
}
