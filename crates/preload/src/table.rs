//! The descriptor table: which of the program's descriptors the shim tracks,
//! each with its libdontcache handle.
//!
//! A slot holds an `Arc<Handle>` in an `ArcSwapOption` (arc-swap): a call on
//! a tracked descriptor takes its own reference for the call's length, and
//! `close` swaps the slot empty and closes; a call still running on another
//! thread finishes on the file it started on (the handle does its I/O
//! through its own duplicate), never on whatever file reuses the number.
//! This is the reference counting the kernel does for open files. A plain
//! pointer table freed the handle under such a call.
//!
//! A descriptor the shim did not see opened (inherited from the parent, or
//! opened by a path it does not interpose) is looked at on its first use:
//! its state goes from `UNKNOWN` to `PLAIN` (not a file to track) or
//! `TRACKED`. Every close the shim sees, and every call that creates a
//! descriptor, puts the number back to `UNKNOWN`.
//!
//! A small file opened read-only with none of it cached gets no handle at
//! all (`READ_COLD`): it is read as without the shim, and its close hands
//! a duplicate to the library, which drops the whole file a moment later
//! on its own thread (`dontcache::hand_over_cold_input`), as everything
//! cached of it then was brought in since it was opened. A handle costs
//! such a file a duplicate, an `lseek` after each read, the flusher's
//! drop, `fstat` and close: `rsync -a` of 50,000 small files used 0.94x
//! the CPU without them (7 interleaved runs). Where its filesystem takes
//! `RWF_DONTCACHE` on reads, its reads at the file position carry the flag
//! (`cold_read_flags`): the kernel drops what they read as they go, and
//! the drop after the close finds little or nothing.
//!
//! A file the program has just made (`O_CREAT|O_EXCL`, open for writing,
//! under the `flusher` policy) gets no handle either while it stays small
//! (`MADE`): its writes go straight to the kernel, counted, and its close
//! hands it over whole (`dontcache::hand_over_made`), as every page cached
//! of a file the program made is the program's. It gets a handle, every
//! page of it counted the program's, once the program has written
//! `MADE_MAX` to it, or on the first call that needs one (a read, a
//! mapping, a sync, a copy out of it, a lock, a `dup`); before an exec it
//! is handed over where it stays open.
//! Writes by paths the shim does not see (io_uring, a stream's own) reach
//! such a file unseen until one of those: the sweep only knows files with
//! a handle. `tar -xf` of 50,000 small files took 1.56x plain's time with
//! a handle for each, 1.40x so (8 interleaved rounds).
//!
//! A `vfork` child shares this table with its parent but has descriptors of
//! its own: nothing it does changes a slot that holds a file
//! (`crate::in_vfork_child`).

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;
use dc_sys::errno;
pub use dc_sys::set_errno;
use dontcache::{Described, Handle, Options, Policy};

pub const MAX_FD: usize = 1 << 16;

const UNKNOWN: u8 = 0;
const PLAIN: u8 = 1;
const TRACKED: u8 = 2;
/// Read-only, small, nothing of it cached when opened: no handle, dropped
/// whole at close (and at exit).
const READ_COLD: u8 = 3;

/// Made by the program (`O_CREAT|O_EXCL`) and written without a handle
/// so far: handed over whole at its close.
const MADE: u8 = 4;

/// What the program writes to a `MADE` file before it gets a handle: past
/// it, the file is written back behind the writer as any, and goes in
/// escrow with `dontcache run` (`dontcache::handoff`) at the same size a
/// file with a handle does.
const MADE_MAX: u64 = dontcache::handoff::ESCROW_BYTES;

/// The largest file read without a handle: what stays cached of one until
/// it is closed. A handle drops behind a longer read as it goes, half a
/// high-water mark at a time.
const READ_COLD_MAX: u64 = 1 << 20;

static HANDLES: [ArcSwapOption<Handle>; MAX_FD] = [const { ArcSwapOption::const_empty() }; MAX_FD];
static STATE: [AtomicU8; MAX_FD] = [const { AtomicU8::new(UNKNOWN) }; MAX_FD];
/// Of a `READ_COLD` slot: whether its filesystem takes `RWF_DONTCACHE` on
/// reads. Set with the state; read only while the state is `READ_COLD`.
static COLD_BY_KERNEL: [AtomicBool; MAX_FD] = [const { AtomicBool::new(false) }; MAX_FD];
/// Of a `MADE` slot: the bytes the program's write calls wrote to it.
static MADE_WRITTEN: [AtomicU64; MAX_FD] = [const { AtomicU64::new(0) }; MAX_FD];

/// One past the highest slot ever tracked: the exit scan stops there. A
/// scan of all 65,536 states at every exit was most of the shim's own time
/// in a short process (`/bin/true`: 85% of its samples in the shim), and
/// touched 16 pages of zeroes.
static TRACKED_BELOW: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static IN_ENGINE: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is inside the engine, or is one of the library's
/// own threads (whose libc calls reach the interposed symbols and must go
/// straight to libc).
pub fn inside() -> bool {
    IN_ENGINE.with(|g| g.get()) || dontcache::in_library()
}

/// Whether this thread is inside the engine (a signal handler may ask).
pub fn in_engine_here() -> bool {
    IN_ENGINE.with(|g| g.get())
}

/// Runs `f` inside the engine: libc calls it makes are not routed back, and
/// the caller's errno is as it was unless `f`'s result sets it. A stop
/// signal that came meanwhile takes effect as `f` returns
/// (`signals::stop_if_pending`).
pub fn engine<T>(f: impl FnOnce() -> T) -> T {
    let saved = errno();
    IN_ENGINE.with(|g| g.set(true));
    let r = f();
    IN_ENGINE.with(|g| g.set(false));
    set_errno(saved);
    crate::signals::stop_if_pending();
    r
}

/// `Ok(v)` as is; `Err(e)` as `fail` with errno set, like a system call.
pub fn ret<T>(r: std::io::Result<T>, fail: T) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            fail
        }
    }
}

fn slot(fd: c_int) -> Option<usize> {
    usize::try_from(fd).ok().filter(|&i| i < MAX_FD)
}

pub fn options() -> Option<Options> {
    // Not a blocking once: a child forked while a parent thread read the
    // environment here would wait for it for ever at its first open.
    // Threads that race read it each (and a bad value is reported by each).
    static OPTS: once_cell::race::OnceBox<Option<Options>> = once_cell::race::OnceBox::new();
    *OPTS.get_or_init(|| {
        Box::new(match Options::from_env() {
            Ok(o) => {
                // The exit hook flushes every device (`settle_at_exit`).
                dontcache::settle_closed_files_at_exit();
                crate::handoff::note_receiver();
                Some(o)
            }
            Err(e) => {
                eprintln!("libdontcache_preload: {e}; files pass through unchanged");
                None
            }
        })
    })
}

/// The handle of a tracked descriptor; a descriptor not seen before is
/// looked at now (inherited, or opened by a path not interposed).
pub fn get(fd: c_int) -> Option<Arc<Handle>> {
    if inside() {
        return None;
    }
    let i = slot(fd)?;
    match STATE[i].load(Acquire) {
        TRACKED => HANDLES[i].load_full(),
        PLAIN | READ_COLD => None,
        MADE => promote(fd, i),
        _ => {
            // SAFETY: F_GETFL has no arguments and no side effects.
            let flags = unsafe { crate::real::fcntl()(fd, libc::F_GETFL, 0) };
            if flags < 0 {
                return None;
            }
            adopt(fd, flags, None)
        }
    }
}

/// The handle for a write call on `fd`: as `get`, but a `MADE` file is
/// written without one (`wrote_untracked` counts what it writes).
pub fn write_handle(fd: c_int) -> Option<Arc<Handle>> {
    match slot(fd) {
        Some(i) if STATE[i].load(Acquire) == MADE => None,
        _ => get(fd),
    }
}

/// Whether `fd` is a `MADE` file (and the caller the program).
pub fn is_made(fd: c_int) -> bool {
    slot(fd).is_some_and(|i| STATE[i].load(Acquire) == MADE) && !inside()
}

/// What a write call without a handle on `fd` returned: a `MADE` file
/// that has had `MADE_MAX` written gets its handle now.
pub fn wrote_untracked(fd: c_int, written: isize) {
    let (Some(i), Ok(n)) = (slot(fd), u64::try_from(written)) else { return };
    if n > 0 && STATE[i].load(Acquire) == MADE && MADE_WRITTEN[i].fetch_add(n, Relaxed) + n > MADE_MAX && !inside() {
        promote(fd, i);
    }
}

/// A `MADE` file's handle, made now: every page of it is the program's,
/// and counted written.
fn promote(fd: c_int, i: usize) -> Option<Arc<Handle>> {
    if crate::in_vfork_child() || STATE[i].compare_exchange(MADE, UNKNOWN, AcqRel, Acquire).is_err() {
        return None;
    }
    // SAFETY: F_GETFL has no arguments and no side effects.
    let flags = unsafe { crate::real::fcntl()(fd, libc::F_GETFL, 0) };
    if flags < 0 {
        return None;
    }
    adopt_as(fd, flags, None, Taking::Made)
}

/// Gives `fd` its handle now if it is a `MADE` file.
pub fn promote_made(fd: c_int) {
    if let Some(i) = slot(fd).filter(|&i| STATE[i].load(Acquire) == MADE && !inside()) {
        promote(fd, i);
    }
}

/// Hands over `fd`, a `MADE` file about to be closed, and stops tracking
/// it; `None` for any other descriptor. `Some` with what the close should
/// return (`dontcache::late_error_of`).
pub fn take_made(fd: c_int) -> Option<Option<std::io::Error>> {
    let i = slot(fd)?;
    if STATE[i].load(Acquire) != MADE || inside() || crate::in_vfork_child() {
        return None;
    }
    let _passage = InPassage::begin();
    STATE[i].compare_exchange(MADE, UNKNOWN, AcqRel, Acquire).ok()?;
    let opts = options()?;
    Some(engine(|| {
        dontcache::hand_over_made(fd, opts);
        dontcache::late_error_of(fd)
    }))
}

/// Hands over every `MADE` file, which stays open as it is (before an
/// exec, which closes those opened `O_CLOEXEC` unseen, and after which
/// another image's shim sees the others anew).
pub fn hand_over_made_files() {
    let Some(opts) = options() else { return };
    for (fd, state) in STATE[..TRACKED_BELOW.load(Acquire)].iter().enumerate() {
        if state.load(Acquire) == MADE {
            engine(|| dontcache::hand_over_made(fd as c_int, opts));
        }
    }
}

/// What `adopt` makes of a descriptor.
enum Adopted {
    Handle(Arc<Handle>),
    /// `READ_COLD`; whether its reads may carry `RWF_DONTCACHE`.
    ReadCold(bool),
    Plain,
    /// Another thread closed the number (`EBADF`), or put another file
    /// there (`EAGAIN`, `Handle::adopt_described`), while it was looked
    /// at: its slot is that thread's call's to set (`UNKNOWN` by the close
    /// or the call that made the descriptor, then whatever its own look
    /// finds). Marked `PLAIN` here, the file put there would go untracked,
    /// and stay cached, until the number is closed.
    Replaced,
}

/// Starts tracking `fd`, just opened (or first seen) with `flags`, if it is
/// a regular file on a filesystem whose pages the page cache holds;
/// `opened_as` is the path it was just opened by, if it was. Only a file
/// this process opened may be `READ_COLD` or `MADE`: one it inherited may
/// be another process's to read on (a shell's `while read` loop over a
/// file), which a drop of the whole file at this one's exit would send back
/// to the disk.
pub fn adopt(fd: c_int, flags: c_int, opened_as: Option<dontcache::OpenedAs<'_>>) -> Option<Arc<Handle>> {
    let taking = if opened_as.is_some() { Taking::Opened } else { Taking::Seen };
    adopt_as(fd, flags, opened_as, taking)
}

/// How `adopt_as` takes a file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Taking {
    /// Just opened by this process: it may go without a handle
    /// (`READ_COLD`, `MADE`).
    Opened,
    /// Seen in use, or wanting a handle now.
    Seen,
    /// A `MADE` file getting its handle: every page of it is the program's.
    Made,
}

/// Whether an open with `flags` made the file, for writing: `O_CREAT|O_EXCL`
/// fails unless it creates a regular file.
fn made_by(flags: c_int) -> bool {
    flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL && flags & libc::O_ACCMODE != libc::O_RDONLY
}

/// `adopt`, taking the file as `taking` says.
fn adopt_as(
    fd: c_int,
    flags: c_int,
    opened_as: Option<dontcache::OpenedAs<'_>>,
    taking: Taking,
) -> Option<Arc<Handle>> {
    if inside() || fd < 0 || crate::in_vfork_child() {
        return None;
    }
    let i = slot(fd)?;
    let plain = || {
        HANDLES[i].store(None);
        STATE[i].store(PLAIN, Release);
        None
    };
    let _in_passage = InPassage::begin();
    if flags & (libc::O_DIRECT | libc::O_PATH) != 0 || ROOM_WANTED.load(SeqCst) > 0 {
        return plain();
    }
    let Some(opts) = options() else { return plain() };
    if taking == Taking::Opened && made_by(flags) && opts.policy == Policy::Flusher {
        MADE_WRITTEN[i].store(0, Relaxed);
        occupy(i, None, MADE);
        return None;
    }
    let adopted = engine(|| {
        let st = match dc_sys::fstat(fd) {
            Ok(st) if st.is_regular() => st,
            Err(e) if e.raw_os_error() == Some(libc::EBADF) => return Adopted::Replaced,
            _ => return Adopted::Plain,
        };
        if !page_cached_fs(fd, st.dev) {
            return Adopted::Plain;
        }
        let read_only = flags & libc::O_ACCMODE == libc::O_RDONLY;
        // A file read only and all cached already has nothing of the
        // library's to drop: not worth a handle (and a descriptor).
        let mut cached_pages = None;
        if read_only && st.size > 0 {
            // SAFETY: `fd` is open for the length of this call.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            let pages = st.size.div_ceil(dc_sys::page_size() as u64);
            cached_pages = dc_sys::cachestat(fd, 0, 0).ok().map(|c| c.nr_cache);
            if cached_pages.is_some_and(|cached| cached >= pages) {
                return Adopted::Plain;
            }
            if taking == Taking::Opened && cached_pages == Some(0) && st.size <= READ_COLD_MAX {
                return Adopted::ReadCold(device_takes_dontcache_reads(fd, st.dev, st.size));
            }
        }
        let made = taking == Taking::Made;
        let h = match Handle::adopt_described(fd, opts, Described { stat: st, flags, cached_pages, opened_as, made }) {
            Ok(h) => h,
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return Adopted::Replaced,
            Err(_) => return Adopted::Plain,
        };
        // Paths the shim cannot see (stdio's own writes and reads, io_uring,
        // mmap) reach every file: the flusher sweeps them all.
        h.watch_unseen();
        Adopted::Handle(Arc::new(h))
    });
    match adopted {
        Adopted::Plain => plain(),
        Adopted::Replaced => None,
        Adopted::ReadCold(by_kernel) => {
            COLD_BY_KERNEL[i].store(by_kernel, Relaxed);
            occupy(i, None, READ_COLD);
            None
        }
        Adopted::Handle(h) => {
            occupy(i, Some(h.clone()), TRACKED);
            crate::signals::start_settler();
            Some(h)
        }
    }
}

/// Puts `handle` and `state` (`TRACKED` or `READ_COLD`) in slot `i`.
fn occupy(i: usize, handle: Option<Arc<Handle>>, state: u8) {
    if let Some(old) = HANDLES[i].swap(handle) {
        // A stale entry: its descriptor was closed where the shim did not
        // see it. Its file's writeback still finishes.
        engine(|| drop(old.release_shared()));
    }
    TRACKED_BELOW.fetch_max(i + 1, AcqRel);
    STATE[i].store(state, Release);
}

/// Drops every cached page of `fd`, a `READ_COLD` file, now.
fn drop_cold(fd: c_int) {
    // SAFETY: the caller's `fd` is open for the length of this call.
    let file = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    engine(|| {
        let _ = dc_sys::fadvise(file, 0, 0, dc_sys::Advice::DontNeed);
    });
}

/// Drops every `READ_COLD` file whole, as their closes would, and those
/// closed whose drop is still queued: for a process a stop signal ends.
/// Only system calls, no lock waited for, no allocation: it runs in a
/// signal handler.
pub fn drop_cold_reads() {
    for (fd, state) in STATE[..TRACKED_BELOW.load(Acquire)].iter().enumerate() {
        if state.load(Acquire) == READ_COLD {
            // SAFETY: posix_fadvise touches no memory of ours; a number
            // closed meanwhile is an error return.
            unsafe { libc::posix_fadvise(fd as c_int, 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
    dontcache::drop_cold_inputs_queued();
}

/// Stops tracking `fd` (about to be closed, or replaced) and returns its
/// handle, if it had one; a `READ_COLD` file is dropped here, and a `MADE`
/// one handed over, while the number is still its.
pub fn take(fd: c_int) -> Option<TakenHandle> {
    let i = slot(fd)?;
    if matches!(STATE[i].load(Acquire), TRACKED | READ_COLD | MADE) && crate::in_vfork_child() {
        return None;
    }
    // In passage before it leaves the table: a call wanting room that
    // does not find it there finds it here.
    let passage = InPassage::begin();
    match STATE[i].swap(UNKNOWN, AcqRel) {
        READ_COLD => engine(|| dontcache::hand_over_cold_input(fd)),
        MADE => {
            if let Some(opts) = options() {
                engine(|| dontcache::hand_over_made(fd, opts));
            }
        }
        _ => {}
    }
    Some(TakenHandle { handle: HANDLES[i].swap(None)?, _passage: passage })
}

/// A handle taken out of the table, in passage (`PASSING`) until dropped:
/// its descriptors (the program's number, the library's duplicate) are
/// closed or handed to the flusher by then.
pub struct TakenHandle {
    handle: Arc<Handle>,
    _passage: InPassage,
}

impl std::ops::Deref for TakenHandle {
    type Target = Handle;

    fn deref(&self) -> &Handle {
        &self.handle
    }
}

/// Stops tracking every descriptor of the file `inode` (the program locks
/// it): each lets go of the file as at a close, and stays open, the
/// program's alone and untracked (`dontcache::locked`). Called inside the
/// engine.
pub fn untrack_file(inode: dontcache::locked::Inode) {
    untrack_where(|h| h.inode() == inode);
}

/// Stops tracking every descriptor whose handle is `of`: each lets go of
/// its file as at a close, and stays open, the program's alone and
/// untracked until it is closed.
fn untrack_where(of: impl Fn(&Handle) -> bool) {
    for i in 0..TRACKED_BELOW.load(Acquire) {
        if STATE[i].load(Acquire) != TRACKED || !HANDLES[i].load().as_ref().is_some_and(|h| of(h)) {
            continue;
        }
        if STATE[i].compare_exchange(TRACKED, PLAIN, AcqRel, Acquire).is_ok() {
            if let Some(h) = HANDLES[i].swap(None) {
                h.untrack();
            }
        }
    }
}

/// Calls of the program's waiting for room in a full descriptor table
/// (`fds::with_room`): while any waits, new files are not bound (their
/// descriptors are plain, the program's alone, until closed), as each
/// binding takes a number the waiting call needs.
static ROOM_WANTED: AtomicUsize = AtomicUsize::new(0);

/// Handles in passage: on their way into the table (a binding begun
/// before a call wanted room holds a duplicate not tracked yet, to be let
/// go of once it is) or out of it (`take`: a close, a `dup2` over the
/// number, an `fclose`, the exit, until the handle's descriptors are
/// closed or handed to the flusher). Each holds descriptors the table does
/// not show, soon closed: a call wanting room waits for them, where
/// without them counted it found nothing to wait for and failed with
/// `EMFILE` while a close on another thread had lost its CPU.
static PASSING: AtomicUsize = AtomicUsize::new(0);

/// In a forked child: the calls and handles in passage were its parent's
/// other threads', which it does not have.
pub fn forget_room_wanted_of_parent() {
    ROOM_WANTED.store(0, SeqCst);
    PASSING.store(0, SeqCst);
}

/// A call's want of room, from its first `EMFILE` until it is dropped.
pub struct RoomWanted(());

impl RoomWanted {
    pub fn new() -> RoomWanted {
        ROOM_WANTED.fetch_add(1, SeqCst);
        RoomWanted(())
    }
}

impl Drop for RoomWanted {
    fn drop(&mut self) {
        ROOM_WANTED.fetch_sub(1, SeqCst);
    }
}

/// A handle in passage (`PASSING`). A binding is, from before it looks
/// at `ROOM_WANTED` until its handle is in the table: either it sees a
/// call wanting room, or that call sees it.
struct InPassage(());

impl InPassage {
    fn begin() -> InPassage {
        PASSING.fetch_add(1, SeqCst);
        InPassage(())
    }
}

impl Drop for InPassage {
    fn drop(&mut self) {
        PASSING.fetch_sub(1, SeqCst);
    }
}

/// For a call of the program's that found its descriptor table full
/// (`EMFILE`) and wants room (`RoomWanted`): every tracked descriptor and
/// every mapping lets go of its file, as at a close (the descriptors stay
/// open, the program's alone and untracked until closed: binding them
/// again would fill the table again), and this waits until one of the
/// library's duplicates of a closed file has closed
/// (`dontcache::let_closed_file_go`), or a moment where another thread has
/// a handle in passage (`PASSING`) or the library is making a descriptor
/// of its own. False where nothing is left that could close: the table is
/// full of the program's own descriptors, or of the library's of a moment
/// (`fds::PASSING_DESCRIPTORS_TIME`).
pub fn give_room() -> bool {
    if inside() || crate::in_vfork_child() {
        return false;
    }
    engine(|| {
        untrack_where(|_| true);
        crate::mmap::let_go_all();
        if dontcache::let_closed_file_go() {
            return true;
        }
        let passing = PASSING.load(SeqCst) > 0 || dontcache::own::making_under_way();
        if passing {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        passing
    })
}

/// Whether the program has a tracked file open on device number `dev`.
/// Called inside the engine.
pub fn tracks_file_on(dev: u64) -> bool {
    tracks_where(|inode| inode.0 == dev)
}

/// Whether the program has the file `inode` open, tracked. Called inside
/// the engine.
pub fn tracks_file(inode: dontcache::locked::Inode) -> bool {
    tracks_where(|i| i == inode)
}

fn tracks_where(of: impl Fn(dontcache::locked::Inode) -> bool) -> bool {
    (0..TRACKED_BELOW.load(Acquire))
        .any(|i| STATE[i].load(Acquire) == TRACKED && HANDLES[i].load().as_ref().is_some_and(|h| of(h.inode())))
}

/// In a forked child: the `READ_COLD` and `MADE` files are its parent's,
/// which may go on reading or writing them (a shell's subshells exit while
/// it reads a file), so the child does not drop or hand them over whole at
/// its exit; looked at anew on first use, as inherited files are.
pub fn forget_handleless_files_of_parent() {
    for state in &STATE[..TRACKED_BELOW.load(Acquire)] {
        let _ = state.compare_exchange(READ_COLD, UNKNOWN, AcqRel, Acquire);
        let _ = state.compare_exchange(MADE, UNKNOWN, AcqRel, Acquire);
    }
}

/// The `RWF_*` flags a read of `fd` at its file position gets from the
/// shim: `RWF_DONTCACHE` for a `READ_COLD` file on a filesystem that takes
/// it, else none. A small input read once, as `rsync` reads each of a
/// tree's files, is then dropped page by page as the kernel copies it out,
/// on the reading CPU, where a drop at close made the kernel drain every
/// CPU's LRU batches for the pages still in one (854 of 50,000 closes
/// waited so). Reads at an offset (`pread`) leave it to the drop after
/// the close: a program that reads a small file at offsets (a database)
/// may read a page again, which the kernel would read back from the disk.
pub fn cold_read_flags(fd: c_int) -> i32 {
    match slot(fd) {
        Some(i) if STATE[i].load(Acquire) == READ_COLD && COLD_BY_KERNEL[i].load(Relaxed) => dc_sys::RWF_DONTCACHE,
        _ => 0,
    }
}

/// Whether the shim handles `fd` as a file: with a handle, or `READ_COLD`.
/// A `MADE` file gets its handle here (a stream is made on it, whose own
/// writes the shim does not see).
pub fn handles_file(fd: c_int) -> bool {
    slot(fd).is_some_and(|i| match STATE[i].load(Acquire) {
        MADE => get(fd).is_some(),
        state => matches!(state, TRACKED | READ_COLD),
    })
}

/// `new` is a copy of `old` (`dup`, `F_DUPFD`): tracked as `old` is. A
/// copy of a `READ_COLD` file is one too: either's close has the file dropped.
pub fn track_copy(old: c_int, new: c_int) {
    if new < 0 || new == old || crate::in_vfork_child() {
        return;
    }
    // First use of `old` included: it may become `READ_COLD` here.
    let tracked = get(old).is_some();
    let (Some(i), Some(j)) = (slot(old), slot(new)) else { return };
    if STATE[i].load(Acquire) == READ_COLD {
        COLD_BY_KERNEL[j].store(COLD_BY_KERNEL[i].load(Relaxed), Relaxed);
        occupy(j, None, READ_COLD);
    } else if tracked {
        // SAFETY: F_GETFL has no side effects.
        let flags = unsafe { crate::real::fcntl()(new, libc::F_GETFL, 0) };
        adopt(new, flags, None);
    } else {
        forget(new);
    }
}

/// The handle of `fd` for a mapping of it: a `READ_COLD` file gets one
/// now, as what is read through a mapping is seen only by the sweep and
/// at unmap. What it read so far is dropped first, or the handle would
/// count it as cached before the program.
pub fn get_for_mapping(fd: c_int) -> Option<Arc<Handle>> {
    let i = slot(fd)?;
    if STATE[i].load(Acquire) != READ_COLD {
        return get(fd);
    }
    if crate::in_vfork_child() {
        return None;
    }
    drop_cold(fd);
    // SAFETY: F_GETFL has no side effects.
    let flags = unsafe { crate::real::fcntl()(fd, libc::F_GETFL, 0) };
    adopt_as(fd, flags, None, Taking::Seen)
}

/// `fd` is a new descriptor of a kind the shim never tracks (a socket, a
/// pipe): whatever the number held before is gone.
pub fn forget(fd: c_int) {
    if let Some(i) = slot(fd) {
        // A number the parent of a vfork child may hold a file on.
        if STATE[i].load(Acquire) != PLAIN && crate::in_vfork_child() {
            return;
        }
        if let Some(old) = HANDLES[i].swap(None) {
            engine(|| drop(old.release_shared()));
        }
        STATE[i].store(PLAIN, Release);
    }
}

/// Every tracked handle, left in the table (for `exec`).
pub fn tracked() -> Vec<Arc<Handle>> {
    (0..TRACKED_BELOW.load(Acquire))
        .filter(|&i| STATE[i].load(Acquire) == TRACKED)
        .filter_map(|i| HANDLES[i].load_full())
        .collect()
}

/// Every tracked handle, taken out of the table (for exit).
pub fn take_all() -> Vec<TakenHandle> {
    (0..TRACKED_BELOW.load(Acquire))
        .filter(|&i| matches!(STATE[i].load(Acquire), TRACKED | READ_COLD | MADE))
        .filter_map(|i| take(i as c_int))
        .collect()
}

/// A yes-or-no a filesystem gives once for all its files, remembered per
/// device. The answers are only ever tried, never waited for: a child
/// forked while another thread held them would wait for good; a try that
/// finds them held asks the filesystem again.
type PerDevice = Mutex<Option<HashMap<u64, bool>>>;

/// The answer `known` has for device `dev`, else `ask`'s, kept where it
/// gave one (`None`: no answer for the filesystem, `false` this time).
fn per_device(known: &PerDevice, dev: u64, ask: impl FnOnce() -> Option<bool>) -> bool {
    if let Some(ok) = known.try_lock().ok().and_then(|k| k.as_ref()?.get(&dev).copied()) {
        return ok;
    }
    let Some(ok) = ask() else { return false };
    if let Ok(mut known) = known.try_lock() {
        known.get_or_insert_with(HashMap::new).insert(dev, ok);
    }
    ok
}

/// Whether files on the device `dev` live in a page cache that can give
/// pages up: not procfs, sysfs and the other pseudo filesystems (their
/// "files" are generated), nor tmpfs (the page cache is their storage).
fn page_cached_fs(fd: c_int, dev: u64) -> bool {
    // Only tried, never waited for (`per_device`): a fork cannot leave it held.
    static KNOWN: Mutex<Option<HashMap<u64, bool>>> = Mutex::new(None);
    per_device(&KNOWN, dev, || {
        // SAFETY: `fd` is open for the length of this call.
        let fs = dc_sys::fs_type_of(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }).unwrap_or_default();
        Some(!dc_sys::is_generated_fs(&fs) && !matches!(fs.as_str(), "tmpfs" | "ramfs" | "hugetlbfs"))
    })
}

/// Whether the kernel takes `RWF_DONTCACHE` on reads of the filesystem on
/// device `dev` (6.14 and later, a filesystem with FOP_DONTCACHE), asked
/// with a one-byte read at `end`, the end of `file`, open for reading: the
/// kernel checks the flag before it reads, and there is nothing there to
/// read. An error is not an answer for the filesystem: the next file asks.
fn device_takes_dontcache_reads(file: std::os::fd::BorrowedFd<'_>, dev: u64, end: u64) -> bool {
    // Only tried, never waited for (`per_device`): a fork cannot leave it held.
    static KNOWN: Mutex<Option<HashMap<u64, bool>>> = Mutex::new(None);
    per_device(&KNOWN, dev, || dc_sys::takes_dontcache_reads(file, end).ok())
}
