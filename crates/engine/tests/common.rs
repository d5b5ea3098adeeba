//! Shared helpers for the engine's integration tests: scratch files on the
//! build's filesystem (ext4 here), patterns, cache residency, loop devices.

#![allow(dead_code)]

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

pub fn sh(cmd: &str) -> Output {
    Command::new("sh").arg("-c").arg(cmd).output().unwrap()
}

pub fn is_root() -> bool {
    // SAFETY: no arguments, no memory.
    unsafe { libc::geteuid() == 0 }
}

/// A filesystem mounted through a loop device, for error injection. Needs
/// root and e2fsprogs (.ci/run installs them); unmounted and detached on drop.
pub struct LoopFs {
    pub mnt: PathBuf,
    backing_mnt: Option<PathBuf>,
    image: PathBuf,
}

impl LoopFs {
    /// A `mib` MiB ext4 image in a file in `scratch`.
    pub fn ext4(scratch: &Scratch, mib: u32) -> LoopFs {
        assert!(is_root(), "this test needs root (loop devices); run it as CI does");
        let image = scratch.path("fs.img");
        let mnt = scratch.path("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        mkfs_and_mount(&image, mib, &mnt);
        LoopFs { mnt, backing_mnt: None, image }
    }

    /// A `mib` MiB ext4 image whose backing file lives on a tmpfs of only
    /// `tmpfs_mib`: once the tmpfs fills, the loop device fails writes and
    /// writeback sees EIO.
    pub fn ext4_on_small_tmpfs(scratch: &Scratch, mib: u32, tmpfs_mib: u32) -> LoopFs {
        assert!(is_root(), "this test needs root (loop devices and tmpfs); run it as CI does");
        let backing = scratch.path("backing");
        std::fs::create_dir_all(&backing).unwrap();
        let ok = sh(&format!("mount -t tmpfs -o size={tmpfs_mib}m dctest {}", backing.display()));
        assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
        let image = backing.join("fs.img");
        let mnt = scratch.path("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        mkfs_and_mount(&image, mib, &mnt);
        LoopFs { mnt, backing_mnt: Some(backing), image }
    }
}

fn mkfs_and_mount(image: &Path, mib: u32, mnt: &Path) {
    let ok = sh(&format!(
        "truncate -s {mib}M {img} && mkfs.ext4 -q -F -m 0 -E nodiscard,lazy_itable_init=0 {img} && mount -o loop,errors=continue {img} {mnt}",
        img = image.display(),
        mnt = mnt.display()
    ));
    assert!(ok.status.success(), "mounting a loop ext4 failed: {}", String::from_utf8_lossy(&ok.stderr));
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        sh(&format!("umount -l {}", self.mnt.display()));
        let _ = std::fs::remove_file(&self.image);
        if let Some(b) = &self.backing_mnt {
            sh(&format!("umount -l {}", b.display()));
        }
    }
}
