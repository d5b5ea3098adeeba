//! Drops the kernel refuses: the library gives them up instead of waiting
//! for them. Alone in its process, so `flush` waits for this test's files
//! only.

mod common;
use common::*;

use std::os::fd::AsFd;
use std::time::Duration;

use dontcache::{Handle, Policy};

/// Pages cached when a file is bound are never dropped; if they leave the
/// cache and a read brings them back, readahead may put them in one large
/// folio with pages of the library's, which the kernel drops only whole.
/// That folio stays, and nothing waits for it for long: a `sort`
/// temporary file, read back while its writer's pages were still cached,
/// made the program's exit wait for such a drop for good.
#[test]
fn a_folio_shared_with_foreign_pages_holds_nobody() {
    let s = scratch!("engine-straddle");
    let path = s.path("f");
    let size = 7_448_344u64;
    std::fs::write(&path, pattern(7, 0, size as usize)).unwrap();
    drop_cache_of(&path);
    // Someone else's pages: the file's last 10, read without readahead.
    let theirs = std::fs::File::open(&path).unwrap();
    dc_sys::fadvise(theirs.as_fd(), 0, 0, dc_sys::Advice::Random).unwrap();
    let tail = size - size % 4096 - 9 * 4096;
    let mut buf = vec![0u8; (size - tail) as usize];
    std::os::unix::fs::FileExt::read_exact_at(&theirs, &mut buf, tail).unwrap();
    assert_eq!(cached_pages_in(&path, 0, tail), 0, "the control: nothing before their pages cached");

    // Bound while their pages are cached; read as stdio reads (unseen, the
    // close hands the file to the flusher); their pages come back inside
    // the library's readahead.
    let h = Handle::open(&path, libc::O_RDONLY, 0, opts(Policy::Flusher)).unwrap();
    h.watch_unseen();
    drop_cache_of(&path);
    dc_sys::fadvise(h.as_fd(), 0, 0, dc_sys::Advice::Sequential).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0;
    while off < size {
        let n = h.pread(&mut buf, off).unwrap();
        assert_eq!(&buf[..n], &pattern(7, off, n)[..], "bytes at {off}");
        off += n as u64;
    }
    // A writer's batches are on the disk when the drop is refused.
    let w = Handle::open(&s.path("w"), libc::O_CREAT | libc::O_RDWR, 0o644, opts(Policy::Flusher)).unwrap();
    for i in 0..64u64 {
        w.pwrite(&pattern(8, i << 20, 1 << 20), i << 20).unwrap();
    }
    h.close().unwrap();

    // Refused drops are retried for about a second after the flusher's
    // last batch, then given up; a waiter's own kicks must not prolong that.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(dontcache::flush()).unwrap());
    let flushed = rx.recv_timeout(Duration::from_secs(10));
    assert!(flushed.is_ok(), "flush still waits after 10 s for a drop the kernel refuses");
    w.close().unwrap();
    assert_eq!(cached_pages_in(&path, 0, tail - (2 << 20)), 0, "the library's pages away from theirs are dropped");
}
