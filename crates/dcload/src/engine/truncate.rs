//! fio's `ftruncate` engine: each write is `ftruncate(2)` of the job's file
//! to the write's offset, so a sequential job grows the file a block at a
//! time and a random one moves its end about. No data moves.

use super::{Dir, OneAtATime, Op};
use dc_sys::AlignedBuf;
use std::fs::File;
use std::os::fd::AsFd;

pub struct TruncateEngine {
    file: File,
    buf: AlignedBuf,
}

impl TruncateEngine {
    /// `buf` holds one slot; nothing is read or written through it.
    pub fn new(file: File, buf: AlignedBuf) -> TruncateEngine {
        TruncateEngine { file, buf }
    }
}

impl OneAtATime for TruncateEngine {
    fn buffer(&mut self) -> &mut [u8] {
        self.buf.as_mut_slice()
    }

    fn perform(&mut self, op: Op) -> Result<u32, i32> {
        // The job check admits writes only.
        debug_assert_eq!(op.dir, Dir::Write);
        dc_sys::ftruncate(self.file.as_fd(), op.offset).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        Ok(op.len)
    }
}
