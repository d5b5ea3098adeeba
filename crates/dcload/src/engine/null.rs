//! fio's `null` engine: every I/O completes at once and touches no file, so
//! a job measures dcload itself (offsets, statistics, logs) and nothing of
//! the kernel's. A read leaves its buffer as it was; fio pretends such reads
//! verified, and so does the worker.

use super::{Completion, Engine, Op};
use dc_sys::AlignedBuf;
use std::io;

pub struct NullEngine {
    buf: AlignedBuf,
    bs: usize,
    depth: usize,
    /// Started since the last reap: all of them complete there.
    done: Vec<Completion>,
}

impl NullEngine {
    /// `depth` slots of `bs` bytes each in `buf`. At depth 1 an I/O is done
    /// when started, as fio's null engine does without a queue.
    pub fn new(buf: AlignedBuf, bs: usize, depth: usize) -> NullEngine {
        NullEngine { buf, bs, depth, done: Vec::with_capacity(depth) }
    }
}

impl Engine for NullEngine {
    fn depth(&self) -> usize {
        self.depth
    }

    fn is_sync(&self) -> bool {
        self.depth == 1
    }

    fn buffer(&mut self, slot: usize) -> &mut [u8] {
        &mut self.buf.as_mut_slice()[slot * self.bs..(slot + 1) * self.bs]
    }

    fn start(&mut self, slot: usize, op: Op) -> io::Result<()> {
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
