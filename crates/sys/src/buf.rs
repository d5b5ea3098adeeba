//! Page-aligned I/O buffers: `O_DIRECT` needs the memory aligned to the
//! device's DMA alignment, and page alignment satisfies every device.
//!
//! Buffers of 2 MiB and more are mapped directly and advised for transparent
//! huge pages. Why: an `O_DIRECT` request is split wherever the buffer is
//! physically discontiguous, and a virtio disk takes at most `max_segments`
//! (254 here) segments per request, so a 1 MiB write from 256 scattered
//! 4 KiB pages becomes two requests; from a huge page it stays one. THP is
//! `madvise`-only on Debian, so without the advice the pages are always small.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// A zero-initialised heap buffer with a fixed alignment.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    /// The allocation (at least one byte: zero-size allocations are not allowed).
    layout: Layout,
    len: usize,
    /// Mapped with mmap (and unmapped on drop) rather than heap-allocated.
    mapped: bool,
}

/// The huge-page size of x86-64 and arm64 with 4 KiB pages.
const HUGE_PAGE: usize = 2 << 20;

// SAFETY: AlignedBuf owns its allocation exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `len` zeroed bytes aligned to `align` (a power of two). `None` if the
    /// layout is invalid or the allocation fails.
    pub fn zeroed(len: usize, align: usize) -> Option<AlignedBuf> {
        let layout = Layout::from_size_align(len.max(1), align).ok()?;
        if len >= HUGE_PAGE && align <= HUGE_PAGE {
            return Self::mapped(layout, len);
        }
        // SAFETY: the layout has non-zero size.
        let ptr = NonNull::new(unsafe { alloc::alloc_zeroed(layout) })?;
        Some(AlignedBuf { ptr, layout, len, mapped: false })
    }

    /// Anonymous memory, 2 MiB aligned, advised for huge pages before its
    /// first touch (advice after the pages are faulted in as small pages
    /// would only help once khugepaged gets round to them).
    fn mapped(layout: Layout, len: usize) -> Option<AlignedBuf> {
        let size = layout.size().next_multiple_of(HUGE_PAGE);
        // Map one huge page more than needed and trim, so the start is aligned.
        let over = size + HUGE_PAGE;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                over,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return None;
        }
        let start = (raw as usize).next_multiple_of(HUGE_PAGE);
        let head = start - raw as usize;
        let tail = over - head - size;
        // SAFETY: both trimmed pieces lie inside the mapping made above.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((start + size) as *mut libc::c_void, tail);
            }
            // Advice only: failure (THP disabled, old kernel) leaves small pages.
            libc::madvise(start as *mut libc::c_void, size, libc::MADV_HUGEPAGE);
        }
        let layout = Layout::from_size_align(size, HUGE_PAGE).ok()?;
        Some(AlignedBuf { ptr: NonNull::new(start as *mut u8)?, layout, len, mapped: true })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for layout.size() >= len initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self guarantees exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: mapped in `mapped` with exactly this address and size.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.layout.size()) };
        } else {
            // SAFETY: allocated in `zeroed` with this exact layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_and_zeroing() {
        let b = AlignedBuf::zeroed(12345, 4096).unwrap();
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        assert_eq!(b.len(), 12345);
        assert!(b.as_slice().iter().all(|&x| x == 0));
    }

    #[test]
    fn large_buffers_are_huge_page_aligned() {
        let mut b = AlignedBuf::zeroed(16 << 20, 4096).unwrap();
        assert_eq!(b.as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(b.len(), 16 << 20);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[(16 << 20) - 1] = 7;
        assert_eq!(b.as_slice()[(16 << 20) - 1], 7);
    }

    #[test]
    fn zero_length_is_empty() {
        let b = AlignedBuf::zeroed(0, 4096).unwrap();
        assert!(b.is_empty());
        assert_eq!(b.as_slice().len(), 0);
    }

    #[test]
    fn bad_alignment_is_none() {
        assert!(AlignedBuf::zeroed(10, 3).is_none());
    }
}
