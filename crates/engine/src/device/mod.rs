//! One writeback domain (a device, by st_dev): the sharded dirty count, the
//! kick flag, the list of dirty files, and the waits of writers and callers
//! on them. The flusher thread that serves it is `flusher`'s; its io_uring
//! rings are `rings`'.
//!
//! The kick protocol is the flusher-kick design's: a writer adds its pages
//! to its shard, then tests the flag and only if it is clear test-and-sets
//! it; only the writer that set it wakes the flusher, so any number of
//! concurrent kicks cost one wakeup and no allocation. The flusher clears
//! the flag *before* it reads the count, so a write that lands during a
//! batch re-arms it.
//!

mod flusher;
mod rings;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::file::{page_size, FileState, OtherOpens, Outcome, ReadBatch};
use crate::locked::Inode;
use crate::own::OwnFd;
use crate::policy::{Policy, Submit};
use crate::stats::{Counters, Stats};
use crate::wakeup::Wakeup;

const SHARDS: usize = 16;

/// The longest `stop_waits` outwaits a wait in flight: far beyond any
/// batch's writeback on a working disk.
const STOP_WAITS_LIMIT: Duration = Duration::from_secs(60);

/// How long `flush` waits on counts while the flusher has nothing to do
/// before it calls them unaccounted. Waking it takes a millisecond or
/// two; nothing the flusher does leaves it empty-handed for longer than
/// one of its turns.
const UNACCOUNTED_AFTER: Duration = Duration::from_secs(2);

/// Writeback in flight, at most, in high-water marks (see `in_flight_cap`).
const IN_FLIGHT_MARKS: u64 = 3;

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

/// The files with unseen I/O, swept every `SWEEP_INTERVAL`.
#[derive(Default)]
struct SweepList {
    /// The opens of each file, by its inode (a file's pages are all of its
    /// opens').
    files: HashMap<Inode, Vec<SweptOpen>>,
    /// The flusher comes back to sweep without a wake-up (see `arm_sweep`).
    armed: bool,
    /// When the flusher last found files listed.
    listed_at: Option<Instant>,
}

/// Late errors of this process's devices not yet returned to anyone: a
/// close without a handle (`crate::made`) looks for its device's only
/// while there is one.
pub(crate) static LATE_UNREPORTED: AtomicUsize = AtomicUsize::new(0);

/// How long the flusher keeps sweeping after the list empties. A program
/// that writes many files one after another (tar, cp -a) lists each at its
/// open and takes it off at its close: disarmed as soon as it empties, the
/// list could wake an idle flusher for every file.
const SWEEP_LINGER: Duration = Duration::from_secs(1);

/// An open on the sweep list. While another open of its file stays, it
/// stays until its writeback is finished: the other's sweeps count its
/// writes against the file's dirty pages until then. The last open of a
/// file takes the file off at its close: its close waits for and drops
/// what it finds of the whole file (`await_foreign_writeback`), and a
/// mapping keeps the handle open, so sweeps after the close find nothing
/// that close does not.
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
    /// calls asked of it, the last that returned, and when the last was
    /// asked.
    syncfs_thread: OnceLock<Sender<(OwnFd, u64)>>,
    syncfs_asked: AtomicU64,
    syncfs_done: AtomicU64,
    syncfs_asked_at: Mutex<Instant>,
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
    swept: Mutex<SweepList>,
    /// What readers have read, for the flusher to drop.
    read_drops: Mutex<Vec<(Arc<FileState>, ReadBatch)>>,
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
            syncfs_asked_at: Mutex::new(Instant::now()),
            syncfs_failed: Mutex::new(VecDeque::new()),
            batches_started: Mutex::new(0),
            batch_started: Condvar::new(),
            closed_pending: AtomicUsize::new(0),
            settled: Mutex::new(()),
            file_done: Condvar::new(),
            late: Mutex::new(Vec::new()),
            waiters: AtomicUsize::new(0),
            count_waiters: AtomicUsize::new(0),
            swept: Mutex::new(SweepList::default()),
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
            crate::engine::spawn_thread(format!("dc-flush-{:x}", self.dev), move || flusher::flusher_main(dev))
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

    /// The lowest high-water mark of the handles open here (the default
    /// where none is).
    fn lowest_mark(&self) -> u64 {
        lock(&self.marks).keys().next().copied().unwrap_or(crate::policy::DEFAULT_HIGH_WATER)
    }

    /// Whether the library's pages not yet started here are past half the
    /// lowest mark, where a batch takes what `lazy` writers skipped.
    pub(super) fn over_background_mark(&self) -> bool {
        self.dirty_not_started() > self.lowest_mark() / 2 / page_size()
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
        (IN_FLIGHT_MARKS * self.lowest_mark() / page_size()).max(1)
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

    /// A reader read `batch` of `file`: the flusher drops it. When more
    /// than `limit` pages read wait for the flusher (it shares its CPU with
    /// busier threads), the reader drops them all itself, as a writer
    /// waits at its high-water mark: with the test suite on 8 threads on
    /// two CPUs, a reader left 88-184 MiB of a 256 MiB file cached while
    /// the flusher got no time to drop it.
    pub fn drop_later(self: &Arc<Device>, file: &Arc<FileState>, batch: ReadBatch, limit: u64) {
        let (first, overdue) = self.queue_read_drop(file, batch, limit);
        for (f, b) in overdue {
            crate::handoff::escrow(&f);
            f.drop_unchecked(b.range);
        }
        if first {
            self.wake_flusher();
        }
    }

    /// Queues `batch` for the flusher. Returns whether it is alone in the
    /// queue (the flusher is to be woken), and everything queued if more
    /// than `limit` pages read wait. Counted by the pages read, not by the
    /// ranges' lengths: the range of scattered 4 KiB reads spans most of
    /// the file, and counted so, every batch was the reader's own to drop
    /// (8% of a random reader's CPU): 4 KiB random reads at depth 1 made
    /// 0.88x the kernel's RWF_DONTCACHE IOPS, 0.98x counted by pages read
    /// and in smaller batches (`FileState::drop_behind`).
    fn queue_read_drop(
        &self,
        file: &Arc<FileState>,
        batch: ReadBatch,
        limit: u64,
    ) -> (bool, Vec<(Arc<FileState>, ReadBatch)>) {
        let mut drops = lock(&self.read_drops);
        drops.push((file.clone(), batch));
        let waiting: u64 = drops.iter().map(|(_, b)| b.read).sum();
        if waiting > limit {
            (false, std::mem::take(&mut *drops))
        } else {
            (drops.len() == 1, Vec::new())
        }
    }

    /// Drops what readers have read.
    fn drop_read(&self) {
        let drops = std::mem::take(&mut *lock(&self.read_drops));
        for (f, b) in drops {
            crate::handoff::escrow(&f);
            f.drop_unchecked(b.range);
        }
    }

    /// `file` may be written by paths the library does not see: sweep it.
    /// The flusher sweeps every `SWEEP_INTERVAL` while armed; only a file
    /// listed while it is not needs to wake it (a wake-up per open was a
    /// futex call per file for tar).
    pub fn sweep_file(self: &Arc<Device>, file: &Arc<FileState>) {
        if self.list_for_sweep(file) {
            self.wake_flusher();
        }
    }

    /// Puts `file` on the sweep list, once; returns whether the flusher
    /// must be woken to sweep it. A second open of a file there makes each
    /// a working one (`FileState::shares_the_file`).
    fn list_for_sweep(&self, file: &Arc<FileState>) -> bool {
        if !file.set_unseen() {
            return false;
        }
        let mut list = lock(&self.swept);
        let wake = !std::mem::replace(&mut list.armed, true);
        let opens = list.files.entry(file.inode()).or_default();
        opens.push(SweptOpen { file: Arc::downgrade(file), closing: false });
        let open = || opens.iter().filter(|o| !o.closing).filter_map(|o| o.file.upgrade());
        if open().nth(1).is_some() {
            open().for_each(|f| f.shares_the_file());
        }
        wake
    }

    /// Whether the flusher, going to sleep with nothing else to do, comes
    /// back to sweep in `SWEEP_INTERVAL`: while files are listed and for
    /// `SWEEP_LINGER` after. If not, listing a file wakes it.
    pub(super) fn arm_sweep(&self) -> bool {
        let mut list = lock(&self.swept);
        let now = Instant::now();
        if !list.files.is_empty() {
            list.listed_at = Some(now);
        }
        list.armed = list.listed_at.is_some_and(|t| now.duration_since(t) < SWEEP_LINGER);
        list.armed
    }

    /// At `file`'s close: the opens of its file on the sweep list that are
    /// not closing, and `file` closing from now on; the last takes the file
    /// off the list (see `SweptOpen`). Under the list's lock, so of two
    /// opens closing at once one is the last.
    fn other_opens(&self, file: &Arc<FileState>) -> OtherOpens {
        if !file.is_unseen() {
            return OtherOpens::default();
        }
        let mut list = lock(&self.swept);
        let mut others = OtherOpens::default();
        for open in list.files.get_mut(&file.inode()).into_iter().flatten() {
            let Some(f) = open.file.upgrade() else { continue };
            if Arc::ptr_eq(&f, file) {
                open.closing = true;
            } else if !open.closing {
                others.any = true;
                others.writable |= f.is_writable();
            }
        }
        if !others.any {
            list.files.remove(&file.inode());
        }
        others
    }

    /// Sweeps the files with unseen I/O, the opens of each file together
    /// (`FileState::sweep_opens`).
    fn sweep(self: &Arc<Device>) {
        let files: Vec<Vec<Arc<FileState>>> = {
            let mut list = lock(&self.swept);
            list.files.retain(|_, opens| {
                opens.retain(|o| o.file.upgrade().is_some_and(|f| !f.outcome().is_done()));
                !opens.is_empty()
            });
            list.files.values().map(|opens| opens.iter().filter_map(|o| o.file.upgrade()).collect()).collect()
        };
        for pieces in files.iter().map(|opens| FileState::sweep_opens(opens)) {
            for f in &pieces {
                self.enlist(f);
            }
            if !pieces.is_empty() {
                self.kick.store(true, Release);
            }
        }
    }

    /// A closed file's writeback failed. Like the kernel's per-file error
    /// sequence, a file has at most one error waiting to be returned: two
    /// pieces of it failing before anyone looked are one error, returned
    /// once; a failure after that one was returned is a new one.
    pub fn push_late_error(&self, errno: i32, path: PathBuf) {
        let mut late = lock(&self.late);
        if !late.iter().any(|e| !e.reported && e.path == path) {
            late.push(LateError { errno, path, reported: false });
            LATE_UNREPORTED.fetch_add(1, AcqRel);
        }
    }

    /// The oldest late error not yet returned to anyone, marked returned.
    pub fn take_late_error(&self) -> Option<io::Error> {
        let mut late = lock(&self.late);
        let e = late.iter_mut().find(|e| !e.reported)?;
        e.reported = true;
        LATE_UNREPORTED.fetch_sub(1, AcqRel);
        Some(io::Error::from_raw_os_error(e.errno))
    }

    /// Every late error so far (for the exit report).
    pub fn late_errors(&self) -> Vec<LateError> {
        lock(&self.late).clone()
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
    pub(super) fn file_state(d: &Device, policy: Policy) -> Arc<FileState> {
        let fd = crate::own::move_high(std::fs::File::open("/dev/null").unwrap().into());
        let stat = dc_sys::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd)).unwrap();
        let described =
            crate::handle::Described { stat, flags: libc::O_RDWR, cached_pages: None, opened_as: None, made: false };
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
        assert_eq!(lock(&d.swept).files[&a.inode()].len(), 2);
        let first = d.other_opens(&a);
        assert!(first.any && first.writable, "the other open, not found: {first:?}");
        assert_eq!(lock(&d.swept).files[&a.inode()].len(), 2, "kept while the other is open");
        let last = d.other_opens(&b);
        assert!(!last.any, "the open closing first taken for one that stays: {last:?}");
        assert!(lock(&d.swept).files.is_empty(), "the last close takes the file off");
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

    /// `lazy` starts no writeback of a file while the library's own
    /// writeback of it is in flight, a batch's as much as a writer's, until
    /// the flusher has waited for it. The kernel is not asked meanwhile: of
    /// `/dev/null` it would say nothing is under writeback.
    #[test]
    fn lazy_skips_while_the_files_writeback_is_in_flight() {
        let d = Device::new(0, Submit::Loop, true, None);
        let f = file_state(&d, Policy::Lazy);
        assert!(f.writeback_idle(), "nothing started yet");
        f.dirtied(&d, 0, 64 * page_size());
        let batch = f.take(&d, 16, 1024, false);
        assert_eq!(batch.pages, 16);
        assert!(!f.writeback_idle(), "a batch of the flusher's is in flight");
        f.waited(&d, &(0..16), Ok(()));
        assert!(f.writeback_idle(), "the batch was waited for");
        f.writer_started(&d, 16..32);
        assert!(!f.writeback_idle(), "the writer's own start is in flight");
        let queued = f.take(&d, 0, 1024, false);
        assert_eq!(queued.pieces.len(), 1, "the writer's start is queued to wait for");
        assert!(!f.writeback_idle(), "queued, not yet waited for");
        f.waited(&d, &(16..32), Ok(()));
        assert!(f.writeback_idle());
    }

    /// A batch leaves what `lazy` writers skipped to them up to half the
    /// lowest mark of pages not yet started, and takes their files whole
    /// past it.
    #[test]
    fn lazy_files_go_to_a_batch_past_half_the_mark() {
        let d = Device::new(0, Submit::Loop, true, None);
        let f = file_state(&d, Policy::Lazy);
        d.hold_mark(64 * page_size());
        f.dirtied(&d, 0, 32 * page_size());
        assert!(!d.over_background_mark(), "at half the mark");
        assert_eq!(d.file_budget(&f, false, false, 100), 0);
        f.dirtied(&d, 32 * page_size(), page_size());
        assert!(d.over_background_mark(), "past half the mark");
        assert_eq!(d.file_budget(&f, false, true, 100), u64::MAX);
        assert_eq!(d.file_budget(&file_state(&d, Policy::Inline), false, true, 100), 0, "an inline writer starts all");
    }

    /// 4 KiB reads, the `i`th of page `page(i)`: the batch due, and how
    /// many reads it took.
    fn read_until_a_batch(f: &FileState, page: impl Fn(u64) -> u64, batch: u64) -> (ReadBatch, u64) {
        (0..4 * batch)
            .find_map(|i| f.drop_behind(page(i)..page(i) + 1, batch).map(|b| (b, i + 1)))
            .expect("no batch came")
    }

    /// Scattered reads are dropped in small batches, counted by what they
    /// read: the hull of 512 reads 97 pages apart spans 49,568 pages, and
    /// queued for the flusher it leaves nothing overdue for the reader.
    #[test]
    fn scattered_reads_go_in_small_batches_counted_by_pages_read() {
        let d = Device::new(0, Submit::Loop, true, None);
        let f = file_state(&d, Policy::Flusher);
        let (b, reads) = read_until_a_batch(&f, |i| i * 97, 8192);
        assert_eq!(reads, 512);
        assert_eq!(b, ReadBatch { range: 0..511 * 97 + 1, read: 512, scattered: true });
        let (first, overdue) = d.queue_read_drop(&f, b, 8192);
        assert!(first && overdue.is_empty(), "a batch of 512 pages read is the flusher's to drop");
        let (b, _) = read_until_a_batch(&f, |i| i * 97, 8192);
        let (first, overdue) = d.queue_read_drop(&f, ReadBatch { read: 8192, ..b }, 8192);
        assert!(!first && overdue.len() == 2, "more than a batch read waits: the reader drops it all");
    }

    /// A sequential reader's pages, and those of a few streams in one file,
    /// go a half mark at a time: the run from the lowest page, less a lag
    /// for a large folio straddling its end.
    #[test]
    fn streams_go_in_batches_of_a_half_mark() {
        let d = Device::new(0, Submit::Loop, true, None);
        let f = file_state(&d, Policy::Flusher);
        let (b, reads) = read_until_a_batch(&f, |i| i, 8192);
        assert_eq!(reads, 8192);
        assert!(b.range.start == 0 && (7936..8192).contains(&b.range.end) && b.read == b.range.end, "{b:?}");
        let g = file_state(&d, Policy::Flusher);
        // Two streams 100,000 pages apart, read in turn.
        let (b, reads) = read_until_a_batch(&g, |i| i / 2 + (i % 2) * 100_000, 8192);
        assert_eq!(reads, 8192, "two streams taken for scattered reads");
        assert!(
            b.range.start == 0 && b.range.end <= 4096 && b.read == b.range.end,
            "not the first stream's run: {b:?}"
        );
    }
}
