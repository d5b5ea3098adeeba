//! The library's own descriptors: its duplicates of the program's files,
//! the layer files of overlay files, its eventfds, rings, the
//! /proc/meminfo it keeps open.
//!
//! They live above the program's limit where the process's is raised
//! above it, else in the upper half of the descriptor range, from 8,192
//! at most (`library_numbers`), out of the way of a program that expects its own
//! to be numbered low, and they are registered while open, so that the
//! program's closes spare them: a program that closes every descriptor
//! above 2 (`closefrom(3)`, a `close` loop) believes it owns them all.
//! Closing the library's duplicates under it sent a tracked file's writes,
//! through a number reused by the library's next duplicate, into another
//! file (measured: a program's stdout after `closefrom(3)` landed in the
//! next file it wrote). The shim asks here before it closes a number it
//! does not track (`close_unless_own`, `close_range_sparing_own`).
//!
//! A guard makes each dup and its registration one step for the program's
//! closes: the library's dups take it, and so do the program's closes of
//! numbers at or above the lowest registered one (a program's usual
//! closes, of low numbers, never touch it). The library's closes take it
//! only to mark the number closing before the `close` and to forget it
//! after: with the close under the guard, `tar -xf` of 50,000 files slept
//! on it 1,082 times in a run, duplicating each file it closed while the
//! flusher closed a burst of finished files.
//! A program's close of a number marked closing waits for that close to
//! end: until it does the number is still the library's, and after it may
//! be the program's. A fork takes the guard first (`pthread_atfork`), so a
//! child never starts with it held by a thread it does not have.

use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::*};
use std::sync::Once;

/// A pthread mutex, not std's: the fork handlers lock it in one call and
/// unlock it in another, which std's guards cannot. Not a read-write
/// lock: glibc's prefer readers, and with the library's threads taking
/// one shared over and over a fork waiting to take it alone could wait
/// long. It also keeps the registry, reached only through `Held`.
struct Guard {
    lock: UnsafeCell<libc::pthread_mutex_t>,
    registry: UnsafeCell<Registry>,
}

/// The library's numbers: those open, each with the fork generation that
/// made it (a forked child's engine never closes its parent's), and those
/// being closed, each with how many closes of it are under way (a number
/// closed, reused by the library's next duplicate and closed again before
/// the first close was forgotten is being closed twice).
struct Registry {
    open: BTreeMap<RawFd, u64>,
    closing: BTreeMap<RawFd, u32>,
}

// SAFETY: the lock is a pthread mutex, made to be shared between threads,
// and the registry is reached only by the thread holding it
// (`Held::registry`), or by a forked child's only thread (`watch_forks`).
unsafe impl Sync for Guard {}

static GUARD: Guard = Guard {
    lock: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
    registry: UnsafeCell::new(Registry { open: BTreeMap::new(), closing: BTreeMap::new() }),
};

/// Holds the guard until dropped (also when a panic unwinds); not to be
/// sent to another thread, which could not unlock it.
struct Held(PhantomData<*const ()>);

impl Held {
    fn registry(&mut self) -> &mut Registry {
        // SAFETY: this thread holds the lock while `self` lives, and `self`
        // is borrowed mutably for as long as the registry is.
        unsafe { &mut *GUARD.registry.get() }
    }

    /// The numbers open, with their fork generations.
    fn own(&mut self) -> &mut BTreeMap<RawFd, u64> {
        &mut self.registry().open
    }

    fn register(&mut self, fd: RawFd) {
        self.own().insert(fd, crate::engine::fork_generation());
        self.registry().note_lowest();
        // Registrations are serialised by the guard: no read-modify-write.
        if fd > HIGHEST.load(Relaxed) {
            HIGHEST.store(fd, Relaxed);
        }
    }

    fn unregister(&mut self, fd: RawFd) {
        self.own().remove(&fd);
        self.registry().note_lowest();
    }

    /// `fd`, open, is about to be closed: it stays the library's until
    /// `closed`.
    fn closing(&mut self, fd: RawFd) {
        let registry = self.registry();
        registry.open.remove(&fd);
        *registry.closing.entry(fd).or_insert(0) += 1;
        registry.note_lowest();
    }

    /// A close of `fd` begun with `closing` is over.
    fn closed(&mut self, fd: RawFd) {
        let registry = self.registry();
        if let std::collections::btree_map::Entry::Occupied(mut under_way) = registry.closing.entry(fd) {
            *under_way.get_mut() -= 1;
            if *under_way.get() == 0 {
                under_way.remove();
            }
        }
        registry.note_lowest();
    }

    /// Whether `fd` is being closed by the library now (`closing`).
    fn being_closed(&mut self, fd: RawFd) -> bool {
        self.registry().closing.contains_key(&fd)
    }
}

impl Registry {
    fn note_lowest(&self) {
        let first = |fd: Option<&RawFd>| fd.copied().unwrap_or(i32::MAX);
        LOWEST.store(first(self.open.keys().next()).min(first(self.closing.keys().next())), Release);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: this thread holds the lock (`Held` is made only then).
        unsafe { libc::pthread_mutex_unlock(GUARD.lock.get()) };
    }
}

pub(crate) fn watch_forks() {
    // A blocking once, as registering must be done before the caller goes
    // on: a child forked while another thread was inside it would wait
    // here for ever, so the shim registers at load, before the program's
    // threads (`watch_forks_now`).
    static WATCH: Once = Once::new();
    extern "C" fn before_fork() {
        // SAFETY: a static, initialised mutex.
        unsafe { libc::pthread_mutex_lock(GUARD.lock.get()) };
    }
    extern "C" fn in_parent() {
        // SAFETY: `before_fork` locked it on this thread.
        unsafe { libc::pthread_mutex_unlock(GUARD.lock.get()) };
    }
    extern "C" fn in_child() {
        // Made anew rather than unlocked: the child's thread is not the
        // thread that locked it, by its id.
        // SAFETY: the child has one thread, this one, which `before_fork`
        // locked it for; nobody else can be using it. The open numbers
        // stay registered: the child holds the library's descriptors its
        // parent held. The closes under way are forgotten: their threads
        // are not the child's, so they would never end, and the child's
        // copy of such a number is either a descriptor of the library's,
        // close-on-exec, which the program may close without harm, or
        // already a file of the program's.
        unsafe {
            *GUARD.lock.get() = libc::PTHREAD_MUTEX_INITIALIZER;
            let registry = &mut *GUARD.registry.get();
            registry.closing.clear();
            registry.note_lowest();
        }
    }
    // SAFETY: registers handlers that only lock, unlock and reset the guard.
    WATCH.call_once(|| unsafe {
        libc::pthread_atfork(Some(before_fork), Some(in_parent), Some(in_child));
    });
}

fn held() -> Held {
    watch_forks();
    // SAFETY: a static, initialised mutex.
    unsafe { libc::pthread_mutex_lock(GUARD.lock.get()) };
    Held(PhantomData)
}

/// The lowest registered number, open or being closed (`i32::MAX` when
/// none is): closes of lower numbers need no look at the registry.
static LOWEST: AtomicI32 = AtomicI32::new(i32::MAX);

/// The lowest number of the library's own descriptors (`i32::MAX`: none).
pub fn lowest_own() -> RawFd {
    LOWEST.load(Acquire)
}

/// The highest number ever registered (-1 before the first): how far a
/// vfork child looks for the library's duplicates
/// (`close_write_copies_in_vfork_child`).
static HIGHEST: AtomicI32 = AtomicI32::new(-1);

/// The lowest number `duplicate` asks for (`floor`), 0 until its first use
/// after the limits changed.
static FLOOR: AtomicI32 = AtomicI32::new(0);

/// The lowest floor `duplicate` ever used (`i32::MAX` before its first
/// duplicate): a vfork child looks for the library's duplicates from there
/// (`close_write_copies_in_vfork_child`), below a floor that rose since.
static LOWEST_FLOOR: AtomicI32 = AtomicI32::new(i32::MAX);

fn set_floor(floor: RawFd) {
    FLOOR.store(floor, Relaxed);
    LOWEST_FLOOR.fetch_min(floor, Relaxed);
}

/// The descriptor limit the program was given, where the process's soft
/// limit was raised above it so that the library's descriptors have
/// numbers of their own (the shim does, `set_program_open_files`); 0 where
/// the program's limit is the process's.
static PROGRAM_OPEN_FILES: AtomicU64 = AtomicU64::new(0);

/// Tells the library that the program was given `limit` descriptors and
/// the process's soft limit is higher: the numbers from `limit` up are
/// the library's (`None`: the program's limit is the process's, and the
/// library takes its upper half, from `MAX_LIBRARY_FLOOR` at most).
pub fn set_program_open_files(limit: Option<u64>) {
    PROGRAM_OPEN_FILES.store(limit.unwrap_or(0), Relaxed);
    FLOOR.store(0, Relaxed);
    crate::handle::forget_closed_files_cap();
}

/// The program's descriptor limit where it is below the process's
/// (`set_program_open_files`).
pub fn program_open_files() -> Option<u64> {
    Some(PROGRAM_OPEN_FILES.load(Relaxed)).filter(|&limit| limit > 0)
}

/// The highest number the library's descriptors begin at. Every fork
/// copies the descriptor table up to its highest open number, and the
/// table stays that size: a fork of a small C program took 230 us with
/// its descriptors at 0-2 and 320 us with one more at 19,999 (about 4.5 us
/// a thousand numbers, 3 rounds of 5,000 forks). Under a limit of
/// 1,048,576 both soft and hard, as containers are often given, the
/// numbers from half of it would add some 2.4 ms to every fork of a
/// process the library is in (and every child it executes inherits the
/// table) and 4 MiB of kernel memory to each. From 8,192 the library's
/// numbers stay above those of programs that count on 1,024 (`select`)
/// and the table, with `TABLE_ROOM`, at 16,384 numbers; the shim does not
/// raise a program's limit above it (its `limits::raised`).
pub const MAX_LIBRARY_FLOOR: u64 = 8192;

/// Where the library's numbers begin and the process's limit: from the
/// program's limit where the process's is above it, else from half the
/// process's limit, at most `MAX_LIBRARY_FLOOR`.
pub(crate) fn library_numbers() -> (u64, u64) {
    numbers_for(dc_sys::open_files_limit(), program_open_files())
}

/// `library_numbers` under a soft limit of `soft` and the program's limit.
fn numbers_for(soft: u64, program: Option<u64>) -> (u64, u64) {
    let floor = match program {
        Some(program) if program < soft => program,
        _ => (soft / 2).min(MAX_LIBRARY_FLOOR),
    };
    (floor.max(3), soft)
}

/// A descriptor of the library's own, registered while it is open.
#[derive(Debug)]
pub struct OwnFd(RawFd);

impl OwnFd {
    /// Gives the number to `take`, which keeps it open for the process's
    /// life (an io_uring ring, see `device::Ring`): it stays registered, so
    /// the shim refuses the program's closes of it. A `take` that fails has
    /// closed the number (as `IoUring::from_fd` does): the registry forgets
    /// it in the same hold, before another thread can be given that number.
    /// `take` runs with the registry held and must not close through the
    /// shim: only the library's own threads, whose calls go straight to
    /// libc, may call this.
    pub fn give_for_life<T, E>(self, take: impl FnOnce(RawFd) -> Result<T, E>) -> Result<T, E> {
        let fd = self.0;
        std::mem::forget(self);
        let mut held = held();
        let taken = take(fd);
        if taken.is_err() {
            held.unregister(fd);
        }
        taken
    }
}

impl AsFd for OwnFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor stays open while this lives.
        unsafe { BorrowedFd::borrow_raw(self.0) }
    }
}

impl AsRawFd for OwnFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl Drop for OwnFd {
    fn drop(&mut self) {
        held().closing(self.0);
        // The raw system call: the shim's `close` would refuse a number
        // still registered.
        // SAFETY: this owns the descriptor, and nothing uses it after.
        unsafe { libc::syscall(libc::SYS_close, self.0) };
        held().closed(self.0);
    }
}

/// A duplicate of `fd` of the library's own, numbered above the program's
/// (`library_numbers`), so a program that expects its own descriptors to
/// be numbered low (shell redirections, `select`) never meets it. Where
/// those numbers are all taken (`EMFILE`) there is none: a duplicate
/// numbered lower would take the number the program's next descriptor
/// should get, and the file goes untracked instead. The limit is asked for
/// again only when it was lowered under the floor (`EINVAL`): a
/// `getrlimit` on every open was one system call in fifteen of tar's per
/// file.
pub fn duplicate(fd: RawFd) -> io::Result<OwnFd> {
    let floor = || library_numbers().0.min(i32::MAX as u64) as RawFd;
    let mut high = FLOOR.load(Relaxed);
    let first = high == 0;
    if first {
        high = floor();
        set_floor(high);
    }
    let mut held = held();
    let dup = match dc_sys::dup_at_least(fd, high) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let high = floor();
            set_floor(high);
            dc_sys::dup_at_least(fd, high)
        }
        dup => dup,
    }?;
    let own = adopt(&mut held, dup);
    if first {
        make_table_room(&mut held, own.0);
    }
    Ok(own)
}

/// How many numbers from the library's floor the process's descriptor
/// table is grown to hold at the library's first duplicate. The kernel
/// grows the table (to the next power of two) when a number past its end
/// is taken, and in a process with more than one thread each growth waits
/// for an RCU grace period on the thread that took the number: 8-14 ms
/// here. At the first duplicate the program has usually one thread and
/// the growth no wait. Under `tar -xf` of 50,000 small files the
/// library's numbers reached 8,361 (floor 1,024), and tar's thread waited
/// for two or three growths a run, 23 ms; the library's threads for more.
/// The cost is kernel memory, 8 bytes a number: 128 KiB for a table of
/// 16,384.
const TABLE_ROOM: u64 = 8192;

/// Grows the descriptor table to hold the library's numbers up to
/// `TABLE_ROOM` from the floor (within the soft limit): a duplicate of
/// `fd` is taken at the last of them and closed at once. With the guard
/// held, so no close of the program's comes between; never below the
/// floor, where the number would be one the program's next descriptor
/// should get.
fn make_table_room(_held: &mut Held, fd: RawFd) {
    let (floor, soft) = library_numbers();
    let last = (floor + TABLE_ROOM).min(soft).min(i32::MAX as u64) - 1;
    if last < floor {
        return;
    }
    if let Ok(room) = dc_sys::dup_at_least(fd, last as RawFd) {
        // The raw system call: the shim's `close` would take the guard,
        // which this thread holds.
        // SAFETY: the descriptor was just made here and nothing else has it.
        unsafe { libc::syscall(libc::SYS_close, std::os::fd::IntoRawFd::into_raw_fd(room)) };
    }
}

/// Grows the descriptor table now (see `TABLE_ROOM`), for a process about
/// to start threads that will take the library's numbers: `dontcache
/// run`'s receiver waited for four or five growths at the end of each
/// `tar -xf`. `fd` is any open descriptor, duplicated and closed again.
pub fn make_room_for_numbers(fd: BorrowedFd<'_>) {
    make_table_room(&mut held(), fd.as_raw_fd());
}

/// A descriptor the library made for itself (an eventfd, a reopened file),
/// which the kernel numbered lowest-free, moved where `duplicate` puts the
/// library's; kept where it is when it cannot move. A program that closed
/// its standard input and opens a file expects it to be number 0.
pub fn move_high(fd: OwnedFd) -> OwnFd {
    match duplicate(fd.as_raw_fd()) {
        Ok(own) => own,
        Err(_) => adopt(&mut held(), fd),
    }
}

/// Library descriptors being made now, and how many makings have begun.
/// The kernel gives each new descriptor the lowest free number, so one the
/// library makes holds that number until it is moved high: a program's
/// call that gets a number meanwhile, on another thread, gets the next
/// one. A program that closed its standard output and then opens (or
/// dups) a file expects it to become number 1; without this check an open
/// in a random sequence of calls got a number one higher than without the
/// shim in 4 runs of 60 (the flusher making its ring as the sequence
/// opened). Counters rather than a lock: a program's open may block (a
/// FIFO) for as long as it likes.
static MAKING: AtomicU32 = AtomicU32::new(0);
static MADE: AtomicU32 = AtomicU32::new(0);
/// The longest a program's call waits for the library's makings or closes
/// to end (`Numbering::renumber`, `unless_own`).
const WAIT_LIMIT: std::time::Duration = std::time::Duration::from_millis(500);

/// A wait for a few of the library's system calls on another thread to
/// end. They take microseconds, but their thread can lose its CPU in the
/// middle, on a loaded machine for longer than a thousand yields take: it
/// sleeps after a hundred, bounded all the same (`WAIT_LIMIT`), as another
/// thread may start one after another.
/// The clock is read at the first pause, not at `new`: most callers (every
/// close of a number the shim does not track) never wait.
struct Backoff {
    since: Option<std::time::Instant>,
    yields: u32,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff { since: None, yields: 0 }
    }

    /// Waits a moment; false once the wait has lasted `WAIT_LIMIT`.
    fn pause(&mut self) -> bool {
        if self.since.get_or_insert_with(std::time::Instant::now).elapsed() >= WAIT_LIMIT {
            return false;
        }
        if self.yields < 100 {
            self.yields += 1;
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        true
    }
}

/// Runs `make`, during which the library holds a descriptor at the lowest
/// free number (it makes one and moves it high, or opens one for a moment),
/// so that the program's calls meanwhile are renumbered (`Numbering`).
pub fn making<T>(make: impl FnOnce() -> T) -> T {
    // Counted busy before the start: see `Numbering::begin`.
    MAKING.fetch_add(1, SeqCst);
    MADE.fetch_add(1, SeqCst);
    let made = make();
    MAKING.fetch_sub(1, SeqCst);
    made
}

/// Whether the library is making a descriptor of its own now (`making`):
/// a call that found the descriptor table full can find room once it is
/// made and moved high, or closed.
pub fn making_under_way() -> bool {
    MAKING.load(SeqCst) > 0
}

/// A descriptor the library makes for itself, moved high (`move_high`),
/// made under `making`.
pub fn made_high(make: impl FnOnce() -> io::Result<OwnedFd>) -> io::Result<OwnFd> {
    making(|| make().map(move_high))
}

/// What the library's makings had come to as a call of the program's that
/// gives it new descriptors (an open, a dup, a socket, a pipe) began: if
/// the library made one of its own meanwhile, the numbers given may be
/// higher than the kernel would have given without the library, and are
/// moved to the lowest free ones once the making is over (`renumber`).
/// Costs three loads where no making ran.
pub struct Numbering {
    made: u32,
    busy: u32,
}

impl Numbering {
    pub fn begin() -> Numbering {
        // Read in the opposite order to `making`'s stores: a making whose
        // start this misses began after the call returned, and one counted
        // in `MADE` already but not seen busy here had ended before the
        // call began.
        let made = MADE.load(SeqCst);
        Numbering { made, busy: MAKING.load(SeqCst) }
    }

    /// Whether a making of the library's overlapped the call so far.
    pub fn overlapped(&self) -> bool {
        self.busy != 0 || MADE.load(SeqCst) != self.made
    }

    /// `fd`, a number the call gave (or its failure, negative), as the
    /// kernel would have numbered it without the library: the lowest free
    /// at or above `min` where a making overlapped the call.
    pub fn renumber(&self, fd: RawFd, min: RawFd) -> RawFd {
        if fd < 0 || !self.overlapped() {
            return fd;
        }
        let mut backoff = Backoff::new();
        while MAKING.load(SeqCst) != 0 && backoff.pause() {}
        lowest_free(fd, min)
    }
}

/// `call`, which gives the program one new descriptor at or above `min`,
/// numbered as without the library (`Numbering`).
pub fn numbered_as_alone(min: RawFd, call: impl FnOnce() -> RawFd) -> RawFd {
    let numbering = Numbering::begin();
    numbering.renumber(call(), min)
}

/// `fd` moved to the lowest free number at or above `min` where that is
/// lower, with its close-on-exec flag; `errno` as it was. A file the
/// program locks keeps its number: closing either of the two numbers would
/// release the program's POSIX locks on it (`locked`).
fn lowest_free(fd: RawFd, min: RawFd) -> RawFd {
    let errno = dc_sys::errno();
    if dc_sys::fstat(fd).is_ok_and(|st| crate::locked::is_locked(st.dev, st.ino)) {
        dc_sys::set_errno(errno);
        return fd;
    }
    // Raw system calls: the shim's `fcntl` would renumber its duplicate.
    // SAFETY: plain fcntl calls on a number the caller was just given.
    let cloexec = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFD) } > 0;
    let cmd = if cloexec { libc::F_DUPFD_CLOEXEC } else { libc::F_DUPFD };
    // SAFETY: as above; the duplicate is closed below or returned.
    let other = unsafe { libc::syscall(libc::SYS_fcntl, fd, cmd, min) } as RawFd;
    let kept = if other >= 0 && other < fd { other } else { fd };
    if other >= 0 {
        // The raw system call: the shim's `close` is the program's.
        // SAFETY: closes whichever of the two numbers is not kept.
        unsafe { libc::syscall(libc::SYS_close, if kept == fd { other } else { fd }) };
    }
    dc_sys::set_errno(errno);
    kept
}

/// A descriptor a caller gave the library for good (`Handle::own`), kept
/// where it is: moving it would cost the duplicate it saves.
pub fn take(fd: OwnedFd) -> OwnFd {
    adopt(&mut held(), fd)
}

fn adopt(held: &mut Held, fd: OwnedFd) -> OwnFd {
    let raw = std::os::fd::IntoRawFd::into_raw_fd(fd);
    held.register(raw);
    OwnFd(raw)
}

/// How many of the descriptors this process's engine made (not its
/// parent's, which a forked child inherits and never closes) are open on
/// a file that `fstat` says is `of` (a file the program locks: `locked`;
/// a filesystem to be unmounted).
pub fn open_on(of: impl Fn(&dc_sys::FileStat) -> bool) -> usize {
    let generation = crate::engine::fork_generation();
    let mut held = held();
    let mut fds: Vec<RawFd> = held.own().iter().filter(|(_, g)| **g == generation).map(|(&fd, _)| fd).collect();
    // A number being closed may still be open on the file.
    fds.extend(held.registry().closing.keys());
    drop(held);
    // Looked at after the hold: a number closed meanwhile is someone
    // else's file, or none.
    fds.into_iter().filter(|&fd| dc_sys::fstat(fd).is_ok_and(|st| of(&st))).count()
}

/// In a forked child: closes the descriptors its parent's engine made (the
/// child's never closes them: they close at its `exec`) that are open on
/// a file `keep` does not ask for, and forgets them; how many. For an
/// `exec` refused with ETXTBSY: a file the parent wrote and closed is still
/// open for writing in its library's duplicate, and the child's copy of
/// that duplicate would keep it so until the very `exec` that would close
/// it. The child's handles still use the duplicates of files its program
/// has open (`keep`).
pub fn close_inherited_unless(keep: impl Fn(&dc_sys::FileStat) -> bool) -> usize {
    let generation = crate::engine::fork_generation();
    let mut held = held();
    let inherited: Vec<RawFd> = held.own().iter().filter(|(_, g)| **g != generation).map(|(&fd, _)| fd).collect();
    let mut closed = 0;
    for fd in inherited {
        if dc_sys::fstat(fd).is_ok_and(|st| !keep(&st)) {
            // SAFETY: the library's own number, registered, closed once.
            unsafe { libc::close(fd) };
            held.unregister(fd);
            closed += 1;
        }
    }
    closed
}

/// In a vfork child, for an `exec` refused with ETXTBSY: closes the
/// child's copies of the library's duplicates of files open for writing;
/// how many. A file its parent wrote and closed stays open for writing in
/// the parent's duplicate until the parent's flusher is done with it, and
/// in the child's copy of that duplicate until the very `exec` it blocks.
///
/// The child shares its parent's memory, the registry included, which it
/// must neither lock nor trust: the parent's other threads go on changing
/// it, and a duplicate the parent has closed since the vfork, the one
/// that keeps the file busy, is no longer in it. So it goes by where
/// `duplicate` numbers them (from the lowest floor it used to the highest
/// number ever registered) and by what the kernel says of each:
/// close-on-exec (every duplicate is, so a successful `exec` closes them
/// all anyway), open for writing, a regular file. A vfork child does
/// nothing but `exec` or `_exit`, and the parent's descriptors are its
/// own: the closes change nothing else, unless the program itself holds a
/// close-on-exec descriptor that high open for writing on the very file it
/// executes, which natively fails. Only system calls: no allocation, no
/// lock.
pub fn close_write_copies_in_vfork_child() -> usize {
    let (floor, highest) = (LOWEST_FLOOR.load(Relaxed), HIGHEST.load(Relaxed));
    if floor == i32::MAX {
        return 0;
    }
    let mut closed = 0;
    for fd in floor..=highest {
        // Raw system calls: the shim's `fcntl` and `close` are the
        // program's.
        // SAFETY: F_GETFD and F_GETFL on a number, no memory passed.
        let (fd_flags, status) = unsafe {
            (libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFD), libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL))
        };
        if fd_flags < 0 || fd_flags & libc::FD_CLOEXEC as libc::c_long == 0 {
            continue;
        }
        let writable = status >= 0 && status & libc::O_ACCMODE as libc::c_long != libc::O_RDONLY as libc::c_long;
        if writable && dc_sys::fstat(fd).is_ok_and(|st| st.is_regular()) {
            // SAFETY: the child's own copy of a close-on-exec descriptor,
            // closed once; its parent's stays open.
            unsafe { libc::syscall(libc::SYS_close, fd) };
            closed += 1;
        }
    }
    closed
}

/// The shim's `close` of a number it does not track: `close` unless the
/// number is the library's, which the program never opened (`-1` with
/// `EBADF`, as for a number not open).
pub fn close_unless_own(fd: RawFd, close: impl FnOnce() -> libc::c_int) -> libc::c_int {
    unless_own(fd, libc::EBADF, close)
}

/// The shim's `dup2`/`dup3` onto `new`, which closes what `new` holds:
/// refused with `EBUSY` (the kernel's answer while a number is being
/// opened) when `new` is the library's, whose file would otherwise take
/// the program's writes through the library.
pub fn dup_onto_unless_own(new: RawFd, dup: impl FnOnce() -> libc::c_int) -> libc::c_int {
    unless_own(new, libc::EBUSY, dup)
}

fn unless_own(fd: RawFd, errno: libc::c_int, call: impl FnOnce() -> libc::c_int) -> libc::c_int {
    let mut backoff = Backoff::new();
    loop {
        if fd < LOWEST.load(Acquire) {
            return call();
        }
        // Held across the call: the number cannot become the library's in
        // between.
        let mut held = held();
        if held.own().contains_key(&fd) {
            dc_sys::set_errno(errno);
            return -1;
        }
        if !held.being_closed(fd) {
            return call();
        }
        drop(held);
        // Still the library's if its close never ends (a signal handler
        // closing it on the very thread that was closing it).
        if !backoff.pause() {
            dc_sys::set_errno(errno);
            return -1;
        }
    }
}

/// The shim's `close_range(first, last)`: `close` called on each stretch
/// of the range that holds none of the library's numbers. Returns the
/// first failure, or 0.
pub fn close_range_sparing_own(first: u32, last: u32, mut close: impl FnMut(u32, u32) -> libc::c_int) -> libc::c_int {
    // A range the kernel refuses is refused by it.
    if first > last || last < LOWEST.load(Acquire) as u32 {
        return close(first, last);
    }
    let mut backoff = Backoff::new();
    let mut held = held();
    // The numbers being closed now are waited for, as by `unless_own`;
    // past the wait, and those the library began to close since, spared as
    // the library's (a flusher closing file after file would always be
    // closing one).
    let numbers = first.min(i32::MAX as u32) as RawFd..=last.min(i32::MAX as u32) as RawFd;
    let closing: Vec<RawFd> = held.registry().closing.range(numbers).map(|(&fd, _)| fd).collect();
    while closing.iter().any(|&fd| held.being_closed(fd)) {
        drop(held);
        let waiting = backoff.pause();
        held = self::held();
        if !waiting {
            break;
        }
    }
    let registry = held.registry();
    let mut own: Vec<u32> = registry.open.keys().chain(registry.closing.keys()).map(|&fd| fd as u32).collect();
    own.retain(|fd| (first..=last).contains(fd));
    own.sort_unstable();
    own.dedup();
    // Stretches between the library's numbers (sorted; each below
    // 2^31, so one past it never overflows).
    let mut stretches = Vec::with_capacity(own.len() + 1);
    let mut from = first;
    for fd in own {
        if fd > from {
            stretches.push((from, fd - 1));
        }
        from = fd + 1;
    }
    if from <= last {
        stretches.push((from, last));
    }
    let mut result = 0;
    for (a, b) in stretches {
        let r = close(a, b);
        if result == 0 {
            result = r;
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn null() -> OwnFd {
        move_high(std::fs::File::open("/dev/null").unwrap().into())
    }

    #[test]
    fn the_librarys_numbers_begin_at_the_programs_limit_or_half_the_process_but_not_high() {
        assert_eq!(numbers_for(2048, Some(1024)), (1024, 2048), "above a raised program's limit");
        assert_eq!(numbers_for(1024, None), (512, 1024), "the upper half of a shared range");
        assert_eq!(numbers_for(20_000, None), (MAX_LIBRARY_FLOOR, 20_000));
        assert_eq!(
            numbers_for(1 << 20, None),
            (MAX_LIBRARY_FLOOR, 1 << 20),
            "not half of a container's 1,048,576: every fork would copy a table of 524,288 numbers"
        );
        assert_eq!(numbers_for(1024, Some(1024)), (512, 1024), "a program's limit no longer below the process's");
        assert_eq!(numbers_for(4, None), (3, 4), "never the standard streams");
    }

    #[test]
    fn a_range_closes_around_the_librarys_numbers() {
        let (a, b) = (null(), null());
        let (a, b) = (a.as_raw_fd() as u32, b.as_raw_fd() as u32);
        let (first, last) = (a.min(b).saturating_sub(5), a.max(b) + 5);
        let mut stretches = Vec::new();
        let record = |x, y| {
            stretches.push((x, y));
            0
        };
        assert_eq!(close_range_sparing_own(first, last, record), 0);
        assert!(!stretches.is_empty());
        let mut after = first;
        for &(x, y) in &stretches {
            assert!(after <= x && x <= y && y <= last, "{stretches:?} in {first}..={last}");
            for own in [a, b] {
                assert!(!(x..=y).contains(&own), "{own} is the library's: {stretches:?}");
            }
            after = y + 1;
        }
        assert_eq!(close_range_sparing_own(5, 4, |_, _| 7), 7, "a range the kernel refuses goes to it");
    }

    #[test]
    fn a_close_of_the_librarys_number_fails_as_for_a_number_not_open() {
        let own = null();
        let mut called = false;
        assert_eq!(
            close_unless_own(own.as_raw_fd(), || {
                called = true;
                0
            }),
            -1
        );
        assert!(!called);
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EBADF));
        // A number below every registered one is closed without a look.
        assert_eq!(close_unless_own(0, || 0), 0);
    }

    #[test]
    fn a_programs_close_of_a_number_the_library_is_closing_waits_for_that_close() {
        // The library's close of `fd` stopped between its mark and its end;
        // the number stays this test's, so that no other test's file takes
        // it meanwhile.
        let file = std::fs::File::open("/dev/null").unwrap();
        let fd = file.as_raw_fd();
        held().closing(fd);
        let called = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let program = std::thread::spawn({
            let called = called.clone();
            move || {
                close_unless_own(fd, || {
                    called.store(true, SeqCst);
                    0
                })
            }
        });
        let ranged = std::thread::spawn(move || {
            let mut closed = Vec::new();
            close_range_sparing_own(fd as u32, fd as u32, |a, b| {
                closed.push((a, b));
                0
            });
            closed
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!called.load(SeqCst), "the number is still the library's until its close ends");
        held().closed(fd);
        assert_eq!(program.join().unwrap(), 0);
        assert!(called.load(SeqCst), "once closed, the number is the program's to close");
        assert_eq!(ranged.join().unwrap(), vec![(fd as u32, fd as u32)], "so it is for a close_range");
        drop(file);
    }

    #[test]
    fn the_descriptor_table_is_grown_at_once_for_the_librarys_numbers() {
        let file = std::fs::File::open("/dev/null").unwrap();
        make_room_for_numbers(file.as_fd());
        let (floor, soft) = library_numbers();
        let room = (floor + TABLE_ROOM).min(soft);
        // The kernel's table size: FDSize in /proc/self/status.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let size: u64 = status.lines().find_map(|l| l.strip_prefix("FDSize:")).unwrap().trim().parse().unwrap();
        assert!(size >= room, "the table holds {size} numbers, the library's reach {room}");
        // SAFETY: F_GETFD only asks whether the number is open.
        let open = unsafe { libc::fcntl(room as RawFd - 1, libc::F_GETFD) } != -1;
        assert!(!open, "the number that made the room is closed again");
    }

    #[test]
    fn a_number_given_for_life_stays_the_librarys_unless_the_taker_failed() {
        let is_own = |fd: RawFd| close_unless_own(fd, || 0) == -1;
        let kept = null();
        let fd = kept.as_raw_fd();
        assert_eq!(kept.give_for_life(Ok::<RawFd, ()>), Ok(fd));
        assert!(is_own(fd), "a number kept open for life is still refused to the program");
        let failed = null();
        let fd = failed.as_raw_fd();
        let taken = failed.give_for_life(|fd| {
            // SAFETY: the taker owns the number, and closes it as it fails.
            unsafe { libc::close(fd) };
            Err::<(), ()>(())
        });
        assert_eq!(taken, Err(()));
        assert!(
            !is_own(fd),
            "a number the taker closed is forgotten, or the program's next file of that number could not be closed"
        );
    }
}
