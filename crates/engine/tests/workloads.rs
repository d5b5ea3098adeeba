//! Workloads beyond one stream: thousands of small files from several
//! threads, writes a program issues itself through io_uring and reports,
//! and writeback errors of files already closed. Each checks every byte,
//! and that the cache stays bounded.

mod common;
use common::*;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use dontcache::{Handle, Policy};

const MIB: u64 = 1 << 20;

/// Samples the library's dirty bytes while `f` runs; returns the peak.
fn peak_dirty_while<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let peak = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                peak.fetch_max(dontcache::global_stats().dirty_now, Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let r = f();
    stop.store(true, Relaxed);
    sampler.join().unwrap();
    (r, peak.load(Relaxed))
}

#[test]
fn thousands_of_small_files_from_several_threads() {
    let _alone = exclusive();
    let s = scratch!("engine-small");
    for policy in Policy::ALL {
        let dir = s.path(policy.name());
        std::fs::create_dir(&dir).unwrap();
        let ((), peak) = peak_dirty_while(|| {
            let threads: Vec<_> = (0..8u64)
                .map(|t| {
                    let dir = dir.clone();
                    std::thread::spawn(move || {
                        for i in 0..400u64 {
                            let len = 4096 * (1 + (i % 4)) as usize;
                            let h = Handle::open(
                                &dir.join(format!("{t}-{i}")),
                                libc::O_CREAT | libc::O_TRUNC | libc::O_WRONLY,
                                0o644,
                                opts(policy),
                            )
                            .unwrap();
                            // Closed as programs close files: without waiting.
                            assert_eq!(h.pwrite(&pattern((t * 400 + i) as u8, 0, len), 0).unwrap(), len);
                            h.close().unwrap();
                        }
                    })
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
        });
        dontcache::flush().unwrap();
        let bound = dirty_bound(policy, opts(policy).high_water);
        assert!(peak <= bound, "{policy}: {peak} dirty bytes at the peak, bound {bound}");
        let mut cached = 0;
        for t in 0..8u64 {
            for i in 0..400u64 {
                let path = dir.join(format!("{t}-{i}"));
                // Counted before the check reads the file back in.
                cached += cached_pages(&path);
                assert_pattern(&path, (t * 400 + i) as u8, 4096 * (1 + (i % 4)));
            }
        }
        assert!(cached <= 8, "{policy}: {cached} pages of 3,200 closed files left cached after flush");
    }
}

/// A program that writes through io_uring itself and reports each
/// completed write (`note_write`): write-behind, the high-water mark and
/// the drop work as for the library's own writes.
#[test]
fn io_uring_writes_reported_with_note_write() {
    let _alone = exclusive();
    let s = scratch!("engine-uring");
    let chunk = 256 << 10;
    let total = 96 * MIB;
    for policy in Policy::ALL {
        let path = s.path(&format!("u-{policy}"));
        let h = Handle::open(&path, libc::O_CREAT | libc::O_TRUNC | libc::O_RDWR, 0o644, opts(policy)).unwrap();
        let mut ring = io_uring::IoUring::new(8).unwrap();
        let bufs: Vec<Vec<u8>> = (0..total / chunk).map(|k| pattern(60, k * chunk, chunk as usize)).collect();
        let ((), peak) = peak_dirty_while(|| {
            let (mut next, mut inflight) = (0usize, 0usize);
            while next < bufs.len() || inflight > 0 {
                while next < bufs.len() && inflight < 8 {
                    let b = &bufs[next];
                    let sqe = io_uring::opcode::Write::new(io_uring::types::Fd(h.fd()), b.as_ptr(), b.len() as u32)
                        .offset(next as u64 * chunk)
                        .rw_flags(h.rw_flags())
                        .build()
                        .user_data(next as u64);
                    // SAFETY: the buffer outlives the ring's use of it.
                    unsafe { ring.submission().push(&sqe).unwrap() };
                    next += 1;
                    inflight += 1;
                }
                ring.submit_and_wait(1).unwrap();
                let done: Vec<(u64, i32)> = ring.completion().map(|c| (c.user_data(), c.result())).collect();
                for (k, res) in done {
                    assert_eq!(res, chunk as i32, "{policy}: write {k}");
                    h.note_write(k * chunk, res as u64);
                    inflight -= 1;
                }
            }
        });
        assert!(h.take_error().is_none());
        if policy != Policy::Lazy && policy != Policy::Kernel {
            let bound = dirty_bound(policy, opts(policy).high_water);
            assert!(peak <= bound, "{policy}: {peak} dirty bytes at the peak, bound {bound}");
        }
        h.close_and_wait().unwrap();
        let left = cached_pages(&path);
        assert!(left <= 1, "{policy}: {left} pages left cached");
        assert_pattern(&path, 60, total);
    }
}

/// A file closed before its writeback failed: the error is a late error,
/// returned once by `flush` (or the next fsync or close on the device,
/// whichever comes first), and listed with the file's path. Writes the library does not
/// see (through the descriptor itself) with a handle that sweeps for them
/// make sure nothing is written back before the close.
#[test]
fn an_error_after_close_is_a_late_error() {
    let s = scratch!("engine-late");
    // 64 MiB of ext4 on a 24 MiB tmpfs: writeback past ~24 MiB fails.
    let fs = LoopFs::ext4_on_small_tmpfs(&s.dir, 64, 24);
    let path = fs.mnt.join("late");
    // Written (and left dirty) before the library binds the file; the
    // sweeping handle hands it to the flusher at close.
    std::fs::write(&path, pattern(61, 0, (40 * MIB) as usize)).unwrap();
    let h = Handle::open(&path, libc::O_RDWR, 0, opts(Policy::Flusher)).unwrap();
    h.watch_unseen();
    assert!(h.close().is_ok(), "nothing has failed yet when the file is closed");
    // The flusher writes the closed file back now; flush waits for it and
    // returns its error, once.
    let flushed = dontcache::flush();
    assert!(
        matches!(flushed.as_ref().map_err(|e| e.raw_os_error()), Err(Some(libc::EIO | libc::ENOSPC))),
        "flush returns the late error: {flushed:?}"
    );
    assert!(dontcache::flush().is_ok(), "and returns it once");
    let late: Vec<_> = dontcache::late_errors().into_iter().filter(|e| e.path == path).collect();
    assert!(!late.is_empty(), "the error is listed with the file's path: {:?}", dontcache::late_errors());
    assert!(dontcache::global_stats().late_errors >= 1);
}
