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
//! Nothing is counted per file: a bind only looks at one flag until the
//! program first locks a file, and the wait looks through the library's
//! descriptors (an `fstat` each) once per file locked. A bind registers
//! its duplicate before it asks whether the file is locked, and a lock
//! marks the file before it looks through the registered descriptors, each
//! side with a fence between: either the bind sees the mark (and closes
//! its duplicate, which the wait then waits for), or the wait sees the
//! duplicate.

use std::collections::HashSet;
use std::sync::atomic::{fence, AtomicBool, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::engine::engine;

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

/// The program is about to lock the file `(dev, ino)`: the library binds
/// it no more in this process.
pub fn note_locked(dev: u64, ino: u64) {
    engine().locks.state().locked.insert((dev, ino));
    ANY_LOCKED.store(true, SeqCst);
    fence(SeqCst);
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
        note_locked(st.dev, st.ino);
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
