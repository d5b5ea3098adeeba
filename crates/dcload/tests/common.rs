//! Shared helpers for dcload's integration tests: run the real binary on
//! real files in a scratch directory on the build's filesystem.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        // target/ sits on the checkout's filesystem (ext4 in CI), unlike /tmp.
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn file(&self, name: &str) -> String {
        self.path(name).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

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

pub fn drop_file_cache(path: &Path) {
    use std::os::fd::AsFd;
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    dc_sys::fadvise(f.as_fd(), 0, 0, dc_sys::Advice::DontNeed).unwrap();
}

pub fn cached_pages(path: &Path) -> u64 {
    use std::os::fd::AsFd;
    let f = std::fs::File::open(path).unwrap();
    dc_sys::cachestat(f.as_fd(), 0, 0).unwrap().nr_cache
}

#[allow(unused_imports)] // each test binary uses a different part
pub use loopfs::{is_root, sh, LoopFs};

#[path = "../../../tests/support/loopfs.rs"]
mod loopfs;
