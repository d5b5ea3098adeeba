//! The program's I/O on a file as the library sees it: writes that dirty
//! pages, writes the kernel makes and flushes itself (`RWF_DONTCACHE`, a
//! writer's own writeback start), reads dropped behind, and writes the
//! library does not see, found by sweeping the file.

use std::ops::Range;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;

use dc_sys::Advice;

use crate::device::Device;
use crate::ranges::RangeSet;

use super::{bytes, cover, lock, page_size, pages_of, uncounted_pages, FileState, OtherOpens, Pages, END_OF_FILE};

/// What a read batch leaves for the next, and how much of its end the next
/// covers again (see `FileState::drop_behind`).
const READ_DROP_LAG: u64 = 64;
const READ_DROP_OVERLAP: u64 = 512;

/// Scattered reads (at least `SCATTERED_RANGES` pieces, filling under a
/// quarter of their hull) are dropped every `SCATTERED_BATCH` pages read,
/// not every half mark: 8,192 random pages cached, one or two in each
/// 64-page node of the file's tree of pages, made each read's lookup walk
/// nodes out of the CPU's caches (`xas_load`, 4.5% of a random reader's
/// samples, out of the top 25 with batches of 512; see
/// `FileState::drop_behind`).
const SCATTERED_BATCH: u64 = 512;
const SCATTERED_RANGES: usize = 16;

/// Pages a reader read, to be dropped: `range` holds them, and `read` is
/// how many pages it read there (the hull of scattered reads is far longer
/// than what they read); `scattered` says the reads were scattered over a
/// file too large to be one the program works in (`Pages::small`).
#[derive(Debug, PartialEq, Eq)]
pub struct ReadBatch {
    pub range: Range<u64>,
    pub read: u64,
    pub scattered: bool,
}

impl FileState {
    /// The library wrote `len` bytes at `off`: their pages are dirty until
    /// written back. Returns how many were not dirty before.
    pub fn dirtied(&self, device: &Device, off: u64, len: u64) -> u64 {
        let pages = pages_of(off, len);
        let end = off + len;
        let newly = {
            let mut p = lock(&self.pages);
            p.touch(&pages);
            p.partial_tail = (!end.is_multiple_of(page_size())).then(|| end / page_size());
            p.dirty.insert(pages)
        };
        self.dirty_pages.fetch_add(newly, AcqRel);
        device.count_dirtied(newly);
        newly
    }

    /// The kernel wrote `pages` with RWF_DONTCACHE: not counted dirty (the
    /// kernel writes them back), but close waits for them and drops what
    /// the kernel's own drop left (it skips a folio it cannot lock then).
    pub fn kernel_wrote(&self, pages: &Range<u64>) {
        let mut p = lock(&self.pages);
        p.touch(pages);
        p.kernel_wrote = true;
    }

    /// A `lazy` write went as RWF_DONTCACHE, whose writeback the kernel
    /// started before it returned: as `kernel_wrote`, and the file's next
    /// write is skipped while these pages are in flight (`writeback_idle`).
    pub fn kernel_flushed(&self, pages: &Range<u64>) {
        let mut p = lock(&self.pages);
        p.touch(pages);
        p.kernel_wrote = true;
        p.last_started = Some(pages.clone());
    }

    /// At close: writeback the library did not start itself (the kernel's,
    /// for RWF_DONTCACHE; any, for a file with unseen I/O) becomes a piece
    /// for the flusher to wait for (and start, where still dirty) and drop.
    /// The last open with unseen I/O of a file drops it whole, as does one
    /// that finds dirty pages no open counted (a small file's last open for
    /// writing with pages of the library's still to wait for does not
    /// look: its whole file is waited for); another leaves
    /// a small file cached to the last (`Pages::left_to_others`).
    ///
    /// While another open for writing stays (`others`), the file's dirty
    /// pages are left to its sweeps, which count them against every open's
    /// writes: this open's count alone took the other's writes for unseen
    /// ones, and its close wrote back and dropped the whole file under the
    /// other (SQLite's log, one of two connections closing).
    pub fn await_foreign_writeback(&self, others: OtherOpens) {
        // A file open only for reading cannot have dirtied pages through
        // this open file: any dirty page came through another, which its
        // own handle (or process) writes back. Not asking saves a
        // `cachestat` on the closing thread for every file a program reads.
        let swept = self.unseen.load(Acquire);
        // The last open of a small file, open for writing: what is dirty
        // or in flight beyond the library's count needs no `cachestat` to
        // be found, since the flusher's wait of the whole file writes back
        // whatever is dirty there and its drop takes the whole file
        // anyway. Asking cost the closing thread two `cachestat` calls a
        // file (tar -xf of 50,000 files: 100,000 calls, about 3% of its
        // thread's time; without them 0.98x the wall time, median of 7
        // interleaved runs). A larger file is asked: its wait would be
        // for all of its writeback at once, where the library's own pages
        // are waited for a chunk at a time. So is one with nothing of the
        // library's left to wait for: a wait through its descriptor would
        // be one more call on a file the library is otherwise done with.
        let last = swept && !others.any;
        let waited_anyway = || last && lock(&self.pages).small() && self.unsettled();
        let wait_whole = swept && self.writable && !others.writable && (waited_anyway() || self.unseen_dirty());
        let mut p = lock(&self.pages);
        if wait_whole || last {
            p.touched = Some(0..END_OF_FILE);
        } else if swept && p.small() {
            p.left_to_others = true;
        }
        if std::mem::take(&mut p.kernel_wrote) || wait_whole {
            if let Some(t) = p.touched.clone() {
                p.writer_started.push(t);
            }
        }
    }

    /// Whether the file has dirty or under-writeback pages the library did
    /// not count: written by a path it does not see (`uncounted_pages`).
    fn unseen_dirty(&self) -> bool {
        uncounted_pages(self.cache_fd(), &[self], |c| c.nr_dirty + c.nr_writeback) > 0
    }

    /// The hull of the pages the library dirtied and has not seen clean.
    pub(super) fn own_hull(&self) -> Option<Range<u64>> {
        let p = lock(&self.pages);
        let hulls = [p.dirty.hull(), p.in_flight.hull()].into_iter().flatten();
        hulls.chain(p.writer_started.iter().cloned()).reduce(cover)
    }

    /// Those pages themselves, where they are at most `most` ranges.
    pub(super) fn own_ranges(&self, most: usize) -> Option<RangeSet> {
        let p = lock(&self.pages);
        if p.dirty.ranges() + p.in_flight.ranges() + p.writer_started.len() > most {
            return None;
        }
        let mut own = p.dirty.clone();
        for r in p.in_flight.iter().chain(p.writer_started.iter().cloned()) {
            own.insert(r);
        }
        Some(own)
    }

    /// See `unseen`. Returns whether it was not set before.
    pub fn set_unseen(&self) -> bool {
        !self.unseen.swap(true, AcqRel)
    }

    pub fn is_unseen(&self) -> bool {
        self.unseen.load(Acquire)
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Another open of the file has unseen I/O too: a small file open
    /// more than once at a time is one the program works in (a database
    /// and its write-ahead log, one connection writing and others opened
    /// for a query each, which read back from the disk what the writer's
    /// syncs dropped), kept cached while open as a `working` one.
    pub fn shares_the_file(&self) {
        let mut p = lock(&self.pages);
        if p.touched.is_none() || p.small() {
            p.working = true;
        }
    }

    /// The flusher's sweep of the opens of one file (`opens`, every one of
    /// them on the sweep list: the library counts a file's dirty pages per
    /// open, and the file's pages are all of its opens'). Where the file
    /// has dirty pages its writable opens did not count together
    /// (`uncounted_pages`), each
    /// of those opens becomes a piece of the whole file to write back, wait
    /// for and drop; returns them. Swept one by one, an open took the
    /// pages another open wrote for writes it does not see: SQLite with two
    /// connections to a database in WAL mode (two opens of its log) read
    /// the log back from the disk after every checkpoint in 3 of 12 runs,
    /// 14-16 MB against 0.3.
    ///
    /// An open only for reading has its pages dropped up to the file
    /// position instead: readers the library does not see (stdio's `fread`)
    /// read from where the position is, and the position is shared with
    /// the library's duplicate.
    pub fn sweep_opens(opens: &[Arc<FileState>]) -> Vec<&Arc<FileState>> {
        for reader in opens.iter().filter(|f| !f.writable) {
            reader.sweep_reader();
        }
        let writers: Vec<&Arc<FileState>> = opens.iter().filter(|f| f.writable).collect();
        let Some(first) = writers.first() else { return Vec::new() };
        // Inconclusive where a write of the library's was under way at any
        // point of the count (`WriteUnderWay`): the next sweep looks again.
        let begun: Vec<u64> = writers.iter().map(|f| f.writes_begun.load(SeqCst)).collect();
        let began_since = || writers.iter().zip(&begun).any(|(f, &b)| f.writes_begun.load(SeqCst) != b);
        if writers.iter().zip(&begun).any(|(f, &b)| f.writes_done.load(SeqCst) != b) {
            return Vec::new();
        }
        let opens: Vec<&FileState> = writers.iter().map(|f| f.as_ref()).collect();
        let unseen = uncounted_pages(first.cache_fd(), &opens, |c| c.nr_dirty);
        if unseen == 0 || began_since() {
            return Vec::new();
        }
        for f in &writers {
            f.unseen_dirty_pages.fetch_max(unseen, AcqRel);
            let mut p = lock(&f.pages);
            p.touched = Some(0..END_OF_FILE);
            p.writer_started.push(0..END_OF_FILE);
        }
        writers
    }

    /// `sweep_opens` of an open only for reading.
    fn sweep_reader(&self) {
        let Ok(pos) = dc_sys::lseek(self.fd(), 0, libc::SEEK_CUR) else { return };
        let mut p = lock(&self.pages);
        let upto = pos / page_size();
        if upto > p.swept_to {
            let r = p.swept_to..upto;
            p.swept_to = upto;
            p.touch(&r);
            if !p.keeps_all() {
                self.drop_locked(&mut p, vec![r]);
            }
        }
    }

    /// After a read of `pages`: what reads brought in is dropped in batches
    /// of `batch` pages read (half the handle's high-water mark: what a
    /// reader may hold of the cache, as a writer may hold a mark of dirty
    /// pages). One `fadvise` per read made 10 KiB
    /// reads three to five times slower (each drop of a page just read made
    /// the kernel drain every CPU's LRU batches) and cost a streaming reader
    /// a quarter of its time: the flusher drops the returned range on its
    /// own CPU (`drop_unchecked`), unchecked (close checks).
    ///
    /// Reads completed out of order (io_uring at depth) leave gaps where
    /// reads are still in flight: a sequential reader's batch is the
    /// contiguous run of read pages from the lowest, less its last
    /// `READ_DROP_LAG` pages (a large folio can straddle the run's end: the
    /// kernel drops only folios wholly inside a range). Dropping the hull
    /// of what completed dropped readahead that reads still in flight then
    /// had to read again: 1.2 GB/s against 2.3 with a run. Scattered reads
    /// (no run that long) drop the hull of what they read. Batches of 2 MiB
    /// instead of 32 read 1 MiB at depth 16 at 1.3-1.7 GB/s against 1.8-2.6
    /// (the kernel's RWF_DONTCACHE: 1.4-1.7).
    ///
    /// Scattered reads go in smaller batches (`SCATTERED_BATCH`): random
    /// 64 KiB reads at depth 16 of a 2 GiB file made 0.94x the kernel's
    /// RWF_DONTCACHE bandwidth with batches of 8,192 pages, 1.10x with 512
    /// (medians of 5 interleaved pairs; 4 KiB reads, 7 pairs, 0.93x and
    /// 0.94x). A few streams in one file (a few long pieces) are not
    /// scattered: their hull holds readahead still being read.
    ///
    /// Returns the batch to drop, if one is due.
    pub fn drop_behind(&self, pages: Range<u64>, batch: u64) -> Option<ReadBatch> {
        let batch = batch.max(2 * READ_DROP_LAG);
        let mut p = lock(&self.pages);
        p.touch(&pages);
        p.read_ahead = true;
        p.read_behind.insert(pages);
        let read = p.read_behind.pages();
        if read < batch.min(SCATTERED_BATCH) || !self.droppable {
            return None;
        }
        let first = p.read_behind.iter().next().expect("not empty");
        let drop = if read >= batch && first.end - first.start >= batch / 2 {
            first.start..first.end - READ_DROP_LAG
        } else {
            let hull = p.read_behind.hull().expect("not empty");
            let scattered = p.read_behind.ranges() >= SCATTERED_RANGES && hull.end - hull.start > 4 * read;
            if scattered {
                // Its next batch is most likely another hull around it.
                p.read_behind = RangeSet::new();
                return Some(ReadBatch { range: hull, read, scattered: !p.small() });
            }
            if read < batch {
                return None;
            }
            hull
        };
        let read = p.read_behind.remove(drop.clone()).iter().map(|r| r.end - r.start).sum();
        // The next batch covers the end of this one again: a folio that
        // straddles this range's end is dropped only by a range that holds
        // all of it (readahead makes folios of up to 2 MiB).
        let overlap = READ_DROP_OVERLAP.min(batch / 4);
        p.read_behind.insert(drop.end.saturating_sub(overlap).max(drop.start)..drop.end);
        Some(ReadBatch { range: drop, read, scattered: false })
    }

    /// From now on the kernel drops what reads of the file bring in
    /// (`reads_by_kernel`). The file counts as touched whole, once: close
    /// still drops what the kernel left (a folio it could not lock,
    /// readahead past a read) wherever the reads go, and no read takes the
    /// file's lock for it. A scattered reader's hull spans most of the file
    /// already.
    pub fn hand_reads_to_kernel(&self) {
        let mut p = lock(&self.pages);
        p.touch(&(0..END_OF_FILE));
        p.read_ahead = true;
        self.reads_by_kernel.store(true, Relaxed);
    }

    /// Drops the library's pages in `range`, unchecked (close checks).
    /// Nothing of a file kept whole (`Pages::keeps_all`).
    pub fn drop_unchecked(&self, range: Range<u64>) {
        let mut p = lock(&self.pages);
        if p.keeps_all() {
            return;
        }
        p.note_dropped(range.clone());
        for r in p.droppable(range) {
            let (off, len) = bytes(&r);
            let _ = dc_sys::fadvise(self.cache_fd(), off, len, Advice::DontNeed);
        }
    }

    /// Whether `lazy` may start writeback now: not while writeback of the
    /// file is in flight, as the kernel's lazy variant asks of the whole
    /// file (its mapping's writeback tag). The library's own writeback, a
    /// batch's or a writer's, counts until the flusher has waited for it,
    /// known without a system call; what the kernel started for a lazy
    /// write as RWF_DONTCACHE, which the library does not track, is asked
    /// of the range last started (one small `cachestat`, not a scan of the
    /// file). Asking only that range, 32 writers of 64 KiB through io_uring
    /// started writeback beside batches of the same file still in flight:
    /// 100,000 `sync_file_range` calls (the writers' starts and the
    /// flusher's waits) and 200,000 `cachestat` in 170,000 writes; asking
    /// the whole file, 17,000-22,000 of each, and 3,069-3,269 MB/s against
    /// 2,648-2,783 under the 1 GiB balloon of dcbench's quick profile
    /// (docs/benchmarks.md).
    pub fn writeback_idle(&self) -> bool {
        let last = {
            let p = lock(&self.pages);
            if !p.in_flight.is_empty() || !p.writer_started.is_empty() {
                return false;
            }
            p.last_started.clone()
        };
        let Some(last) = last else { return true };
        let ps = page_size();
        dc_sys::cachestat(self.cache_fd(), last.start * ps, (last.end - last.start) * ps)
            .map_or(true, |c| c.nr_writeback == 0)
    }

    /// A writer started writeback of `pages` itself (`inline`, `lazy`): they
    /// are no longer dirty; the flusher waits for them and drops them.
    pub fn writer_started(&self, device: &Device, pages: Range<u64>) {
        let merged = {
            let mut p = lock(&self.pages);
            let removed = p.dirty.remove(pages.clone());
            let merged = Self::start_locked(&mut p, device, &removed);
            p.writer_started.push(pages.clone());
            p.last_started = Some(pages);
            merged
        };
        self.count_clean(device, merged);
    }

    /// Puts `ranges`, just taken out of `dirty`, in flight. Returns the
    /// pages that were in flight already (rewritten while under writeback):
    /// counted dirty twice, so clean once now.
    pub(super) fn start_locked(p: &mut Pages, device: &Device, ranges: &[Range<u64>]) -> u64 {
        let mut merged = 0;
        for r in ranges {
            let added = p.in_flight.insert(r.clone());
            device.count_started(added);
            merged += r.end - r.start - added;
        }
        merged
    }

    pub(super) fn count_clean(&self, device: &Device, pages: u64) {
        if pages > 0 {
            self.dirty_pages.fetch_sub(pages, AcqRel);
            device.count_cleaned(pages);
        }
    }
}
