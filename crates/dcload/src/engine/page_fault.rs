//! fio's `page_fault` engine: the job's "file" is private anonymous memory
//! of its size, and each I/O copies its block to it (a write) or from it (a
//! read), so the first touch of every page takes a page fault: it measures
//! the fault path, not storage. No file is created or opened.

use super::{Completion, Engine, Op};
use crate::engine::Dir;
use dc_sys::{AlignedBuf, AnonMap};
use std::io;

pub struct PageFaultEngine {
    memory: AnonMap,
    buf: AlignedBuf,
    bs: usize,
    done: Vec<Completion>,
}

impl PageFaultEngine {
    /// One slot of `bs` bytes in `buf`; `memory` is the job's span.
    pub fn new(memory: AnonMap, buf: AlignedBuf, bs: usize) -> PageFaultEngine {
        PageFaultEngine { memory, buf, bs, done: Vec::with_capacity(1) }
    }
}

impl Engine for PageFaultEngine {
    fn depth(&self) -> usize {
        1
    }

    fn is_sync(&self) -> bool {
        true
    }

    fn buffer(&mut self, slot: usize) -> &mut [u8] {
        &mut self.buf.as_mut_slice()[slot * self.bs..(slot + 1) * self.bs]
    }

    fn start(&mut self, slot: usize, op: Op) -> io::Result<()> {
        let (off, len) = (op.offset as usize, op.len as usize);
        if off.checked_add(len).is_none_or(|end| end > self.memory.len()) {
            self.done.push(Completion { slot, result: Err(libc::EINVAL) });
            return Ok(());
        }
        let block = &mut self.buf.as_mut_slice()[slot * self.bs..slot * self.bs + len];
        let memory = &mut self.memory.as_mut_slice()[off..off + len];
        match op.dir {
            Dir::Read => block.copy_from_slice(memory),
            Dir::Write => memory.copy_from_slice(block),
            Dir::Trim => return Err(super::no_trim()),
        }
        self.done.push(Completion { slot, result: Ok(op.len) });
        Ok(())
    }

    fn submit(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn reap(&mut self, _min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        out.append(&mut self.done);
        Ok(())
    }
}
