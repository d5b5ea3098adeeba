//! What the crates' integration tests share: scratch directories on the
//! build's filesystem, data patterns that show a misplaced page, page-cache
//! residency, small filesystems on loop devices, a dcnfsd serving a
//! directory, C programs compiled for a test, and the material in
//! `../shared` (skipped, visibly, where absent).

mod cache;
mod loopfs;
mod nfsd;
mod pattern;
mod scratch;
mod shared;

pub use cache::{cached_pages, cached_pages_in, drop_cache_of, kept_or_reclaimed_in};
pub use loopfs::{is_root, sh, LoopFs};
pub use nfsd::{workspace_binary, NfsServer};
pub use pattern::{assert_pattern, byte_at, pattern};
pub use scratch::{compile_c, Scratch};
pub use shared::{fio_jobs_dir, fio_tools_dir, seed_job_files, shared_dir, skip};

/// A scratch directory under the calling test crate's `target/tmp` (on the
/// checkout's filesystem, ext4 in CI, unlike /tmp), removed when dropped.
#[macro_export]
macro_rules! scratch {
    ($name:expr) => {
        $crate::Scratch::new(env!("CARGO_TARGET_TMPDIR"), $name)
    };
}
