//! `ioengine=psync|pvsync2` with `writebehind=<policy>`: one I/O at a time
//! through a libdontcache handle, so every policy of the engine is measured
//! by the same generator and statistics as buffered, uncached and direct I/O.

use super::{Completion, Engine, Op};
use crate::engine::Dir;
use dc_sys::AlignedBuf;
use dontcache::{Handle, Options, Policy};
use std::fs::File;
use std::io;
use std::os::fd::IntoRawFd;

pub struct WriteBehindEngine {
    handle: Option<Handle>,
    buf: AlignedBuf,
    done: Option<Completion>,
}

impl WriteBehindEngine {
    /// Takes over `file`; `DONTCACHE_HIGH_WATER` and `DONTCACHE_SUBMIT` apply.
    pub fn new(file: File, buf: AlignedBuf, policy: Policy) -> io::Result<WriteBehindEngine> {
        let env = Options::from_env().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let fd = file.into_raw_fd();
        let handle = Handle::adopt(fd, Options { policy, ..env }).inspect_err(|_| {
            // SAFETY: adopt failed, so the descriptor is still ours alone.
            unsafe { libc::close(fd) };
        })?;
        Ok(WriteBehindEngine { handle: Some(handle), buf, done: None })
    }

    pub fn stats(&self) -> Option<dontcache::Stats> {
        self.handle.as_ref().map(|h| h.stats())
    }
}

impl Engine for WriteBehindEngine {
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
        let h = self.handle.as_ref().ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
        let len = op.len as usize;
        let res = match op.dir {
            Dir::Read => h.pread(&mut self.buf.as_mut_slice()[..len], op.offset),
            Dir::Write => h.pwrite(&self.buf.as_slice()[..len], op.offset),
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

    fn finish(&mut self) -> io::Result<()> {
        match self.handle.take() {
            Some(h) => h.close(),
            None => Ok(()),
        }
    }
}

impl Drop for WriteBehindEngine {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            let _ = h.close();
        }
    }
}
