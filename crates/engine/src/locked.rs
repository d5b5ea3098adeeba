//! Files the program locks.
//!
//! A POSIX record lock (`fcntl` `F_SETLK`, `lockf`) is the process's, and
//! the kernel releases it at the process's next close of any descriptor of
//! the file: the library's duplicates too. The library closes its
//! duplicate of a file after the program's close, once the flusher is done
//! with it, so a program that closed a file, opened it again and locked it
//! lost that lock a moment later (another process's `F_GETLK` found the
//! file unlocked 0.5 s after). A `flock` or open-file-description lock
//! lasts while any descriptor of its open file does, the library's
//! duplicate included: the program's close no longer released it.
//!
//! So a file the program locks stops being tracked before the lock is
//! taken: the shim lets go of its handles of the file (each hands its
//! writes to the flusher, as a close does), and the lock waits until none
//! of the library's own descriptors (`own`) is of the file any more. The
//! library binds the file no more after that; its writes are plain
//! buffered writes. Only locks the shim sees are known here: a lock the
//! program held before the library was loaded (kept across `exec`) is not.
//!
//! What the program wrote or read of a locked file is dropped through the
//! program's own descriptor instead, which takes no lock and releases
//! none: at its close of the file (written back and waited for first, as
//! the library's own close of a file does) and, for those still open, at
//! its exit or `exec`. What was cached before the library first bound the file (or,
//! for a file it never bound, before the first lock) stays. A SQLite
//! database, which SQLite locks, left its whole file cached before. Once
//! the program has locked a file, each close of a descriptor the shim does
//! not track costs an `fstat` to tell whether it is a locked file's.
//!
//! Nothing is counted per file: a bind only looks at one flag until the
//! program first locks a file, and the wait looks through the library's
//! descriptors (an `fstat` each) once per file locked. A bind registers
//! its duplicate before it asks whether the file is locked, and a lock
//! marks the file before it looks through the registered descriptors, each
//! side with a fence between: either the bind sees the mark (and closes
//! its duplicate, which the wait then waits for), or the wait sees the
//! duplicate.

use std::collections::{HashMap, HashSet};
use std::io;
use std::ops::Range;
use std::os::fd::{BorrowedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{fence, AtomicBool, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use dc_sys::Advice;

use crate::engine::engine;
use crate::file::{bytes, classify, pages_of, retry_eintr, END_OF_FILE, WAIT_FOR_WRITEBACK};

/// A file, by `st_dev` and `st_ino`.
pub type Inode = (u64, u64);

/// Whether the program has locked any file. Kept in a forked child, where
/// it only makes binds look at the child's own (empty) list.
static ANY_LOCKED: AtomicBool = AtomicBool::new(false);

/// One process's locked files. Kept in its `Engine`, made anew in a forked
/// child: a child holds none of its parent's POSIX locks.
#[derive(Default)]
pub(crate) struct Locks {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    locked: HashSet<Inode>,
    /// Locked files the library was seen to hold no descriptor of: as it
    /// binds them no more, their later locks need not look again.
    released: HashSet<Inode>,
    /// What the program's close of each locked file drops.
    to_settle: HashMap<Inode, Settle>,
}

#[derive(Default)]
struct Settle {
    /// The pages the library may drop (`None` until known): all but those
    /// cached before it bound the file or, unbound, before the first lock.
    droppable: Option<Vec<Range<u64>>>,
    /// The program's descriptors seen locking the file: those its exit
    /// drops the file through, if still open.
    fds: Vec<RawFd>,
}

impl Locks {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `dup`, the library's new (registered) descriptor of `inode`, unless the
/// program locks the file: then it is closed, and the bind fails with
/// `ENOLCK`.
pub(crate) fn unless_locked<D>(inode: Inode, dup: D) -> std::io::Result<D> {
    fence(SeqCst);
    if is_locked(inode.0, inode.1) {
        drop(dup);
        return Err(std::io::Error::from_raw_os_error(libc::ENOLCK));
    }
    Ok(dup)
}

/// The program is about to lock the file `(dev, ino)` through `fd`: the
/// library binds it no more in this process.
pub fn note_locked(fd: RawFd, dev: u64, ino: u64) {
    let mut s = engine().locks.state();
    s.locked.insert((dev, ino));
    let fds = &mut s.to_settle.entry((dev, ino)).or_default().fds;
    if !fds.contains(&fd) {
        fds.push(fd);
    }
    drop(s);
    ANY_LOCKED.store(true, SeqCst);
    fence(SeqCst);
}

/// A handle of the locked file `inode` let go of it: what it may drop is
/// what the program's close drops (the first handle's word stands; later
/// binds were refused).
pub(crate) fn keep_droppable(inode: Inode, pages: Vec<Range<u64>>) {
    let mut s = engine().locks.state();
    let settle = s.to_settle.entry(inode).or_default();
    settle.droppable.get_or_insert(pages);
}

/// After the handles of the file `fd` locks let go of it: a file the
/// library never bound is classified now, through `fd` (pages cached now
/// stay).
pub fn classify_unless_known(fd: RawFd, inode: Inode) {
    if engine().locks.state().to_settle.get(&inode).is_some_and(|s| s.droppable.is_some()) {
        return;
    }
    let Ok(st) = dc_sys::fstat(fd) else { return };
    // SAFETY: `fd` is the caller's, open for the length of this call.
    let file = unsafe { BorrowedFd::borrow_raw(fd) };
    let foreign = classify(file, pages_of(0, st.size).end, false, None);
    keep_droppable(inode, foreign.gaps(0..END_OF_FILE));
}

/// Before the program closes `fd`: if it is a locked file's, its writeback
/// is waited for and what the library may drop of it dropped, through
/// `fd`. Returns a writeback error met there (the close's to report).
pub fn settle_before_close(fd: RawFd) -> io::Result<()> {
    if !ANY_LOCKED.load(SeqCst) {
        return Ok(());
    }
    let Some(st) = dc_sys::fstat(fd).ok().filter(|st| st.is_regular()) else { return Ok(()) };
    let droppable = {
        let mut s = engine().locks.state();
        let Some(settle) = s.to_settle.get_mut(&(st.dev, st.ino)) else { return Ok(()) };
        settle.fds.retain(|&f| f != fd);
        settle.droppable.clone().unwrap_or_default()
    };
    settle(fd, &droppable)
}

/// At exit (and before `exec`): each locked file still open is settled as
/// at its close, through a descriptor of the program's seen locking it.
/// Returns the writeback errors met, with the files' paths.
pub fn settle_still_open() -> Vec<(i32, PathBuf)> {
    if !ANY_LOCKED.load(SeqCst) {
        return Vec::new();
    }
    let open: Vec<(RawFd, Vec<Range<u64>>)> = {
        let s = engine().locks.state();
        s.to_settle
            .iter()
            .filter_map(|(inode, settle)| {
                let fd = settle
                    .fds
                    .iter()
                    .copied()
                    .find(|&fd| dc_sys::fstat(fd).is_ok_and(|st| st.is_regular() && (st.dev, st.ino) == *inode))?;
                Some((fd, settle.droppable.clone().unwrap_or_default()))
            })
            .collect()
    };
    let mut failed = Vec::new();
    for (fd, droppable) in open {
        if let Err(e) = settle(fd, &droppable) {
            // SAFETY: `fd` is the program's, open (its `fstat` just now).
            let path = dc_sys::fd_path(unsafe { BorrowedFd::borrow_raw(fd) }).unwrap_or_default();
            failed.push((e.raw_os_error().unwrap_or(libc::EIO), path));
        }
    }
    failed
}

/// Writes back `fd`'s file, waits for it, and drops `droppable` of it
/// (clean now). An `fd` that cannot be written back (opened `O_PATH`)
/// drops nothing and reports nothing.
fn settle(fd: RawFd, droppable: &[Range<u64>]) -> io::Result<()> {
    // SAFETY: the program's descriptor, open until after this call.
    let file = unsafe { BorrowedFd::borrow_raw(fd) };
    match retry_eintr(|| dc_sys::sync_file_range(file, 0, 0, WAIT_FOR_WRITEBACK)) {
        Err(e) if e.raw_os_error() == Some(libc::EBADF) => Ok(()),
        synced => {
            for r in droppable {
                let (off, len) = bytes(r);
                let _ = dc_sys::fadvise(file, off, len, Advice::DontNeed);
            }
            synced
        }
    }
}

/// Whether the program has locked any file (a forked child: its parent
/// had, before the fork).
pub fn any_locked() -> bool {
    ANY_LOCKED.load(SeqCst)
}

/// Whether the program has locked the file `(dev, ino)` in this process:
/// one flag's load until it first locks a file.
pub fn is_locked(dev: u64, ino: u64) -> bool {
    ANY_LOCKED.load(SeqCst) && engine().locks.state().locked.contains(&(dev, ino))
}

/// Whether `wait_released` has seen the library hold no descriptor of the
/// locked file `(dev, ino)`: as it binds the file no more, nothing is left
/// to wait for at its later locks.
pub fn is_released(dev: u64, ino: u64) -> bool {
    engine().locks.state().released.contains(&(dev, ino))
}

/// Waits up to `limit` until the library holds no descriptor of the file
/// `(dev, ino)`, the flusher of its device hurried to finish the closed
/// files it holds them for. True once it holds none.
pub fn wait_released(dev: u64, ino: u64, limit: Duration) -> bool {
    let e = engine();
    if is_released(dev, ino) {
        return true;
    }
    let released = || crate::own::open_on(|st| (st.dev, st.ino) == (dev, ino)) == 0;
    if !released() {
        for d in e.devices_numbered(dev) {
            d.wait_until(&released, limit);
        }
    }
    let done = released();
    let mut s = e.locks.state();
    if done && s.locked.contains(&(dev, ino)) {
        s.released.insert((dev, ino));
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// A file locked is bound no more: the descriptor a bind made is
    /// closed, and the wait finds none of the library's left.
    #[test]
    fn a_locked_files_new_descriptor_is_closed_and_waited_for() {
        let file = unlinked_file();
        let st = dc_sys::fstat(file.as_raw_fd()).unwrap();
        let dup = crate::own::duplicate(file.as_raw_fd()).unwrap();
        assert!(!wait_released(st.dev, st.ino, Duration::ZERO), "the library's duplicate is open");
        let dup = unless_locked((st.dev, st.ino), dup).expect("not locked yet");
        note_locked(file.as_raw_fd(), st.dev, st.ino);
        assert!(is_locked(st.dev, st.ino));
        let refused = unless_locked((st.dev, st.ino), dup).expect_err("locked now");
        assert_eq!(refused.raw_os_error(), Some(libc::ENOLCK));
        assert!(wait_released(st.dev, st.ino, Duration::ZERO), "its duplicate closed");
    }

    fn unlinked_file() -> std::fs::File {
        let path = std::env::temp_dir().join(format!("dc-locked-{}", std::process::id()));
        let f = std::fs::File::options().read(true).write(true).create_new(true).open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        f
    }
}
