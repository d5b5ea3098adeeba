//! `dontcache cp` never replaces what is not a regular file (nor writes a
//! file of procfs or sysfs), overwrites an existing file the way cp does
//! (inode, mode, owner, hard links kept), keeps holes, and leaves no
//! temporary behind on SIGINT or SIGTERM.

mod common;
use common::*;

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn small_source(s: &Scratch) -> std::path::PathBuf {
    let src = s.path("src");
    std::fs::write(&src, pattern(50, 0, 1 << 20)).unwrap();
    src
}

#[test]
fn refuses_devices_fifos_sockets_and_directories_before_any_io() {
    let s = scratch!("cp-refuse");
    let src = small_source(&s);
    let fifo = s.path("fifo");
    assert!(sh(&format!("mkfifo '{}'", p(&fifo))).status.success());
    let sock = s.path("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let dir = s.path("dir");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let mut targets = vec![
        (fifo.clone(), "a FIFO"),
        (sock.clone(), "a socket"),
        (dir.clone(), "a directory"),
        // Regular by its mode; refused before anything is opened.
        (std::path::PathBuf::from("/proc/version"), "a file the kernel generates (proc)"),
    ];
    let dev = s.path("null");
    if is_root() {
        // A device node of our own, never /dev itself.
        assert!(sh(&format!("mknod '{}' c 1 3", p(&dev))).status.success());
        targets.push((dev.clone(), "a device"));
    }
    for (dst, kind) in &targets {
        // A directory is a fine destination for a file; dir/src being a
        // directory is not.
        let out = dontcache(&["cp", p(&src), p(dst)]);
        assert_eq!(out.status.code(), Some(2), "{kind}: {}", said(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains(kind), "{kind}: {}", said(&out));
    }
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO is still a FIFO");
    assert!(std::fs::metadata(&sock).unwrap().file_type().is_socket());
    assert!(std::fs::metadata(dir.join("src")).unwrap().is_dir());
    if is_root() {
        assert!(std::fs::metadata(&dev).unwrap().file_type().is_char_device(), "the device node is untouched");
    }
    let left: Vec<_> = std::fs::read_dir(&s.dir).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    assert!(!left.iter().any(|n| n.to_string_lossy().contains(".dontcache-")), "no temporary: {left:?}");
    // Several sources, one of them refused: nothing at all is copied.
    let other = s.path("other");
    std::fs::write(&other, b"x").unwrap();
    let out = dontcache(&["cp", p(&other), p(&src), p(&dir)]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(!dir.join("other").exists(), "nothing is copied when one destination is refused");
    // A dangling symlink, and the same file.
    let dangling = s.path("dangling");
    std::os::unix::fs::symlink(s.path("nowhere"), &dangling).unwrap();
    let out = dontcache(&["cp", p(&src), p(&dangling)]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(!s.path("nowhere").exists());
    let out = dontcache(&["cp", p(&src), p(&src)]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert_pattern(&src, 50, 1 << 20);
}

#[test]
fn an_existing_destination_keeps_inode_mode_owner_and_links() {
    let s = scratch!("cp-inplace");
    let src = small_source(&s);
    let dst = s.path("dst");
    std::fs::write(&dst, b"old contents").unwrap();
    std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o600)).unwrap();
    if is_root() {
        std::os::unix::fs::chown(&dst, Some(1234), Some(1234)).unwrap();
    }
    let link = s.path("link");
    std::fs::hard_link(&dst, &link).unwrap();
    let before = std::fs::metadata(&dst).unwrap();
    let out = dontcache(&["cp", p(&src), p(&dst)]);
    assert!(out.status.success(), "{}", said(&out));
    let after = std::fs::metadata(&dst).unwrap();
    assert_eq!(after.ino(), before.ino(), "the inode is kept");
    assert_eq!(after.mode() & 0o7777, 0o600, "the mode is kept");
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()), "the owner is kept");
    assert_eq!(after.nlink(), 2, "the hard link is kept");
    assert_pattern(&dst, 50, 1 << 20);
    assert_pattern(&link, 50, 1 << 20);
    // Through a symlink: the target is written, the link stays a link.
    let target = s.path("target");
    std::fs::write(&target, b"t").unwrap();
    let sym = s.path("sym");
    std::os::unix::fs::symlink(&target, &sym).unwrap();
    let out = dontcache(&["cp", p(&src), p(&sym)]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(std::fs::symlink_metadata(&sym).unwrap().file_type().is_symlink());
    assert_pattern(&target, 50, 1 << 20);
}

#[test]
fn holes_stay_holes() {
    let s = scratch!("cp-sparse");
    let src = s.path("sparse");
    let f = std::fs::File::create(&src).unwrap();
    f.set_len(1 << 30).unwrap();
    use std::os::unix::fs::FileExt;
    for at in [0u64, 300 << 20, (1 << 30) - 4096] {
        f.write_all_at(&pattern(51, at, 4096), at).unwrap();
    }
    f.sync_all().unwrap();
    let dst = s.path("copy");
    let out = dontcache(&["cp", p(&src), p(&dst)]);
    assert!(out.status.success(), "{}", said(&out));
    let m = std::fs::metadata(&dst).unwrap();
    assert_eq!(m.len(), 1 << 30);
    assert!(m.blocks() * 512 < 1 << 20, "the copy is sparse: {} bytes allocated", m.blocks() * 512);
    let copy = std::fs::File::open(&dst).unwrap();
    let mut buf = vec![0u8; 4096];
    for at in [0u64, 300 << 20, (1 << 30) - 4096] {
        copy.read_exact_at(&mut buf, at).unwrap();
        assert!(buf == pattern(51, at, 4096), "data at {at}");
    }
    copy.read_exact_at(&mut buf, 500 << 20).unwrap();
    assert!(buf.iter().all(|&b| b == 0), "a hole reads as zeros");
}

#[test]
fn a_signal_leaves_no_temporary() {
    let s = scratch!("cp-signal");
    let src = s.path("big");
    std::fs::write(&src, pattern(52, 0, 512 << 20)).unwrap();
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        drop_cache_of(&src);
        let dst = s.path("dst");
        let child = Command::new(env!("CARGO_BIN_EXE_dontcache"))
            .args(["cp", "--high-water", "4m", p(&src), p(&dst)])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Until the temporary exists: the copy is under way.
        let t = Instant::now();
        let temp = s.path(".dst.dontcache-");
        while !std::fs::read_dir(&s.dir)
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().starts_with(temp.file_name().unwrap().to_str().unwrap()))
        {
            assert!(t.elapsed() < Duration::from_secs(20), "the copy never started");
            std::thread::sleep(Duration::from_millis(2));
        }
        // SAFETY: signals our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{}", said(&out));
        let left: Vec<_> = std::fs::read_dir(&s.dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.iter().all(|n| n == "big"), "after signal {sig}: left behind {left:?}");
    }
}
