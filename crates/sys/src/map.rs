//! Mappings, unmapped on drop: a shared mapping of a file (`mmap(2)` with
//! `MAP_SHARED`), whose stores dirty the file's page-cache pages as a
//! program that writes through a mapping does, and private anonymous
//! memory whose pages are faulted in at their first touch.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

pub struct FileMap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; access goes
// through `&self`/`&mut self` copies only.
unsafe impl Send for FileMap {}

impl FileMap {
    /// Maps `len` bytes (more than 0) of `fd` from offset 0, for reading, and
    /// for writing too with `writable` (the descriptor must then be open for
    /// reading and writing).
    pub fn new(fd: BorrowedFd<'_>, len: usize, writable: bool) -> io::Result<FileMap> {
        let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
        // SAFETY: a new mapping chosen by the kernel; nothing of ours is overwritten.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(FileMap { ptr: NonNull::new(p.cast()).expect("mmap returned a mapping"), len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the mapping's bytes at `off` into `dst`.
    ///
    /// # Safety
    /// The file must be at least `off + dst.len()` bytes long for the whole
    /// copy (a page past its end raises SIGBUS). Panics if the range is not
    /// inside the mapping.
    pub unsafe fn read_at(&self, off: usize, dst: &mut [u8]) {
        assert!(off.checked_add(dst.len()).is_some_and(|end| end <= self.len), "read outside the mapping");
        // SAFETY: inside the mapping (checked), backed by the file (the
        // caller's promise); raw copy, as other processes may store into it.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies `src` into the mapping at `off`.
    ///
    /// # Safety
    /// As [`FileMap::read_at`], and the mapping must be writable.
    pub unsafe fn write_at(&mut self, off: usize, src: &[u8]) {
        assert!(off.checked_add(src.len()).is_some_and(|end| end <= self.len), "write outside the mapping");
        // SAFETY: as in `read_at`; writability is the caller's promise.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len()) }
    }
}

impl FileMap {
    /// Unmaps the pages of `off..off + len` from this process
    /// (`madvise(MADV_DONTNEED)`), whole pages around it. For a shared file
    /// mapping nothing is lost: a page's dirty bit goes to the page cache,
    /// and the next access maps the cached page again. A page still mapped
    /// cannot be dropped from the page cache; an unmapped one can.
    pub fn discard(&self, off: usize, len: usize) -> io::Result<()> {
        let ps = crate::page_size();
        let start = off / ps * ps;
        let end = off.saturating_add(len).next_multiple_of(ps).min(self.len);
        if start >= end {
            return Ok(());
        }
        // SAFETY: the range is inside this mapping; MADV_DONTNEED on a shared
        // file mapping only drops page-table entries.
        if unsafe { libc::madvise(self.ptr.as_ptr().add(start).cast(), end - start, libc::MADV_DONTNEED) } != 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

impl Drop for FileMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made, once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Private anonymous memory (`MAP_PRIVATE | MAP_ANONYMOUS`), with no advice:
/// each page is faulted in (zeroed) at its first touch, as fio's
/// `page_fault` engine measures.
pub struct AnonMap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is private memory owned by this value.
unsafe impl Send for AnonMap {}

impl AnonMap {
    /// Maps `len` bytes (more than 0).
    pub fn new(len: usize) -> io::Result<AnonMap> {
        // SAFETY: a new private anonymous mapping chosen by the kernel.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(AnonMap { ptr: NonNull::new(p.cast()).expect("mmap returned a mapping"), len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapping as bytes (touching a page faults it in).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the whole mapping is readable and writable memory of `len`
        // bytes owned by this value, zero-filled by the kernel.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AnonMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made, once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
