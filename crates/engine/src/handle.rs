//! A handle: one caller file descriptor the library writes (and reads)
//! through. All the policy decisions of the write path live here.
//!
//! The handle does its I/O through the file state's own duplicate of the
//! caller's descriptor (same open file description: same position, same
//! flags), so nothing it does can reach another file if the caller closes
//! its number behind the handle's back and the number is reused; `close`
//! checks that the number is still the same open file before closing it.
//! A caller that gives its descriptor up (`Handle::own`) leaves nothing
//! to check: the file state takes that descriptor itself.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::*};
use std::sync::Arc;

use dc_sys::FileStat;

use crate::device::Device;
use crate::engine::{engine, fork_generation, process_id};
use crate::file::{pages_of, retry_eintr, Bind, FileState, Outcome, Watched, WriteUnderWay};
use crate::own::OwnFd;
use crate::policy::{Options, Policy};
use crate::stats::{Counters, Stats};

/// Where a read or write happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    At(u64),
    /// The file position, moved by the call (`write(2)`, `O_APPEND`).
    Current,
}

impl Position {
    fn raw(self) -> i64 {
        match self {
            Position::At(o) => o as i64,
            Position::Current => -1,
        }
    }
}

/// What a handle is bound to in one process (fork generation).
struct Binding {
    generation: u64,
    file: Arc<FileState>,
    device: Arc<Device>,
    /// Held on `device` while the binding lives (see `Device::hold_mark`).
    high_water: u64,
    /// Bound with `Handle::watch`, and what the watcher knew then.
    watched: Option<Watched>,
}

impl Drop for Binding {
    fn drop(&mut self) {
        self.device.release_mark(self.high_water);
    }
}

pub struct Handle {
    /// The caller's descriptor: closed by `close`, never used for I/O.
    fd: RawFd,
    opts: Options,
    /// Owned (from Box::into_raw); replaced, and the old one leaked, only in
    /// a forked child, where another thread might still be reading it.
    binding: AtomicPtr<Binding>,
    /// Closed or released: the file is the flusher's now, and Drop has
    /// nothing left to do.
    released: std::sync::atomic::AtomicBool,
}

/// A closed file's writeback, which the flusher finishes after `close`
/// returned. `wait` returns its writeback error; dropped unwaited, a later
/// error becomes a late error of the device (`dc_flush`, the exit report).
pub struct Pending {
    inner: Option<(Arc<Outcome>, Arc<Device>)>,
}

impl Pending {
    fn none() -> Pending {
        Pending { inner: None }
    }

    /// Waits until the file is written back and dropped; returns its error.
    pub fn wait(mut self) -> io::Result<()> {
        let Some((outcome, device)) = self.inner.take() else { return Ok(()) };
        device.wait_done(&outcome);
        outcome.take_error().map_or(Ok(()), Err)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some((outcome, device)) = self.inner.take() {
            outcome.orphan(&device);
        }
    }
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// Closed files a device may hold for the flusher at once: each keeps a
/// descriptor, and the program's own opens must not run out of them. The
/// library's descriptors have numbers of their own (`own::library_numbers`,
/// the upper half of the range, from 8,192 at most, where the program's
/// limit is the process's):
/// 3/4 of them for closed files leaves a quarter to open ones. Files
/// closed while a `syncfs` runs wait for the next one, and 4 writers of
/// 4 KiB files (a fresh 1 GiB loop ext4, soft limit 20,000) waited 950
/// times a run with a quarter of the limit (clamped to 4,096): 3/8 of it
/// made 1.01-1.22x their files/s (median 1.11x, 5 interleaved pairs),
/// under a limit of 1,024 1.04-1.07x (2 pairs).
///
/// Kept without a blocking once (`OnceLock`): a child forked while a
/// parent thread was asking waited for that thread for ever at its first
/// close (twice in about 2,300 runs of six threads that fork and share their
/// files). Whoever finds it unknown computes it and stores it; a change of
/// the limits forgets it (`forget_closed_files_cap`).
fn closed_files_cap() -> usize {
    match CLOSED_FILES_CAP.load(Relaxed) {
        0 => {
            let (floor, limit) = crate::own::library_numbers();
            let cap = (limit.saturating_sub(floor) * 3 / 4).clamp(16, 16384) as usize;
            CLOSED_FILES_CAP.store(cap, Relaxed);
            cap
        }
        cap => cap,
    }
}

/// `closed_files_cap`, 0 until asked.
static CLOSED_FILES_CAP: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn forget_closed_files_cap() {
    CLOSED_FILES_CAP.store(0, Relaxed);
}

/// What a binding needs to know of a descriptor: its `fstat` and its
/// `F_GETFL` flags, asked for here unless the caller already has them.
pub struct Described<'a> {
    pub stat: FileStat,
    pub flags: i32,
    /// The file's cached pages by a `cachestat` of the whole file, when the
    /// caller has just asked (the shim does, for files opened read-only):
    /// the bind's classification starts from it instead of asking again.
    pub cached_pages: Option<u64>,
    /// The path the file was just opened by, when the caller has it: on an
    /// overlay the file's layer file is found by it, without asking /proc
    /// for the descriptor's path (6 us an open; `tar -xf` of 50,000 files
    /// into an overlay took 3.75 s with it, 3.41 s without).
    pub opened_as: Option<OpenedAs<'a>>,
    /// The program made the file (`O_CREAT|O_EXCL`) and wrote it before
    /// this binding: every page cached of it is the program's, none is
    /// classified as cached before it, and what it holds is counted
    /// written (`Handle::count_made`).
    pub made: bool,
}

/// A path as given to `openat(2)`: relative to the directory `dir`
/// (`AT_FDCWD`: the working directory) unless absolute.
#[derive(Debug, Clone, Copy)]
pub struct OpenedAs<'a> {
    pub dir: RawFd,
    pub path: &'a Path,
}

impl Described<'_> {
    fn of(fd: RawFd) -> io::Result<Described<'static>> {
        let (stat, flags) = (dc_sys::fstat(fd)?, dc_sys::status_flags(fd)?);
        Ok(Described { stat, flags, cached_pages: None, opened_as: None, made: false })
    }
}

/// The descriptor a binding does its I/O through: a duplicate of the
/// caller's, or the caller's own, given to the library for good.
enum Through {
    Duplicate(RawFd),
    Given(OwnedFd),
    /// A duplicate the library made before, registered as its own.
    Own(OwnFd),
}

impl Through {
    fn raw(&self) -> RawFd {
        match self {
            Through::Duplicate(fd) => *fd,
            Through::Given(fd) => fd.as_raw_fd(),
            Through::Own(fd) => fd.as_raw_fd(),
        }
    }
}

/// A duplicate of `fd` (`own::duplicate`), made as closed files' descriptors
/// close where those filled the library's numbers: a file bound a
/// moment later is better than one left untracked (and cached).
fn duplicate_making_room(fd: RawFd) -> io::Result<crate::own::OwnFd> {
    loop {
        match crate::own::duplicate(fd) {
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) && crate::let_closed_file_go() => continue,
            dup => return dup,
        }
    }
}

fn bind(
    through: Through,
    opts: &Options,
    watched: Option<Watched>,
    described: Option<Described<'_>>,
) -> io::Result<Binding> {
    let fd = through.raw();
    let described = match described {
        Some(d) => d,
        None => Described::of(fd)?,
    };
    let (st, flags) = (described.stat, described.flags);
    // As close to what the system calls would say as a handle can be.
    match st.mode & libc::S_IFMT {
        libc::S_IFREG => {}
        libc::S_IFDIR => return Err(errno(libc::EISDIR)),
        libc::S_IFIFO | libc::S_IFSOCK => return Err(errno(libc::ESPIPE)),
        _ => return Err(errno(libc::EINVAL)),
    }
    if flags & libc::O_PATH != 0 {
        return Err(errno(libc::EBADF));
    }
    let dup = match through {
        Through::Duplicate(fd) => {
            let dup = duplicate_making_room(fd)?;
            // Described before it was duplicated: a program whose threads
            // close or `dup2` onto a number while another uses it can put
            // another file there in between. The library works through
            // the duplicate, so it must be the file described: in a test
            // whose threads race those calls, a duplicate was of another
            // file on the first of its runs (dropped and waited for in the
            // described file's name), and of a pipe in one of some hundred
            // (its failed wait taken for a writeback error). Not tracked,
            // as the number's file changed under the call.
            if !dc_sys::fstat(dup.as_raw_fd()).is_ok_and(|now| (now.dev, now.ino) == (st.dev, st.ino)) {
                return Err(errno(libc::EAGAIN));
            }
            dup
        }
        Through::Given(fd) => crate::own::take(fd),
        Through::Own(fd) => fd,
    };
    let dup = crate::locked::unless_locked((st.dev, st.ino), dup)?;
    let device = engine().device(st.dev, opts.submit, std::os::fd::AsFd::as_fd(&dup));
    let kind = match (watched, flags & libc::O_ACCMODE) {
        (Some(w), _) => Bind::Watched(w),
        (None, libc::O_RDONLY) => Bind::ReadOnly,
        (None, _) => Bind::Writable,
    };
    let file = Arc::new(FileState::new(dup, opts.policy, &described, &device, kind));
    device.hold_mark(opts.high_water);
    Ok(Binding { generation: fork_generation(), file, device, high_water: opts.high_water, watched })
}

/// A handle's binding in this process, or (in a forked child whose fresh
/// binding failed) only a descriptor to do plain I/O on.
enum Bound<'a> {
    Engine(&'a Arc<FileState>, &'a Arc<Device>),
    Plain(BorrowedFd<'a>),
}

impl Handle {
    /// Wraps `fd`, a regular file, which stays the caller's until `close`.
    pub fn adopt(fd: RawFd, opts: Options) -> io::Result<Handle> {
        Handle::bound_through(fd, opts, Through::Duplicate(fd), None, None)
    }

    /// As `adopt`, for a caller that has `fd`'s `fstat` and `F_GETFL` flags
    /// at hand (the shim, on every open): two system calls fewer per file.
    pub fn adopt_described(fd: RawFd, opts: Options, described: Described<'_>) -> io::Result<Handle> {
        Handle::bound_through(fd, opts, Through::Duplicate(fd), None, Some(described))
    }

    /// The handle of number `fd`, its file bound `through` a descriptor of
    /// the library's; a file the program made (`Described::made`) has its
    /// pages counted (`count_made`).
    fn bound_through(
        fd: RawFd,
        opts: Options,
        through: Through,
        watched: Option<Watched>,
        described: Option<Described<'_>>,
    ) -> io::Result<Handle> {
        let made = described.as_ref().filter(|d| d.made).map(|d| d.stat);
        let binding = Box::into_raw(Box::new(bind(through, &opts, watched, described)?));
        let h = Handle { fd, opts, binding: AtomicPtr::new(binding), released: Default::default() };
        if let Some(st) = made {
            h.count_made(&st);
        }
        Ok(h)
    }

    /// A file the program made and wrote before it was bound
    /// (`Described::made`): what it holds is counted written, as the
    /// writes the library did not see were. A sparse file (fewer blocks
    /// than its size needs) is claimed instead, its pages written back,
    /// waited for and dropped where they are: counted written whole, its
    /// holes would count as dirty pages until the flusher had waited for
    /// all of them.
    fn count_made(&self, st: &FileStat) {
        if st.blocks * 512 >= st.size {
            self.note_write(0, st.size);
        } else if let Bound::Engine(file, _) = self.bound() {
            file.claim(std::slice::from_ref(&(0..u64::MAX)));
        }
    }

    /// Takes `fd`, a regular file, for good: the handle does its I/O
    /// through it and the library closes it once the file is written back
    /// and dropped, so no duplicate is made and `close` leaves the closing
    /// to the flusher: two system calls a file fewer than `adopt` (the
    /// duplicate and the caller's close). The number stays open until the
    /// library is done with the file, after `close` returns; `fd()` is the
    /// caller's to use until `close`. The file is closed also if this fails.
    pub fn own(fd: OwnedFd, opts: Options) -> io::Result<Handle> {
        Handle::bound_through(fd.as_raw_fd(), opts, Through::Given(fd), None, None)
    }

    /// Takes `fd`, the library's duplicate of a file the program made
    /// (`O_CREAT|O_EXCL`) and wrote without a handle, for good, as `own`
    /// does: every page cached of it is the program's (`crate::made`), and
    /// counted written (`count_made`).
    pub(crate) fn own_made(fd: OwnFd, opts: Options) -> io::Result<Handle> {
        let raw = fd.as_raw_fd();
        let described = Described { made: true, ..Described::of(raw)? };
        Handle::bound_through(raw, opts, Through::Own(fd), None, Some(described))
    }

    /// Takes over a file another process wrote or read and handed over
    /// unfinished (`handoff`): `fd` is the library's for good, as with
    /// `own`, and `pages` are the library's to write back where still
    /// dirty, wait for and drop, though they are cached now. Its `close`
    /// hands it to the flusher; a writeback error then is a late error of
    /// this process.
    pub fn take_over(fd: OwnedFd, opts: Options, pages: &[std::ops::Range<u64>]) -> io::Result<Handle> {
        let h = Handle::own(fd, opts)?;
        if let Bound::Engine(file, _) = h.bound() {
            file.claim(pages);
        }
        Ok(h)
    }

    /// Watches a file another process is writing or reading, through `fd`
    /// (any access mode; closed by `close`): the flusher sweeps it for
    /// dirty pages and writes them back and drops them, and its close waits
    /// for and drops the whole file. Pages it has dirty or under writeback
    /// now count as that process's, and are dropped; other cached pages
    /// stay, as for any handle, unless the file was made since the watch
    /// began (`Watched::made_since`).
    pub fn watch(fd: RawFd, opts: Options, watched: Watched) -> io::Result<Handle> {
        let h = Handle::bound_through(fd, opts, Through::Duplicate(fd), Some(watched), None)?;
        h.watch_unseen();
        Ok(h)
    }

    /// Opens `path` (with open(2) flags and mode) and wraps it.
    pub fn open(path: &Path, flags: i32, mode: u32, opts: Options) -> io::Result<Handle> {
        let fd = dc_sys::open(path, flags, mode)?;
        let opened_as = Some(OpenedAs { dir: libc::AT_FDCWD, path });
        let described = Described::of(fd).map(|d| Described { opened_as, ..d });
        described.and_then(|d| Handle::adopt_described(fd, opts, d)).inspect_err(|_| {
            let _ = dc_sys::close(fd);
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// The file, by device and inode number. Read from the binding as it
    /// is, without binding anew in a forked child (the same file).
    pub fn inode(&self) -> crate::locked::Inode {
        // SAFETY: bindings are freed only by Drop, which has &mut self.
        unsafe { &*self.binding.load(Acquire) }.file.inode()
    }

    pub fn options(&self) -> Options {
        self.opts
    }

    /// The file state and device; in a forked child, fresh ones. The common
    /// case is one atomic load and a compare: this runs on every I/O.
    fn bound(&self) -> Bound<'_> {
        let cur = self.binding.load(Acquire);
        // SAFETY: bindings are freed only by Drop, which has &mut self.
        let b = unsafe { &*cur };
        if b.generation == fork_generation() {
            return Bound::Engine(&b.file, &b.device);
        }
        // A child must not touch its parent's engine: a lock a parent
        // thread held at fork time stays held here for good. Without a
        // binding of its own it does plain I/O on the parent's duplicate
        // (inherited: the same open file), which takes no lock.
        let Ok(fresh) = bind(Through::Duplicate(self.fd), &self.opts, b.watched, None) else {
            return Bound::Plain(b.file.fd());
        };
        let fresh = Box::into_raw(Box::new(fresh));
        let b = match self.binding.compare_exchange(cur, fresh, AcqRel, Acquire) {
            Ok(_) => fresh,
            Err(winner) => {
                // SAFETY: `fresh` was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                winner
            }
        };
        // SAFETY: as above.
        let b = unsafe { &*b };
        Bound::Engine(&b.file, &b.device)
    }

    fn uses_kernel(&self, file: &FileState) -> bool {
        self.opts.policy == Policy::Kernel && !file.dontcache_refused.load(Relaxed)
    }

    /// The `RWF_*` flags a program that does its own I/O on this file (and
    /// reports it with `note_write`/`note_read`) should set: `RWF_DONTCACHE`
    /// under the `kernel` policy where the kernel takes it, else none.
    pub fn rw_flags(&self) -> i32 {
        match self.bound() {
            Bound::Engine(file, _) if self.uses_kernel(file) => dc_sys::RWF_DONTCACHE,
            _ => 0,
        }
    }

    /// The `RWF_*` flags a program's next read of this file should carry
    /// (asked before each read it issues itself, as they change): those of
    /// `rw_flags`, and `RWF_DONTCACHE` once the file's reads are scattered
    /// where the kernel takes it (`FileState::reads_by_kernel`). A read
    /// made with them is reported with `note_read` all the same.
    pub fn read_flags(&self) -> i32 {
        match self.bound() {
            Bound::Engine(file, _) if self.uses_kernel(file) || file.reads_by_kernel.load(Relaxed) => {
                dc_sys::RWF_DONTCACHE
            }
            _ => 0,
        }
    }

    // ---- writes -------------------------------------------------------

    pub fn pwrite(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        self.pwritev(&[IoSlice::new(buf)], off, 0)
    }

    /// `pwritev2(fd, iov, off, flags)` through the policy.
    pub fn pwritev(&self, iov: &[IoSlice<'_>], off: u64, flags: i32) -> io::Result<usize> {
        let off = i64::try_from(off).map_err(|_| errno(libc::EINVAL))? as u64;
        let cnt = i32::try_from(iov.len()).map_err(|_| errno(libc::EINVAL))?;
        let end = iov.iter().try_fold(off, |end, s| end.checked_add(s.len() as u64));
        // SAFETY: IoSlice is ABI-compatible with iovec, and these are valid.
        unsafe { self.write_through_policy(iov.as_ptr().cast(), cnt, Position::At(off), flags, end) }
    }

    /// `pwrite(2)` of the caller's `len` bytes at `buf` to `off`.
    ///
    /// # Safety
    /// `buf` and `len` are passed to the kernel as `pwrite(2)` takes them.
    pub unsafe fn pwrite_raw(&self, buf: *const libc::c_void, len: usize, off: u64) -> io::Result<usize> {
        let iov = libc::iovec { iov_base: buf.cast_mut(), iov_len: len };
        // SAFETY: one iovec of the caller's buffer, per this function's contract.
        unsafe { self.write_through_policy(&iov, 1, Position::At(off), 0, off.checked_add(len as u64)) }
    }

    /// `write(2)` at the file position (O_APPEND included).
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        self.writev(&[IoSlice::new(buf)])
    }

    pub fn writev(&self, iov: &[IoSlice<'_>]) -> io::Result<usize> {
        let cnt = i32::try_from(iov.len()).map_err(|_| errno(libc::EINVAL))?;
        // SAFETY: as in `pwritev`.
        unsafe { self.write_iov(iov.as_ptr().cast(), cnt, Position::Current, 0) }
    }

    /// A write of the caller's iovecs at `pos`, with `RWF_*` flags: what
    /// `pwritev2(2)` does, through the policy. The kernel validates the
    /// iovecs, the count and the offset first; nothing here reads them
    /// before it has.
    ///
    /// # Safety
    /// `iov` and `cnt` are passed to the kernel as `pwritev2(2)` takes them.
    pub unsafe fn write_iov(&self, iov: *const libc::iovec, cnt: i32, pos: Position, flags: i32) -> io::Result<usize> {
        // SAFETY: per this function's contract.
        unsafe { self.write_through_policy(iov, cnt, pos, flags, None) }
    }

    /// `write_iov`, where `end` is the offset the whole write would end at,
    /// if known without reading the caller's iovecs.
    ///
    /// # Safety
    /// As for `write_iov`.
    unsafe fn write_through_policy(
        &self,
        iov: *const libc::iovec,
        cnt: i32,
        pos: Position,
        flags: i32,
        end: Option<u64>,
    ) -> io::Result<usize> {
        let (file, device) = match self.bound() {
            Bound::Engine(f, d) => (f, d),
            // SAFETY: per this function's contract.
            Bound::Plain(fd) => return unsafe { dc_sys::pwritev2_iov(fd, iov, cnt, pos.raw(), flags) },
        };
        if let Some(e) = file.take_error() {
            return Err(e);
        }
        let under_way = file.write_under_way();
        if self.uses_kernel(file) {
            // SAFETY: per this function's contract.
            if let Some(written) = unsafe { write_dontcache(file, iov, cnt, pos, flags) } {
                let (at, n) = written?;
                // The kernel drops a page at the end of its writeback
                // only if it gets the folio lock then: close drops the
                // few it leaves.
                file.kernel_wrote(&pages_of(at, n as u64));
                count_written(file, device, n);
                return Ok(n);
            }
        }
        // Where an append ends is not known before it is made.
        let end = end.filter(|_| !appends(file, flags));
        let lazy_idle = (file.policy == Policy::Lazy).then(|| file.writeback_idle());
        if lazy_idle == Some(true) && Self::flushes_through_kernel(file, device, end) {
            // SAFETY: per this function's contract.
            if let Some(written) = unsafe { write_dontcache(file, iov, cnt, pos, flags) } {
                let (at, n) = written?;
                let pages = pages_of(at, n as u64);
                device.learn_dontcache_flush(file.cache_fd(), &pages);
                file.kernel_flushed(&pages);
                count_written(file, device, n);
                return Ok(n);
            }
        }
        // SAFETY: per this function's contract.
        let n = unsafe { dc_sys::pwritev2_iov(file.fd(), iov, cnt, pos.raw(), flags) }?;
        let at = written_at(file, pos, flags, n)?;
        self.after_write(file, device, at, n as u64, lazy_idle, Some(under_way));
        Ok(n)
    }

    /// Whether a `lazy` write that starts writeback (the file has none in
    /// flight) goes as the kernel's RWF_DONTCACHE: where the kernel flushes
    /// such a write before returning (6.14-7.1), that is the same start of
    /// the written range's writeback as `sync_file_range`, and the kernel
    /// drops the pages at its end, where the library would wait for them
    /// and drop them itself (4 writers of 4 KiB files: 0.80-0.81x the
    /// kernel's files/s through `sync_file_range`, 0.83-0.87x as
    /// RWF_DONTCACHE; docs/benchmarks.md).
    /// Only for a write known to end on a page boundary: the kernel would
    /// drop a last page written in part, and the file's next write would
    /// read it back from the disk.
    fn flushes_through_kernel(file: &FileState, device: &Device, end: Option<u64>) -> bool {
        end.is_some_and(|e| e % dc_sys::page_size() as u64 == 0)
            && !file.dontcache_refused.load(Relaxed)
            && device.dontcache_may_flush_inline()
    }

    /// The program set its open file's status flags (`fcntl(F_SETFL)`):
    /// whether its writes append from now on.
    pub fn status_flags_set(&self, flags: i32) {
        if let Bound::Engine(file, _) = self.bound() {
            file.appends.store(flags & libc::O_APPEND != 0, Relaxed);
        }
    }

    /// Marks a write the caller makes itself and reports with `note_write`
    /// as under way, from before its system call until the guard goes
    /// (after `note_write`): the flusher's sweep for writes the library
    /// does not see leaves the file alone meanwhile.
    pub fn write_under_way(&self) -> Option<WriteUnderWay<'_>> {
        match self.bound() {
            Bound::Engine(file, _) => Some(file.write_under_way()),
            Bound::Plain(_) => None,
        }
    }

    /// Reports a buffered write the caller did itself (through io_uring, or
    /// any path the library does not see) of `len` bytes at `off`, after it
    /// completed: its pages join the write-behind like the library's own,
    /// and the caller may wait at the high-water mark here.
    pub fn note_write(&self, off: u64, len: u64) {
        let Bound::Engine(file, device) = self.bound() else { return };
        if self.uses_kernel(file) {
            file.kernel_wrote(&pages_of(off, len));
            count_written(file, device, len as usize);
        } else {
            self.after_write(file, device, off, len, None, None);
        }
    }

    /// A writeback error the library kept for this file, if any, reported
    /// once (what the next write, sync or close would return).
    pub fn take_error(&self) -> Option<io::Error> {
        match self.bound() {
            Bound::Engine(file, _) => file.take_error(),
            Bound::Plain(_) => None,
        }
    }

    /// The bookkeeping after `n` bytes were written at `off`; `lazy_idle`
    /// is `writeback_idle` as asked before the write, if it was. The write
    /// stops being under way once its pages are counted, before any wait
    /// at the high-water mark.
    fn after_write(
        &self,
        file: &Arc<FileState>,
        device: &Arc<Device>,
        off: u64,
        n: u64,
        lazy_idle: Option<bool>,
        under_way: Option<WriteUnderWay<'_>>,
    ) {
        count_written(file, device, n as usize);
        if n == 0 {
            return;
        }
        if file.dirtied(device, off, n) > 0 {
            device.enlist(file);
        }
        drop(under_way);
        let start_now = match file.policy {
            Policy::Inline => true,
            // Skip while the file's writeback is in flight; else start
            // what was just written (the lazy variant).
            Policy::Lazy => lazy_idle.unwrap_or_else(|| file.writeback_idle()),
            _ => false,
        };
        if start_now {
            let ps = dc_sys::page_size() as u64;
            let r = retry_eintr(|| dc_sys::sync_file_range(file.cache_fd(), off, n, libc::SYNC_FILE_RANGE_WRITE));
            if let Err(e) = r {
                file.latch(e.raw_os_error().unwrap_or(libc::EIO), device);
            }
            // Only whole pages inside the write are surely started.
            let started = off.div_ceil(ps)..(off + n) / ps;
            if started.start < started.end {
                file.writer_started(device, started);
                device.enlist(file);
            }
        }
        device.kick(file);
        device.throttle(file, self.opts.high_water, n);
    }

    // ---- reads --------------------------------------------------------

    pub fn pread(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        self.preadv(&mut [IoSliceMut::new(buf)], Some(off))
    }

    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.preadv(&mut [IoSliceMut::new(buf)], None)
    }

    /// Drop-behind reads: pages the read (and its readahead) brought in are
    /// dropped once read; pages that were cached before stay.
    pub fn preadv(&self, iov: &mut [IoSliceMut<'_>], off: Option<u64>) -> io::Result<usize> {
        let pos = match off {
            Some(o) => Position::At(i64::try_from(o).map_err(|_| errno(libc::EINVAL))? as u64),
            None => Position::Current,
        };
        let cnt = i32::try_from(iov.len()).map_err(|_| errno(libc::EINVAL))?;
        // SAFETY: IoSliceMut is ABI-compatible with iovec, and these are valid.
        unsafe { self.read_iov(iov.as_mut_ptr().cast(), cnt, pos, 0) }
    }

    /// `preadv2(2)` of the caller's iovecs at `pos`, dropping behind.
    ///
    /// # Safety
    /// `iov` and `cnt` are passed to the kernel as `preadv2(2)` takes them.
    pub unsafe fn read_iov(&self, iov: *const libc::iovec, cnt: i32, pos: Position, flags: i32) -> io::Result<usize> {
        let (file, device) = match self.bound() {
            Bound::Engine(f, d) => (f, d),
            // SAFETY: per this function's contract.
            Bound::Plain(fd) => return unsafe { dc_sys::preadv2_iov(fd, iov, cnt, pos.raw(), flags) },
        };
        let flags = if file.reads_by_kernel.load(Relaxed) { flags | dc_sys::RWF_DONTCACHE } else { flags };
        // SAFETY: per this function's contract.
        let n = unsafe { dc_sys::preadv2_iov(file.fd(), iov, cnt, pos.raw(), flags) }?;
        let at = landed(file, pos, n)?;
        self.after_read(file, device, at, n as u64);
        Ok(n)
    }

    /// Reports a read the caller did itself (see `note_write`): what it
    /// brought into the cache is dropped behind it.
    pub fn note_read(&self, off: u64, len: u64) {
        if let Bound::Engine(file, device) = self.bound() {
            self.after_read(file, device, off, len);
        }
    }

    /// The bookkeeping after `n` bytes were read at `at`.
    ///
    /// Scattered reads of a file the program does not work in are handed
    /// to the kernel where it takes RWF_DONTCACHE on reads: from the batch
    /// that finds them scattered on, each read carries the flag and the
    /// kernel drops what it brought in. 4 KiB random reads at io_uring
    /// depth 16 made 0.84x the kernel's RWF_DONTCACHE IOPS with the
    /// flusher dropping batches of 512 pages, 0.98x handed over (medians
    /// of 7 interleaved rounds; docs/benchmarks.md). Sequential reads stay
    /// the library's: the flusher's drops beside the reader read 1 MiB at
    /// depth 16 at 1.5x the kernel's RWF_DONTCACHE bandwidth.
    fn after_read(&self, file: &Arc<FileState>, device: &Arc<Device>, at: u64, n: u64) {
        Counters::add(&file.counters.bytes_read, n);
        Counters::add(&device.counters.bytes_read, n);
        if n == 0 {
            return;
        }
        if file.droppable {
            Counters::add(&file.counters.bytes_dropped, n);
            Counters::add(&device.counters.bytes_dropped, n);
        }
        if file.reads_by_kernel.load(Relaxed) {
            return;
        }
        let half_mark = self.opts.high_water / 2 / dc_sys::page_size() as u64;
        if let Some(read) = file.drop_behind(pages_of(at, n), half_mark) {
            if read.scattered && !self.uses_kernel(file) && kernel_drops_reads(file, at) {
                file.hand_reads_to_kernel();
            }
            device.drop_later(file, read, half_mark);
        }
    }

    // ---- sync, truncate -----------------------------------------------

    pub fn fsync(&self) -> io::Result<()> {
        self.sync(false)
    }

    pub fn fdatasync(&self) -> io::Result<()> {
        self.sync(true)
    }

    /// The kernel's sync, then: everything the library dirtied here is on
    /// disk, and dropped a moment later (`Device::drop_synced_later`).
    /// Returns, in this order, a writeback error the library kept for this
    /// file, the sync's own error, and a late error of a file closed earlier
    /// on the same filesystem.
    fn sync(&self, data_only: bool) -> io::Result<()> {
        let sync = if data_only { dc_sys::fdatasync } else { dc_sys::fsync };
        let (file, device) = match self.bound() {
            Bound::Engine(f, d) => (f, d),
            Bound::Plain(fd) => return sync(fd),
        };
        let r = sync(file.fd());
        if r.is_ok() {
            file.forget(device, 0..u64::MAX);
            device.drop_synced_later(file);
        }
        if let Some(e) = file.take_error() {
            return Err(e);
        }
        r?;
        device.take_late_error().map_or(Ok(()), Err)
    }

    /// `ftruncate(2)`: pages past the new end are gone, dirty or not.
    pub fn truncate(&self, len: u64) -> io::Result<()> {
        let (file, device) = match self.bound() {
            Bound::Engine(f, d) => (f, d),
            Bound::Plain(fd) => return dc_sys::ftruncate(fd, len),
        };
        dc_sys::ftruncate(file.fd(), len)?;
        file.forget(device, len.div_ceil(dc_sys::page_size() as u64)..u64::MAX);
        Ok(())
    }

    pub fn stats(&self) -> Stats {
        match self.bound() {
            Bound::Engine(file, _) => file.stats(),
            Bound::Plain(_) => Stats::default(),
        }
    }

    // ---- close --------------------------------------------------------

    /// Hands the file's remaining writeback to the flusher. Returns a
    /// writeback error the library kept for this file, or else a late error
    /// of another file closed earlier on the device, and the token of this
    /// file's writeback. `None` if it was handed over already.
    fn hand_over(&self) -> Option<(io::Result<()>, Pending)> {
        if self.released.swap(true, AcqRel) {
            return None;
        }
        let Bound::Engine(file, device) = self.bound() else { return Some((Ok(()), Pending::none())) };
        let (file, device) = (file.clone(), device.clone());
        device.wait_closed_below(closed_files_cap());
        let kept = file.take_error();
        device.hand_over(&file);
        let r = match kept.or_else(|| device.take_late_error()) {
            Some(e) => Err(e),
            None => Ok(()),
        };
        Some((r, Pending { inner: Some((file.outcome().clone(), device)) }))
    }

    /// `close(2)`: the descriptor is closed now, and the flusher finishes
    /// the file's writeback and drops it afterwards, batched with other
    /// files' (a buffered close does not wait for writeback either). A
    /// later writeback error of this file is a late error: returned by the
    /// next fsync or close of any handle on the device, by `dc_flush`, and
    /// listed at exit by the shim.
    ///
    /// The handle owns its descriptor (nothing else may close it, as for
    /// an `OwnedFd`), so the number is closed without first asking whether
    /// it still is the file (`close_checked` asks).
    pub fn close(self) -> io::Result<()> {
        let (r, _pending) = self.close_number_shared();
        r
    }

    /// `close` with the token of the file's writeback, to wait for later.
    pub fn close_deferred(self) -> (io::Result<()>, Pending) {
        self.close_number_shared()
    }

    /// `close`, then waits for the file's writeback and returns its error.
    pub fn close_and_wait(self) -> io::Result<()> {
        let (r, pending) = self.close_number_shared();
        r.and(pending.wait())
    }

    /// `close` for a caller that may have closed the descriptor behind the
    /// handle's back (the C ABI's `dc_close`): a number that no longer is
    /// the file (`kcmp`) is someone else's now, and fails with `EBADF`.
    pub fn close_checked(self) -> io::Result<()> {
        let (r, _pending) = self.close_shared();
        r
    }

    /// Hands the writeback over like `close` and gives the descriptor back
    /// open: for a handle that `own`s its descriptor, a duplicate of it
    /// (the library still closes its own), `-1` with the error if none
    /// can be made.
    pub fn release(self) -> (RawFd, io::Result<()>, Pending) {
        let (r, pending) = self.release_shared();
        if !self.number_is_the_files() {
            return (self.fd, r, pending);
        }
        match dc_sys::dup_at_least(self.fd, 0) {
            Ok(dup) => (std::os::fd::IntoRawFd::into_raw_fd(dup), r, pending),
            Err(e) => (-1, r.and(Err(e)), pending),
        }
    }

    /// `close` for a handle several owners share (the shim's descriptor
    /// table): the first call closes, later ones fail with `EBADF`. Calls
    /// still running on other threads finish on the file they started on.
    pub fn close_shared(&self) -> (io::Result<()>, Pending) {
        let Some((r, pending)) = self.hand_over() else { return (Err(errno(libc::EBADF)), Pending::none()) };
        let closed = self.close_descriptor();
        (r.and(closed), pending)
    }

    /// `close_shared` for a caller that stands in for `close(2)` (the shim)
    /// or owns the descriptor (`close`): the number is closed whatever open
    /// file it holds now, as the kernel would close it, so the check
    /// `close_shared` makes first (a `kcmp` per file) is not needed. Not
    /// for the C ABI's `dc_close`, whose caller may have closed the number
    /// behind the handle's back.
    pub fn close_number_shared(&self) -> (io::Result<()>, Pending) {
        let Some((r, pending)) = self.hand_over() else { return (Err(errno(libc::EBADF)), Pending::none()) };
        if self.number_is_the_files() {
            return (r, pending);
        }
        (r.and(dc_sys::close(self.fd)), pending)
    }

    /// Lets go of the file while the caller's descriptor stays open, the
    /// caller's alone from now on (it switched to `O_DIRECT`, or locks the
    /// file: `locked`): the file's writes go to the flusher as at a close.
    /// An error the library kept for the file becomes a late error, as for
    /// a file closed before its writeback failed: the descriptor's own
    /// `fsync` cannot report what the library's waits on its open file
    /// already took.
    pub fn untrack(&self) {
        if self.released.swap(true, AcqRel) {
            return;
        }
        if let Bound::Engine(file, device) = self.bound() {
            let inode = file.inode();
            if crate::locked::is_locked(inode.0, inode.1) {
                crate::locked::keep_droppable(inode, file.droppable_pages());
            }
            device.hand_over(file);
            file.outcome().orphan(device);
        }
    }

    /// Lets go of a file the program has closed already (`crate::made`):
    /// handed to the flusher as at a close, after waiting for closed files
    /// below their cap as a close does; an error the library kept for it
    /// becomes a late error, and no late error is taken (a close of the
    /// program's returned them).
    pub(crate) fn let_go_closed(self) {
        if self.released.swap(true, AcqRel) {
            return;
        }
        if let Bound::Engine(file, device) = self.bound() {
            device.wait_closed_below(closed_files_cap());
            device.hand_over(file);
            file.outcome().orphan(device);
        }
    }

    /// `release` for a shared handle (a `dup2` over the number, exit).
    pub fn release_shared(&self) -> (io::Result<()>, Pending) {
        self.hand_over().unwrap_or_else(|| (Ok(()), Pending::none()))
    }

    /// Marks the file as one that may be written or read by paths the
    /// library does not see (stdio's own writes, io_uring, mmap, a process
    /// watched from outside): the flusher sweeps it for dirty pages every
    /// 100 ms, and its close waits for and drops the whole file.
    pub fn watch_unseen(&self) {
        if let Bound::Engine(file, device) = self.bound() {
            device.sweep_file(file);
        }
    }

    /// Whether the handle's number is its binding's own descriptor (`own`),
    /// which the file's state closes once the flusher is done with it. In a
    /// forked child the binding has a duplicate of its own, and the number
    /// is the child's to close.
    fn number_is_the_files(&self) -> bool {
        matches!(self.bound(), Bound::Engine(file, _) if file.fd().as_raw_fd() == self.fd)
    }

    /// Whether the caller's descriptor is still the open file this handle
    /// was bound to (not closed, nor reused for another file).
    pub fn descriptor_is_current(&self) -> bool {
        match self.bound() {
            Bound::Engine(file, _) => same_file(self.fd, file.fd()),
            Bound::Plain(fd) => same_file(self.fd, fd),
        }
    }

    /// Closes the caller's descriptor if it still is the file this handle
    /// was bound to: a number closed behind the handle's back and reused
    /// belongs to someone else now (`EBADF`).
    fn close_descriptor(&self) -> io::Result<()> {
        if self.number_is_the_files() {
            return Ok(());
        }
        if !self.descriptor_is_current() {
            return Err(errno(libc::EBADF));
        }
        dc_sys::close(self.fd)
    }
}

/// Whether `fd` is (still) the open file `ours` duplicates.
fn same_file(fd: RawFd, ours: BorrowedFd<'_>) -> bool {
    match dc_sys::same_open_file(process_id(), fd, ours.as_raw_fd()) {
        Ok(same) => same,
        // No kcmp in this kernel: the same inode is the best evidence.
        Err(e) if e.raw_os_error() != Some(libc::EBADF) => match (dc_sys::fstat(fd), dc_sys::fstat(ours.as_raw_fd())) {
            (Ok(a), Ok(b)) => (a.dev, a.ino) == (b.dev, b.ino),
            _ => false,
        },
        Err(_) => false,
    }
}

/// Where a call at `pos` that moved `n` bytes happened: for the file
/// position, where the position is now less `n`. (A concurrent writer or
/// reader can move it in between; the library then tracks the wrong pages,
/// which leaves some cached, never corrupts data.)
fn landed(file: &FileState, pos: Position, n: usize) -> io::Result<u64> {
    match pos {
        Position::At(o) => Ok(o),
        Position::Current => Ok(dc_sys::lseek(file.fd(), 0, libc::SEEK_CUR)?.saturating_sub(n as u64)),
    }
}

/// `landed`, for a write with `RWF_*` `flags`: one that appended (its open
/// file's `O_APPEND`, or `RWF_APPEND`) landed where the file ends now less
/// `n`, as Linux appends such a write whatever offset it was given, and
/// leaves the position alone. Taken at the offset, 1,000 `pwrite`s of
/// 5,000 bytes at 0 to an `O_APPEND` file left all 4.8 MB of it cached.
/// (Another writer appending in between makes the library track the wrong
/// pages, as for `landed`.)
fn written_at(file: &FileState, pos: Position, flags: i32, n: usize) -> io::Result<u64> {
    match pos {
        Position::At(_) if appends(file, flags) => {
            Ok(dc_sys::fstat(file.fd().as_raw_fd())?.size.saturating_sub(n as u64))
        }
        _ => landed(file, pos, n),
    }
}

/// Whether a write with `RWF_*` `flags` appends, whatever its offset.
fn appends(file: &FileState, flags: i32) -> bool {
    flags & libc::RWF_APPEND != 0 || file.appends.load(Relaxed)
}

/// The write as RWF_DONTCACHE: where it landed and how much, or `None`
/// where the kernel refused the flag (a kernel before 6.14, a filesystem
/// without FOP_DONTCACHE), which the file remembers (`dontcache_refused`):
/// the caller writes the library's way, now and from then on.
///
/// # Safety
/// As for `Handle::write_iov`.
unsafe fn write_dontcache(
    file: &FileState,
    iov: *const libc::iovec,
    cnt: i32,
    pos: Position,
    flags: i32,
) -> Option<io::Result<(u64, usize)>> {
    // SAFETY: per this function's contract.
    match unsafe { dc_sys::pwritev2_iov(file.fd(), iov, cnt, pos.raw(), flags | dc_sys::RWF_DONTCACHE) } {
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            file.dontcache_refused.store(true, Relaxed);
            None
        }
        Err(e) => Some(Err(e)),
        Ok(n) => Some(written_at(file, pos, flags, n).map(|at| (at, n))),
    }
}

/// Whether the kernel takes RWF_DONTCACHE on reads of `file`, asked with a
/// one-byte read at `at`, where the caller just read (a page cached before
/// the read stays cached). A refusal is remembered as for writes
/// (`dontcache_refused`).
fn kernel_drops_reads(file: &FileState, at: u64) -> bool {
    if file.dontcache_refused.load(Relaxed) {
        return false;
    }
    match dc_sys::takes_dontcache_reads(file.fd(), at) {
        Ok(true) => true,
        Ok(false) => {
            file.dontcache_refused.store(true, Relaxed);
            false
        }
        Err(_) => false,
    }
}

fn count_written(file: &FileState, device: &Device, n: usize) {
    Counters::add(&file.counters.bytes_written, n as u64);
    Counters::add(&device.counters.bytes_written, n as u64);
}

impl Drop for Handle {
    /// Library work on whatever thread lets go of the handle last, outside
    /// any call of the library's: marked as the library's (`as_library`).
    fn drop(&mut self) {
        crate::engine::as_library(|| {
            if !*self.released.get_mut() {
                // Dropped without close: the file's writeback still
                // finishes, and its errors become late errors.
                let _ = self.hand_over();
            }
            // SAFETY: from Box::into_raw, and nobody else can reach it now.
            let binding = unsafe { Box::from_raw(*self.binding.get_mut()) };
            if binding.generation != fork_generation() {
                // A parent's binding, in a child that never made its own (a
                // handle its parent had begun to close, or whose re-binding
                // failed): releasing its mark takes the parent's device's
                // lock, which a parent thread may have held at fork time (a
                // child exiting while the parent's threads opened and
                // closed files hung there, 1 run in about 700), and its
                // last references would run the parent's drops. Leaked, as
                // `bound` leaks the ones it replaces.
                std::mem::forget(binding);
            }
        });
    }
}

impl AsFd for Handle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor stays open while the handle lives.
        unsafe { BorrowedFd::borrow_raw(self.fd) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A child that drops a handle its parent had already let go of (as a
    /// thread that closes a shared descriptor leaves it when another
    /// forks) takes none of the parent's locks: here the device's marks'
    /// lock, held by the forking thread itself, as by a parent thread
    /// that opened or closed a file on that device at fork time.
    #[test]
    fn a_child_dropping_its_parents_handle_takes_none_of_its_parents_locks() {
        let file = tempfile_in_temp_dir();
        let h = Handle::adopt(file.as_raw_fd(), Options::default()).unwrap();
        let device = match h.bound() {
            Bound::Engine(_, device) => device.clone(),
            Bound::Plain(_) => unreachable!("bound in this process"),
        };
        let (r, pending) = h.release_shared();
        r.unwrap();
        let held = device.hold_marks_lock();
        // SAFETY: the child only drops the handle and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            drop(h);
            // SAFETY: leave without running the parent's test harness.
            unsafe { libc::_exit(0) };
        }
        drop(held);
        let (t, mut status) = (Instant::now(), 0);
        // SAFETY: waiting for our own child, without blocking.
        while unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == 0 {
            if t.elapsed() > Duration::from_secs(10) {
                // SAFETY: killing and reaping our own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                unsafe { libc::waitpid(pid, &mut status, 0) };
                panic!("the child is still dropping the handle after 10 s");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child: {status}");
        drop(h);
        pending.wait().unwrap();
    }

    /// A description taken of the file a number held before another file
    /// took the number (a program's threads racing a `dup2` onto it
    /// against its use) does not bind the duplicate of the other file:
    /// the library would drop and wait for a file in another's name.
    #[test]
    fn a_duplicate_of_another_file_than_the_one_described_is_not_bound() {
        let (described, now_there) = (tempfile_in_temp_dir(), tempfile_in_temp_dir());
        let fd = described.as_raw_fd();
        let d = Described {
            stat: dc_sys::fstat(fd).unwrap(),
            flags: dc_sys::status_flags(fd).unwrap(),
            cached_pages: None,
            opened_as: None,
            made: false,
        };
        // SAFETY: dup2 onto a number this test owns (`described`'s).
        assert_eq!(unsafe { libc::dup2(now_there.as_raw_fd(), fd) }, fd);
        let bound = Handle::adopt_described(fd, Options::default(), d);
        assert_eq!(bound.err().and_then(|e| e.raw_os_error()), Some(libc::EAGAIN));
        let d = Described::of(fd).unwrap();
        assert!(Handle::adopt_described(fd, Options::default(), d).is_ok(), "described as it is, it binds");
    }

    /// A nameless regular file (`O_TMPFILE`) in the temporary directory.
    fn tempfile_in_temp_dir() -> std::fs::File {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .open(std::env::temp_dir())
            .unwrap()
    }
}
