//! Linux native asynchronous I/O (`io_setup`, `io_submit`, `io_getevents`,
//! `io_destroy`): what fio's `libaio` engine drives through libaio, here by
//! the system calls themselves, so no C library is needed. Layouts are
//! `include/uapi/linux/aio_abi.h`'s.

use std::io;
use std::os::fd::RawFd;

/// `IOCB_CMD_PREAD` and `IOCB_CMD_PWRITE`.
const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;
/// `IOCB_FLAG_IOPRIO`: `aio_reqprio` holds an I/O priority (Linux 4.18+).
const IOCB_FLAG_IOPRIO: u32 = 1 << 1;

/// One I/O control block (`struct iocb`, 64 bytes). The kernel reads it
/// during `io_submit` only; the buffer it names must stay valid until the
/// I/O's event is reaped.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Iocb {
    pub data: u64,
    // `aio_key` then `aio_rw_flags` on little-endian machines.
    #[cfg(target_endian = "little")]
    key: u32,
    #[cfg(target_endian = "little")]
    rw_flags: i32,
    #[cfg(target_endian = "big")]
    rw_flags: i32,
    #[cfg(target_endian = "big")]
    key: u32,
    opcode: u16,
    reqprio: i16,
    fildes: u32,
    buf: u64,
    nbytes: u64,
    offset: i64,
    reserved2: u64,
    flags: u32,
    resfd: u32,
}

impl Iocb {
    /// A read of `len` bytes at `offset` into `buf`, with `RWF_*` flags.
    pub fn pread(fd: RawFd, buf: *mut u8, len: usize, offset: u64, rw_flags: i32, data: u64) -> Iocb {
        Iocb::new(IOCB_CMD_PREAD, fd, buf as u64, len, offset, rw_flags, data)
    }

    /// A write of `len` bytes at `offset` from `buf`, with `RWF_*` flags.
    pub fn pwrite(fd: RawFd, buf: *const u8, len: usize, offset: u64, rw_flags: i32, data: u64) -> Iocb {
        Iocb::new(IOCB_CMD_PWRITE, fd, buf as u64, len, offset, rw_flags, data)
    }

    /// The same block with I/O priority `ioprio` (class << 13 | hint << 3 | level).
    pub fn with_ioprio(self, ioprio: u16) -> Iocb {
        Iocb { reqprio: ioprio as i16, flags: self.flags | IOCB_FLAG_IOPRIO, ..self }
    }

    fn new(opcode: u16, fd: RawFd, buf: u64, len: usize, offset: u64, rw_flags: i32, data: u64) -> Iocb {
        Iocb {
            data,
            opcode,
            rw_flags,
            fildes: fd as u32,
            buf,
            nbytes: len as u64,
            offset: offset as i64,
            ..Iocb::default()
        }
    }
}

/// One completion (`struct io_event`): the iocb's `data` and the result
/// (bytes, or a negative errno).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct AioEvent {
    pub data: u64,
    pub obj: u64,
    pub res: i64,
    pub res2: i64,
}

/// An AIO context of `nr_events` slots, destroyed on drop (which waits for
/// the I/O still in flight, as `io_destroy(2)` does).
#[derive(Debug)]
pub struct AioContext(libc::c_ulong);

impl AioContext {
    /// `io_setup(2)`: EAGAIN when `nr_events` exceeds what
    /// /proc/sys/fs/aio-max-nr leaves.
    pub fn new(nr_events: u32) -> io::Result<AioContext> {
        let mut ctx: libc::c_ulong = 0;
        // SAFETY: ctx is a valid out-pointer that starts at 0, as io_setup requires.
        let r = unsafe { libc::syscall(libc::SYS_io_setup, nr_events, &mut ctx as *mut libc::c_ulong) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(AioContext(ctx))
    }

    /// `io_submit(2)` of the blocks `iocbs` points to: how many were taken
    /// (fewer than given when the kernel stopped at one it could not queue).
    ///
    /// # Safety
    /// Each pointer must name a valid `Iocb` whose buffer stays valid (and,
    /// for reads, unaliased) until its event is reaped.
    pub unsafe fn submit(&self, iocbs: &mut [*mut Iocb]) -> io::Result<usize> {
        // SAFETY: the caller vouches for the blocks; the array is valid for its length.
        let r = unsafe { libc::syscall(libc::SYS_io_submit, self.0, iocbs.len() as libc::c_long, iocbs.as_mut_ptr()) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }

    /// `io_getevents(2)`: waits for at least `min` events and returns how
    /// many of `events` it filled.
    pub fn get_events(&self, min: usize, events: &mut [AioEvent]) -> io::Result<usize> {
        // SAFETY: events is a valid writable array of its length; no timeout (NULL).
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_getevents,
                self.0,
                min as libc::c_long,
                events.len() as libc::c_long,
                events.as_mut_ptr(),
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }
}

impl Drop for AioContext {
    fn drop(&mut self) {
        // SAFETY: the context is ours and destroyed once.
        unsafe { libc::syscall(libc::SYS_io_destroy, self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn layouts_are_the_kernels() {
        assert_eq!(std::mem::size_of::<Iocb>(), 64);
        assert_eq!(std::mem::size_of::<AioEvent>(), 32);
    }

    #[test]
    fn a_write_and_a_read_round_trip() {
        let path = std::env::temp_dir().join(format!("dc-sys-aio-{}", std::process::id()));
        let f = std::fs::OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&path).unwrap();
        let ctx = AioContext::new(4).unwrap();
        let data = vec![7u8; 8192];
        let mut w = Iocb::pwrite(f.as_raw_fd(), data.as_ptr(), data.len(), 4096, 0, 11);
        // SAFETY: the block and its buffer live until the event is reaped below.
        assert_eq!(unsafe { ctx.submit(&mut [&mut w as *mut Iocb]) }.unwrap(), 1);
        let mut ev = [AioEvent::default(); 4];
        assert_eq!(ctx.get_events(1, &mut ev).unwrap(), 1);
        assert_eq!((ev[0].data, ev[0].res), (11, 8192));
        let mut back = vec![0u8; 8192];
        let mut r = Iocb::pread(f.as_raw_fd(), back.as_mut_ptr(), back.len(), 4096, 0, 12);
        // SAFETY: as above.
        assert_eq!(unsafe { ctx.submit(&mut [&mut r as *mut Iocb]) }.unwrap(), 1);
        assert_eq!(ctx.get_events(1, &mut ev).unwrap(), 1);
        assert_eq!((ev[0].data, ev[0].res), (12, 8192));
        assert_eq!(back, data);
        // A bad descriptor comes back as the kernel's errno.
        let mut bad = Iocb::pread(-1, back.as_mut_ptr(), 512, 0, 0, 13);
        // SAFETY: as above.
        let e = unsafe { ctx.submit(&mut [&mut bad as *mut Iocb]) }.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        std::fs::remove_file(path).unwrap();
    }
}
