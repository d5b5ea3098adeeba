//! The descriptor limit: numbers of the library's own above the program's.
//!
//! Every file the program closes keeps one of the library's descriptors
//! until the flusher has written it back and dropped it, and the library
//! keeps a duplicate of every file the program has open. Within the
//! program's own limit they had only its upper half: under Debian's usual
//! soft limit of 1,024, `tar -xf` of 50,000 small files waited for closed
//! files' descriptors to be let go of (2.75-3.05 s, against 1.66-2.13 s
//! without the library; with numbers of its own, 2.14-2.39 s).
//!
//! So at load the process's soft limit is raised (as far as the hard limit
//! allows) by the program's limit or `LEAST_LIBRARY_NUMBERS`, whichever is
//! more, and the library's descriptors are numbered from the program's limit
//! up (`dontcache::own::set_program_open_files`). The program still sees the
//! limit it was given: `getrlimit`, `prlimit`, `sysconf(_SC_OPEN_MAX)` and
//! `getdtablesize` report it, `setrlimit` and `prlimit` move it (the
//! process's follows), a descriptor one of its calls would get at or above
//! it is refused with `EMFILE` as the kernel would refuse it (a program that
//! counts on its limit, as `select` users do on 1,024, never meets a higher
//! number), and a program it executes starts with it. That covers
//! `opendir`, `scandir`, the `mkstemp` family, `tmpfile`, `shm_open`,
//! `posix_openpt` and `popen` too, whose descriptors glibc makes with its
//! own `open` or `pipe2`, which no interposer sees: the shim makes those
//! calls refusable (`fds::opendir`, `fds::directory_read`,
//! `fds::temp_file`, `stdio::popen`), and descriptors received in
//! `SCM_RIGHTS` messages are cut at the limit as the kernel cuts them
//! (`fds::received_within_limit`). Children started by `posix_spawn`,
//! `system` or `popen` inherit the raised limit and learn the program's
//! from `ENV`.
//!
//! Not covered: descriptors made elsewhere inside libc (name service
//! lookups, `glob`, `nftw`), by raw system calls or through io_uring
//! are not refused past the program's limit (they get the numbers above
//! it, as long as the library leaves any); a statically linked program
//! started by `posix_spawn` sees the raised limit. Where the hard limit
//! leaves fewer numbers above the program's limit than half of it (the two
//! are equal), or the program's limit is above 8,192 (a table past it
//! costs every fork; `dontcache::own::MAX_LIBRARY_FLOOR`), the limit stays
//! and the library keeps to the upper half of the program's range, from
//! 8,192 at most (`fds::with_room` then gives the program the library's
//! duplicates back when the table is full, as it does where the program
//! raised its limit over numbers the library held).

use std::ffi::{c_int, c_long, CString};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::Relaxed};

use dontcache::own::{program_open_files, MAX_LIBRARY_FLOOR};

use crate::table::inside;

/// The fewest numbers the library's descriptors get above the program's
/// limit where the hard limit allows: up to 16,384 closed files waiting for
/// the flusher (`closed_files_cap`, 3/4 of them) and the duplicates of the
/// files the program has open.
const LEAST_LIBRARY_NUMBERS: u64 = 32768;

/// The program's limit and the process's raised one, `program:raised`, for
/// a child that inherits the raised limit without an exec the shim sees.
const ENV: &std::ffi::CStr = c"DONTCACHE_OPEN_FILES";

/// How close to its limit the highest number a call of the program's was
/// given must come before its opens and accepts first look whether a
/// number below the limit is free: an open refused after the fact has
/// already created or truncated its file, an accept taken its connection
/// off the queue, which the kernel's refusal, made before either, never
/// does.
const NEAR_LIMIT: u64 = 64;

/// The highest number a call of the program's was given (or it inherited
/// below its limit): opens look first once it is `NEAR_LIMIT` from it.
static HIGHEST_GIVEN: AtomicI32 = AtomicI32::new(-1);

/// The soft limit the library last set for the process (0: none): an exec
/// puts the program's back only while it is still the process's, not where
/// a vfork child set its own limit past the shim.
static RAISED: AtomicU64 = AtomicU64::new(0);

/// The soft limit the process gets for a program given `program`: raised
/// where the hard limit leaves the library at least as many numbers above
/// the program's as the upper half of the program's range would (a hard
/// limit a little above the soft one would leave it fewer), and where the
/// program's limit is at most `MAX_LIBRARY_FLOOR`: numbers above a higher
/// one would make every fork copy a table that large, where the program's
/// range has room enough for the library's.
fn raised(program: u64, hard: u64) -> u64 {
    if program > MAX_LIBRARY_FLOOR {
        return program;
    }
    let limit = hard.min(program.saturating_add(program.max(LEAST_LIBRARY_NUMBERS)));
    if limit - program >= program / 2 {
        limit
    } else {
        program
    }
}

/// The program's soft limit becomes `program` and the process's is raised
/// above it where `hard` allows.
fn raise_above(program: u64, hard: u64) -> std::io::Result<u64> {
    let limit = raised(program, hard);
    dc_sys::set_open_files_limits(limit, hard)?;
    RAISED.store(limit, Relaxed);
    dontcache::own::set_program_open_files((limit > program).then_some(program));
    Ok(limit)
}

/// At load: the program's limit is the process's, unless this process
/// inherited a limit a parent's library raised (`ENV` names it, and it is
/// still the process's), and the process's is raised above it.
pub fn raise_at_load(inherited: &[c_int]) {
    let Ok((soft, hard)) = dc_sys::open_files_limits() else { return };
    let program = std::env::var(ENV.to_str().expect("ASCII"))
        .ok()
        .and_then(|v| {
            let (program, raised) = v.split_once(':')?;
            (raised.parse::<u64>().ok()? == soft).then_some(program.parse::<u64>().ok()?)
        })
        .filter(|&program| program < soft)
        .unwrap_or(soft);
    let Ok(limit) = raise_above(program, hard) else { return };
    for &fd in inherited {
        if (fd as u64) < program {
            HIGHEST_GIVEN.fetch_max(fd, Relaxed);
        }
    }
    let value = CString::new(format!("{program}:{limit}")).expect("digits");
    // SAFETY: at load, before the program's code runs: no other thread
    // reads the environment yet. Two valid C strings.
    unsafe {
        if limit > program {
            libc::setenv(ENV.as_ptr(), value.as_ptr(), 1);
        } else {
            libc::unsetenv(ENV.as_ptr());
        }
    }
}

/// `ENV` changed to a new program's limit and raised limit, where it is
/// set. Only replaced, never added: glibc replaces the pointer to the
/// variable in place, which a `getenv` on another thread reads whole,
/// where adding one may move the whole environment under it.
fn republish(program: u64, limit: u64) {
    // SAFETY: a valid C string; the variable is only read.
    if unsafe { libc::getenv(ENV.as_ptr()) }.is_null() {
        return;
    }
    let value = CString::new(format!("{program}:{limit}")).expect("digits");
    // SAFETY: two valid C strings; an existing variable is replaced in place.
    unsafe { libc::setenv(ENV.as_ptr(), value.as_ptr(), 1) };
}

/// `fd`, a number a call of the program's was given (or its failure,
/// negative), refused as the kernel would have refused it where it is at
/// or above the program's limit: closed, and -1 with `EMFILE`.
pub fn within_limit(fd: c_int) -> c_int {
    if number_past_limit(fd) {
        // The raw system call: the shim's `close` is the program's.
        // SAFETY: the number the call just gave, closed once.
        unsafe { libc::syscall(libc::SYS_close, fd) };
        dc_sys::set_errno(libc::EMFILE);
        return -1;
    }
    note_given(fd);
    fd
}

/// Notes `fd` (negative: none) given to the program below its limit, for
/// `open_would_pass_limit`.
pub fn note_given(fd: c_int) {
    // Read first: every open passes here, and a read-modify-write on a
    // line all the program's threads share is needed only while it rises.
    if fd > HIGHEST_GIVEN.load(Relaxed) {
        HIGHEST_GIVEN.fetch_max(fd, Relaxed);
    }
}

/// Whether an open of the program's would be given a number at or above its
/// limit, asked only near it (`NEAR_LIMIT`): the lowest free number is
/// taken for a moment (under `own::making`, so that the program's other
/// calls meanwhile are numbered as without it) and given back.
pub fn open_would_pass_limit() -> bool {
    numbers_would_pass_limit(1)
}

/// `open_would_pass_limit` for a call that makes `numbers` descriptors at
/// once (`popen`'s pipe): whether the last of them would pass the limit.
pub fn numbers_would_pass_limit(numbers: usize) -> bool {
    let Some(limit) = program_open_files() else { return false };
    if (HIGHEST_GIVEN.load(Relaxed) as i64 + NEAR_LIMIT as i64) < limit as i64 {
        return false;
    }
    let highest = dontcache::own::making(|| {
        let mut made = Vec::with_capacity(numbers);
        // SAFETY: makes eventfds and closes them, by raw system calls.
        unsafe {
            for _ in 0..numbers {
                made.push(libc::syscall(libc::SYS_eventfd2, 0, libc::EFD_CLOEXEC));
            }
            for &fd in made.iter().filter(|&&fd| fd >= 0) {
                libc::syscall(libc::SYS_close, fd);
            }
        }
        made.last().copied().unwrap_or(-1)
    });
    highest >= limit as c_long
}

/// `EMFILE` for an open `open_would_pass_limit` refused.
pub fn refuse_open() -> c_int {
    dc_sys::set_errno(libc::EMFILE);
    -1
}

/// Whether `number` is at or past the program's limit, where the process's
/// is above it: a number a call of the program's was given, which the
/// kernel would have refused it, or one a call names (`F_DUPFD`'s least
/// number, `dup2`'s target), which the kernel refuses at its limit
/// (`EINVAL`, `EBADF`).
pub fn number_past_limit(number: c_int) -> bool {
    number >= 0 && program_open_files().is_some_and(|limit| number as u64 >= limit)
}

/// Whether the library's descriptors are all numbered at or above the
/// program's limit: the program's full table is then its own, as without
/// the library. Not where the program raised its limit over numbers the
/// library held: those are given back as the table fills (`fds::with_room`).
pub fn library_all_above_program() -> bool {
    program_open_files().is_some_and(|limit| dontcache::own::lowest_own() as u64 >= limit)
}

/// The program's limit put back for an exec, so the new image starts with
/// it (its library raises it again); the raised one is restored if the
/// exec fails. Only system calls: a vfork child runs it.
pub struct LoweredForExec(Option<(u64, u64)>);

impl LoweredForExec {
    pub fn new() -> LoweredForExec {
        let Some(program) = program_open_files() else { return LoweredForExec(None) };
        match dc_sys::open_files_limits() {
            Ok((soft, hard))
                if soft == RAISED.load(Relaxed) && dc_sys::set_open_files_limits(program, hard).is_ok() =>
            {
                LoweredForExec(Some((soft, hard)))
            }
            _ => LoweredForExec(None),
        }
    }
}

impl Drop for LoweredForExec {
    fn drop(&mut self) {
        if let Some((soft, hard)) = self.0 {
            let errno = dc_sys::errno();
            let _ = dc_sys::set_open_files_limits(soft, hard);
            dc_sys::set_errno(errno);
        }
    }
}

/// `rlim` with the program's soft limit in place of the process's.
///
/// # Safety
/// `rlim` points to a limit the kernel has just filled.
unsafe fn as_programs(rlim: *mut libc::rlimit64) {
    if let Some(program) = program_open_files() {
        // SAFETY: the caller's promise.
        unsafe { (*rlim).rlim_cur = program };
    }
}

/// `prlimit64(2)` of this process.
///
/// # Safety
/// `new` and `old` are null or valid for the kernel to read and write.
unsafe fn prlimit_here(resource: c_int, new: *const libc::rlimit64, old: *mut libc::rlimit64) -> c_int {
    // SAFETY: the caller's promise; the kernel checks the pointers.
    unsafe { libc::syscall(libc::SYS_prlimit64, 0, resource, new, old) as c_int }
}

/// A change of the program's own `RLIMIT_NOFILE` to `*new`: made as asked
/// (the kernel checks it, and its refusal is the answer), then the
/// process's soft limit raised above it again.
///
/// # Safety
/// `new` is valid for the kernel to read.
unsafe fn set_programs(new: *const libc::rlimit64) -> c_int {
    // SAFETY: the caller's promise.
    let r = unsafe { prlimit_here(libc::RLIMIT_NOFILE as c_int, new, std::ptr::null_mut()) };
    if r == 0 {
        // SAFETY: the kernel has just read it.
        let (soft, hard) = unsafe { ((*new).rlim_cur, (*new).rlim_max) };
        if let Ok(limit) = raise_above(soft, hard) {
            republish(soft, limit);
        }
    }
    r
}

fn ours(resource: c_int) -> bool {
    resource == libc::RLIMIT_NOFILE as c_int && !inside()
}

#[no_mangle]
pub unsafe extern "C" fn getrlimit(resource: c_int, rlim: *mut libc::rlimit64) -> c_int {
    // SAFETY: the caller's pointer, checked by the kernel.
    let r = unsafe { prlimit_here(resource, std::ptr::null(), rlim) };
    // No struct is no question (the kernel's answer is 0).
    if r == 0 && !rlim.is_null() && ours(resource) {
        // SAFETY: filled by the kernel just now.
        unsafe { as_programs(rlim) };
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn getrlimit64(resource: c_int, rlim: *mut libc::rlimit64) -> c_int {
    // SAFETY: as getrlimit takes them.
    unsafe { getrlimit(resource, rlim) }
}

#[no_mangle]
pub unsafe extern "C" fn setrlimit(resource: c_int, rlim: *const libc::rlimit64) -> c_int {
    // No struct is no change (the kernel's answer is 0).
    if !ours(resource) || rlim.is_null() || crate::in_vfork_child() {
        // SAFETY: the caller's pointer, checked by the kernel.
        return unsafe { prlimit_here(resource, rlim, std::ptr::null_mut()) };
    }
    // SAFETY: as above.
    unsafe { set_programs(rlim) }
}

#[no_mangle]
pub unsafe extern "C" fn setrlimit64(resource: c_int, rlim: *const libc::rlimit64) -> c_int {
    // SAFETY: as setrlimit takes them.
    unsafe { setrlimit(resource, rlim) }
}

#[no_mangle]
pub unsafe extern "C" fn prlimit(
    pid: libc::pid_t,
    resource: c_int,
    new: *const libc::rlimit64,
    old: *mut libc::rlimit64,
) -> c_int {
    // SAFETY: getpid has no preconditions.
    let here = pid == 0 || pid == unsafe { libc::getpid() };
    if !here || !ours(resource) || crate::in_vfork_child() {
        // SAFETY: the caller's arguments, checked by the kernel.
        return unsafe { libc::syscall(libc::SYS_prlimit64, pid, resource, new, old) as c_int };
    }
    let mut was = libc::rlimit64 { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid out-pointer; then the caller's pointers, checked by
    // the kernel (`old` by a read into it before it is written here).
    unsafe {
        prlimit_here(resource, std::ptr::null(), &mut was);
        as_programs(&mut was);
        if !new.is_null() {
            let r = set_programs(new);
            if r != 0 {
                return r;
            }
        }
        if !old.is_null() {
            let r = prlimit_here(resource, std::ptr::null(), old);
            if r != 0 {
                return r;
            }
            *old = was;
        }
    }
    0
}

#[no_mangle]
pub unsafe extern "C" fn prlimit64(
    pid: libc::pid_t,
    resource: c_int,
    new: *const libc::rlimit64,
    old: *mut libc::rlimit64,
) -> c_int {
    // SAFETY: as prlimit takes them.
    unsafe { prlimit(pid, resource, new, old) }
}

#[no_mangle]
pub unsafe extern "C" fn sysconf(name: c_int) -> c_long {
    match program_open_files() {
        Some(program) if name == libc::_SC_OPEN_MAX && !inside() => program as c_long,
        // SAFETY: libc's sysconf, as called.
        _ => unsafe { crate::real::sysconf()(name) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn getdtablesize() -> c_int {
    match program_open_files() {
        Some(program) if !inside() => program.min(c_int::MAX as u64) as c_int,
        // SAFETY: libc's getdtablesize, as called.
        _ => unsafe { crate::real::getdtablesize()() },
    }
}
