//! One writeback domain (a device, by st_dev): the sharded dirty count, the
//! kick flag, the list of dirty files, and the flusher thread that serves it.
//!
//! The kick protocol is the v5 patch's: a writer adds its pages to its shard,
//! then tests the flag and only if it is clear test-and-sets it; only the
//! writer that set it wakes the flusher, so any number of concurrent kicks
//! cost one wakeup and no allocation. The flusher clears the flag *before* it
//! reads the count, so a write that lands during a pass re-arms it.

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
    /// Files with library-dirty pages, oldest first.
    dirty_files: Mutex<Vec<Arc<FileState>>>,
    flusher: OnceLock<Thread>,
    submit: Submit,
    /// Pass generation, for writers waiting at the high-water mark.
    passes_done: Mutex<u64>,
    pass_finished: Condvar,
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
        // Async readahead can run a whole window beyond the synchronous one.
        let read_ahead = dc_sys::block_device_of(dev).map_or(128 << 10, |b| b.read_ahead);
        Arc::new(Device {
            dev,
            readahead_pages: 2 * read_ahead.max(128 << 10) / page_size(),
            dirtied: Default::default(),
            cleaned: AtomicU64::new(0),
            in_writeback: AtomicU64::new(0),
            kick: AtomicBool::new(false),
            urgent: AtomicBool::new(false),
            dirty_files: Mutex::new(Vec::new()),
            flusher: OnceLock::new(),
            submit,
            passes_done: Mutex::new(0),
            pass_finished: Condvar::new(),
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
    /// counting them stalled every writer for a whole flusher pass (wait and
    /// drop included) while the disk was busy anyway. The flusher waits for
    /// one pass at a time, so the library's pages in the cache stay under
    /// about two high-water marks.
    pub fn throttle(self: &Arc<Device>, file: &FileState, high_water: u64, headroom: u64) {
        let limit = high_water.saturating_sub(headroom) / page_size();
        if self.dirty_not_started() <= limit {
            return;
        }
        Counters::add(&self.counters.highwater_stalls, 1);
        Counters::add(&file.counters.highwater_stalls, 1);
        let mut done = lock(&self.passes_done);
        while self.dirty_not_started() > limit {
            self.urgent.store(true, Release);
            if !self.kick.swap(true, AcqRel) {
                self.flusher_thread().unpark();
            }
            done = self.pass_finished.wait_timeout(done, Duration::from_millis(20)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Whether some file has pages waiting for a drop retry.
    fn drops_pending(&self) -> bool {
        lock(&self.dirty_files).iter().any(|f| !f.lock().retry_drop.is_empty())
    }

    /// One flusher pass: write back `budget` pages from the oldest dirty
    /// files, wait, report errors, drop what is clean and ours.
    fn pass(&self, mut budget: u64, urgent: bool) {
        let files: Vec<Arc<FileState>> = lock(&self.dirty_files).clone();
        let _exclusive: Vec<_> = files.iter().map(|f| lock(&f.pass_lock)).collect();
        let mut work: Vec<(Arc<FileState>, Vec<Range<u64>>)> = Vec::new();
        let mut waits: Vec<(Arc<FileState>, Vec<Range<u64>>)> = Vec::new();
        for f in &files {
            let served_by_writer = f.policy.writer_starts_writeback();
            let kicked = f.kicked.swap(false, AcqRel);
            let mut p = f.lock();
            if !p.retry_drop.is_empty() {
                let again: Vec<Range<u64>> = p.retry_drop.iter().collect();
                p.retry_drop = Default::default();
                drop(p);
                f.drop_clean(&again);
                p = f.lock();
            }
            // Writer-started writeback: wait for all of it and drop.
            if !p.submitted.is_empty() {
                let all: Vec<Range<u64>> = p.submitted.iter().collect();
                waits.push((f.clone(), all));
            }
            let eligible = urgent
                || match f.policy {
                    Policy::PerFile => kicked,
                    Policy::Lazy | Policy::Inline => false,
                    Policy::Flusher | Policy::Kernel => true,
                };
            if !eligible || budget == 0 || p.dirty.is_empty() {
                continue;
            }
            let cursor = p.cursor;
            let taken = p.dirty.take_cyclic(cursor, if served_by_writer { u64::MAX } else { budget });
            if let Some(last) = taken.last() {
                p.cursor = last.end;
            }
            let n: u64 = taken.iter().map(|r| r.end - r.start).sum();
            budget = budget.saturating_sub(n);
            // A page both rewritten and already under writeback is one page.
            let mut merged = 0;
            for r in &taken {
                let added = p.submitted.insert(r.clone());
                self.started_writeback(added);
                merged += r.end - r.start - added;
            }
            drop(p);
            self.account_clean(f, merged);
            work.push((f.clone(), taken));
        }
        if work.is_empty() && waits.is_empty() {
            return;
        }
        Counters::add(&self.counters.passes, 1);
        self.start_writeback(&work);
        work.extend(waits);
        let ps = page_size();
        for (f, ranges) in &work {
            Counters::add(&f.counters.passes, 1);
            let mut cleaned = Vec::new();
            for r in ranges {
                // An error is latched on the file; the pages are still
                // accounted clean so the high-water mark cannot wedge.
                f.wait_range(r);
                Counters::add(&f.counters.bytes_written_back, (r.end - r.start) * ps);
                Counters::add(&self.counters.bytes_written_back, (r.end - r.start) * ps);
                cleaned.push(r.clone());
            }
            let mut n = 0;
            {
                let mut p = f.lock();
                for r in &cleaned {
                    n += p.submitted.remove(r.clone()).iter().map(|x| x.end - x.start).sum::<u64>();
                }
                self.finished_writeback(n);
                {
                }
            }
            // Drop before accounting clean: whoever waits for dirty_now to
            // reach zero then finds the pages gone, not about to go.
            let before = f.counters.bytes_dropped.load(Relaxed);
            f.drop_clean(&cleaned);
            Counters::add(&self.counters.bytes_dropped, f.counters.bytes_dropped.load(Relaxed) - before);
            self.account_clean(f, n);
            // Writers stalled at the high-water mark may go on as soon as
            // enough is clean, not only when the whole pass ends: with 32
            // files a pass is long, and waiting for all of it made their
            // p99.9 latency ten times the kernel's.
            self.pass_finished.notify_all();
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
    }

    /// Starts writeback of every range of the pass, as one batch.
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
        // SAFETY: the SQE references no memory; the fd outlives the pass.
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
    // Drop retries left: the kernel may hold a just-written folio for a few
    // milliseconds (ext4 finishing the I/O), so retry for up to ~1 s.
    let mut retries = 0;
    loop {
        let Some(d) = dev.upgrade() else { return };
        // Clear the bit before reading the count: writes during the pass
        // set it again and get a follow-up pass.
        if d.kick.swap(false, AcqRel) {
            let urgent = d.urgent.swap(false, AcqRel);
            let budget = d.dirty_pages();
            d.pass(budget, urgent);
            *lock(&d.passes_done) += 1;
            d.pass_finished.notify_all();
            retries = 100;
            continue;
        }
        if retries > 0 && d.drops_pending() {
            retries -= 1;
            drop(d);
            thread::park_timeout(Duration::from_millis(10));
            if let Some(d) = dev.upgrade() {
                d.pass(0, false);
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
