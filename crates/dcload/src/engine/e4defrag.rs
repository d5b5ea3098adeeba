//! fio's `e4defrag` engine: each write moves its range's blocks from a
//! donor file into the job's file with ext4's `EXT4_IOC_MOVE_EXT`, as the
//! e4defrag tool does to defragment: the data stays, its blocks change. The
//! donor is allocated for the job's span up front, or, with `inplace`, for
//! each I/O's range just before it and truncated away after. Reads are
//! refused (`EINVAL`), as fio refuses them; only ext4 takes the ioctl.

use super::{Dir, OneAtATime, Op};
use dc_sys::AlignedBuf;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

pub struct E4defragEngine {
    file: File,
    donor: File,
    /// The filesystem's block, the ioctl's unit.
    block: u64,
    inplace: bool,
    buf: AlignedBuf,
}

impl E4defragEngine {
    /// Opens (creating) `donor`; unless `inplace`, allocates it over `span`
    /// (offset and length of the job's file). `buf` holds one slot; no data
    /// goes through it.
    pub fn new(
        file: File,
        donor: &Path,
        inplace: bool,
        span: (u64, u64),
        buf: AlignedBuf,
    ) -> io::Result<E4defragEngine> {
        // Only a regular file gives blocks: a device node, a FIFO or a
        // directory of that name is left alone (a FIFO would block the open).
        if std::fs::metadata(donor).is_ok_and(|m| !m.is_file()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the donor exists and is not a regular file; name another donorname=",
            ));
        }
        // Not truncated: the donor may be another job's file, as fio allows.
        let donor = OpenOptions::new().write(true).create(true).truncate(false).mode(0o644).open(donor)?;
        if !inplace && span.1 > 0 {
            dc_sys::fallocate(donor.as_fd(), 0, span.0, span.1)?;
        }
        let block = donor.metadata()?.blksize().max(1);
        Ok(E4defragEngine { file, donor, block, inplace, buf })
    }

    fn move_range(&self, op: Op) -> Result<u32, i32> {
        let errno = |e: io::Error| e.raw_os_error().unwrap_or(libc::EIO);
        if self.inplace {
            dc_sys::fallocate(self.donor.as_fd(), 0, op.offset, u64::from(op.len)).map_err(errno)?;
        }
        let first = op.offset / self.block;
        let end = (op.offset + u64::from(op.len)).div_ceil(self.block);
        let moved = dc_sys::move_extent(self.file.as_fd(), self.donor.as_fd(), first, first, end - first);
        if self.inplace {
            dc_sys::ftruncate(self.donor.as_fd(), 0).map_err(errno)?;
        }
        match moved.map_err(errno)? {
            // Nothing moved: the range lies past the file's end.
            0 => Err(libc::EINVAL),
            // A part moved (the file ends inside the range) counts whole:
            // the loop would write the rest of a short write as data.
            _ => Ok(op.len),
        }
    }
}

impl OneAtATime for E4defragEngine {
    fn buffer(&mut self) -> &mut [u8] {
        self.buf.as_mut_slice()
    }

    fn perform(&mut self, op: Op) -> Result<u32, i32> {
        match op.dir {
            Dir::Write => self.move_range(op),
            Dir::Read | Dir::Trim => Err(libc::EINVAL),
        }
    }
}
