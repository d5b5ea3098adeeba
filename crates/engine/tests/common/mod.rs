//! Helpers for the engine's integration tests (dc-testsupport, and the
//! options every test starts from).

#![allow(dead_code, unused_imports)]

pub use dc_testsupport::*;

use dontcache::{Options, Policy};

pub fn opts(policy: Policy) -> Options {
    Options { policy, high_water: 16 << 20, ..Options::default() }
}
