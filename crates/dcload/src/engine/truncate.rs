//! fio's `ftruncate` engine: each write is `ftruncate(2)` of the job's file
//! to the write's offset, so a sequential job grows the file a block at a
//! time and a random one moves its end about. No data moves.

use super::{Completion, Dir, Engine, Op};
use dc_sys::AlignedBuf;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;

pub struct TruncateEngine {
    file: File,
    buf: AlignedBuf,
    done: Option<Completion>,
}

impl TruncateEngine {
    /// `buf` holds one slot; nothing is read or written through it.
    pub fn new(file: File, buf: AlignedBuf) -> TruncateEngine {
        TruncateEngine { file, buf, done: None }
    }
}

impl Engine for TruncateEngine {
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
        // The job check admits writes only.
        debug_assert_eq!(op.dir, Dir::Write);
        let result = match dc_sys::ftruncate(self.file.as_fd(), op.offset) {
            Ok(()) => Ok(op.len),
            Err(e) => Err(e.raw_os_error().unwrap_or(libc::EIO)),
        };
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
