//! Helpers for the dontcache command's tests: the command itself, and
//! dc-testsupport.

#![allow(dead_code, unused_imports)]

pub use dc_testsupport::*;

use std::path::Path;
use std::process::{Command, Output};

pub const MIB: u64 = 1 << 20;

pub fn dontcache(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dontcache")).args(args).output().unwrap()
}

pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The command's output, for assertion messages.
pub fn said(out: &Output) -> String {
    format!(
        "status {:?}\nstdout {}\nstderr {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
