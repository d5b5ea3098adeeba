//! libaio: Linux native AIO, one context per job instance, `iodepth` I/Os
//! in flight, the blocks prepared since the last submit handed over in one
//! `io_submit`, as fio's `libaio` engine does (through the system calls;
//! no C library). The kernel completes O_DIRECT I/O asynchronously; buffered
//! I/O completes inside `io_submit`, as under fio.
//!
//! With `writebehind=<policy>` each completion is reported to a
//! libdontcache handle, as for io_uring.

use super::{
    finish_write_behind, note_completion, queued_bytes, write_behind_handle, Completion, Dir, Engine, Op, RwFlags,
    SlotBuffers,
};
use dc_sys::{AioContext, AioEvent, AlignedBuf, Iocb};
use dontcache::{Handle, Policy};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

pub struct LibaioEngine {
    ctx: AioContext,
    /// One block per slot: the kernel reads it at submit, so it only has to
    /// live until then, but a fixed place per slot costs nothing.
    iocbs: Vec<Iocb>,
    /// Slots started since the last submit, in order.
    queued: Vec<usize>,
    /// Their blocks' addresses for `io_submit`, filled at each submit from
    /// one pointer to `iocbs` (kept, so the I/O loop allocates nothing).
    submit_list: Vec<*mut Iocb>,
    events: Vec<AioEvent>,
    write_behind: Option<Handle>,
    ops: Vec<Op>,
    file: File,
    buffers: SlotBuffers,
    depth: usize,
    rw_flags: RwFlags,
}

impl LibaioEngine {
    /// `region` holds `depth` buffers of `bs` bytes back to back.
    pub fn new(file: File, region: AlignedBuf, bs: usize, depth: usize, rw_flags: RwFlags) -> io::Result<LibaioEngine> {
        Ok(LibaioEngine {
            ctx: AioContext::new(depth as u32)?,
            iocbs: vec![Iocb::default(); depth],
            queued: Vec::with_capacity(depth),
            submit_list: Vec::with_capacity(depth),
            events: vec![AioEvent::default(); depth],
            write_behind: None,
            ops: vec![Op { dir: Dir::Read, offset: 0, len: 0, prio: 0 }; depth],
            file,
            buffers: SlotBuffers::new(region, bs),
            depth,
            rw_flags,
        })
    }

    /// The same, with the job's I/O reported to a libdontcache handle of
    /// `policy`; the `kernel` policy's I/O carries the flags the handle says.
    pub fn write_behind(
        file: File,
        region: AlignedBuf,
        bs: usize,
        depth: usize,
        policy: Policy,
    ) -> io::Result<LibaioEngine> {
        let handle = write_behind_handle(&file, policy, queued_bytes(bs, depth))?;
        let mut e = LibaioEngine::new(file, region, bs, depth, RwFlags::both(handle.rw_flags()))?;
        e.write_behind = Some(handle);
        Ok(e)
    }
}

impl Engine for LibaioEngine {
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
        let fd = self.file.as_raw_fd();
        let buf = self.buffer(slot).as_mut_ptr();
        let len = op.len as usize;
        self.iocbs[slot] = match op.dir {
            Dir::Read => {
                let flags = self.rw_flags.read | self.write_behind.as_ref().map_or(0, Handle::read_flags);
                Iocb::pread(fd, buf, len, op.offset, flags, slot as u64)
            }
            Dir::Write => Iocb::pwrite(fd, buf, len, op.offset, self.rw_flags.write, slot as u64),
            Dir::Trim => return Err(super::no_trim()),
        };
        if op.prio != 0 {
            self.iocbs[slot] = self.iocbs[slot].with_ioprio(op.prio);
        }
        self.ops[slot] = op;
        self.queued.push(slot);
        Ok(())
    }

    fn submit(&mut self) -> io::Result<()> {
        let base = self.iocbs.as_mut_ptr();
        self.submit_list.clear();
        // SAFETY: every queued slot is below `depth`, the length of `iocbs`.
        self.submit_list.extend(self.queued.iter().map(|&slot| unsafe { base.add(slot) }));
        let mut done = 0;
        while done < self.submit_list.len() {
            // SAFETY: the pointers are into `iocbs`, untouched until this call
            // returns; each block names its slot's buffer in `buffers`, which
            // the worker leaves alone until the slot's completion is reaped.
            match unsafe { self.ctx.submit(&mut self.submit_list[done..]) } {
                Ok(n) => done += n,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                // The worker ends the job on a submit error.
                Err(e) => return Err(e),
            }
        }
        self.queued.clear();
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        let n = loop {
            match self.ctx.get_events(min, &mut self.events) {
                Ok(n) => break n,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(e),
            }
        };
        for ev in &self.events[..n] {
            let slot = ev.data as usize;
            let mut result = if ev.res < 0 { Err(-ev.res as i32) } else { Ok(ev.res as u32) };
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

impl Drop for LibaioEngine {
    fn drop(&mut self) {
        // A job that failed before `finish` still hands its handle over.
        let _ = self.finish();
    }
}
