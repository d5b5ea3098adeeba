//! Shared helpers for dcload's integration tests: run the real binary on
//! real files in a scratch directory on the build's filesystem.

#![allow(dead_code, unused_imports)]

pub use dc_testsupport::*;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

pub fn dcload_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dcload")).args(args).current_dir(dir).output().unwrap()
}

/// Run dcload with JSON output; returns (exit code, parsed JSON or Null, stderr).
pub fn dcload_json(dir: &Path, args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["--output-format=json"];
    all.extend_from_slice(args);
    let out = dcload_in(dir, &all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json, stderr)
}
