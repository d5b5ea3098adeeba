//! Descriptor-level calls libdontcache makes on the files it tracks: identity
//! (`fstat`, `kcmp`), duplication, position, size, syncing and writeback
//! ranges, and the vectored I/O calls with caller-supplied iovecs.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn check_size(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// What `fstat(2)` says of a descriptor, as far as dontcache needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub dev: u64,
    pub ino: u64,
    /// `st_mode`, file type bits included.
    pub mode: u32,
    pub size: u64,
    /// 512-byte blocks allocated (less than size/512 for a sparse file).
    pub blocks: u64,
    pub nlink: u64,
    pub uid: u32,
    pub gid: u32,
    /// The device a device node stands for.
    pub rdev: u64,
}

impl FileStat {
    pub fn is_regular(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }
}

/// `fstat(2)`. Takes a raw descriptor: identity checks run on numbers the
/// caller may already have closed, where the kernel's `EBADF` is the answer.
pub fn fstat(fd: RawFd) -> io::Result<FileStat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: st is a valid out-pointer for one struct stat.
    check(unsafe { libc::fstat(fd, st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded and filled it.
    let st = unsafe { st.assume_init() };
    Ok(FileStat {
        dev: st.st_dev,
        ino: st.st_ino,
        mode: st.st_mode,
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        nlink: st.st_nlink,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev,
    })
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, min)`: a new descriptor for the same open file
/// description, numbered `min` or above.
pub fn dup_at_least(fd: RawFd, min: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC takes an int and returns a new descriptor.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) };
    check(new)?;
    // SAFETY: `new` is a fresh descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// `fcntl(fd, F_GETFL)`: the access mode and status flags (`O_APPEND`, ...).
pub fn status_flags(fd: RawFd) -> io::Result<i32> {
    // SAFETY: F_GETFL has no arguments and no side effects.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    check(flags).map(|_| flags)
}

/// `kcmp(2)` with `KCMP_FILE` within process `pid` (the caller's own, which
/// glibc no longer caches: callers keep it): whether two descriptors refer
/// to the same open file description. `Err` where the kernel lacks kcmp
/// (`CONFIG_KCMP`) or a descriptor is not open.
pub fn same_open_file(pid: libc::pid_t, a: RawFd, b: RawFd) -> io::Result<bool> {
    const KCMP_FILE: libc::c_int = 0;
    // SAFETY: kcmp compares kernel objects; no memory is passed.
    let r = unsafe { libc::syscall(libc::SYS_kcmp, pid, pid, KCMP_FILE, a, b) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r == 0)
    }
}

/// `lseek(2)`; returns the new offset.
pub fn lseek(fd: BorrowedFd<'_>, offset: i64, whence: libc::c_int) -> io::Result<u64> {
    // SAFETY: no memory is passed.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), offset, whence) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as u64)
    }
}

/// `ftruncate(2)`.
pub fn ftruncate(fd: BorrowedFd<'_>, len: u64) -> io::Result<()> {
    let len = i64::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: no memory is passed.
    check(unsafe { libc::ftruncate(fd.as_raw_fd(), len) })
}

/// `fsync(2)`.
pub fn fsync(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: no memory is passed.
    check(unsafe { libc::fsync(fd.as_raw_fd()) })
}

/// `fdatasync(2)`.
pub fn fdatasync(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: no memory is passed.
    check(unsafe { libc::fdatasync(fd.as_raw_fd()) })
}

/// `sync_file_range(2)` over `len` bytes from `off` (`len == 0`: to the end
/// of the file) with `SYNC_FILE_RANGE_*` flags.
pub fn sync_file_range(fd: BorrowedFd<'_>, off: u64, len: u64, flags: u32) -> io::Result<()> {
    // SAFETY: no memory is passed.
    check(unsafe { libc::sync_file_range(fd.as_raw_fd(), off as i64, len as i64, flags) })
}

/// `open(2)` of `path` with `flags | O_CLOEXEC` and `mode` (for `O_CREAT`).
/// Returns the raw number: the engine's handles hold descriptors by number,
/// as the C programs they stand in for do, and close them with [`close`].
pub fn open(path: &std::path::Path, flags: i32, mode: u32) -> io::Result<RawFd> {
    use std::os::unix::ffi::OsStrExt;
    let c =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: c is a valid C string; the mode is read only with O_CREAT or O_TMPFILE.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) };
    check(fd)?;
    Ok(fd)
}

/// `getpid(2)`.
pub fn getpid() -> libc::pid_t {
    // SAFETY: getpid has no preconditions and cannot fail.
    unsafe { libc::getpid() }
}

/// `getppid(2)`.
pub fn getppid() -> libc::pid_t {
    // SAFETY: getppid has no preconditions and cannot fail.
    unsafe { libc::getppid() }
}

/// `syncfs(2)`: writes back and waits for every dirty page of the
/// filesystem `fd` is on, then commits it.
pub fn syncfs(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: no memory is passed.
    check(unsafe { libc::syncfs(fd.as_raw_fd()) })
}

/// `openat(2)` of `/proc/self/fd/N` read-only: a new open file description
/// of the file `fd` refers to, with error cursors of its own (a `syncfs` or
/// `fsync` on it reports an error once to it, not to the holders of `fd`).
/// The raw system call, so an interposed `open` (the shim's) never sees it.
/// `EACCES` for a file without read permission, `ENOENT` without `/proc`.
pub fn reopen_read_only(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let path = std::ffi::CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a number");
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY;
    // SAFETY: path is a valid C string for the length of the call.
    let r = unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path.as_ptr(), flags, 0) };
    owned(r)
}

/// `openat2(2)` of `path` read-only with `RESOLVE_NO_SYMLINKS`: `ELOOP` if
/// any part of it is a symlink, so the file opened is the one the names
/// lead to. The raw system call, so an interposed `open` (the shim's)
/// never sees it; `ENOSYS` before Linux 5.6.
pub fn open_without_symlinks(path: &std::path::Path) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let path =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open_how is plain data; all zero is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NOFOLLOW) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    let size = std::mem::size_of::<libc::open_how>();
    // SAFETY: path and how are valid for the length of the call, and size is how's.
    let r =
        unsafe { libc::syscall(libc::SYS_openat2, libc::AT_FDCWD, path.as_ptr(), &how as *const libc::open_how, size) };
    owned(r)
}

/// A raw `open*` system call's result as an owned descriptor.
fn owned(r: libc::c_long) -> io::Result<OwnedFd> {
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `r` is a fresh descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// `close(2)` of a descriptor the caller owns by number (one that came
/// from another program's hands, like the shim's). `OwnedFd` closes on drop.
pub fn close(fd: RawFd) -> io::Result<()> {
    // SAFETY: the caller says it owns `fd`; no memory is passed.
    check(unsafe { libc::close(fd) })
}

/// `pwritev2(2)` with the caller's iovec array, validated by the kernel
/// (`EFAULT`, `EINVAL` for a bad count) like the system call it is.
///
/// # Safety
/// `iov` and `cnt` go to the kernel unchanged; the caller must not rely on
/// this function to make them valid, only on the kernel to reject them.
pub unsafe fn pwritev2_iov(
    fd: BorrowedFd<'_>,
    iov: *const libc::iovec,
    cnt: libc::c_int,
    offset: i64,
    flags: i32,
) -> io::Result<usize> {
    // SAFETY: per the contract above, the kernel checks every pointer.
    check_size(unsafe { libc::pwritev2(fd.as_raw_fd(), iov, cnt, offset, flags) })
}

/// `preadv2(2)` with the caller's iovec array; see [`pwritev2_iov`].
///
/// # Safety
/// As for [`pwritev2_iov`].
pub unsafe fn preadv2_iov(
    fd: BorrowedFd<'_>,
    iov: *const libc::iovec,
    cnt: libc::c_int,
    offset: i64,
    flags: i32,
) -> io::Result<usize> {
    // SAFETY: per the contract above, the kernel checks every pointer.
    check_size(unsafe { libc::preadv2(fd.as_raw_fd(), iov, cnt, offset, flags) })
}

/// `renameat2(from, to, RENAME_NOREPLACE)`: renames only if `to` does not
/// exist (`EEXIST` otherwise), so a rename never replaces what someone
/// created meanwhile.
pub fn rename_noreplace(from: &std::path::Path, to: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &std::path::Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two valid C strings, resolved against the working directory.
    check(unsafe { libc::renameat2(libc::AT_FDCWD, f.as_ptr(), libc::AT_FDCWD, t.as_ptr(), libc::RENAME_NOREPLACE) })
}

/// The soft `RLIMIT_NOFILE`: how many descriptors this process may hold.
pub fn open_files_limit() -> u64 {
    open_files_limits().map_or(1024, |(soft, _)| soft)
}

/// The process's soft and hard `RLIMIT_NOFILE`, by the `prlimit64` system
/// call rather than libc's `getrlimit`: the shim interposes that one to
/// show a program the limit it was given, below the one the process has.
pub fn open_files_limits() -> io::Result<(u64, u64)> {
    let mut rl = libc::rlimit64 { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: this process, no new limit, rl a valid out-pointer.
    check_size(unsafe {
        libc::syscall(libc::SYS_prlimit64, 0, libc::RLIMIT_NOFILE, std::ptr::null::<libc::rlimit64>(), &mut rl) as isize
    })?;
    Ok((rl.rlim_cur, rl.rlim_max))
}

/// Sets the process's `RLIMIT_NOFILE` (`soft` up to `hard`) by the
/// `prlimit64` system call, past the shim's `setrlimit`.
pub fn set_open_files_limits(soft: u64, hard: u64) -> io::Result<()> {
    let rl = libc::rlimit64 { rlim_cur: soft, rlim_max: hard };
    // SAFETY: this process, rl a valid, initialised limit, no old one asked.
    check_size(unsafe {
        libc::syscall(libc::SYS_prlimit64, 0, libc::RLIMIT_NOFILE, &rl, std::ptr::null_mut::<libc::rlimit64>()) as isize
    })
    .map(drop)
}

/// Raises the soft `RLIMIT_NOFILE` towards the hard one, to at most
/// `at_most`; never lowers it. The limits as they were.
pub fn raise_open_files_limit(at_most: u64) -> io::Result<(u64, u64)> {
    let (soft, hard) = open_files_limits()?;
    let want = at_most.min(hard);
    if want > soft {
        set_open_files_limits(want, hard)?;
    }
    Ok((soft, hard))
}

/// The path a descriptor was opened by, from `/proc/self/fd` (for messages
/// about files whose descriptor is the only name left).
pub fn fd_path(fd: BorrowedFd<'_>) -> io::Result<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn dup_and_identity() {
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let d = dup_at_least(f.as_raw_fd(), 100).unwrap();
        assert!(d.as_raw_fd() >= 100);
        let (a, b) = (fstat(f.as_raw_fd()).unwrap(), fstat(d.as_raw_fd()).unwrap());
        assert_eq!((a.dev, a.ino), (b.dev, b.ino));
        let pid = getpid();
        if let Ok(same) = same_open_file(pid, f.as_raw_fd(), d.as_raw_fd()) {
            assert!(same, "a dup shares the open file description");
            let other = std::fs::File::open("/proc/self/exe").unwrap();
            assert!(!same_open_file(pid, f.as_raw_fd(), other.as_raw_fd()).unwrap(), "a second open does not");
        }
        assert_eq!(fstat(-1).unwrap_err().raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn an_open_without_symlinks_refuses_any_on_the_way() {
        let dir = std::env::temp_dir().join(format!("dc-sys-nosymlinks-{}", getpid()));
        std::fs::create_dir_all(dir.join("real")).unwrap();
        std::fs::write(dir.join("real/f"), b"x").unwrap();
        let _ = std::fs::remove_file(dir.join("link"));
        std::os::unix::fs::symlink("real", dir.join("link")).unwrap();
        let f = open_without_symlinks(&dir.join("real/f")).unwrap();
        assert!(fstat(f.as_raw_fd()).unwrap().is_regular());
        let through = open_without_symlinks(&dir.join("link/f")).unwrap_err();
        assert_eq!(through.raw_os_error(), Some(libc::ELOOP), "a symlinked directory on the way");
        let missing = open_without_symlinks(&dir.join("real/none")).unwrap_err();
        assert_eq!(missing.raw_os_error(), Some(libc::ENOENT));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_reopen_is_the_same_file_in_another_open_file_description() {
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let r = reopen_read_only(f.as_fd()).unwrap();
        let (a, b) = (fstat(f.as_raw_fd()).unwrap(), fstat(r.as_raw_fd()).unwrap());
        assert_eq!((a.dev, a.ino), (b.dev, b.ino));
        if let Ok(same) = same_open_file(getpid(), f.as_raw_fd(), r.as_raw_fd()) {
            assert!(!same, "a reopen has an open file description of its own");
        }
        assert_eq!(status_flags(r.as_raw_fd()).unwrap() & libc::O_ACCMODE, libc::O_RDONLY);
        // SAFETY: only the number is used (past any open-files limit here,
        // so not open): /proc has no such entry.
        let bad = reopen_read_only(unsafe { BorrowedFd::borrow_raw(1 << 30) }).unwrap_err();
        assert_eq!(bad.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn a_bad_iovec_is_the_kernels_efault() {
        let f = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
        // SAFETY: the kernel rejects the null array; nothing is dereferenced here.
        let e = unsafe { pwritev2_iov(f.as_fd(), std::ptr::null(), 3, 0, 0) }.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFAULT));
        // SAFETY: as above; the count is checked before the array.
        let e = unsafe { pwritev2_iov(f.as_fd(), std::ptr::null(), 5000, 0, 0) }.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }
}

#[cfg(test)]
mod open_tests {
    use super::*;

    #[test]
    fn open_keeps_the_errno_and_sets_close_on_exec() {
        let dir = std::env::temp_dir().join(format!("dc-sys-open-{}", getpid()));
        let _ = std::fs::create_dir(&dir);
        let path = dir.join("f");
        let fd = open(&path, libc::O_CREAT | libc::O_WRONLY | libc::O_EXCL, 0o600).unwrap();
        // SAFETY: fd is open; F_GETFD takes no pointer.
        let fdflags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert_ne!(fdflags & libc::FD_CLOEXEC, 0);
        assert_eq!(fstat(fd).unwrap().mode & 0o777, 0o600);
        close(fd).unwrap();
        let again = open(&path, libc::O_CREAT | libc::O_WRONLY | libc::O_EXCL, 0o600).unwrap_err();
        assert_eq!(again.raw_os_error(), Some(libc::EEXIST));
        let nul = open(std::path::Path::new("a\0b"), libc::O_RDONLY, 0).unwrap_err();
        assert_eq!(nul.raw_os_error(), Some(libc::EINVAL));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
