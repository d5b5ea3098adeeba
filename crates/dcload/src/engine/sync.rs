//! `psync` (pread/pwrite) and `pvsync2` (preadv2/pwritev2 with `RWF_*`
//! flags): one I/O at a time, done in the caller's thread. With
//! `writebehind=<policy>` the I/O goes through a libdontcache handle instead,
//! so every policy is measured by the same loop and statistics.

use super::{OneAtATime, Op, RwFlags};
use crate::engine::Dir;
use dc_sys::AlignedBuf;
use dontcache::{Handle, Options, Pending, Policy};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;

enum Target {
    /// `rwf`: `Some(flags)` for pvsync2 (flags may be 0), `None` for psync.
    Plain { file: File, rwf: Option<RwFlags> },
    /// The handle is taken by `finish`, which closes it and waits for its
    /// writeback; the options open the next file's handle (nrfiles), and
    /// `closed` holds the writeback of the files closed before (waited for
    /// by `finish`, so the flusher batches them meanwhile).
    WriteBehind { handle: Option<Handle>, opts: Options, closed: Vec<Pending> },
}

pub struct SyncEngine {
    target: Target,
    buf: AlignedBuf,
}

impl SyncEngine {
    pub fn new(file: File, buf: AlignedBuf, rwf: Option<RwFlags>) -> SyncEngine {
        SyncEngine { target: Target::Plain { file, rwf }, buf }
    }

    /// Takes over `file`; `DONTCACHE_HIGH_WATER` and `DONTCACHE_SUBMIT` apply.
    pub fn write_behind(file: File, buf: AlignedBuf, policy: Policy) -> io::Result<SyncEngine> {
        let env = Options::from_env().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let opts = Options { policy, ..env };
        let handle = adopt(file, opts)?;
        Ok(SyncEngine { target: Target::WriteBehind { handle: Some(handle), opts, closed: Vec::new() }, buf })
    }
}

/// Waits for the writeback of every file in `closed`; the first error.
// Not try_fold: every file is waited for, also after one has failed.
#[allow(clippy::manual_try_fold)]
pub fn wait_all(closed: Vec<Pending>) -> io::Result<()> {
    closed.into_iter().map(Pending::wait).fold(Ok(()), |acc, r| acc.and(r))
}

/// The handle takes the file's descriptor for good: no duplicate, and the
/// library closes it after the file's writeback.
fn adopt(file: File, opts: Options) -> io::Result<Handle> {
    Handle::own(file.into(), opts)
}

impl OneAtATime for SyncEngine {
    fn buffer(&mut self) -> &mut [u8] {
        self.buf.as_mut_slice()
    }

    fn perform(&mut self, op: Op) -> Result<u32, i32> {
        let len = op.len as usize;
        let (data, off) = (&mut self.buf.as_mut_slice()[..len], op.offset);
        let res = match (&self.target, op.dir) {
            (Target::Plain { file, rwf: None }, Dir::Read) => dc_sys::pread(file.as_fd(), data, off),
            (Target::Plain { file, rwf: None }, Dir::Write) => dc_sys::pwrite(file.as_fd(), data, off),
            (Target::Plain { file, rwf: Some(f) }, Dir::Read) => dc_sys::preadv2(file.as_fd(), data, off, f.read),
            (Target::Plain { file, rwf: Some(f) }, Dir::Write) => dc_sys::pwritev2(file.as_fd(), data, off, f.write),
            (Target::WriteBehind { handle: Some(h), .. }, Dir::Read) => h.pread(data, off),
            (Target::WriteBehind { handle: Some(h), .. }, Dir::Write) => h.pwrite(data, off),
            (Target::WriteBehind { handle: None, .. }, _) => Err(io::Error::from_raw_os_error(libc::EBADF)),
            (_, Dir::Trim) => Err(super::no_trim()),
        };
        res.map(|n| n as u32).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
    }

    fn finish(&mut self) -> io::Result<()> {
        match &mut self.target {
            Target::WriteBehind { handle, closed, .. } => {
                let last = handle.take().map_or(Ok(()), Handle::close_and_wait);
                wait_all(std::mem::take(closed)).and(last)
            }
            Target::Plain { .. } => Ok(()),
        }
    }

    fn retarget(&mut self, file: File) -> io::Result<()> {
        match &mut self.target {
            Target::Plain { file: f, .. } => *f = file, // the old file closes here
            Target::WriteBehind { handle, opts, closed } => {
                // Closed as a program closes a file: the flusher writes it
                // back with the next ones, batched; `finish` waits for all.
                if let Some(h) = handle.take() {
                    let (r, pending) = h.close_deferred();
                    closed.push(pending);
                    r?;
                }
                *handle = Some(adopt(file, *opts)?);
            }
        }
        Ok(())
    }
}

impl Drop for SyncEngine {
    fn drop(&mut self) {
        // A job that failed before `finish` still closes its handle.
        let _ = self.finish();
    }
}
