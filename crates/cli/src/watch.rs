//! `dontcache run --watch`: the command's process tree watched from outside
//! with fanotify, for what the shim cannot enter (statically linked
//! programs) or did not see. Every file a process of the tree opens, writes
//! or closes gets a libdontcache handle in this process (`Handle::watch`):
//! the flusher sweeps it for dirty pages while it is open, and its close
//! writes back what is left and drops the file. Needs CAP_SYS_ADMIN.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, AsRawFd, IntoRawFd, OwnedFd};
use std::path::PathBuf;

use dontcache::{Handle, Options, Watched};

/// Filesystems whose files live in a page cache that can give pages up.
fn page_cached(fs: &str) -> bool {
    matches!(
        fs,
        "ext4"
            | "ext3"
            | "ext2"
            | "xfs"
            | "btrfs"
            | "f2fs"
            | "bcachefs"
            | "vfat"
            | "exfat"
            | "ntfs3"
            | "jfs"
            | "nilfs2"
            | "reiserfs"
            | "fuse"
            | "fuseblk"
            | "overlay"
            | "nfs"
            | "nfs4"
    )
}

pub struct Watcher {
    group: OwnedFd,
    /// Where events are read to, kept from read to read.
    events: Box<[u8]>,
    opts: Options,
    /// Watched files by (device, inode).
    files: HashMap<(u64, u64), Handle>,
    /// The command's pid and every pid known to descend from it.
    tree: HashSet<i32>,
    /// Pids known not to.
    others: HashSet<i32>,
    /// Writeback errors of files the tree had closed: (errno, path).
    pub late: Vec<(i32, PathBuf)>,
    /// When the watch began, on the coarse real-time clock the kernel
    /// stamps files from (a finer one could read ahead of a birth time
    /// stamped after it): nothing of a file born at or after it was cached
    /// before the tree (`Watched::made_since`).
    began: Option<(i64, u32)>,
}

impl Watcher {
    /// A fanotify group marked on every mounted filesystem with a page cache.
    pub fn new(opts: Options) -> Result<Watcher, String> {
        let group = dc_sys::fanotify_init().map_err(|e| {
            if e.raw_os_error() == Some(libc::EPERM) {
                "--watch needs root (CAP_SYS_ADMIN) for fanotify; run as root, or drop --watch (the shim alone \
                 covers dynamically linked programs)"
                    .to_string()
            } else {
                format!("--watch: fanotify_init: {e} (the kernel needs CONFIG_FANOTIFY)")
            }
        })?;
        let mask = dc_sys::FAN_OPEN | dc_sys::FAN_MODIFY | dc_sys::FAN_CLOSE_WRITE | dc_sys::FAN_CLOSE_NOWRITE;
        let mounts = dc_sys::mounts().map_err(|e| format!("--watch: mountinfo: {e}"))?;
        let mut marked = 0;
        for m in mounts {
            if page_cached(&m.fs_type) && dc_sys::fanotify_mark_filesystem(group.as_fd(), mask, &m.point).is_ok() {
                marked += 1;
            }
        }
        if marked == 0 {
            return Err("--watch: no filesystem with a page cache could be marked for fanotify".into());
        }
        Ok(Watcher {
            group,
            events: vec![0; 64 << 10].into_boxed_slice(),
            opts,
            files: HashMap::new(),
            tree: HashSet::new(),
            others: HashSet::new(),
            late: Vec::new(),
            began: dc_sys::clock_time(libc::CLOCK_REALTIME_COARSE).ok(),
        })
    }

    /// The command's process: it and its descendants are watched.
    pub fn set_root(&mut self, pid: i32) {
        self.tree.insert(pid);
    }

    /// Handles the events that came in the next `timeout_ms` (or at once).
    pub fn poll(&mut self, timeout_ms: i32) {
        let mut p = libc::pollfd { fd: self.group.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut p, 1, timeout_ms) } <= 0 {
            return;
        }
        while let Ok(events) = dc_sys::fanotify_read(self.group.as_fd(), &mut self.events) {
            if events.is_empty() {
                break;
            }
            for e in events {
                self.event(e);
            }
        }
    }

    fn event(&mut self, e: dc_sys::FanEvent) {
        let Some(fd) = e.fd else { return };
        if !self.in_tree(e.pid) {
            return;
        }
        let Ok(st) = dc_sys::fstat(fd.as_raw_fd()) else { return };
        if !st.is_regular() {
            return;
        }
        let key = (st.dev, st.ino);
        if e.mask & (dc_sys::FAN_OPEN | dc_sys::FAN_MODIFY) != 0 && !self.files.contains_key(&key) {
            let born = dc_sys::birth_time(fd.as_fd()).ok().flatten();
            let made_since = matches!((born, self.began), (Some(b), Some(began)) if b >= began);
            if let Some(h) = watch(fd, self.opts, Watched { made_since }) {
                self.files.insert(key, h);
            }
            if e.mask & (dc_sys::FAN_CLOSE_WRITE | dc_sys::FAN_CLOSE_NOWRITE) == 0 {
                return;
            }
        }
        if e.mask & (dc_sys::FAN_CLOSE_WRITE | dc_sys::FAN_CLOSE_NOWRITE) != 0 {
            if let Some(h) = self.files.remove(&key) {
                self.close(h);
            }
        }
    }

    /// Hands a watched file to the flusher; an error it kept is a late one
    /// (the process closed the file and cannot be told), named by the path
    /// of the event's descriptor, looked up only then (a `readlink` a file
    /// was 8% of the watcher's CPU under `tar -xf`).
    fn close(&mut self, h: Handle) {
        let (r, _pending) = h.release_shared();
        if let Err(e) = r {
            let path = dc_sys::fd_path(h.as_fd()).unwrap_or_default();
            self.late.push((e.raw_os_error().unwrap_or(libc::EIO), path));
        }
        // The event's descriptor: the handle works through a duplicate of
        // its own (`Handle::watch`), which the flusher closes when done.
        let _ = dc_sys::close(h.fd());
    }

    /// Whether `pid` is the command or descends from it. `dontcache run` is
    /// a child subreaper, so orphans of the tree reparent to it and stay
    /// findable; a process that has exited stays a zombie in /proc until
    /// reaped, which `run` does only after reading the events.
    fn in_tree(&mut self, pid: i32) -> bool {
        if self.tree.contains(&pid) {
            return true;
        }
        if self.others.contains(&pid) {
            return false;
        }
        let mut chain = vec![pid];
        let mut at = pid;
        let me = dc_sys::getpid();
        for _ in 0..64 {
            let Some(parent) = crate::tree::parent_of(at) else { break };
            if self.tree.contains(&parent) || parent == me {
                self.tree.extend(chain);
                return true;
            }
            if parent <= 1 || self.others.contains(&parent) {
                break;
            }
            chain.push(parent);
            at = parent;
        }
        self.others.insert(pid);
        false
    }

    /// Closes every file still watched (the caller then waits for all of
    /// this process's writeback, `dontcache::flush`, and takes its late
    /// errors).
    pub fn finish(&mut self) {
        self.poll(0);
        for (_, h) in std::mem::take(&mut self.files) {
            self.close(h);
        }
    }
}

fn watch(fd: OwnedFd, opts: Options, watched: Watched) -> Option<Handle> {
    let raw = fd.into_raw_fd();
    Handle::watch(raw, opts, watched)
        .inspect_err(|_| {
            let _ = dc_sys::close(raw);
        })
        .ok()
}
