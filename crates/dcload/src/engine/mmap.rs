//! fio's `mmap` engine: the file is mapped shared, and each I/O is a copy
//! between the slot's buffer and the mapping, one at a time. A write dirties
//! page-cache pages by storing into them, as a program writing through a
//! mapping does; `fsync`/`end_fsync` write them back as for any write.
//!
//! The mapping grows with the I/O: a write past the file's end extends the
//! file first (`ftruncate`), since a store past it would raise SIGBUS; a read
//! past the end returns what is there, 0 bytes at or past it, as pread does.
//!
//! There is no call to put `RWF_DONTCACHE` on (`uncached=1` is refused for
//! this engine); `writebehind=` reports each copy to a libdontcache handle,
//! as a program doing its own mapped I/O would, and the library writes back
//! and drops the pages the stores dirtied. A page this process still maps
//! cannot be dropped, so under `writebehind=` each copy's pages are unmapped
//! once copied (`MADV_DONTNEED`: the data and its dirty state stay in the
//! page cache), as a program that maps only what it works on leaves them.

use super::{finish_write_behind, note_completion, write_behind_handle, OneAtATime, Op};
use crate::engine::Dir;
use dc_sys::{AlignedBuf, FileMap};
use dontcache::{Handle, Policy};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;

pub struct MmapEngine {
    file: File,
    /// `None` until the file has a byte to map.
    map: Option<FileMap>,
    /// The file's size as this engine last saw or made it.
    file_len: u64,
    writable: bool,
    write_behind: Option<Handle>,
    buf: AlignedBuf,
}

impl MmapEngine {
    /// `writable`: the job writes (the file is open for reading and writing).
    pub fn new(file: File, buf: AlignedBuf, writable: bool) -> io::Result<MmapEngine> {
        let file_len = file.metadata()?.len();
        let mut e = MmapEngine { file, map: None, file_len, writable, write_behind: None, buf };
        if file_len > 0 {
            e.remap(file_len)?;
        }
        Ok(e)
    }

    /// The same, with every copy reported to a libdontcache handle of `policy`.
    pub fn write_behind(file: File, buf: AlignedBuf, writable: bool, policy: Policy) -> io::Result<MmapEngine> {
        let handle = write_behind_handle(&file, policy, 0)?;
        let mut e = MmapEngine::new(file, buf, writable)?;
        e.write_behind = Some(handle);
        Ok(e)
    }

    /// Maps at least `end` bytes: twice the old mapping when that is more,
    /// so a growing file is remapped a logarithmic number of times.
    fn remap(&mut self, end: u64) -> io::Result<()> {
        let old = self.map.as_ref().map_or(0, |m| m.len() as u64);
        let len = end.max(old * 2).next_multiple_of(dc_sys::page_size() as u64);
        let len = usize::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
        self.map = None; // the old mapping goes before the new one is made
        self.map = Some(FileMap::new(self.file.as_fd(), len, self.writable)?);
        Ok(())
    }

    fn copy(&mut self, op: Op) -> io::Result<u32> {
        let end = op.offset + u64::from(op.len);
        let len = match op.dir {
            Dir::Trim => return Err(super::no_trim()),
            Dir::Write => {
                if end > self.file_len {
                    dc_sys::ftruncate(self.file.as_fd(), end)?;
                    self.file_len = end;
                }
                op.len as usize
            }
            Dir::Read => {
                if end > self.file_len {
                    // Another writer may have grown it since.
                    self.file_len = self.file.metadata()?.len();
                }
                self.file_len.saturating_sub(op.offset).min(u64::from(op.len)) as usize
            }
        };
        if len == 0 {
            return Ok(0);
        }
        if self.map.as_ref().is_none_or(|m| (m.len() as u64) < op.offset + len as u64) {
            self.remap(op.offset + len as u64)?;
        }
        let map = self.map.as_mut().expect("mapped above");
        let data = &mut self.buf.as_mut_slice()[..len];
        let off = op.offset as usize;
        // SAFETY: the file is at least `off + len` long (extended above for a
        // write, measured for a read), and the range is inside the mapping
        // (remapped above); a write job's mapping is writable.
        unsafe {
            match op.dir {
                Dir::Read => map.read_at(off, data),
                Dir::Write => map.write_at(off, data),
                Dir::Trim => unreachable!("a trim returned above"),
            }
        }
        if self.write_behind.is_some() {
            map.discard(off, len)?;
        }
        Ok(len as u32)
    }
}

impl OneAtATime for MmapEngine {
    fn buffer(&mut self) -> &mut [u8] {
        self.buf.as_mut_slice()
    }

    fn perform(&mut self, op: Op) -> Result<u32, i32> {
        let result = self.copy(op).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO));
        match &self.write_behind {
            Some(h) => note_completion(h, op, result),
            None => result,
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        finish_write_behind(&mut self.write_behind)
    }
}

impl Drop for MmapEngine {
    fn drop(&mut self) {
        // A job that failed before `finish` still hands its handle over.
        let _ = self.finish();
    }
}
