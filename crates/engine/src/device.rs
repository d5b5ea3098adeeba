//! One writeback domain (a device, by st_dev): the sharded dirty count, the
//! kick flag, the list of dirty files, and the flusher thread that serves it.
//!
//! The kick protocol is the flusher-kick design's: a writer adds its pages
//! to its shard, then tests the flag and only if it is clear test-and-sets
//! it; only the writer that set it wakes the flusher, so any number of
//! concurrent kicks cost one wakeup and no allocation. The flusher clears
//! the flag *before* it reads the count, so a write that lands during a
//! batch re-arms it.
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

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::ops::Range;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

use crate::file::{page_size, retry_eintr, FileState, OtherOpens, Outcome};
use crate::locked::Inode;
use crate::own::OwnFd;
use crate::policy::{Policy, Submit};
use crate::stats::{Counters, Stats};
use crate::wakeup::Wakeup;

const SHARDS: usize = 16;

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

/// The longest `stop_waits` outwaits a wait in flight: far beyond any
/// batch's writeback on a working disk.
const STOP_WAITS_LIMIT: Duration = Duration::from_secs(60);

/// How long `flush` waits on counts while the flusher has nothing to do
/// before it calls them unaccounted. Waking it takes a millisecond or
/// two; nothing the flusher does leaves it empty-handed for longer than
/// one of its turns.
const UNACCOUNTED_AFTER: Duration = Duration::from_secs(2);

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
    /// none behind a `syncfs` later than `syncfs_done`.
    fn pop_group(&mut self, chunk: u64, syncfs_done: u64) -> Vec<Piece> {
        let mut group = Vec::new();
        let mut pages = 0;
        while group.len() < COMPLETE_PIECES && (pages < chunk || group.is_empty()) {
            if self.pieces.front().is_some_and(|p| p.after_syncfs > syncfs_done) {
                break;
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
const COMPLETE_PIECES: usize = 64;

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

/// Writeback in flight, at most, in high-water marks (see `in_flight_cap`).
const IN_FLIGHT_MARKS: u64 = 3;

/// While io-wq waits for a group of pieces on a ring that cannot signal
/// the flusher's eventfd, the flusher looks for the waits' completions
/// this often (a kick wakes it sooner).
const AWAIT_POLL: Duration = Duration::from_millis(1);

/// A written-back piece is dropped once this many more pages were dirtied
/// on the device, or `DROP_LAG_TIME` went by. Pages just written still sit
/// in the writer's per-CPU LRU batch (31 folios), where the kernel cannot
/// drop them without first draining every CPU's batches: dropping each of
/// tar's small files right after its writeback made the flusher wait in
/// that drain 25,000 times for 50,000 files.
const DROP_LAG_PAGES: u64 = 64;
const DROP_LAG_TIME: Duration = Duration::from_millis(10);

/// Counts a caller waiting for the flusher while it lives.
struct Waiting<'a> {
    device: &'a Device,
    on_count: bool,
}

impl<'a> Waiting<'a> {
    /// A caller woken by one event: the finish of the file it waits for
    /// (`wait_done`), or a batch's start (`throttle`).
    fn new(d: &'a Arc<Device>) -> Waiting<'a> {
        Waiting::enter(d, false)
    }

    /// A caller whose wait ends on a count of the device's, which any
    /// finished file may bring down.
    fn on_count(d: &'a Arc<Device>) -> Waiting<'a> {
        Waiting::enter(d, true)
    }

    fn enter(d: &'a Arc<Device>, on_count: bool) -> Waiting<'a> {
        if on_count {
            d.count_waiters.fetch_add(1, SeqCst);
        }
        d.waiters.fetch_add(1, AcqRel);
        d.wake_flusher();
        Waiting { device: d, on_count }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.device.waiters.fetch_sub(1, AcqRel);
        if self.on_count {
            self.device.count_waiters.fetch_sub(1, SeqCst);
        }
    }
}

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

/// A writeback error of a file its caller had already closed.
#[derive(Debug, Clone)]
pub struct LateError {
    pub errno: i32,
    pub path: PathBuf,
    /// Returned to the caller already (by a later fsync or close on the
    /// device, or `dc_flush`); still listed at exit.
    pub reported: bool,
}

/// A counter on its own cache line, so writers on different CPUs do not
/// bounce one line between them.
#[repr(align(64))]
#[derive(Default)]
struct Shard(AtomicU64);

/// An open on the sweep list (`Device::swept`). It stays while its file's
/// writeback is unfinished: the sweeps count its writes against the
/// file's dirty pages until then.
struct SweptOpen {
    file: std::sync::Weak<FileState>,
    /// Its close has looked at the other opens (`Device::other_opens`).
    closing: bool,
}

pub struct Device {
    pub dev: u64,
    /// Its page cache can give pages up (see `FileState::droppable`).
    pub droppable: bool,
    /// On an overlay, its layers, where its files' pages are (see
    /// `FileState::layer`); empty where the mount table does not show them.
    pub overlay: Option<dc_sys::OverlayLayers>,
    /// Pages the library dirtied, per shard (monotonic).
    dirtied: [Shard; SHARDS],
    /// Pages seen clean again (monotonic). dirtied - cleaned = dirty now.
    cleaned: AtomicU64,
    /// Of those not clean, pages whose writeback has started: no longer
    /// dirty, not yet waited for and dropped.
    in_writeback: AtomicU64,
    /// The one state bit that coalesces kicks.
    kick: AtomicBool,
    /// A writer is stalled at the high-water mark, or a caller flushes:
    /// write back everything, whatever each file's policy.
    urgent: AtomicBool,
    /// The high-water marks (bytes) of the handles open here: mark -> how
    /// many handles. The lowest caps the writeback in flight.
    marks: Mutex<BTreeMap<u64, usize>>,
    /// Files with library-dirty pages (or work for the flusher), oldest first.
    dirty_files: Mutex<VecDeque<Arc<FileState>>>,
    flusher: OnceLock<Thread>,
    /// How the flusher sleeps and is woken (kicks, waiters, its waits'
    /// completions).
    wakeup: Arc<Wakeup>,
    submit: Submit,
    /// `Submit::Syncfs`: the thread that makes the `syncfs` calls (the
    /// flusher goes on dropping and finishing files while one runs), the
    /// calls asked of it, and the last that returned.
    syncfs_thread: OnceLock<Sender<(OwnFd, u64)>>,
    syncfs_asked: AtomicU64,
    syncfs_done: AtomicU64,
    /// The last `syncfs` calls that failed, by number, and their errors:
    /// what the waits of files written back through an overlay's own file
    /// report (see `syncfs_outcome`).
    syncfs_failed: Mutex<VecDeque<(u64, i32)>>,
    /// Batches started, for writers waiting at the high-water mark.
    batches_started: Mutex<u64>,
    batch_started: Condvar,
    /// Closed files the flusher has not finished; their waiters.
    closed_pending: AtomicUsize,
    settled: Mutex<()>,
    file_done: Condvar,
    late: Mutex<Vec<LateError>>,
    /// Callers waiting for the flusher (flush, a closed file's writeback):
    /// it does the drops it would otherwise let lag.
    waiters: AtomicUsize,
    /// Of those, the callers whose wait ends on a count of the device's
    /// (`flush`, `wait_closed_below`): every finished file may end it. A
    /// caller waiting for one file is woken by that file's finish only.
    count_waiters: AtomicUsize,
    /// Files with unseen I/O, swept every `SWEEP_INTERVAL`: the opens of
    /// each file, by its inode (a file's pages are all of its opens').
    swept: Mutex<HashMap<Inode, Vec<SweptOpen>>>,
    /// Ranges readers have read, for the flusher to drop.
    read_drops: Mutex<Vec<(Arc<FileState>, Range<u64>)>>,
    /// Closed files with nothing to write back (read, or written back
    /// already), and when they were closed: the flusher drops them once
    /// `DROP_LAG_TIME` old.
    closed_clean: Mutex<VecDeque<(Arc<FileState>, Instant)>>,
    /// Open files a program's `fsync` wrote back, and when: the flusher
    /// drops what is still clean of them once `DROP_LAG_TIME` old (see
    /// `drop_synced_later`). Weak: the queue keeps no descriptor open.
    synced: Mutex<VecDeque<(std::sync::Weak<FileState>, Instant)>>,
    /// Closed files, for `unfinished`; kept only where they may be handed
    /// to another process at exit (`handoff::enable`).
    closed_files: Mutex<Vec<std::sync::Weak<FileState>>>,
    /// While set, the flusher starts no wait for writeback (see
    /// `stop_waits`); `waiting` says one is in flight or starting.
    waits_stopped: AtomicBool,
    waiting: AtomicBool,
    /// Pieces the flusher has in hand (queued, being waited for, written
    /// and not yet dropped), as of its last turn or sleep: with nothing
    /// listed either, it has nothing left to do (`flush`'s guard).
    flusher_holds: AtomicUsize,
    /// The library's descriptors open on this filesystem (bound files, and
    /// closed ones the flusher holds): while any is, the filesystem is
    /// mounted and the device number is its own (see `Engine::device`).
    pub open_files: Arc<AtomicUsize>,
    /// Of those, the descriptors of files the program has closed, from the
    /// close until the library's own closes (`Engine::let_closed_file_go`).
    pub closed_files_open: Arc<AtomicUsize>,
    /// What the first `lazy` write as RWF_DONTCACHE here showed of the
    /// kernel's handling of the flag (see `learn_dontcache_flush`).
    dontcache_flush: AtomicU8,
    pub counters: Counters,
}

/// `Device::dontcache_flush`: not yet seen, seen flushed before the write
/// returned (6.14-7.1), seen left dirty (the 7.2 kernel's flusher kick).
const DONTCACHE_FLUSH_UNSEEN: u8 = 0;
const DONTCACHE_FLUSH_INLINE: u8 = 1;
const DONTCACHE_FLUSH_LATER: u8 = 2;

thread_local! {
    static SHARD: usize = {
        // Spread threads over shards by the address of a thread-local.
        let probe = 0u8;
        (&probe as *const u8 as usize >> 12) % SHARDS
    };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Device {
    pub fn new(dev: u64, submit: Submit, droppable: bool, overlay: Option<dc_sys::OverlayLayers>) -> Arc<Device> {
        Arc::new(Device {
            dev,
            droppable,
            overlay,
            dirtied: Default::default(),
            cleaned: AtomicU64::new(0),
            in_writeback: AtomicU64::new(0),
            kick: AtomicBool::new(false),
            urgent: AtomicBool::new(false),
            marks: Mutex::new(BTreeMap::new()),
            dirty_files: Mutex::new(VecDeque::new()),
            flusher: OnceLock::new(),
            wakeup: Arc::new(Wakeup::new()),
            submit,
            syncfs_thread: OnceLock::new(),
            syncfs_asked: AtomicU64::new(0),
            syncfs_done: AtomicU64::new(0),
            syncfs_failed: Mutex::new(VecDeque::new()),
            batches_started: Mutex::new(0),
            batch_started: Condvar::new(),
            closed_pending: AtomicUsize::new(0),
            settled: Mutex::new(()),
            file_done: Condvar::new(),
            late: Mutex::new(Vec::new()),
            waiters: AtomicUsize::new(0),
            count_waiters: AtomicUsize::new(0),
            swept: Mutex::new(HashMap::new()),
            read_drops: Mutex::new(Vec::new()),
            synced: Mutex::new(VecDeque::new()),
            closed_clean: Mutex::new(VecDeque::new()),
            closed_files: Mutex::new(Vec::new()),
            waits_stopped: AtomicBool::new(false),
            waiting: AtomicBool::new(false),
            flusher_holds: AtomicUsize::new(0),
            open_files: Arc::default(),
            closed_files_open: Arc::default(),
            dontcache_flush: AtomicU8::new(DONTCACHE_FLUSH_UNSEEN),
            counters: Counters::default(),
        })
    }

    /// Whether RWF_DONTCACHE writes here may start their writeback before
    /// returning: not known otherwise until one was looked at.
    pub fn dontcache_may_flush_inline(&self) -> bool {
        self.dontcache_flush.load(Relaxed) != DONTCACHE_FLUSH_LATER
    }

    /// Learns, from the first RWF_DONTCACHE write of whole `pages` through
    /// `fd`, whether the kernel flushes such writes inline: then none of
    /// them is dirty when the write returns. The 7.2 kernel's flusher,
    /// kicked by the write, cannot have written them in the microseconds
    /// since; `lazy` then starts its writeback itself, as everywhere the
    /// kernel has no inline flush. One `cachestat` per filesystem.
    pub fn learn_dontcache_flush(&self, fd: std::os::fd::BorrowedFd<'_>, pages: &Range<u64>) {
        if self.dontcache_flush.load(Relaxed) != DONTCACHE_FLUSH_UNSEEN || pages.is_empty() {
            return;
        }
        let ps = page_size();
        let Ok(c) = dc_sys::cachestat(fd, pages.start * ps, (pages.end - pages.start) * ps) else { return };
        let seen = if c.nr_dirty == 0 { DONTCACHE_FLUSH_INLINE } else { DONTCACHE_FLUSH_LATER };
        let _ = self.dontcache_flush.compare_exchange(DONTCACHE_FLUSH_UNSEEN, seen, Relaxed, Relaxed);
    }

    /// Library-dirty pages on this device not yet seen clean.
    pub fn dirty_pages(&self) -> u64 {
        let dirtied: u64 = self.dirtied.iter().map(|s| s.0.load(Acquire)).sum();
        dirtied.saturating_sub(self.cleaned.load(Acquire))
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.counters.snapshot();
        s.dirty_now = self.dirty_pages() * page_size();
        s.late_errors = lock(&self.late).len() as u64;
        s
    }

    // ---- counts (called by FileState, which keeps its sets in step) ----

    pub fn count_dirtied(&self, pages: u64) {
        if pages > 0 {
            SHARD.with(|&i| self.dirtied[i].0.fetch_add(pages, AcqRel));
        }
    }

    pub fn count_started(&self, pages: u64) {
        if pages > 0 {
            self.in_writeback.fetch_add(pages, AcqRel);
        }
    }

    pub fn count_finished(&self, pages: u64) {
        if pages > 0 {
            self.in_writeback.fetch_sub(pages, AcqRel);
        }
    }

    pub fn count_cleaned(&self, pages: u64) {
        self.cleaned.fetch_add(pages, AcqRel);
    }

    /// Library pages still dirty: not clean, and writeback not started.
    fn dirty_not_started(&self) -> u64 {
        self.dirty_pages().saturating_sub(self.in_writeback.load(Acquire))
    }

    /// Puts `file` on the dirty list if it is not there. The flag is read
    /// without the list's lock; `forget_idle_files` clears it and then looks
    /// at the file's work again (both sequentially consistent), so work
    /// added by a caller that still saw the flag set is never stranded.
    pub fn enlist(&self, file: &Arc<FileState>) {
        if file.queued.load(SeqCst) {
            return;
        }
        let mut list = lock(&self.dirty_files);
        if !file.queued.swap(true, SeqCst) {
            list.push_back(file.clone());
        }
    }

    // ---- kicks and the high-water mark --------------------------------

    /// Test, then test-and-set: only the writer that sets the flag wakes the
    /// flusher. Returns whether this kick woke it.
    pub fn kick(self: &Arc<Device>, file: &FileState) -> bool {
        if file.policy == Policy::PerFile {
            file.kicked.store(true, Release);
        }
        if !self.kick.load(Acquire) && !self.kick.swap(true, AcqRel) {
            Counters::add(&self.counters.kicks, 1);
            Counters::add(&file.counters.kicks, 1);
            self.wake_flusher();
            true
        } else {
            Counters::add(&self.counters.coalesced_kicks, 1);
            Counters::add(&file.counters.coalesced_kicks, 1);
            false
        }
    }

    /// Asks for everything to be written back now, whatever the policies.
    fn kick_urgently(self: &Arc<Device>) {
        self.urgent.store(true, Release);
        if !self.kick.swap(true, AcqRel) {
            self.wake_flusher();
        }
    }

    /// Wakes the flusher, starting it on first use.
    fn wake_flusher(self: &Arc<Device>) {
        self.flusher_thread();
        self.wakeup.wake();
    }

    fn flusher_thread(self: &Arc<Device>) -> &Thread {
        self.flusher.get_or_init(|| {
            let dev = Arc::downgrade(self);
            crate::engine::spawn_thread(format!("dc-flush-{:x}", self.dev), move || flusher_main(dev))
                .expect("spawning the dontcache flusher thread")
                .thread()
                .clone()
        })
    }

    /// Blocks while the library's dirty bytes here (writeback not started)
    /// leave less than `headroom` below `high_water`, asking the flusher to
    /// write back everything meanwhile. Writers pass the size of the write
    /// they just did as the headroom, so a steady writer's next write stays
    /// under the mark instead of overshooting it by one write.
    ///
    /// Pages under writeback do not count: they are no longer dirty, and
    /// counting them stalled every writer while the disk was busy anyway.
    ///
    /// A stalled writer goes on as soon as the flusher starts a batch after
    /// it stalled, even if other writers have already filled the room that
    /// batch made: waking only when the level is below the mark let the
    /// writers that happened to run first refill it, and with 32 writers a
    /// few of them waited a second (p99.9 ten times the kernel's). The price
    /// is at most one write per stalled writer above the mark.
    pub fn throttle(self: &Arc<Device>, file: &FileState, high_water: u64, headroom: u64) {
        let limit = high_water.saturating_sub(headroom) / page_size();
        // Writeback a writer starts itself (`lazy`, `inline`) is not under
        // the flusher's in-flight cap, so such a writer also waits while
        // more than three marks are not yet seen clean, as the kernel's
        // writers block in submission once the disk's queue is full.
        // Without it `inline` reached 4.6 marks cached on a busy disk.
        let writer_started = file.policy.writer_starts_writeback();
        let unseen_over = || writer_started && self.dirty_pages() > 3 * limit;
        if self.dirty_not_started() <= limit && !unseen_over() {
            return;
        }
        Counters::add(&self.counters.highwater_stalls, 1);
        Counters::add(&file.counters.highwater_stalls, 1);
        let _waiting = Waiting::new(self);
        let mut batches = lock(&self.batches_started);
        let entered = *batches;
        // Past two marks, only the level releases: the bound that holds
        // however small the batches get.
        while (self.dirty_not_started() > limit && (*batches == entered || self.dirty_not_started() > 2 * limit))
            || unseen_over()
        {
            self.kick_urgently();
            batches = self
                .batch_started
                .wait_timeout(batches, Duration::from_millis(20))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A handle with this high-water mark is open here. The lowest mark of
    /// the open handles caps the writeback in flight: a handle that asks
    /// for a small mark wants little of its device's bandwidth queued.
    pub fn hold_mark(&self, high_water: u64) {
        *lock(&self.marks).entry(high_water).or_insert(0) += 1;
    }

    /// The marks' lock, held by the caller: a test stands for a thread that
    /// held it when another forked.
    #[cfg(test)]
    pub(crate) fn hold_marks_lock(&self) -> MutexGuard<'_, BTreeMap<u64, usize>> {
        lock(&self.marks)
    }

    /// That handle is gone: the cap rises again if its mark was the lowest.
    pub fn release_mark(&self, high_water: u64) {
        let mut marks = lock(&self.marks);
        if let Some(n) = marks.get_mut(&high_water) {
            *n -= 1;
            if *n == 0 {
                marks.remove(&high_water);
            }
        }
    }

    /// Pages of writeback the flusher keeps in flight at most: three of the
    /// lowest mark. One batch then goes to the disk while the last is still
    /// on it; with one mark the flusher waited for a batch before it could
    /// start the next, and the disk ran dry between them (one stream at
    /// 0.91x the kernel's RWF_DONTCACHE, whose own writeback in flight
    /// peaked at 127 MiB here, about two default marks).
    ///
    /// A page counts in flight until its writeback ends, not when the disk
    /// has it: on ext4 a write to newly allocated blocks ends only after a
    /// worker converted its extents, and a disk that completes in bursts
    /// (this machine's: nothing for ~40 ms, then 39 requests at once) ends
    /// a whole cap's writeback together. With two marks the disk then sat
    /// empty for the conversions and the waits, 2.5-5 ms a burst (device
    /// idle 7% of four writers' run, the kernel's writers 2-3%: their next
    /// writes were queued); with three, half as long, and four writers went
    /// from 0.954x to 0.989x the kernel's RWF_DONTCACHE (medians of 5
    /// interleaved, 4 x 1 GiB). One stream gained nothing and keeps more in
    /// flight (peak writeback 135-152 MiB against 104-129; the kernel's own
    /// 127-182 MiB).
    fn in_flight_cap(&self) -> u64 {
        let lowest = lock(&self.marks).keys().next().copied();
        (IN_FLIGHT_MARKS * lowest.unwrap_or(crate::policy::DEFAULT_HIGH_WATER) / page_size()).max(1)
    }

    // ---- closed files and late errors ----------------------------------

    /// The caller closed `file`: the flusher writes back and drops what is
    /// left, in its batches, and then lets it go.
    pub fn hand_over(self: &Arc<Device>, file: &Arc<FileState>) {
        file.await_foreign_writeback(self.other_opens(file));
        // Counted pending before it is marked closed: the flusher may
        // finish a closed file the moment it sees it closed (its last piece
        // dropped), and a file finished before it was counted stayed
        // counted for good, and the exit's `flush` waited for it for ever
        // (twice in about 5,000 runs of random calls on six threads).
        if file.set_pending() {
            self.closed_pending.fetch_add(1, AcqRel);
            if crate::handoff::enabled() {
                self.remember_closed(file);
            }
        }
        file.mark_closed();
        if file.unsettled() {
            self.enlist(file);
            self.kick(file);
            return;
        }
        if !crate::engine::closed_files_settle_at_exit() {
            self.finish(file, false);
            return;
        }
        // Dropped by the flusher, after a lag: the pages a reader just read
        // sit in its CPU's LRU batch, and dropping them at once made the
        // kernel drain every CPU's batches and wait, on the closing thread
        // (cp -a of 50,000 files: 3,700 such waits).
        let first = {
            let mut q = lock(&self.closed_clean);
            q.push_back((file.clone(), Instant::now()));
            q.len() == 1
        };
        if first {
            self.wake_flusher();
        }
    }

    /// A program's `fsync` of `file` wrote back what the library dirtied
    /// there: the flusher drops it `DROP_LAG_TIME` later, not the sync at
    /// once. A program that syncs often writes again at once where it
    /// stopped, inside a page it wrote in part (an appender of records, a
    /// database's journal and its header): dropped at the sync, each such
    /// page was read back from the disk by the next write (a Python loop
    /// of 100-byte appends, each `fdatasync`ed: 12 MB read for 3,000
    /// records, 1.34x the time of the loop alone; SQLite, 2,000
    /// transactions: 8 MB read for its journals' headers). One entry per
    /// file: a file synced again before its drop keeps the earlier time.
    pub fn drop_synced_later(self: &Arc<Device>, file: &Arc<FileState>) {
        let first = {
            let mut q = lock(&self.synced);
            if q.iter().any(|(f, _)| std::ptr::eq(f.as_ptr(), Arc::as_ptr(file))) {
                return;
            }
            q.push_back((Arc::downgrade(file), Instant::now()));
            q.len() == 1
        };
        if first {
            self.wake_flusher();
        }
    }

    /// Drops what stayed clean of the synced files that are `DROP_LAG_TIME`
    /// old; returns how long until the next is. Not sooner for a caller
    /// waiting for the flusher: these files are open, and what it waits
    /// for (counts of dirty pages, closed files) does not include them.
    fn drop_synced(self: &Arc<Device>) -> Option<Duration> {
        loop {
            let file = {
                let mut q = lock(&self.synced);
                let (_, at) = q.front()?;
                let age = at.elapsed();
                if age < DROP_LAG_TIME {
                    return Some(DROP_LAG_TIME - age);
                }
                q.pop_front().expect("looked at above").0
            };
            // A file closed meanwhile was dropped whole by its close.
            if let Some(f) = file.upgrade() {
                if f.drop_touched_clean() > 0 {
                    // The flusher's retries drop what the kernel kept.
                    self.enlist(&f);
                }
            }
        }
    }

    /// Finishes the closed clean files that are `DROP_LAG_TIME` old (all of
    /// them with `all`). Returns how long to wait for the next few: half a
    /// lag past the oldest's, so one wake-up finishes many files, not one.
    fn finish_closed_clean(self: &Arc<Device>, all: bool) -> Option<Duration> {
        loop {
            let file = {
                let mut q = lock(&self.closed_clean);
                let (_, at) = q.front()?;
                let age = at.elapsed();
                if !all && age < DROP_LAG_TIME {
                    return Some(DROP_LAG_TIME - age + DROP_LAG_TIME / 2);
                }
                q.pop_front().expect("looked at above").0
            };
            self.finish(&file, false);
        }
    }

    /// A closed file has nothing left to write back: drop it as a whole
    /// (pages a read brought in, a straddling folio) unless `dropped`
    /// already, and let its waiters go. Drops the kernel defers are retried
    /// by the flusher first.
    fn finish(self: &Arc<Device>, file: &Arc<FileState>, dropped: bool) {
        if !dropped && file.drop_touched() > 0 {
            self.enlist(file);
            self.wake_flusher();
            return;
        }
        // Counted out whether or not it was done before (see `hand_over`).
        let uncounted = file.clear_pending();
        if uncounted {
            self.closed_pending.fetch_sub(1, AcqRel);
        }
        if file.mark_done() || uncounted {
            // Only a caller this file's finish may release is woken: one
            // waiting for another file woke for every file finished (4 lazy
            // writers of 2,500 small files, the first done waiting for its
            // last few while the others ran on: 40,302 futex calls, now
            // 479). A count waiter's wait is bounded like any (10-20 ms).
            if self.count_waiters.load(SeqCst) > 0 || file.outcome().is_awaited() {
                let _g = lock(&self.settled);
                self.file_done.notify_all();
            }
        }
    }

    /// Wakes the callers waiting on `cv`, if any wait: a notify is a futex
    /// call whether or not anyone waits, and this runs for every batch. A
    /// caller counts itself (`Waiting`) before it looks at what it waits
    /// for, so one that starts waiting after this saw none finds its
    /// condition met; each wait is also bounded (10-20 ms).
    fn notify_waiters(&self, cv: &Condvar) {
        if self.waiters.load(SeqCst) > 0 {
            cv.notify_all();
        }
    }

    /// Keeps `file`, just closed, among the files `unfinished` looks at;
    /// the finished ones are let go once they are half the list.
    fn remember_closed(&self, file: &Arc<FileState>) {
        let mut list = lock(&self.closed_files);
        if list.len() >= 64 && list.len() >= 2 * self.closed_pending() {
            list.retain(|f| f.upgrade().is_some_and(|f| !f.outcome().is_done()));
        }
        list.push(Arc::downgrade(file));
    }

    /// The closed files the flusher has not finished (kept only where
    /// `handoff` is enabled).
    pub fn unfinished(&self) -> Vec<Arc<FileState>> {
        let list = lock(&self.closed_files);
        list.iter().filter_map(|f| f.upgrade()).filter(|f| !f.outcome().is_done()).collect()
    }

    /// Stops the flusher from waiting for writeback and returns once no
    /// wait is in flight (the errors those waits found are latched: late
    /// errors of closed files). Files handed to another process must not
    /// be waited for here after that: the open file is shared, a
    /// writeback error is reported once per open file, and a wait here
    /// would take the error the receiver reports, in a process about to
    /// exit without telling anyone.
    ///
    /// A flusher that died mid-wait (a panic) never clears `waiting`: the
    /// exit goes on after `STOP_WAITS_LIMIT` rather than hang.
    pub fn stop_waits(&self) {
        self.waits_stopped.store(true, SeqCst);
        let since = Instant::now();
        while self.waiting.load(SeqCst) && since.elapsed() < STOP_WAITS_LIMIT {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Lets the flusher wait for writeback again (the files were not all
    /// handed over: this process finishes them).
    pub fn resume_waits(&self) {
        self.waits_stopped.store(false, SeqCst);
        self.wake_flusher_if_started();
    }

    /// Marks a wait for writeback as starting; false, unmarked, while waits
    /// are stopped. Paired with `stop_waits` through `SeqCst`: either the
    /// flusher sees the stop, or `stop_waits` sees the wait and outwaits it.
    fn begin_wait(&self) -> bool {
        self.waiting.store(true, SeqCst);
        if self.waits_stopped.load(SeqCst) {
            self.waiting.store(false, SeqCst);
            return false;
        }
        true
    }

    fn end_wait(&self) {
        self.waiting.store(false, SeqCst);
    }

    fn wake_flusher_if_started(&self) {
        if self.flusher.get().is_some() {
            self.wakeup.wake();
        }
    }

    /// Closed files the flusher has not finished yet.
    pub fn closed_pending(&self) -> usize {
        self.closed_pending.load(Acquire)
    }

    /// Waits until a closed file is done.
    pub fn wait_done(self: &Arc<Device>, outcome: &Outcome) {
        let _waiting = Waiting::new(self);
        outcome.await_done();
        let mut g = lock(&self.settled);
        while !outcome.is_done() {
            self.kick_urgently();
            g = self.file_done.wait_timeout(g, Duration::from_millis(20)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Waits while more than `limit` closed files are pending: each holds a
    /// descriptor, and the program's own opens must not run out of them.
    pub fn wait_closed_below(self: &Arc<Device>, limit: usize) {
        if self.closed_pending() <= limit {
            return;
        }
        let _waiting = Waiting::on_count(self);
        let mut g = lock(&self.settled);
        while self.closed_pending() > limit {
            self.kick_urgently();
            g = self.file_done.wait_timeout(g, Duration::from_millis(20)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Waits up to `limit` until `done`, with the flusher hurried: closed
    /// files are written back and finished now, not after their lag.
    pub fn wait_until(self: &Arc<Device>, done: &dyn Fn() -> bool, limit: Duration) {
        let _waiting = Waiting::on_count(self);
        let since = Instant::now();
        // `done` is asked without `settled` held: it may look at every
        // descriptor the library holds (`own::open_on`), and the flusher
        // takes `settled` to say a file is finished. A finish said between
        // the question and the wait is seen at the next look.
        while !done() && since.elapsed() < limit {
            self.kick_urgently();
            // A file is finished before the flusher lets go of it: look
            // again soon, not only when the next one is finished.
            let g = lock(&self.settled);
            drop(self.file_done.wait_timeout(g, Duration::from_millis(2)).unwrap_or_else(|e| e.into_inner()));
        }
    }

    /// Waits until everything the library dirtied here, open files' and
    /// closed files', is written back and dropped.
    ///
    /// Counts that nothing will ever bring down (a bookkeeping bug: none
    /// known) would make this wait for ever, at a program's exit. Once the
    /// flusher has had nothing to do for `UNACCOUNTED_AFTER` while counts
    /// stay up, they are noted (`unaccounted`) and the wait ends: the shim
    /// says so at exit, the tests assert it never happens.
    pub fn flush(self: &Arc<Device>) {
        let _waiting = Waiting::on_count(self);
        let mut g = lock(&self.settled);
        let mut idle_since: Option<Instant> = None;
        while self.dirty_pages() > 0 || self.closed_pending() > 0 {
            if !self.flusher_has_nothing_to_do() {
                idle_since = None;
            } else if idle_since.get_or_insert_with(Instant::now).elapsed() >= UNACCOUNTED_AFTER {
                crate::engine::note_unaccounted(self.dirty_pages(), self.closed_pending() as u64);
                return;
            }
            self.kick_urgently();
            g = self.file_done.wait_timeout(g, Duration::from_millis(10)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Nothing listed, nothing in the flusher's hands, no `syncfs` out.
    fn flusher_has_nothing_to_do(&self) -> bool {
        self.flusher_holds.load(Acquire) == 0
            && self.syncfs_done.load(Acquire) == self.syncfs_asked.load(Acquire)
            && lock(&self.dirty_files).is_empty()
            && lock(&self.closed_clean).is_empty()
            && lock(&self.read_drops).is_empty()
            && lock(&self.synced).is_empty()
    }

    /// `flush` on every device in `devices`, their flushers all told
    /// first: each finishes its files while the caller waits for the one
    /// before (a program's output on one filesystem and its log on another
    /// were written back one after the other at its exit).
    pub fn flush_all(devices: &[Arc<Device>]) {
        let _waiting: Vec<Waiting<'_>> = devices
            .iter()
            .filter(|d| d.dirty_pages() > 0 || d.closed_pending() > 0)
            .map(|d| {
                d.kick_urgently();
                Waiting::on_count(d)
            })
            .collect();
        for d in devices {
            d.flush();
        }
    }

    /// A reader read `range` of `file`, a batch of `batch` pages or so: the
    /// flusher drops it. When more than a batch waits for the flusher (it
    /// shares its CPU with busier threads), the reader drops them all
    /// itself, as a writer waits at its high-water mark: with the test
    /// suite on 8 threads on two CPUs, a reader left 88-184 MiB of a
    /// 256 MiB file cached while the flusher got no time to drop it.
    pub fn drop_later(self: &Arc<Device>, file: &Arc<FileState>, range: Range<u64>, batch: u64) {
        let (first, overdue) = {
            let mut drops = lock(&self.read_drops);
            drops.push((file.clone(), range));
            let waiting: u64 = drops.iter().map(|(_, r)| r.end - r.start).sum();
            if waiting > batch {
                (false, std::mem::take(&mut *drops))
            } else {
                (drops.len() == 1, Vec::new())
            }
        };
        for (f, r) in overdue {
            crate::handoff::escrow(&f);
            f.drop_unchecked(r);
        }
        if first {
            self.wake_flusher();
        }
    }

    /// Drops what readers have read.
    fn drop_read(&self) {
        let drops = std::mem::take(&mut *lock(&self.read_drops));
        for (f, r) in drops {
            crate::handoff::escrow(&f);
            f.drop_unchecked(r);
        }
    }

    /// `file` may be written by paths the library does not see: sweep it.
    /// The flusher sweeps every `SWEEP_INTERVAL` while it has files to
    /// sweep; only the first needs to wake it (a wake-up per open was a
    /// futex call per file for tar).
    pub fn sweep_file(self: &Arc<Device>, file: &Arc<FileState>) {
        if self.list_for_sweep(file) {
            self.wake_flusher();
        }
    }

    /// Puts `file` on the sweep list, once; returns whether the list was
    /// empty. A second open of a file there makes each a working one
    /// (`FileState::shares_the_file`).
    fn list_for_sweep(&self, file: &Arc<FileState>) -> bool {
        if !file.set_unseen() {
            return false;
        }
        let mut swept = lock(&self.swept);
        let first = swept.is_empty();
        let opens = swept.entry(file.inode()).or_default();
        opens.push(SweptOpen { file: Arc::downgrade(file), closing: false });
        let open = || opens.iter().filter(|o| !o.closing).filter_map(|o| o.file.upgrade());
        if open().nth(1).is_some() {
            open().for_each(|f| f.shares_the_file());
        }
        first
    }

    /// At `file`'s close: the opens of its file on the sweep list that are
    /// not closing, and `file` closing from now on. Under the list's lock,
    /// so of two opens closing at once one is the last.
    fn other_opens(&self, file: &Arc<FileState>) -> OtherOpens {
        if !file.is_unseen() {
            return OtherOpens::default();
        }
        let mut swept = lock(&self.swept);
        let mut others = OtherOpens::default();
        for open in swept.get_mut(&file.inode()).into_iter().flatten() {
            let Some(f) = open.file.upgrade() else { continue };
            if Arc::ptr_eq(&f, file) {
                open.closing = true;
            } else if !open.closing {
                others.any = true;
                others.writable |= f.is_writable();
            }
        }
        others
    }

    /// Sweeps the files with unseen I/O, the opens of each file together
    /// (`FileState::sweep_opens`); returns whether any are left to sweep
    /// next time.
    fn sweep(self: &Arc<Device>) -> bool {
        let files: Vec<Vec<Arc<FileState>>> = {
            let mut swept = lock(&self.swept);
            swept.retain(|_, opens| {
                opens.retain(|o| o.file.upgrade().is_some_and(|f| !f.outcome().is_done()));
                !opens.is_empty()
            });
            swept.values().map(|opens| opens.iter().filter_map(|o| o.file.upgrade()).collect()).collect()
        };
        let swept_any = !files.is_empty();
        for pieces in files.iter().map(|opens| FileState::sweep_opens(opens)) {
            for f in &pieces {
                self.enlist(f);
            }
            if !pieces.is_empty() {
                self.kick.store(true, Release);
            }
        }
        swept_any
    }

    /// A closed file's writeback failed. Like the kernel's per-file error
    /// sequence, a file has at most one error waiting to be returned: two
    /// pieces of it failing before anyone looked are one error, returned
    /// once; a failure after that one was returned is a new one.
    pub fn push_late_error(&self, errno: i32, path: PathBuf) {
        let mut late = lock(&self.late);
        if !late.iter().any(|e| !e.reported && e.path == path) {
            late.push(LateError { errno, path, reported: false });
        }
    }

    /// The oldest late error not yet returned to anyone, marked returned.
    pub fn take_late_error(&self) -> Option<io::Error> {
        let mut late = lock(&self.late);
        let e = late.iter_mut().find(|e| !e.reported)?;
        e.reported = true;
        Some(io::Error::from_raw_os_error(e.errno))
    }

    /// Every late error so far (for the exit report).
    pub fn late_errors(&self) -> Vec<LateError> {
        lock(&self.late).clone()
    }

    // ---- the flusher ---------------------------------------------------

    /// Whether a kick held since `since` should start its batch now; if
    /// not, how long it may still gather. See `GATHER_BYTES`.
    fn gathered(&self, cap: u64, since: Instant) -> Result<(), Duration> {
        // While a `syncfs` runs, files gather for the next one, urgent or
        // not: it writes back what was dirty on the filesystem when it
        // started, and writers at the closed-files cap otherwise made a
        // batch of each file finished, 1,500-3,600 batches of one file
        // (a write each) for 40,000 small files against 29-40 `syncfs`.
        if self.syncfs_asked.load(Acquire) > self.syncfs_done.load(Acquire) {
            return Err(SYNCFS_GATHER_TIME);
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
        for f in &files {
            f.retry_drops();
            let want = self.file_budget(f, urgent, left);
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

    /// How many of `f`'s dirty pages this batch may take.
    fn file_budget(&self, f: &FileState, urgent: bool, left: u64) -> u64 {
        let kicked = f.kicked.swap(false, AcqRel);
        // A closed file has no writer left to start its writeback or kick.
        let eligible = urgent
            || f.is_closed()
            || match f.policy {
                Policy::PerFile => kicked,
                Policy::Lazy | Policy::Inline => false,
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
    /// every dirty page of the filesystem, other programs' too.
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
        if self.submit != Submit::Syncfs || closed < 2 {
            return false;
        }
        let ours = self.dirty_pages() * page_size();
        system_dirty_bytes().is_some_and(|all| all <= ours + SYNCFS_OTHERS_DIRTY)
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

thread_local! {
    /// The flusher thread's ring, created on its first use.
    static FLUSH_RING: std::cell::RefCell<Option<Ring>> = std::cell::RefCell::new(high_ring(256));
    /// The flusher thread's ring for waits (`Awaited`), made on its first wait.
    static WAIT_RING: std::cell::RefCell<WaitRing> = const { std::cell::RefCell::new(WaitRing::NotYet) };
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

/// An engine thread's ring. Its descriptor is the library's for the
/// process's life (registered, see `own.rs`): the ring is never closed,
/// not even when it failed and is given up, so its number can never be
/// closed twice, the second time under whoever reused it.
struct Ring(std::mem::ManuallyDrop<IoUring>);

impl std::ops::Deref for Ring {
    type Target = IoUring;
    fn deref(&self) -> &IoUring {
        &self.0
    }
}

impl std::ops::DerefMut for Ring {
    fn deref_mut(&mut self) -> &mut IoUring {
        &mut self.0
    }
}

/// A ring whose descriptor lives with the engine's other descriptors, high
/// in the range (see `own.rs`); `None` without io_uring.
fn high_ring(entries: u32) -> Option<Ring> {
    crate::own::making(|| made_ring(entries))
}

fn made_ring(entries: u32) -> Option<Ring> {
    let ring = IoUring::new(entries).ok()?;
    let params = ring.params().clone();
    let Ok(high) = crate::own::duplicate(std::os::fd::AsRawFd::as_raw_fd(&ring)) else {
        return Some(Ring(std::mem::ManuallyDrop::new(ring)));
    };
    drop(ring);
    // SAFETY: `high` is the only descriptor of that ring left, given up
    // here to the ring, and `params` are what the kernel filled in when it
    // made the ring. Rings are made on the flusher thread only.
    let ring = high.give_for_life(|fd| unsafe { IoUring::from_fd(fd, params) }).ok()?;
    Some(Ring(std::mem::ManuallyDrop::new(ring)))
}

/// The flusher's wait ring; without one (a kernel or sandbox without
/// io_uring, or a ring that failed) the flusher waits itself.
enum WaitRing {
    NotYet,
    /// `signals`: its completions signal the flusher's eventfd
    /// (`Wakeup`); otherwise the flusher looks for them every `AWAIT_POLL`.
    Ready {
        ring: Box<Ring>,
        signals: bool,
    },
    Gone,
}

impl WaitRing {
    fn new(wakeup: &Wakeup) -> WaitRing {
        let Some(ring) = high_ring(COMPLETE_PIECES as u32) else { return WaitRing::Gone };
        let signals = wakeup
            .signalled_by_rings()
            .is_some_and(|fd| ring.submitter().register_eventfd(std::os::fd::AsRawFd::as_raw_fd(&fd)).is_ok());
        WaitRing::Ready { ring: Box::new(ring), signals }
    }

    /// Makes the flusher's wait ring, unless made (or given up) already.
    fn prepare(wakeup: &Wakeup) {
        WAIT_RING.with(|r| {
            let mut r = r.borrow_mut();
            if matches!(*r, WaitRing::NotYet) {
                *r = WaitRing::new(wakeup);
            }
        });
    }

    fn ring(&mut self) -> Option<&mut IoUring> {
        match self {
            WaitRing::Ready { ring, .. } => Some(ring),
            _ => None,
        }
    }

    /// Whether completions wait to be reaped (no system call: the
    /// completion queue is shared memory).
    fn has_completions(&mut self) -> bool {
        self.ring().is_some_and(|ring| !ring.completion().is_empty())
    }

    fn signals(&self) -> bool {
        matches!(self, WaitRing::Ready { signals: true, .. })
    }
}

/// Queues `IORING_OP_SYNC_FILE_RANGE(WRITE)` for every hull and submits them
/// together; errors are latched on their files. Returns the ring, or `None`
/// if it broke (the caller then falls back to the loop for good).
fn submit_uring(mut ring: Ring, device: &Device, starts: &[(Arc<FileState>, Range<u64>)]) -> Option<Ring> {
    // The SQE length is 32 bits: split larger ranges.
    const CHUNK: u64 = 1 << 30;
    let ps = page_size();
    let split = starts.iter().enumerate().flat_map(|(i, (_, r))| {
        let (off, len) = (r.start * ps, (r.end - r.start) * ps);
        (0..len.div_ceil(CHUNK)).map(move |k| (i, off + k * CHUNK, (len - k * CHUNK).min(CHUNK)))
    });
    let mut in_flight = 0usize;
    for (i, off, len) in split {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&starts[i].0.cache_fd());
        let entry = opcode::SyncFileRange::new(types::Fd(fd), len as u32)
            .offset(off)
            .flags(libc::SYNC_FILE_RANGE_WRITE)
            .build()
            .user_data(i as u64);
        // SAFETY: the SQE references no memory; the fd outlives the batch.
        while unsafe { ring.submission().push(&entry) }.is_err() {
            in_flight -= reap(&mut ring, device, starts, in_flight.min(1)).ok()?;
        }
        in_flight += 1;
    }
    while in_flight > 0 {
        in_flight -= reap(&mut ring, device, starts, in_flight).ok()?;
    }
    Some(ring)
}

/// Submits what is queued, waits for `want` completions and latches errors.
fn reap(
    ring: &mut IoUring,
    device: &Device,
    starts: &[(Arc<FileState>, Range<u64>)],
    want: usize,
) -> io::Result<usize> {
    match ring.submit_and_wait(want) {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
        Err(e) => return Err(e),
    }
    let mut n = 0;
    for cqe in ring.completion() {
        if cqe.result() < 0 {
            starts[cqe.user_data() as usize].0.latch(-cqe.result(), device);
        }
        n += 1;
    }
    Ok(n)
}

// One piece: each turn does the first thing that can be done, in priority
// order (start a batch, complete the oldest group, drop what was written back,
// retry refused drops, park), over state that lives on this thread only; that
// order is the design, and it reads as one loop.
fn flusher_main(dev: std::sync::Weak<Device>) {
    crate::file::mark_flusher_thread();
    // Writeback started and not yet waited for, oldest first; and written
    // back, not yet dropped.
    let mut queue = Queue::default();
    let mut written: VecDeque<Written> = VecDeque::new();
    let mut retries = 0;
    // Retries in a row that dropped nothing more, and what was left.
    let (mut stalled, mut last_pending) = (0, 0);
    let mut swept_at = Instant::now();
    let mut sweeping = false;
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
            sweeping = d.sweep();
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
            let mut group = queue.pop_group((CHUNK_BYTES / page_size()).max(1), d.syncfs_done.load(Acquire));
            if group.is_empty() {
                d.end_wait();
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
                wait.into_iter().chain(gather_left).chain(clean_left).chain(synced_left).chain(settle_left).min(),
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
        sweeping |= !lock(&d.swept).is_empty();
        drop(d);
        park(sweeping.then_some(SWEEP_INTERVAL));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::DEFAULT_HIGH_WATER;

    #[test]
    fn the_in_flight_cap_follows_the_lowest_open_mark() {
        let d = Device::new(0, Submit::Loop, true, None);
        // `IN_FLIGHT_MARKS` of the lowest mark, in pages.
        let cap = |mark: u64| IN_FLIGHT_MARKS * mark / page_size();
        assert_eq!(d.in_flight_cap(), cap(DEFAULT_HIGH_WATER), "no handle: the default mark");
        d.hold_mark(DEFAULT_HIGH_WATER);
        d.hold_mark(1 << 20);
        d.hold_mark(1 << 20);
        assert_eq!(d.in_flight_cap(), cap(1 << 20));
        d.release_mark(1 << 20);
        assert_eq!(d.in_flight_cap(), cap(1 << 20), "one handle with the small mark is still open");
        d.release_mark(1 << 20);
        assert_eq!(d.in_flight_cap(), cap(DEFAULT_HIGH_WATER), "the cap rises when the small mark's handles close");
        d.hold_mark(256 << 20);
        assert_eq!(d.in_flight_cap(), cap(DEFAULT_HIGH_WATER));
        d.release_mark(DEFAULT_HIGH_WATER);
        assert_eq!(d.in_flight_cap(), cap(256 << 20));
        d.release_mark(256 << 20);
        assert_eq!(d.in_flight_cap(), cap(DEFAULT_HIGH_WATER));
    }

    /// A file's state on `d`, for `/dev/null`: the bookkeeping without I/O.
    fn file_state(d: &Device, policy: Policy) -> Arc<FileState> {
        let fd = crate::own::move_high(std::fs::File::open("/dev/null").unwrap().into());
        let stat = dc_sys::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd)).unwrap();
        let described = crate::handle::Described { stat, flags: libc::O_RDWR, cached_pages: None, opened_as: None };
        Arc::new(FileState::new(fd, policy, &described, d, crate::file::Bind::Writable))
    }

    /// A file the flusher finished before its close was counted (the
    /// flusher saw the last piece of a file another thread was closing)
    /// is counted out when that close's own finish comes: nothing is left
    /// for `flush` to wait for.
    #[test]
    fn a_file_finished_before_its_close_was_counted_is_not_left_pending() {
        let d = Device::new(0, Submit::Loop, true, None);
        let f = file_state(&d, Policy::Inline);
        f.mark_closed();
        d.finish(&f, true);
        d.hand_over(&f);
        assert_eq!(d.closed_pending(), 0, "the close counted after the finish is still pending");
    }

    /// Of two opens of a file (on the sweep list) closing at once, one is
    /// the last, which drops the file whole: each looking for opens not
    /// yet marked closed, both found the other.
    #[test]
    fn of_two_opens_closing_at_once_one_is_the_last() {
        let d = Device::new(0, Submit::Loop, true, None);
        let (a, b) = (file_state(&d, Policy::Flusher), file_state(&d, Policy::Flusher));
        assert!(d.list_for_sweep(&a), "the first on an empty list");
        assert!(!d.list_for_sweep(&b) && !d.list_for_sweep(&b), "listed again");
        assert_eq!(lock(&d.swept)[&a.inode()].len(), 2);
        let first = d.other_opens(&a);
        assert!(first.any && first.writable, "the other open, not found: {first:?}");
        let last = d.other_opens(&b);
        assert!(!last.any, "the open closing first taken for one that stays: {last:?}");
    }

    /// Counts nothing will bring down (made up here: a bookkeeping bug)
    /// do not hold `flush` for ever: it gives up once the flusher has had
    /// nothing to do for a while, and says what it gave up on.
    #[test]
    fn flush_gives_up_on_counts_nothing_brings_down() {
        let d = Device::new(0, Submit::Loop, true, None);
        let before = crate::engine::unaccounted();
        d.count_dirtied(3);
        d.closed_pending.fetch_add(1, AcqRel);
        let t = Instant::now();
        d.flush();
        let took = t.elapsed();
        assert!(took >= UNACCOUNTED_AFTER && took < 4 * UNACCOUNTED_AFTER, "flush returned after {took:?}");
        let after = crate::engine::unaccounted();
        assert_eq!((after.0 - before.0, after.1 - before.1), (3, 1));
    }

    #[test]
    fn pieces_behind_a_syncfs_are_not_waited_for_before_it_returns() {
        let d = Device::new(0, Submit::Syncfs, true, None);
        let f = file_state(&d, Policy::Flusher);
        let mut q = Queue::default();
        for (page, after_syncfs) in [(0, 0), (1, 1), (2, 1), (3, 2)] {
            q.push(Piece::new(f.clone(), page..page + 1, 1, after_syncfs));
        }
        assert_eq!(q.pop_group(100, 0).len(), 1, "the piece started without a syncfs");
        assert!(q.pop_group(100, 0).is_empty(), "nothing before the first syncfs returned");
        assert_eq!(q.pop_group(100, 1).len(), 2, "the first syncfs's pieces, not the second's");
        assert!(q.pop_group(100, 1).is_empty());
        assert_eq!(q.pop_group(100, 2).len(), 1);
        assert_eq!(q.pages, 0);
    }
}
