//! POSIX asynchronous I/O (`aio_read(3)`, `aio_write(3)`, `aio_error(3)`,
//! `aio_return(3)`, `aio_suspend(3)`, `aio_cancel(3)`): glibc's, which does
//! each request with pread/pwrite on threads of its own. Not system calls,
//! but one wrapper per call all the same, errno intact.
//!
//! A request's control block is written by glibc's thread while the request
//! runs, so it lives in an `UnsafeCell` and is only ever handed on as a raw
//! pointer; the caller keeps it (and the buffer) in place until `error` says
//! the request is done.

use std::cell::UnsafeCell;
use std::io;
use std::os::fd::RawFd;

// glibc exports these from libc.so since 2.34 (librt before); the libc crate
// declares the control block but not the calls on Linux.
extern "C" {
    fn aio_read(cb: *mut libc::aiocb) -> libc::c_int;
    fn aio_write(cb: *mut libc::aiocb) -> libc::c_int;
    fn aio_error(cb: *const libc::aiocb) -> libc::c_int;
    fn aio_return(cb: *mut libc::aiocb) -> libc::ssize_t;
    fn aio_suspend(list: *const *const libc::aiocb, nent: libc::c_int, timeout: *const libc::timespec) -> libc::c_int;
    fn aio_cancel(fd: libc::c_int, cb: *mut libc::aiocb) -> libc::c_int;
}

/// One request's control block (`struct aiocb`). Transparent, so a
/// reference to it is a pointer to the `aiocb` (see [`suspend`]).
#[repr(transparent)]
pub struct AioCb(UnsafeCell<libc::aiocb>);

impl Default for AioCb {
    fn default() -> AioCb {
        // SAFETY: aiocb is plain data for which all-zero is the documented
        // initial state (no notification, priority 0).
        AioCb(UnsafeCell::new(unsafe { std::mem::zeroed() }))
    }
}

impl AioCb {
    fn ptr(&self) -> *mut libc::aiocb {
        self.0.get()
    }

    /// Sets up a request of `len` bytes at `offset` of `fd` from or into
    /// `buf`, to be started by [`read`] or [`write`].
    ///
    /// # Safety
    /// The block must not be in use by a request that is not done.
    pub unsafe fn prepare(&self, fd: RawFd, buf: *mut u8, len: usize, offset: u64) {
        // SAFETY: no request uses the block (the caller's promise), so
        // nothing else reads or writes it now.
        let cb = unsafe { &mut *self.ptr() };
        // SAFETY: all-zero is a valid aiocb (see `Default`).
        *cb = unsafe { std::mem::zeroed() };
        cb.aio_fildes = fd;
        cb.aio_buf = buf.cast();
        cb.aio_nbytes = len;
        cb.aio_offset = offset as libc::off_t;
        cb.aio_sigevent.sigev_notify = libc::SIGEV_NONE;
    }
}

/// `aio_read(3)` of the request `cb` was prepared for.
///
/// # Safety
/// `cb` and the buffer it names stay in place, and the buffer unread and
/// unwritten by the caller, until [`error`] returns something other than
/// `EINPROGRESS` (or [`cancel`] and then `error` say it is over).
pub unsafe fn read(cb: &AioCb) -> io::Result<()> {
    // SAFETY: the block is initialised by `prepare`; lifetimes are the caller's promise.
    if unsafe { aio_read(cb.ptr()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `aio_write(3)`; as [`read`].
///
/// # Safety
/// As [`read`].
pub unsafe fn write(cb: &AioCb) -> io::Result<()> {
    // SAFETY: as in `read`.
    if unsafe { aio_write(cb.ptr()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `aio_error(3)`: 0 when the request succeeded, `EINPROGRESS` while it
/// runs, `ECANCELED` or its errno otherwise.
pub fn error(cb: &AioCb) -> i32 {
    // SAFETY: aio_error only reads the block, which `cb` keeps alive.
    unsafe { aio_error(cb.ptr()) }
}

/// `aio_return(3)` of a request that is done: the bytes it moved, or its
/// errno. Call once per request, after [`error`] said it is done.
pub fn result(cb: &AioCb) -> Result<usize, i32> {
    // The errno is read first: after aio_return, aio_error's answer is
    // undefined.
    let errno = error(cb);
    // SAFETY: the block is alive; glibc reads its final status and releases
    // its own bookkeeping for the request.
    let n = unsafe { aio_return(cb.ptr()) };
    match (n, errno) {
        (n, _) if n >= 0 => Ok(n as usize),
        (_, 0) => Err(libc::EIO),
        (_, e) => Err(e),
    }
}

/// `aio_suspend(3)`: waits until one of `list`'s requests is done (`None`
/// entries are skipped, as glibc skips null ones). `EINTR` comes back as an
/// error.
pub fn suspend(list: &[Option<&AioCb>]) -> io::Result<()> {
    // `Option<&AioCb>` is a nullable pointer to a transparent wrapper of
    // `aiocb`: the slice is the array of (possibly null) pointers glibc takes.
    let ptrs = list.as_ptr() as *const *const libc::aiocb;
    // SAFETY: the blocks are borrowed for the call; a null timeout waits
    // without end.
    let r = unsafe { aio_suspend(ptrs, list.len() as libc::c_int, std::ptr::null()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `aio_cancel(3)` of every request on `fd`: `AIO_CANCELED`,
/// `AIO_NOTCANCELED` (some still run: wait for them) or `AIO_ALLDONE`.
pub fn cancel(fd: RawFd) -> io::Result<i32> {
    // SAFETY: a null block cancels by descriptor and touches no memory of ours.
    let r = unsafe { aio_cancel(fd, std::ptr::null_mut()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn wait(cb: &AioCb) {
        while error(cb) == libc::EINPROGRESS {
            suspend(&[Some(cb)])
                .or_else(|e| if e.raw_os_error() == Some(libc::EINTR) { Ok(()) } else { Err(e) })
                .unwrap();
        }
    }

    #[test]
    fn a_write_and_a_read_complete_and_an_error_keeps_its_errno() {
        let path = std::env::temp_dir().join(format!("dc-posix-aio-{}", std::process::id()));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        let mut data = *b"posix aio";
        let cb = AioCb::default();
        // SAFETY: `cb` and `data` outlive the request, waited for below.
        unsafe {
            cb.prepare(f.as_raw_fd(), data.as_mut_ptr(), data.len(), 4096);
            write(&cb).unwrap();
        }
        wait(&cb);
        assert_eq!(result(&cb), Ok(9));
        let mut back = [0u8; 16];
        // SAFETY: as above.
        unsafe {
            cb.prepare(f.as_raw_fd(), back.as_mut_ptr(), back.len(), 4096);
            read(&cb).unwrap();
        }
        wait(&cb);
        assert_eq!(result(&cb), Ok(9), "a read at the end is short, as pread's");
        assert_eq!(&back[..9], b"posix aio");
        let ro = std::fs::File::open(&path).unwrap();
        // SAFETY: as above.
        unsafe {
            cb.prepare(ro.as_raw_fd(), data.as_mut_ptr(), data.len(), 0);
            write(&cb).unwrap();
        }
        wait(&cb);
        assert_eq!(result(&cb), Err(libc::EBADF), "a write on a read-only descriptor");
        std::fs::remove_file(&path).unwrap();
    }
}
