//! io_uring: one ring per job instance, `iodepth` I/Os in flight, all SQEs
//! prepared since the last submit handed over in one `io_uring_enter`.

use super::{Completion, Dir, Engine, Op};
use dc_sys::AlignedBuf;
use io_uring::{opcode, types, IoUring};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

pub struct UringEngine {
    ring: IoUring,
    file: File,
    bufs: Vec<AlignedBuf>,
    rw_flags: i32,
    queued: usize,
}

impl UringEngine {
    pub fn new(file: File, bufs: Vec<AlignedBuf>, rw_flags: i32) -> io::Result<UringEngine> {
        let entries = bufs.len().next_power_of_two().max(2) as u32;
        let ring = IoUring::new(entries)?;
        Ok(UringEngine { ring, file, bufs, rw_flags, queued: 0 })
    }
}

impl Engine for UringEngine {
    fn depth(&self) -> usize {
        self.bufs.len()
    }

    fn is_sync(&self) -> bool {
        false
    }

    fn buffer(&mut self, slot: usize) -> &mut [u8] {
        self.bufs[slot].as_mut_slice()
    }

    fn start(&mut self, slot: usize, op: Op) -> io::Result<()> {
        let fd = types::Fd(self.file.as_raw_fd());
        let buf = &mut self.bufs[slot];
        let sqe = match op.dir {
            Dir::Read => opcode::Read::new(fd, buf.as_mut_ptr(), op.len)
                .offset(op.offset)
                .rw_flags(self.rw_flags)
                .build(),
            Dir::Write => opcode::Write::new(fd, buf.as_ptr(), op.len)
                .offset(op.offset)
                .rw_flags(self.rw_flags)
                .build(),
        }
        .user_data(slot as u64);
        // SAFETY: the buffer is owned by self and not touched by the worker until
        // this slot's completion has been reaped; the ring has one SQE per slot.
        unsafe { self.ring.submission().push(&sqe) }
            .map_err(|_| io::Error::other("io_uring submission queue full (more I/Os than slots)"))?;
        self.queued += 1;
        Ok(())
    }

    fn submit(&mut self) -> io::Result<()> {
        if self.queued > 0 {
            self.ring.submit()?;
            self.queued = 0;
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        if min > 0 && self.ring.completion().is_empty() {
            loop {
                match self.ring.submit_and_wait(min) {
                    Ok(_) => break,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        for cqe in self.ring.completion() {
            let res = cqe.result();
            out.push(Completion {
                slot: cqe.user_data() as usize,
                result: if res < 0 { Err(-res) } else { Ok(res as u32) },
            });
        }
        Ok(())
    }
}
