//! posixaio: POSIX asynchronous I/O (`aio_read`/`aio_write`), `iodepth`
//! requests in flight, as fio's `posixaio` engine does. glibc runs each
//! request with pread/pwrite on a thread of its own, so the calls carry no
//! `RWF_*` flags (`uncached=1` is refused for this engine); `writebehind=`
//! reports each completion to a libdontcache handle, as for libaio.
//!
//! A request starts when it is started (`aio_read` queues it at once), so
//! `submit` has nothing left to do, and the submission latency is the
//! call's.

use super::{
    finish_write_behind, note_completion, queued_bytes, write_behind_handle, Completion, Dir, Engine, Op, SlotBuffers,
};
use dc_sys::posix_aio::{self, AioCb};
use dc_sys::AlignedBuf;
use dontcache::{Handle, Policy};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

pub struct PosixAioEngine {
    /// One control block per slot, boxed so they never move while glibc's
    /// threads write their status.
    blocks: Box<[AioCb]>,
    in_flight: Vec<bool>,
    ops: Vec<Op>,
    write_behind: Option<Handle>,
    file: File,
    buffers: SlotBuffers,
}

impl PosixAioEngine {
    /// `region` holds `depth` buffers of `bs` bytes back to back.
    pub fn new(file: File, region: AlignedBuf, bs: usize, depth: usize) -> PosixAioEngine {
        PosixAioEngine {
            blocks: (0..depth).map(|_| AioCb::default()).collect(),
            in_flight: vec![false; depth],
            ops: vec![Op { dir: Dir::Read, offset: 0, len: 0, prio: 0 }; depth],
            write_behind: None,
            file,
            buffers: SlotBuffers::new(region, bs),
        }
    }

    /// The same, with the job's I/O reported to a libdontcache handle of `policy`.
    pub fn write_behind(
        file: File,
        region: AlignedBuf,
        bs: usize,
        depth: usize,
        policy: Policy,
    ) -> io::Result<PosixAioEngine> {
        let handle = write_behind_handle(&file, policy, queued_bytes(bs, depth))?;
        let mut e = PosixAioEngine::new(file, region, bs, depth);
        e.write_behind = Some(handle);
        Ok(e)
    }

    /// Moves the requests that are done to `out`; how many.
    fn collect(&mut self, out: &mut Vec<Completion>) -> usize {
        let mut n = 0;
        for slot in 0..self.blocks.len() {
            if !self.in_flight[slot] || posix_aio::error(&self.blocks[slot]) == libc::EINPROGRESS {
                continue;
            }
            self.in_flight[slot] = false;
            let mut result = posix_aio::result(&self.blocks[slot]).map(|b| b as u32);
            if let Some(h) = &self.write_behind {
                result = note_completion(h, self.ops[slot], result);
            }
            out.push(Completion { slot, result });
            n += 1;
        }
        n
    }

    /// Waits for every request still in flight (cancelling what glibc has
    /// not started): the buffers and blocks must outlive them.
    fn settle(&mut self) {
        if !self.in_flight.contains(&true) {
            return;
        }
        let _ = posix_aio::cancel(self.file.as_raw_fd());
        let mut done = Vec::new();
        while self.in_flight.contains(&true) {
            if self.collect(&mut done) == 0 {
                let _ = self.wait_one();
            }
        }
    }

    /// Waits until one of the requests in flight is done (`aio_suspend`
    /// over them; the slots not in flight are null entries).
    fn wait_one(&self) -> io::Result<()> {
        let list: Vec<Option<&AioCb>> = self.blocks.iter().zip(&self.in_flight).map(|(b, &f)| f.then_some(b)).collect();
        posix_aio::suspend(&list)
    }
}

impl Engine for PosixAioEngine {
    fn depth(&self) -> usize {
        self.blocks.len()
    }

    fn is_sync(&self) -> bool {
        false
    }

    fn buffer(&mut self, slot: usize) -> &mut [u8] {
        self.buffers.get(slot)
    }

    fn start(&mut self, slot: usize, op: Op) -> io::Result<()> {
        let fd = self.file.as_raw_fd();
        let buf = self.buffer(slot).as_mut_ptr();
        let cb = &self.blocks[slot];
        // SAFETY: the slot is free (the worker starts a slot only after its
        // completion was reaped), so no request uses its block; the block
        // and the slot's buffer in `buffers` stay in place until `collect`
        // sees the request done, and `settle` waits for any left on drop.
        let started = unsafe {
            cb.prepare(fd, buf, op.len as usize, op.offset);
            match op.dir {
                Dir::Read => posix_aio::read(cb),
                Dir::Write => posix_aio::write(cb),
                Dir::Trim => Err(super::no_trim()),
            }
        };
        started?;
        self.in_flight[slot] = true;
        self.ops[slot] = op;
        Ok(())
    }

    fn submit(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        let mut got = self.collect(out);
        while got < min && self.in_flight.contains(&true) {
            match self.wait_one() {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
            got += self.collect(out);
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.settle();
        finish_write_behind(&mut self.write_behind)
    }
}

impl Drop for PosixAioEngine {
    fn drop(&mut self) {
        // A job that failed with requests in flight still waits for them
        // before their blocks and buffers go.
        let _ = self.finish();
    }
}
