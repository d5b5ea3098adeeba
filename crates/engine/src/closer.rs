//! Closing the engine's descriptors away from the flusher.
//!
//! The last close of an unlinked file frees its blocks in the closing
//! thread. For a file of many extents that takes seconds: measured, the
//! flusher spent over a second in `close` of a deleted 200 MB file of random
//! 4 KiB writes while a reader's drops waited behind it, and the page cache
//! grew to 1.4 GiB. So a file the flusher lets go of is closed here, on a
//! thread of its own.

use std::sync::mpsc::{self, Sender};
use std::sync::Mutex;

use crate::own::OwnFd;

/// The closing thread's queue, and the process it was started in (a forked
/// child has no such thread and starts its own).
static CLOSER: Mutex<Option<(libc::pid_t, Sender<OwnFd>)>> = Mutex::new(None);

/// Closes `fd` on the closing thread, or here when that thread cannot start.
/// The queue is only ever tried, never waited for: a child forked while
/// another thread held it would wait for good.
pub fn close_later(fd: OwnFd) {
    let Ok(mut closer) = CLOSER.try_lock() else { return drop(fd) };
    let pid = crate::engine::process_id();
    if closer.as_ref().map(|(p, _)| *p) != Some(pid) {
        let (tx, rx) = mpsc::channel::<OwnFd>();
        let started = crate::engine::spawn_thread("dc-close".into(), move || rx.into_iter().for_each(drop));
        if started.is_err() {
            return drop(fd);
        }
        *closer = Some((pid, tx));
    }
    if let Some((_, tx)) = closer.as_ref() {
        if let Err(unsent) = tx.send(fd) {
            drop(unsent.0);
        }
    }
}
