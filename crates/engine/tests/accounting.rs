//! The library's counts come back to zero after any sequence of calls. A
//! page counted dirty or in flight that nothing will see clean holds every
//! later writer at the high-water mark for good, and keeps its file from
//! ever finishing; integrity tests do not notice (the bytes are right).
//!
//! Random sequences (seeded: a failure names its seed) of writes, writes
//! made elsewhere and reported (`note_write`), truncates inside and past
//! what is being written back, syncs, reads, closes and reopens on a few
//! files under every policy, with a mark of a few pages so the writers
//! stall and the flusher works between calls. Then every file is closed:
//! `flush` must return, nothing may be counted dirty, and every file must
//! hold what a model of it says; each read on the way is checked too.

mod common;
use common::*;

use std::os::unix::fs::FileExt;
use std::sync::mpsc;
use std::time::Duration;

use dontcache::{Handle, Options, Policy};

const FILES: usize = 3;
/// Offsets and lengths stay within this: the files overlap in their pages.
const SPAN: u64 = 384 << 10;
const MAX_IO: u64 = 48 << 10;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn bytes(&mut self, n: u64) -> Vec<u8> {
        (0..n).map(|_| self.below(256) as u8).collect()
    }
}

/// One file: its handle (none while closed) and what it should hold.
struct Modelled {
    path: std::path::PathBuf,
    handle: Option<Handle>,
    bytes: Vec<u8>,
}

impl Modelled {
    fn put(&mut self, off: u64, data: &[u8]) {
        let end = off as usize + data.len();
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        self.bytes[off as usize..end].copy_from_slice(data);
    }
}

fn open(path: &std::path::Path, opts: Options) -> Handle {
    Handle::open(path, libc::O_CREAT | libc::O_RDWR, 0o644, opts).unwrap()
}

/// One call on a random file; returns what it was, for failure messages.
fn step(rng: &mut Rng, files: &mut [Modelled], opts: Options) -> String {
    let f = &mut files[rng.below(FILES as u64) as usize];
    let Some(h) = f.handle.as_ref() else {
        f.handle = Some(open(&f.path, opts));
        return "reopen".into();
    };
    let (off, len) = (rng.below(SPAN), rng.below(MAX_IO) + 1);
    match rng.below(10) {
        0..=3 => {
            let data = rng.bytes(len);
            assert_eq!(h.pwrite(&data, off).unwrap(), data.len());
            f.put(off, &data);
            format!("pwrite {off}+{len}")
        }
        4 => {
            // Written through a descriptor of its own, then reported, as a
            // program's io_uring completion would be.
            let data = rng.bytes(len);
            let other = std::fs::OpenOptions::new().write(true).open(&f.path).unwrap();
            other.write_all_at(&data, off).unwrap();
            h.note_write(off, len);
            f.put(off, &data);
            format!("note_write {off}+{len}")
        }
        5 => {
            h.truncate(off).unwrap();
            f.bytes.resize(off as usize, 0);
            format!("truncate {off}")
        }
        6 => {
            let mut buf = vec![0; len as usize];
            let n = h.pread(&mut buf, off).unwrap();
            let want = f.bytes.get(off as usize..).map_or(&[][..], |b| &b[..b.len().min(len as usize)]);
            assert!(buf[..n] == *want, "pread {off}+{len}: other bytes than written");
            format!("pread {off}+{len}")
        }
        7 => {
            if rng.below(2) == 0 {
                h.fsync().unwrap();
                "fsync".into()
            } else {
                h.fdatasync().unwrap();
                "fdatasync".into()
            }
        }
        _ => {
            f.handle.take().expect("open").close().unwrap();
            "close".into()
        }
    }
}

/// `flush`, or a failure naming what is still counted if it does not
/// return: the counts are wrong, and nothing would ever clean them.
fn flush_or_fail(what: &str) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(dontcache::flush()).unwrap());
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(r) => r.unwrap(),
        Err(_) => {
            let s = dontcache::global_stats();
            panic!("{what}: flush did not return in 60 s; {} bytes still counted dirty", s.dirty_now);
        }
    }
}

/// Nothing counted dirty, and nothing the flusher had to rescue: pages in
/// flight that nothing waited for (`orphaned_pages`), which it now finds
/// and waits for, so that a leak would otherwise pass unseen.
fn assert_counted_right(what: &str, orphaned_before: u64) {
    assert_eq!(dontcache::global_stats().dirty_now, 0, "{what}: pages still counted dirty");
    let orphaned = dontcache::orphaned_pages() - orphaned_before;
    assert_eq!(orphaned, 0, "{what}: pages were in flight with nothing to wait for them");
    assert_eq!(dontcache::unaccounted(), (0, 0), "{what}: flush gave up on counts nothing brought down");
}

#[test]
fn random_calls_leave_nothing_counted_and_the_bytes_written() {
    // The counts looked at are the process's: one test at a time.
    let _alone = exclusive();
    let s = scratch!("engine-accounting");
    for policy in Policy::ALL {
        let opts = Options { policy, high_water: 64 << 10, ..Options::default() };
        for seed in 1..=6u64 {
            let orphaned_before = dontcache::orphaned_pages();
            let mut rng = Rng(seed * 0x9e37_79b9_7f4a_7c15 + 1);
            let mut files: Vec<Modelled> = (0..FILES)
                .map(|i| {
                    let path = s.path(&format!("{policy}-{seed}-{i}"));
                    Modelled { handle: Some(open(&path, opts)), path, bytes: Vec::new() }
                })
                .collect();
            let mut calls = Vec::new();
            for _ in 0..300 {
                calls.push(step(&mut rng, &mut files, opts));
            }
            for f in &mut files {
                if let Some(h) = f.handle.take() {
                    h.close().unwrap();
                }
            }
            let what = format!("{policy}, seed {seed}, last calls {:?}", &calls[calls.len() - 8..]);
            flush_or_fail(&what);
            assert_counted_right(&what, orphaned_before);
            for f in &files {
                assert!(std::fs::read(&f.path).unwrap() == f.bytes, "{what}: {} holds other bytes", f.path.display());
            }
        }
    }
}

/// The same calls from four threads at once on the same three handles,
/// without a model (the order of the bytes is the scheduler's): the
/// counts must still come back to zero.
#[test]
fn concurrent_calls_on_shared_handles_leave_nothing_counted() {
    let _alone = exclusive();
    let s = scratch!("engine-accounting-threads");
    for policy in Policy::ALL {
        let opts = Options { policy, high_water: 64 << 10, ..Options::default() };
        for seed in 1..=3u64 {
            let orphaned_before = dontcache::orphaned_pages();
            let paths: Vec<_> = (0..FILES).map(|i| s.path(&format!("{policy}-{seed}-{i}"))).collect();
            let handles: Vec<Handle> = paths.iter().map(|p| open(p, opts)).collect();
            std::thread::scope(|scope| {
                for t in 0..4u64 {
                    let (handles, paths) = (&handles, &paths);
                    scope.spawn(move || {
                        let mut rng = Rng((seed * 4 + t) * 0x9e37_79b9_7f4a_7c15 + 1);
                        for _ in 0..300 {
                            let i = rng.below(FILES as u64) as usize;
                            concurrent_step(&mut rng, &handles[i], &paths[i]);
                        }
                    });
                }
            });
            for h in handles {
                h.close().unwrap();
            }
            let what = format!("{policy}, seed {seed}, four threads");
            flush_or_fail(&what);
            assert_counted_right(&what, orphaned_before);
        }
    }
}

fn concurrent_step(rng: &mut Rng, h: &Handle, path: &std::path::Path) {
    let (off, len) = (rng.below(SPAN), rng.below(MAX_IO) + 1);
    match rng.below(8) {
        0..=3 => drop(h.pwrite(&rng.bytes(len), off).unwrap()),
        4 => {
            let other = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            other.write_all_at(&rng.bytes(len), off).unwrap();
            h.note_write(off, len);
        }
        5 => h.truncate(off).unwrap(),
        6 => drop(h.pread(&mut vec![0; len as usize], off).unwrap()),
        _ => h.fdatasync().unwrap(),
    }
}
