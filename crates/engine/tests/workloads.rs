//! Workloads beyond one stream: thousands of small files from several
//! threads, writes a program issues itself through io_uring and reports,
//! and writeback errors of files already closed. Each checks every byte,
//! and that the cache stays bounded.

mod common;
use common::*;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use dontcache::{Handle, Options, Policy, Submit};

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

/// Closed files on two filesystems, written in turn, and a larger one on
/// each: one `flush` finishes them all, written back and uncached. Alone:
/// its `flush` takes a late error of any device, and took the one another
/// test kept to find still there (1 failure under `make stress`).
#[test]
fn flush_finishes_the_closed_files_of_every_device() {
    let _alone = exclusive();
    let s = scratch!("engine-flush-devices");
    let (a, b) = (s.path("a"), s.path("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let filesystems = [LoopFs::ext4(&a, 64), LoopFs::xfs(&b, 300)];
    // Both written to the end, turn about: neither is done before flush.
    for i in 0..500u64 {
        for (n, fs) in filesystems.iter().enumerate() {
            let path = fs.mnt.join(format!("f{i}"));
            let h = Handle::open(&path, libc::O_CREAT | libc::O_WRONLY, 0o644, opts(Policy::Flusher)).unwrap();
            let len = 4096 * (1 + i % 3) as usize;
            assert_eq!(h.pwrite(&pattern((n as u64 * 500 + i) as u8, 0, len), 0).unwrap(), len);
            h.close().unwrap();
        }
    }
    // And a larger file on each, whose writeback takes a while.
    for fs in &filesystems {
        let h =
            Handle::open(&fs.mnt.join("big"), libc::O_CREAT | libc::O_WRONLY, 0o644, opts(Policy::Flusher)).unwrap();
        for off in (0..32 * MIB).step_by(MIB as usize) {
            h.pwrite(&pattern(99, off, MIB as usize), off).unwrap();
        }
        h.close().unwrap();
    }
    // A late error a test before this one left may come back: none may be
    // of these files.
    let _ = dontcache::flush();
    let ours: Vec<_> = dontcache::late_errors()
        .into_iter()
        .filter(|e| filesystems.iter().any(|fs| e.path.starts_with(&fs.mnt)))
        .collect();
    assert!(ours.is_empty(), "late errors of these files: {ours:?}");
    for (n, fs) in filesystems.iter().enumerate() {
        assert_eq!(cached_pages(&fs.mnt.join("big")), 0, "filesystem {n}: a closed file left cached after flush");
        let cached: u64 = (0..500u64).map(|i| cached_pages(&fs.mnt.join(format!("f{i}")))).sum();
        assert_eq!(cached, 0, "filesystem {n}: closed files left cached after flush returned");
        for i in 0..500u64 {
            assert_pattern(&fs.mnt.join(format!("f{i}")), (n as u64 * 500 + i) as u8, 4096 * (1 + i % 3));
        }
        assert_pattern(&fs.mnt.join("big"), 99, 32 * MIB);
    }
}

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
            // Completions are reported in bursts of up to the ring's depth
            // after one wait on the ring, and the throttle lets each through
            // once a batch has started, as it would a synchronous writer's
            // next write: CI saw two writes (512 KiB) over the bound of a
            // synchronous writer; one ring's depth is allowed.
            let bound = dirty_bound(policy, opts(policy).high_water) + 8 * chunk;
            assert!(peak <= bound, "{policy}: {peak} dirty bytes at the peak, bound {bound}");
        }
        h.close_and_wait().unwrap();
        let left = cached_pages(&path);
        assert!(left <= 1, "{policy}: {left} pages left cached");
        assert_pattern(&path, 60, total);
    }
}

/// Random 4 KiB reads a program issues itself through io_uring at depth
/// 8, each with the flags `read_flags` gives at the time and reported with
/// `note_read`: every byte as written; once the reads are found scattered
/// they carry RWF_DONTCACHE where the kernel takes it (ext4 here), and not
/// where it refuses it (btrfs), whose reads the library drops; either way
/// what the reads brought in is dropped as they go and at close, and the
/// pages cached before them stay.
#[test]
fn io_uring_random_reads_reported_with_note_read() {
    let _alone = exclusive();
    let s = scratch!("engine-uring-reads");
    random_reads_through_a_ring(&s.path("r"));
    let fs = LoopFs::btrfs(&s.dir, 256);
    assert!(!kernel_takes_dontcache_reads_of(&fs.mnt), "btrfs took RWF_DONTCACHE: find another refusing filesystem");
    random_reads_through_a_ring(&fs.mnt.join("r"));
}

/// Whether the kernel takes RWF_DONTCACHE on reads of the filesystem at `dir`.
fn kernel_takes_dontcache_reads_of(dir: &std::path::Path) -> bool {
    let path = dir.join("probe");
    std::fs::write(&path, b"x").unwrap();
    let f = std::fs::File::open(&path).unwrap();
    let takes = dc_sys::takes_dontcache_reads(std::os::fd::AsFd::as_fd(&f), 0).unwrap();
    std::fs::remove_file(&path).unwrap();
    takes
}

/// The reads of `io_uring_random_reads_reported_with_note_read` on a new
/// 128 MiB file at `path`, under `flusher` and `lazy`.
fn random_reads_through_a_ring(path: &std::path::Path) {
    let size = 128 * MIB;
    std::fs::write(path, pattern(62, 0, size as usize)).unwrap();
    drop_cache_of(path);
    // Someone else's first 4 MiB, cached before the reader binds the file;
    // readahead put more than those in the cache: all of it is theirs.
    let mut theirs = vec![0u8; (4 * MIB) as usize];
    std::os::unix::fs::FileExt::read_exact_at(&std::fs::File::open(path).unwrap(), &mut theirs, 0).unwrap();
    let foreign = cached_pages(path);
    assert!(cached_pages_in(path, 0, 4 * MIB) == 1024 && foreign >= 1024, "{foreign} pages cached before");
    // The reads stay past the other owner's pages (one from the start):
    // one of theirs the kernel reclaimed and a read brought back would be
    // the reader's, and go with its pages.
    let theirs_end = foreign * 4096;
    assert_eq!(cached_pages_in(path, 0, theirs_end), foreign, "readahead's pages are the file's first");
    let takes_it = kernel_takes_dontcache_reads_of(path.parent().unwrap());
    for policy in [Policy::Flusher, Policy::Lazy] {
        let h = Handle::open(path, libc::O_RDONLY, 0, opts(policy)).unwrap();
        dc_sys::fadvise(std::os::fd::AsFd::as_fd(&h), 0, 0, dc_sys::Advice::Random).unwrap();
        let mut ring = io_uring::IoUring::new(8).unwrap();
        let mut bufs = vec![vec![0u8; 4096]; 8];
        let mut at = [0u64; 8];
        let (mut x, mut peak, mut flagged) = (0x2545_f491_4f6c_dd1du64, 0, 0);
        for round in 0..1500 {
            for (slot, buf) in bufs.iter_mut().enumerate() {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                at[slot] = theirs_end + (x >> 33) % ((size - theirs_end) / 4096) * 4096;
                let flags = h.read_flags();
                flagged += (flags == dc_sys::RWF_DONTCACHE) as u32;
                let sqe = io_uring::opcode::Read::new(io_uring::types::Fd(h.fd()), buf.as_mut_ptr(), 4096)
                    .offset(at[slot])
                    .rw_flags(flags)
                    .build()
                    .user_data(slot as u64);
                // SAFETY: the buffer outlives the ring's use of it.
                unsafe { ring.submission().push(&sqe).unwrap() };
            }
            ring.submit_and_wait(8).unwrap();
            let done: Vec<(u64, i32)> = ring.completion().map(|c| (c.user_data(), c.result())).collect();
            for (slot, res) in done {
                let slot = slot as usize;
                assert_eq!(res, 4096, "{policy}: read at {}", at[slot]);
                assert_eq!(bufs[slot], pattern(62, at[slot], 4096), "{policy}: bytes at {}", at[slot]);
                h.note_read(at[slot], 4096);
            }
            if round % 100 == 0 {
                peak = peak.max(cached_pages(path).saturating_sub(foreign));
            }
        }
        assert_eq!(h.read_flags() == dc_sys::RWF_DONTCACHE, takes_it, "{policy}: reads handed to the kernel");
        if takes_it {
            assert!(flagged > 11_000, "{policy}: only {flagged} of 12,000 reads carried RWF_DONTCACHE");
        }
        assert!(peak * 4096 <= 12 * MIB, "{policy}: {} MiB read cached at the peak", peak * 4096 / MIB);
        h.close_and_wait().unwrap();
        // Counted with those the kernel's own reclaim (DAMON `pageout`
        // here) took meanwhile, each counted evicted.
        assert_eq!(kept_or_reclaimed_in(path, 0, theirs_end), foreign, "{policy}: the pages cached before stay");
        let left = cached_pages_in(path, theirs_end, size - theirs_end);
        assert_eq!(left, 0, "{policy}: close leaves nothing else cached");
    }
}

/// A file closed before its writeback failed: the error is a late error,
/// returned once by `flush` (or the next fsync or close on the device,
/// whichever comes first), and listed with the file's path. Writes the library does not
/// see (through the descriptor itself) with a handle that sweeps for them
/// make sure nothing is written back before the close.
#[test]
fn an_error_after_close_is_a_late_error() {
    let _alone = exclusive();
    take_stale_late_errors();
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
    let again = dontcache::flush();
    assert!(again.is_ok(), "and returns it once: {again:?}; late errors {:?}", dontcache::late_errors());
    let late: Vec<_> = dontcache::late_errors().into_iter().filter(|e| e.path == path).collect();
    assert!(!late.is_empty(), "the error is listed with the file's path: {:?}", dontcache::late_errors());
    assert!(dontcache::global_stats().late_errors >= 1);
}

/// Returns every late error still unreturned: `flush` returns the oldest
/// of any device, an earlier test's too.
fn take_stale_late_errors() {
    while dontcache::flush().is_err() {}
}

/// A shell command run when dropped: a test's mounts and loop devices go
/// however it ends.
struct Undo(String);

impl Drop for Undo {
    fn drop(&mut self) {
        sh(&self.0);
    }
}

/// Whether `done` holds within `tries` looks, 20 ms apart.
fn eventually(tries: u32, mut done: impl FnMut() -> bool) -> bool {
    (0..tries).any(|_| {
        done() || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            false
        }
    })
}

/// A loop device unmounted and mounted again with a new filesystem keeps
/// its device number: the old filesystem's late error is not the new one's
/// to return (an fsync there succeeds), and is still listed and returned by
/// `flush`.
#[test]
fn a_late_error_stays_with_its_filesystem_when_the_device_number_comes_back() {
    let _alone = exclusive();
    take_stale_late_errors();
    assert!(is_root(), "this test needs root (loop devices and tmpfs); run it as CI does");
    let s = scratch!("engine-late-reused");
    let (backing, mnt) = (s.path("backing"), s.path("mnt"));
    std::fs::create_dir_all(&backing).unwrap();
    std::fs::create_dir_all(&mnt).unwrap();
    let run = |cmd: String| {
        let out = sh(&cmd);
        assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // 64 MiB of ext4 on a 24 MiB tmpfs: writeback past ~24 MiB fails.
    run(format!("mount -t tmpfs -o size=24m dctest {}", backing.display()));
    let _tmpfs = Undo(format!("umount -l {}", backing.display()));
    let old_image = backing.join("old.img");
    run(format!("truncate -s 64M {0} && mkfs.ext4 -q -F -m 0 -E nodiscard {0}", old_image.display()));
    let device = run(format!("losetup --find --show {}", old_image.display()));
    // Lazily: the flusher may still hold a file there for its drop. The
    // device is detached only while it holds one of this test's images:
    // between the detach below and the attach, another program may take it.
    let _device = Undo(format!(
        "umount -l {mnt}; case \"$(losetup -n -O BACK-FILE {device})\" in *{dir}/*) losetup -d {device};; esac",
        mnt = mnt.display(),
        dir = s.dir.display()
    ));
    run(format!("mount -o errors=continue {device} {}", mnt.display()));
    let path = mnt.join("late");
    std::fs::write(&path, pattern(62, 0, (40 * MIB) as usize)).unwrap();
    let h = Handle::open(&path, libc::O_RDWR, 0, opts(Policy::Flusher)).unwrap();
    h.watch_unseen();
    assert!(h.close().is_ok(), "nothing has failed yet when the file is closed");
    // The flusher writes the closed file back; its error waits, unreturned.
    let kept = |p: &std::path::Path| dontcache::late_errors().iter().any(|e| e.path == p);
    assert!(eventually(1500, || kept(&path)), "the closed file's writeback failed within 30 s");
    // The same loop device, a new filesystem (on the scratch disk).
    let new_image = s.path("new.img");
    // The flusher lets the failed file go after its drop retries (about a
    // second); until then the filesystem is busy.
    let unmounted = eventually(500, || sh(&format!("umount {}", mnt.display())).status.success());
    assert!(unmounted, "the old filesystem stayed busy for 10 s after its file's late error");
    run(format!("losetup -d {device}"));
    run(format!("truncate -s 64M {}", new_image.display()));
    let attached = eventually(100, || sh(&format!("losetup {device} {}", new_image.display())).status.success());
    assert!(attached, "{device} was not released for the new image within 2 s");
    run(format!("mkfs.ext4 -q -F -m 0 -E nodiscard {device} && mount {device} {}", mnt.display()));
    let h = Handle::open(&mnt.join("new"), libc::O_CREAT | libc::O_RDWR, 0o644, opts(Policy::Flusher)).unwrap();
    assert_eq!(h.pwrite(&pattern(63, 0, MIB as usize), 0).unwrap(), MIB as usize);
    let synced = h.fsync();
    assert!(synced.is_ok(), "the new filesystem's fsync got the old one's late error: {synced:?}");
    let closed = h.close();
    assert!(closed.is_ok(), "and so did its close: {closed:?}");
    assert!(kept(&path), "the old error is still listed: {:?}", dontcache::late_errors());
    assert!(dontcache::flush().is_err(), "and flush still returns it");
}

/// The device's write requests and merges so far (`/sys/block/<dev>/stat`).
fn disk_writes(fs: &LoopFs) -> (u64, u64) {
    let dev = std::os::unix::fs::MetadataExt::dev(&std::fs::metadata(&fs.mnt).unwrap());
    let dev = dc_sys::block_device_of(dev).expect("a loop device");
    let stat = dc_sys::disk_stat(&dev.disk).unwrap();
    (stat.write_ios, stat.write_merges)
}

/// Up to three tries of `small_files` into a new directory of `dir` each,
/// until the disk's writes and merges over one (written back with `flush`)
/// pass `merged`: a batch goes file by file while the rest of the machine
/// has more than 16 MiB dirty, which another program writing at the same
/// time (a second copy of these tests) makes true for a while. Returns the
/// directory of the try that passed, or every try's writes and merges.
fn merged_in_a_try(
    fs: &LoopFs,
    dir: &std::path::Path,
    n: u64,
    opts: Options,
    merged: impl Fn(u64, u64) -> bool,
) -> Result<std::path::PathBuf, Vec<(u64, u64)>> {
    let mut tries = Vec::new();
    for k in 0..3 {
        let into = dir.join(format!("try-{k}"));
        std::fs::create_dir(&into).unwrap();
        // SAFETY: sync has no preconditions.
        unsafe { libc::sync() };
        let before = disk_writes(fs);
        small_files(&into, n, opts);
        dontcache::flush().unwrap();
        let after = disk_writes(fs);
        let (writes, merges) = (after.0 - before.0, after.1 - before.1);
        eprintln!("{}: {n} files, {writes} disk writes, {merges} merges", into.display());
        if merged(writes, merges) {
            return Ok(into);
        }
        tries.push((writes, merges));
        // Room (and inodes) for the next try.
        std::fs::remove_dir_all(&into).unwrap();
    }
    Err(tries)
}

/// `n` closed files of 4-16 KiB from 4 threads in `dir`, through `opts`.
fn small_files(dir: &std::path::Path, n: u64, opts: Options) {
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let dir = dir.to_path_buf();
            std::thread::spawn(move || {
                for i in 0..n / 4 {
                    let len = 4096 * (1 + (i % 4)) as usize;
                    let h = Handle::open(
                        &dir.join(format!("{t}-{i}")),
                        libc::O_CREAT | libc::O_TRUNC | libc::O_WRONLY,
                        0o644,
                        opts,
                    )
                    .unwrap();
                    assert_eq!(h.pwrite(&pattern((t * 97 + i) as u8, 0, len), 0).unwrap(), len);
                    h.close().unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
}

/// Each way the flusher can submit a batch writes thousands of closed small
/// files back byte for byte and drops them; `syncfs` (one call for a batch
/// of closed files, plugged across them by the kernel) reaches the disk as
/// merged writes (in one of three tries, `merged_in_a_try`), where a
/// `sync_file_range` per file makes one write each. Each submission gets
/// its own loop device, all mounted at once: the first handle on a device
/// decides how its flusher submits, and a device number freed by an
/// unmount comes back with the next mount.
#[test]
fn small_files_through_each_submission() {
    let _alone = exclusive();
    take_stale_late_errors();
    let s = scratch!("engine-submit");
    let submits = [Submit::Loop, Submit::Uring, Submit::Syncfs];
    let filesystems: Vec<LoopFs> = submits
        .iter()
        .map(|submit| {
            let dir = s.path(&format!("{submit:?}"));
            std::fs::create_dir(&dir).unwrap();
            LoopFs::ext4(&dir, 256)
        })
        .collect();
    for (submit, fs) in submits.into_iter().zip(&filesystems) {
        let o = Options { submit, ..opts(Policy::Flusher) };
        let dir = if submit == Submit::Syncfs {
            // Batches of one file each, a write per file, while a syncfs runs.
            merged_in_a_try(fs, &fs.mnt, 2000, o, |writes, merges| merges > 500 && writes < 500).unwrap_or_else(
                |tries| {
                    panic!(
                        "{submit:?}: (writes, merges) for 2,000 files in each try: {tries:?}: not plugged across files"
                    )
                },
            )
        } else {
            let (before, dir) = (disk_writes(fs), fs.mnt.join("files"));
            std::fs::create_dir(&dir).unwrap();
            small_files(&dir, 2000, o);
            dontcache::flush().unwrap();
            let after = disk_writes(fs);
            eprintln!("{submit:?}: 2,000 files, {} disk writes, {} merges", after.0 - before.0, after.1 - before.1);
            dir
        };
        let mut cached = 0;
        for t in 0..4u64 {
            for i in 0..500u64 {
                let path = dir.join(format!("{t}-{i}"));
                cached += cached_pages(&path);
                assert_pattern(&path, (t * 97 + i) as u8, 4096 * (1 + (i % 4)));
            }
        }
        assert!(cached <= 8, "{submit:?}: {cached} pages of 2,000 closed files left cached after flush");
    }
}

/// Ten times more closed files than the other tests, through `syncfs`
/// (the writers wait at the closed-files cap while a `syncfs` runs): every
/// file is written back and the disk still sees merged writes, about one
/// for 16 files.
#[test]
fn small_files_past_the_cap_through_syncfs_still_merge() {
    let _alone = exclusive();
    take_stale_late_errors();
    let s = scratch!("engine-syncfs-cap");
    let fs = LoopFs::ext4(&s.dir, 512);
    let o = Options { submit: Submit::Syncfs, ..opts(Policy::Flusher) };
    let dir = merged_in_a_try(&fs, &fs.mnt, 20_000, o, |writes, _| writes < 2_500).unwrap_or_else(|tries| {
        panic!("(writes, merges) for 20,000 files in each try: {tries:?}: not plugged across files")
    });
    for (t, i) in [(0u64, 0u64), (1, 2_345), (3, 4_999)] {
        assert_pattern(&dir.join(format!("{t}-{i}")), (t * 97 + i) as u8, 4096 * (1 + (i % 4)));
    }
}

/// On an overlay whose upper layer is an ext4 (a container's root), the
/// default submission is the upper layer's: batches of closed files go as
/// one `syncfs`, and the disk sees merged writes, not one per file (about
/// 150 writes here alone; beside another test binary writing, 706 writes
/// with 2,814 merges were seen, and a try of 2,000 writes and no merges:
/// file by file, as `merged_in_a_try` says).
#[test]
fn small_files_on_an_overlay_over_ext4_merge_by_default() {
    let _alone = exclusive();
    take_stale_late_errors();
    let s = scratch!("engine-overlay");
    let fs = LoopFs::ext4(&s.dir, 256);
    let merged = s.path("merged");
    let _overlay = overlay(&fs.mnt, &merged);
    assert_eq!(Options::default().submit, Submit::Auto);
    let dir =
        merged_in_a_try(&fs, &merged, 2000, opts(Policy::Flusher), |writes, merges| merges > 500 && writes < 1000)
            .unwrap_or_else(|tries| {
                panic!("(writes, merges) for 2,000 files in each try: {tries:?}: not one syncfs per batch")
            });
    for (t, i) in [(0u64, 0u64), (3, 499)] {
        assert_pattern(&dir.join(format!("{t}-{i}")), (t * 97 + i) as u8, 4096 * (1 + (i % 4)));
    }
}

/// Mounts at `merged` an overlay whose layers are directories in `base`;
/// unmounted when the result is dropped.
fn overlay(base: &std::path::Path, merged: &std::path::Path) -> Undo {
    for d in ["lower", "upper", "work"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
    }
    std::fs::create_dir(merged).unwrap();
    let b = base.display();
    let ok = sh(&format!(
        "mount -t overlay dctest -o lowerdir={b}/lower,upperdir={b}/upper,workdir={b}/work {}",
        merged.display()
    ));
    assert!(ok.status.success(), "overlayfs: {}", String::from_utf8_lossy(&ok.stderr));
    Undo(format!("umount -l {}", merged.display()))
}

/// Overlayfs keeps no pages of its own: the library looks at and acts on
/// the layer file's, a file written through the overlay (in the upper
/// layer) or one only read from the lower layer. Pages cached before a
/// read through the overlay stay, and what the read brought in goes.
#[test]
fn pages_cached_before_stay_on_an_overlay() {
    let _alone = exclusive();
    let s = scratch!("engine-overlay-cached");
    let fs = LoopFs::ext4(&s.dir, 128);
    const LEN: u64 = 16 * MIB;
    std::fs::create_dir(fs.mnt.join("lower")).unwrap();
    std::fs::write(fs.mnt.join("lower/below"), pattern(3, 0, LEN as usize)).unwrap();
    let merged = s.path("merged");
    let _overlay = overlay(&fs.mnt, &merged);
    std::fs::write(merged.join("above"), pattern(4, 0, LEN as usize)).unwrap();
    for (tag, name, layer) in [(3u8, "below", "lower"), (4, "above", "upper")] {
        let path = merged.join(name);
        let real = fs.mnt.join(layer).join(name);
        let f = std::fs::File::open(&real).unwrap();
        f.sync_all().unwrap();
        dc_sys::fadvise(std::os::fd::AsFd::as_fd(&f), 0, 0, dc_sys::Advice::DontNeed).unwrap();
        // Another program's read of 1 MiB through the overlay caches that
        // and its readahead, in the layer file.
        let mut theirs = vec![0u8; MIB as usize];
        std::io::Read::read_exact(&mut std::fs::File::open(&path).unwrap(), &mut theirs).unwrap();
        let before = cached_pages_in(&real, 0, LEN);
        assert!((256..LEN / 4096).contains(&before), "the setup: {before} pages of {name} cached");
        assert_eq!(cached_pages_in(&real, 0, before * 4096), before, "the setup: readahead from the start");
        // One found by the path it is opened by, one by its descriptor's.
        let h = if layer == "upper" {
            Handle::open(&path, libc::O_RDONLY, 0, opts(Policy::Flusher)).unwrap()
        } else {
            let fd = std::os::fd::IntoRawFd::into_raw_fd(std::fs::File::open(&path).unwrap());
            Handle::adopt(fd, opts(Policy::Flusher)).unwrap()
        };
        let mut buf = vec![0u8; MIB as usize];
        for off in (0..LEN).step_by(MIB as usize) {
            assert_eq!(h.pread(&mut buf, off).unwrap(), MIB as usize);
            assert_eq!(buf, pattern(tag, off, MIB as usize));
        }
        h.close_and_wait().unwrap();
        let kept = kept_or_reclaimed_in(&real, 0, before * 4096);
        assert_eq!(
            kept, before,
            "{name}: of {before} pages cached before the library's read, {kept} are left (or reclaimed by the kernel)"
        );
        let ours = cached_pages_in(&real, before * 4096, LEN - before * 4096);
        assert!(ours <= 1, "{name}: {ours} pages the library's read brought in are still cached");
    }
}

/// A lower file opened for writing is copied up: the library's file is
/// then the upper one, though the overlay still reports the lower file's
/// inode number for it. What is written is written back and dropped there.
#[test]
fn a_copied_up_file_on_an_overlay_is_written_back_in_the_upper_layer() {
    let _alone = exclusive();
    let s = scratch!("engine-overlay-copy-up");
    let fs = LoopFs::ext4(&s.dir, 128);
    const LEN: u64 = 8 * MIB;
    std::fs::create_dir(fs.mnt.join("lower")).unwrap();
    let lower = fs.mnt.join("lower/f");
    std::fs::write(&lower, pattern(7, 0, LEN as usize)).unwrap();
    let merged = s.path("merged");
    let _overlay = overlay(&fs.mnt, &merged);
    let path = merged.join("f");
    let lower_ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&lower).unwrap());
    let h = Handle::open(&path, libc::O_RDWR, 0, opts(Policy::Flusher)).unwrap();
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
    assert_eq!(ino, lower_ino, "the setup: the copied-up file keeps the lower file's inode number");
    for off in (LEN..2 * LEN).step_by(MIB as usize) {
        assert_eq!(h.pwrite(&pattern(7, off, MIB as usize), off).unwrap(), MIB as usize);
    }
    h.close_and_wait().unwrap();
    let upper = fs.mnt.join("upper/f");
    let ours = cached_pages_in(&upper, LEN, LEN);
    assert!(ours <= 1, "{ours} pages written through the overlay are still cached in the upper file");
    assert_pattern(&upper, 7, 2 * LEN);
}

/// Writeback errors of files closed on an overlay reach the program as on
/// any filesystem, whether the batch goes file by file or as one `syncfs`
/// (through the overlay's own file a wait reports nothing and a
/// `sync_file_range` writes nothing back).
#[test]
fn late_errors_on_an_overlay_are_reported() {
    let _alone = exclusive();
    for submit in [Submit::Loop, Submit::Syncfs] {
        let s = scratch!("engine-overlay-error");
        let fs = LoopFs::ext4_on_full_tmpfs(&s.dir, 64);
        let merged = s.path("merged");
        let _overlay = overlay(&fs.mnt, &merged);
        let late = closed_files_fail_late(&merged, submit, Policy::Flusher);
        assert!(late, "{submit:?}: closed files' failed writeback went unreported");
    }
}

/// Writes 8 files of 64 KiB in `dir` through `submit` and `policy` and
/// closes them;
/// whether `flush` then returns a late error.
fn closed_files_fail_late(dir: &std::path::Path, submit: Submit, policy: Policy) -> bool {
    take_stale_late_errors();
    let o = Options { submit, ..opts(policy) };
    for i in 0..8 {
        let rw = libc::O_CREAT | libc::O_TRUNC | libc::O_WRONLY;
        let h = Handle::open(&dir.join(format!("{submit:?}-{policy}-{i}")), rw, 0o644, o).unwrap();
        let _ = h.pwrite(&[2u8; 64 << 10], 0);
        let _ = h.close();
    }
    let late = dontcache::flush().is_err();
    take_stale_late_errors();
    late
}

/// Inside a container whose overlay was mounted from outside, the layer
/// paths the mount table shows lead nowhere, and no layer file is found:
/// the library then writes back by a `syncfs` of the overlay (which
/// reports the upper layer's errors), and a failed one is the error of
/// every file it wrote back, whatever the submission asked for.
#[test]
fn late_errors_on_an_overlay_whose_layers_are_out_of_sight_are_reported() {
    let _alone = exclusive();
    let s = scratch!("engine-overlay-unseen");
    let fs = LoopFs::ext4_on_full_tmpfs(&s.dir, 64);
    let merged = s.path("merged");
    let _overlay = overlay(&fs.mnt, &merged);
    // The layers' filesystem leaves this process's tree; the overlay keeps it.
    let gone = sh(&format!("umount -l {}", fs.mnt.display()));
    assert!(gone.status.success(), "umount: {}", String::from_utf8_lossy(&gone.stderr));
    assert!(!fs.mnt.join("upper").exists(), "the setup: the upper layer can still be named");
    for policy in Policy::ALL {
        for submit in [Submit::Loop, Submit::Auto] {
            let late = closed_files_fail_late(&merged, submit, policy);
            assert!(late, "{policy} {submit:?}: failed writeback out of sight went unreported");
        }
    }
}

/// On tmpfs, and on an overlay over it, the page cache is the files: the
/// library writes and reads through it as anywhere else, asks the kernel
/// to drop nothing (its stats say so), and every page stays.
#[test]
fn nothing_is_dropped_on_tmpfs_or_an_overlay_over_it() {
    let _alone = exclusive();
    take_stale_late_errors();
    let s = scratch!("engine-overlay-tmpfs");
    let base = s.path("tmpfs");
    std::fs::create_dir(&base).unwrap();
    let ok = sh(&format!("mount -t tmpfs -o size=96m dctest {}", base.display()));
    assert!(ok.status.success(), "tmpfs: {}", String::from_utf8_lossy(&ok.stderr));
    let _tmpfs = Undo(format!("umount -l {}", base.display()));
    let merged = s.path("merged");
    let _overlay = overlay(&base, &merged);
    const LEN: u64 = 32 * MIB;
    for (tag, dir, pages) in [(5u8, &base, base.join("f")), (6, &merged, base.join("upper/f"))] {
        let path = dir.join("f");
        let rw = libc::O_CREAT | libc::O_TRUNC | libc::O_RDWR;
        let h = Handle::open(&path, rw, 0o644, opts(Policy::Flusher)).unwrap();
        for off in (0..LEN).step_by(MIB as usize) {
            assert_eq!(h.pwrite(&pattern(tag, off, MIB as usize), off).unwrap(), MIB as usize);
        }
        let mut buf = vec![0u8; MIB as usize];
        for off in (0..LEN).step_by(MIB as usize) {
            assert_eq!(h.pread(&mut buf, off).unwrap(), MIB as usize);
        }
        dontcache::flush().unwrap();
        let st = h.stats();
        assert_eq!((st.bytes_written, st.bytes_read), (LEN, LEN), "{}: {st:?}", dir.display());
        assert_eq!(st.bytes_dropped, 0, "{}: the library tried to drop pages that are the file: {st:?}", dir.display());
        h.close_and_wait().unwrap();
        assert_pattern(&path, tag, LEN);
        assert_eq!(cached_pages_in(&pages, 0, LEN), LEN / 4096, "{}: a page of the file left memory", dir.display());
    }
}

/// The library's `syncfs` leaves the program its report of a writeback
/// error on the filesystem: `syncfs` reports one once per open file, and
/// the program's open file is the one the library's duplicate shares.
#[test]
fn the_programs_syncfs_still_reports_an_error_after_the_librarys() {
    let _alone = exclusive();
    take_stale_late_errors();
    let s = scratch!("engine-syncfs-error");
    let fs = LoopFs::ext4_on_full_tmpfs(&s.dir, 64);
    let o = Options { submit: Submit::Syncfs, ..opts(Policy::Flusher) };
    let rw = libc::O_CREAT | libc::O_TRUNC | libc::O_RDWR;
    let program = Handle::open(&fs.mnt.join("program"), rw, 0o644, o).unwrap();
    // The error, made without the library after the program opened its file.
    std::fs::write(fs.mnt.join("failing"), vec![7u8; 64 << 10]).unwrap();
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    // The program's file is the oldest of the batch, behind it closed
    // files: the batch goes as one `syncfs`, through the first file.
    program.pwrite(&[1u8; 4096], 0).unwrap();
    for i in 0..8 {
        let h = Handle::open(&fs.mnt.join(format!("closed-{i}")), rw, 0o644, o).unwrap();
        let _ = h.pwrite(&[2u8; 4096], 0);
        let _ = h.close();
    }
    // The closed files' own errors are the library's late errors.
    let late = dontcache::flush();
    assert!(late.is_err(), "closed files whose writeback failed behind a syncfs reported nothing");
    take_stale_late_errors();
    // SAFETY: the descriptor is open; no memory is passed.
    let r = unsafe { libc::syncfs(program.fd()) };
    let e = (r == -1).then(std::io::Error::last_os_error);
    assert!(
        e.as_ref().is_some_and(|e| matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::ENOSPC))),
        "the program's syncfs returned {r} ({e:?}), not the filesystem's EIO: the library's syncfs took it"
    );
    let _ = program.close();
    take_stale_late_errors();
}

/// A late error of files written back through `syncfs` surfaces as with
/// any other submission: from a later close on the device or from `flush`,
/// each once, and listed with the file's path.
#[test]
fn an_error_after_close_through_syncfs_is_a_late_error() {
    let _alone = exclusive();
    take_stale_late_errors();
    let s = scratch!("engine-late-syncfs");
    // 64 MiB of ext4 on a 24 MiB tmpfs: writeback past ~24 MiB fails.
    let fs = LoopFs::ext4_on_small_tmpfs(&s.dir, 64, 24);
    let o = Options { submit: Submit::Syncfs, ..opts(Policy::Flusher) };
    // Up to 40 MiB in 640 closed files of 64 KiB, until the filesystem
    // refuses a new file or a write.
    let (mut paths, mut returned) = (Vec::new(), 0);
    let seen_before = dontcache::global_stats().errors;
    for i in 0..640u64 {
        let path = fs.mnt.join(format!("f{i}"));
        let Ok(h) = Handle::open(&path, libc::O_CREAT | libc::O_WRONLY, 0o644, o) else { break };
        if h.pwrite(&pattern(i as u8, 0, 64 << 10), 0).is_err() {
            let _ = h.close();
            break;
        }
        // A close returns the late error of a file closed before it.
        returned += h.close().is_err() as usize;
        paths.push(path);
    }
    // flush returns the rest, one per call.
    while dontcache::flush().is_err() {
        returned += 1;
    }
    let late: Vec<_> = dontcache::late_errors().into_iter().filter(|e| paths.contains(&e.path)).collect();
    assert!(!late.is_empty(), "the error is listed with a file's path: {:?}", dontcache::late_errors());
    assert!(returned >= 1, "no close and no flush returned the late errors of {} files", late.len());
    // A close may also return its own file's error, met while it was still
    // open (not a late error): bounded by the errors the library met, each
    // returned once.
    let seen = (dontcache::global_stats().errors - seen_before) as usize;
    assert!(returned <= seen, "{returned} errors returned, {seen} met: one was returned twice");
}
