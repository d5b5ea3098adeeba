//! Page-aligned I/O buffers: `O_DIRECT` needs the memory aligned to the
//! device's DMA alignment, and page alignment satisfies every device.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// A zero-initialised heap buffer with a fixed alignment.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    /// The allocation (at least one byte: zero-size allocations are not allowed).
    layout: Layout,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `len` zeroed bytes aligned to `align` (a power of two). `None` if the
    /// layout is invalid or the allocation fails.
    pub fn zeroed(len: usize, align: usize) -> Option<AlignedBuf> {
        let layout = Layout::from_size_align(len.max(1), align).ok()?;
        // SAFETY: the layout has non-zero size.
        let ptr = NonNull::new(unsafe { alloc::alloc_zeroed(layout) })?;
        Some(AlignedBuf { ptr, layout, len })
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
        // SAFETY: allocated in `zeroed` with this exact layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
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
