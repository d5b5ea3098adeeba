//! `exec`: the new image keeps nothing of the engine's (its descriptors
//! close on exec), so the files are settled first (`settle_before_exec`).
//! Shells (bash, dash), Python and coreutils' wrappers (`env`, `nice`,
//! `timeout`, `xargs`) use only the vector forms (their imports, `nm -D`);
//! Perl too, but for a command it gives to `/bin/sh`, which goes through
//! `execl`. The `execl` family is variadic, which stable Rust cannot
//! define, and glibc's builds the argument vector and calls its own
//! `execve` inside, where the shim cannot see it: on x86_64 each is a
//! trampoline that reads the caller's list as glibc's does and execs it
//! through the vector interposers (elsewhere they are not seen).
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
fn retrying(call: impl Fn() -> c_int, mut text_busy: impl FnMut(c_int) -> bool) -> c_int {
    let mut slept = Duration::ZERO;
    loop {
        let r = call();
        if !text_busy(r) || !pause_for_text_busy(&mut slept) {
            return r;
        }
    }
}

/// An exec (which returns only on failure, -1 with errno) tried again
/// while refused with ETXTBSY. In a child the file may be open for
/// writing in the child's own copy of its parent's duplicate, which only
/// the exec would close; they are closed first: in a forked child those
/// of files the child's program has not open
/// (`own::close_inherited_unless`), in a vfork child, which shares its
/// parent's memory and must not touch its engine, those the kernel shows
/// open for writing (`own::close_write_copies_in_vfork_child`).
fn retrying_text_busy(exec: impl Fn() -> c_int) -> c_int {
    let _lowered = crate::limits::LoweredForExec::new();
    let mut inherited_closed = false;
    retrying(exec, |r| {
        let busy = r == -1 && dc_sys::errno() == libc::ETXTBSY;
        if busy && !inherited_closed {
            inherited_closed = true;
            if crate::in_vfork_child() {
                dontcache::own::close_write_copies_in_vfork_child();
            } else {
                crate::table::engine(|| {
                    dontcache::own::close_inherited_unless(|st| crate::table::tracks_file((st.dev, st.ino)))
                });
            }
            dc_sys::set_errno(libc::ETXTBSY);
        }
        busy
    })
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

/// The `execl` family's longest argument list read here; a longer one goes
/// to libc's function as it was called (settled, without the ETXTBSY retry).
const LISTED_MAX: usize = 256;

/// Which of the family, for `exec_listed`.
const LISTED_EXECL: usize = 0;
const LISTED_EXECLP: usize = 1;
const LISTED_EXECLE: usize = 2;

/// What `exec_listed` did: `libc` is the address of libc's function when
/// the call is to go there as made (else 0), `result` the exec's return.
#[repr(C)]
struct Listed {
    libc: usize,
    result: isize,
}

/// The `execl` family's body: reads the argument list (the first six
/// arguments from `regs`, the argument registers as the caller set them,
/// the rest from `stack`, the caller's stack arguments), NULL-ended and,
/// for `execle`, followed by the environment, and execs it through the
/// vector interposers, as libc's functions do through theirs. No
/// allocation: a vfork child may run it.
///
/// # Safety
/// `regs` holds six words and `stack` the caller's stack arguments of a
/// call of one of the family.
unsafe extern "C" fn exec_listed(kind: usize, regs: *const usize, stack: *const usize) -> Listed {
    // SAFETY: per this function's contract; the list is read only up to
    // its NULL (and, for `execle`, the word after it), as libc reads it.
    let arg = |i: usize| unsafe {
        if i < 6 {
            *regs.add(i)
        } else {
            *stack.add(i - 6)
        }
    } as *const c_char;
    let mut argv = [std::ptr::null::<c_char>(); LISTED_MAX + 1];
    let mut n = 0;
    while !arg(1 + n).is_null() {
        if n == LISTED_MAX {
            crate::settle_before_exec();
            let libc = match kind {
                LISTED_EXECL => real::execl() as usize,
                LISTED_EXECLP => real::execlp() as usize,
                _ => real::execle() as usize,
            };
            return Listed { libc, result: 0 };
        }
        argv[n] = arg(1 + n);
        n += 1;
    }
    let (file, argv) = (arg(0), argv.as_ptr());
    // SAFETY: a path and a NULL-ended vector from the caller's list; the
    // environment is the one libc's function would pass.
    let result = unsafe {
        match kind {
            LISTED_EXECL => execve(file, argv, environ),
            LISTED_EXECLP => execvp(file, argv),
            _ => execve(file, argv, arg(2 + n) as Vector),
        }
    };
    Listed { libc: 0, result: result as isize }
}

extern "C" {
    static environ: Vector;
}

/// `$name`, variadic: saves the argument registers below a frame of its
/// own (`rax` too: a variadic call's count of vector registers) and calls
/// `exec_listed` with them and the caller's stack arguments, which stay
/// where they are. Its result is returned; or, for a list too long to
/// read, the registers are restored and the frame left, and libc's
/// function gets the call exactly as it was made. One push and eight
/// words leave the stack 16-byte aligned for the call, as the ABI wants.
macro_rules! exec_listed {
    ($($name:ident, $kind:expr;)*) => {
        $(
            // SAFETY: the body is the whole function: it keeps the stack
            // aligned for the call, restores every register the caller's
            // arguments are in and the stack pointer before it returns or
            // jumps, and `exec_listed` is an ordinary C-ABI function.
            #[cfg(target_arch = "x86_64")]
            #[unsafe(naked)]
            #[no_mangle]
            pub unsafe extern "C" fn $name() {
                std::arch::naked_asm!(
                    "push rbp", "mov rbp, rsp",
                    "push rax", "push r9", "push r8", "push rcx", "push rdx", "push rsi", "push rdi",
                    "sub rsp, 8",
                    "mov edi, {kind}", "lea rsi, [rbp - 56]", "lea rdx, [rbp + 16]",
                    "call {listed}",
                    "test rax, rax", "jnz 2f",
                    "mov rax, rdx", "leave", "ret",
                    "2:",
                    "mov r11, rax",
                    "mov rdi, [rbp - 56]", "mov rsi, [rbp - 48]", "mov rdx, [rbp - 40]", "mov rcx, [rbp - 32]",
                    "mov r8, [rbp - 24]", "mov r9, [rbp - 16]", "mov rax, [rbp - 8]",
                    "leave", "jmp r11",
                    kind = const $kind,
                    listed = sym exec_listed,
                )
            }
        )*
    };
}

exec_listed! {
    execl, LISTED_EXECL;
    execlp, LISTED_EXECLP;
    execle, LISTED_EXECLE;
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
