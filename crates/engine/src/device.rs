//! One writeback domain (a device, by st_dev): the sharded dirty count, the
//! kick flag, the list of dirty files, and the flusher thread that serves it.
//!
//! The kick protocol is the v5 patch's: a writer adds its pages to its shard,
//! then tests the flag and only if it is clear test-and-sets it; only the
//! writer that set it wakes the flusher, so any number of concurrent kicks
//! cost one wakeup and no allocation. The flusher clears the flag *before* it
//! reads the count, so a write that lands during a batch re-arms it.
//!
//! Unlike the kernel, userspace cannot mark a page to be dropped when its
//! writeback ends, so the flusher also waits for each batch, in pieces, and
//! drops it. It starts the next batch before the last one is waited for:
//! serialising start, wait and drop left the disk without queued work at
//! the end of every batch.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::{self, Thread};
use std::time::Duration;

use io_uring::{opcode, types, IoUring};

use crate::file::{page_size, sync_file_range, FileState};
use crate::policy::{Policy, Submit};
use crate::stats::{Counters, Stats};

const SHARDS: usize = 16;

/// The flusher waits for a batch in pieces of this size, so a kick that
/// comes while a large batch is on the disk starts the next one early.
const CHUNK_BYTES: u64 = 8 << 20;

/// With writeback in flight, the next batch waits until a quarter of the
/// in-flight cap is free. Batches of whatever room a completed piece made
/// halved 32 writers' throughput (CPU and small I/Os); waiting for the whole
/// cap made every writer stall ~80 ms at once. Measured with 32 writers,
/// p99.9 against the kernel's: 1/2 of the cap 1.28x, 1/4 1.05x, 1/8 0.8x,
/// throughput alike.
const MIN_BATCH_DIVISOR: u64 = 4;

/// Writeback started and queued for the flusher to wait for and drop.
struct InFlight {
    file: Arc<FileState>,
    range: Range<u64>,
}

/// A counter on its own cache line, so writers on different CPUs do not
/// bounce one line between them.
#[repr(align(64))]
#[derive(Default)]
struct Shard(AtomicU64);

pub struct Device {
    pub dev: u64,
    /// How far past a read kernel readahead may reach on this device.
    pub readahead_pages: u64,
    /// Pages the library dirtied, per shard (monotonic).
    dirtied: [Shard; SHARDS],
    /// Pages seen clean again (monotonic). dirtied - cleaned = dirty now.
    cleaned: AtomicU64,
    /// Of those not clean, pages whose writeback has started (in some
    /// file's `submitted`): no longer dirty, not yet waited for and dropped.
    in_writeback: AtomicU64,
    /// The one state bit that coalesces kicks.
    kick: AtomicBool,
    /// A writer is stalled at the high-water mark: write back everything.
    urgent: AtomicBool,
    /// The high-water marks (bytes) of the handles open here: mark -> how
    /// many handles. The lowest caps the writeback in flight.
    marks: Mutex<BTreeMap<u64, usize>>,
    /// Files with library-dirty pages, oldest first.
    dirty_files: Mutex<Vec<Arc<FileState>>>,
    flusher: OnceLock<Thread>,
    submit: Submit,
    /// Batches started, for writers waiting at the high-water mark.
    batches_started: Mutex<u64>,
    batch_started: Condvar,
    pub counters: Counters,
}

thread_local! {
    static SHARD: usize = {
        // Spread threads over shards by the address of a thread-local.
        let probe = 0u8;
        (&probe as *const u8 as usize >> 12) % SHARDS
    };
}

impl Device {
    pub fn new(dev: u64, submit: Submit) -> Arc<Device> {
        // Async readahead runs a whole window beyond the one being read,
        // and POSIX_FADV_SEQUENTIAL (fio's and dcload's default for
        // sequential jobs) doubles the window: with only two windows
        // classified, a sequential reader's readahead outran them, and the
        // pages it brought in were taken for someone else's and never dropped.
        let read_ahead = dc_sys::block_device_of(dev).map_or(128 << 10, |b| b.read_ahead);
        Arc::new(Device {
            dev,
            readahead_pages: 4 * read_ahead.max(128 << 10) / page_size(),
            dirtied: Default::default(),
            cleaned: AtomicU64::new(0),
            in_writeback: AtomicU64::new(0),
            kick: AtomicBool::new(false),
            urgent: AtomicBool::new(false),
            marks: Mutex::new(BTreeMap::new()),
            dirty_files: Mutex::new(Vec::new()),
            flusher: OnceLock::new(),
            submit,
            batches_started: Mutex::new(0),
            batch_started: Condvar::new(),
            counters: Counters::default(),
        })
    }

    /// Library-dirty pages on this device not yet seen clean.
    pub fn dirty_pages(&self) -> u64 {
        let dirtied: u64 = self.dirtied.iter().map(|s| s.0.load(Acquire)).sum();
        dirtied.saturating_sub(self.cleaned.load(Acquire))
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.counters.snapshot();
        s.dirty_now = self.dirty_pages() * page_size();
        s
    }

    /// Counts `pages` newly dirtied by the library; `first` says the file had
    /// no library-dirty pages before, so it joins the end of the dirty list.
    pub fn account_dirty(&self, file: &Arc<FileState>, pages: u64, first: bool) {
        file.dirty_pages.fetch_add(pages, AcqRel);
        SHARD.with(|&i| self.dirtied[i].0.fetch_add(pages, AcqRel));
        if first {
            let mut list = lock(&self.dirty_files);
            if !file.queued.swap(true, AcqRel) {
                list.push(file.clone());
            }
        }
    }

    /// Library pages still dirty: not clean, and writeback not started.
    fn dirty_not_started(&self) -> u64 {
        self.dirty_pages().saturating_sub(self.in_writeback.load(Acquire))
    }

    pub fn started_writeback(&self, pages: u64) {
        self.in_writeback.fetch_add(pages, AcqRel);
    }

    pub fn finished_writeback(&self, pages: u64) {
        if pages > 0 {
            self.in_writeback.fetch_sub(pages, AcqRel);
        }
    }

    /// Counts pages of `file` seen clean again.
    pub fn account_clean(&self, file: &FileState, pages: u64) {
        if pages > 0 {
            file.dirty_pages.fetch_sub(pages, AcqRel);
            self.cleaned.fetch_add(pages, AcqRel);
        }
    }

    /// Test, then test-and-set: only the writer that sets the flag wakes the
    /// flusher. Returns whether this kick woke it.
    pub fn kick(self: &Arc<Device>, file: &FileState) -> bool {
        if file.policy == Policy::PerFile {
            file.kicked.store(true, Release);
        }
        if !self.kick.load(Acquire) && !self.kick.swap(true, AcqRel) {
            Counters::add(&self.counters.kicks, 1);
            Counters::add(&file.counters.kicks, 1);
            self.flusher_thread().unpark();
            true
        } else {
            Counters::add(&self.counters.coalesced_kicks, 1);
            Counters::add(&file.counters.coalesced_kicks, 1);
            false
        }
    }

    fn flusher_thread(self: &Arc<Device>) -> &Thread {
        self.flusher.get_or_init(|| {
            let dev = Arc::downgrade(self);
            thread::Builder::new()
                .name(format!("dc-flush-{:x}", self.dev))
                .spawn(move || flusher_main(dev))
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
        if self.dirty_not_started() <= limit {
            return;
        }
        Counters::add(&self.counters.highwater_stalls, 1);
        Counters::add(&file.counters.highwater_stalls, 1);
        let mut batches = lock(&self.batches_started);
        let entered = *batches;
        // Past two marks, only the level releases: the bound that holds
        // however small the batches get.
        while self.dirty_not_started() > limit && (*batches == entered || self.dirty_not_started() > 2 * limit) {
            self.urgent.store(true, Release);
            if !self.kick.swap(true, AcqRel) {
                self.flusher_thread().unpark();
            }
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
        let mut marks = lock(&self.marks);
        *marks.entry(high_water).or_insert(0) += 1;
    }

    /// That handle is gone: the cap rises again if its mark was the lowest
    /// (before, the lowest mark ever seen capped the device for good).
    pub fn release_mark(&self, high_water: u64) {
        let mut marks = lock(&self.marks);
        if let Some(n) = marks.get_mut(&high_water) {
            *n -= 1;
            if *n == 0 {
                marks.remove(&high_water);
            }
        }
    }

    /// Pages of writeback the flusher keeps in flight at most.
    fn in_flight_cap(&self) -> u64 {
        let lowest = lock(&self.marks).keys().next().copied();
        (lowest.unwrap_or(crate::policy::DEFAULT_HIGH_WATER) / page_size()).max(1)
    }

    /// Whether some file has pages waiting for a drop retry.
    fn drops_pending(&self) -> bool {
        lock(&self.dirty_files).iter().any(|f| !f.lock().retry_drop.is_empty())
    }

    /// Starts one batch: takes `budget` pages from the oldest dirty files
    /// (range-cyclic within each) and starts their writeback together, and
    /// queues them, with any writeback a writer started itself, for
    /// `complete`. Does not wait for the disk: the previous batch may still
    /// be on it, which keeps the device queue full between batches. Returns
    /// the pages taken against the budget.
    fn start_batch(&self, budget: u64, urgent: bool, in_flight: &mut VecDeque<InFlight>) -> u64 {
        let mut left = budget;
        let files: Vec<Arc<FileState>> = lock(&self.dirty_files).clone();
        let mut work: Vec<(Arc<FileState>, Vec<Range<u64>>)> = Vec::new();
        let chunk = (CHUNK_BYTES / page_size()).max(1);
        for f in &files {
            let _exclusive = lock(&f.pass_lock);
            let kicked = f.kicked.swap(false, AcqRel);
            let mut p = f.lock();
            if !p.retry_drop.is_empty() {
                let again: Vec<Range<u64>> = std::mem::take(&mut p.retry_drop).iter().collect();
                drop(p);
                f.drop_clean(&again);
                p = f.lock();
            }
            // Writeback a writer started (inline, lazy): wait for it and drop.
            let mut to_wait: Vec<Range<u64>> = Vec::new();
            for r in p.submitted.iter() {
                to_wait.extend(p.awaited.gaps(r));
            }
            let eligible = urgent
                || match f.policy {
                    Policy::PerFile => kicked,
                    Policy::Lazy | Policy::Inline => false,
                    Policy::Flusher | Policy::Kernel => true,
                };
            let mut taken = Vec::new();
            if eligible && left > 0 && !p.dirty.is_empty() {
                let served_by_writer = f.policy.writer_starts_writeback();
                let cursor = p.cursor;
                taken = p.dirty.take_cyclic(cursor, if served_by_writer { u64::MAX } else { left });
                if let Some(last) = taken.last() {
                    p.cursor = last.end;
                }
                left = left.saturating_sub(taken.iter().map(|r| r.end - r.start).sum());
            }
            // A kicked per-file file the budget did not cover stays kicked
            // for the follow-up batch.
            if kicked && !p.dirty.is_empty() {
                f.kicked.store(true, Release);
            }
            // A page both rewritten and already under writeback is one page.
            let mut merged = 0;
            for r in &taken {
                let added = p.submitted.insert(r.clone());
                self.started_writeback(added);
                merged += r.end - r.start - added;
                to_wait.extend(p.awaited.gaps(r.clone()));
            }
            for r in &to_wait {
                p.awaited.insert(r.clone());
            }
            drop(p);
            self.account_clean(f, merged);
            for r in to_wait {
                let mut at = r.start;
                while at < r.end {
                    let end = r.end.min(at + chunk);
                    in_flight.push_back(InFlight { file: f.clone(), range: at..end });
                    at = end;
                }
            }
            if !taken.is_empty() {
                Counters::add(&f.counters.passes, 1);
                work.push((f.clone(), taken));
            }
        }
        // The taken pages no longer count against the high-water mark:
        // release stalled writers before the submission takes its CPU time.
        *lock(&self.batches_started) += 1;
        self.batch_started.notify_all();
        if !work.is_empty() {
            Counters::add(&self.counters.passes, 1);
            self.start_writeback(&work);
        }
        // Forget files with nothing left to do.
        let mut list = lock(&self.dirty_files);
        list.retain(|f| {
            let p = f.lock();
            let keep = !p.dirty.is_empty() || !p.submitted.is_empty() || !p.retry_drop.is_empty();
            if !keep {
                f.queued.store(false, Release);
            }
            keep
        });
        budget - left
    }

    /// Waits for one queued piece of writeback, reports its error, drops
    /// what is clean and ours, and accounts it clean.
    fn complete(&self, c: InFlight) {
        let f = &c.file;
        let _exclusive = lock(&f.pass_lock);
        // An error is latched on the file; the pages are still accounted
        // clean so the high-water mark cannot wedge.
        f.wait_range(&c.range);
        let n: u64 = {
            let mut p = f.lock();
            p.awaited.remove(c.range.clone());
            p.submitted.remove(c.range.clone()).iter().map(|r| r.end - r.start).sum()
        };
        self.finished_writeback(n);
        let ps = page_size();
        Counters::add(&f.counters.bytes_written_back, n * ps);
        Counters::add(&self.counters.bytes_written_back, n * ps);
        // Drop before accounting clean: whoever waits for dirty_now to
        // reach zero then finds the pages gone, not about to go.
        let before = f.counters.bytes_dropped.load(Relaxed);
        f.drop_clean(std::slice::from_ref(&c.range));
        Counters::add(&self.counters.bytes_dropped, f.counters.bytes_dropped.load(Relaxed) - before);
        self.account_clean(f, n);
    }

    /// Starts writeback of every range of a batch, together.
    fn start_writeback(&self, work: &[(Arc<FileState>, Vec<Range<u64>>)]) {
        let ps = page_size();
        let pieces = work.iter().flat_map(|(f, rs)| rs.iter().map(move |r| (f, r.start * ps, (r.end - r.start) * ps)));
        if self.submit == Submit::Uring {
            if let Some(ring) = FLUSH_RING.with(|r| r.borrow_mut().take()) {
                let ring = submit_uring(ring, pieces.clone());
                FLUSH_RING.with(|r| *r.borrow_mut() = ring);
                return;
            }
        }
        for (f, off, len) in pieces {
            if let Err(e) = sync_file_range(f.fd(), off, len, libc::SYNC_FILE_RANGE_WRITE) {
                f.latch(e.raw_os_error().unwrap_or(libc::EIO));
            }
        }
    }
}

thread_local! {
    /// The flusher thread's ring, created on its first use.
    static FLUSH_RING: std::cell::RefCell<Option<IoUring>> = std::cell::RefCell::new(IoUring::new(256).ok());
}

/// Queues `IORING_OP_SYNC_FILE_RANGE(WRITE)` for every piece and submits them
/// together; errors are latched on their files. Returns the ring, or `None`
/// if it broke (the caller then falls back to the loop for good).
fn submit_uring<'a>(
    mut ring: IoUring,
    pieces: impl Iterator<Item = (&'a Arc<FileState>, u64, u64)> + Clone,
) -> Option<IoUring> {
    // The SQE length is 32 bits: split larger ranges.
    const CHUNK: u64 = 1 << 30;
    let mut files: Vec<&Arc<FileState>> = Vec::new();
    let split = pieces.flat_map(|(f, off, len)| {
        (0..len.div_ceil(CHUNK)).map(move |i| (f, off + i * CHUNK, (len - i * CHUNK).min(CHUNK)))
    });
    let mut in_flight = 0usize;
    for (f, off, len) in split {
        let entry = opcode::SyncFileRange::new(types::Fd(std::os::fd::AsRawFd::as_raw_fd(&f.fd())), len as u32)
            .offset(off)
            .flags(libc::SYNC_FILE_RANGE_WRITE)
            .build()
            .user_data(files.len() as u64);
        files.push(f);
        // SAFETY: the SQE references no memory; the fd outlives the batch.
        while unsafe { ring.submission().push(&entry) }.is_err() {
            in_flight -= reap(&mut ring, &files, in_flight.min(1)).ok()?;
        }
        in_flight += 1;
    }
    while in_flight > 0 {
        in_flight -= reap(&mut ring, &files, in_flight).ok()?;
    }
    Some(ring)
}

/// Submits what is queued, waits for `want` completions and latches errors.
fn reap(ring: &mut IoUring, files: &[&Arc<FileState>], want: usize) -> io::Result<usize> {
    match ring.submit_and_wait(want) {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
        Err(e) => return Err(e),
    }
    let mut n = 0;
    for cqe in ring.completion() {
        if cqe.result() < 0 {
            files[cqe.user_data() as usize].latch(-cqe.result());
        }
        n += 1;
    }
    Ok(n)
}

fn flusher_main(dev: std::sync::Weak<Device>) {
    // Writeback started and not yet waited for, oldest first.
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    // Drop retries left: the kernel may hold a just-written folio for a few
    // milliseconds (ext4 finishing the I/O), so retry for up to ~1 s.
    let mut retries = 0;
    loop {
        let Some(d) = dev.upgrade() else { return };
        // A kick starts the next batch even while the last is on the disk,
        // which keeps the device queue full. At most one high-water mark
        // stays in flight, so the library's pages in the cache stay under
        // about two marks, and a batch takes only the room there is.
        // Clear the bit before reading the count: writes during the batch
        // set it again and get a follow-up.
        let cap = d.in_flight_cap();
        let room = cap.saturating_sub(in_flight.iter().map(|c| c.range.end - c.range.start).sum());
        if room >= (cap / MIN_BATCH_DIVISOR).max(1) && d.kick.swap(false, AcqRel) {
            let urgent = d.urgent.swap(false, AcqRel);
            let counted = d.dirty_not_started();
            let taken = d.start_batch(counted.min(room), urgent, &mut in_flight);
            // The room cut this batch short: the rest was counted, and its
            // kick consumed, so come back for it once there is room again
            // (no later write may kick).
            if counted > room && taken >= room {
                d.kick.store(true, Release);
            }
            retries = 100;
            continue;
        }
        if let Some(c) = in_flight.pop_front() {
            d.complete(c);
            continue;
        }
        if retries > 0 && d.drops_pending() {
            retries -= 1;
            drop(d);
            thread::park_timeout(Duration::from_millis(10));
            if let Some(d) = dev.upgrade() {
                d.start_batch(0, false, &mut in_flight);
            }
            continue;
        }
        drop(d);
        thread::park();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Device {
    /// Takes a closing file off the dirty list, so its descriptor closes now.
    pub fn forget(&self, file: &Arc<FileState>) {
        let mut list = lock(&self.dirty_files);
        list.retain(|f| !Arc::ptr_eq(f, file));
        file.queued.store(false, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::DEFAULT_HIGH_WATER;

    #[test]
    fn the_in_flight_cap_follows_the_lowest_open_mark() {
        let d = Device::new(0, Submit::Loop);
        let ps = page_size();
        assert_eq!(d.in_flight_cap(), DEFAULT_HIGH_WATER / ps, "no handle: the default mark");
        d.hold_mark(DEFAULT_HIGH_WATER);
        d.hold_mark(1 << 20);
        d.hold_mark(1 << 20);
        assert_eq!(d.in_flight_cap(), (1 << 20) / ps);
        d.release_mark(1 << 20);
        assert_eq!(d.in_flight_cap(), (1 << 20) / ps, "one handle with the small mark is still open");
        d.release_mark(1 << 20);
        assert_eq!(d.in_flight_cap(), DEFAULT_HIGH_WATER / ps, "the cap rises when the small mark's handles close");
        d.hold_mark(256 << 20);
        assert_eq!(d.in_flight_cap(), DEFAULT_HIGH_WATER / ps);
        d.release_mark(DEFAULT_HIGH_WATER);
        assert_eq!(d.in_flight_cap(), (256 << 20) / ps);
        d.release_mark(256 << 20);
        assert_eq!(d.in_flight_cap(), DEFAULT_HIGH_WATER / ps);
    }
}
