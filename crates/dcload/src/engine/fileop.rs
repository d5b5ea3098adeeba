//! fio's file-operation engines (`filecreate`, `filestat`, `filedelete`,
//! `dircreate`, `dirstat`, `dirdelete`): the I/O is a metadata operation on
//! each of the job's files in turn, and no data moves.
//!
//! The job's offsets run over its files end to end (`nrfiles` x
//! `filesize`); the first I/O that enters a file does the operation on it,
//! and the rest of that file's I/Os complete at once. With `bs=filesize`
//! (fio's examples) every I/O is one operation, so its latency is the
//! operation's. fio times only the operation and reports it as the job's
//! completion latency; dcload times each I/O around it (a create includes
//! its close), which differs by the loop's own few hundred nanoseconds.

use super::{OneAtATime, Op};
use dc_jobfile::{FileOp, StatType};
use dc_sys::AlignedBuf;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

pub struct FileOpEngine {
    op: FileOp,
    stat: StatType,
    /// The job's files (or directories), in the order its offsets reach them.
    paths: Vec<PathBuf>,
    filesize: u64,
    /// The file whose operation was done last.
    current: Option<usize>,
    buf: AlignedBuf,
}

impl FileOpEngine {
    /// `buf` holds one slot of any size; nothing is read or written through it.
    pub fn new(op: FileOp, stat: StatType, paths: Vec<PathBuf>, filesize: u64, buf: AlignedBuf) -> FileOpEngine {
        FileOpEngine { op, stat, paths, filesize, current: None, buf }
    }

    /// Makes what `op` needs to exist before the run (untimed, as fio's
    /// setup does): each file at its size (sparse) or each directory. A
    /// file or directory already there is used as it is.
    pub fn prepare(op: FileOp, paths: &[PathBuf], filesize: u64) -> io::Result<()> {
        if !op.needs_existing() {
            return Ok(());
        }
        for p in paths {
            if op.on_directories() {
                match std::fs::create_dir(p) {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                    _ => {}
                }
            } else {
                let f = std::fs::OpenOptions::new().write(true).create(true).truncate(false).mode(0o600).open(p)?;
                if f.metadata()?.len() < filesize {
                    f.set_len(filesize)?;
                }
            }
        }
        Ok(())
    }

    fn apply(&self, k: usize) -> io::Result<()> {
        let path = &self.paths[k];
        match self.op {
            FileOp::Create => {
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .mode(0o600)
                    .open(path)?;
                Ok(())
            }
            FileOp::Stat | FileOp::DirStat => match self.stat {
                StatType::Lstat => std::fs::symlink_metadata(path).map(drop),
                // std's metadata is statx(2) on Linux, falling back to stat(2).
                StatType::Stat | StatType::Statx => std::fs::metadata(path).map(drop),
            },
            FileOp::Delete => std::fs::remove_file(path),
            FileOp::DirCreate => std::fs::create_dir(path),
            FileOp::DirDelete => std::fs::remove_dir(path),
        }
    }
}

impl OneAtATime for FileOpEngine {
    fn buffer(&mut self) -> &mut [u8] {
        self.buf.as_mut_slice()
    }

    fn perform(&mut self, op: Op) -> Result<u32, i32> {
        let k = ((op.offset / self.filesize) as usize).min(self.paths.len() - 1);
        if self.current != Some(k) {
            self.current = Some(k);
            self.apply(k).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        }
        Ok(op.len)
    }
}
