//! What the engine knows about one file: which of its pages were someone
//! else's before the library touched it, which the library dirtied, which
//! are under writeback, and the first writeback error nobody has been told
//! about yet.
//!
//! The page sets are private: every change goes through a method that keeps
//! the device's counts in step (a page is counted dirty once, when it enters
//! `dirty`, and clean once, when it leaves the last of `dirty` and
//! `in_flight`).

use std::cell::Cell;
use std::io;
use std::mem::ManuallyDrop;
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::device::Device;
use crate::handle::Described;
use crate::locked::Inode;
use crate::own::OwnFd;
use crate::policy::Policy;
use crate::ranges::RangeSet;
use crate::stats::{Counters, Stats};

mod overlay;
mod writeback;
mod writes;

use overlay::layer_file;
pub use writes::ReadBatch;

/// `cachestat(2)` calls a bind may spend telling cached from uncached pages.
/// A file whose cache is more fragmented than that keeps the undecided
/// pieces as foreign: never dropped, the safe side.
const CLASSIFY_CALLS: u32 = 256;

/// Page ranges of one file, under the file's lock.
#[derive(Debug, Default)]
struct Pages {
    /// Cached when the library bound the file (or not decidable then): never
    /// dropped. Every other page is the library's to drop once clean.
    foreign: RangeSet,
    /// Dirtied by the library, writeback not yet started by it.
    dirty: RangeSet,
    /// Writeback started, not yet waited for.
    in_flight: RangeSet,
    /// Writeback started by a writer (`inline`, `lazy`) that the flusher has
    /// not yet queued to wait for and drop.
    writer_started: Vec<Range<u64>>,
    /// The last range a writer started, which `lazy` probes for writeback
    /// the library does not track (the kernel's, of a write it made as
    /// RWF_DONTCACHE).
    last_started: Option<Range<u64>>,
    /// Clean pages of the library's the kernel would not drop yet.
    retry_drop: RangeSet,
    /// The first and last page the library wrote or read: what close
    /// drops (past its end too after reads, `read_ahead`).
    touched: Option<Range<u64>>,
    /// Whether the library read here: readahead may have cached pages past
    /// `touched`, which close drops too (up to the end of the file).
    read_ahead: bool,
    /// Pages read since the last drop-behind.
    read_behind: RangeSet,
    /// The page the last write ended inside: a sequential writer's next
    /// write fills it, and writing it back now would make that write wait
    /// for the page's lock (tar's 10 KiB records, two to a page boundary,
    /// waited on the flusher about once per file).
    partial_tail: Option<u64>,
    /// How far a sweep of a read-only file has dropped.
    swept_to: u64,
    /// What the library dropped of a file no larger than
    /// `WORKING_FILE_MAX_PAGES`, for `working`.
    dropped: RangeSet,
    /// Written or read again where the library had dropped it, and no
    /// larger than `WORKING_FILE_MAX_PAGES`: a file the program works in
    /// (a database's write-ahead log, written over from its start and read
    /// back), not a stream through the cache. Nothing of it is dropped
    /// while it is open: each drop made the kernel read the page back for
    /// the next write or read (SQLite in WAL mode, 2,000 transactions: 15 MB
    /// read, 1.5x the time of the program alone). Its close drops it.
    working: bool,
    /// Closed while another open of the file with unseen I/O stays, all it
    /// touched within `WORKING_FILE_MAX_PAGES`: nothing of it is dropped,
    /// and the file's last open drops the file whole. A database read by
    /// connections opened for a query each (a pool) beside one that stays
    /// was read back from the disk by every query otherwise (SQLite, 200
    /// such queries of a table of up to 2 MB: 43-59 MB read against none).
    left_to_others: bool,
    /// Written with the kernel's RWF_DONTCACHE (the `kernel` policy): its
    /// writeback is the kernel's, and close waits for it before the drop.
    kernel_wrote: bool,
    /// Where range-cyclic writeback resumes.
    cursor: u64,
}

impl Pages {
    fn touch(&mut self, r: &Range<u64>) {
        self.touched = Some(match self.touched.take() {
            Some(t) => t.start.min(r.start)..t.end.max(r.end),
            None => r.clone(),
        });
        if !self.small() {
            self.working = false;
            self.dropped = RangeSet::new();
        } else if !self.working && self.touches_dropped_besides_tail(r) {
            self.working = true;
            self.dropped = RangeSet::new();
        }
    }

    /// Whether `r` holds a page the library dropped other than the one the
    /// last write ended inside: an appender that pauses after a sync finds
    /// that one dropped, and is not working in its file for that.
    fn touches_dropped_besides_tail(&self, r: &Range<u64>) -> bool {
        let tail = self.partial_tail;
        self.dropped.intersect(r.clone()).iter().any(|d| d.end - d.start > 1 || Some(d.start) != tail)
    }

    /// Whether nothing of the file is to be dropped now (`working`,
    /// `left_to_others`).
    fn keeps_all(&self) -> bool {
        self.working || self.left_to_others
    }

    /// Whether all the library touched lies within the first
    /// `WORKING_FILE_MAX_PAGES` of the file.
    fn small(&self) -> bool {
        self.touched.as_ref().is_some_and(|t| t.end <= WORKING_FILE_MAX_PAGES)
    }

    /// The library dropped `r` while the file is open.
    fn note_dropped(&mut self, r: Range<u64>) {
        if self.small() && !self.working {
            self.dropped.insert(r);
        }
    }

    /// The pieces of `r` that are the library's to drop.
    fn droppable(&self, r: Range<u64>) -> Vec<Range<u64>> {
        self.foreign.gaps(r)
    }

    /// What the last drop takes: the touched range, past its end where
    /// reads may have read ahead (a reader stopped 16 MiB into a file held
    /// 8 MiB of readahead past it, which its exit left cached).
    fn to_drop(&self) -> Option<Range<u64>> {
        if self.left_to_others {
            return None;
        }
        let t = self.touched.clone()?;
        Some(if self.read_ahead { t.start..END_OF_FILE } else { t })
    }
}

/// How a file is bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bind {
    /// The caller's descriptor, open for writing (and maybe reading).
    Writable,
    /// The caller's descriptor, open only for reading.
    ReadOnly,
    /// A file another process uses, watched from outside (the descriptor
    /// may be read-only): its dirty pages are that process's writes.
    Watched(Watched),
}

/// What the watcher knows of a file it binds (`Bind::Watched`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watched {
    /// The file was made since the watch began (its birth time says so):
    /// none of its pages were cached before the process watched, so every
    /// cached page is the process's to drop. Otherwise a clean page cached
    /// at the bind counts as cached before, and stays: a page the process
    /// wrote that someone else's `sync` wrote back before the watcher got
    /// to the file looks just so (beside a `sync` loop and two busy loops,
    /// a watched static writer's new file of 64 MiB kept 4-16 MiB cached
    /// in 6 runs of 24 when classified; none in 24 taken whole).
    pub made_since: bool,
}

/// The largest file kept cached while open once the program writes or
/// reads again what the library dropped (`Pages::working`): 8 MiB, twice
/// SQLite's write-ahead log at its default checkpoint.
const WORKING_FILE_MAX_PAGES: u64 = 2048;

/// What a batch took from one file.
pub struct Taken {
    /// Ranges whose writeback to start, each a hull over the dirty pages
    /// taken in it: the kernel writes only what is dirty inside.
    pub starts: Vec<Range<u64>>,
    /// Pieces of writeback to wait for and drop: (hull, pages started in it).
    pub pieces: Vec<(Range<u64>, u64)>,
    /// Pages taken against the batch's budget.
    pub pages: u64,
}

/// What became of a file's writeback: the first error not yet reported,
/// and whether the flusher is done with it. Shared with the `Pending` of a
/// closed file, which outlives the file state (and its descriptor).
#[derive(Debug, Default)]
pub struct Outcome {
    /// The first unreported error (errno), 0 if none: read without the lock
    /// on every write.
    first: AtomicI32,
    /// Nobody will ask for this file's errors again: they go to the
    /// device's late errors.
    orphaned: AtomicBool,
    /// A caller waits for this file (`Device::wait_done`): its finish wakes
    /// the waiters.
    awaited: AtomicBool,
    /// Written back and dropped after its close: nothing more will happen.
    done: AtomicBool,
    /// The path of the file the kept error belongs to, for the late-error
    /// report; also the lock for the fields above.
    path: Mutex<Option<PathBuf>>,
}

impl Outcome {
    /// The kept error, cleared: each error is reported exactly once.
    pub fn take_error(&self) -> Option<io::Error> {
        if self.first.load(Acquire) == 0 {
            return None;
        }
        let _g = lock(&self.path);
        match self.first.swap(0, AcqRel) {
            0 => None,
            e => Some(io::Error::from_raw_os_error(e)),
        }
    }

    /// Nobody will ask for errors again: a kept one and any later one
    /// become the device's late errors (one waiting per file at a time).
    pub fn orphan(&self, device: &Device) {
        let mut path = lock(&self.path);
        self.orphaned.store(true, Release);
        let e = self.first.swap(0, AcqRel);
        if e != 0 {
            device.push_late_error(e, path.take().unwrap_or_default());
        }
    }

    pub fn is_done(&self) -> bool {
        self.done.load(SeqCst)
    }

    /// A caller is about to wait for this file. Sequentially consistent
    /// with `mark_done` and the finisher's look at it: either the finisher
    /// sees the waiter and wakes it, or the waiter sees the file done.
    pub fn await_done(&self) {
        self.awaited.store(true, SeqCst);
    }

    pub fn is_awaited(&self) -> bool {
        self.awaited.load(SeqCst)
    }
}

pub struct FileState {
    /// The engine's own descriptor for the file: a duplicate of the
    /// caller's, so the engine's I/O and background writeback reach this
    /// file whatever the caller does with its descriptor number. Closed by
    /// `Drop` (on the flusher, by the closing thread).
    fd: ManuallyDrop<OwnFd>,
    /// The file, by device and inode number.
    inode: Inode,
    /// For a file on an overlay, its layer's file (the library's own open
    /// of it), whose pages the overlay's file reads and writes: overlayfs
    /// keeps no pages of its own, so `cachestat`, `sync_file_range` and its
    /// waits through the overlay's file see and do nothing (measured: 1,024
    /// dirty pages in the upper file, none through the overlay, and a
    /// `sync_file_range` that started no writeback). `None` elsewhere, and
    /// where the layer's file cannot be found or opened: then, through the
    /// overlay's file, errors of closed files go unseen and pages cached
    /// before the library cannot be told from its own.
    layer: Option<OwnFd>,
    /// On an overlay without a layer file: only a `syncfs` writes this file
    /// back and reports its errors, and only `fdatasync` waits for it.
    through_overlay: bool,
    pub policy: Policy,
    /// The page cache can give its pages up (not tmpfs or ramfs, whose
    /// pages are the file: there is nothing to drop, and trying would only
    /// retry for nothing).
    pub droppable: bool,
    /// Open for writing (else a sweep drops behind the file position).
    writable: bool,
    /// Its size when it was bound (bytes).
    size_at_bind: u64,
    /// The file may be written or read by paths the library does not see
    /// (stdio's own writes, io_uring, mmap): the flusher sweeps it for
    /// dirty pages, and its close waits for and drops the whole file.
    unseen: AtomicBool,
    pages: Mutex<Pages>,
    outcome: Arc<Outcome>,
    /// On the device's dirty list (protected by that list's lock).
    pub queued: AtomicBool,
    /// Kicked under the per-file policy and not yet served.
    pub kicked: AtomicBool,
    /// The kernel refused RWF_DONTCACHE on it: `kernel` writes go the
    /// flusher way, `lazy` ones start their writeback with `sync_file_range`.
    pub dontcache_refused: AtomicBool,
    /// Its reads are scattered and carry RWF_DONTCACHE from now on
    /// (`Handle::read_flags`, `hand_reads_to_kernel`): the kernel drops each page a read brought in
    /// as the read copies it out, on the reader's CPU while the page is
    /// still in its caches, where the flusher's batches drop the hull of
    /// many reads on the other CPU, cold (see `Handle::after_read`).
    pub reads_by_kernel: AtomicBool,
    /// The caller closed it: the flusher finishes its writeback and drops it.
    closed: AtomicBool,
    /// Its open file appends (`O_APPEND`, from the open or a later
    /// `F_SETFL`): a write at an offset lands at the end all the same.
    pub appends: AtomicBool,
    /// Pieces of its writeback in the flusher's queue.
    pub pieces_queued: AtomicUsize,
    /// Counted among the device's closed files pending.
    pending: AtomicBool,
    pub counters: Counters,
    /// Library-dirty pages not yet seen clean (|dirty ∪ in_flight|).
    dirty_pages: AtomicU64,
    /// The device's count of the library's open descriptors, this one's
    /// among them until `Drop` closes it.
    open_on_device: Arc<AtomicUsize>,
    /// The device's count of closed files' descriptors, this one's among
    /// them from its close until `Drop` has closed it.
    closed_on_device: Arc<AtomicUsize>,
    /// Whether and how the file went in escrow (`handoff::escrow`).
    pub(crate) escrow: AtomicU64,
    /// The most dirty pages a sweep found that the library had not
    /// dirtied itself (writes it does not see).
    unseen_dirty_pages: AtomicU64,
    /// Writes of the library's begun and done (`WriteUnderWay`): a sweep
    /// that overlaps one cannot tell its pages from unseen writes.
    writes_begun: AtomicU64,
    writes_done: AtomicU64,
}

/// A write of the library's from before its system call until its pages
/// are counted (`FileState::dirtied`). The kernel dirties the pages first:
/// a sweep in between took them for writes the library does not see and
/// the file for one written by unseen paths, to be written back and
/// dropped whole (SQLite in WAL mode on a loaded machine: 3 of 40 runs
/// read its log back from the disk after every checkpoint, 15 MB against
/// 4 MB, the writer preempted between its write and the count).
pub struct WriteUnderWay<'a>(&'a FileState);

impl Drop for WriteUnderWay<'_> {
    fn drop(&mut self) {
        self.0.writes_done.fetch_add(1, SeqCst);
    }
}

/// At a close: the file's other opens with unseen I/O that stay open
/// (`Device::other_opens`).
#[derive(Debug, Default, Clone, Copy)]
pub struct OtherOpens {
    /// Any, reading or writing: the last open to close drops the file.
    pub any: bool,
    /// One open for writing: its sweeps count the file's dirty pages
    /// against every open's writes.
    pub writable: bool,
}

pub fn page_size() -> u64 {
    dc_sys::page_size() as u64
}

/// The pages a byte range touches.
pub fn pages_of(off: u64, len: u64) -> Range<u64> {
    let ps = page_size();
    off / ps..off.saturating_add(len).div_ceil(ps)
}

thread_local! {
    /// Set on the flusher's thread, whose time every file's writeback waits on.
    static ON_FLUSHER: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as a flusher (see `Drop for FileState`).
pub(crate) fn mark_flusher_thread() {
    ON_FLUSHER.set(true);
}

/// An unlinked file holding more than this frees its blocks on the closing
/// thread; a smaller one, or one still linked (its close frees nothing),
/// closes on the flusher. Handing every file over cost a thread wake-up per
/// file: measured, `rsync -a` of 50,000 small files made 391,641 futex calls
/// under `dontcache run`, where plain made none.
const CLOSE_INLINE_BYTES: u64 = 8 << 20;

impl FileState {
    /// Whether the file cannot hold more than `CLOSE_INLINE_BYTES`, as far
    /// as the library can tell: no larger when it was bound, written by the
    /// library no further, and no writes the library does not see. Such a
    /// file's last close frees little, and needs no `fstat` to say so (one
    /// system call a file on the flusher). Another descriptor's or
    /// process's writes can still have made it large: its close on the
    /// flusher is then slow, never wrong.
    fn holds_little(&mut self) -> bool {
        let touched_end = self.pages.get_mut().unwrap_or_else(|e| e.into_inner()).touched.as_ref().map_or(0, |t| t.end);
        !*self.unseen.get_mut()
            && self.size_at_bind <= CLOSE_INLINE_BYTES
            && touched_end.saturating_mul(page_size()) <= CLOSE_INLINE_BYTES
    }
}

impl Drop for FileState {
    /// Closes the engine's descriptor; a flusher hands a large unlinked file
    /// to the closing thread, as its last close can take seconds.
    fn drop(&mut self) {
        crate::handoff::release(*self.escrow.get_mut());
        // Counted out before the descriptor closes: a count above zero must
        // mean a descriptor is open.
        self.open_on_device.fetch_sub(1, AcqRel);
        // SAFETY: drop runs once and nothing uses `fd` after it.
        let fd = unsafe { ManuallyDrop::take(&mut self.fd) };
        let frees_much = ON_FLUSHER.get()
            && !self.holds_little()
            && dc_sys::fstat(fd.as_raw_fd()).is_ok_and(|st| st.nlink == 0 && st.blocks * 512 > CLOSE_INLINE_BYTES);
        if frees_much {
            crate::closer::close_later(fd);
        } else {
            drop(fd);
        }
        // Once closed (or on its way to the closing thread), a program's
        // call waiting for room in its descriptor table tries again. Told
        // so before the closed file is counted out: a call that failed
        // while this descriptor was open, and finds no closed file left to
        // wait for, must see that one closed since (`fds::with_room` in
        // the shim); counted out first, a call that looked in the moment
        // between found nothing to wait for and failed with `EMFILE`.
        DUPLICATES_CLOSED.fetch_add(1, AcqRel);
        if *self.closed.get_mut() {
            self.closed_on_device.fetch_sub(1, AcqRel);
        }
    }
}

/// How many of the library's duplicates of files have closed in this
/// process, ever: a call of the program's that found the descriptor table
/// full is made again at once where one closed since it was made.
static DUPLICATES_CLOSED: AtomicU64 = AtomicU64::new(0);

pub fn duplicates_closed() -> u64 {
    DUPLICATES_CLOSED.load(Acquire)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock cannot leave the sets inconsistent in a
    // way that matters more than losing the process's write-behind.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Retries a call the kernel interrupted.
pub fn retry_eintr<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// A page index past any file's end: a range ending here reaches the end
/// of the file, whatever its size (2^60 bytes of 4 KiB pages).
pub const END_OF_FILE: u64 = 1 << 48;

/// The smallest range holding `a` and `b`.
fn cover(a: Range<u64>, b: Range<u64>) -> Range<u64> {
    a.start.min(b.start)..a.end.max(b.end)
}

/// The gaps between the library's own pages inside their hull that a
/// sweep or a close asks about one by one, at most; with more (a file
/// written at random) the hull is compared by count alone.
const OWN_GAPS_ASKED: usize = 8;

/// How many of a file's pages in the state `counts` picks from a
/// `cachestat` (dirty; or dirty and under writeback) the library's opens
/// `opens` did not count, at least: written by a path the library does not
/// see. Outside the hull of the opens' own dirty and in-flight pages every
/// such page is one; so is every page in the gaps between them inside the
/// hull, where they are few (`OWN_GAPS_ASKED`); in the rest of the hull,
/// those beyond the opens' count. Compared over the whole file, the
/// library's pages written back by someone else (the kernel's background
/// writeback, a program's `sync`) hid as many unseen ones: beside the
/// other engine tests, 3 of 6 closes left 256 unseen pages dirty, the
/// writer's own 256 clean and still counted; compared over the hull, so
/// did unseen pages between two of the library's ranges. A `cachestat`
/// that fails counts nothing: the file is left as it is.
fn uncounted_pages(fd: BorrowedFd<'_>, opens: &[&FileState], counts: fn(&dc_sys::CacheStat) -> u64) -> u64 {
    let in_pages = |pages: Range<u64>| {
        if pages.is_empty() {
            return 0;
        }
        let (off, len) = bytes(&pages);
        dc_sys::cachestat(fd, off, len).map_or(0, |c| counts(&c))
    };
    let Some(hull) = opens.iter().filter_map(|f| f.own_hull()).reduce(cover) else {
        return in_pages(0..END_OF_FILE);
    };
    let counted: u64 = opens.iter().map(|f| f.dirty_pages()).sum();
    let own = opens.iter().try_fold(RangeSet::new(), |mut all, f| {
        f.own_ranges(OWN_GAPS_ASKED)?.iter().for_each(|r| {
            all.insert(r);
        });
        Some(all)
    });
    let gaps = own.map(|own| own.gaps(hull.clone())).filter(|g| g.len() <= OWN_GAPS_ASKED).unwrap_or_default();
    let in_gaps: u64 = gaps.into_iter().map(in_pages).sum();
    in_pages(0..hull.start)
        + in_pages(hull.end..END_OF_FILE)
        + in_gaps
        + in_pages(hull).saturating_sub(in_gaps).saturating_sub(counted)
}

/// The bytes of a page range, as (offset, length); a range to
/// `END_OF_FILE` has length 0, which every call used here reads as "to the
/// end of the file".
pub(crate) fn bytes(pages: &Range<u64>) -> (u64, u64) {
    let ps = page_size();
    let len = if pages.end >= END_OF_FILE { 0 } else { (pages.end - pages.start) * ps };
    (pages.start * ps, len)
}

fn sync_range(fd: BorrowedFd<'_>, pages: &Range<u64>, flags: u32) -> io::Result<()> {
    let (off, len) = bytes(pages);
    retry_eintr(|| dc_sys::sync_file_range(fd, off, len, flags))
}

pub(crate) const WAIT_FOR_WRITEBACK: u32 =
    libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;

impl FileState {
    /// Takes over `fd` (the engine's own duplicate) of the file `described`
    /// says, and records which of its pages are cached now: those stay.
    pub fn new(fd: OwnFd, policy: Policy, described: &Described<'_>, device: &Device, kind: Bind) -> FileState {
        device.open_files.fetch_add(1, AcqRel);
        let droppable = device.droppable;
        let pages = described.stat.size.div_ceil(page_size());
        let watched = matches!(kind, Bind::Watched(_));
        let layer = device.overlay.as_ref().and_then(|layers| layer_file(fd.as_fd(), described, layers));
        // A count of cached pages through an overlay's file is always 0.
        let known = described.cached_pages.filter(|_| !watched && device.overlay.is_none());
        let foreign = if described.made || kind == Bind::Watched(Watched { made_since: true }) {
            RangeSet::new()
        } else {
            classify(layer.as_ref().map_or(fd.as_fd(), |l| l.as_fd()), pages, watched, known)
        };
        let writable = kind != Bind::ReadOnly;
        FileState {
            fd: ManuallyDrop::new(fd),
            inode: (described.stat.dev, described.stat.ino),
            through_overlay: device.overlay.is_some() && layer.is_none(),
            layer,
            policy,
            droppable,
            writable,
            size_at_bind: described.stat.size,
            unseen: AtomicBool::new(false),
            pages: Mutex::new(Pages { foreign, ..Pages::default() }),
            outcome: Arc::default(),
            queued: AtomicBool::new(false),
            kicked: AtomicBool::new(false),
            dontcache_refused: AtomicBool::new(false),
            reads_by_kernel: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            appends: AtomicBool::new(described.flags & libc::O_APPEND != 0),
            pieces_queued: AtomicUsize::new(0),
            pending: AtomicBool::new(false),
            counters: Counters::default(),
            dirty_pages: AtomicU64::new(0),
            open_on_device: device.open_files.clone(),
            closed_on_device: device.closed_files_open.clone(),
            escrow: AtomicU64::new(crate::handoff::NOT_YET),
            unseen_dirty_pages: AtomicU64::new(0),
            writes_begun: AtomicU64::new(0),
            writes_done: AtomicU64::new(0),
        }
    }

    /// Marks a write of the library's under way until the guard goes: to
    /// be taken before the write's system call and kept until its pages
    /// are counted.
    pub fn write_under_way(&self) -> WriteUnderWay<'_> {
        self.writes_begun.fetch_add(1, SeqCst);
        WriteUnderWay(self)
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The file, by device and inode number.
    pub fn inode(&self) -> Inode {
        self.inode
    }

    /// The descriptor whose page cache is the file's: its layer's file on
    /// an overlay, else the engine's own. Everything that looks at or acts
    /// on cached pages goes through it; I/O and the file position through
    /// `fd`.
    pub fn cache_fd(&self) -> BorrowedFd<'_> {
        self.layer.as_ref().map_or(self.fd.as_fd(), |l| l.as_fd())
    }

    /// See `through_overlay`.
    pub fn through_overlay(&self) -> bool {
        self.through_overlay
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.counters.snapshot();
        s.dirty_now = self.dirty_pages.load(Relaxed) * page_size();
        s.kernel_fallback = (self.policy == Policy::Kernel && self.dontcache_refused.load(Relaxed)) as u64;
        s
    }

    pub fn dirty_pages(&self) -> u64 {
        self.dirty_pages.load(Acquire)
    }

    // ---- errors -------------------------------------------------------

    /// Keeps the first error until someone is told: the caller, or, once it
    /// has closed the file without waiting, the device's late errors.
    pub fn latch(&self, errno: i32, device: &Device) {
        Counters::add(&self.counters.errors, 1);
        Counters::add(&device.counters.errors, 1);
        let o = &self.outcome;
        {
            let mut path = lock(&o.path);
            if o.orphaned.load(Acquire) {
                device.push_late_error(errno, self.path());
            } else if o.first.compare_exchange(0, errno, AcqRel, Acquire).is_ok() {
                *path = Some(self.path());
            }
        }
        crate::handoff::failed(self.escrow.load(Acquire), errno);
    }

    /// The latched error, cleared: each error is reported exactly once.
    pub fn take_error(&self) -> Option<io::Error> {
        let e = self.outcome.take_error();
        if e.is_some() {
            crate::handoff::failed(self.escrow.load(Acquire), 0);
        }
        e
    }

    /// The file's outcome, which outlives it.
    pub fn outcome(&self) -> &Arc<Outcome> {
        &self.outcome
    }

    fn path(&self) -> PathBuf {
        dc_sys::fd_path(self.fd()).unwrap_or_else(|_| PathBuf::from(format!("(descriptor {})", self.fd.as_raw_fd())))
    }

    // ---- another process finishes the file -------------------------

    /// The pages of this file the library may drop: what it wrote or read,
    /// less what was cached before it (for another process to finish the
    /// file, `handoff`).
    pub fn droppable_touched(&self) -> Vec<Range<u64>> {
        let p = lock(&self.pages);
        p.touched.clone().map(|t| p.droppable(t)).unwrap_or_default()
    }

    /// How many bytes of I/O the library has seen on this file: its writes
    /// and reads, and the most dirty pages a sweep found that it did not
    /// write (a file with unseen I/O is "touched" whole, whatever its size).
    pub fn io_seen(&self) -> u64 {
        self.counters.bytes_written.load(Relaxed)
            + self.counters.bytes_read.load(Relaxed)
            + self.unseen_dirty_pages.load(Relaxed) * page_size()
    }

    /// The pages of this file another process may drop should this one end
    /// without finishing it (`handoff::escrow`): all but those cached
    /// before the library bound it.
    pub fn escrow_pages(&self) -> Vec<Range<u64>> {
        lock(&self.pages).foreign.gaps(0..END_OF_FILE)
    }

    /// The pages of this file the library may drop: all but those cached
    /// before it bound it; none where the page cache is the file.
    pub fn droppable_pages(&self) -> Vec<Range<u64>> {
        if self.droppable {
            self.escrow_pages()
        } else {
            Vec::new()
        }
    }

    /// Takes over `pages` of a file another process wrote or read and did
    /// not finish: the library's to write back where still dirty, wait for
    /// and drop, though they were cached when this process bound the file.
    /// A range past the file's end (as the file was when bound) runs to
    /// `END_OF_FILE`: a wait and a drop each, however far the sender said.
    pub fn claim(&self, pages: &[Range<u64>]) {
        let eof = self.size_at_bind.div_ceil(page_size());
        let mut p = lock(&self.pages);
        for r in pages.iter().filter(|r| r.start < r.end && r.start < eof) {
            let r = if r.end > eof { r.start..END_OF_FILE } else { r.clone() };
            p.foreign.remove(r.clone());
            p.touch(&r);
            p.writer_started.push(r);
        }
    }

    // ---- sync, truncate, close ---------------------------------------

    /// Writes back and waits for everything in the file (the caller's
    /// close-and-wait), latching an error.
    pub fn settle(&self, device: &Device) {
        let settled = if self.through_overlay {
            retry_eintr(|| dc_sys::fdatasync(self.fd()))
        } else {
            retry_eintr(|| dc_sys::sync_file_range(self.cache_fd(), 0, 0, WAIT_FOR_WRITEBACK))
        };
        if let Err(e) = settled {
            self.latch(e.raw_os_error().unwrap_or(libc::EIO), device);
        }
        self.forget(device, 0..u64::MAX);
    }

    /// The library's pages in `range` are on disk (after fsync) or gone
    /// (after truncate): neither dirty nor in flight any more.
    pub fn forget(&self, device: &Device, range: Range<u64>) {
        let n = {
            let mut p = lock(&self.pages);
            let in_flight: u64 = p.in_flight.remove(range.clone()).iter().map(|r| r.end - r.start).sum();
            let dirty: u64 = p.dirty.remove(range.clone()).iter().map(|r| r.end - r.start).sum();
            // What a writer started outside `range` is still in flight and
            // still to be waited for: only the part inside goes.
            let started = std::mem::take(&mut p.writer_started);
            p.writer_started = started.into_iter().flat_map(|r| outside(r, &range)).collect();
            device.count_finished(in_flight);
            in_flight + dirty
        };
        self.count_clean(device, n);
    }

    pub fn mark_closed(&self) {
        if !self.closed.swap(true, AcqRel) {
            self.closed_on_device.fetch_add(1, AcqRel);
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Acquire)
    }

    /// Returns whether it was not counted pending before.
    pub fn set_pending(&self) -> bool {
        !self.pending.swap(true, AcqRel)
    }

    /// Returns whether it was counted pending.
    pub fn clear_pending(&self) -> bool {
        self.pending.swap(false, AcqRel)
    }

    /// Closed and nothing left to do: its waiters may go. Returns whether
    /// it was not done before.
    pub fn mark_done(&self) -> bool {
        !self.outcome.done.swap(true, SeqCst)
    }
}

/// The parts of `r` before and after `cut`, those not empty.
fn outside(r: Range<u64>, cut: &Range<u64>) -> impl Iterator<Item = Range<u64>> {
    [r.start..r.end.min(cut.start), r.start.max(cut.end)..r.end].into_iter().filter(|p| p.start < p.end)
}

/// Groups ranges into pieces of at most `chunk` pages each (by the pages in
/// them, not their hull), in file order: a piece is waited for and dropped
/// with one call each, so scattered pages cost a few calls per piece.
fn pieces(mut ranges: Vec<Range<u64>>, chunk: u64) -> Vec<(Range<u64>, u64)> {
    ranges.sort_by_key(|r| r.start);
    // Writeback to the end of the file is not the library's own to count
    // (the kernel's, or unseen writes): one piece. The library's pages
    // inside it go in that piece where they are at most a chunk (a small
    // closed file: one wait, not two); more are waited for a chunk at a
    // time, as the to-end piece's wait lasts until all of it is written.
    let mut out: Vec<(Range<u64>, u64)> =
        ranges.iter().filter(|r| r.end >= END_OF_FILE).map(|r| (r.clone(), 0)).collect();
    ranges.retain(|r| r.end < END_OF_FILE);
    if let Some((to_end, pages)) = out.first_mut() {
        let inside: u64 = ranges.iter().filter(|r| r.start >= to_end.start).map(|r| r.end - r.start).sum();
        if inside <= chunk {
            ranges.retain(|r| r.start < to_end.start);
            *pages = inside;
        }
    }
    let mut cur: Option<(Range<u64>, u64)> = None;
    for r in ranges {
        let mut at = r.start;
        while at < r.end {
            let (mut h, mut n) = match cur.take() {
                Some((h, n)) if n < chunk && h.end <= at => (h, n),
                Some(full) => {
                    out.push(full);
                    (at..at, 0)
                }
                None => (at..at, 0),
            };
            let end = r.end.min(at + (chunk - n));
            h.end = end;
            n += end - at;
            at = end;
            cur = Some((h, n));
        }
    }
    out.extend(cur);
    out
}

/// The pages of a file `pages` long that are cached now, by halving ranges
/// until each piece is all cached or all not (one call for a file nobody
/// has cached). Undecided pieces, past the call budget, count as cached.
/// Without `cachestat` (Linux < 6.5) every page counts as cached: the
/// library then writes back but drops nothing.
///
/// `dirty_is_ours`: a watcher binds a file another process is already
/// writing; its dirty (and under-writeback) pages are that writer's, not
/// cached before it, and are the library's to drop.
///
/// `known`: the whole file's cached pages, if the caller has just asked
/// (not for a watcher's bind, whose count must leave out dirty pages): a
/// file with none, or all, needs no call (a source file that `cp -a` or
/// `rsync` reads from a cold cache).
pub(crate) fn classify(fd: BorrowedFd<'_>, pages: u64, dirty_is_ours: bool, known: Option<u64>) -> RangeSet {
    let mut foreign = RangeSet::new();
    match known {
        _ if pages == 0 => return foreign,
        Some(0) => return foreign,
        Some(cached) if cached >= pages => {
            foreign.insert(0..pages);
            return foreign;
        }
        _ => {}
    }
    let ps = page_size();
    let mut calls = 0;
    // A worklist of page ranges, split as the classification goes.
    let mut todo: Vec<Range<u64>> = Vec::new();
    todo.push(0..pages);
    while let Some(r) = todo.pop() {
        let len = r.end - r.start;
        if calls >= CLASSIFY_CALLS {
            foreign.insert(r);
            continue;
        }
        calls += 1;
        let cached = match dc_sys::cachestat(fd, r.start * ps, len * ps) {
            Ok(c) if dirty_is_ours => c.nr_cache.saturating_sub(c.nr_dirty + c.nr_writeback),
            Ok(c) => c.nr_cache,
            Err(_) => {
                foreign.insert(0..u64::MAX);
                return foreign;
            }
        };
        if cached == 0 {
            continue;
        }
        if cached >= len || len == 1 {
            foreign.insert(r);
        } else {
            let mid = r.start + len / 2;
            todo.push(mid..r.end);
            todo.push(r.start..mid);
        }
    }
    foreign
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // lists of ranges, some of one
    fn pieces_group_by_pages_in_file_order() {
        let ranges = vec![10..12, 0..3, 100..101, 5..6];
        assert_eq!(pieces(ranges, 4), vec![(0..6, 4), (10..101, 3)]);
        assert_eq!(pieces(vec![0..END_OF_FILE, 3..5], 4), vec![(0..END_OF_FILE, 2)]);
        assert_eq!(pieces(vec![4..END_OF_FILE, 0..2, 5..9], 4), vec![(4..END_OF_FILE, 4), (0..2, 2)]);
        assert_eq!(pieces(vec![0..END_OF_FILE, 0..6], 4), vec![(0..END_OF_FILE, 0), (0..4, 4), (4..6, 2)]);
        assert_eq!(pieces(vec![0..10], 4), vec![(0..4, 4), (4..8, 4), (8..10, 2)]);
        assert!(pieces(vec![], 4).is_empty());
    }
}
