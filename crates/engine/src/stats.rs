//! Counters the engine keeps per file and per device, and the C-visible
//! snapshot of them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A snapshot of a handle's (or the whole process's) write-behind activity.
/// The layout is part of the C ABI (`struct dc_stats` in dontcache.h).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub bytes_written: u64,
    pub bytes_read: u64,
    /// Kicks that woke the flusher.
    pub kicks: u64,
    /// Kicks that found the flag already set and so cost nothing.
    pub coalesced_kicks: u64,
    /// Flusher batches that took pages of this file (or device).
    pub passes: u64,
    pub bytes_written_back: u64,
    /// Bytes the library asked the kernel to drop from the page cache
    /// (none on tmpfs and ramfs, or an overlay over them: their pages are
    /// the files).
    pub bytes_dropped: u64,
    /// Bytes dirtied by the library and not yet seen clean.
    pub dirty_now: u64,
    /// Times a writer blocked at the high-water mark.
    pub highwater_stalls: u64,
    /// Writeback errors seen (each is also reported to the caller once).
    pub errors: u64,
    /// 1 if the `kernel` policy was refused and `flusher` used instead.
    pub kernel_fallback: u64,
    /// Writeback errors of files already closed when they happened
    /// (process or device only; each is also returned once by `dc_flush`).
    pub late_errors: u64,
}

impl Stats {
    /// Adds another device's (or handle's) figures to these.
    pub fn accumulate(&mut self, o: &Stats) {
        self.bytes_written += o.bytes_written;
        self.bytes_read += o.bytes_read;
        self.kicks += o.kicks;
        self.coalesced_kicks += o.coalesced_kicks;
        self.passes += o.passes;
        self.bytes_written_back += o.bytes_written_back;
        self.bytes_dropped += o.bytes_dropped;
        self.dirty_now += o.dirty_now;
        self.highwater_stalls += o.highwater_stalls;
        self.errors += o.errors;
        self.kernel_fallback |= o.kernel_fallback;
        self.late_errors += o.late_errors;
    }
}

#[derive(Debug, Default)]
pub struct Counters {
    pub bytes_written: AtomicU64,
    pub bytes_read: AtomicU64,
    pub kicks: AtomicU64,
    pub coalesced_kicks: AtomicU64,
    pub passes: AtomicU64,
    pub bytes_written_back: AtomicU64,
    pub bytes_dropped: AtomicU64,
    pub highwater_stalls: AtomicU64,
    pub errors: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub fn snapshot(&self) -> Stats {
        Stats {
            bytes_written: self.bytes_written.load(Relaxed),
            bytes_read: self.bytes_read.load(Relaxed),
            kicks: self.kicks.load(Relaxed),
            coalesced_kicks: self.coalesced_kicks.load(Relaxed),
            passes: self.passes.load(Relaxed),
            bytes_written_back: self.bytes_written_back.load(Relaxed),
            bytes_dropped: self.bytes_dropped.load(Relaxed),
            dirty_now: 0,
            highwater_stalls: self.highwater_stalls.load(Relaxed),
            errors: self.errors.load(Relaxed),
            kernel_fallback: 0,
            late_errors: 0,
        }
    }
}
