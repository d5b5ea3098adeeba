//! fio's `page_fault` engine: the job's "file" is private anonymous memory
//! of its size, and each I/O copies its block to it (a write) or from it (a
//! read), so the first touch of every page takes a page fault: it measures
//! the fault path, not storage. No file is created or opened. The copy is
//! the only difference to the `null` engine, which keeps the slots and
//! completes each I/O at once.

use super::{Completion, Engine, NullEngine, Op};
use crate::engine::Dir;
use dc_sys::{AlignedBuf, AnonMap};
use std::io;

pub struct PageFaultEngine {
    memory: AnonMap,
    null: NullEngine,
}

impl PageFaultEngine {
    /// One slot of `bs` bytes in `buf`; `memory` is the job's span.
    pub fn new(memory: AnonMap, buf: AlignedBuf, bs: usize) -> PageFaultEngine {
        PageFaultEngine { memory, null: NullEngine::new(buf, bs, 1) }
    }
}

impl Engine for PageFaultEngine {
    fn depth(&self) -> usize {
        self.null.depth()
    }

    fn is_sync(&self) -> bool {
        self.null.is_sync()
    }

    fn buffer(&mut self, slot: usize) -> &mut [u8] {
        self.null.buffer(slot)
    }

    fn start(&mut self, slot: usize, op: Op) -> io::Result<()> {
        let (off, len) = (op.offset as usize, op.len as usize);
        if off.checked_add(len).is_none_or(|end| end > self.memory.len()) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let memory = &mut self.memory.as_mut_slice()[off..off + len];
        let block = &mut self.null.buffer(slot)[..len];
        match op.dir {
            Dir::Read => block.copy_from_slice(memory),
            Dir::Write => memory.copy_from_slice(block),
            Dir::Trim => return Err(super::no_trim()),
        }
        self.null.start(slot, op)
    }

    fn submit(&mut self) -> io::Result<()> {
        self.null.submit()
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        self.null.reap(min, out)
    }
}
