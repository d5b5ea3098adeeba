#![allow(non_camel_case_types)]
//! libnfs 4's calls, as declared in <nfsc/libnfs.h>. Every call that can
//! fail returns a negative errno and leaves a message for `nfs_get_error`.

use libc::{c_char, c_int, c_void};

#[repr(C)]
pub struct nfs_context {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct nfsfh {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct nfs_url {
    pub server: *mut c_char,
    pub path: *mut c_char,
    pub file: *mut c_char,
}

/// A completion: `status` is bytes (reads, writes) or 0, or a negative
/// errno; `data` is the bytes read, or the error's message.
pub type nfs_cb = extern "C" fn(status: c_int, nfs: *mut nfs_context, data: *mut c_void, private_data: *mut c_void);

#[link(name = "nfs")]
extern "C" {
    pub fn nfs_init_context() -> *mut nfs_context;
    pub fn nfs_destroy_context(nfs: *mut nfs_context);
    pub fn nfs_get_error(nfs: *mut nfs_context) -> *mut c_char;
    pub fn nfs_get_fd(nfs: *mut nfs_context) -> c_int;
    pub fn nfs_which_events(nfs: *mut nfs_context) -> c_int;
    pub fn nfs_service(nfs: *mut nfs_context, revents: c_int) -> c_int;
    pub fn nfs_parse_url_dir(nfs: *mut nfs_context, url: *const c_char) -> *mut nfs_url;
    pub fn nfs_destroy_url(url: *mut nfs_url);
    pub fn nfs_get_writemax(nfs: *mut nfs_context) -> u64;
    pub fn nfs_mount(nfs: *mut nfs_context, server: *const c_char, exportname: *const c_char) -> c_int;
    pub fn nfs_umount(nfs: *mut nfs_context) -> c_int;
    pub fn nfs_open2(
        nfs: *mut nfs_context,
        path: *const c_char,
        flags: c_int,
        mode: c_int,
        fh: *mut *mut nfsfh,
    ) -> c_int;
    pub fn nfs_close(nfs: *mut nfs_context, fh: *mut nfsfh) -> c_int;
    pub fn nfs_pread(nfs: *mut nfs_context, fh: *mut nfsfh, offset: u64, count: u64, buf: *mut c_void) -> c_int;
    pub fn nfs_pwrite(nfs: *mut nfs_context, fh: *mut nfsfh, offset: u64, count: u64, buf: *const c_void) -> c_int;
    pub fn nfs_pread_async(
        nfs: *mut nfs_context,
        fh: *mut nfsfh,
        offset: u64,
        count: u64,
        cb: nfs_cb,
        private_data: *mut c_void,
    ) -> c_int;
    pub fn nfs_pwrite_async(
        nfs: *mut nfs_context,
        fh: *mut nfsfh,
        offset: u64,
        count: u64,
        buf: *const c_void,
        cb: nfs_cb,
        private_data: *mut c_void,
    ) -> c_int;
    pub fn nfs_fsync(nfs: *mut nfs_context, fh: *mut nfsfh) -> c_int;
    pub fn nfs_ftruncate(nfs: *mut nfs_context, fh: *mut nfsfh, length: u64) -> c_int;
    pub fn nfs_fstat64(nfs: *mut nfs_context, fh: *mut nfsfh, st: *mut nfs_stat_64) -> c_int;
    pub fn nfs_unlink(nfs: *mut nfs_context, path: *const c_char) -> c_int;
}

/// `struct nfs_stat_64`: only the size is read here, the rest keeps the layout.
#[repr(C)]
#[derive(Default)]
pub struct nfs_stat_64 {
    pub nfs_dev: u64,
    pub nfs_ino: u64,
    pub nfs_mode: u64,
    pub nfs_nlink: u64,
    pub nfs_uid: u64,
    pub nfs_gid: u64,
    pub nfs_rdev: u64,
    pub nfs_size: u64,
    pub nfs_blksize: u64,
    pub nfs_blocks: u64,
    pub nfs_atime: u64,
    pub nfs_mtime: u64,
    pub nfs_ctime: u64,
    pub nfs_atime_nsec: u64,
    pub nfs_mtime_nsec: u64,
    pub nfs_ctime_nsec: u64,
    pub nfs_used: u64,
}
