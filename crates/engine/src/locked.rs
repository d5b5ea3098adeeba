//! Files the program locks, and the library's descriptors of each file.
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
//! writes to the flusher, as a close does), and the lock waits until the
//! library holds no descriptor of the file any more. The library binds the
//! file no more after that; its writes are plain buffered writes. Only
//! locks the shim sees are known here: a lock the program held before the
//! library was loaded (kept across `exec`) is not.
//!
//! The count is raised before the library's duplicate can be closed and
//! lowered only once it is: a lock that found the count at zero cannot be
//! released by a descriptor of the library's.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::engine::{engine, fork_generation};

/// A file, by `st_dev` and `st_ino`.
pub type Inode = (u64, u64);

/// One process's locked files and descriptor counts. Kept in its `Engine`,
/// made anew in a forked child: a child holds none of its parent's POSIX
/// locks, and its parent's descriptors are never closed by its engine.
#[derive(Default)]
pub(crate) struct Locks {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    locked: HashSet<Inode>,
    /// The library's open descriptors of each file.
    open: HashMap<Inode, usize>,
}

impl Locks {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One of the library's descriptors of a file, counted while it lives;
/// dropped only after the descriptor is closed.
#[derive(Debug)]
pub struct Counted {
    inode: Inode,
    generation: u64,
}

impl Counted {
    /// Counts a descriptor of `inode` the library has just made, and says
    /// in the same step whether the program locks the file.
    fn new(inode: Inode) -> (Counted, bool) {
        let mut s = engine().locks.state();
        *s.open.entry(inode).or_default() += 1;
        let locked = s.locked.contains(&inode);
        (Counted { inode, generation: fork_generation() }, locked)
    }

    pub fn inode(&self) -> Inode {
        self.inode
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        // A parent's descriptor, in a child: the child's engine never
        // counted it.
        if self.generation != fork_generation() {
            return;
        }
        let mut s = engine().locks.state();
        if let Some(n) = s.open.get_mut(&self.inode) {
            *n -= 1;
            if *n == 0 {
                s.open.remove(&self.inode);
            }
        }
    }
}

/// Counts `dup`, the library's new descriptor of `inode`; gives it back
/// closed, with `Err(ENOLCK)`, where the program locks the file. The count
/// is held until after the close, so a lock waiting for the count to reach
/// zero (`wait_released`) is never taken before this descriptor is gone.
pub(crate) fn counted_unless_locked<D>(inode: Inode, dup: D) -> std::io::Result<(D, Counted)> {
    let (counted, locked) = Counted::new(inode);
    if locked {
        drop(dup);
        drop(counted);
        return Err(std::io::Error::from_raw_os_error(libc::ENOLCK));
    }
    Ok((dup, counted))
}

/// The program is about to lock the file `(dev, ino)`: the library binds
/// it no more in this process.
pub fn note_locked(dev: u64, ino: u64) {
    engine().locks.state().locked.insert((dev, ino));
}

/// Whether the program has locked the file `(dev, ino)` in this process.
pub fn is_locked(dev: u64, ino: u64) -> bool {
    engine().locks.state().locked.contains(&(dev, ino))
}

/// Waits up to `limit` for the library to hold no descriptor of the file
/// `(dev, ino)`, hurrying the flusher of its device to finish the closed
/// files it holds them for. True once it holds none.
pub fn wait_released(dev: u64, ino: u64, limit: Duration) -> bool {
    let e = engine();
    let held = || e.locks.state().open.contains_key(&(dev, ino));
    if !held() {
        return true;
    }
    for d in e.devices_numbered(dev) {
        d.wait_until(&|| !held(), limit);
    }
    !held()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A locked file's descriptor is closed before its count is let go,
    /// and nothing stays counted.
    #[test]
    fn a_locked_file_is_not_counted_and_its_descriptor_is_closed() {
        let inode = (u64::MAX - 7, 42);
        let (dup, counted) = counted_unless_locked(inode, "dup").expect("not locked yet");
        assert_eq!(dup, "dup");
        assert!(!wait_released(inode.0, inode.1, Duration::ZERO), "counted while held");
        drop(counted);
        assert!(wait_released(inode.0, inode.1, Duration::ZERO));
        note_locked(inode.0, inode.1);
        assert!(is_locked(inode.0, inode.1));
        let refused = counted_unless_locked(inode, ()).expect_err("locked");
        assert_eq!(refused.raw_os_error(), Some(libc::ENOLCK));
        assert!(wait_released(inode.0, inode.1, Duration::ZERO), "nothing left counted");
    }
}
