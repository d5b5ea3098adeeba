//! The job's file outside the engine's queue: syncs, the rest of a short
//! write, verify's read-back and the page cache the job left behind.

use crate::engine::NfsTarget;
use dc_sys::CacheStat;
use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::rc::Rc;

pub enum Side {
    /// A second descriptor of the local file the engine works on.
    Local(File),
    /// The NFS engine's connection and file.
    Nfs(Rc<RefCell<NfsTarget>>),
}

impl Side {
    /// fsync (fdatasync with `data_only`); over NFS, COMMIT.
    pub fn sync(&self, data_only: bool) -> io::Result<()> {
        match self {
            Side::Local(f) if data_only => f.sync_data(),
            Side::Local(f) => f.sync_all(),
            Side::Nfs(t) => t.borrow_mut().sync(),
        }
    }

    pub fn pread(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        match self {
            Side::Local(f) => dc_sys::pread(f.as_fd(), buf, off),
            Side::Nfs(t) => t.borrow_mut().pread(buf, off),
        }
    }

    pub fn pwrite(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        match self {
            Side::Local(f) => dc_sys::pwrite(f.as_fd(), buf, off),
            Side::Nfs(t) => t.borrow_mut().pwrite(buf, off),
        }
    }

    /// fio's `invalidate`: drop the file's clean cached pages (dirty ones
    /// are only queued for writeback); nothing for a file on a server.
    pub fn invalidate(&self) {
        if let Side::Local(f) = self {
            let _ = dc_sys::fadvise(f.as_fd(), 0, 0, dc_sys::Advice::DontNeed);
        }
    }

    /// The file's residency in this machine's page cache; none for a file
    /// on a server (whose cache the client cannot see).
    pub fn cachestat(&self) -> Option<CacheStat> {
        match self {
            Side::Local(f) => dc_sys::cachestat(f.as_fd(), 0, 0).ok(),
            Side::Nfs(_) => None,
        }
    }
}
