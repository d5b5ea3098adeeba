//! Files the program made (`O_CREAT|O_EXCL`) and closed while small,
//! handed to the library whole at their close.
//!
//! The shim gives a file the program has just made no handle while it
//! stays small: its writes go straight to the kernel, and its close hands
//! a duplicate of its descriptor here (`hand_over_made`). A library thread
//! binds each (`Handle::own_made`: every page cached of a made file is the
//! program's), counts the whole file written and lets it go as a closed
//! file: the flusher writes it back in a batch with the other closed files
//! and drops it, as any. A handle at the open cost the program's own
//! thread, per file, two `fstat`s, the duplicate, the file's state and an
//! `lseek` and the bookkeeping of every write: `tar -xf` of 50,000 small
//! files took 1.56x plain's time under `dontcache run` so, 1.40x this way,
//! and 1.16x with the files made left untracked (the most this could win;
//! 8 interleaved rounds each). Here the program's thread makes the
//! duplicate and queues it; the rest is done on another CPU.
//!
//! Whoever needs the files finished takes the queue in on its own thread
//! (`Intake::take_in`): a flush, the exit's hand-off, a call wanting room
//! for a descriptor, an unmount. A closing thread that finds `QUEUE_MAX`
//! files queued takes them in itself: each holds a descriptor, and the
//! wait for closed files below their cap (`Handle::let_go_closed`) then
//! slows the program as it would have with handles.
//!
//! Small inputs the shim reads without a handle (`READ_COLD`: none of the
//! file cached when it was opened) are handed over at their close the
//! same way (`hand_over_cold_input`), and this thread drops them whole.
//! Dropped by the close itself, pages just read were often still in the
//! LRU batch of the CPU that read them, and the kernel then drained every
//! CPU's batches while the closing thread waited: `cp -a` of 50,000 small
//! files, whose inputs are copied by `copy_file_range` (which reads
//! through the cache), spent 0.65 s of its own CPU in those drops and
//! waited 0.22 s for the drains (`perf`, off-CPU stacks, one run).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::engine::engine;
use crate::own::OwnFd;
use crate::policy::Options;
use crate::Handle;

/// The most files queued before a closing thread takes them in itself.
/// With the closed files' cap (`Handle::let_go_closed`: 3/4 of the library's
/// descriptor numbers, 384 under a limit of 1,024) it fills the library's
/// numbers; a file that finds none left is finished by its close
/// (`finish_here`).
const QUEUE_MAX: usize = 128;

/// How long the taking thread lets files gather once one is queued. Woken
/// for every file, it cost `tar -xf` a `futex` call a file on tar's own
/// thread (56,290 for 50,000 files).
const GATHER_TIME: std::time::Duration = std::time::Duration::from_millis(2);

/// What the library does with a file handed over at its close.
#[derive(Clone, Copy)]
enum Handover {
    /// A file the program made: bound and let go as a closed file, which
    /// the flusher writes back and drops.
    Made(Options),
    /// A small input read with none of it cached before: dropped whole.
    ColdInput,
}

/// The files handed over and not yet taken in.
#[derive(Default)]
pub(crate) struct Intake {
    state: Mutex<Queue>,
    /// Files were queued (for the taking thread), or a take-in finished
    /// (for a caller waiting for the queue to be all in).
    changed: Condvar,
}

#[derive(Default)]
struct Queue {
    files: Vec<(OwnFd, Handover)>,
    /// Files taken off the queue and not yet handed to their flusher.
    taking: usize,
    /// The taking thread was started (in this process).
    started: bool,
    /// The taking thread waits for a file to be queued.
    idle: bool,
}

impl Intake {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&'static self, fd: OwnFd, handover: Handover) {
        let mut q = self.lock();
        q.files.push((fd, handover));
        if q.files.len() >= QUEUE_MAX {
            let files = std::mem::take(&mut q.files);
            q.taking += files.len();
            drop(q);
            self.take_in_files(files);
            return;
        }
        if !q.started {
            q.started = crate::engine::spawn_thread("dc-made".into(), move || self.serve()).is_ok();
        }
        let wake = std::mem::take(&mut q.idle);
        drop(q);
        if wake {
            self.changed.notify_all();
        }
    }

    /// Takes in every file queued, and waits for those another thread is
    /// taking in: each is then a closed file on its device.
    pub(crate) fn take_in(&self) {
        let mut q = self.lock();
        if q.files.is_empty() && q.taking == 0 {
            return;
        }
        let files = std::mem::take(&mut q.files);
        q.taking += files.len();
        drop(q);
        self.take_in_files(files);
        let mut q = self.lock();
        while q.taking > 0 {
            q = self.changed.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The taking thread: takes in what is queued, `GATHER_TIME` after the
    /// first file.
    fn serve(&self) {
        loop {
            let mut q = self.lock();
            while q.files.is_empty() {
                q.idle = true;
                q = self.changed.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            q.idle = false;
            drop(q);
            std::thread::sleep(GATHER_TIME);
            let mut q = self.lock();
            let files = std::mem::take(&mut q.files);
            q.taking += files.len();
            drop(q);
            self.take_in_files(files);
        }
    }

    fn take_in_files(&self, files: Vec<(OwnFd, Handover)>) {
        let n = files.len();
        for (fd, handover) in files {
            match handover {
                Handover::Made(opts) => {
                    if let Ok(h) = Handle::own_made(fd, opts) {
                        h.let_go_closed();
                    }
                }
                Handover::ColdInput => drop_whole(fd.as_fd()),
            }
        }
        self.lock().taking -= n;
        self.changed.notify_all();
    }
}

/// Hands over `fd`, a file the program made and wrote without a handle,
/// about to be closed (or kept open through an exec): the library
/// finishes it as a closed file. Where no duplicate can be made (the
/// library's numbers are all taken) it is written back, waited for and
/// dropped here, through `fd`, and an error of that is a late error of
/// its device, as any closed file's.
pub fn hand_over_made(fd: RawFd, opts: Options) {
    let e = engine();
    match crate::own::duplicate(fd) {
        Ok(dup) => e.made.push(dup, Handover::Made(opts)),
        Err(_) => {
            if let Err(failed) = finish_here(fd) {
                if let Ok(st) = dc_sys::fstat(fd) {
                    // SAFETY: the caller's `fd` is open for the length of this call.
                    let file = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
                    let path = dc_sys::fd_path(file).unwrap_or_default();
                    let errno = failed.raw_os_error().unwrap_or(libc::EIO);
                    e.device(st.dev, opts.submit, file).push_late_error(errno, path);
                }
            }
        }
    }
}

/// Writes `fd` back, waits for it and drops it, all on the caller's thread.
fn finish_here(fd: RawFd) -> io::Result<()> {
    // SAFETY: the caller's `fd` is open for the length of this call.
    let file = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    crate::file::retry_eintr(|| dc_sys::sync_file_range(file, 0, 0, crate::file::WAIT_FOR_WRITEBACK))?;
    dc_sys::fadvise(file, 0, 0, dc_sys::Advice::DontNeed)
}

/// What the close of `fd` (a file the program made, just handed over)
/// returns, as a handle's close does: a late error of its device not yet
/// returned to anyone, looked for only while the process has one
/// (`LATE_UNREPORTED`), marked returned.
pub fn late_error_of(fd: RawFd) -> Option<io::Error> {
    if crate::device::LATE_UNREPORTED.load(std::sync::atomic::Ordering::Acquire) == 0 {
        return None;
    }
    let dev = dc_sys::fstat(fd).ok()?.dev;
    engine().devices_numbered(dev).iter().find_map(|d| d.take_late_error())
}

/// Takes in every file handed over and not yet taken in (see `Intake`).
pub fn take_in_made() {
    engine().made.take_in();
}

/// Hands over `fd`, a small input read with none of it cached when it
/// was opened (all that is cached of it now the program brought in),
/// about to be closed: the library drops it whole a moment later, on its
/// own thread. Dropped here instead where the process does not settle its
/// files at exit (it could exit before the drop) or no duplicate can be
/// made (the library's numbers are all taken).
pub fn hand_over_cold_input(fd: RawFd) {
    if crate::engine::closed_files_settle_at_exit() {
        if let Ok(dup) = crate::own::duplicate(fd) {
            engine().made.push(dup, Handover::ColdInput);
            return;
        }
    }
    // SAFETY: the caller's `fd` is open for the length of this call.
    drop_whole(unsafe { BorrowedFd::borrow_raw(fd) });
}

/// Drops the cold inputs handed over and not yet taken in, for a process
/// a stop signal ends (the shim's handler, where no thread settles its
/// files): no allocation, no close, and nothing if the queue is held (by
/// the thread the signal interrupted, maybe).
pub fn drop_cold_inputs_queued() {
    let Some(e) = crate::engine::existing_engine() else { return };
    let q = match e.made.state.try_lock() {
        Ok(q) => q,
        Err(std::sync::TryLockError::Poisoned(q)) => q.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    for (fd, handover) in &q.files {
        if matches!(handover, Handover::ColdInput) {
            drop_whole(fd.as_fd());
        }
    }
}

/// Drops every cached page of `file`.
fn drop_whole(file: BorrowedFd<'_>) {
    let _ = dc_sys::fadvise(file, 0, 0, dc_sys::Advice::DontNeed);
}
