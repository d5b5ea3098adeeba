//! Thin, safe wrappers around the Linux interfaces that dontcache's data plane
//! relies on and that `std` does not expose.
//!
//! Everything here is a direct mapping of one kernel interface; policy lives in
//! the crates above. Errors are plain `std::io::Error`s carrying the errno, so
//! callers can tell `EOPNOTSUPP` from `ENOSPC` without string matching.

mod aio;
mod buf;
mod cachestat;
mod cpu;
mod event;
mod ext4;
mod fanotify;
mod fd;
mod fs;
mod map;
pub mod posix_aio;
mod rw;
mod sched;
mod signal;
mod unix;

pub use aio::{AioContext, AioEvent, Iocb};
pub use buf::AlignedBuf;
pub use cachestat::{cachestat, CacheStat};
pub use cpu::{clock_time, thread_cpu, ThreadCpu};
pub use event::{eventfd, eventfd_drain, eventfd_signal, poll_readable, poll_ready};
pub use ext4::move_extent;
pub use fanotify::{
    fanotify_init, fanotify_mark_filesystem, fanotify_read, FanEvent, FAN_CLOSE_NOWRITE, FAN_CLOSE_WRITE, FAN_MODIFY,
    FAN_OPEN,
};
pub use fd::{
    close, dup_at_least, fd_path, fdatasync, fstat, fsync, ftruncate, getpid, getppid, lseek, open, open_files_limit,
    open_files_limits, open_without_symlinks, preadv2_iov, pwritev2_iov, raise_open_files_limit, rename_noreplace,
    reopen_read_only, same_open_file, set_open_files_limits, status_flags, sync_file_range, syncfs, FileStat,
};
pub use fs::{
    atomic_write_units, birth_time, block_device_of, dio_alignment, disk_stat, fadvise, fallocate, fs_free_bytes,
    fs_of, fs_type_name, fs_type_of, is_generated_fs, kernel_release, meminfo_bytes, meminfo_bytes_at, mounts,
    overlay_layers, unescape_mount_field, Advice, BlockDevice, DioAlignment, DiskStat, Filesystem, Mount,
    OverlayLayers,
};
pub use map::{AnonMap, FileMap};
pub use rw::{pread, preadv2, pwrite, pwritev2, takes_dontcache_reads};
pub use sched::{ioprio_set_thread, kill, pidfd_open, set_thread_affinity, set_thread_nice};
pub use signal::{futex_wait, futex_wake, with_signals_blocked};
pub use unix::{
    accept, peer_credentials, recv_with_fd, send_with_fd, seqpacket_connect, seqpacket_listen, set_socket_timeouts,
    PeerCredentials, Received,
};

/// `RWF_DONTCACHE` from `include/uapi/linux/fs.h` (Linux 6.14+): buffered I/O
/// whose pages are written back promptly and dropped from the page cache.
///
/// 0x40 is `RWF_ATOMIC` (Linux 6.11+); fio 3.33 sends that value for
/// `uncached=1`, which is why the constant is spelled out here and tested.
pub const RWF_DONTCACHE: i32 = 0x80;

/// `RWF_ATOMIC` from `include/uapi/linux/fs.h` (Linux 6.11+): an O_DIRECT
/// write that reaches the disk whole or not at all, of a size the file
/// takes ([`atomic_write_units`]).
pub const RWF_ATOMIC: i32 = 0x40;

/// The calling thread's `errno`.
pub fn errno() -> i32 {
    // SAFETY: errno is thread-local; the location is always valid.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno` (a library that stands in for a
/// system call, or keeps the caller's across its own calls).
pub fn set_errno(e: i32) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = e };
}

/// The system page size, which cachestat(2) and fadvise work in. Read once:
/// libdontcache converts bytes to pages on every write. Threads that ask
/// at once each ask the kernel, and none waits for another: a child forked
/// while a parent thread was in the middle of a blocking once (`OnceLock`)
/// would wait for it for ever.
pub fn page_size() -> usize {
    static PAGE: once_cell::race::OnceNonZeroUsize = once_cell::race::OnceNonZeroUsize::new();
    PAGE.get_or_init(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        std::num::NonZeroUsize::new(usize::try_from(n).unwrap_or(0))
            .unwrap_or(std::num::NonZeroUsize::new(4096).unwrap())
    })
    .get()
}
