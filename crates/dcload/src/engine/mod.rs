//! I/O engines: how one job instance's reads and writes reach the kernel.
//!
//! The worker loop is the same for every engine: fill free slots, submit,
//! reap. A synchronous engine does its I/O inside [`Engine::start`] and has
//! exactly one slot; io_uring queues SQEs in `start`, submits them together in
//! `submit` and returns CQEs from `reap`. The engine owns the I/O buffers so
//! their addresses stay fixed while the kernel uses them.

mod e4defrag;
mod falloc;
mod fileop;
mod libaio;
mod mmap;
mod nfs;
mod null;
mod page_fault;
mod posixaio;
mod sync;
mod truncate;
mod uring;

pub use e4defrag::E4defragEngine;
pub use falloc::FallocEngine;
pub use fileop::FileOpEngine;
pub use libaio::LibaioEngine;
pub use mmap::MmapEngine;
pub use nfs::{NfsEngine, NfsTarget};
pub use null::NullEngine;
pub use page_fault::PageFaultEngine;
pub use posixaio::PosixAioEngine;
pub use sync::SyncEngine;
pub use truncate::TruncateEngine;
pub use uring::UringEngine;

use dc_sys::AlignedBuf;
use dontcache::{Handle, Options, Policy};
use std::io;
use std::os::fd::AsRawFd;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Read,
    Write,
    /// Discards the range (fio's trim): falloc punches a hole, null
    /// completes it; the other engines refuse it.
    Trim,
}

impl Dir {
    /// fio's direction number in interval logs, and the index of the
    /// direction's statistics.
    pub fn log_code(self) -> u8 {
        match self {
            Dir::Read => 0,
            Dir::Write => 1,
            Dir::Trim => 2,
        }
    }

    /// fio's name of the direction (iologs, messages).
    pub fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
            Dir::Trim => "trim",
        }
    }
}

/// The `RWF_*` flags an engine's reads and writes carry: `RWF_DONTCACHE`
/// on both (`uncached=1`, the `kernel` policy), `RWF_ATOMIC` on writes
/// (`atomic=1`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RwFlags {
    pub read: i32,
    pub write: i32,
}

impl RwFlags {
    /// The same flags on reads and writes.
    pub fn both(flags: i32) -> RwFlags {
        RwFlags { read: flags, write: flags }
    }

    pub fn of(self, dir: Dir) -> i32 {
        if dir == Dir::Write {
            self.write
        } else {
            self.read
        }
    }
}

/// What an engine that cannot trim returns for a trim (the job check keeps
/// trims off such engines; this is the backstop).
pub(crate) fn no_trim() -> io::Error {
    io::Error::from_raw_os_error(libc::EOPNOTSUPP)
}

/// One I/O to issue from a slot's buffer.
#[derive(Debug, Clone, Copy)]
pub struct Op {
    pub dir: Dir,
    pub offset: u64,
    pub len: u32,
    /// The I/O's priority (`class << 13 | hint << 3 | level`; 0: none):
    /// io_uring and libaio carry it, the others run at their thread's.
    pub prio: u16,
}

/// A finished I/O: the slot it used and the kernel's result (bytes or error).
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub slot: usize,
    pub result: Result<u32, i32>,
}

pub trait Engine {
    /// Slots (I/Os in flight at most).
    fn depth(&self) -> usize;
    /// True when `start` performs the I/O itself (no submission latency).
    fn is_sync(&self) -> bool;
    /// The buffer of `slot`, to fill before a write or check after a read.
    fn buffer(&mut self, slot: usize) -> &mut [u8];
    /// Begin `op` on `slot`'s buffer.
    fn start(&mut self, slot: usize, op: Op) -> io::Result<()>;
    /// Hand everything started since the last call to the kernel.
    fn submit(&mut self) -> io::Result<()>;
    /// Wait for at least `min` completions and append all available ones.
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()>;

    /// After the last I/O: settle whatever the engine keeps in flight and
    /// report an error it kept (the write-behind engine's background
    /// writeback). Counted in the runtime.
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// Settles the current file and moves on to `file` (nrfiles: the next
    /// new file). Only the synchronous engines can; the loop has no I/O in
    /// flight when it calls this.
    fn retarget(&mut self, _file: std::fs::File) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }
}

/// The buffers of an engine with several slots: one region, slot `i` at
/// `i * bs` (as fio lays them out: it decides how many segments an O_DIRECT
/// request needs), in place while the kernel uses them.
pub struct SlotBuffers {
    region: AlignedBuf,
    bs: usize,
}

impl SlotBuffers {
    /// `region` holds the slots' buffers of `bs` bytes back to back.
    pub fn new(region: AlignedBuf, bs: usize) -> SlotBuffers {
        SlotBuffers { region, bs }
    }

    pub fn get(&mut self, slot: usize) -> &mut [u8] {
        &mut self.region.as_mut_slice()[slot * self.bs..(slot + 1) * self.bs]
    }
}

/// An engine that does each I/O in the caller's thread when it is started:
/// one slot, no queue, no submission latency. [`Immediate`] gives it the
/// rest of [`Engine`].
pub trait OneAtATime {
    /// The one slot's buffer.
    fn buffer(&mut self) -> &mut [u8];
    /// Does `op` now: the bytes it moved, or the errno.
    fn perform(&mut self, op: Op) -> Result<u32, i32>;
    /// As [`Engine::finish`].
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// As [`Engine::retarget`].
    fn retarget(&mut self, _file: std::fs::File) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }
}

/// A [`OneAtATime`] engine as an [`Engine`]: `start` performs the I/O and
/// `reap` hands its completion back.
pub struct Immediate<T> {
    inner: T,
    done: Option<Completion>,
}

impl<T: OneAtATime> Immediate<T> {
    pub fn new(inner: T) -> Immediate<T> {
        Immediate { inner, done: None }
    }
}

impl<T: OneAtATime> Engine for Immediate<T> {
    fn depth(&self) -> usize {
        1
    }

    fn is_sync(&self) -> bool {
        true
    }

    fn buffer(&mut self, _slot: usize) -> &mut [u8] {
        self.inner.buffer()
    }

    fn start(&mut self, slot: usize, op: Op) -> io::Result<()> {
        self.done = Some(Completion { slot, result: self.inner.perform(op) });
        Ok(())
    }

    fn submit(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn reap(&mut self, _min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        out.extend(self.done.take());
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.inner.finish()
    }

    fn retarget(&mut self, file: std::fs::File) -> io::Result<()> {
        self.inner.retarget(file)
    }
}

/// A libdontcache handle of `policy` on an asynchronous engine's file, to
/// report its completions to (`DONTCACHE_HIGH_WATER` and `DONTCACHE_SUBMIT`
/// apply). The engine's I/O carries the handle's `rw_flags` (the `kernel`
/// policy's RWF_DONTCACHE), and each read its `read_flags` at the time
/// (RWF_DONTCACHE once the reads are scattered: the kernel drops them).
///
/// Up to `unreported` bytes (the engine's queue, depth x block size) are
/// dirty before the library hears of them, so the handle's mark is lowered
/// by as much, to no less than a quarter of it: the library's count and the
/// queue together stay under the mark, as a synchronous writer's count
/// does. At the full mark one 1 MiB stream at depth 16 peaked at 79 MiB
/// dirty on a 64 MiB mark.
fn write_behind_handle(file: &std::fs::File, policy: Policy, unreported: u64) -> io::Result<Handle> {
    let env = Options::from_env().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let high_water = env.high_water.saturating_sub(unreported).max(env.high_water / 4);
    Handle::adopt(file.as_raw_fd(), Options { policy, high_water, ..env })
}

/// What an engine may have written and not yet reported: a full queue.
fn queued_bytes(bs: usize, depth: usize) -> u64 {
    (bs as u64).saturating_mul(depth as u64)
}

/// Tells libdontcache of an I/O an asynchronous engine completed
/// (`writebehind=` on io_uring or libaio), as a program doing its own
/// asynchronous I/O would. A writeback error the library kept ends a write,
/// as it would end the synchronous engines' next write.
fn note_completion(h: &Handle, op: Op, result: Result<u32, i32>) -> Result<u32, i32> {
    let Ok(n) = result else { return result };
    match op.dir {
        Dir::Write => {
            h.note_write(op.offset, u64::from(n));
            if let Some(e) = h.take_error() {
                return Err(e.raw_os_error().unwrap_or(libc::EIO));
            }
        }
        Dir::Read => h.note_read(op.offset, u64::from(n)),
        Dir::Trim => {}
    }
    result
}

/// Hands an asynchronous engine's handle back (the engine's file owns the
/// descriptor) and waits for its writeback, reporting an error it kept.
fn finish_write_behind(handle: &mut Option<Handle>) -> io::Result<()> {
    match handle.take() {
        Some(h) => {
            let (_, r, pending) = h.release();
            r.and(pending.wait())
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark_for(unreported: u64) -> u64 {
        let dir = dc_testsupport::Scratch::new(&std::env::temp_dir().to_string_lossy(), "dcload-mark");
        let file = std::fs::File::create(dir.path("f")).expect("a file");
        let h = write_behind_handle(&file, Policy::Flusher, unreported).expect("a handle");
        let mark = h.options().high_water;
        let _ = h.release();
        mark
    }

    #[test]
    fn an_asynchronous_engines_queue_comes_off_its_handles_mark() {
        if std::env::var_os("DONTCACHE_HIGH_WATER").is_some() {
            eprintln!("SKIPPED: DONTCACHE_HIGH_WATER is set, and these figures are for the default mark");
            return;
        }
        let mark = Options::default().high_water;
        assert_eq!(mark_for(0), mark, "a synchronous engine reports every write at once");
        assert_eq!(mark_for(queued_bytes(1 << 20, 16)), mark - (16 << 20));
        assert_eq!(mark_for(queued_bytes(1 << 20, 256)), mark / 4, "never below a quarter");
    }
}
