//! The per-process engine: one `Device` (and flusher thread) per st_dev.
//!
//! Fork safety: a child has none of its parent's threads, and locks the
//! parent held at fork time stay held forever in the child. A
//! `pthread_atfork` child handler bumps a fork generation; a child that
//! touches the library then gets a fresh engine (and fresh file states, see
//! `handle.rs`) and never touches the parent's locks. Checking the
//! generation is one atomic load, cheap enough for every write.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, Once};

use crate::device::{Device, LateError};
use crate::policy::Submit;
use crate::stats::Stats;

pub struct Engine {
    /// The fork generation this engine belongs to.
    pub generation: u64,
    /// By device number and filesystem id (see `device`).
    devices: Mutex<HashMap<(u64, u64), Arc<Device>>>,
    /// This process's connection to `dontcache run`, if any.
    pub(crate) handoff: crate::handoff::Connection,
    /// The files the program locks, and the library's descriptors of each.
    pub(crate) locks: crate::locked::Locks,
    /// Files the program made and closed without a handle (`crate::made`).
    pub(crate) made: crate::made::Intake,
}

static ENGINE: AtomicPtr<Engine> = AtomicPtr::new(std::ptr::null_mut());
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);
/// This process's id once asked for; 0 until then and in a fresh child.
static PROCESS_ID: AtomicI32 = AtomicI32::new(0);

extern "C" fn forked_child() {
    PROCESS_ID.store(0, Release);
    FORK_GENERATION.fetch_add(1, Release);
    // The parent's flusher found those, not the child's.
    ORPHANED_PAGES.store(0, Release);
    UNACCOUNTED_PAGES.store(0, Release);
    UNACCOUNTED_FILES.store(0, Release);
    crate::device::LATE_UNREPORTED.store(0, Release);
}

thread_local! {
    static LIBRARY_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// How deep the program's thread is in library code that no caller
    /// marked as such (`as_library`).
    static LIBRARY_CALLS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Starts one of the library's own threads (a flusher, the closer, a
/// `syncfs` thread), marked as such for `in_library`, with every
/// signal blocked: a signal sent to the process is the program's, and its
/// handler runs on one of the program's threads, never on one of these in
/// the middle of the library's work (where a handler that waits for that
/// work, as the shim's for a stop signal does, would wait forever).
pub(crate) fn spawn_thread(
    name: String,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    dc_sys::with_signals_blocked(|| {
        std::thread::Builder::new().name(name).spawn(move || {
            LIBRARY_THREAD.set(true);
            f()
        })
    })
}

/// Whether the calling thread runs the library's code: it is one of the
/// library's own threads, or a program's thread inside `as_library`. The
/// shim lets such a thread's libc calls through untouched, as it does the
/// engine's calls it makes itself (they are the library's, not the
/// program's: a descriptor it makes is not the program's to track, a
/// number it closes not the program's to close).
pub fn in_library() -> bool {
    LIBRARY_THREAD.get() || LIBRARY_CALLS.get() > 0
}

/// Runs `f`, library code reached on a program's thread without the
/// caller saying so (a handle's drop, wherever its last reference goes),
/// as the library's (`in_library`), with the caller's errno kept.
pub(crate) fn as_library<T>(f: impl FnOnce() -> T) -> T {
    struct Depth(i32);
    impl Drop for Depth {
        fn drop(&mut self) {
            LIBRARY_CALLS.set(LIBRARY_CALLS.get() - 1);
            dc_sys::set_errno(self.0);
        }
    }
    LIBRARY_CALLS.set(LIBRARY_CALLS.get() + 1);
    let _depth = Depth(dc_sys::errno());
    f()
}

/// This process's id, asked of the kernel once per process: every close
/// the shim sees needs it, and `getpid` is a system call.
pub fn process_id() -> libc::pid_t {
    watch_forks();
    match PROCESS_ID.load(Acquire) {
        0 => {
            let pid = dc_sys::getpid();
            PROCESS_ID.store(pid, Release);
            pid
        }
        pid => pid,
    }
}

/// Whether this process waits for its closed files at exit (the shim does,
/// in its exit hook). Only then may a closed file with nothing to write
/// back be dropped a moment after `close` returns instead of in it: a
/// program that closes its input and exits at once would otherwise leave
/// the input cached.
static SETTLE_AT_EXIT: AtomicBool = AtomicBool::new(false);

/// Declares that the caller settles every device at exit (`flush`), so
/// closes may leave drops to the flusher.
pub fn settle_closed_files_at_exit() {
    SETTLE_AT_EXIT.store(true, Release);
}

pub(crate) fn closed_files_settle_at_exit() -> bool {
    SETTLE_AT_EXIT.load(Acquire)
}

/// Pages the flusher found in flight with nothing to wait for them
/// (`FileState::in_flight_awaited`): a bookkeeping bug, survived.
static ORPHANED_PAGES: AtomicU64 = AtomicU64::new(0);

/// Pages and closed files still counted when a `flush` gave up on them,
/// the flusher having nothing left to do for them.
static UNACCOUNTED_PAGES: AtomicU64 = AtomicU64::new(0);
static UNACCOUNTED_FILES: AtomicU64 = AtomicU64::new(0);

pub(crate) fn note_unaccounted(pages: u64, closed_files: u64) {
    UNACCOUNTED_PAGES.fetch_add(pages, AcqRel);
    UNACCOUNTED_FILES.fetch_add(closed_files, AcqRel);
}

/// What `flush` found counted and gave up on, the flusher having had
/// nothing to do for it for two seconds: pages, closed files. Zero unless
/// the library has a bug; its tests assert it stays zero, and the shim
/// says it at exit. A `flush` that gave up returns as if all were done.
pub fn unaccounted() -> (u64, u64) {
    (UNACCOUNTED_PAGES.load(Acquire), UNACCOUNTED_FILES.load(Acquire))
}

pub(crate) fn note_orphaned(pages: u64) {
    ORPHANED_PAGES.fetch_add(pages, AcqRel);
}

/// How many pages this process's flushers found in flight with nothing
/// to wait for them, and waited for after all. Zero unless the library
/// has a bug; its tests assert it stays zero.
pub fn orphaned_pages() -> u64 {
    ORPHANED_PAGES.load(Acquire)
}

/// Bumped in every child forked after the library was first used.
pub fn fork_generation() -> u64 {
    FORK_GENERATION.load(Acquire)
}

/// Registers the library's fork handlers now: the engine's (a child is a
/// new process) and the descriptor guard's. Registered on first use
/// instead, from whatever thread, a handler could miss a fork that another
/// thread made at that moment, and that child then took its parent's
/// engine, with its locks held by threads it does not have (a program
/// forking at once while a thread opened its first file: 8 of 8 children
/// hung). The shim calls this as it loads, before the program has threads.
pub fn watch_forks_now() {
    watch_forks();
    crate::own::watch_forks();
}

/// Registers, once, the handler that tells a forked child it is a new process.
fn watch_forks() {
    static AT_FORK: Once = Once::new();
    AT_FORK.call_once(|| {
        // SAFETY: registers a handler that only touches atomics.
        unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    });
}

/// This process's engine.
pub fn engine() -> &'static Engine {
    watch_forks();
    let generation = fork_generation();
    let cur = ENGINE.load(Acquire);
    // SAFETY: engines are leaked, never freed, so the pointer stays valid.
    if let Some(e) = unsafe { cur.as_ref() } {
        if e.generation == generation {
            return e;
        }
    }
    let fresh = Box::into_raw(Box::new(Engine {
        generation,
        devices: Mutex::new(HashMap::new()),
        handoff: Default::default(),
        locks: Default::default(),
        made: Default::default(),
    }));
    match ENGINE.compare_exchange(cur, fresh, AcqRel, Acquire) {
        // SAFETY: just leaked above.
        Ok(_) => unsafe { &*fresh },
        Err(winner) => {
            // Another thread of this process won the race: use its engine.
            // SAFETY: `fresh` was never shared; `winner` is leaked like ours.
            unsafe {
                drop(Box::from_raw(fresh));
                &*winner
            }
        }
    }
}

/// This process's engine if it has made one: never makes one, for a
/// signal handler, which must not allocate.
pub(crate) fn existing_engine() -> Option<&'static Engine> {
    // SAFETY: engines are leaked, never freed, so the pointer stays valid.
    let e = unsafe { ENGINE.load(Acquire).as_ref() }?;
    (e.generation == fork_generation()).then_some(e)
}

/// The type of the filesystem whose writeback a file on `fs` takes: `fs`
/// itself, but for an overlay its upper layer's (`layers`), where the pages
/// live and which a `syncfs` of the overlay syncs (small files on an
/// overlay over ext4 went 1.27-1.51x faster through `syncfs` than one
/// `sync_file_range` per file). An overlay whose upper layer this process
/// cannot see (a container's, mounted in another namespace) stays itself.
fn written_back_on(fs: &dc_sys::Filesystem, layers: Option<&dc_sys::OverlayLayers>) -> String {
    let upper = layers.and_then(|l| l.upper.as_deref());
    upper.and_then(|u| dc_sys::fs_type_name(u).ok()).unwrap_or_else(|| fs.kind())
}

impl Engine {
    /// The device `dev` with the filesystem `fd`, a file on it, is on. A
    /// device number alone is not one filesystem for the life of a process:
    /// a loop device unmounted and mounted again with a new filesystem keeps
    /// its number, and the old one's late errors and counts must not become
    /// the new one's.
    ///
    /// A filesystem the library holds a descriptor on stays mounted and
    /// keeps its device number, so `fd`, on `dev` now, is on that one: the
    /// `fstatfs` that tells filesystems apart is needed only when the
    /// library holds none there (one system call less on nearly every open).
    pub fn device(&self, dev: u64, submit: Submit, fd: std::os::fd::BorrowedFd<'_>) -> Arc<Device> {
        let mut map = self.devices.lock().unwrap_or_else(|e| e.into_inner());
        let held = map.iter().find(|((n, _), d)| *n == dev && d.open_files.load(Acquire) > 0);
        if let Some((_, d)) = held {
            return d.clone();
        }
        let fs = dc_sys::fs_of(fd).unwrap_or_default();
        map.entry((dev, fs.id))
            .or_insert_with(|| {
                // Layers this process cannot reach (an overlay missing from
                // its mount table, or mounted from outside its tree, as a
                // container's root is) are left out: no lookup per open.
                let layers = (fs.kind() == "overlayfs").then(|| {
                    // The mount table is read through a descriptor of a moment.
                    let found = crate::own::making(|| dc_sys::overlay_layers(dev));
                    let mut layers = found.unwrap_or(dc_sys::OverlayLayers {
                        point: std::path::PathBuf::new(),
                        upper: None,
                        lower: Vec::new(),
                    });
                    layers.upper = layers.upper.filter(|u| u.is_dir());
                    layers.lower.retain(|l| l.is_dir());
                    layers
                });
                let kind = written_back_on(&fs, layers.as_ref());
                let droppable = !matches!(kind.as_str(), "tmpfs" | "ramfs" | "hugetlbfs");
                Device::new(dev, submit.on(&kind), droppable, layers)
            })
            .clone()
    }

    /// The devices on device number `dev` (one filesystem, or several
    /// mounted there one after another).
    pub(crate) fn devices_numbered(&self, dev: u64) -> Vec<Arc<Device>> {
        let map = self.devices.lock().unwrap_or_else(|e| e.into_inner());
        map.iter().filter(|((n, _), _)| *n == dev).map(|(_, d)| d.clone()).collect()
    }

    fn devices(&self) -> Vec<Arc<Device>> {
        self.devices.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
    }

    /// Everything the library did in this process, over all devices.
    pub fn stats(&self) -> Stats {
        let mut t = Stats::default();
        for d in self.devices() {
            t.accumulate(&d.stats());
        }
        t
    }

    /// Waits until every file the library wrote in this process, open or
    /// closed, is written back and dropped. Returns the oldest late error
    /// (a file closed before its writeback failed) not yet returned.
    pub fn flush(&self) -> std::io::Result<()> {
        self.made.take_in();
        let devices = self.devices();
        Device::flush_all(&devices);
        match devices.iter().find_map(|d| d.take_late_error()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The closed files not finished yet, on every device (see
    /// `Device::unfinished`), once no flusher waits for writeback any more
    /// (`Device::stop_waits`; `resume_waits` undoes it).
    pub fn stop_waits_for_unfinished(&self) -> Vec<Arc<crate::file::FileState>> {
        self.made.take_in();
        let devices = self.devices();
        for d in &devices {
            d.stop_waits();
        }
        devices.iter().flat_map(|d| d.unfinished()).collect()
    }

    pub fn resume_waits(&self) {
        for d in self.devices() {
            d.resume_waits();
        }
    }

    /// Writes back, drops and lets go of every file the library holds on
    /// device number `dev`: a filesystem about to be unmounted, which a
    /// descriptor of the library's would keep busy (`EBUSY`) after the
    /// program closed its own. Waits up to `limit` for the last of those
    /// descriptors to close; true once none is open.
    pub fn release_filesystem(&self, dev: u64, limit: std::time::Duration) -> bool {
        self.made.take_in();
        let devices = self.devices_numbered(dev);
        Device::flush_all(&devices);
        let released = || crate::own::open_on(|st| st.dev == dev) == 0;
        for d in &devices {
            d.wait_until(&released, limit);
        }
        released()
    }

    /// Waits up to `limit` until the library closes the descriptor it held
    /// for a file the program closed, the flusher hurried; false at once
    /// where it holds none, or if none closed in time. For a descriptor
    /// table that is full.
    pub fn let_closed_file_go(&self, limit: std::time::Duration) -> bool {
        self.made.take_in();
        let held = || self.devices().iter().map(|d| d.closed_files_open.load(Acquire)).sum::<usize>();
        let before = held();
        if before == 0 {
            return false;
        }
        let fewer = || held() < before;
        for d in self.devices().iter().filter(|d| d.closed_files_open.load(Acquire) > 0) {
            d.wait_until(&fewer, limit);
            if fewer() {
                return true;
            }
        }
        fewer()
    }

    /// Every late error so far, on every device.
    pub fn late_errors(&self) -> Vec<LateError> {
        self.devices().iter().flat_map(|d| d.late_errors()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dc_sys::{errno, set_errno};

    /// Library code on a program's thread is the library's for as long as
    /// it runs, nested too, and leaves the caller's errno as it was.
    #[test]
    fn library_code_on_a_program_thread_is_marked_and_keeps_errno() {
        set_errno(libc::EAGAIN);
        assert!(!in_library());
        as_library(|| {
            assert!(in_library());
            set_errno(libc::EBADF);
            as_library(|| assert!(in_library()));
            assert!(in_library(), "still inside after a nested call returned");
        });
        assert!(!in_library());
        assert_eq!(errno(), libc::EAGAIN);
    }
}
