//! The project's vocabulary, in one place: the I/O modes a benchmark
//! compares, libdontcache's write-behind policies, the size grammar and
//! errno names.
//!
//! Every crate that names a mode or a policy, or reads a size from a user,
//! takes it from here (dcload's job options, the engine's environment
//! variables, the `dontcache` command, dcnfsd's io modes), and dcbench reads
//! the same lists from `dcload --list-modes --json`, so no list of names is
//! written twice and `64m` means the same bytes everywhere.

mod errno;
mod mode;
mod policy;
mod size;

pub use errno::{errno_by_name, errno_name};
pub use mode::Mode;
pub use policy::Policy;
pub use size::{parse_size, KbBase, SIZE_GRAMMAR};
