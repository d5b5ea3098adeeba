//! The C ABI declared in include/dontcache.h. Functions return -1 and set
//! errno on failure, like the system calls they stand in for.

use std::ffi::{c_char, c_int, c_void, CStr, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::handle::{Handle, Position};
use crate::policy::{Options, Policy, Submit};
use crate::stats::Stats;

/// `struct dc_opts`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DcOpts {
    /// `DC_POLICY_*`.
    pub policy: c_int,
    /// Bytes; 0 means the default (64 MiB).
    pub high_water: u64,
    /// `DC_SUBMIT_*`: `LOOP` (0), `URING` (1), `SYNCFS` (2), `AUTO` (3).
    pub submit: c_int,
}

fn set_errno(e: &io::Error) {
    dc_sys::set_errno(e.raw_os_error().unwrap_or(libc::EIO));
}

fn fail<T>(e: io::Error, v: T) -> T {
    set_errno(&e);
    v
}

fn options(opts: *const DcOpts) -> io::Result<Options> {
    // SAFETY: the caller passes NULL or a valid dc_opts.
    let Some(o) = (unsafe { opts.as_ref() }) else {
        return Options::from_env().map_err(|_| io::Error::from_raw_os_error(libc::EINVAL));
    };
    let einval = || io::Error::from_raw_os_error(libc::EINVAL);
    Ok(Options {
        policy: Policy::from_raw(o.policy).ok_or_else(einval)?,
        high_water: if o.high_water == 0 { crate::policy::DEFAULT_HIGH_WATER } else { o.high_water },
        submit: [Submit::Loop, Submit::Uring, Submit::Syncfs, Submit::Auto]
            .into_iter()
            .find(|s| *s as c_int == o.submit)
            .ok_or_else(einval)?,
    })
}

/// Fills `opts` with the defaults and the DONTCACHE_* environment.
///
/// # Safety
/// `opts` is NULL or points to a writable dc_opts.
#[no_mangle]
pub unsafe extern "C" fn dc_opts_init(opts: *mut DcOpts) -> c_int {
    let o = match Options::from_env() {
        Ok(o) => o,
        Err(_) => return fail(io::Error::from_raw_os_error(libc::EINVAL), -1),
    };
    // SAFETY: the caller passes a valid dc_opts to fill.
    let Some(out) = (unsafe { opts.as_mut() }) else { return fail(io::Error::from_raw_os_error(libc::EINVAL), -1) };
    *out = DcOpts { policy: o.policy as c_int, high_water: o.high_water, submit: o.submit as c_int };
    0
}

fn boxed(h: io::Result<Handle>) -> *mut Handle {
    match h {
        Ok(h) => Box::into_raw(Box::new(h)),
        Err(e) => fail(e, std::ptr::null_mut()),
    }
}

#[no_mangle]
pub extern "C" fn dc_adopt(fd: c_int, opts: *const DcOpts) -> *mut Handle {
    boxed(options(opts).and_then(|o| Handle::adopt(fd, o)))
}

/// # Safety
/// `path` is a valid C string.
#[no_mangle]
pub unsafe extern "C" fn dc_open(
    path: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
    opts: *const DcOpts,
) -> *mut Handle {
    if path.is_null() {
        return fail(io::Error::from_raw_os_error(libc::EFAULT), std::ptr::null_mut());
    }
    // SAFETY: per the contract above.
    let p = Path::new(OsStr::from_bytes(unsafe { CStr::from_ptr(path) }.to_bytes()));
    boxed(options(opts).and_then(|o| Handle::open(p, flags, mode, o)))
}

/// The handle `h` points to (None for NULL).
fn pointee<'a>(h: *const Handle) -> Option<&'a Handle> {
    // SAFETY: the caller passes a handle from dc_adopt/dc_open, not yet closed.
    unsafe { h.as_ref() }
}

/// The handle, if it is one and its descriptor is still the file it was
/// bound to: a caller that closed the descriptor behind the handle's back
/// gets `EBADF`, as the system call on that number would, never I/O on
/// whatever file reused the number.
fn handle<'a>(h: *const Handle) -> Option<&'a Handle> {
    let h = pointee(h).filter(|h| h.descriptor_is_current());
    if h.is_none() {
        set_errno(&io::Error::from_raw_os_error(libc::EBADF));
    }
    h
}

fn ssize(r: io::Result<usize>) -> isize {
    match r {
        Ok(n) => n as isize,
        Err(e) => fail(e, -1),
    }
}

fn int(r: io::Result<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => fail(e, -1),
    }
}

/// One iovec over a caller's buffer. The pointer is not read here: the
/// kernel validates it (`EFAULT`) like the system call would.
fn one(buf: *const c_void, len: usize) -> libc::iovec {
    libc::iovec { iov_base: buf as *mut c_void, iov_len: len }
}

/// The offset of a positioned call: `EINVAL` for a negative one, as
/// pwrite(2) and pread(2) say.
fn offset(off: libc::off_t) -> io::Result<u64> {
    u64::try_from(off).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn at(off: libc::off_t) -> io::Result<Position> {
    offset(off).map(Position::At)
}

/// # Safety
/// As write(2): the kernel checks `buf`.
#[no_mangle]
pub unsafe extern "C" fn dc_write(h: *mut Handle, buf: *const c_void, len: usize) -> isize {
    let Some(h) = handle(h) else { return -1 };
    // SAFETY: one iovec, validated by the kernel.
    ssize(unsafe { h.write_iov(&one(buf, len), 1, Position::Current, 0) })
}

/// # Safety
/// As pwrite(2): the kernel checks `buf`.
#[no_mangle]
pub unsafe extern "C" fn dc_pwrite(h: *mut Handle, buf: *const c_void, len: usize, off: libc::off_t) -> isize {
    let Some(h) = handle(h) else { return -1 };
    // SAFETY: one iovec, validated by the kernel.
    ssize(offset(off).and_then(|off| unsafe { h.pwrite_raw(buf, len, off) }))
}

/// # Safety
/// As pwritev(2): the kernel checks `iov`, `iovcnt` and every buffer.
#[no_mangle]
pub unsafe extern "C" fn dc_pwritev(h: *mut Handle, iov: *const libc::iovec, iovcnt: c_int, off: libc::off_t) -> isize {
    let Some(h) = handle(h) else { return -1 };
    // SAFETY: passed to the kernel unread.
    ssize(at(off).and_then(|pos| unsafe { h.write_iov(iov, iovcnt, pos, 0) }))
}

/// # Safety
/// As read(2): the kernel checks `buf`.
#[no_mangle]
pub unsafe extern "C" fn dc_read(h: *mut Handle, buf: *mut c_void, len: usize) -> isize {
    let Some(h) = handle(h) else { return -1 };
    // SAFETY: one iovec, validated by the kernel.
    ssize(unsafe { h.read_iov(&one(buf, len), 1, Position::Current, 0) })
}

/// # Safety
/// As pread(2): the kernel checks `buf`.
#[no_mangle]
pub unsafe extern "C" fn dc_pread(h: *mut Handle, buf: *mut c_void, len: usize, off: libc::off_t) -> isize {
    let Some(h) = handle(h) else { return -1 };
    // SAFETY: one iovec, validated by the kernel.
    ssize(at(off).and_then(|pos| unsafe { h.read_iov(&one(buf, len), 1, pos, 0) }))
}

/// Reports a completed write the caller issued itself (io_uring, ...).
#[no_mangle]
pub extern "C" fn dc_note_write(h: *mut Handle, off: libc::off_t, len: usize) -> c_int {
    let Some(h) = handle(h) else { return -1 };
    match u64::try_from(off) {
        Ok(off) => {
            h.note_write(off, len as u64);
            int(h.take_error().map_or(Ok(()), Err))
        }
        Err(_) => fail(io::Error::from_raw_os_error(libc::EINVAL), -1),
    }
}

/// Reports a completed read the caller issued itself.
#[no_mangle]
pub extern "C" fn dc_note_read(h: *mut Handle, off: libc::off_t, len: usize) -> c_int {
    let Some(h) = handle(h) else { return -1 };
    match u64::try_from(off) {
        Ok(off) => {
            h.note_read(off, len as u64);
            0
        }
        Err(_) => fail(io::Error::from_raw_os_error(libc::EINVAL), -1),
    }
}

/// The RWF_* flags the caller's own reads and writes of this file carry.
#[no_mangle]
pub extern "C" fn dc_rw_flags(h: *const Handle) -> c_int {
    handle(h).map_or(-1, |h| h.rw_flags())
}

/// The RWF_* flags the caller's next read of this file carries.
#[no_mangle]
pub extern "C" fn dc_read_flags(h: *const Handle) -> c_int {
    handle(h).map_or(-1, |h| h.read_flags())
}

/// Waits for every file of the process; returns the oldest late error.
#[no_mangle]
pub extern "C" fn dc_flush() -> c_int {
    int(crate::flush())
}

#[no_mangle]
pub extern "C" fn dc_fsync(h: *mut Handle) -> c_int {
    handle(h).map_or(-1, |h| int(h.fsync()))
}

#[no_mangle]
pub extern "C" fn dc_fdatasync(h: *mut Handle) -> c_int {
    handle(h).map_or(-1, |h| int(h.fdatasync()))
}

#[no_mangle]
pub extern "C" fn dc_fd(h: *const Handle) -> c_int {
    // The number is the caller's whether or not it is still open.
    match pointee(h) {
        Some(h) => h.fd(),
        None => fail(io::Error::from_raw_os_error(libc::EBADF), -1),
    }
}

/// Closes the fd (the flusher finishes the file's writeback), reports a
/// kept error, and frees the handle, which is gone even when -1 is returned.
///
/// # Safety
/// `h` is NULL or a handle from dc_adopt/dc_open, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn dc_close(h: *mut Handle) -> c_int {
    if h.is_null() {
        return fail(io::Error::from_raw_os_error(libc::EBADF), -1);
    }
    // SAFETY: from dc_adopt/dc_open, and the caller gives it up here.
    let h = unsafe { Box::from_raw(h) };
    int(h.close_checked())
}

/// `h == NULL`: the whole process.
///
/// # Safety
/// `h` is NULL or a live handle; `out` is NULL or points to a dc_stats.
#[no_mangle]
pub unsafe extern "C" fn dc_stats(h: *const Handle, out: *mut Stats) -> c_int {
    // SAFETY: the caller passes NULL or a live handle, and a valid out pointer.
    let s = match unsafe { h.as_ref() } {
        Some(h) => h.stats(),
        None => crate::global_stats(),
    };
    // SAFETY: as above.
    match unsafe { out.as_mut() } {
        Some(o) => {
            *o = s;
            0
        }
        None => fail(io::Error::from_raw_os_error(libc::EFAULT), -1),
    }
}

/// The policy's name ("flusher", ...), or NULL for an unknown number.
#[no_mangle]
pub extern "C" fn dc_policy_name(policy: c_int) -> *const c_char {
    match Policy::from_raw(policy) {
        Some(Policy::Flusher) => c"flusher".as_ptr(),
        Some(Policy::Lazy) => c"lazy".as_ptr(),
        Some(Policy::Inline) => c"inline".as_ptr(),
        Some(Policy::PerFile) => c"per-file".as_ptr(),
        Some(Policy::Kernel) => c"kernel".as_ptr(),
        None => std::ptr::null(),
    }
}
