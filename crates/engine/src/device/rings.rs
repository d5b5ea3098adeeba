//! The flusher's io_uring rings: one that starts a batch's writeback
//! (`Submit::Uring`), one on which io-wq waits for it (`WaitRing`). Both
//! live on the flusher thread.

use std::io;
use std::ops::Range;
use std::sync::Arc;

use io_uring::{opcode, types, IoUring};

use super::flusher::COMPLETE_PIECES;
use super::Device;
use crate::file::{page_size, FileState};
use crate::wakeup::Wakeup;

thread_local! {
    /// The flusher thread's ring, created on its first use.
    pub(super) static FLUSH_RING: std::cell::RefCell<Option<Ring>> = std::cell::RefCell::new(high_ring(256));
    /// The flusher thread's ring for waits (`Awaited`), made on its first wait.
    pub(super) static WAIT_RING: std::cell::RefCell<WaitRing> = const { std::cell::RefCell::new(WaitRing::NotYet) };
}

/// An engine thread's ring. Its descriptor is the library's for the
/// process's life (registered, see `own.rs`): the ring is never closed,
/// not even when it failed and is given up, so its number can never be
/// closed twice, the second time under whoever reused it.
pub(super) struct Ring(std::mem::ManuallyDrop<IoUring>);

impl std::ops::Deref for Ring {
    type Target = IoUring;
    fn deref(&self) -> &IoUring {
        &self.0
    }
}

impl std::ops::DerefMut for Ring {
    fn deref_mut(&mut self) -> &mut IoUring {
        &mut self.0
    }
}

/// A ring whose descriptor lives with the engine's other descriptors, high
/// in the range (see `own.rs`); `None` without io_uring.
fn high_ring(entries: u32) -> Option<Ring> {
    crate::own::making(|| made_ring(entries))
}

fn made_ring(entries: u32) -> Option<Ring> {
    let ring = IoUring::new(entries).ok()?;
    let params = ring.params().clone();
    let Ok(high) = crate::own::duplicate(std::os::fd::AsRawFd::as_raw_fd(&ring)) else {
        return Some(Ring(std::mem::ManuallyDrop::new(ring)));
    };
    drop(ring);
    // SAFETY: `high` is the only descriptor of that ring left, given up
    // here to the ring, and `params` are what the kernel filled in when it
    // made the ring. Rings are made on the flusher thread only.
    let ring = high.give_for_life(|fd| unsafe { IoUring::from_fd(fd, params) }).ok()?;
    Some(Ring(std::mem::ManuallyDrop::new(ring)))
}

/// The flusher's wait ring; without one (a kernel or sandbox without
/// io_uring, or a ring that failed) the flusher waits itself.
pub(super) enum WaitRing {
    NotYet,
    /// `signals`: its completions signal the flusher's eventfd
    /// (`Wakeup`); otherwise the flusher looks for them every `AWAIT_POLL`.
    Ready {
        ring: Box<Ring>,
        signals: bool,
    },
    Gone,
}

impl WaitRing {
    fn new(wakeup: &Wakeup) -> WaitRing {
        let Some(ring) = high_ring(COMPLETE_PIECES as u32) else { return WaitRing::Gone };
        let signals = wakeup
            .signalled_by_rings()
            .is_some_and(|fd| ring.submitter().register_eventfd(std::os::fd::AsRawFd::as_raw_fd(&fd)).is_ok());
        WaitRing::Ready { ring: Box::new(ring), signals }
    }

    /// Makes the flusher's wait ring, unless made (or given up) already.
    pub(super) fn prepare(wakeup: &Wakeup) {
        WAIT_RING.with(|r| {
            let mut r = r.borrow_mut();
            if matches!(*r, WaitRing::NotYet) {
                *r = WaitRing::new(wakeup);
            }
        });
    }

    pub(super) fn ring(&mut self) -> Option<&mut IoUring> {
        match self {
            WaitRing::Ready { ring, .. } => Some(ring),
            _ => None,
        }
    }

    /// Whether completions wait to be reaped (no system call: the
    /// completion queue is shared memory).
    pub(super) fn has_completions(&mut self) -> bool {
        self.ring().is_some_and(|ring| !ring.completion().is_empty())
    }

    pub(super) fn signals(&self) -> bool {
        matches!(self, WaitRing::Ready { signals: true, .. })
    }
}

/// Queues `IORING_OP_SYNC_FILE_RANGE(WRITE)` for every hull and submits them
/// together; errors are latched on their files. Returns the ring, or `None`
/// if it broke (the caller then falls back to the loop for good).
pub(super) fn submit_uring(mut ring: Ring, device: &Device, starts: &[(Arc<FileState>, Range<u64>)]) -> Option<Ring> {
    // The SQE length is 32 bits: split larger ranges.
    const CHUNK: u64 = 1 << 30;
    let ps = page_size();
    let split = starts.iter().enumerate().flat_map(|(i, (_, r))| {
        let (off, len) = (r.start * ps, (r.end - r.start) * ps);
        (0..len.div_ceil(CHUNK)).map(move |k| (i, off + k * CHUNK, (len - k * CHUNK).min(CHUNK)))
    });
    let mut in_flight = 0usize;
    for (i, off, len) in split {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&starts[i].0.cache_fd());
        let entry = opcode::SyncFileRange::new(types::Fd(fd), len as u32)
            .offset(off)
            .flags(libc::SYNC_FILE_RANGE_WRITE)
            .build()
            .user_data(i as u64);
        // SAFETY: the SQE references no memory; the fd outlives the batch.
        while unsafe { ring.submission().push(&entry) }.is_err() {
            in_flight -= reap(&mut ring, device, starts, in_flight.min(1)).ok()?;
        }
        in_flight += 1;
    }
    while in_flight > 0 {
        in_flight -= reap(&mut ring, device, starts, in_flight).ok()?;
    }
    Some(ring)
}

/// Submits what is queued, waits for `want` completions and latches errors.
fn reap(
    ring: &mut IoUring,
    device: &Device,
    starts: &[(Arc<FileState>, Range<u64>)],
    want: usize,
) -> io::Result<usize> {
    match ring.submit_and_wait(want) {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
        Err(e) => return Err(e),
    }
    let mut n = 0;
    for cqe in ring.completion() {
        if cqe.result() < 0 {
            starts[cqe.user_data() as usize].0.latch(-cqe.result(), device);
        }
        n += 1;
    }
    Ok(n)
}
