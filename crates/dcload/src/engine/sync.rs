//! `psync` (pread/pwrite) and `pvsync2` (preadv2/pwritev2 with `RWF_*`
//! flags): one I/O at a time, done in the caller's thread.

use super::{Completion, Engine, Op};
use crate::engine::Dir;
use dc_sys::AlignedBuf;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;

pub struct SyncEngine {
    file: File,
    buf: AlignedBuf,
    /// `Some(flags)` for pvsync2 (flags may be 0), `None` for psync.
    rwf: Option<i32>,
    done: Option<Completion>,
}

impl SyncEngine {
    pub fn new(file: File, buf: AlignedBuf, rwf: Option<i32>) -> SyncEngine {
        SyncEngine { file, buf, rwf, done: None }
    }
}

impl Engine for SyncEngine {
    fn depth(&self) -> usize {
        1
    }

    fn is_sync(&self) -> bool {
        true
    }

    fn buffer(&mut self, _slot: usize) -> &mut [u8] {
        self.buf.as_mut_slice()
    }

    fn start(&mut self, slot: usize, op: Op) -> io::Result<()> {
        let fd = self.file.as_fd();
        let len = op.len as usize;
        let res = match (op.dir, self.rwf) {
            (Dir::Read, None) => dc_sys::pread(fd, &mut self.buf.as_mut_slice()[..len], op.offset),
            (Dir::Write, None) => dc_sys::pwrite(fd, &self.buf.as_slice()[..len], op.offset),
            (Dir::Read, Some(f)) => dc_sys::preadv2(fd, &mut self.buf.as_mut_slice()[..len], op.offset, f),
            (Dir::Write, Some(f)) => dc_sys::pwritev2(fd, &self.buf.as_slice()[..len], op.offset, f),
        };
        let result = res.map(|n| n as u32).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO));
        self.done = Some(Completion { slot, result });
        Ok(())
    }

    fn submit(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn reap(&mut self, _min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        out.extend(self.done.take());
        Ok(())
    }
}
