//! Helpers for the engine's integration tests (dc-testsupport, and the
//! options every test starts from).

#![allow(dead_code, unused_imports)]

pub use dc_testsupport::*;

use dontcache::{Options, Policy};

pub fn opts(policy: Policy) -> Options {
    Options { policy, high_water: 16 << 20, ..Options::default() }
}

/// The most the library may count dirty or under writeback at once with
/// `high_water` per handle: writers wait while more than one mark is not
/// yet started, and past two marks until the level falls; the flusher keeps
/// at most three marks in flight; what completed counts until the flusher
/// has seen it clean (pieces are waited for in groups). Writeback that
/// writers start themselves (`lazy`, `inline`) is not under the flusher's
/// cap, only the disk queue's: another mark for those.
pub fn dirty_bound(policy: Policy, high_water: u64) -> u64 {
    if policy.writer_starts_writeback() {
        6 * high_water
    } else {
        5 * high_water
    }
}

/// Held by tests that measure the cache while they run: the flusher is one
/// per device and shared by every test in the process, so a bound measured
/// while another test loads it would measure that test too (a reader's
/// drops waited behind another test's writeback: 1.4 marks over).
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
