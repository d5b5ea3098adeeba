//! fio's `falloc` engine: each I/O is `fallocate(2)` of its range instead of
//! a transfer. A write allocates and extends the file (mode 0); a read
//! allocates without changing the size (`FALLOC_FL_KEEP_SIZE`); a trim
//! punches a hole (`FALLOC_FL_PUNCH_HOLE`), as fio maps them. No data is
//! transferred.

use super::{Dir, OneAtATime, Op};
use dc_sys::AlignedBuf;
use std::fs::File;
use std::os::fd::AsFd;

pub struct FallocEngine {
    file: File,
    buf: AlignedBuf,
}

impl FallocEngine {
    /// `buf` holds one slot; nothing is read or written through it.
    pub fn new(file: File, buf: AlignedBuf) -> FallocEngine {
        FallocEngine { file, buf }
    }
}

impl OneAtATime for FallocEngine {
    fn buffer(&mut self) -> &mut [u8] {
        self.buf.as_mut_slice()
    }

    fn perform(&mut self, op: Op) -> Result<u32, i32> {
        let mode = match op.dir {
            Dir::Read => libc::FALLOC_FL_KEEP_SIZE,
            Dir::Write => 0,
            Dir::Trim => libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        };
        dc_sys::fallocate(self.file.as_fd(), mode, op.offset, u64::from(op.len))
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        Ok(op.len)
    }
}
