//! What the engine promises beyond integrity: the cache stays bounded,
//! other people's cache survives, errors surface, fork gets a fresh engine,
//! and the kick protocol loses no wakeup.

mod common;
use common::*;

use std::sync::Arc;
use std::time::{Duration, Instant};

use dontcache::{Handle, Options, Policy};

const MIB: u64 = 1 << 20;

fn create(path: &std::path::Path, policy: Policy) -> Handle {
    Handle::open(path, libc::O_CREAT | libc::O_TRUNC | libc::O_RDWR, 0o644, opts(policy)).unwrap()
}

/// Waits until the flusher has seen every library-dirty page clean.
fn settle(h: &Handle) {
    let t = Instant::now();
    while h.stats().dirty_now > 0 && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_cache_stays_within_two_passes() {
    let _alone = exclusive();
    let s = scratch!("engine-bound");
    let high_water = opts(Policy::Flusher).high_water;
    let inline_here = dontcache_flushes_inline(&s.path("probe"));
    for policy in Policy::ALL {
        let path = s.path(&format!("b-{policy}"));
        let h = create(&path, policy);
        let mut peak = 0;
        for off in (0..256 * MIB).step_by(MIB as usize) {
            h.pwrite(&pattern(7, off, MIB as usize), off).unwrap();
            if off % (16 * MIB) == 0 {
                peak = peak.max(cached_pages(&path) * 4096);
            }
        }
        // Lazy leaves the pages it skipped dirty until the high-water mark
        // or close, so there is nothing to wait for.
        if policy != Policy::Lazy {
            settle(&h);
        }
        // Lazy leaves pages it skipped dirty until the high-water mark or
        // close; every other policy drops everything once it settles.
        let bound = 2 * high_water;
        let settled = if policy == Policy::Lazy { bound } else { 2 * MIB };
        // Settled: the flusher retries drops the kernel deferred for a
        // moment, and drops lazy's writeback once it completes, which on a
        // loaded disk comes late (once, 37 MiB of lazy's file were still
        // cached right after its writes).
        let t = Instant::now();
        while cached_pages(&path) * 4096 > settled && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let after = cached_pages(&path) * 4096;
        assert!(after <= bound, "{policy}: {after} bytes cached after settling, bound {bound}");
        // The kernel's own RWF_DONTCACHE writes are not under the library's
        // throttle: what they keep cached while writing is the disk queue's
        // depth (124 MiB once, beside other tests' I/O), not a library bound.
        if policy != Policy::Kernel {
            assert!(peak <= bound + 2 * high_water, "{policy}: peak {peak} bytes cached while writing");
        }
        if policy != Policy::Lazy {
            assert!(after <= 2 * MIB, "{policy}: {after} bytes still cached after settling");
        }
        // This file's own counters: other tests run in the same process.
        // The kernel drops what its RWF_DONTCACHE wrote: all of `kernel`'s,
        // and `lazy`'s where that is flushed inline, which may be all.
        let st = h.stats();
        let kernel_drops = policy == Policy::Kernel || (policy == Policy::Lazy && inline_here);
        assert!(st.bytes_dropped > 0 || kernel_drops, "{policy}: {st:?}");
        h.close_and_wait().unwrap();
        let left = cached_pages(&path);
        assert!(left <= 1, "{policy}: close leaves the file uncached, {left} pages left");
    }
}

#[test]
fn pre_cached_pages_survive() {
    let s = scratch!("engine-sacred");
    let path = s.path("f");
    std::fs::write(&path, pattern(8, 0, (32 * MIB) as usize)).unwrap();
    drop_cache_of(&path);
    let mut f = std::fs::File::open(&path).unwrap();
    // No readahead: async readahead still in flight would land after any drop.
    dc_sys::fadvise(std::os::fd::AsFd::as_fd(&f), 0, 0, dc_sys::Advice::Random).unwrap();
    for policy in [Policy::Flusher, Policy::Inline, Policy::Lazy, Policy::PerFile] {
        // Someone else reads the first 8 MiB: those pages are theirs. Read
        // again for each policy: a page the kernel's reclaim took since is
        // read back (its shadow entry with it), or else it would be the
        // library's to drop this time, as one not cached when it began.
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(0)).unwrap();
        std::io::Read::read_exact(&mut f, &mut vec![0u8; (8 * MIB) as usize]).unwrap();
        let theirs = cached_pages_in(&path, 0, 8 * MIB);
        assert_eq!(theirs, 2048, "{policy}: the first 8 MiB are cached before the library starts");
        let h = Handle::open(&path, libc::O_RDWR, 0, opts(policy)).unwrap();
        // Write the last 8 MiB and overwrite 1 MiB of theirs, read 8-16 MiB.
        for off in (24 * MIB..32 * MIB).step_by(MIB as usize) {
            h.pwrite(&pattern(8, off, MIB as usize), off).unwrap();
        }
        h.pwrite(&pattern(8, 2 * MIB, MIB as usize), 2 * MIB).unwrap();
        let mut buf = vec![0u8; MIB as usize];
        for off in (8 * MIB..16 * MIB).step_by(MIB as usize) {
            h.pread(&mut buf, off).unwrap();
            assert_eq!(buf, pattern(8, off, MIB as usize));
        }
        h.close_and_wait().unwrap();
        // The library never drops them; the kernel's reclaim may.
        let theirs: Vec<u64> = (0..8).map(|i| kept_or_reclaimed_in(&path, i * MIB, MIB)).collect();
        assert_eq!(
            theirs.iter().sum::<u64>(),
            2048,
            "{policy}: their pages are all still cached (or reclaimed by the kernel), per MiB: {theirs:?}"
        );
        let ours: Vec<u64> = (2..8).map(|i| cached_pages_in(&path, i * 4 * MIB, 4 * MIB)).collect();
        assert!(
            ours.iter().sum::<u64>() <= 1,
            "{policy}: pages the library brought in still cached, per 4 MiB from 8 MiB: {ours:?}"
        );
    }
    assert_pattern(&path, 8, 32 * MIB);
}

#[test]
fn kernel_policy_falls_back_where_refused() {
    // tmpfs has no FOP_DONTCACHE: the kernel refuses RWF_DONTCACHE there.
    let dir = tempdir_on_shm();
    let path = dir.join("f");
    let h = create(&path, Policy::Kernel);
    h.pwrite(&pattern(9, 0, MIB as usize), 0).unwrap();
    let st = h.stats();
    assert_eq!(st.kernel_fallback, 1, "the fallback is recorded: {st:?}");
    assert_eq!(st.bytes_written, MIB);
    h.close().unwrap();
    assert_pattern(&path, 9, MIB);
    std::fs::remove_dir_all(&dir).unwrap();
    // On ext4 the kernel takes it, and no fallback is recorded.
    let s = scratch!("engine-kernel");
    let h = create(&s.path("k"), Policy::Kernel);
    h.pwrite(&pattern(9, 0, MIB as usize), 0).unwrap();
    assert_eq!(h.stats().kernel_fallback, 0);
    h.close().unwrap();
}

#[test]
fn lazy_starts_writeback_as_the_kernels_rwf_dontcache_where_that_flushes_inline() {
    let s = scratch!("engine-lazy-kernel");
    if !dontcache_flushes_inline(&s.path("probe")) {
        eprintln!("SKIP: RWF_DONTCACHE writes are not flushed inline here (a kernel before 6.14 or from 7.2)");
        return;
    }
    let path = s.path("l");
    let h = create(&path, Policy::Lazy);
    // Idle, ending on a page boundary: one RWF_DONTCACHE write, which the
    // kernel writes back and drops; no flusher kicked, nothing dirty.
    h.pwrite(&pattern(10, 0, MIB as usize), 0).unwrap();
    let st = h.stats();
    assert_eq!((st.kicks + st.coalesced_kicks, st.dirty_now), (0, 0), "through the kernel: {st:?}");
    let t = Instant::now();
    while cached_pages(&path) > 0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(cached_pages(&path), 0, "the kernel dropped them at the end of their writeback");
    // Ending inside a page: the library's way (the kernel would drop the
    // page, and the next write would read it back).
    h.pwrite(&pattern(10, MIB, 100), MIB).unwrap();
    let st = h.stats();
    assert_eq!((st.kicks + st.coalesced_kicks, st.dirty_now), (1, 4096), "the library's way: {st:?}");
    h.pwrite(&pattern(10, MIB + 100, 4096 - 100), MIB + 100).unwrap();
    h.close_and_wait().unwrap();
    assert_eq!(cached_pages(&path), 0, "nothing left cached after close");
    assert_pattern(&path, 10, MIB + 4096);
}

/// Whether an RWF_DONTCACHE write to `probe` (a new file, removed after)
/// has its writeback started when it returns (6.14-7.1).
fn dontcache_flushes_inline(probe: &std::path::Path) -> bool {
    use std::os::fd::AsFd;
    let f = std::fs::OpenOptions::new().create_new(true).read(true).write(true).open(probe).unwrap();
    let data = vec![1u8; MIB as usize];
    let written = dc_sys::pwritev2(f.as_fd(), &data, 0, dc_sys::RWF_DONTCACHE);
    let inline = written.is_ok() && dc_sys::cachestat(f.as_fd(), 0, MIB).is_ok_and(|c| c.nr_dirty == 0);
    std::fs::remove_file(probe).unwrap();
    inline
}

fn tempdir_on_shm() -> std::path::PathBuf {
    let d = std::path::PathBuf::from(format!("/dev/shm/dontcache-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn enospc_is_reported_and_nothing_is_lost() {
    let s = scratch!("engine-enospc");
    let fs = LoopFs::ext4(&s.dir, 16);
    for policy in Policy::ALL {
        let path = fs.mnt.join(format!("fill-{policy}"));
        let h = create(&path, policy);
        let mut written = 0u64;
        let mut errors = Vec::new();
        for off in (0..32 * MIB).step_by(MIB as usize) {
            match h.pwrite(&pattern(10, off, MIB as usize), off) {
                Ok(n) => written += n as u64,
                Err(e) => {
                    errors.push(e.raw_os_error());
                    break;
                }
            }
        }
        if let Err(e) = h.fsync() {
            errors.push(e.raw_os_error());
        }
        if let Err(e) = h.close() {
            errors.push(e.raw_os_error());
        }
        assert!(errors.contains(&Some(libc::ENOSPC)), "{policy}: ENOSPC must surface, got {errors:?}");
        assert!(written < 16 * MIB, "{policy}: wrote {written} bytes into a 16 MiB filesystem");
        // What was acknowledged is on disk, byte for byte.
        let data = std::fs::read(&path).unwrap();
        assert!(data.len() as u64 >= written);
        assert!(
            data[..written as usize] == pattern(10, 0, written as usize)[..],
            "{policy}: acknowledged data differs"
        );
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn eio_from_background_writeback_reaches_fsync_or_close() {
    let s = scratch!("engine-eio");
    // 64 MiB of ext4 on a 24 MiB tmpfs: writeback past ~24 MiB fails with EIO.
    let fs = LoopFs::ext4_on_small_tmpfs(&s.dir, 64, 24);
    for policy in [Policy::Flusher, Policy::Lazy, Policy::Inline, Policy::PerFile] {
        let path = fs.mnt.join(format!("eio-{policy}"));
        let h = Handle::open(&path, libc::O_CREAT | libc::O_TRUNC | libc::O_WRONLY, 0o644, opts(policy)).unwrap();
        let mut errors = Vec::new();
        for off in (0..40 * MIB).step_by(MIB as usize) {
            if let Err(e) = h.pwrite(&pattern(11, off, MIB as usize), off) {
                errors.push(("write", e.raw_os_error()));
                break;
            }
        }
        let st = h.stats();
        if let Err(e) = h.fdatasync() {
            errors.push(("fdatasync", e.raw_os_error()));
        }
        if let Err(e) = h.close() {
            errors.push(("close", e.raw_os_error()));
        }
        // The loop driver passes the backing file's ENOSPC up as
        // BLK_STS_NOSPC, so writeback sees ENOSPC here, or EIO on kernels
        // that map every loop failure to an I/O error.
        assert!(
            errors.iter().any(|(_, e)| matches!(*e, Some(libc::EIO) | Some(libc::ENOSPC))),
            "{policy}: the writeback error must surface from a write, fdatasync or close: {errors:?}, stats {st:?}"
        );
        assert!(
            st.errors >= 1 || errors.iter().any(|(w, _)| *w != "write"),
            "{policy}: the error came from writeback: {st:?}"
        );
        // Its blocks back for the next policy's file: 64 MiB hold one. They
        // come back once the library has closed its duplicate, after the
        // failed writeback; beside two copies of this suite the next
        // policy's first write found the filesystem still full.
        std::fs::remove_file(&path).unwrap();
        wait_for_free_space(&fs.mnt, 48 * MIB);
    }
}

/// Waits up to 10 s for `bytes` to be free on the filesystem at `dir`.
fn wait_for_free_space(dir: &std::path::Path, bytes: u64) {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until && dc_sys::fs_free_bytes(dir).unwrap() < bytes {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_forked_child_gets_a_fresh_engine() {
    let s = scratch!("engine-fork");
    let path = s.path("f");
    let h = create(&path, Policy::Flusher);
    h.pwrite(&pattern(12, 0, (4 * MIB) as usize), 0).unwrap();
    // SAFETY: the child only writes through the handle and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let ok = h.pwrite(&pattern(12, 4 * MIB, (4 * MIB) as usize), 4 * MIB).is_ok()
            && h.stats().bytes_written == 4 * MIB
            && h.fdatasync().is_ok();
        // SAFETY: leave without running the parent's test harness.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child failed: {status}");
    h.pwrite(&pattern(12, 8 * MIB, (4 * MIB) as usize), 8 * MIB).unwrap();
    assert_eq!(h.stats().bytes_written, 8 * MIB, "the parent's counters are its own");
    h.close_and_wait().unwrap();
    let left: Vec<u64> = (0..3).map(|i| cached_pages_in(&path, i * 4 * MIB, 4 * MIB)).collect();
    assert!(left.iter().sum::<u64>() <= 1, "pages left cached per 4 MiB: {left:?}");
    assert_pattern(&path, 12, 12 * MIB);
}

/// A child whose own binding fails (no descriptor left for its duplicate)
/// does plain I/O on the inherited file, never its parent's engine, whose
/// locks a parent thread may have held at fork time.
#[test]
fn a_child_that_cannot_bind_does_plain_io() {
    let s = scratch!("engine-fork-nofd");
    let path = s.path("f");
    let h = create(&path, Policy::Flusher);
    h.pwrite(&pattern(13, 0, MIB as usize), 0).unwrap();
    // SAFETY: the child writes through the handle and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // No descriptor left: the lowest free number becomes the limit, so
        // the child's re-binding cannot duplicate.
        // SAFETY: F_GETFD only asks whether a number is open.
        let free = (0..).find(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0).unwrap();
        let rl = libc::rlimit { rlim_cur: free as u64, rlim_max: free as u64 };
        // SAFETY: lowering our own limit.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) };
        let wrote = h.pwrite(&pattern(13, MIB, MIB as usize), MIB).is_ok_and(|n| n == MIB as usize);
        let plain = h.stats() == dontcache::Stats::default();
        // SAFETY: leave without running the parent's test harness.
        unsafe { libc::_exit(if wrote && plain { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child failed: {status}");
    assert_eq!(h.stats().bytes_written, MIB, "the parent's counters are its own");
    h.close_and_wait().unwrap();
    assert_pattern(&path, 13, 2 * MIB);
}

/// The file a descriptor number holds now, if it is open: `(dev, ino)`.
fn file_at(fd: std::os::fd::RawFd) -> Option<(u64, u64)> {
    dc_sys::fstat(fd).ok().map(|st| (st.dev, st.ino))
}

fn open_owned(path: &std::path::Path) -> std::os::fd::OwnedFd {
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).unwrap();
    file.into()
}

/// A handle that owns its descriptor writes through it, leaves nothing
/// cached, and closes it itself once the file is written back: soon after
/// `close_and_wait` the number no longer holds the file (another test's
/// open may have taken it since).
#[test]
fn an_owned_descriptor_is_written_through_and_closed_by_the_library() {
    let s = scratch!("engine-own");
    for policy in Policy::ALL {
        let path = s.path(&format!("own-{policy}"));
        let h = Handle::own(open_owned(&path), opts(policy)).unwrap();
        let (fd, file) = (h.fd(), file_at(h.fd()).unwrap());
        for off in (0..8 * MIB).step_by(MIB as usize) {
            assert_eq!(h.pwrite(&pattern(16, off, MIB as usize), off).unwrap(), MIB as usize);
        }
        assert_eq!(file_at(fd), Some(file), "{policy}: the handle's number is the file while it lives");
        h.close_and_wait().unwrap();
        // The flusher lets go of the file just after it wakes the waiter.
        let t = Instant::now();
        while file_at(fd) == Some(file) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_ne!(file_at(fd), Some(file), "{policy}: the owned descriptor is still open 5 s after close");
        let cached = cached_pages(&path);
        assert!(cached <= 1, "{policy}: {cached} pages left cached");
        assert_pattern(&path, 16, 8 * MIB);
    }
    // A descriptor the handle cannot take is closed all the same.
    let dir = std::fs::File::open(s.path("")).unwrap();
    let (fd, was) = (std::os::fd::AsRawFd::as_raw_fd(&dir), file_at(std::os::fd::AsRawFd::as_raw_fd(&dir)));
    let e = Handle::own(dir.into(), opts(Policy::Flusher)).err().expect("a directory is refused");
    assert_eq!(e.raw_os_error(), Some(libc::EISDIR));
    assert_ne!(file_at(fd), was, "a refused descriptor is left open");
}

/// `release` of a handle that owns its descriptor gives back an open
/// duplicate of the file: the library still closes its own.
#[test]
fn releasing_an_owned_descriptor_gives_back_a_duplicate() {
    let s = scratch!("engine-own-release");
    let path = s.path("f");
    let h = Handle::own(open_owned(&path), opts(Policy::Flusher)).unwrap();
    let (fd, file) = (h.fd(), file_at(h.fd()).unwrap());
    h.pwrite(&pattern(17, 0, MIB as usize), 0).unwrap();
    let (back, r, pending) = h.release();
    r.unwrap();
    pending.wait().unwrap();
    assert_ne!(back, fd, "the library's own number came back");
    // SAFETY: `release` gave this number to the test.
    let back = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(back) };
    assert_eq!(file_at(std::os::fd::AsRawFd::as_raw_fd(&back)), Some(file));
    dc_sys::pwrite(std::os::fd::AsFd::as_fd(&back), &pattern(17, MIB, MIB as usize), MIB).unwrap();
    drop(back);
    assert_pattern(&path, 17, 2 * MIB);
}

/// A forked child's handle of an owned descriptor binds a duplicate of its
/// own, so the child's close closes the number the child inherited, and
/// the parent's file goes on.
#[test]
fn a_child_closes_its_copy_of_an_owned_descriptor() {
    let s = scratch!("engine-own-fork");
    let path = s.path("f");
    let h = Handle::own(open_owned(&path), opts(Policy::Flusher)).unwrap();
    let fd = h.fd();
    h.pwrite(&pattern(18, 0, MIB as usize), 0).unwrap();
    // SAFETY: the child writes through the handle, closes it and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let wrote = h.pwrite(&pattern(18, MIB, MIB as usize), MIB).is_ok_and(|n| n == MIB as usize);
        let closed = h.close_and_wait().is_ok();
        // Nothing else runs in the child: the number stays free.
        let gone = dc_sys::fstat(fd).is_err();
        // SAFETY: leave without running the parent's test harness.
        unsafe { libc::_exit(if wrote && closed && gone { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child failed: {status}");
    h.pwrite(&pattern(18, 2 * MIB, MIB as usize), 2 * MIB).unwrap();
    h.close_and_wait().unwrap();
    assert_pattern(&path, 18, 3 * MIB);
}

/// A file `size` bytes long of pattern `tag`, on the disk and out of the
/// cache, opened read-only through the library (`flusher`).
fn cold_reader(s: &Scratch, tag: u8, size: u64) -> (std::path::PathBuf, Handle) {
    let path = s.path("big");
    std::fs::write(&path, pattern(tag, 0, size as usize)).unwrap();
    drop_cache_of(&path);
    let h = Handle::open(&path, libc::O_RDONLY, 0, opts(Policy::Flusher)).unwrap();
    (path, h)
}

/// Reads through the library drop behind as they go, not only at close:
/// a streaming reader of a file much larger than the readahead window keeps
/// only about that window cached, plus the half high-water mark of read
/// pages it drops at a time. (Readahead brings large folios, and a folio
/// that straddles two reads' ranges is dropped by neither of them alone.)
#[test]
fn streaming_reads_drop_behind_as_they_go() {
    let _alone = exclusive();
    let s = scratch!("engine-stream");
    let size = 256 * MIB;
    let (path, h) = cold_reader(&s, 6, size);
    // As fio and dcload advise a sequential job: the kernel doubles the
    // readahead window.
    dc_sys::fadvise(std::os::fd::AsFd::as_fd(&h), 0, 0, dc_sys::Advice::Sequential).unwrap();
    let mut buf = vec![0u8; MIB as usize];
    let mut peak = 0;
    for off in (0..size).step_by(MIB as usize) {
        assert_eq!(h.pread(&mut buf, off).unwrap(), MIB as usize);
        assert_eq!(buf, pattern(6, off, MIB as usize), "bytes at {off}");
        peak = peak.max(cached_pages(&path) * 4096);
    }
    assert_eq!(h.read_flags(), 0, "a stream's reads stay the library's to drop");
    h.close().unwrap();
    // Two doubled readahead windows (the kernel reads one ahead of the one
    // being read), a drop batch, and one batch still being dropped.
    let dev = std::os::unix::fs::MetadataExt::dev(&std::fs::metadata(&path).unwrap());
    let ra = dc_sys::block_device_of(dev).map_or(128 << 10, |b| b.read_ahead).max(128 << 10);
    let bound = 4 * ra + opts(Policy::Flusher).high_water;
    assert!(peak <= bound, "{peak} bytes of a {size}-byte file cached while reading it, bound {bound}");
    assert_eq!(cached_pages(&path), 0, "close leaves nothing of it cached");
}

/// Random reads through the library drop behind in small batches: a
/// reader of scattered pages keeps a few MiB cached, not the half mark
/// (32 MiB at the default mark) that a sequential reader's batch may reach.
#[test]
fn random_reads_keep_little_cached() {
    let _alone = exclusive();
    let s = scratch!("engine-random-reads");
    let size = 256 * MIB;
    let path = s.path("big");
    std::fs::write(&path, pattern(9, 0, size as usize)).unwrap();
    drop_cache_of(&path);
    let h = Handle::open(&path, libc::O_RDONLY, 0, Options { policy: Policy::Flusher, ..Options::default() }).unwrap();
    // As fio and dcload advise a random job: no readahead around a read.
    dc_sys::fadvise(std::os::fd::AsFd::as_fd(&h), 0, 0, dc_sys::Advice::Random).unwrap();
    let mut buf = vec![0u8; 4096];
    let pages = size / 4096;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut peak = 0;
    for _ in 0..6000 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let off = (x >> 33) % pages * 4096;
        assert_eq!(h.pread(&mut buf, off).unwrap(), 4096);
        assert_eq!(buf, pattern(9, off, 4096), "bytes at {off}");
        peak = peak.max(cached_pages(&path) * 4096);
    }
    h.close().unwrap();
    // 6,000 reads leave about 22 MiB of distinct pages: a batch of 2 MiB,
    // and the flusher up to 10 MiB behind.
    assert!(peak <= 12 * MIB, "{peak} bytes cached by 6,000 random 4 KiB reads");
    assert_eq!(cached_pages(&path), 0, "close leaves nothing of it cached");
}

/// The library's threads of this process (`dc-flush-*`, ...), by name.
fn library_threads(prefix: &str) -> Vec<libc::pid_t> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            comm.starts_with(prefix).then(|| e.file_name().to_str()?.parse().ok()).flatten()
        })
        .collect()
}

fn set_policy(tid: libc::pid_t, policy: libc::c_int) {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a plain system call on a thread of this process.
    unsafe { libc::sched_setscheduler(tid, policy, &param) };
}

/// Threads made `SCHED_IDLE` while a busy thread per CPU runs; undone when
/// dropped (the tests of this binary share the flusher).
struct Starved {
    threads: Vec<libc::pid_t>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    busy: Vec<std::thread::JoinHandle<()>>,
}

impl Starved {
    fn new(threads: Vec<libc::pid_t>) -> Starved {
        threads.iter().for_each(|&t| set_policy(t, libc::SCHED_IDLE));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let busy = (0..std::thread::available_parallelism().map_or(2, |n| n.get()))
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || while !stop.load(std::sync::atomic::Ordering::Relaxed) {})
            })
            .collect();
        Starved { threads, stop, busy }
    }
}

impl Drop for Starved {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.busy.drain(..).for_each(|t| drop(t.join()));
        self.threads.iter().for_each(|&t| set_policy(t, libc::SCHED_OTHER));
    }
}

/// A reader whose flusher gets no CPU (it runs `SCHED_IDLE` while every
/// CPU is busy) drops what it read itself once more than a batch waits:
/// the cache stays bounded without the flusher's help.
#[test]
fn a_reader_drops_behind_itself_when_the_flusher_gets_no_cpu() {
    let _alone = exclusive();
    let s = scratch!("engine-starved");
    let size = 128 * MIB;
    let (path, h) = cold_reader(&s, 14, size);
    let mut buf = vec![0u8; MIB as usize];
    // Reads until the device's flusher exists (the first drop starts it).
    let mut off = 0;
    while library_threads("dc-flush").is_empty() && off < size {
        h.pread(&mut buf, off).unwrap();
        off += MIB;
    }
    let flushers = library_threads("dc-flush");
    assert!(!flushers.is_empty(), "no flusher thread after {off} bytes read");
    let starved = Starved::new(flushers);
    let mut peak = 0;
    for off in (off..size).step_by(MIB as usize) {
        assert_eq!(h.pread(&mut buf, off).unwrap(), MIB as usize);
        assert_eq!(buf, pattern(14, off, MIB as usize), "bytes at {off}");
        peak = peak.max(cached_pages(&path) * 4096);
    }
    drop(starved);
    h.close().unwrap();
    // A batch (half a mark) waiting, the one being added, readahead.
    let bound = opts(Policy::Flusher).high_water + 16 * MIB;
    assert!(peak <= bound, "{peak} bytes of a {size}-byte file cached while reading it, bound {bound}");
}

/// A writer far faster than the disk ends its burst with more dirty pages
/// than the flusher may put in flight at once. No write kicks after the
/// last one, so the flusher must come back for the rest by itself.
#[test]
fn a_burst_past_the_in_flight_cap_is_all_written_back() {
    let s = scratch!("engine-burst");
    // Made before the clock starts: the writer must outrun the disk.
    let data = pattern(9, 0, (96 * MIB) as usize);
    for (round, policy) in [Policy::Flusher, Policy::PerFile].into_iter().cycle().take(6).enumerate() {
        let path = s.path(&format!("burst-{round}"));
        let h = create(&path, policy);
        for (i, piece) in data.chunks(MIB as usize).enumerate() {
            h.pwrite(piece, i as u64 * MIB).unwrap();
        }
        settle(&h);
        assert_eq!(h.stats().dirty_now, 0, "round {round}: pages left dirty with no write to kick the flusher");
        h.close().unwrap();
        assert_pattern(&path, 9, 96 * MIB);
    }
}

/// Many writers hammer kicks; every kick is counted once as a wakeup or a
/// coalesced kick, and every dirty page is eventually seen clean (a lost
/// wakeup would leave dirty_now above zero forever). `DONTCACHE_STRESS_SECS`
/// runs it longer outside CI.
#[test]
fn kicks_coalesce_and_no_wakeup_is_lost() {
    let s = scratch!("engine-kicks");
    let secs: u64 = std::env::var("DONTCACHE_STRESS_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let handles: Vec<Arc<Handle>> =
        (0..4).map(|i| Arc::new(create(&s.path(&format!("k{i}")), Policy::Flusher))).collect();
    let writes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let threads: Vec<_> = (0..16u64)
        .map(|t| {
            let h = handles[t as usize % 4].clone();
            let writes = writes.clone();
            std::thread::spawn(move || {
                let mut i = 0u64;
                while Instant::now() < deadline {
                    let off = ((i * 16 + t) % 4096) * 4096;
                    h.pwrite(&[t as u8; 4096], off).unwrap();
                    writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let total: u64 = writes.load(std::sync::atomic::Ordering::Relaxed);
    let (kicks, coalesced): (u64, u64) =
        handles.iter().map(|h| h.stats()).fold((0, 0), |a, s| (a.0 + s.kicks, a.1 + s.coalesced_kicks));
    eprintln!("{secs} s: {total} writes, {kicks} kicks woke the flusher, {coalesced} coalesced");
    assert_eq!(kicks + coalesced, total, "every write kicks exactly once");
    assert!(coalesced > 0, "concurrent kicks coalesce");
    for h in &handles {
        settle(h);
        assert_eq!(h.stats().dirty_now, 0, "a lost wakeup leaves dirty pages behind");
    }
    for h in handles {
        Arc::into_inner(h).unwrap().close().unwrap();
    }
}

/// A file another process wrote and handed over (`Handle::take_over`):
/// the pages sent are written back and dropped though they were cached
/// when it was bound; the rest stay. A range the sender said runs far past
/// the file's end is one wait and one drop, not one per chunk of it.
#[test]
fn a_taken_over_file_is_finished_as_its_writer_would_have() {
    let s = scratch!("engine-take-over");
    for policy in Policy::ALL {
        let path = s.path(&format!("taken-{policy}"));
        // Written as another process would: 4 MiB written back earlier (the
        // pages cached before it), 8 MiB dirty now.
        std::fs::write(&path, pattern(18, 0, 4 * MIB as usize)).unwrap();
        std::fs::File::open(&path).unwrap().sync_all().unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut f, &pattern(18, 4 * MIB, 8 * MIB as usize)).unwrap();
        let sent = (4 * MIB / 4096)..(1 << 47);
        let h = Handle::take_over(f.into(), opts(policy), std::slice::from_ref(&sent)).unwrap();
        // This file's writeback only: `flush` also returns late errors of
        // the other tests' files (a full filesystem's, run beside this).
        h.close_and_wait().unwrap();
        assert_eq!(cached_pages_in(&path, 4 * MIB, 8 * MIB), 0, "{policy}: pages sent left cached");
        assert_eq!(kept_or_reclaimed_in(&path, 0, 4 * MIB), 1024, "{policy}: the pages not sent stay");
        assert_pattern(&path, 18, 12 * MIB);
    }
}

/// Writeback a writer started itself, cut by a truncate inside it: what
/// the truncate left of it is still waited for, counted clean, and the
/// file finishes. Were the whole started range forgotten, its first pages
/// would stay in flight for good, counted against the device's mark, and
/// later writers of `lazy` and `inline` would stall at it for ever.
#[test]
fn a_truncate_inside_started_writeback_leaves_nothing_counted() {
    let s = scratch!("engine-truncate-started");
    for policy in Policy::ALL.into_iter().filter(|p| p.writer_starts_writeback()) {
        let path = s.path(&format!("t-{policy}"));
        let h = create(&path, policy);
        h.pwrite(&pattern(21, 0, 16 * 4096), 0).unwrap();
        h.truncate(3 * 4096 + 100).unwrap();
        settle(&h);
        assert_eq!(h.stats().dirty_now, 0, "{policy}: pages below the new end still counted dirty");
        assert_eq!(dontcache::orphaned_pages(), 0, "{policy}: pages were in flight with nothing to wait for them");
        h.close_and_wait().unwrap();
        assert_pattern(&path, 21, 3 * 4096 + 100);
    }
}

/// Bytes this thread has had read from a disk (`/proc/thread-self/io`): a
/// write into a page that is not cached reads the page first.
fn bytes_read_by_this_thread() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    let line = io.lines().find_map(|l| l.strip_prefix("read_bytes: ")).unwrap();
    line.trim().parse().unwrap()
}

/// A program that syncs each record it appends (a log, a database's
/// journal) writes its next record into the page the last one ended in:
/// that page is still cached then, not read back from the disk for every
/// record, and once the syncs stop, nothing of the file stays cached while
/// it is open. `kernel` is the kernel's own RWF_DONTCACHE, which drops each
/// page as its writeback ends and reads it back for the next record.
#[test]
fn an_appender_syncing_each_record_does_not_read_its_pages_back() {
    let s = scratch!("engine-sync-append");
    let records = 400u64;
    for policy in Policy::ALL.into_iter().filter(|&p| p != Policy::Kernel) {
        let path = s.path(&format!("log-{policy}"));
        let h = create(&path, policy);
        let read_before = bytes_read_by_this_thread();
        for i in 0..records {
            h.pwrite(&pattern(23, i * 100, 100), i * 100).unwrap();
            h.fdatasync().unwrap();
        }
        let read = bytes_read_by_this_thread() - read_before;
        // Dropped at each sync, a page is read back for every record (400
        // reads); dropped a moment after, only where this thread waited
        // longer than that between two records (beside two copies of this
        // suite on 8 threads each: 11-24).
        let pages_read = read / 4096;
        assert!(
            pages_read < records / 4,
            "{policy}: {pages_read} pages read back from the disk for {records} appended records"
        );
        let until = Instant::now() + Duration::from_secs(5);
        while cached_pages(&path) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(cached_pages(&path), 0, "{policy}: pages left cached after the syncs stopped, the file open");
        h.close().unwrap();
        assert_pattern(&path, 23, records * 100);
    }
}

/// Writes `frames` frames of 4,120 bytes from offset 32, as SQLite's
/// write-ahead log does (a 24-byte header and a 4 KiB page: no frame
/// fills a page alone), each second one synced, then reads them back, as
/// its checkpoint does.
fn write_and_read_back_frames(h: &Handle, frames: u64, round: u8) {
    const FRAME: u64 = 4120;
    for k in 0..frames {
        let off = 32 + k * FRAME;
        h.pwrite(&pattern(round, off, FRAME as usize), off).unwrap();
        if k % 2 == 1 {
            h.fdatasync().unwrap();
        }
    }
    let mut buf = vec![0u8; FRAME as usize];
    for k in 0..frames {
        let off = 32 + k * FRAME;
        assert_eq!(h.pread(&mut buf, off).unwrap(), buf.len());
        assert!(buf == pattern(round, off, FRAME as usize), "frame {k} of round {round}: other bytes than written");
    }
}

/// A small file the program writes over from its start and reads back
/// while it keeps it open (a database's write-ahead log) stays cached once
/// it touches again what the library dropped: dropped each round, its
/// pages were read back from the disk by every round's writes and reads.
/// Its close drops it; a file larger than 8 MiB is still dropped as it goes.
#[test]
fn a_small_file_written_over_stays_cached_while_open_and_a_large_one_does_not() {
    let s = scratch!("engine-working-file");
    let frames = 200;
    let pages = (32 + frames * 4120u64).div_ceil(4096);
    for policy in Policy::ALL.into_iter().filter(|&p| p != Policy::Kernel) {
        let path = s.path(&format!("wal-{policy}"));
        let h = create(&path, policy);
        let read_before = bytes_read_by_this_thread();
        for round in 0..4 {
            write_and_read_back_frames(&h, frames, 30 + round);
            // The lag of the drops after the syncs goes by.
            std::thread::sleep(Duration::from_millis(50));
        }
        // Dropped each round, the four rounds read the file back about six
        // times over (1,302 pages); kept, the first round's reads of it
        // (202 pages) and, where this thread waited longer than the sync's
        // lag between two frames, a page per sync (CI: 362 in all).
        let pages_read = (bytes_read_by_this_thread() - read_before) / 4096;
        assert!(
            pages_read <= 3 * pages,
            "{policy}: {pages_read} pages read back from the disk in 4 rounds over a file of {pages} pages"
        );
        h.close_and_wait().unwrap();
        assert_eq!(cached_pages(&path), 0, "{policy}: pages left cached after the close");

        // 12 MiB written twice, each pass synced: dropped as it goes.
        let path = s.path(&format!("large-{policy}"));
        let h = create(&path, policy);
        for pass in 0..2u8 {
            for off in (0..12 * MIB).step_by(MIB as usize) {
                h.pwrite(&pattern(40 + pass, off, MIB as usize), off).unwrap();
            }
            h.fdatasync().unwrap();
        }
        let until = Instant::now() + Duration::from_secs(5);
        while cached_pages(&path) > 64 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(cached_pages(&path) <= 64, "{policy}: a 12 MiB file written over stays cached while open");
        h.close_and_wait().unwrap();
        assert_pattern(&path, 41, 12 * MIB);
    }
}

/// Writes that Linux appends whatever offset they were given (a `pwrite`
/// to a file opened `O_APPEND`, `RWF_APPEND`) are tracked where they land,
/// at the end of the file: taken at their offset, 1,000 `pwrite`s of 5,000
/// bytes at 0 left the whole 4.8 MB file cached after its close.
#[test]
fn writes_that_append_whatever_their_offset_are_tracked_where_they_land() {
    let s = scratch!("engine-append-at-offset");
    for policy in Policy::ALL {
        for (how, open_flags, rw_flags) in [("o-append", libc::O_APPEND, 0), ("rwf-append", 0, libc::RWF_APPEND)] {
            let path = s.path(&format!("{how}-{policy}"));
            let flags = libc::O_CREAT | libc::O_TRUNC | libc::O_WRONLY | open_flags;
            let h = Handle::open(&path, flags, 0o644, opts(policy)).unwrap();
            for i in 0..1000 {
                let record = pattern(31, i * 5000, 5000);
                assert_eq!(h.pwritev(&[std::io::IoSlice::new(&record)], 0, rw_flags).unwrap(), 5000);
            }
            h.close_and_wait().unwrap();
            let left = cached_pages(&path);
            assert!(left <= 1, "{policy}, {how}: {left} pages of 1,221 left cached");
            assert_pattern(&path, 31, 5_000_000);
        }
    }
}

/// The kernel dirties a write's pages before the library counts them. The
/// flusher's sweep for writes the library does not see (every file the
/// shim binds) took such pages for unseen ones and the file for one to
/// write back and drop whole, which kept a small file written over from
/// staying cached (SQLite in WAL mode on a loaded machine read its log back
/// after every checkpoint). A write under way is left alone; a write the
/// library does not see is still found, by the next sweep. On a
/// filesystem of its own: another test's `syncfs` (the flusher's batches
/// of closed files) would write the pages back.
#[test]
fn a_sweep_leaves_a_write_under_way_alone() {
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileExt;
    let s = scratch!("engine-sweep-under-way");
    let fs = LoopFs::ext4(&s.dir, 16);
    let path = fs.mnt.join("f");
    let h = create(&path, Policy::Flusher);
    h.watch_unseen();
    let elsewhere = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let dirty_in = |off: u64| dc_sys::cachestat(h.as_fd(), off, MIB).unwrap().nr_dirty;
    {
        let _under_way = h.write_under_way();
        // The write's system call has dirtied its pages; its count is not
        // made yet. Three sweeps go by.
        elsewhere.write_all_at(&pattern(50, 0, MIB as usize), 0).unwrap();
        std::thread::sleep(Duration::from_millis(350));
        assert_eq!(dirty_in(0), MIB / 4096, "a sweep wrote back a write under way as one it does not see");
        h.note_write(0, MIB);
    }
    // The control: a write the library does not see is found and written
    // back, whatever its size.
    elsewhere.write_all_at(&pattern(51, MIB, MIB as usize), MIB).unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while dirty_in(MIB) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(dirty_in(MIB), 0, "no sweep found a write the library does not see within 5 s");
    h.close_and_wait().unwrap();
    assert_eq!(cached_pages(&path), 0, "pages left cached after the close");
}

/// A file on a filesystem of its own (nothing writes its pages back while
/// they are looked at), and a device of the test's own whose flusher
/// nothing wakes: the sweep is called by the test.
fn file_to_sweep(s: &Scratch) -> (LoopFs, std::fs::File, Arc<dontcache::device::Device>) {
    use std::os::fd::AsRawFd;
    let fs = LoopFs::ext4(&s.dir, 16);
    let path = fs.mnt.join("f");
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
    let stat = dc_sys::fstat(file.as_raw_fd()).unwrap();
    let device = dontcache::device::Device::new(stat.dev, dontcache::Submit::Loop, true, None);
    (fs, file, device)
}

/// An open of `file` for writing, as the library binds one.
fn open_to_sweep(file: &std::fs::File, device: &Arc<dontcache::device::Device>) -> Arc<dontcache::file::FileState> {
    use std::os::fd::AsRawFd;
    let stat = dc_sys::fstat(file.as_raw_fd()).unwrap();
    let fd = dontcache::own::duplicate(file.as_raw_fd()).unwrap();
    let described =
        dontcache::Described { stat, flags: libc::O_RDWR, cached_pages: None, opened_as: None, made: false };
    Arc::new(dontcache::file::FileState::new(fd, Policy::Flusher, &described, device, dontcache::file::Bind::Writable))
}

/// The sweep itself: two opens of one file, each counting its own writes,
/// are swept together (swept alone, one takes the other's for writes it
/// does not see); a write under way is left alone; a write the library
/// does not see is found, for every writable open.
#[test]
fn a_sweep_counts_every_open_of_a_file() {
    use dontcache::file::FileState;
    use std::os::unix::fs::FileExt;
    let s = scratch!("engine-sweep-opens");
    let (_fs, file, device) = file_to_sweep(&s);
    let (a, b) = (open_to_sweep(&file, &device), open_to_sweep(&file, &device));
    let write = |off: u64| file.write_all_at(&pattern(52, off, MIB as usize), off).unwrap();
    write(0);
    a.dirtied(&device, 0, MIB);
    write(MIB);
    b.dirtied(&device, MIB, MIB);
    let both = [a.clone(), b.clone()];
    assert!(FileState::sweep_opens(&both).is_empty(), "the opens' own writes taken for unseen ones");
    {
        let _under_way = a.write_under_way();
        write(2 * MIB);
        assert!(FileState::sweep_opens(&both).is_empty(), "a write under way taken for an unseen one");
        a.dirtied(&device, 2 * MIB, MIB);
    }
    assert!(FileState::sweep_opens(&both).is_empty(), "a counted write taken for an unseen one");
    // The control: swept alone, an open takes the other's writes for ones
    // it does not see.
    assert_eq!(FileState::sweep_opens(std::slice::from_ref(&b)).len(), 1, "the control");
    write(3 * MIB);
    assert_eq!(FileState::sweep_opens(&both).len(), 2, "a write the library does not see, not found");
}

/// The library's counted pages written back by someone else (a `syncfs`)
/// and as many pages written by a path it does not see: compared over the
/// whole file the two hid each other, and the unseen pages stayed dirty
/// and cached until the library's own count came down.
#[test]
fn a_sweep_finds_unseen_writes_after_a_sync() {
    use dontcache::file::FileState;
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileExt;
    let s = scratch!("engine-sweep-after-sync");
    let (_fs, file, device) = file_to_sweep(&s);
    let open = open_to_sweep(&file, &device);
    file.write_all_at(&pattern(55, 0, MIB as usize), 0).unwrap();
    open.dirtied(&device, 0, MIB);
    dc_sys::syncfs(file.as_fd()).unwrap();
    assert!(
        FileState::sweep_opens(std::slice::from_ref(&open)).is_empty(),
        "counted pages, clean, taken for unseen ones"
    );
    file.write_all_at(&pattern(55, 2 * MIB, MIB as usize), 2 * MIB).unwrap();
    assert_eq!(
        FileState::sweep_opens(std::slice::from_ref(&open)).len(),
        1,
        "a write the library does not see, not found"
    );
}

/// The same between two of the library's own ranges: compared by count
/// over the hull of its pages, the library's pages a sync wrote back hid
/// the unseen ones inside it.
#[test]
fn a_sweep_finds_unseen_writes_between_the_librarys_own_after_a_sync() {
    use dontcache::file::FileState;
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileExt;
    let s = scratch!("engine-sweep-between");
    let (_fs, file, device) = file_to_sweep(&s);
    let open = open_to_sweep(&file, &device);
    for off in [0, 2 * MIB] {
        file.write_all_at(&pattern(56, off, MIB as usize), off).unwrap();
        open.dirtied(&device, off, MIB);
    }
    dc_sys::syncfs(file.as_fd()).unwrap();
    assert!(
        FileState::sweep_opens(std::slice::from_ref(&open)).is_empty(),
        "counted pages, clean, taken for unseen ones"
    );
    // Fewer pages than the library counts, between its two ranges.
    file.write_all_at(&pattern(56, MIB, (MIB / 2) as usize), MIB).unwrap();
    assert_eq!(
        FileState::sweep_opens(std::slice::from_ref(&open)).len(),
        1,
        "a write the library does not see, between its own, not found"
    );
}

/// A file created on a filesystem of its own (no other test's `syncfs`
/// writes its pages back) and opened a second time with `flags`, both
/// opens swept for unseen I/O as the shim's are.
fn two_swept_opens(s: &Scratch, flags: i32) -> (LoopFs, std::path::PathBuf, Handle, Handle) {
    let fs = LoopFs::ext4(&s.dir, 16);
    let path = fs.mnt.join("f");
    let first = create(&path, Policy::Flusher);
    let second = Handle::open(&path, flags, 0, opts(Policy::Flusher)).unwrap();
    first.watch_unseen();
    second.watch_unseen();
    (fs, path, first, second)
}

/// A small file open twice at a time is one the program works in (a
/// database's log: one connection writes and syncs, another reads): kept
/// cached while open, where a sync dropped what the other then read back
/// from the disk. One of the opens closing leaves the other's pages alone:
/// its own count against the file's dirty pages took the other's writes
/// for ones the library does not see, and the close wrote back and dropped
/// the whole file under the other open. The last close leaves nothing
/// cached. On a filesystem of its own, as above.
#[test]
fn a_small_file_open_twice_is_kept_until_its_last_close() {
    let s = scratch!("engine-close-one-open");
    let (_fs, path, a, b) = two_swept_opens(&s, libc::O_RDWR);
    a.pwrite(&pattern(53, 0, MIB as usize), 0).unwrap();
    a.fdatasync().unwrap();
    // The flusher drops what a sync wrote back, after a lag.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(kept_or_reclaimed_in(&path, 0, MIB), MIB / 4096, "a sync dropped pages of a file open twice");
    b.pwrite(&pattern(53, MIB, MIB as usize), MIB).unwrap();
    a.close_and_wait().unwrap();
    assert_eq!(kept_or_reclaimed_in(&path, MIB, MIB), MIB / 4096, "the first close dropped the other open's pages");
    b.close_and_wait().unwrap();
    assert_eq!(cached_pages(&path), 0, "pages left cached after the last close");
    assert_pattern(&path, 53, 2 * MIB);
}

/// A close that finds writes the library does not see writes back and
/// drops the whole file, also while another open of it, only for reading,
/// stays (that open's sweeps never write back), and also where someone
/// else wrote back the pages the library counted (a `sync` here, as
/// other tests' or the kernel's background writeback did).
#[test]
fn a_close_finds_unseen_writes_beside_a_reader() {
    use std::os::unix::fs::FileExt;
    let s = scratch!("engine-close-unseen-beside-reader");
    let (_fs, path, a, reader) = two_swept_opens(&s, libc::O_RDONLY);
    let elsewhere = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    a.pwrite(&pattern(54, 0, MIB as usize), 0).unwrap();
    dc_sys::syncfs(std::os::fd::AsFd::as_fd(&elsewhere)).unwrap();
    elsewhere.write_all_at(&pattern(54, 2 * MIB, MIB as usize), 2 * MIB).unwrap();
    a.close_and_wait().unwrap();
    assert_eq!(cached_pages_in(&path, 2 * MIB, MIB), 0, "a write the library does not see left cached at the close");
    reader.close_and_wait().unwrap();
    assert_eq!(cached_pages(&path), 0, "pages left cached after the last close");
}

/// A watched file's clean pages at the bind stay (cached before, as far as
/// the watcher can tell), unless the file was made since the watch began:
/// then they are the watched process's writes that someone else's `sync`
/// wrote back before the watcher got to the file, and go.
#[test]
fn a_watched_file_made_since_the_watch_is_dropped_whole() {
    use dontcache::Watched;
    use std::os::fd::IntoRawFd;
    let s = scratch!("engine-watched-made");
    for made_since in [false, true] {
        let path = s.path(&format!("f{made_since}"));
        std::fs::write(&path, pattern(56, 0, MIB as usize)).unwrap();
        std::fs::File::open(&path).unwrap().sync_all().unwrap();
        assert_eq!(cached_pages(&path), MIB / 4096, "the written pages are cached: the test tests nothing");
        let fd = std::fs::File::open(&path).unwrap().into_raw_fd();
        let h = Handle::watch(fd, opts(Policy::Flusher), Watched { made_since }).unwrap();
        h.close_and_wait().unwrap();
        if made_since {
            assert_eq!(cached_pages(&path), 0, "a file made since the watch: its pages left cached");
        } else {
            // What the machine's own reclaim took counts as kept: the
            // library did not drop it.
            let kept = kept_or_reclaimed_in(&path, 0, MIB);
            assert_eq!(kept, MIB / 4096, "a file from before the watch: its cached pages dropped (the control)");
        }
        assert_pattern(&path, 56, MIB);
    }
}
