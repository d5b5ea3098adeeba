//! Locks the program takes on its files (`fcntl`'s record and
//! open-file-description locks, `flock`, `lockf`): the file is no longer
//! tracked, and the lock is taken only once the library holds no
//! descriptor of it, whose close would release a POSIX lock or whose life
//! would hold a `flock` past the program's close (`dontcache::locked`).
//! The program's close of it, its exit and its `exec` drop it through the
//! program's own descriptor.

use std::ffi::c_int;
use std::time::{Duration, Instant};

use crate::real;
use crate::table::{engine, inside, untrack_file};

/// How often the wait looks for the file's descriptors in the table again.
const UNTRACK_EVERY: Duration = Duration::from_millis(20);

/// Before the program locks (or unlocks) `fd`'s file.
pub fn before_lock(fd: c_int) {
    if inside() || crate::in_vfork_child() {
        return;
    }
    // A file the program made gets its handle first, which the lock then
    // lets go of as it does any file's.
    crate::table::promote_made(fd);
    engine(|| {
        let Some(st) = dc_sys::fstat(fd).ok().filter(|st| st.is_regular()) else { return };
        dontcache::locked::note_locked(fd, st.dev, st.ino);
        if dontcache::locked::is_released(st.dev, st.ino) {
            return;
        }
        let since = Instant::now();
        // Untracked again every round: a descriptor of the file that
        // another thread was adopting as the file was marked is in the
        // table only now.
        loop {
            untrack_file((st.dev, st.ino));
            // Past the limit the lock is taken all the same.
            let left = dontcache::RELEASE_LIMIT.saturating_sub(since.elapsed());
            if dontcache::locked::wait_released(st.dev, st.ino, left.min(UNTRACK_EVERY)) || left.is_zero() {
                break;
            }
        }
        dontcache::locked::classify_unless_known(fd, (st.dev, st.ino));
        // Under `dontcache run`, a file in escrow there is closed there once
        // `run` has read its release.
        dontcache::handoff::sync_with_receiver();
    });
}

#[no_mangle]
pub unsafe extern "C" fn flock(fd: c_int, op: c_int) -> c_int {
    if op & libc::LOCK_UN == 0 {
        before_lock(fd);
    }
    real::flock()(fd, op)
}

#[no_mangle]
pub unsafe extern "C" fn lockf(fd: c_int, cmd: c_int, len: libc::off_t) -> c_int {
    if matches!(cmd, libc::F_LOCK | libc::F_TLOCK) {
        before_lock(fd);
    }
    real::lockf()(fd, cmd, len)
}

#[no_mangle]
pub unsafe extern "C" fn lockf64(fd: c_int, cmd: c_int, len: libc::off64_t) -> c_int {
    if matches!(cmd, libc::F_LOCK | libc::F_TLOCK) {
        before_lock(fd);
    }
    real::lockf64()(fd, cmd, len)
}
