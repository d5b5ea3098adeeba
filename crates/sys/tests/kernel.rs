//! Real-kernel checks of the wrappers: these run on the machine's own
//! filesystem (ext4 on this project's CI) and fail if the interface misbehaves.

use dc_sys::*;
use std::fs::OpenOptions;
use std::os::fd::AsFd;
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    // target/ lives on the same filesystem as the checkout, unlike /tmp which may be tmpfs.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    dir.join(format!("{name}-{}", std::process::id()))
}

#[test]
fn cachestat_sees_buffered_write_and_dontneed() {
    let p = scratch("cachestat");
    let f = OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&p).unwrap();
    let data = vec![0xa5u8; 1 << 20];
    assert_eq!(pwrite(f.as_fd(), &data, 0).unwrap(), data.len());
    let pages = (data.len() / page_size()) as u64;
    let cs = cachestat(f.as_fd(), 0, 0).unwrap();
    assert_eq!(cs.nr_cache, pages, "a fresh buffered write is fully cached: {cs:?}");
    assert_eq!(cs.nr_dirty, pages, "and all of it dirty: {cs:?}");
    f.sync_all().unwrap();
    fadvise(f.as_fd(), 0, 0, Advice::DontNeed).unwrap();
    let cs = cachestat(f.as_fd(), 0, 0).unwrap();
    assert_eq!((cs.nr_cache, cs.nr_dirty), (0, 0), "clean pages are dropped by DONTNEED: {cs:?}");
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn dontcache_write_leaves_nothing_cached_where_supported() {
    let p = scratch("dontcache");
    let f = OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&p).unwrap();
    let data = vec![0x5au8; 1 << 20];
    match pwritev2(f.as_fd(), &data, 0, RWF_DONTCACHE) {
        Ok(n) => {
            assert_eq!(n, data.len());
            // The inline-flush kernels start writeback and drop pages on completion;
            // wait for writeback so the drop has happened.
            f.sync_all().unwrap();
            let cs = cachestat(f.as_fd(), 0, 0).unwrap();
            assert_eq!(cs.nr_dirty, 0, "{cs:?}");
            assert!(cs.nr_cache <= 16, "RWF_DONTCACHE left {} of 256 pages cached", cs.nr_cache);
            let mut back = vec![0u8; data.len()];
            assert_eq!(preadv2(f.as_fd(), &mut back, 0, RWF_DONTCACHE).unwrap(), data.len());
            assert!(back == data);
        }
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "unexpected error {e}"),
    }
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn rwf_atomic_is_not_dontcache() {
    // fio 3.33 sends 0x40 for uncached=1; on >= 6.11 that is RWF_ATOMIC, which a
    // 1 MiB buffered write cannot satisfy. Pin the difference so nobody "fixes" it.
    assert_eq!(RWF_DONTCACHE, 0x80);
    let p = scratch("atomic");
    let f = OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&p).unwrap();
    let err = pwritev2(f.as_fd(), &vec![0u8; 1 << 20], 0, 0x40).unwrap_err();
    assert!(
        matches!(err.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)),
        "0x40 should be refused here, got {err}"
    );
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn thread_cpu_advances_with_work() {
    // Spins until 20 ms of CPU are counted, not for a set wall time: on a
    // busy machine 50 ms of wall time gave the thread 16 ms of CPU.
    let want = std::time::Duration::from_millis(20);
    let before = thread_cpu().unwrap();
    let mut x = 0u64;
    let start = std::time::Instant::now();
    let mut d = thread_cpu().unwrap().since(&before);
    while d.user + d.system < want && start.elapsed() < std::time::Duration::from_secs(10) {
        for _ in 0..100_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        d = thread_cpu().unwrap().since(&before);
    }
    std::hint::black_box(x);
    assert!(d.user + d.system >= want, "{d:?} after {:?} of spinning", start.elapsed());
}
