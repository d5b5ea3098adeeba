//! An NFSv3 client through libnfs, the library fio's `nfs` engine uses, so
//! that dcload's `ioengine=nfs` sends what fio's sends: libnfs's own URL
//! options, READ and WRITE sizes, UNSTABLE writes and COMMIT on fsync.
//!
//! A [`Mount`] is one libnfs context: one TCP connection to the server,
//! used from one thread. Synchronous calls (`open`, `pwrite`, `fsync`, ...)
//! wait for their reply; `start_pread`/`start_pwrite` queue a request and
//! [`Mount::reap`] collects the replies, as fio's engine does for
//! `iodepth` > 1.

mod ffi;

use std::ffi::{CStr, CString};
use std::fmt;
use std::io;
use std::os::raw::{c_int, c_void};

/// A failed call: the errno libnfs returned and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub errno: i32,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::new(io::Error::from_raw_os_error(e.errno).kind(), e.message)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// An open file on the server; closed with [`Mount::close`].
pub struct NfsFile {
    fh: *mut ffi::nfsfh,
}

/// A queued request's reply: the caller's token and bytes moved, or errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    pub token: u64,
    pub result: std::result::Result<u32, i32>,
}

/// What a queued request's callback needs; boxed, owned by libnfs until
/// the callback runs.
struct Request {
    done: *mut Vec<Done>,
    /// Where a read's bytes go (null for a write) and how many fit.
    dst: *mut u8,
    cap: usize,
    token: u64,
}

pub struct Mount {
    ctx: *mut ffi::nfs_context,
    /// Replies collected by callbacks. Boxed: the callbacks hold the Vec's
    /// own address, which must not move when the Mount does.
    #[allow(clippy::box_collection)]
    done: Box<Vec<Done>>,
    in_flight: usize,
}

fn cstring(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error { errno: libc::EINVAL, message: format!("{s:?} contains a NUL byte") })
}

impl Mount {
    /// Connects to the export an `nfs://server[:port]/export[?arg=val...]`
    /// URL names and mounts it. The URL's arguments are libnfs's
    /// (`nfsport=`, `mountport=`, `uid=`, `version=`, ...): as in fio, the
    /// whole path is the export.
    pub fn connect(url: &str) -> Result<Mount> {
        // SAFETY: no arguments; a null return is checked.
        let ctx = unsafe { ffi::nfs_init_context() };
        if ctx.is_null() {
            return Err(Error { errno: libc::ENOMEM, message: "libnfs: cannot create a context".into() });
        }
        let m = Mount { ctx, done: Box::default(), in_flight: 0 };
        let c_url = cstring(url)?;
        // SAFETY: ctx is live; c_url is a valid C string for the call.
        let parsed = unsafe { ffi::nfs_parse_url_dir(ctx, c_url.as_ptr()) };
        if parsed.is_null() {
            return Err(m.error(-libc::EINVAL, &format!("{url}: not an NFS URL (nfs://server/export[?arg=val])")));
        }
        // SAFETY: parsed is the non-null result of nfs_parse_url_dir, whose
        // server and path are C strings (or null) until nfs_destroy_url.
        let r = unsafe {
            let (server, path) = ((*parsed).server, (*parsed).path);
            let r = if server.is_null() || path.is_null() { -libc::EINVAL } else { ffi::nfs_mount(ctx, server, path) };
            ffi::nfs_destroy_url(parsed);
            r
        };
        m.check(r, &format!("mount {url}"))?;
        Ok(m)
    }

    /// The error of a call that returned `r` (< 0), with libnfs's message.
    fn error(&self, r: c_int, what: &str) -> Error {
        // SAFETY: ctx is live; nfs_get_error returns a C string or null.
        let msg = unsafe { ffi::nfs_get_error(self.ctx) };
        let detail = if msg.is_null() {
            String::new()
        } else {
            // SAFETY: non-null, NUL-terminated, owned by the context.
            unsafe { CStr::from_ptr(msg) }.to_string_lossy().into_owned()
        };
        let errno = if r < 0 { -r } else { libc::EIO };
        let detail = if detail.is_empty() { io::Error::from_raw_os_error(errno).to_string() } else { detail };
        Error { errno, message: format!("{what}: {detail}") }
    }

    fn check(&self, r: c_int, what: &str) -> Result<c_int> {
        if r < 0 {
            Err(self.error(r, what))
        } else {
            Ok(r)
        }
    }

    /// The largest WRITE the server takes in one request.
    pub fn write_max(&self) -> u64 {
        // SAFETY: ctx is live.
        unsafe { ffi::nfs_get_writemax(self.ctx) }
    }

    /// open(2) of `path` (relative to the export) with open(2) flags.
    pub fn open(&mut self, path: &str, flags: i32, mode: u32) -> Result<NfsFile> {
        let c = cstring(path)?;
        let mut fh = std::ptr::null_mut();
        // SAFETY: ctx is live, c is a valid C string, fh is a valid out pointer.
        let r = unsafe { ffi::nfs_open2(self.ctx, c.as_ptr(), flags, mode as c_int, &mut fh) };
        self.check(r, &format!("open {path}"))?;
        Ok(NfsFile { fh })
    }

    pub fn close(&mut self, f: NfsFile) -> Result<()> {
        // SAFETY: ctx is live and f.fh came from nfs_open2 on it; f is consumed.
        let r = unsafe { ffi::nfs_close(self.ctx, f.fh) };
        self.check(r, "close").map(drop)
    }

    pub fn pwrite(&mut self, f: &NfsFile, buf: &[u8], offset: u64) -> Result<usize> {
        // SAFETY: buf is valid for buf.len() bytes for the whole (synchronous) call.
        let r = unsafe { ffi::nfs_pwrite(self.ctx, f.fh, offset, buf.len() as u64, buf.as_ptr().cast()) };
        self.check(r, "write").map(|n| n as usize)
    }

    pub fn pread(&mut self, f: &NfsFile, buf: &mut [u8], offset: u64) -> Result<usize> {
        // SAFETY: buf is valid for writes of buf.len() bytes for the whole call.
        let r = unsafe { ffi::nfs_pread(self.ctx, f.fh, offset, buf.len() as u64, buf.as_mut_ptr().cast()) };
        self.check(r, "read").map(|n| n as usize)
    }

    /// COMMIT: the server's stable storage has every byte written so far.
    pub fn fsync(&mut self, f: &NfsFile) -> Result<()> {
        // SAFETY: ctx live, f open on it.
        let r = unsafe { ffi::nfs_fsync(self.ctx, f.fh) };
        self.check(r, "fsync (COMMIT)").map(drop)
    }

    pub fn ftruncate(&mut self, f: &NfsFile, len: u64) -> Result<()> {
        // SAFETY: ctx live, f open on it.
        let r = unsafe { ffi::nfs_ftruncate(self.ctx, f.fh, len) };
        self.check(r, "ftruncate").map(drop)
    }

    pub fn size(&mut self, f: &NfsFile) -> Result<u64> {
        let mut st = ffi::nfs_stat_64::default();
        // SAFETY: ctx live, f open on it, st a valid out pointer.
        let r = unsafe { ffi::nfs_fstat64(self.ctx, f.fh, &mut st) };
        self.check(r, "fstat")?;
        Ok(st.nfs_size)
    }

    pub fn unlink(&mut self, path: &str) -> Result<()> {
        let c = cstring(path)?;
        // SAFETY: ctx live, c a valid C string.
        let r = unsafe { ffi::nfs_unlink(self.ctx, c.as_ptr()) };
        self.check(r, &format!("unlink {path}")).map(drop)
    }

    /// Requests queued and not yet reaped (answered or not).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Queues a WRITE of `len` bytes at `buf`; its reply carries `token`.
    ///
    /// # Safety
    /// `buf` must stay valid and unchanged until the reply is reaped.
    pub unsafe fn start_pwrite(
        &mut self,
        f: &NfsFile,
        buf: *const u8,
        len: usize,
        offset: u64,
        token: u64,
    ) -> Result<()> {
        let req = self.request(std::ptr::null_mut(), 0, token);
        // SAFETY: the caller keeps buf valid; req is handed to the callback,
        // which frees it; ctx live, f open on it.
        let r = unsafe { ffi::nfs_pwrite_async(self.ctx, f.fh, offset, len as u64, buf.cast(), on_reply, req) };
        self.queued(r, req, "write")
    }

    /// Queues a READ of up to `len` bytes into `buf`; its reply carries `token`.
    ///
    /// # Safety
    /// `buf` must stay valid for writes of `len` bytes until the reply is reaped.
    pub unsafe fn start_pread(&mut self, f: &NfsFile, buf: *mut u8, len: usize, offset: u64, token: u64) -> Result<()> {
        let req = self.request(buf, len, token);
        // SAFETY: as in start_pwrite.
        let r = unsafe { ffi::nfs_pread_async(self.ctx, f.fh, offset, len as u64, on_reply, req) };
        self.queued(r, req, "read")
    }

    fn request(&mut self, dst: *mut u8, cap: usize, token: u64) -> *mut c_void {
        let done: *mut Vec<Done> = &mut *self.done;
        Box::into_raw(Box::new(Request { done, dst, cap, token })).cast()
    }

    fn queued(&mut self, r: c_int, req: *mut c_void, what: &str) -> Result<()> {
        if r < 0 {
            // SAFETY: libnfs refused the request, so the callback will not
            // run and req (from Box::into_raw in `request`) is still ours.
            drop(unsafe { Box::from_raw(req.cast::<Request>()) });
            return Err(self.error(r, what));
        }
        self.in_flight += 1;
        Ok(())
    }

    /// Waits until at least `min` replies (no more than are in flight) have
    /// come, and appends every reply that has.
    pub fn reap(&mut self, min: usize, out: &mut Vec<Done>) -> Result<()> {
        let min = min.min(self.in_flight);
        while self.done.len() < min {
            // SAFETY: ctx is live.
            let (fd, events) = unsafe { (ffi::nfs_get_fd(self.ctx), ffi::nfs_which_events(self.ctx)) };
            let mut pfd = libc::pollfd { fd, events: events as i16, revents: 0 };
            // SAFETY: pfd is one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, -1) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(Error { errno: e.raw_os_error().unwrap_or(libc::EIO), message: format!("poll: {e}") });
            }
            // SAFETY: ctx is live; callbacks it runs write only to self.done.
            let r = unsafe { ffi::nfs_service(self.ctx, pfd.revents as c_int) };
            self.check(r, "the connection to the server failed")?;
        }
        self.in_flight -= self.done.len();
        out.append(&mut self.done);
        Ok(())
    }
}

extern "C" fn on_reply(status: c_int, _nfs: *mut ffi::nfs_context, data: *mut c_void, private: *mut c_void) {
    // SAFETY: private is the Request that `Mount::request` boxed for this
    // reply; libnfs calls back exactly once per queued request.
    let req = unsafe { Box::from_raw(private.cast::<Request>()) };
    let result = if status < 0 {
        Err(-status)
    } else {
        let n = (status as usize).min(if req.dst.is_null() { usize::MAX } else { req.cap });
        if !req.dst.is_null() && n > 0 {
            // SAFETY: a read's data holds `status` bytes; dst has room for
            // cap >= n bytes (start_pread's contract); they do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(data.cast::<u8>(), req.dst, n) };
        }
        Ok(n as u32)
    };
    // SAFETY: done points into the Mount's box, alive while requests are
    // in flight (Drop destroys the context, and with it every callback).
    unsafe { (*req.done).push(Done { token: req.token, result }) };
}

impl Drop for Mount {
    fn drop(&mut self) {
        // SAFETY: ctx is live and dropped once; umount tells the server we
        // are gone, as fio's engine does, and its failure changes nothing.
        unsafe {
            ffi::nfs_umount(self.ctx);
            ffi::nfs_destroy_context(self.ctx);
        }
    }
}
