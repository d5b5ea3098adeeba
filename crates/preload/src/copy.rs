//! In-kernel copies: `copy_file_range` (coreutils cp), `sendfile` (Python's
//! shutil), `splice`. The kernel moves the bytes as it would anyway; the
//! shim reports what landed in a tracked destination (`note_write`: its
//! pages join the write-behind) and what came out of a tracked source
//! (`note_read`: dropped behind). A destination the program made and has
//! no handle for yet (`table::write_handle`) is copied into as without the
//! shim, a chunk at a time, and what landed counted (`cp -a` copies each
//! file of a tree so).

use std::ffi::{c_int, c_uint};

use crate::real;
use crate::table::{engine, get, is_made, write_handle, wrote_untracked};

/// The most one interposed copy moves when a side is tracked. These calls
/// may move less than asked and every caller loops; one call copying a
/// whole file would put all of it in the cache before the library sees any
/// of it (cp's single copy_file_range of 512 MiB evicted a neighbour's hot
/// file in a 192 MiB memory cgroup).
const COPY_CHUNK: usize = 8 << 20;

/// `len` capped where a side is tracked, or the destination made.
fn chunk(from: &Option<Side>, to: &Option<Side>, made: bool, len: usize) -> usize {
    if from.is_some() || to.is_some() || made {
        len.min(COPY_CHUNK)
    } else {
        len
    }
}

/// A copy's tracked side: its descriptor, handle and offset argument.
struct Side {
    fd: c_int,
    handle: std::sync::Arc<dontcache::Handle>,
    off: *const i64,
}

impl Side {
    /// Where a copy that moved `n` bytes started on this side: the kernel
    /// moved the offset given, or the file position, past them. Asked after
    /// the call, so a call that moved nothing (every copy loop's last) costs
    /// no `lseek`.
    unsafe fn start(&self, n: u64) -> Option<u64> {
        let end = if self.off.is_null() { real::position(self.fd)? } else { u64::try_from(*self.off).ok()? };
        end.checked_sub(n)
    }
}

fn side(fd: c_int, off: *const i64, lookup: fn(c_int) -> Option<std::sync::Arc<dontcache::Handle>>) -> Option<Side> {
    Some(Side { fd, handle: lookup(fd)?, off })
}

/// A writeback error kept for the destination: returned instead of copying,
/// as a write would return it.
fn kept(to: &Option<Side>) -> Option<isize> {
    let e = engine(|| to.as_ref()?.handle.take_error())?;
    crate::table::set_errno(e.raw_os_error().unwrap_or(libc::EIO));
    Some(-1)
}

/// Reports `n` bytes moved out of `from` into `to`.
unsafe fn report(from: &Option<Side>, to: &Option<Side>, n: isize) {
    let Ok(n) = u64::try_from(n) else { return };
    if n == 0 {
        return;
    }
    if let Some(to) = to {
        if let Some(at) = to.start(n) {
            // An error kept for the destination is returned by its next
            // write, sync or close, which the program does next.
            engine(|| to.handle.note_write(at, n));
        }
    }
    if let Some(from) = from {
        if let Some(at) = from.start(n) {
            engine(|| from.handle.note_read(at, n));
        }
    }
}

/// One interposed copy: a kept error of the destination is returned
/// instead; otherwise `call` moves at most a chunk where a side is tracked,
/// and what it moved is reported.
unsafe fn transfer(
    fd_in: c_int,
    off_in: *const i64,
    fd_out: c_int,
    off_out: *const i64,
    len: usize,
    call: impl FnOnce(usize) -> isize,
) -> isize {
    let (from, to) = (side(fd_in, off_in, get), side(fd_out, off_out, write_handle));
    if let Some(r) = kept(&to) {
        return r;
    }
    let made = to.is_none() && is_made(fd_out);
    // The copy's pages are dirty before they are reported: the flusher's
    // sweep must not take them for writes the library does not see.
    let under_way = to.as_ref().and_then(|t| t.handle.write_under_way());
    let n = call(chunk(&from, &to, made, len));
    report(&from, &to, n);
    drop(under_way);
    if made {
        wrote_untracked(fd_out, n);
    }
    n
}

#[no_mangle]
pub unsafe extern "C" fn copy_file_range(
    fd_in: c_int,
    off_in: *mut libc::off64_t,
    fd_out: c_int,
    off_out: *mut libc::off64_t,
    len: usize,
    flags: c_uint,
) -> isize {
    transfer(fd_in, off_in, fd_out, off_out, len, |n| real::copy_file_range()(fd_in, off_in, fd_out, off_out, n, flags))
}

#[no_mangle]
pub unsafe extern "C" fn sendfile(out: c_int, fd_in: c_int, off: *mut libc::off_t, count: usize) -> isize {
    transfer(fd_in, off, out, std::ptr::null(), count, |n| real::sendfile()(out, fd_in, off, n))
}

#[no_mangle]
pub unsafe extern "C" fn sendfile64(out: c_int, fd_in: c_int, off: *mut libc::off64_t, count: usize) -> isize {
    transfer(fd_in, off, out, std::ptr::null(), count, |n| real::sendfile64()(out, fd_in, off, n))
}

#[no_mangle]
pub unsafe extern "C" fn splice(
    fd_in: c_int,
    off_in: *mut libc::off64_t,
    fd_out: c_int,
    off_out: *mut libc::off64_t,
    len: usize,
    flags: c_uint,
) -> isize {
    // One side is a pipe, which the shim never tracks.
    transfer(fd_in, off_in, fd_out, off_out, len, |n| real::splice()(fd_in, off_in, fd_out, off_out, n, flags))
}
