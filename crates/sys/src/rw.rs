//! Positional reads and writes, with and without per-call `RWF_*` flags.
//!
//! `pread`/`pwrite` are what fio's `psync` engine issues; `preadv2`/`pwritev2`
//! with one iovec are what its `pvsync2` engine issues, and the only way to pass
//! `RWF_DONTCACHE` synchronously.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

fn check(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// One `pread64(2)`: may return fewer bytes than asked (EOF, signals).
pub fn pread(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    // SAFETY: buf is a valid writable region of buf.len() bytes for the call.
    check(unsafe { libc::pread64(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), offset as i64) })
}

/// One `pwrite64(2)`: may write fewer bytes than asked (ENOSPC on the way).
pub fn pwrite(fd: BorrowedFd<'_>, buf: &[u8], offset: u64) -> io::Result<usize> {
    // SAFETY: buf is a valid readable region of buf.len() bytes for the call.
    check(unsafe { libc::pwrite64(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), offset as i64) })
}

/// One `preadv2(2)` with a single iovec and `flags` (`RWF_*`).
pub fn preadv2(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64, flags: i32) -> io::Result<usize> {
    let iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: the iovec describes buf, which outlives the call.
    check(unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, offset as i64, flags) })
}

/// Whether the kernel takes `RWF_DONTCACHE` on reads of `fd`'s file: one
/// `preadv2(2)` of one byte at `offset` with the flag. The kernel checks the
/// flag (6.14 and later, a filesystem with FOP_DONTCACHE, not DAX) before it
/// reads, so `Ok(false)` is its refusal (`EOPNOTSUPP`) and any other error
/// the read's. At the end of the file nothing is read; a page cached before
/// the call stays cached either way.
pub fn takes_dontcache_reads(fd: BorrowedFd<'_>, offset: u64) -> io::Result<bool> {
    match preadv2(fd, &mut [0u8], offset, crate::RWF_DONTCACHE) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(false),
        Err(e) => Err(e),
    }
}

/// One `pwritev2(2)` with a single iovec and `flags` (`RWF_*`).
pub fn pwritev2(fd: BorrowedFd<'_>, buf: &[u8], offset: u64, flags: i32) -> io::Result<usize> {
    let iov = libc::iovec { iov_base: buf.as_ptr() as *mut _, iov_len: buf.len() };
    // SAFETY: the iovec describes buf, which outlives the call; the kernel only reads it.
    check(unsafe { libc::pwritev2(fd.as_raw_fd(), &iov, 1, offset as i64, flags) })
}
