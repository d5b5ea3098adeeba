//! What the engine knows about one open file: the pages it dirtied, the pages
//! it may drop, the pages that were someone else's, and the first writeback
//! error nobody has been told about yet.

use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::*};
use std::sync::Mutex;

use dc_sys::Advice;

use crate::policy::Policy;
use crate::ranges::RangeSet;
use crate::stats::{Counters, Stats};

/// Page ranges of one file, under the file's lock.
#[derive(Debug, Default)]
pub struct Pages {
    /// Dirtied by the library, writeback not yet started by it.
    pub dirty: RangeSet,
    /// Writeback started (by the flusher or by a writer under
    /// `inline`/`lazy`), not yet waited for.
    pub submitted: RangeSet,
    /// Of those, the pages queued for the flusher to wait for and drop
    /// (only the flusher changes this set).
    pub awaited: RangeSet,
    /// Brought into the cache by the library: may be dropped once clean.
    pub owned: RangeSet,
    /// Cached before the library touched them: never dropped.
    pub foreign: RangeSet,
    /// Where range-cyclic writeback resumes.
    pub cursor: u64,
    /// Clean pages of ours the kernel would not drop yet; retried shortly.
    pub retry_drop: RangeSet,
}

impl Pages {
    /// The pieces of `range` neither owned nor foreign.
    pub fn unclassified(&self, range: Range<u64>) -> Vec<Range<u64>> {
        self.owned.gaps(range).into_iter().flat_map(|gap| self.foreign.gaps(gap)).collect()
    }

    /// Takes back the pages of `range`, which the library classified before
    /// a write or read to it, that are in neither set now: the flusher
    /// dropped them while the I/O ran (a page shared by two unaligned
    /// writes), and the I/O brought them back, so they are the library's
    /// again. Without this they were never dropped: a tar extraction under
    /// `dontcache run` left 2-5 pages cached about one run in ten.
    pub fn reown(&mut self, range: Range<u64>) {
        for piece in self.unclassified(range) {
            self.owned.insert(piece);
        }
    }
}

pub struct FileState {
    /// A duplicate of the caller's descriptor, so background writeback never
    /// races with the caller closing or reusing its number.
    fd: OwnedFd,
    pub policy: Policy,
    pub pages: Mutex<Pages>,
    /// Held by the flusher while it takes this file's pages or finishes a
    /// piece of its writeback, and by close, sync and truncate, so they
    /// never overlap a drop in progress (and leave pages cached after close).
    pub pass_lock: Mutex<()>,
    /// The first unreported writeback error (errno), 0 if none.
    error: AtomicI32,
    /// On the device's dirty list (protected by that list's lock).
    pub queued: AtomicBool,
    /// Kicked under the per-file policy and not yet served.
    pub kicked: AtomicBool,
    /// The kernel refused RWF_DONTCACHE; writes go the flusher way.
    pub kernel_fallback: AtomicBool,
    pub counters: Counters,
    /// Library-dirty pages not yet seen clean (mirrors dirty + submitted).
    pub dirty_pages: AtomicU64,
}

pub fn page_size() -> u64 {
    dc_sys::page_size() as u64
}

/// The pages a byte range touches.
pub fn pages_of(off: u64, len: u64) -> Range<u64> {
    let ps = page_size();
    off / ps..(off + len).div_ceil(ps)
}

impl FileState {
    pub fn new(fd: OwnedFd, policy: Policy) -> FileState {
        FileState {
            fd,
            policy,
            pages: Mutex::new(Pages::default()),
            pass_lock: Mutex::new(()),
            error: AtomicI32::new(0),
            queued: AtomicBool::new(false),
            kicked: AtomicBool::new(false),
            kernel_fallback: AtomicBool::new(false),
            counters: Counters::default(),
            dirty_pages: AtomicU64::new(0),
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Pages> {
        // A panic while holding the lock cannot leave the sets inconsistent in
        // a way that matters more than losing the process's write-behind.
        self.pages.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the first error until someone is told.
    pub fn latch(&self, errno: i32) {
        Counters::add(&self.counters.errors, 1);
        let _ = self.error.compare_exchange(0, errno, AcqRel, Acquire);
    }

    /// The latched error, cleared: each error is reported exactly once.
    pub fn take_error(&self) -> Option<io::Error> {
        match self.error.swap(0, AcqRel) {
            0 => None,
            e => Some(io::Error::from_raw_os_error(e)),
        }
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.counters.snapshot();
        s.dirty_now = self.dirty_pages.load(Relaxed) * page_size();
        s.kernel_fallback = self.kernel_fallback.load(Relaxed) as u64;
        s
    }

    /// Splits the pages of `range` that are not yet classified into owned
    /// (not cached now) and foreign (cached now). Called before the library
    /// brings them into the cache.
    pub fn classify(&self, p: &mut Pages, range: Range<u64>) {
        for piece in p.unclassified(range) {
            self.classify_by_residency(p, piece);
        }
    }

    /// Halves a range until each piece is all cached or all uncached:
    /// one cachestat call in the common case of a range nobody has cached.
    fn classify_by_residency(&self, p: &mut Pages, range: Range<u64>) {
        let ps = page_size();
        let len = range.end - range.start;
        let cached = match dc_sys::cachestat(self.fd(), range.start * ps, len * ps) {
            Ok(cs) => cs.nr_cache,
            // Without cachestat (kernel < 6.5) nothing can be proven ours:
            // treat it as foreign and never drop it.
            Err(_) => len,
        };
        if cached == 0 {
            p.owned.insert(range);
        } else if cached >= len || len == 1 {
            p.foreign.insert(range);
        } else {
            let mid = range.start + len / 2;
            self.classify_by_residency(p, range.start..mid);
            self.classify_by_residency(p, mid..range.end);
        }
    }

    /// Drops the owned, clean pages of `ranges` from the page cache.
    /// Pages dirtied again meanwhile stay (the kernel skips dirty pages, and
    /// they stay owned so a later pass drops them). So do pages the kernel
    /// could not drop yet (a readahead still reading them in, a folio still
    /// referenced): they stay owned for the next pass or close. Returns the
    /// number of pages still cached that the library owns.
    pub fn drop_clean(&self, ranges: &[Range<u64>]) -> u64 {
        let ps = page_size();
        // The lock is held across the drop: a writer classifying one of
        // these pages after it left `owned` but before the kernel dropped it
        // would find it cached and take it for someone else's, and it would
        // never be dropped again (a tar extraction under `dontcache run`
        // left 2 pages cached about one run in 15).
        let mut p = self.lock();
        // Adjacent pieces merge into one range: the kernel drops only the
        // folios wholly inside a range, and a large folio may straddle two.
        let mut droppable = RangeSet::new();
        for r in ranges {
            for piece in p.owned.intersect(r.clone()) {
                for clean in p.dirty.gaps(piece) {
                    for r in p.submitted.gaps(clean) {
                        droppable.insert(r);
                    }
                }
            }
        }
        let mut left = 0;
        for r in droppable.iter() {
            let (off, len) = (r.start * ps, (r.end - r.start) * ps);
            if dc_sys::fadvise(self.fd(), off, len, Advice::DontNeed).is_err() {
                continue;
            }
            let still = dc_sys::cachestat(self.fd(), off, len).map_or(0, |c| c.nr_cache);
            Counters::add(&self.counters.bytes_dropped, len - still * ps);
            if still > 0 {
                // Ours still: it stays owned, and a later drop retries.
                left += still;
                p.retry_drop.insert(r);
            } else {
                p.owned.remove(r);
            }
        }
        left
    }

    /// Waits for writeback of `r` (starting any not yet started) and latches
    /// an error. Returns whether it succeeded.
    pub fn wait_range(&self, r: &Range<u64>) -> bool {
        let ps = page_size();
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        match sync_file_range(self.fd(), r.start * ps, (r.end - r.start) * ps, flags) {
            Ok(()) => true,
            Err(e) => {
                self.latch(e.raw_os_error().unwrap_or(libc::EIO));
                false
            }
        }
    }
}

pub fn sync_file_range(fd: BorrowedFd<'_>, off: u64, len: u64, flags: u32) -> io::Result<()> {
    loop {
        // SAFETY: plain syscall on a live descriptor; no memory is passed.
        let r = unsafe { libc::sync_file_range(fd.as_raw_fd(), off as i64, len as i64, flags) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
