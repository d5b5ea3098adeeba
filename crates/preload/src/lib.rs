//! libdontcache_preload.so: interposes the write-side file calls of any
//! dynamically linked program and routes regular files opened for writing
//! through libdontcache. Everything else goes straight to libc.
//!
//! Two rules keep this safe:
//! - The engine itself calls libc (pwritev2, close, fstat, ...), and those
//!   calls resolve to the functions below. A thread-local flag marks "inside
//!   the engine", and then every function here goes straight to libc.
//! - Real functions are found with dlsym(RTLD_NEXT) once and cached.
//!
//! stdio's internal writes (fwrite, fprintf) use glibc-internal symbols and
//! are not seen; cp, dd, tar, rsync and most copy tools call write(2).

#![allow(clippy::missing_safety_doc)]

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};
use std::io::IoSlice;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::*};
use std::sync::OnceLock;

use dontcache::{Handle, Options};

const MAX_FD: usize = 1 << 16;

/// fd -> handle, for descriptors the shim tracks.
static TABLE: [AtomicPtr<Handle>; MAX_FD] = [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_FD];

thread_local! {
    static IN_ENGINE: Cell<bool> = const { Cell::new(false) };
}

fn options() -> Option<Options> {
    static OPTS: OnceLock<Option<Options>> = OnceLock::new();
    *OPTS.get_or_init(|| match Options::from_env() {
        Ok(o) => Some(o),
        Err(e) => {
            eprintln!("libdontcache_preload: {e}; writes pass through unchanged");
            None
        }
    })
}

/// Runs `f` with the engine flag set, so libc calls it makes are not
/// routed back into the engine.
fn engine<T>(f: impl FnOnce() -> T) -> T {
    IN_ENGINE.with(|g| g.set(true));
    let r = f();
    IN_ENGINE.with(|g| g.set(false));
    r
}

fn inside() -> bool {
    IN_ENGINE.with(|g| g.get())
}

fn tracked(fd: c_int) -> Option<&'static Handle> {
    if fd < 0 || fd as usize >= MAX_FD || inside() {
        return None;
    }
    // SAFETY: pointers in the table come from Box::into_raw and are freed
    // only after being swapped out (close), like the fd itself.
    unsafe { TABLE[fd as usize].load(Acquire).as_ref() }
}

fn untrack(fd: c_int) -> Option<Box<Handle>> {
    if fd < 0 || fd as usize >= MAX_FD {
        return None;
    }
    let p = TABLE[fd as usize].swap(std::ptr::null_mut(), AcqRel);
    // SAFETY: from Box::into_raw in `adopt`, and now out of the table.
    (!p.is_null()).then(|| unsafe { Box::from_raw(p) })
}

/// Tracks `fd` if it is a regular file opened for writing without O_DIRECT.
fn adopt(fd: c_int, flags: c_int) {
    if fd < 0 || fd as usize >= MAX_FD || inside() {
        return;
    }
    if flags & libc::O_ACCMODE == libc::O_RDONLY || flags & libc::O_DIRECT != 0 || flags & libc::O_PATH != 0 {
        return;
    }
    let Some(opts) = options() else { return };
    if let Ok(h) = engine(|| Handle::adopt(fd, opts)) {
        let old = TABLE[fd as usize].swap(Box::into_raw(Box::new(h)), AcqRel);
        if !old.is_null() {
            // A stale entry (the fd was closed behind our back): drop it.
            // SAFETY: as in `untrack`.
            engine(|| drop(unsafe { Box::from_raw(old) }));
        }
    }
}

fn fd_flags(fd: c_int) -> c_int {
    // SAFETY: F_GETFL has no side effects.
    unsafe { real::fcntl()(fd, libc::F_GETFL) }
}

fn errno_ret<T: Copy>(r: std::io::Result<T>, fail: T) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            // SAFETY: errno is thread-local.
            unsafe { *libc::__errno_location() = e.raw_os_error().unwrap_or(libc::EIO) };
            fail
        }
    }
}

mod real {
    //! The next definition of each symbol (libc's), found once.
    use super::*;

    macro_rules! next {
        ($name:ident : $ty:ty) => {
            pub fn $name() -> $ty {
                static ADDR: AtomicUsize = AtomicUsize::new(0);
                let mut a = ADDR.load(Relaxed);
                if a == 0 {
                    let sym = concat!(stringify!($name), "\0");
                    // SAFETY: a NUL-terminated symbol name.
                    a = unsafe { libc::dlsym(libc::RTLD_NEXT, sym.as_ptr().cast()) } as usize;
                    assert!(a != 0, "libdontcache_preload: no next definition of {}", stringify!($name));
                    ADDR.store(a, Relaxed);
                }
                // SAFETY: the symbol has this C signature in glibc.
                unsafe { std::mem::transmute::<usize, $ty>(a) }
            }
        };
    }

    type Ssize = isize;
    next!(open: unsafe extern "C" fn(*const c_char, c_int, libc::mode_t) -> c_int);
    next!(open64: unsafe extern "C" fn(*const c_char, c_int, libc::mode_t) -> c_int);
    next!(openat: unsafe extern "C" fn(c_int, *const c_char, c_int, libc::mode_t) -> c_int);
    next!(openat64: unsafe extern "C" fn(c_int, *const c_char, c_int, libc::mode_t) -> c_int);
    next!(creat: unsafe extern "C" fn(*const c_char, libc::mode_t) -> c_int);
    next!(creat64: unsafe extern "C" fn(*const c_char, libc::mode_t) -> c_int);
    next!(write: unsafe extern "C" fn(c_int, *const c_void, usize) -> Ssize);
    next!(writev: unsafe extern "C" fn(c_int, *const libc::iovec, c_int) -> Ssize);
    next!(pwrite: unsafe extern "C" fn(c_int, *const c_void, usize, libc::off_t) -> Ssize);
    next!(pwrite64: unsafe extern "C" fn(c_int, *const c_void, usize, libc::off_t) -> Ssize);
    next!(pwritev: unsafe extern "C" fn(c_int, *const libc::iovec, c_int, libc::off_t) -> Ssize);
    next!(pwritev64: unsafe extern "C" fn(c_int, *const libc::iovec, c_int, libc::off_t) -> Ssize);
    next!(pwritev2: unsafe extern "C" fn(c_int, *const libc::iovec, c_int, libc::off_t, c_int) -> Ssize);
    next!(pwritev64v2: unsafe extern "C" fn(c_int, *const libc::iovec, c_int, libc::off_t, c_int) -> Ssize);
    next!(fsync: unsafe extern "C" fn(c_int) -> c_int);
    next!(fdatasync: unsafe extern "C" fn(c_int) -> c_int);
    next!(close: unsafe extern "C" fn(c_int) -> c_int);
    next!(dup: unsafe extern "C" fn(c_int) -> c_int);
    next!(dup2: unsafe extern "C" fn(c_int, c_int) -> c_int);
    next!(dup3: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int);
    next!(ftruncate: unsafe extern "C" fn(c_int, libc::off_t) -> c_int);
    next!(ftruncate64: unsafe extern "C" fn(c_int, libc::off_t) -> c_int);
    next!(fcntl: unsafe extern "C" fn(c_int, c_int, ...) -> c_int);
    next!(copy_file_range: unsafe extern "C" fn(c_int, *mut libc::off64_t, c_int, *mut libc::off64_t, usize, u32) -> Ssize);
}

// open(2) is variadic; on x86-64 and arm64 the mode travels in the same
// register whether or not the caller passed it, so reading it as a fixed
// third argument is the standard way to interpose it. It is only used with
// O_CREAT or O_TMPFILE, when the caller did pass it.
macro_rules! interpose_open {
    ($name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
            let fd = real::$name()(path, flags, mode);
            adopt(fd, flags);
            fd
        }
    };
}
interpose_open!(open);
interpose_open!(open64);

macro_rules! interpose_openat {
    ($name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(dir: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
            let fd = real::$name()(dir, path, flags, mode);
            adopt(fd, flags);
            fd
        }
    };
}
interpose_openat!(openat);
interpose_openat!(openat64);

#[no_mangle]
pub unsafe extern "C" fn creat(path: *const c_char, mode: libc::mode_t) -> c_int {
    let fd = real::creat()(path, mode);
    adopt(fd, libc::O_WRONLY);
    fd
}

#[no_mangle]
pub unsafe extern "C" fn creat64(path: *const c_char, mode: libc::mode_t) -> c_int {
    let fd = real::creat64()(path, mode);
    adopt(fd, libc::O_WRONLY);
    fd
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, len: usize) -> isize {
    match tracked(fd) {
        Some(h) => errno_ret(engine(|| h.write(std::slice::from_raw_parts(buf.cast(), len))).map(|n| n as isize), -1),
        None => real::write()(fd, buf, len),
    }
}

unsafe fn iov<'a>(iov: *const libc::iovec, cnt: c_int) -> &'a [IoSlice<'a>] {
    // SAFETY: IoSlice is ABI-compatible with iovec; the caller's iovecs.
    std::slice::from_raw_parts(iov.cast(), cnt.max(0) as usize)
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, v: *const libc::iovec, cnt: c_int) -> isize {
    match tracked(fd) {
        Some(h) => errno_ret(engine(|| h.writev(iov(v, cnt))).map(|n| n as isize), -1),
        None => real::writev()(fd, v, cnt),
    }
}

unsafe fn tracked_pwritev(h: &Handle, v: *const libc::iovec, cnt: c_int, off: libc::off_t, flags: c_int) -> isize {
    let r = if off == -1 {
        engine(|| h.writev(iov(v, cnt)))
    } else if off < 0 {
        Err(std::io::Error::from_raw_os_error(libc::EINVAL))
    } else {
        engine(|| h.pwritev(iov(v, cnt), off as u64, flags))
    };
    errno_ret(r.map(|n| n as isize), -1)
}

#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, len: usize, off: libc::off_t) -> isize {
    match tracked(fd) {
        Some(h) => tracked_pwritev(h, &libc::iovec { iov_base: buf as *mut c_void, iov_len: len }, 1, off, 0),
        None => real::pwrite()(fd, buf, len, off),
    }
}

#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, len: usize, off: libc::off_t) -> isize {
    match tracked(fd) {
        Some(h) => tracked_pwritev(h, &libc::iovec { iov_base: buf as *mut c_void, iov_len: len }, 1, off, 0),
        None => real::pwrite64()(fd, buf, len, off),
    }
}

#[no_mangle]
pub unsafe extern "C" fn pwritev(fd: c_int, v: *const libc::iovec, cnt: c_int, off: libc::off_t) -> isize {
    match tracked(fd) {
        Some(h) => tracked_pwritev(h, v, cnt, off, 0),
        None => real::pwritev()(fd, v, cnt, off),
    }
}

#[no_mangle]
pub unsafe extern "C" fn pwritev64(fd: c_int, v: *const libc::iovec, cnt: c_int, off: libc::off_t) -> isize {
    match tracked(fd) {
        Some(h) => tracked_pwritev(h, v, cnt, off, 0),
        None => real::pwritev64()(fd, v, cnt, off),
    }
}

#[no_mangle]
pub unsafe extern "C" fn pwritev2(
    fd: c_int,
    v: *const libc::iovec,
    cnt: c_int,
    off: libc::off_t,
    flags: c_int,
) -> isize {
    match tracked(fd) {
        Some(h) => tracked_pwritev(h, v, cnt, off, flags),
        None => real::pwritev2()(fd, v, cnt, off, flags),
    }
}

#[no_mangle]
pub unsafe extern "C" fn pwritev64v2(
    fd: c_int,
    v: *const libc::iovec,
    cnt: c_int,
    off: libc::off_t,
    flags: c_int,
) -> isize {
    match tracked(fd) {
        Some(h) => tracked_pwritev(h, v, cnt, off, flags),
        None => real::pwritev64v2()(fd, v, cnt, off, flags),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    match tracked(fd) {
        Some(h) => errno_ret(engine(|| h.fsync()).map(|_| 0), -1),
        None => real::fsync()(fd),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    match tracked(fd) {
        Some(h) => errno_ret(engine(|| h.fdatasync()).map(|_| 0), -1),
        None => real::fdatasync()(fd),
    }
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if inside() {
        return real::close()(fd);
    }
    match untrack(fd) {
        // Settles the file and reports a kept writeback error here, where
        // cp, dd and tar check for it.
        Some(h) => errno_ret(engine(|| h.close()).map(|_| 0), -1),
        None => real::close()(fd),
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    let new = real::dup()(fd);
    if new >= 0 && tracked(fd).is_some() {
        adopt(new, fd_flags(new));
    }
    new
}

/// dup2/dup3 silently close `new`: settle it first (its error, if any, has
/// no caller to go to, as with the kernel's own dup2).
unsafe fn before_dup_over(old: c_int, new: c_int) {
    if old != new && !inside() {
        if let Some(h) = untrack(new) {
            let _ = engine(|| h.release());
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    before_dup_over(old, new);
    let r = real::dup2()(old, new);
    if r >= 0 && old != new && tracked(old).is_some() {
        adopt(r, fd_flags(r));
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    before_dup_over(old, new);
    let r = real::dup3()(old, new, flags);
    if r >= 0 && tracked(old).is_some() {
        adopt(r, fd_flags(r));
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: libc::off_t) -> c_int {
    match tracked(fd) {
        Some(h) if len >= 0 => errno_ret(engine(|| h.truncate(len as u64)).map(|_| 0), -1),
        _ => real::ftruncate()(fd, len),
    }
}

#[no_mangle]
pub unsafe extern "C" fn ftruncate64(fd: c_int, len: libc::off_t) -> c_int {
    match tracked(fd) {
        Some(h) if len >= 0 => errno_ret(engine(|| h.truncate(len as u64)).map(|_| 0), -1),
        _ => real::ftruncate64()(fd, len),
    }
}

/// coreutils cp copies with copy_file_range, which would bypass the engine
/// entirely: into a tracked file it becomes a read and a tracked write.
#[no_mangle]
pub unsafe extern "C" fn copy_file_range(
    fd_in: c_int,
    off_in: *mut libc::off64_t,
    fd_out: c_int,
    off_out: *mut libc::off64_t,
    len: usize,
    flags: u32,
) -> isize {
    let Some(h) = tracked(fd_out) else {
        return real::copy_file_range()(fd_in, off_in, fd_out, off_out, len, flags);
    };
    let mut buf = vec![0u8; len.min(1 << 20)];
    let n = engine(|| {
        let r = if off_in.is_null() {
            libc::read(fd_in, buf.as_mut_ptr().cast(), buf.len())
        } else {
            libc::pread(fd_in, buf.as_mut_ptr().cast(), buf.len(), *off_in)
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let data = &buf[..r as usize];
        let w = if off_out.is_null() { h.write(data) } else { h.pwrite(data, *off_out as u64) }?;
        if w < data.len() && off_in.is_null() {
            // Give back what was read but not written.
            libc::lseek(fd_in, w as i64 - data.len() as i64, libc::SEEK_CUR);
        }
        Ok(w)
    });
    match n {
        Ok(w) => {
            if !off_in.is_null() {
                *off_in += w as i64;
            }
            if !off_out.is_null() {
                *off_out += w as i64;
            }
            w as isize
        }
        Err(e) => errno_ret::<isize>(Err(e), -1),
    }
}

/// At exit, files still open are settled, so the program leaves no
/// library-dirty pages behind it in the cache.
extern "C" fn settle_at_exit() {
    for slot in TABLE.iter() {
        if !slot.load(Relaxed).is_null() {
            let p = slot.swap(std::ptr::null_mut(), AcqRel);
            if !p.is_null() {
                // SAFETY: as in `untrack`; the fd stays open for exit to close.
                let h = unsafe { Box::from_raw(p) };
                let _ = engine(|| h.release());
            }
        }
    }
    let _ = engine(dontcache::flush);
    for e in dontcache::late_errors() {
        eprintln!(
            "dontcache: writeback of {} failed after it was closed: {}",
            e.path.display(),
            std::io::Error::from_raw_os_error(e.errno)
        );
    }
}

#[used]
#[link_section = ".fini_array"]
static SETTLE_AT_EXIT: extern "C" fn() = settle_at_exit;
