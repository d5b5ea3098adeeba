//! A handle: one caller file descriptor the library writes (and reads)
//! through. All the policy decisions of the write path live here.

use std::ffi::CString;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicPtr, Ordering::*};
use std::sync::Arc;

use crate::device::Device;
use crate::engine::{engine, fork_generation};
use crate::file::{page_size, pages_of, sync_file_range, FileState};
use crate::policy::{Options, Policy};
use crate::stats::{Counters, Stats};

/// What a handle is bound to in one process (fork generation).
struct Binding {
    generation: u64,
    file: Arc<FileState>,
    device: Arc<Device>,
    /// Held on `device` while the binding lives (see `Device::hold_mark`).
    high_water: u64,
}

impl Drop for Binding {
    fn drop(&mut self) {
        self.device.release_mark(self.high_water);
    }
}

pub struct Handle {
    fd: RawFd,
    opts: Options,
    /// Owned (from Box::into_raw); replaced, and the old one leaked, only in
    /// a forked child, where another thread might still be reading it.
    binding: AtomicPtr<Binding>,
}

fn cvt(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

fn retry<F: FnMut() -> isize>(mut f: F) -> io::Result<usize> {
    loop {
        match cvt(f()) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: st is a valid out-pointer for fstat.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstat succeeded and filled it.
    Ok(unsafe { st.assume_init() })
}

fn bind(fd: RawFd, opts: &Options) -> io::Result<Binding> {
    let st = fstat(fd)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "dontcache handles wrap regular files only"));
    }
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we then own.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` is a fresh descriptor owned by nobody else.
    let file = Arc::new(FileState::new(unsafe { OwnedFd::from_raw_fd(dup) }, opts.policy));
    let device = engine().device(st.st_dev, opts.submit);
    device.hold_mark(opts.high_water);
    Ok(Binding { generation: fork_generation(), file, device, high_water: opts.high_water })
}

impl Handle {
    /// Wraps `fd`, which stays the caller's until `close`.
    pub fn adopt(fd: RawFd, opts: Options) -> io::Result<Handle> {
        let binding = Box::into_raw(Box::new(bind(fd, &opts)?));
        Ok(Handle { fd, opts, binding: AtomicPtr::new(binding) })
    }

    /// Opens `path` (with open(2) flags and mode) and wraps it.
    pub fn open(path: &Path, flags: i32, mode: u32, opts: Options) -> io::Result<Handle> {
        use std::os::unix::ffi::OsStrExt;
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
        // SAFETY: c is a valid C string.
        let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Handle::adopt(fd, opts).inspect_err(|_| {
            // SAFETY: we opened it and nobody else has it.
            unsafe { libc::close(fd) };
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd
    }

    pub fn options(&self) -> Options {
        self.opts
    }

    /// The file state and device; in a forked child, fresh ones. The common
    /// case is one atomic load and a compare: this runs on every I/O.
    fn bound(&self) -> (&Arc<FileState>, &Arc<Device>) {
        let cur = self.binding.load(Acquire);
        // SAFETY: bindings are freed only by Drop, which has &mut self.
        let b = unsafe { &*cur };
        if b.generation == fork_generation() {
            return (&b.file, &b.device);
        }
        let Ok(fresh) = bind(self.fd, &self.opts) else {
            return (&b.file, &b.device);
        };
        let fresh = Box::into_raw(Box::new(fresh));
        let b = match self.binding.compare_exchange(cur, fresh, AcqRel, Acquire) {
            Ok(_) => fresh,
            Err(winner) => {
                // SAFETY: `fresh` was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                winner
            }
        };
        // SAFETY: as above.
        let b = unsafe { &*b };
        (&b.file, &b.device)
    }

    fn uses_kernel(&self, file: &FileState) -> bool {
        self.opts.policy == Policy::Kernel && !file.kernel_fallback.load(Relaxed)
    }

    /// An error latched by background writeback, reported once.
    fn pending_error(file: &FileState) -> io::Result<()> {
        match file.take_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub fn pwrite(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        self.pwritev(&[IoSlice::new(buf)], off, 0)
    }

    /// `pwritev2(fd, iov, off, flags)` through the policy.
    pub fn pwritev(&self, iov: &[IoSlice<'_>], off: u64, flags: i32) -> io::Result<usize> {
        let (file, device) = self.bound();
        Self::pending_error(file)?;
        let len: u64 = iov.iter().map(|b| b.len() as u64).sum();
        // Under `kernel` too: the kernel drops a page at the end of its
        // writeback only if it gets the folio lock then, so a few may stay
        // cached, and close drops those if they are the library's.
        self.before_write(file, off, len);
        if self.uses_kernel(file) {
            let r = retry(|| unsafe {
                // SAFETY: IoSlice is ABI-compatible with iovec.
                libc::pwritev2(
                    self.fd,
                    iov.as_ptr().cast(),
                    iov.len() as i32,
                    off as i64,
                    flags | dc_sys::RWF_DONTCACHE,
                )
            });
            match r {
                Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)) => {
                    // Refused (old kernel or a filesystem without FOP_DONTCACHE):
                    // the flusher way from now on, recorded in the stats.
                    file.kernel_fallback.store(true, Relaxed);
                }
                r => {
                    if let Ok(n) = r {
                        Counters::add(&file.counters.bytes_written, n as u64);
                        Counters::add(&device.counters.bytes_written, n as u64);
                    }
                    return r;
                }
            }
        }
        let n = retry(|| unsafe {
            // SAFETY: as above.
            libc::pwritev2(self.fd, iov.as_ptr().cast(), iov.len() as i32, off as i64, flags)
        })?;
        self.after_write(file, device, off, n as u64, true);
        Ok(n)
    }

    /// `write(2)` at the file position (O_APPEND included).
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        self.writev(&[IoSlice::new(buf)])
    }

    pub fn writev(&self, iov: &[IoSlice<'_>]) -> io::Result<usize> {
        let (file, device) = self.bound();
        Self::pending_error(file)?;
        let len: u64 = iov.iter().map(|b| b.len() as u64).sum();
        let kernel = self.uses_kernel(file);
        // Where the write will land, to classify pages before it: a
        // concurrent writer or O_APPEND may move it, and then the pages it
        // lands on stay unclassified and are never dropped (the safe side).
        // SAFETY: lseek on the caller's descriptor changes nothing.
        let pos = unsafe { libc::lseek(self.fd, 0, libc::SEEK_CUR) };
        if pos >= 0 {
            self.before_write(file, pos as u64, len);
        }
        let flags = if kernel { dc_sys::RWF_DONTCACHE } else { 0 };
        let r = retry(|| unsafe {
            // SAFETY: offset -1 means the file position, as writev(2).
            libc::pwritev2(self.fd, iov.as_ptr().cast(), iov.len() as i32, -1, flags)
        });
        let n = match r {
            Err(e) if kernel && matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)) => {
                file.kernel_fallback.store(true, Relaxed);
                return self.writev(iov);
            }
            r => r?,
        };
        if kernel {
            Counters::add(&file.counters.bytes_written, n as u64);
            Counters::add(&device.counters.bytes_written, n as u64);
            return Ok(n);
        }
        // SAFETY: as above.
        let end = unsafe { libc::lseek(self.fd, 0, libc::SEEK_CUR) };
        if end >= n as i64 {
            let at = end as u64 - n as u64;
            self.after_write(file, device, at, n as u64, pos >= 0 && at == pos as u64);
        }
        Ok(n)
    }

    /// Classifies the pages a write will touch before it brings them in.
    fn before_write(&self, file: &FileState, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let mut p = file.lock();
        file.classify(&mut p, pages_of(off, len));
    }

    /// `classified`: the pages were classified before the write, which
    /// landed where expected (not so for O_APPEND or a racing writer).
    fn after_write(&self, file: &Arc<FileState>, device: &Arc<Device>, off: u64, n: u64, classified: bool) {
        Counters::add(&file.counters.bytes_written, n);
        Counters::add(&device.counters.bytes_written, n);
        if n == 0 {
            return;
        }
        let range = pages_of(off, n);
        let newly = {
            let mut p = file.lock();
            if classified {
                p.reown(range.clone());
            }
            p.dirty.insert(range.clone())
        };
        device.account_dirty(file, newly, !file.queued.load(Acquire));
        let start_now = match file.policy {
            Policy::Inline => true,
            // Skip while the file has writeback in flight; else cap the flush
            // to the bytes just written (seed 003).
            Policy::Lazy => dc_sys::cachestat(file.fd(), 0, 0).map(|c| c.nr_writeback == 0).unwrap_or(true),
            _ => false,
        };
        if start_now {
            if let Err(e) = sync_file_range(file.fd(), off, n, libc::SYNC_FILE_RANGE_WRITE) {
                file.latch(e.raw_os_error().unwrap_or(libc::EIO));
            }
            let mut p = file.lock();
            let mut merged = 0;
            for piece in p.dirty.remove(range) {
                let added = p.submitted.insert(piece.clone());
                device.started_writeback(added);
                merged += piece.end - piece.start - added;
            }
            drop(p);
            device.account_clean(file, merged);
        }
        device.kick(file);
        device.throttle(file, self.opts.high_water, n);
    }

    pub fn pread(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        self.preadv(&mut [IoSliceMut::new(buf)], Some(off))
    }

    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.preadv(&mut [IoSliceMut::new(buf)], None)
    }

    /// Drop-behind reads: pages the read (and its readahead) brought in are
    /// dropped once read; pages that were cached before stay.
    pub fn preadv(&self, iov: &mut [IoSliceMut<'_>], off: Option<u64>) -> io::Result<usize> {
        let (file, device) = self.bound();
        let len: u64 = iov.iter().map(|b| b.len() as u64).sum();
        // SAFETY: lseek on the caller's descriptor changes nothing.
        let at = off.or_else(|| u64::try_from(unsafe { libc::lseek(self.fd, 0, libc::SEEK_CUR) }).ok());
        if let Some(at) = at.filter(|_| len > 0) {
            // Pages in the readahead window that are not cached yet will be
            // brought in by this read: they are the library's to drop.
            let span = pages_of(at, len);
            let ahead = span.end..span.end + device.readahead_pages;
            let mut p = file.lock();
            file.classify(&mut p, span.start..ahead.end);
        }
        let pos = off.map(|o| o as i64).unwrap_or(-1);
        let n = retry(|| unsafe {
            // SAFETY: IoSliceMut is ABI-compatible with iovec.
            libc::preadv2(self.fd, iov.as_mut_ptr().cast(), iov.len() as i32, pos, 0)
        })?;
        Counters::add(&file.counters.bytes_read, n as u64);
        Counters::add(&device.counters.bytes_read, n as u64);
        if let Some(at) = at {
            if n > 0 {
                // With the drops the kernel deferred (no flusher retries
                // them for a reader): readahead's large folios straddle two
                // reads, and only the two ranges together cover one.
                let read = pages_of(at, n as u64);
                let mut ranges = {
                    let mut p = file.lock();
                    p.reown(read.clone());
                    std::mem::take(&mut p.retry_drop)
                };
                ranges.insert(read);
                file.drop_clean(&ranges.iter().collect::<Vec<_>>());
            }
        }
        Ok(n)
    }

    /// Writes back and waits for everything the library dirtied in this
    /// file, then drops what is clean and its own. Errors are latched.
    fn settle(&self, file: &Arc<FileState>, device: &Arc<Device>) {
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        if let Err(e) = sync_file_range(file.fd(), 0, 0, flags) {
            file.latch(e.raw_os_error().unwrap_or(libc::EIO));
        }
        self.forget_dirty(file, device, 0..u64::MAX);
    }

    /// Marks the library's dirty pages in `range` clean (they were written
    /// back or truncated away) and drops the owned ones.
    fn forget_dirty(&self, file: &Arc<FileState>, device: &Arc<Device>, range: Range<u64>) {
        let _exclusive = file.pass_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut p = file.lock();
        // The device counts |dirty| + |submitted| (a page rewritten while
        // under writeback is in both, and counted twice): take out both.
        let was_submitted: u64 = p.submitted.remove(range.clone()).iter().map(|r| r.end - r.start).sum();
        let was_dirty: u64 = p.dirty.remove(range.clone()).iter().map(|r| r.end - r.start).sum();
        device.finished_writeback(was_submitted);
        let n = was_submitted + was_dirty;
        let owned: Vec<Range<u64>> = p.owned.intersect(range.clone());
        drop(p);
        // A readahead still in flight keeps its pages for a moment; give
        // it a few milliseconds rather than leave them cached for good.
        let mut tries = 0;
        while file.drop_clean(&owned) > 0 && tries < 20 {
            tries += 1;
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        device.account_clean(file, n);
    }

    pub fn fsync(&self) -> io::Result<()> {
        self.sync(false)
    }

    pub fn fdatasync(&self) -> io::Result<()> {
        self.sync(true)
    }

    fn sync(&self, data_only: bool) -> io::Result<()> {
        let (file, device) = self.bound();
        // SAFETY: plain syscalls on the caller's descriptor.
        let r = retry(|| unsafe { (if data_only { libc::fdatasync(self.fd) } else { libc::fsync(self.fd) }) as isize });
        if r.is_ok() {
            // Everything is on disk now: account it clean and drop ours.
            self.forget_dirty(file, device, 0..u64::MAX);
        }
        Self::pending_error(file)?;
        r.map(|_| ())
    }

    /// `ftruncate(2)`: pages past the new end are gone, dirty or not.
    pub fn truncate(&self, len: u64) -> io::Result<()> {
        let (file, device) = self.bound();
        retry(|| unsafe { libc::ftruncate(self.fd, len as i64) as isize })?;
        self.forget_dirty(file, device, len.div_ceil(page_size())..u64::MAX);
        Ok(())
    }

    pub fn stats(&self) -> Stats {
        self.bound().0.stats()
    }

    /// Settles the file, reports any error the library kept for it, and
    /// gives the descriptor back without closing it.
    pub fn detach(self) -> (RawFd, io::Result<()>) {
        let (file, device) = self.bound();
        self.settle(file, device);
        device.forget(file);
        let r = Self::pending_error(file);
        (self.fd, r)
    }

    /// Settles, reports, and closes the descriptor (even on error).
    pub fn close(self) -> io::Result<()> {
        let (fd, r) = self.detach();
        // SAFETY: the caller handed the descriptor to us to close.
        let c = unsafe { libc::close(fd) };
        let c = if c < 0 { Err(io::Error::last_os_error()) } else { Ok(()) };
        r.and(c)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: from Box::into_raw, and nobody else can reach it now.
        drop(unsafe { Box::from_raw(*self.binding.get_mut()) });
    }
}

impl AsFd for Handle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor stays open while the handle lives.
        unsafe { BorrowedFd::borrow_raw(self.fd) }
    }
}
