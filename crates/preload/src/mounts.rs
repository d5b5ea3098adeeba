//! Unmounts: a file the program closed may still be open in the library
//! (its duplicate, until the flusher is done with the file) or in
//! `dontcache run` (files the command's exited processes handed over), and
//! the filesystem would be busy (`EBUSY`) where without the library it is
//! not: `cp big /mnt/usb/ && umount /mnt/usb` failed under `dontcache run`.
//! So before an unmount both let go of every file there, written back
//! first, as the unmount's own sync would. A forced or lazy unmount
//! (`MNT_FORCE`, `MNT_DETACH`) does not wait: it does not fail for busy
//! files, and a forced one is often of a filesystem that no longer answers.
//! Nor does one while the program still has a tracked file open there: it
//! fails as without the library, whose duplicate of that file stays open.

use std::ffi::{c_char, c_int};

use crate::real;
use crate::table::{engine, inside, tracks_file_on};

/// Before the program unmounts the filesystem mounted at `target`.
fn before_unmount(target: *const c_char, flags: c_int) {
    if inside() || crate::in_vfork_child() || target.is_null() || flags & (libc::MNT_FORCE | libc::MNT_DETACH) != 0 {
        return;
    }
    // SAFETY: a C string, as the caller gives `umount(2)`.
    let bytes = unsafe { std::ffi::CStr::from_ptr(target) }.to_bytes();
    let path = std::path::Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bytes));
    engine(|| {
        let Ok(dev) = std::fs::metadata(path).map(|m| std::os::unix::fs::MetadataExt::dev(&m)) else { return };
        if tracks_file_on(dev) {
            return;
        }
        dontcache::release_filesystem(dev);
        dontcache::handoff::release_filesystem(dev);
    });
}

#[no_mangle]
pub unsafe extern "C" fn umount(target: *const c_char) -> c_int {
    before_unmount(target, 0);
    real::umount()(target)
}

#[no_mangle]
pub unsafe extern "C" fn umount2(target: *const c_char, flags: c_int) -> c_int {
    before_unmount(target, flags);
    real::umount2()(target, flags)
}
