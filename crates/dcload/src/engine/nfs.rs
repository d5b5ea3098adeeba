//! fio's `nfs` engine: one file on an NFSv3 server, through libnfs, each
//! job instance on its own connection. Up to `iodepth` READs and WRITEs are
//! in flight; the server's io mode, not the client, decides what its page
//! cache keeps.

use super::{Completion, Engine, Op};
use crate::engine::Dir;
use dc_nfs::{Done, Mount, NfsFile};
use dc_sys::AlignedBuf;
use std::cell::RefCell;
use std::io;
use std::rc::Rc;

/// The connection and the open file, shared by the engine (its queue) and
/// the worker's side calls (syncs, verify reads); one thread uses both.
pub struct NfsTarget {
    mount: Mount,
    file: Option<NfsFile>,
    /// The file's path inside the export, for messages.
    pub path: String,
}

impl NfsTarget {
    /// Connects to `url`'s export and opens `path` in it: created if
    /// `create` (a job that writes), as fio's engine does.
    pub fn open(url: &str, path: &str, create: bool) -> io::Result<NfsTarget> {
        let mut mount = Mount::connect(url)?;
        let flags = libc::O_RDWR | if create { libc::O_CREAT } else { 0 };
        let file = mount.open(path, flags, 0o644)?;
        Ok(NfsTarget { mount, file: Some(file), path: path.to_string() })
    }

    pub fn pread(&mut self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let f = self.file.as_ref().expect("open until dropped");
        Ok(self.mount.pread(f, buf, off)?)
    }

    pub fn pwrite(&mut self, buf: &[u8], off: u64) -> io::Result<usize> {
        let f = self.file.as_ref().expect("open until dropped");
        Ok(self.mount.pwrite(f, buf, off)?)
    }

    /// COMMIT (libnfs has one fsync; NFSv3 has no data-only commit).
    pub fn sync(&mut self) -> io::Result<()> {
        let f = self.file.as_ref().expect("open until dropped");
        Ok(self.mount.fsync(f)?)
    }
}

impl Drop for NfsTarget {
    fn drop(&mut self) {
        if let Some(f) = self.file.take() {
            let _ = self.mount.close(f);
        }
    }
}

pub struct NfsEngine {
    target: Rc<RefCell<NfsTarget>>,
    buf: AlignedBuf,
    bs: usize,
    depth: usize,
    replies: Vec<Done>,
}

impl NfsEngine {
    pub fn new(target: Rc<RefCell<NfsTarget>>, buf: AlignedBuf, bs: usize, depth: usize) -> NfsEngine {
        NfsEngine { target, buf, bs, depth, replies: Vec::with_capacity(depth) }
    }
}

impl Engine for NfsEngine {
    fn depth(&self) -> usize {
        self.depth
    }

    /// Every request waits for the server's reply: queued, then reaped.
    fn is_sync(&self) -> bool {
        false
    }

    fn buffer(&mut self, slot: usize) -> &mut [u8] {
        &mut self.buf.as_mut_slice()[slot * self.bs..(slot + 1) * self.bs]
    }

    fn start(&mut self, slot: usize, op: Op) -> io::Result<()> {
        let len = op.len as usize;
        let ptr = self.buffer(slot).as_mut_ptr();
        let mut t = self.target.borrow_mut();
        let t = &mut *t;
        let file = t.file.as_ref().expect("open until dropped");
        // SAFETY: the slot's buffer lives in self.buf, which is neither
        // moved nor reused for another I/O until this slot's reply is reaped
        // (the worker only refills a slot after its completion).
        let r = unsafe {
            match op.dir {
                Dir::Write => t.mount.start_pwrite(file, ptr, len, op.offset, slot as u64),
                Dir::Read => t.mount.start_pread(file, ptr, len, op.offset, slot as u64),
                Dir::Trim => return Err(super::no_trim()),
            }
        };
        Ok(r?)
    }

    fn submit(&mut self) -> io::Result<()> {
        // libnfs sends queued requests as it services the connection (reap).
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        self.target.borrow_mut().mount.reap(min, &mut self.replies)?;
        out.extend(self.replies.drain(..).map(|d| Completion { slot: d.token as usize, result: d.result }));
        Ok(())
    }
}
