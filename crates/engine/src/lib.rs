//! libdontcache: uncached buffered writes on any kernel, by the flusher-kick
//! write-behind design of the 2026 RWF_DONTCACHE patch series.
//!
//! A writer copies into the page cache (a plain `pwrite`) and counts the
//! pages it dirtied on its device; a background flusher, kicked at most once
//! at a time, writes back that many pages from the oldest dirty files in one
//! batch and drops them once clean. Pages that were cached before the library
//! touched them are never dropped. Errors writeback meets are kept and
//! reported by the next write, sync or close. See docs/ARCHITECTURE.md.

mod closer;
pub mod device;
pub mod engine;
pub mod ffi;
pub mod file;
pub mod handle;
pub mod handoff;
pub mod locked;
mod made;
pub mod own;
pub mod policy;
pub mod ranges;
pub mod stats;
mod wakeup;

pub use device::LateError;
pub use engine::{in_library, orphaned_pages, settle_closed_files_at_exit, unaccounted, watch_forks_now};
pub use file::{duplicates_closed, Watched, WriteUnderWay};
pub use handle::{Described, Handle, OpenedAs, Pending, Position};
pub use made::{drop_cold_inputs_queued, hand_over_cold_input, hand_over_made, late_error_of, take_in_made};
pub use policy::{Options, Policy, Submit};
pub use stats::Stats;

/// Everything the library did in this process.
pub fn global_stats() -> Stats {
    engine::engine().stats()
}

/// Waits until every file the library wrote in this process is written
/// back and dropped; returns the oldest late error not yet returned.
pub fn flush() -> std::io::Result<()> {
    engine::engine().flush()
}

/// Writes back, drops and closes every file the library holds on the
/// filesystem of device number `dev` (about to be unmounted), waiting up to
/// `RELEASE_LIMIT` for the last descriptor; true once none is open.
pub fn release_filesystem(dev: u64) -> bool {
    engine::engine().release_filesystem(dev, RELEASE_LIMIT)
}

/// Waits up to `RELEASE_LIMIT` until the library closes the descriptor it
/// held for a file the program closed; false at once where it holds none.
/// For a descriptor table that is full: the program's call (the shim's) or
/// the library's next duplicate finds a number then.
pub fn let_closed_file_go() -> bool {
    engine::engine().let_closed_file_go(RELEASE_LIMIT)
}

/// How long a wait for the library to let go of a filesystem
/// (`release_filesystem`), of a file the program locks, or of a closed
/// file for a full descriptor table (`let_closed_file_go`) lasts at most,
/// once what it wrote there is written back.
pub const RELEASE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Every late error of this process so far (files closed before their
/// writeback failed), returned or not.
pub fn late_errors() -> Vec<LateError> {
    engine::engine().late_errors()
}
