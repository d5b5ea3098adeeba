//! Shared helpers for the engine's integration tests: scratch files on the
//! build's filesystem (ext4 here), patterns, cache residency, loop devices.

#![allow(dead_code)]

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use dontcache::{Options, Policy};

pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("engine-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn opts(policy: Policy) -> Options {
    Options { policy, high_water: 16 << 20, ..Options::default() }
}

/// The byte every test writes at `off` of a file tagged `tag`: varies with
/// the offset inside a page and across pages, so a misplaced page shows.
pub fn byte_at(tag: u8, off: u64) -> u8 {
    let x = off.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (off >> 12) ^ tag as u64;
    (x ^ (x >> 29)) as u8
}

pub fn pattern(tag: u8, off: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| byte_at(tag, off + i)).collect()
}

/// Asserts the file holds exactly the pattern, naming the first bad offset.
pub fn assert_pattern(path: &Path, tag: u8, len: u64) {
    let data = std::fs::read(path).unwrap();
    assert_eq!(data.len() as u64, len, "{} has the wrong size", path.display());
    if let Some(i) = (0..len).find(|&i| data[i as usize] != byte_at(tag, i)) {
        panic!("{}: first wrong byte at offset {i}", path.display());
    }
}

pub fn cached_pages(path: &Path) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    dc_sys::cachestat(f.as_fd(), 0, 0).unwrap().nr_cache
}

pub fn cached_pages_in(path: &Path, off: u64, len: u64) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    dc_sys::cachestat(f.as_fd(), off, len).unwrap().nr_cache
}

pub fn drop_cache_of(path: &Path) {
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    dc_sys::fadvise(f.as_fd(), 0, 0, dc_sys::Advice::DontNeed).unwrap();
}

#[path = "../../../tests/support/loopfs.rs"]
mod loopfs;
#[allow(unused_imports)] // each test binary uses a different part
pub use loopfs::{is_root, sh, LoopFs};
