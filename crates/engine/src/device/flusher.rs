//! The flusher thread of a device: its loop (`flusher_main`), the batches
//! it starts, the pieces it queues and waits for, and the drops after
//! them. What writers and callers share with it (counts, kick flag, list of
//! dirty files, waits) is the device's, in the parent module.
//!
//! Unlike the kernel, userspace cannot mark a page to be dropped when its
//! writeback ends, so the flusher also waits for each batch, in pieces, and
//! drops it. It starts the next batch before the last one is waited for:
//! serialising start, wait and drop left the disk without queued work at
//! the end of every batch. The waits themselves run on io-wq (io_uring
//! `SYNC_FILE_RANGE` entries the flusher reaps), not on the flusher: a wait
//! blocks until the disk has the whole piece, and a flusher blocked in one
//! could not start the batch the writers kicked meanwhile.
//!
//! A batch costs a few calls per file, not per dirty range: writeback starts
//! on a hull of each file's taken pages (the kernel writes only the dirty
//! ones inside), and is waited for and dropped in pieces of up to 8 MiB of
//! pages. 4 KiB random writes to a 2 GiB file made one `sync_file_range`,
//! one wait, one drop and one check per page before, and the flusher, busy
//! with range-set scans, ran at 16-18k writes/s against the kernel's 30k.

use std::collections::VecDeque;
use std::ops::Range;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering::*;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

use super::rings::{submit_uring, WaitRing, FLUSH_RING, WAIT_RING};
use super::{lock, Device, DROP_LAG_PAGES, DROP_LAG_TIME};
use crate::file::{page_size, retry_eintr, FileState};
use crate::own::OwnFd;
use crate::policy::{Policy, Submit};
use crate::stats::Counters;
use crate::wakeup::Wakeup;

/// The flusher waits for a batch in pieces of this many bytes' pages, so a
/// kick that comes while a large batch is on the disk starts the next one
/// early.
const CHUNK_BYTES: u64 = 8 << 20;

/// With writeback in flight, the next batch waits until an eighth of the
/// in-flight cap is free. Batches of whatever room a completed piece made
/// halved 32 writers' throughput (CPU and small I/Os); waiting for the whole
/// cap made every writer stall ~80 ms at once. Measured with 32 writers,
/// p99.9 against the kernel's: 1/2 of the cap 1.28x, 1/4 1.05x, 1/8 0.8x,
/// throughput alike. Room comes back a waited group (about `CHUNK_BYTES`)
/// at a time, and behind a group whose writeback ends late (ext4
/// converting a burst's new extents, 2.4-3.4 ms): one stream at depth 16
/// (its mark less its queue, 48 MiB; the cap 144 MiB) waited out each
/// conversion with 35 MiB of room where a quarter asked for 36, the disk
/// empty. An eighth against a quarter, 8 interleaved pairs: one stream
/// 1.02x, 32 writers 1.04x with p99.9 25 ms against 35; against the
/// kernel's RWF_DONTCACHE (5 interleaved), one stream went from 0.968x to
/// 1.017x, four writers from 0.993x to 1.004x.
const MIN_BATCH_DIVISOR: u64 = 8;

/// A kick that finds less than this much dirty and not yet started (or an
/// eighth of the in-flight cap, if that is less) is held for up to
/// `GATHER_TIME` while more gathers; a caller that waits, or a writer at
/// the high-water mark, ends the wait. Taking whatever one small file
/// left made one batch, one `sync_file_range` and one flusher wake-up per
/// file while tar unpacked a tree: the disk saw unmerged writes, and the
/// writer paid a futex wake per file.
const GATHER_BYTES: u64 = 1 << 20;
const GATHER_TIME: Duration = Duration::from_millis(5);

/// The same for a batch that can go as one `syncfs` (`Submit::Syncfs`, two
/// closed files pending or more): each `syncfs` commits ext4's journal and
/// flushes the disk's cache, so such a batch gathers more first. `tar -xf` of a
/// 50,000-file tree into a journaled ext4 made 922 `syncfs` calls gathering
/// 1 MiB; 16 MiB and 50 ms made about 20 times fewer writes than a
/// `sync_file_range` per file (2,536-2,852 against 50,594-50,745), and
/// the tree programs ran faster than that way (medians of 3: tar -xf 20%,
/// cp -a 6%, rsync -a 2%).
const SYNCFS_GATHER_BYTES: u64 = 16 << 20;
const SYNCFS_GATHER_TIME: Duration = Duration::from_millis(50);

/// How long batches and waits hold back for a `syncfs` under way before
/// they look at what else it waits for. It writes back and waits for the
/// whole filesystem, and one asked in a lull of another program's bulk
/// writer (a `dd` of 2 GiB in a loop empties the cache of its dirty pages
/// at each round's truncation) waits for that writer's next round too: up
/// to 30 s under load here, during which no batch started, no closed file
/// was finished (a program that fills its descriptor table waits for
/// those) and writers at the high-water mark waited. So once it has run
/// this long while other programs have more than `SYNCFS_OTHERS_DIRTY`
/// dirty, the flusher goes on without it (`Device::syncfs_overdue`): its
/// pieces are waited for file by file, and batches go file by file until
/// it returns. Not on time alone: while the test suite ran, the library's
/// own batches made `syncfs` calls of up to 0.5 s, and a test's 20,000
/// small files, waited for file by file after 250 ms, reached the disk as
/// 2,900-4,700 writes where fewer than 2,500 were asked.
const SYNCFS_PATIENCE: Duration = Duration::from_millis(250);

/// How often the flusher looks for dirty pages in files that may be written
/// by paths the library does not see. Bounds what such a writer leaves in
/// the cache to what it writes in this long (~100 MB at 1 GB/s).
const SWEEP_INTERVAL: Duration = Duration::from_millis(100);

/// With `Submit::Syncfs`, a batch of closed files is written back by one
/// `syncfs` only while the rest of the system has at most this much dirty
/// or under writeback (the filesystem's own metadata, other programs' few
/// pages): `syncfs` would write back and wait for all of it.
const SYNCFS_OTHERS_DIRTY: u64 = 16 << 20;

/// Drop retries: the kernel may hold a just-written folio for a few
/// milliseconds (ext4 finishing the I/O), so retry every 10 ms for ~1 s.
const DROP_RETRIES: u32 = 100;

/// While a caller waits for the flusher (`flush`, a process's exit), the
/// retries stop sooner once this many in a row dropped nothing more: a
/// range ending inside a large folio whose other pages are not the
/// library's (cached before it) never drops, and `sort`'s spill files
/// made every `dontcache run -- sort` wait out the whole second in 2 of
/// 7 runs (0.7 s programs taking 1.6 s).
const DROP_RETRIES_STALLED_WHILE_WAITED: u32 = 20;
const DROP_RETRY_INTERVAL: Duration = Duration::from_millis(10);

/// Writeback started and queued for the flusher to wait for and drop.
struct Piece {
    file: Arc<FileState>,
    /// A hull: every in-flight page of the file inside it is waited for.
    hull: Range<u64>,
    /// The pages started in it, for the room left in flight.
    pages: u64,
    /// The number of the `syncfs` that writes it back (0: none): its wait
    /// must not start before that returns, or the wait's own write would
    /// send the file to the disk alone.
    after_syncfs: u64,
    /// When it was queued (see `SETTLE_LAG`).
    queued: Instant,
    /// A `cachestat` found nothing of it cached, and it covers all that
    /// its closed file's drop would (see `FileState::writeback_settled`):
    /// the kernel dropped its pages, and there is nothing to drop.
    nothing_cached: bool,
}

impl Piece {
    fn new(file: Arc<FileState>, hull: Range<u64>, pages: u64, after_syncfs: u64) -> Piece {
        Piece { file, hull, pages, after_syncfs, queued: Instant::now(), nothing_cached: false }
    }

    /// A closed file's piece that no `syncfs` writes back: its writeback
    /// was started by its writer (`lazy`, `inline`) or by a batch, and
    /// nobody will write more of it.
    fn of_closed_file(&self) -> bool {
        self.after_syncfs == 0 && self.file.is_closed() && !self.file.through_overlay()
    }
}

/// The flusher's pieces, oldest first, and the pages started in them.
#[derive(Default)]
struct Queue {
    pieces: VecDeque<Piece>,
    pages: u64,
}

impl Queue {
    fn push(&mut self, p: Piece) {
        p.file.pieces_queued.fetch_add(1, AcqRel);
        self.pages += p.pages;
        self.pieces.push_back(p);
    }

    /// How long the oldest piece is still left to settle (`SETTLE_LAG`),
    /// unless someone waits for the flusher.
    fn settling(&self, waited: bool) -> Option<Duration> {
        let front = self.pieces.front().filter(|p| !waited && p.of_closed_file())?;
        SETTLE_LAG.checked_sub(front.queued.elapsed())
    }

    /// The oldest pieces, up to `COMPLETE_PIECES` of them or `chunk` pages,
    /// none behind a `syncfs` later than `syncfs_done` unless that one is
    /// `overdue`: such a piece is then waited for as one no `syncfs` writes
    /// back (its wait writes it), but a piece of a file reached only
    /// through an overlay's own file, whose wait can report nothing.
    fn pop_group(&mut self, chunk: u64, syncfs_done: u64, overdue: bool) -> Vec<Piece> {
        let mut group = Vec::new();
        let mut pages = 0;
        while group.len() < COMPLETE_PIECES && (pages < chunk || group.is_empty()) {
            if let Some(p) = self.pieces.front_mut().filter(|p| p.after_syncfs > syncfs_done) {
                if !overdue || p.file.through_overlay() {
                    break;
                }
                p.after_syncfs = 0;
            }
            let Some(p) = self.pieces.pop_front() else { break };
            self.pages -= p.pages;
            pages += p.pages;
            group.push(p);
        }
        group
    }
}

/// Pieces waited for together, at most.
pub(super) const COMPLETE_PIECES: usize = 64;

/// A closed file's piece is left queued this long before its wait (unless
/// someone waits for the flusher): the writeback its writer started
/// (`lazy`'s RWF_DONTCACHE, `inline`) or a batch started is then mostly
/// on the disk, and where a `cachestat` shows nothing of it dirty or under
/// writeback the wait is made on the flusher, where it returns at once.
/// Through io-wq each such wait cost a worker's wake-up and a completion:
/// 4 writers of 4 KiB files made 1.23-1.32x as many files a second
/// without under the flusher's `loop` submission (median 1.26x, 5
/// interleaved pairs; context switches 78,000-123,000 against
/// 133,000-151,000), and 0.92-1.10x under `lazy` (median 1.02x, 9 pairs).
const SETTLE_LAG: Duration = Duration::from_millis(3);

/// Failed `syncfs` calls remembered (see `Device::syncfs_outcome`): more
/// than the batches whose pieces can be waiting at once.
const SYNCFS_FAILURES_KEPT: usize = 64;

/// While io-wq waits for a group of pieces on a ring that cannot signal
/// the flusher's eventfd, the flusher looks for the waits' completions
/// this often (a kick wakes it sooner).
const AWAIT_POLL: Duration = Duration::from_millis(1);

/// A group of pieces whose writeback io-wq workers wait for, off the
/// flusher's thread: a wait blocks until the disk has the whole piece, and
/// the flusher must meanwhile start the next batch when writers kick.
struct Awaited {
    group: Vec<Piece>,
    /// Each piece's wait: `None` until its completion is reaped.
    results: Vec<Option<Result<(), i32>>>,
    left: usize,
}

impl Awaited {
    /// Queues one `WAIT_FOR_WRITEBACK` sync per piece (user data: its
    /// index) and submits them; gives the group back if the ring cannot
    /// take them (the caller then stops using the ring).
    fn start(ring: &mut IoUring, group: Vec<Piece>) -> Result<Awaited, Vec<Piece>> {
        let room = {
            let sq = ring.submission();
            sq.capacity() - sq.len()
        };
        if room < group.len() {
            return Err(group);
        }
        for (i, p) in group.iter().enumerate() {
            let (off, len) = crate::file::bytes(&p.hull);
            let fd = std::os::fd::AsRawFd::as_raw_fd(&p.file.cache_fd());
            let entry = opcode::SyncFileRange::new(types::Fd(fd), len as u32)
                .offset(off)
                .flags(crate::file::WAIT_FOR_WRITEBACK)
                .build()
                .user_data(i as u64);
            // SAFETY: the SQE references no memory, and the piece keeps its
            // file's descriptor open until the wait is reaped.
            unsafe { ring.submission().push(&entry) }.expect("room checked above");
        }
        if ring.submit().is_err() {
            return Err(group);
        }
        let n = group.len();
        Ok(Awaited { group, results: vec![None; n], left: n })
    }

    /// Hands the group's waits to io-wq through the flusher's wait ring;
    /// gives the group back to be waited for on the flusher when there is
    /// no ring, the ring fails (it is then given up), or a hull is longer
    /// than an SQE takes.
    fn on_wait_ring(group: Vec<Piece>, wakeup: &Wakeup) -> Result<Awaited, Vec<Piece>> {
        if !Awaited::can_take(&group) {
            return Err(group);
        }
        WaitRing::prepare(wakeup);
        WAIT_RING.with(|r| {
            let mut r = r.borrow_mut();
            let started = match r.ring() {
                Some(ring) => Awaited::start(ring, group),
                None => Err(group),
            };
            if started.is_err() {
                *r = WaitRing::Gone;
            }
            started
        })
    }

    /// Whether every piece's hull fits an SQE's 32-bit length (scattered
    /// pages of a large file can span more; those are waited for on the
    /// flusher, as before).
    fn can_take(group: &[Piece]) -> bool {
        group.iter().all(|p| crate::file::bytes(&p.hull).1 <= u64::from(u32::MAX))
    }

    /// Takes the waits that completed; true once all have.
    fn reap(&mut self, ring: &mut IoUring) -> bool {
        for cqe in ring.completion() {
            let slot = &mut self.results[cqe.user_data() as usize];
            if slot.is_none() {
                self.left -= 1;
            }
            *slot = Some(if cqe.result() < 0 { Err(-cqe.result()) } else { Ok(()) });
        }
        self.left == 0
    }
}

/// A piece written back, waiting to be dropped.
struct Written {
    piece: Piece,
    pages: u64,
    dirtied_then: u64,
    at: Instant,
}

impl Device {
    /// Whether a kick held since `since` should start its batch now; if
    /// not, how long it may still gather. See `GATHER_BYTES`.
    fn gathered(&self, cap: u64, since: Instant) -> Result<(), Duration> {
        // While a `syncfs` runs, files gather for the next one, urgent or
        // not: it writes back what was dirty on the filesystem when it
        // started, and writers at the closed-files cap otherwise made a
        // batch of each file finished, 1,500-3,600 batches of one file
        // (a write each) for 40,000 small files against 29-40 `syncfs`.
        // Unless it is overdue.
        if let Some(left) = self.syncfs_hold() {
            return Err(left);
        }
        if self.urgent.load(Acquire) || self.waiters.load(Acquire) > 0 {
            return Ok(());
        }
        // Only a batch that can go as one `syncfs` gathers longer: a stream
        // that gathered 16 MiB left more than two marks cached under `lazy`.
        let syncfs_batch = self.submit == Submit::Syncfs && self.closed_pending.load(Acquire) >= 2;
        let (bytes, time) =
            if syncfs_batch { (SYNCFS_GATHER_BYTES, SYNCFS_GATHER_TIME) } else { (GATHER_BYTES, GATHER_TIME) };
        let enough = (bytes / page_size()).min(cap / MIN_BATCH_DIVISOR).max(1);
        let left = time.saturating_sub(since.elapsed());
        if self.dirty_not_started() >= enough || left.is_zero() {
            Ok(())
        } else {
            Err(left)
        }
    }

    /// While a `syncfs` asked has not returned and is not overdue: when to
    /// look at it again.
    fn syncfs_hold(&self) -> Option<Duration> {
        if !self.syncfs_out() {
            return None;
        }
        let left = SYNCFS_PATIENCE.saturating_sub(lock(&self.syncfs_asked_at).elapsed());
        if !left.is_zero() {
            return Some(left);
        }
        (self.others_dirty() != Some(true)).then_some(SYNCFS_GATHER_TIME)
    }

    /// Whether the last `syncfs` asked, not returned, has run
    /// `SYNCFS_PATIENCE` while other programs have more than
    /// `SYNCFS_OTHERS_DIRTY` dirty, which it waits for too.
    fn syncfs_overdue(&self) -> bool {
        self.syncfs_out() && self.syncfs_hold().is_none()
    }

    /// Whether the rest of the system has more than `SYNCFS_OTHERS_DIRTY`
    /// dirty or under writeback besides the library's pages here; `None`
    /// where /proc/meminfo cannot be read.
    fn others_dirty(&self) -> Option<bool> {
        let ours = self.dirty_pages() * page_size();
        system_dirty_bytes().map(|all| all > ours + SYNCFS_OTHERS_DIRTY)
    }

    /// Whether a `syncfs` asked has not returned.
    fn syncfs_out(&self) -> bool {
        self.syncfs_asked.load(Acquire) > self.syncfs_done.load(Acquire)
    }

    /// Starts one batch: takes up to `budget` pages from the oldest dirty
    /// files (range-cyclic within each), starts their writeback together,
    /// and queues it, with any writeback writers started themselves, for
    /// `complete`. Does not wait for the disk: the previous batch may still
    /// be on it, which keeps the device queue full between batches. Returns
    /// the pages taken against the budget.
    fn start_batch(self: &Arc<Device>, budget: u64, urgent: bool, queue: &mut Queue) -> u64 {
        let chunk = (CHUNK_BYTES / page_size()).max(1);
        let files: Vec<Arc<FileState>> = lock(&self.dirty_files).iter().cloned().collect();
        let queued = queue.pieces.len();
        let mut left = budget;
        let mut starts: Vec<(Arc<FileState>, Range<u64>)> = Vec::new();
        let background = self.over_background_mark();
        for f in &files {
            f.retry_drops();
            let want = self.file_budget(f, urgent, background, left);
            let taken = f.take(self, want, chunk, !urgent && !f.is_closed());
            left = left.saturating_sub(taken.pages);
            // A kicked per-file file the budget did not cover stays kicked
            // for the follow-up batch.
            if f.policy == Policy::PerFile && f.has_dirty() && want > 0 {
                f.kicked.store(true, Release);
            }
            if taken.pages > 0 {
                Counters::add(&f.counters.passes, 1);
            }
            if taken.pages > 0 || !taken.pieces.is_empty() {
                crate::handoff::escrow(f);
            }
            starts.extend(taken.starts.into_iter().map(|r| (f.clone(), r)));
            for (hull, pages) in taken.pieces {
                queue.push(Piece::new(f.clone(), hull, pages, 0));
            }
        }
        // The taken pages no longer count against the high-water mark:
        // release stalled writers before the submission takes its CPU time.
        // A batch that took nothing releases no one: the writers it woke
        // would only kick again at once.
        if left < budget || queue.pieces.len() > queued {
            *lock(&self.batches_started) += 1;
            self.notify_waiters(&self.batch_started);
        }
        // Writeback that writers started themselves (`lazy`, `inline`) was
        // not started on a file reached only through an overlay's file:
        // a `syncfs` does it, also for a batch whose starts went otherwise
        // or that had nothing else to start.
        let through_overlay =
            queue.pieces.iter().skip(queued).find(|p| p.file.through_overlay()).map(|p| p.file.clone());
        let started = (!starts.is_empty()).then(|| {
            Counters::add(&self.counters.passes, 1);
            self.start_writeback(&starts)
        });
        let syncfs = started.flatten().or_else(|| through_overlay.and_then(|f| self.ask_syncfs(&f)));
        if let Some(syncfs) = syncfs {
            for p in queue.pieces.iter_mut().skip(queued) {
                p.after_syncfs = syncfs;
            }
        }
        self.forget_idle_files();
        budget - left
    }

    /// How many of `f`'s dirty pages this batch may take. What `lazy`
    /// writers skipped (writeback of their file in flight) waits for their
    /// next starts until the batch is `background` (the library's pages not
    /// yet started past half the lowest mark), where the kernel's lazy
    /// variant leaves it to background writeback, which starts at half the
    /// dirty limit by default (10% and 20%). Left until the writers met the
    /// mark instead, one stream of 1 MiB writes made 0.93x the kernel's
    /// RWF_DONTCACHE, 0.98x so; 32 writers 1.00x and 1.07x (medians of 6
    /// interleaved rounds).
    pub(super) fn file_budget(&self, f: &FileState, urgent: bool, background: bool, left: u64) -> u64 {
        let kicked = f.kicked.swap(false, AcqRel);
        // A closed file has no writer left to start its writeback or kick.
        let eligible = urgent
            || f.is_closed()
            || match f.policy {
                Policy::PerFile => kicked,
                Policy::Lazy => background,
                Policy::Inline => false,
                Policy::Flusher | Policy::Kernel => true,
            };
        match (eligible, f.policy.writer_starts_writeback()) {
            (false, _) => 0,
            // Writers of these files start their own writeback: what is
            // left dirty goes whole, outside the budget.
            (true, true) => u64::MAX,
            (true, false) => left,
        }
    }

    /// Takes the files with nothing left for a batch off the dirty list,
    /// and finishes the closed ones with nothing in flight either.
    fn forget_idle_files(self: &Arc<Device>) {
        let mut idle = Vec::new();
        lock(&self.dirty_files).retain(|f| {
            // A file stays listed while pages of it are in flight: pieces
            // queued for them finish them, and pages nothing waits for are
            // found here (`in_flight_awaited`) rather than counted for good.
            if f.has_work() || f.in_flight_awaited() {
                return true;
            }
            f.queued.store(false, SeqCst);
            // A writer that saw the flag still set did not enlist: keep it.
            if f.has_work() {
                f.queued.store(true, SeqCst);
                return true;
            }
            idle.push(f.clone());
            false
        });
        for f in idle.iter().filter(|f| f.is_closed() && !f.unsettled()) {
            self.finish(f, true);
        }
    }

    /// Starts writeback of every hull of a batch, together. Returns the
    /// number of the `syncfs` that writes the batch back, if one does.
    fn start_writeback(self: &Arc<Device>, starts: &[(Arc<FileState>, Range<u64>)]) -> Option<u64> {
        if self.plugs_across_files(starts) {
            if let Some(syncfs) = self.ask_syncfs(&starts[0].0) {
                return Some(syncfs);
            }
        }
        if self.submit == Submit::Uring {
            if let Some(ring) = FLUSH_RING.with(|r| r.borrow_mut().take()) {
                let ring = submit_uring(ring, self, starts);
                FLUSH_RING.with(|r| *r.borrow_mut() = ring);
                return None;
            }
        }
        for (f, r) in starts {
            f.start_writeback(self, r);
        }
        None
    }

    /// Asks the syncfs thread for a `syncfs` of `file`'s filesystem and
    /// returns its number; `None` if that thread cannot start. The flusher
    /// does not wait for it: a `syncfs` (a journal commit, a cache flush)
    /// took up to 180 ms, a millisecond or two typically, and blocked it
    /// for half of a small-files run. Pieces behind it are waited for
    /// once it returns (`pop_group`); when it fails, their waits write
    /// them back one by one and report each file's error.
    ///
    /// The `syncfs` goes through an open file description of its own:
    /// `syncfs` reports a filesystem's writeback error once per open file,
    /// and on the library's duplicate (which shares the program's) it
    /// would take that report from the program's own later `syncfs`.
    /// Where the file cannot be reopened (no read permission, no /proc)
    /// the batch goes file by file instead.
    fn ask_syncfs(self: &Arc<Device>, file: &FileState) -> Option<u64> {
        let own = crate::own::made_high(|| dc_sys::reopen_read_only(file.cache_fd())).ok()?;
        let thread = self.syncfs_thread.get_or_init(|| {
            let (tx, rx) = mpsc::channel::<(OwnFd, u64)>();
            let dev = Arc::downgrade(self);
            let spawned = crate::engine::spawn_thread(format!("dc-syncfs-{:x}", self.dev), move || {
                for (own, number) in rx {
                    // Its error is the filesystem's, not a file's: each
                    // piece's own wait reports what failed in it, but for
                    // files whose waits cannot (`syncfs_outcome`).
                    let synced = retry_eintr(|| dc_sys::syncfs(own.as_fd()));
                    drop(own);
                    let Some(d) = dev.upgrade() else { return };
                    if let Err(e) = synced {
                        let mut failed = lock(&d.syncfs_failed);
                        if failed.len() == SYNCFS_FAILURES_KEPT {
                            failed.pop_front();
                        }
                        failed.push_back((number, e.raw_os_error().unwrap_or(libc::EIO)));
                    }
                    d.syncfs_done.store(number, Release);
                    d.wake_flusher();
                }
            });
            // Without the thread the channel has no receiver: every send fails.
            drop(spawned);
            tx
        });
        *lock(&self.syncfs_asked_at) = Instant::now();
        let number = self.syncfs_asked.fetch_add(1, AcqRel) + 1;
        if thread.send((own, number)).is_ok() {
            return Some(number);
        }
        self.syncfs_asked.fetch_sub(1, AcqRel);
        None
    }

    /// Whether `Submit::Syncfs` writes this batch back with one `syncfs`:
    /// two closed files or more (a stream alone gains nothing from a plug
    /// across files, and its pieces would wait for the whole filesystem's
    /// writeback), and next to nothing dirty on the system but the
    /// library's own pages here, since `syncfs` writes back and waits for
    /// every dirty page of the filesystem, other programs' too; and none
    /// while one is under way (overdue: batches start only then, and
    /// another would queue behind it).
    ///
    /// A file reached only through an overlay's own file always goes in a
    /// `syncfs`: nothing else writes it back or reports its errors (see
    /// `FileState::layer`).
    fn plugs_across_files(&self, starts: &[(Arc<FileState>, Range<u64>)]) -> bool {
        if starts.iter().any(|(f, _)| f.through_overlay()) {
            return true;
        }
        // A batch lists each file's hulls together: count each file once.
        let closed = starts
            .iter()
            .enumerate()
            .filter(|(i, (f, _))| f.is_closed() && (*i == 0 || !Arc::ptr_eq(f, &starts[i - 1].0)))
            .count();
        if self.submit != Submit::Syncfs || closed < 2 || self.syncfs_out() {
            return false;
        }
        self.others_dirty() == Some(false)
    }

    /// Waits for a group of queued pieces of writeback, reports their
    /// errors, and accounts the pages clean; they are dropped a little
    /// later (`drop_written`).
    fn complete(self: &Arc<Device>, group: Vec<Piece>, written: &mut VecDeque<Written>) {
        // An error is latched on the file; the pages are still accounted
        // clean so the high-water mark cannot wedge.
        for piece in group {
            let pages = match self.syncfs_outcome(&piece) {
                Some(result) => piece.file.waited(self, &piece.hull, result),
                None => piece.file.wait_writeback(self, &piece.hull),
            };
            written.push_back(Written { piece, pages, dirtied_then: self.dirtied_total(), at: Instant::now() });
        }
    }

    /// The same for a group io-wq waited for (a wait not reaped, which
    /// only a lost ring leaves, is done here).
    fn completed(self: &Arc<Device>, awaited: Awaited, written: &mut VecDeque<Written>) {
        for (piece, result) in awaited.group.into_iter().zip(awaited.results) {
            let pages = match self.syncfs_outcome(&piece).or(result) {
                Some(result) => piece.file.waited(self, &piece.hull, result),
                None => piece.file.wait_writeback(self, &piece.hull),
            };
            written.push_back(Written { piece, pages, dirtied_then: self.dirtied_total(), at: Instant::now() });
        }
    }

    /// For a piece of a file reached only through an overlay's own file,
    /// written back by a `syncfs`: that `syncfs`'s outcome, which its wait
    /// cannot give (through the overlay's file a wait reports nothing; a
    /// `syncfs` of the overlay reports the upper layer's errors). A failed
    /// `syncfs` is every such file's error in its batch: a file may be
    /// named that did not fail, none that did is left out.
    fn syncfs_outcome(&self, piece: &Piece) -> Option<Result<(), i32>> {
        if piece.after_syncfs == 0 || !piece.file.through_overlay() {
            return None;
        }
        let failed = lock(&self.syncfs_failed);
        Some(failed.iter().find(|(n, _)| *n == piece.after_syncfs).map_or(Ok(()), |(_, errno)| Err(*errno)))
    }

    /// Drops the written-back pieces that are old enough (all of them with
    /// `all`), and finishes the closed files whose last piece it was.
    /// Returns how long until the oldest left is old enough.
    fn drop_written(self: &Arc<Device>, written: &mut VecDeque<Written>, all: bool) -> Option<Duration> {
        let dirtied = self.dirtied_total();
        let mut dropped = false;
        let lagging = loop {
            let Some(w) = written.front() else { break None };
            let age = w.at.elapsed();
            // The lag is for the kernel's per-CPU batches, which keep pages
            // from a drop: a piece with nothing cached has none to drop.
            let lags = !all && !w.piece.nothing_cached;
            if lags && dirtied - w.dirtied_then < DROP_LAG_PAGES && age < DROP_LAG_TIME {
                break Some(DROP_LAG_TIME - age);
            }
            let Written { piece, pages, .. } = written.pop_front().expect("looked at above");
            dropped = true;
            let f = &piece.file;
            f.pieces_queued.fetch_sub(1, AcqRel);
            // A closed file's last piece: drop all it touched, once.
            let last = f.is_closed() && !f.unsettled();
            let left = match (last, piece.nothing_cached) {
                (true, true) => 0,
                (true, false) => f.drop_touched(),
                (false, _) => f.drop_range(piece.hull.clone()),
            };
            f.written_back(self, pages);
            if left > 0 {
                // The flusher's retries drop them (and finish a closed file).
                self.enlist(f);
            } else if last {
                self.finish(f, true);
            }
        };
        // Dropped pages count clean: writers stalled at the mark look at
        // the level again now, not at their next timeout or batch.
        if dropped {
            drop(lock(&self.batches_started));
            self.notify_waiters(&self.batch_started);
        }
        lagging
    }

    /// Pages the library ever dirtied here.
    fn dirtied_total(&self) -> u64 {
        self.dirtied.iter().map(|s| s.0.load(Relaxed)).sum()
    }

    /// Retries the drops the kernel deferred; finishes closed files whose
    /// drops went through. Returns the pages of the drops still deferred.
    fn retry_drops(self: &Arc<Device>) -> u64 {
        let files: Vec<Arc<FileState>> = lock(&self.dirty_files).iter().cloned().collect();
        let mut pending = 0;
        for f in &files {
            f.retry_drops();
            let left = f.drops_pending_pages();
            pending += left;
            if f.is_closed() && !f.unsettled() && left == 0 {
                self.finish(f, true);
            }
        }
        self.forget_idle_files();
        pending
    }

    /// Gives up on deferred drops (after about a second of retries): the
    /// pages stay cached, and closed files waiting on them are finished.
    fn give_up_drops(self: &Arc<Device>) {
        let files: Vec<Arc<FileState>> = lock(&self.dirty_files).iter().cloned().collect();
        for f in &files {
            f.forget_drops();
            if f.is_closed() && !f.unsettled() {
                self.finish(f, true);
            }
        }
        self.forget_idle_files();
    }
}

/// Dirty and under writeback in the whole system (/proc/meminfo), through
/// one descriptor kept open, high (opening the file each time took ten
/// system calls a batch, and the lowest free number for a moment).
fn system_dirty_bytes() -> Option<u64> {
    // Not a blocking once: see `closed_files_cap`. A flusher that loses the
    // race closes its own descriptor.
    static MEMINFO: once_cell::race::OnceBox<Option<OwnFd>> = once_cell::race::OnceBox::new();
    let fd = MEMINFO
        .get_or_init(|| Box::new(crate::own::made_high(|| Ok(std::fs::File::open("/proc/meminfo")?.into())).ok()));
    dc_sys::meminfo_bytes_at(fd.as_ref()?.as_fd(), &["Dirty", "Writeback"]).ok()
}

// One piece: each turn does the first thing that can be done, in priority
// order (start a batch, complete the oldest group, drop what was written back,
// retry refused drops, park), over state that lives on this thread only; that
// order is the design, and it reads as one loop.
pub(super) fn flusher_main(dev: std::sync::Weak<Device>) {
    crate::file::mark_flusher_thread();
    // Writeback started and not yet waited for, oldest first; and written
    // back, not yet dropped.
    let mut queue = Queue::default();
    let mut written: VecDeque<Written> = VecDeque::new();
    let mut retries = 0;
    // Retries in a row that dropped nothing more, and what was left.
    let (mut stalled, mut last_pending) = (0, 0);
    let mut swept_at = Instant::now();
    // Since when a kick has been held while a batch gathers.
    let mut gathering: Option<Instant> = None;
    let mut awaited: Option<Awaited> = None;
    // What the flusher has in hand, for `flush`'s guard (`flusher_holds`).
    let holds = |queue: &Queue, written: &VecDeque<Written>, awaited: &Option<Awaited>| {
        queue.pieces.len() + written.len() + usize::from(awaited.is_some())
    };
    loop {
        let Some(d) = dev.upgrade() else { return };
        // Before a group leaves the queue to be waited for here (which can
        // take seconds): it is in hand until the next turn.
        d.flusher_holds.store(holds(&queue, &written, &awaited), Release);
        d.drop_read();
        let clean_left = d.finish_closed_clean(d.waiters.load(Acquire) > 0);
        let synced_left = d.drop_synced();
        if swept_at.elapsed() >= SWEEP_INTERVAL {
            swept_at = Instant::now();
            d.sweep();
        }
        // A kick starts the next batch even while the last is on the disk,
        // which keeps the device queue full. At most three high-water marks
        // stay in flight (about what the kernel's own RWF_DONTCACHE keeps
        // with several writers), so the library's pages in the cache stay
        // under about four marks, and a batch takes only the room there is.
        // Clear the bit before reading the count: writes during the batch
        // set it again and get a follow-up.
        // Counted from the queue, not from the device's in-writeback count:
        // writeback an inline or lazy writer started is queued only by the
        // next batch, which must not wait for room it takes up itself.
        let cap = d.in_flight_cap();
        let room = cap.saturating_sub(queue.pages);
        let mut gather_left = None;
        let mut settle_left = None;
        let mut syncfs_left = None;
        let ready = room >= (cap / MIN_BATCH_DIVISOR).max(1)
            && d.kick.load(Acquire)
            && match d.gathered(cap, *gathering.get_or_insert_with(Instant::now)) {
                Ok(()) => true,
                Err(left) => {
                    gather_left = Some(left);
                    false
                }
            };
        // A batch of dirty pages gathers, and the waits for its writeback
        // will follow: the wait ring is made now, while the program runs,
        // not on the way to the first wait (a short-lived writer waiting
        // at exit for its one file waited for the ring's setup too). Not
        // where files unfinished at exit are handed over: there a
        // short-lived writer does not wait, and would make and tear down a
        // ring for nothing.
        if gather_left.is_some() && d.dirty_not_started() > 0 && !crate::handoff::enabled() {
            WaitRing::prepare(&d.wakeup);
        }
        if ready && d.kick.swap(false, AcqRel) {
            gathering = None;
            let urgent = d.urgent.swap(false, AcqRel);
            let counted = d.dirty_not_started();
            let queued = queue.pieces.len();
            let taken = d.start_batch(counted.min(room), urgent, &mut queue);
            // The room cut this batch short: the rest was counted, and its
            // kick consumed, so come back for it once there is room again
            // (no later write may kick).
            if counted > room && taken >= room {
                d.kick.store(true, Release);
            }
            // New pieces bring new drops to retry. A kick that found
            // nothing (a waiter kicks every few milliseconds) must not put
            // off giving up on drops the kernel keeps refusing.
            if queue.pieces.len() > queued {
                (retries, stalled, last_pending) = (DROP_RETRIES, 0, 0);
                continue;
            }
            // A batch that found nothing goes on to what is in flight:
            // stalled writers kick every few milliseconds, and going back
            // to the kick each time kept the flusher from completing and
            // dropping the pages they waited for (32 lazy writers stood
            // still for up to 10 s, the flusher in futex wake-ups).
            if taken > 0 {
                continue;
            }
        }
        // The oldest group's writeback is waited for by io-wq (or, without
        // a ring, here); one group at a time, as the disk finishes in order.
        if let Some(a) = awaited.as_mut() {
            if WAIT_RING.with(|r| r.borrow_mut().ring().is_none_or(|ring| a.reap(ring))) {
                d.completed(awaited.take().expect("looked at above"), &mut written);
                d.end_wait();
                d.drop_written(&mut written, false);
                continue;
            }
        } else if let Some(left) = queue.settling(d.waiters.load(Acquire) > 0) {
            settle_left = Some(left);
        } else if d.begin_wait() {
            let syncfs_done = d.syncfs_done.load(Acquire);
            let overdue = d.syncfs_overdue();
            let mut group = queue.pop_group((CHUNK_BYTES / page_size()).max(1), syncfs_done, overdue);
            if group.is_empty() {
                d.end_wait();
                syncfs_left = d.syncfs_hold();
            } else {
                // Closed files a `syncfs` that returned wrote back, and
                // those whose writeback a `cachestat` finds over, have
                // nothing left to wait for: their waits return at once
                // here, without a trip through io-wq each.
                let synced = |p: &Piece| p.after_syncfs > 0 && (p.file.is_closed() || p.file.through_overlay());
                let settled = |p: &mut Piece| {
                    let Some(nothing_cached) = p.of_closed_file().then(|| p.file.writeback_settled(&p.hull)).flatten()
                    else {
                        return false;
                    };
                    p.nothing_cached = nothing_cached;
                    true
                };
                let on_ring = if group.iter_mut().all(|p| synced(p) || settled(p)) {
                    Err(group)
                } else {
                    Awaited::on_wait_ring(group, &d.wakeup)
                };
                match on_ring {
                    Ok(a) => awaited = Some(a),
                    Err(group) => {
                        d.complete(group, &mut written);
                        d.end_wait();
                        d.drop_written(&mut written, false);
                    }
                }
                continue;
            }
        }
        // Nothing more to wait for: someone waiting (flush, close-and-wait)
        // gets the last drops now; otherwise they wait for their lag.
        let waited = d.waiters.load(Acquire) > 0;
        d.flusher_holds.store(holds(&queue, &written, &awaited), Release);
        let wakeup = d.wakeup.clone();
        let sleep = |wait: Option<Duration>, ready: &dyn Fn() -> bool| {
            wakeup.sleep(
                wait.into_iter()
                    .chain(gather_left)
                    .chain(clean_left)
                    .chain(synced_left)
                    .chain(settle_left)
                    .chain(syncfs_left)
                    .min(),
                ready,
            );
        };
        let park = |wait: Option<Duration>| sleep(wait, &|| false);
        if awaited.is_some() {
            // The waits' completions wake the flusher where the ring
            // signals its eventfd; it looks for them every AWAIT_POLL where
            // it cannot.
            let wait = d.drop_written(&mut written, waited);
            let wait = if WAIT_RING.with(|r| r.borrow().signals()) {
                wait
            } else {
                Some(wait.map_or(AWAIT_POLL, |w| w.min(AWAIT_POLL)))
            };
            drop(d);
            sleep(wait, &|| WAIT_RING.with(|r| r.borrow_mut().has_completions()));
            continue;
        }
        if let Some(wait) = d.drop_written(&mut written, waited) {
            drop(d);
            park(Some(wait));
            continue;
        }
        let pending = d.retry_drops();
        if pending > 0 {
            // Deferred drops with no batch behind them (a reader's last
            // drop, its readahead still on the disk) get retries of their
            // own: none were left, and a reader stopped 16 MiB into a file
            // left the 8 MiB read ahead cached.
            if last_pending == 0 && retries == 0 {
                retries = DROP_RETRIES;
            }
            stalled = if pending < last_pending { 0 } else { stalled + 1 };
            last_pending = pending;
            let waited_out = waited && stalled >= DROP_RETRIES_STALLED_WHILE_WAITED;
            if retries > 0 && !waited_out {
                retries -= 1;
                drop(d);
                park(Some(DROP_RETRY_INTERVAL));
                continue;
            }
            d.give_up_drops();
        }
        (stalled, last_pending) = (0, 0);
        let sweeping = d.arm_sweep();
        drop(d);
        park(sweeping.then_some(SWEEP_INTERVAL));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::tests::file_state;

    #[test]
    fn pieces_behind_a_syncfs_are_not_waited_for_before_it_returns() {
        let d = Device::new(0, Submit::Syncfs, true, None);
        let f = file_state(&d, Policy::Flusher);
        let mut q = Queue::default();
        for (page, after_syncfs) in [(0, 0), (1, 1), (2, 1), (3, 2)] {
            q.push(Piece::new(f.clone(), page..page + 1, 1, after_syncfs));
        }
        assert_eq!(q.pop_group(100, 0, false).len(), 1, "the piece started without a syncfs");
        assert!(q.pop_group(100, 0, false).is_empty(), "nothing before the first syncfs returned");
        assert_eq!(q.pop_group(100, 1, false).len(), 2, "the first syncfs's pieces, not the second's");
        assert!(q.pop_group(100, 1, false).is_empty());
        assert_eq!(q.pop_group(100, 2, false).len(), 1);
        assert_eq!(q.pages, 0);
    }

    /// A `syncfs` overdue (it met another program's bulk writer): the
    /// pieces behind it are waited for without it, as pieces no `syncfs`
    /// writes back, but those of a file reached through an overlay.
    #[test]
    fn pieces_behind_an_overdue_syncfs_are_waited_for_without_it() {
        let d = Device::new(0, Submit::Syncfs, true, None);
        let f = file_state(&d, Policy::Flusher);
        f.mark_closed();
        let mut q = Queue::default();
        q.push(Piece::new(f.clone(), 0..1, 1, 1));
        q.push(Piece::new(f.clone(), 1..2, 1, 1));
        assert!(q.pop_group(100, 0, false).is_empty(), "held while it is not overdue");
        let group = q.pop_group(100, 0, true);
        assert_eq!(group.len(), 2);
        assert!(group.iter().all(Piece::of_closed_file), "waited for as pieces no syncfs writes back");
    }

    /// Batches wait for a `syncfs` under way until it has run its patience
    /// while other programs dirty more than the allowance (a file written
    /// here and left dirty stands for them); meanwhile none goes as
    /// another `syncfs`.
    #[test]
    fn batches_wait_for_a_syncfs_under_way_until_it_is_overdue() {
        let d = Device::new(0, Submit::Syncfs, true, None);
        let long_ago = Instant::now() - GATHER_TIME;
        assert!(d.gathered(1, long_ago).is_ok(), "nothing out: gathered long enough");
        d.syncfs_asked.store(1, SeqCst);
        *lock(&d.syncfs_asked_at) = Instant::now();
        assert!(d.gathered(1, long_ago).is_err(), "held behind a young syncfs");
        let closed: Vec<_> = (0..2)
            .map(|_| {
                let f = file_state(&d, Policy::Flusher);
                f.mark_closed();
                (f, 0..1)
            })
            .collect();
        assert!(!d.plugs_across_files(&closed), "a second syncfs would queue behind the first");
        let path = std::env::temp_dir().join(format!("dc-syncfs-neighbour-{}", std::process::id()));
        let neighbour = std::fs::File::create(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let dirty = 4 * SYNCFS_OTHERS_DIRTY;
        std::io::Write::write_all(&mut &neighbour, &vec![7u8; dirty as usize]).unwrap();
        assert!(system_dirty_bytes().is_some_and(|all| all >= dirty / 2), "the neighbour's pages stay dirty");
        // Asked again now: writing the neighbour can take longer than the patience on a loaded machine.
        *lock(&d.syncfs_asked_at) = Instant::now();
        assert!(d.gathered(1, long_ago).is_err(), "still young, a neighbour dirty or not");
        *lock(&d.syncfs_asked_at) = Instant::now() - SYNCFS_PATIENCE;
        assert!(d.syncfs_overdue());
        assert!(d.gathered(1, long_ago).is_ok(), "overdue: batches go on without it");
        d.syncfs_done.store(1, SeqCst);
        assert!(!d.syncfs_overdue() && d.gathered(1, long_ago).is_ok());
    }
}
