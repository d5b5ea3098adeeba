//! The flusher's side of a file: the pages a batch takes, writeback
//! started and waited for, and the drops after it.

use std::ops::Range;
use std::sync::atomic::Ordering::*;

use dc_sys::Advice;

use crate::device::Device;
use crate::ranges::RangeSet;
use crate::stats::Counters;

use super::{bytes, lock, page_size, pieces, sync_range, FileState, Pages, Taken, WAIT_FOR_WRITEBACK};

impl FileState {
    /// Takes up to `budget` dirty pages, range-cyclic from where the last
    /// batch stopped (`u64::MAX`: all), and the writeback writers started,
    /// for one batch. Writeback is started on a hull per side of the cursor,
    /// so a batch costs a call or two per file however scattered its pages.
    ///
    /// `hold_tail`: leave the page the last write ended inside (the file is
    /// open and no writer waits at the high-water mark).
    pub fn take(&self, device: &Device, budget: u64, chunk: u64, hold_tail: bool) -> Taken {
        let mut p = lock(&self.pages);
        let cursor = p.cursor;
        let held = p.partial_tail.filter(|_| hold_tail).filter(|&t| !p.dirty.intersect(t..t + 1).is_empty());
        if let Some(t) = held {
            p.dirty.remove(t..t + 1);
        }
        let taken = if budget > 0 { p.dirty.take_cyclic(cursor, budget) } else { Vec::new() };
        if let Some(t) = held {
            p.dirty.insert(t..t + 1);
        }
        let pages: u64 = taken.iter().map(|r| r.end - r.start).sum();
        let merged = Self::start_locked(&mut p, device, &taken);
        if let Some(last) = taken.last() {
            p.cursor = last.end;
        }
        // Before and after the wrap, in hulls of at most `chunk` taken pages
        // each. One start per hull: ext4 ends the writeback of a start's
        // pages together, once all of it is on the disk (one io_end), so a
        // 48 MiB start made the wait for its first 8 MiB piece last the 23
        // ms of all of it, and the disk ran dry before the next batch.
        let wrap = taken.iter().position(|r| r.start < cursor).unwrap_or(taken.len());
        let starts: Vec<Range<u64>> = [&taken[..wrap], &taken[wrap..]]
            .into_iter()
            .flat_map(|side| pieces(side.to_vec(), chunk).into_iter().map(|(h, _)| h))
            .collect();
        let mut to_wait = std::mem::take(&mut p.writer_started);
        drop(p);
        self.count_clean(device, merged);
        to_wait.extend(taken);
        Taken { starts, pieces: pieces(to_wait, chunk), pages }
    }

    /// Starts writeback of `pages` (a hull: only its dirty pages are
    /// written). An error is latched.
    pub fn start_writeback(&self, device: &Device, pages: &Range<u64>) {
        if let Err(e) = sync_range(self.cache_fd(), pages, libc::SYNC_FILE_RANGE_WRITE) {
            self.latch(e.raw_os_error().unwrap_or(libc::EIO), device);
        }
    }

    /// Waits for writeback of `hull` (writing what is dirty there now, such
    /// as pages a skipped rewrite left dirty), latches an error, and takes
    /// the in-flight pages there out of flight. Returns how many.
    pub fn wait_writeback(&self, device: &Device, hull: &Range<u64>) -> u64 {
        let waited =
            sync_range(self.cache_fd(), hull, WAIT_FOR_WRITEBACK).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO));
        self.waited(device, hull, waited)
    }

    /// The same, once the wait (a `WAIT_FOR_WRITEBACK` sync of `hull`)
    /// was done elsewhere and ended with `result`.
    pub fn waited(&self, device: &Device, hull: &Range<u64>, result: Result<(), i32>) -> u64 {
        if let Err(errno) = result {
            self.latch(errno, device);
        }
        let n: u64 = lock(&self.pages).in_flight.remove(hull.clone()).iter().map(|r| r.end - r.start).sum();
        device.count_finished(n);
        n
    }

    /// Whether the writeback of `hull` is over (nothing of it dirty or
    /// under writeback, by one `cachestat`; `None` if not, or if the call
    /// fails), and if so whether nothing of it is cached where it covers
    /// all that the file's drop would drop: the kernel dropped its
    /// RWF_DONTCACHE pages itself.
    pub fn writeback_settled(&self, hull: &Range<u64>) -> Option<bool> {
        let (off, len) = bytes(hull);
        let c = dc_sys::cachestat(self.cache_fd(), off, len).ok()?;
        if c.nr_dirty + c.nr_writeback > 0 {
            return None;
        }
        let p = lock(&self.pages);
        Some(c.nr_cache == 0 && p.retry_drop.is_empty() && p.to_drop().is_some_and(|t| t == *hull))
    }

    /// Those pages are clean now (after the drop: whoever waits for the
    /// dirty count to reach zero then finds them gone, not about to go).
    pub fn written_back(&self, device: &Device, pages: u64) {
        let ps = page_size();
        for c in [&self.counters, &device.counters] {
            Counters::add(&c.bytes_written_back, pages * ps);
            if self.droppable {
                Counters::add(&c.bytes_dropped, pages * ps);
            }
        }
        self.count_clean(device, pages);
    }

    /// Whether the flusher has anything of this file left to do but wait
    /// for pieces it already queued.
    pub fn has_work(&self) -> bool {
        let p = lock(&self.pages);
        !p.dirty.is_empty() || !p.writer_started.is_empty() || !p.retry_drop.is_empty()
    }

    /// Whether pages of this file are in flight. Those that no queued
    /// piece and no writer-started range will wait for are made a range to
    /// wait for first: nothing would ever count them clean, and every
    /// writer on the device would stall at its mark for good. None in
    /// correct bookkeeping: a guard, counted (`orphaned_pages`) so that
    /// tests see it used. Only the flusher, which alone queues pieces, may
    /// ask.
    pub fn in_flight_awaited(&self) -> bool {
        let mut p = lock(&self.pages);
        let Some(hull) = p.in_flight.hull() else { return false };
        if self.pieces_queued.load(Acquire) == 0 && p.writer_started.is_empty() {
            crate::engine::note_orphaned(p.in_flight.pages());
            p.writer_started.push(hull);
        }
        true
    }

    /// Whether anything of this file is dirty, under writeback, or queued
    /// for the flusher to wait for.
    pub fn unsettled(&self) -> bool {
        if self.pieces_queued.load(Acquire) > 0 {
            return true;
        }
        let p = lock(&self.pages);
        !p.dirty.is_empty() || !p.in_flight.is_empty() || !p.writer_started.is_empty()
    }

    pub fn has_dirty(&self) -> bool {
        !lock(&self.pages).dirty.is_empty()
    }

    /// The pages of the drops waiting for a retry.
    pub fn drops_pending_pages(&self) -> u64 {
        lock(&self.pages).retry_drop.pages()
    }

    /// Gives up on the drops the kernel keeps deferring.
    pub fn forget_drops(&self) {
        lock(&self.pages).retry_drop = RangeSet::new();
    }

    // ---- dropping -----------------------------------------------------

    /// Drops the clean pages of `range` that are the library's, and notes
    /// the ones the kernel kept (a folio still locked or referenced for a
    /// moment) for a retry. Dirty pages stay (the kernel skips them). The
    /// file's lock is held across the drop, so a write cannot slip a page
    /// in between the decision and the kernel's drop. Nothing of a file
    /// kept whole (`Pages::keeps_all`). Returns the pages still waiting for
    /// a retry.
    pub fn drop_range(&self, range: Range<u64>) -> u64 {
        let mut p = lock(&self.pages);
        if p.keeps_all() {
            return 0;
        }
        p.note_dropped(range.clone());
        let mut ranges = p.retry_drop.remove(range.clone());
        ranges.push(range);
        self.drop_locked(&mut p, ranges);
        p.retry_drop.pages()
    }

    /// Retries the drops the kernel deferred.
    pub fn retry_drops(&self) {
        let mut p = lock(&self.pages);
        if p.retry_drop.is_empty() {
            return;
        }
        let again: Vec<Range<u64>> = std::mem::take(&mut p.retry_drop).iter().collect();
        self.drop_locked(&mut p, again);
    }

    /// Drops everything the library touched in this file. Returns the pages
    /// of the library's still cached and clean.
    pub fn drop_touched(&self) -> u64 {
        let mut p = lock(&self.pages);
        let Some(t) = p.to_drop() else { return 0 };
        p.retry_drop = RangeSet::new();
        self.drop_locked(&mut p, vec![t]);
        p.retry_drop.pages()
    }

    /// The same, less the pages dirty or in flight by the library's count
    /// (written again since a sync: they wait for their writeback, which a
    /// drop would start outside the library's count).
    pub fn drop_touched_clean(&self) -> u64 {
        let mut p = lock(&self.pages);
        let Some(t) = p.to_drop().filter(|_| !p.keeps_all()) else { return 0 };
        let mut busy = p.dirty.clone();
        for r in p.in_flight.iter() {
            busy.insert(r);
        }
        let clean = busy.gaps(t);
        for r in &clean {
            p.note_dropped(r.clone());
        }
        self.drop_locked(&mut p, clean);
        p.retry_drop.pages()
    }

    pub(super) fn drop_locked(&self, p: &mut Pages, ranges: Vec<Range<u64>>) {
        if !self.droppable {
            return;
        }
        // Adjacent pieces merge into one range: the kernel drops only the
        // folios wholly inside a range, and a large folio may straddle two.
        let mut merged = RangeSet::new();
        for r in ranges {
            merged.insert(r);
        }
        let droppable: Vec<Range<u64>> = merged.iter().flat_map(|r| p.droppable(r)).collect();
        for r in droppable {
            let (off, len) = bytes(&r);
            if dc_sys::fadvise(self.cache_fd(), off, len, Advice::DontNeed).is_err() {
                continue;
            }
            // Dirty pages (a write since) are not failures: a later drop
            // takes them once written back.
            let after = dc_sys::cachestat(self.cache_fd(), off, len).unwrap_or_default();
            if after.nr_cache > after.nr_dirty + after.nr_writeback {
                p.retry_drop.insert(r);
            }
        }
    }
}
