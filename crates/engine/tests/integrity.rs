//! Byte-exact integrity of every policy: sequential, random, unaligned and
//! 32-thread concurrent writes, read back through the kernel.

mod common;
use common::*;

use std::sync::Arc;

use dontcache::{Handle, Policy};

const MIB: u64 = 1 << 20;

fn create(path: &std::path::Path, policy: Policy) -> Handle {
    Handle::open(path, libc::O_CREAT | libc::O_TRUNC | libc::O_RDWR, 0o644, opts(policy)).unwrap()
}

#[test]
fn sequential_writes() {
    let s = scratch!("engine-seq");
    for policy in Policy::ALL {
        let path = s.path(&format!("seq-{policy}"));
        let h = create(&path, policy);
        let len = 48 * MIB;
        for off in (0..len).step_by(MIB as usize) {
            assert_eq!(h.pwrite(&pattern(1, off, MIB as usize), off).unwrap(), MIB as usize);
        }
        let st = h.stats();
        assert_eq!(st.bytes_written, len, "{policy}");
        h.close().unwrap();
        assert_pattern(&path, 1, len);
    }
}

#[test]
fn random_writes_cover_every_block_once() {
    let s = scratch!("engine-rand");
    for policy in Policy::ALL {
        let path = s.path(&format!("rand-{policy}"));
        let h = create(&path, policy);
        let bs = 4096u64;
        let blocks = 4096u64; // 16 MiB
                              // A full-period LCG over the block numbers: each block exactly once.
        let mut b = 0u64;
        for _ in 0..blocks {
            b = (b * 1_103_515_245 + 12_345) % blocks;
            let off = b * bs;
            h.pwrite(&pattern(2, off, bs as usize), off).unwrap();
        }
        h.close().unwrap();
        assert_pattern(&path, 2, blocks * bs);
    }
}

#[test]
fn unaligned_writes_and_the_file_position() {
    let s = scratch!("engine-unaligned");
    for policy in Policy::ALL {
        let path = s.path(&format!("odd-{policy}"));
        let h = create(&path, policy);
        // Odd lengths through write(2) at the file position...
        let mut off = 0u64;
        for i in 0..3000u64 {
            let n = (i * 7919) % 9000 + 1;
            assert_eq!(h.write(&pattern(3, off, n as usize)).unwrap(), n as usize);
            off += n;
        }
        // ...then odd-sized overwrites at odd offsets, with pwritev.
        for i in 0..500u64 {
            let at = (i * 104_729) % (off - 5000);
            let n = 1 + (i * 31) % 4999;
            let data = pattern(3, at, n as usize);
            let (a, b) = data.split_at(n as usize / 3);
            let iov = [std::io::IoSlice::new(a), std::io::IoSlice::new(b)];
            assert_eq!(h.pwritev(&iov, at, 0).unwrap(), n as usize);
        }
        h.fsync().unwrap();
        h.close().unwrap();
        assert_pattern(&path, 3, off);
    }
}

#[test]
fn thirty_two_threads_share_one_handle() {
    let s = scratch!("engine-threads");
    for policy in Policy::ALL {
        let path = s.path(&format!("mt-{policy}"));
        let h = Arc::new(create(&path, policy));
        let per_thread = 2 * MIB;
        let threads: Vec<_> = (0..32u64)
            .map(|t| {
                let h = h.clone();
                std::thread::spawn(move || {
                    // Interleaved 64 KiB chunks: neighbours write adjacent pages.
                    for i in 0..per_thread / (64 << 10) {
                        let off = (i * 32 + t) * (64 << 10);
                        h.pwrite(&pattern(4, off, 64 << 10), off).unwrap();
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let h = Arc::into_inner(h).unwrap();
        let st = h.stats();
        let writes = 32 * per_thread / (64 << 10);
        match policy {
            Policy::Kernel => {}
            // A lazy write that starts writeback as RWF_DONTCACHE kicks no
            // flusher (behaviour.rs).
            Policy::Lazy => assert!(st.kicks + st.coalesced_kicks <= writes, "{policy}: at most one kick per write"),
            _ => assert_eq!(st.kicks + st.coalesced_kicks, writes, "{policy}: one kick per write"),
        }
        h.close().unwrap();
        assert_pattern(&path, 4, 32 * per_thread);
    }
}

#[test]
fn reads_return_what_was_written() {
    let s = scratch!("engine-read");
    let path = s.path("r");
    std::fs::write(&path, pattern(5, 0, 8 << 20)).unwrap();
    drop_cache_of(&path);
    let h = Handle::open(&path, libc::O_RDONLY, 0, opts(Policy::Flusher)).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut got = Vec::new();
    loop {
        let n = h.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, pattern(5, 0, 8 << 20));
    assert_eq!(h.stats().bytes_read, 8 << 20);
    h.close().unwrap();
    assert_eq!(cached_pages(&path), 0, "drop-behind reads leave nothing of an uncached file");
}
