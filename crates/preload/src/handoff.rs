//! At exit, the files not finished yet go to the process that runs this
//! one under `dontcache run` (the engine's `handoff`), so the exit does not
//! wait for their writeback; files of some size go there in escrow as
//! they are written, so a process killed before its exit leaves them to
//! that process too.

use std::sync::atomic::{AtomicBool, Ordering::AcqRel};

use dontcache::handoff;

static NOTED: AtomicBool = AtomicBool::new(false);

/// Notes the receiver `dontcache run` named, if any, as the shim starts
/// (the program may change its environment later), and has the engine hand
/// its files there.
pub fn note_receiver() {
    if NOTED.swap(true, AcqRel) {
        return;
    }
    if let Some(name) = std::env::var_os(handoff::ENV).filter(|n| !n.is_empty()) {
        handoff::enable(name);
    }
}

/// Hands every file not finished to the receiver; whether it took them
/// all (then the exit need not wait for them). Anything short of that, and
/// the caller waits for all of them itself. Runs inside the engine.
pub fn hand_off_unfinished() -> bool {
    if !handoff::enabled() {
        return false;
    }
    let files = handoff::unfinished_files();
    let taken = handoff::hand_over(&files);
    if !taken {
        handoff::resume_waits();
    }
    taken
}
