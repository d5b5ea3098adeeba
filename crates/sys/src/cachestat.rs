//! `cachestat(2)` (Linux 6.5+): page-cache residency of a file range.
//!
//! This is how dontcache proves what a run did to the page cache: an
//! uncached write must leave `cached` near zero, a buffered one must not.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The syscall number is 451 on every architecture (it was added after the
/// syscall tables were unified), and older libc crates lack the constant.
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

/// Page counts for a file range, as the kernel reports them.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStat {
    /// Pages of the range present in the page cache.
    pub nr_cache: u64,
    /// Of those, pages dirty (not yet written back).
    pub nr_dirty: u64,
    /// Of those, pages under writeback right now.
    pub nr_writeback: u64,
    /// Pages of the range evicted from the cache.
    pub nr_evicted: u64,
    /// Evicted pages that were recently evicted (workingset shadow entries).
    pub nr_recently_evicted: u64,
}

/// Residency of `len` bytes from `off` (`len == 0` means to the end of file).
pub fn cachestat(fd: BorrowedFd<'_>, off: u64, len: u64) -> io::Result<CacheStat> {
    let range = CachestatRange { off, len };
    let mut out = CacheStat::default();
    // SAFETY: both pointers refer to live, correctly laid out structs.
    let ret = unsafe {
        libc::syscall(SYS_CACHESTAT, fd.as_raw_fd(), &range as *const CachestatRange, &mut out as *mut CacheStat, 0u32)
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(out)
    }
}
