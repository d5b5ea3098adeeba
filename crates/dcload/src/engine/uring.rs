//! io_uring: one ring per job instance (created on, and only used by, the
//! job's thread), `iodepth` I/Os in flight, the SQEs prepared since the last
//! submit handed over in one `io_uring_enter`.
//!
//! With `writebehind=<policy>` the I/O still goes through the ring, at the
//! job's depth, and each completion is reported to a libdontcache handle
//! (`note_write`, `note_read`), as a program that does its own asynchronous
//! I/O would: the write-behind, its high-water mark and the drop-behind
//! then work as for the synchronous engines.

use super::{
    finish_write_behind, note_completion, queued_bytes, write_behind_handle, Completion, Dir, Engine, Op, RwFlags,
    SlotBuffers,
};
use dc_jobfile::RingSetup;
use dc_sys::AlignedBuf;
use dontcache::{Handle, Policy};
use io_uring::{opcode, types, IoUring};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// `io_uring_enter(2)`'s flag to reap (and run deferred completions), from
/// linux/io_uring.h.
const IORING_ENTER_GETEVENTS: u32 = 1;

/// A read or write SQE of `op` on `$fd` (a plain or a registered file:
/// the crate's two types) from `$buf`, through registered buffer `$fixed`
/// if given.
macro_rules! rw_entry {
    ($fd:expr, $buf:expr, $op:expr, $write:expr, $flags:expr, $fixed:expr) => {{
        let (fd, buf, op, flags): (_, *mut u8, Op, i32) = ($fd, $buf, $op, $flags);
        match ($write, $fixed) {
            (false, None) => {
                opcode::Read::new(fd, buf, op.len).offset(op.offset).rw_flags(flags).ioprio(op.prio).build()
            }
            (true, None) => opcode::Write::new(fd, buf.cast_const(), op.len)
                .offset(op.offset)
                .rw_flags(flags)
                .ioprio(op.prio)
                .build(),
            (false, Some(i)) => {
                opcode::ReadFixed::new(fd, buf, op.len, i).offset(op.offset).rw_flags(flags).ioprio(op.prio).build()
            }
            (true, Some(i)) => opcode::WriteFixed::new(fd, buf.cast_const(), op.len, i)
                .offset(op.offset)
                .rw_flags(flags)
                .ioprio(op.prio)
                .build(),
        }
    }};
}

pub struct UringEngine {
    ring: IoUring,
    /// The handle the completions are reported to (`writebehind=`); it is
    /// released, not closed, at `finish`: `file` owns the descriptor.
    write_behind: Option<Handle>,
    /// What each slot's I/O is, for reporting its completion.
    ops: Vec<Op>,
    file: File,
    buffers: SlotBuffers,
    depth: usize,
    rw_flags: RwFlags,
    queued: usize,
    /// `fixedbufs`: slot `i`'s buffer is registered buffer `i`.
    fixed_buffers: bool,
    /// `registerfiles`: the file is registered file 0.
    fixed_file: bool,
    /// `sqthread_poll`: the kernel's thread submits.
    sqpoll: bool,
}

impl UringEngine {
    /// `region` holds `depth` buffers of `bs` bytes back to back; `setup`
    /// is the job's `sqthread_poll`, `fixedbufs` and `registerfiles`.
    pub fn new(
        file: File,
        region: AlignedBuf,
        (bs, depth): (usize, usize),
        rw_flags: RwFlags,
        setup: RingSetup,
    ) -> io::Result<UringEngine> {
        let entries = depth.next_power_of_two().max(2) as u32;
        let ring = if setup.sqthread_poll {
            // The kernel refuses the task-work flags below with SQPOLL: its
            // thread, not this one, completes the I/O. An idle time of 0 is
            // the kernel's default (1 s), as fio leaves it.
            let mut b = IoUring::builder();
            b.setup_cqsize(entries).setup_sqpoll(0);
            if let Some(cpu) = setup.sqthread_poll_cpu {
                b.setup_sqpoll_cpu(cpu);
            }
            b.build(entries)?
        } else {
            // The flags fio (3.33+) sets: completions are run as task work only when
            // this thread waits for them, instead of interrupting it. Measurably
            // faster for O_DIRECT writes here, and needed to compare like with like.
            // Kernels before 6.1 refuse DEFER_TASKRUN; they get a plain ring.
            IoUring::builder()
                .setup_cqsize(entries)
                .setup_coop_taskrun()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .build(entries)
                .or_else(|_| IoUring::new(entries))?
        };
        let ops = vec![Op { dir: Dir::Read, offset: 0, len: 0, prio: 0 }; depth];
        let mut buffers = SlotBuffers::new(region, bs);
        if setup.fixedbufs {
            let iovecs: Vec<libc::iovec> = (0..depth)
                .map(|slot| {
                    let b = buffers.get(slot);
                    libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() }
                })
                .collect();
            // SAFETY: the iovecs point into `buffers`' region, which the engine
            // owns and drops after the ring (field order), so they stay valid
            // for as long as the ring can use them.
            unsafe { ring.submitter().register_buffers(&iovecs) }?;
        }
        if setup.registerfiles {
            ring.submitter().register_files(&[file.as_raw_fd()])?;
        }
        Ok(UringEngine {
            ring,
            write_behind: None,
            ops,
            file,
            buffers,
            depth,
            rw_flags,
            queued: 0,
            fixed_buffers: setup.fixedbufs,
            fixed_file: setup.registerfiles,
            sqpoll: setup.sqthread_poll,
        })
    }

    /// The same, with the job's I/O reported to a libdontcache handle of
    /// `policy` (`DONTCACHE_HIGH_WATER` and `DONTCACHE_SUBMIT` apply). The
    /// `kernel` policy's reads and writes carry the flags the handle says.
    pub fn write_behind(
        file: File,
        region: AlignedBuf,
        bs: usize,
        depth: usize,
        policy: Policy,
        setup: RingSetup,
    ) -> io::Result<UringEngine> {
        let handle = write_behind_handle(&file, policy, queued_bytes(bs, depth))?;
        let mut e = UringEngine::new(file, region, (bs, depth), RwFlags::both(handle.rw_flags()), setup)?;
        e.write_behind = Some(handle);
        Ok(e)
    }
}

impl Engine for UringEngine {
    fn depth(&self) -> usize {
        self.depth
    }

    fn is_sync(&self) -> bool {
        false
    }

    fn buffer(&mut self, slot: usize) -> &mut [u8] {
        self.buffers.get(slot)
    }

    fn start(&mut self, slot: usize, op: Op) -> io::Result<()> {
        let buf = self.buffers.get(slot).as_mut_ptr();
        let (flags, write) = match op.dir {
            Dir::Read => (self.rw_flags.read | self.write_behind.as_ref().map_or(0, Handle::read_flags), false),
            Dir::Write => (self.rw_flags.write, true),
            Dir::Trim => return Err(super::no_trim()),
        };
        let fixed = self.fixed_buffers.then_some(slot as u16);
        let sqe = if self.fixed_file {
            rw_entry!(types::Fixed(0), buf, op, write, flags, fixed)
        } else {
            rw_entry!(types::Fd(self.file.as_raw_fd()), buf, op, write, flags, fixed)
        }
        .user_data(slot as u64);
        self.ops[slot] = op;
        if self.sqpoll {
            // The poll thread moves the ring's head on after a whole batch, so
            // a slot can complete while the SQE it used still counts as
            // queued: wait for the thread to let go of it.
            while self.ring.submission().is_full() {
                self.ring.submitter().squeue_wait()?;
            }
        }
        // SAFETY: the buffer is owned by self and not touched by the worker until
        // this slot's completion has been reaped; the ring has one SQE per slot.
        unsafe { self.ring.submission().push(&sqe) }
            .map_err(|_| io::Error::other("io_uring submission queue full (more I/Os than slots)"))?;
        self.queued += 1;
        Ok(())
    }

    fn submit(&mut self) -> io::Result<()> {
        if self.queued > 0 && self.sqpoll {
            // The kernel's thread takes the SQEs; a system call only to wake
            // it when it has gone idle (the crate checks NEED_WAKEUP).
            self.ring.submit()?;
            self.queued = 0;
        } else if self.queued > 0 {
            let queued = self.ring.submission().len() as u32;
            // GETEVENTS on every submit, as fio passes it: on a DEFER_TASKRUN
            // ring only a GETEVENTS entry runs the completions the kernel
            // deferred to this thread. Without it a read that went through
            // task work waited behind reads that kept completing inline at
            // submit: cached 4k random reads at depth 4 saw 830-930 ms
            // completions in most 1 s runs (fio: at most 47 ms).
            // SAFETY: no argument is passed; `queued` SQEs are in the ring.
            unsafe { self.ring.submitter().enter::<libc::sigset_t>(queued, 0, IORING_ENTER_GETEVENTS, None) }?;
            self.queued = 0;
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        // The kernel's min_complete counts the completions already in the
        // ring, so waiting for `min` tops up what is there.
        if min > 0 && self.sqpoll {
            // As fio's engine does with a poll thread: watch the completion
            // ring, no system call. Waiting in io_uring_enter instead gave
            // 0.91x fio's 4k O_DIRECT random reads at depth 16 here; the
            // price is this thread's CPU, as in fio.
            while self.ring.completion().len() < min {
                std::hint::spin_loop();
            }
        } else if min > 0 && self.ring.completion().len() < min {
            loop {
                match self.ring.submit_and_wait(min) {
                    Ok(_) => break,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        for cqe in self.ring.completion() {
            let res = cqe.result();
            let slot = cqe.user_data() as usize;
            let mut result = if res < 0 { Err(-res) } else { Ok(res as u32) };
            if let Some(h) = &self.write_behind {
                result = note_completion(h, self.ops[slot], result);
            }
            out.push(Completion { slot, result });
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        finish_write_behind(&mut self.write_behind)
    }
}

impl Drop for UringEngine {
    fn drop(&mut self) {
        // A job that failed before `finish` still hands its handle over.
        let _ = self.finish();
    }
}
