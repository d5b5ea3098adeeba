//! ext4's extent-moving ioctl, for fio's `e4defrag` engine.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `struct move_extent` of linux/ext4.h (`EXT4_IOC_MOVE_EXT`'s argument).
#[repr(C)]
#[derive(Default)]
struct MoveExtent {
    reserved: u32,
    donor_fd: u32,
    orig_start: u64,
    donor_start: u64,
    len: u64,
    moved_len: u64,
}

/// `_IOWR('f', 15, struct move_extent)`: read-write, 40 bytes, type 'f', number 15.
const EXT4_IOC_MOVE_EXT: libc::c_ulong =
    (3 << 30) | ((std::mem::size_of::<MoveExtent>() as libc::c_ulong) << 16) | (0x66 << 8) | 15;

/// `ioctl(orig, EXT4_IOC_MOVE_EXT)`: moves `len` blocks of `donor` from
/// block `donor_start` into `orig` at block `orig_start` (what e4defrag
/// does to defragment a file: the data stays, its blocks become the
/// donor's). Both files on one ext4; `orig` open for reading and writing,
/// `donor` for writing. Returns the blocks moved, which may be fewer than
/// asked at the end of `orig`.
pub fn move_extent(
    orig: BorrowedFd<'_>,
    donor: BorrowedFd<'_>,
    orig_start: u64,
    donor_start: u64,
    len: u64,
) -> io::Result<u64> {
    let mut me = MoveExtent { donor_fd: donor.as_raw_fd() as u32, orig_start, donor_start, len, ..Default::default() };
    // SAFETY: me is a valid, initialized move_extent the kernel reads and updates in place.
    if unsafe { libc::ioctl(orig.as_raw_fd(), EXT4_IOC_MOVE_EXT, &mut me as *mut MoveExtent) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(me.moved_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_number_is_the_kernels() {
        assert_eq!(std::mem::size_of::<MoveExtent>(), 40);
        assert_eq!(EXT4_IOC_MOVE_EXT, 0xC028_660F);
    }
}
