//! Reads, writes, syncs and truncation on tracked descriptors: through the
//! file's handle, with the system call's own validation and errno (the
//! kernel checks buffers, counts and offsets before the library looks at
//! anything).

use std::ffi::{c_int, c_void};

use dontcache::Position;

use crate::real;
use crate::table::{cold_read_flags, engine, get, ret, set_errno, write_handle, wrote_untracked};

/// The offset of pwrite(2), pread(2), pwritev(2), preadv(2): negative is
/// `EINVAL` (only the `*v2` calls read -1 as the file position).
fn at(off: libc::off_t) -> Option<Position> {
    u64::try_from(off).ok().map(Position::At)
}

/// The offset of pwritev2(2) and preadv2(2): -1 is the file position.
fn at_v2(off: libc::off_t) -> Option<Position> {
    if off == -1 {
        Some(Position::Current)
    } else {
        at(off)
    }
}

fn einval() -> isize {
    set_errno(libc::EINVAL);
    -1
}

fn one(buf: *const c_void, len: usize) -> libc::iovec {
    libc::iovec { iov_base: buf as *mut c_void, iov_len: len }
}

/// A read at the file position of a `READ_COLD` file whose filesystem
/// takes `RWF_DONTCACHE` on reads (`table::cold_read_flags`): the same
/// read as `preadv2(fd, iov, cnt, -1, flags | RWF_DONTCACHE)`, the same
/// answer and errno (`readv` checks its vector as `preadv2` does). `None`
/// for any other descriptor, and where the kernel refused the flag
/// (`EOPNOTSUPP`, before reading anything): the number holds another file,
/// a pipe or a socket since a close the shim did not see, and the call is
/// made as the program made it.
unsafe fn cold_read(fd: c_int, iov: *const libc::iovec, cnt: c_int, flags: c_int) -> Option<isize> {
    match cold_read_flags(fd) {
        0 => None,
        cold => match real::preadv2()(fd, iov, cnt, -1, flags | cold) {
            n if n < 0 && dc_sys::errno() == libc::EOPNOTSUPP => None,
            n => Some(n),
        },
    }
}

/// One interposer per symbol: a descriptor with a handle (`$lookup`'s)
/// has its call go through it, any other straight to libc (a read at the
/// file position of a small cold input with `RWF_DONTCACHE`, where `$cold`
/// says so), and `$after` is told what that call returned.
macro_rules! through_handle {
    (handle $lookup:path, after $after:path;
        $($name:ident ($fd:ident : $fdty:ty $(, $arg:ident : $ty:ty)*) => |$h:ident| $tracked:expr
        $(, cold $cold:expr)?;)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name($fd: $fdty $(, $arg: $ty)*) -> isize {
                match $lookup($fd) {
                    Some($h) => $tracked,
                    None => {
                        $(if let Some(n) = $cold {
                            return n;
                        })?
                        let n = real::$name()($fd $(, $arg)*);
                        $after($fd, n);
                        n
                    }
                }
            }
        )*
    };
}

/// What a read without a handle returned: nothing to count.
fn read_untracked(_fd: c_int, _n: isize) {}

// SAFETY (all below): the caller's pointers go to the kernel unread, as the
// system call takes them. A file the program made writes without a handle
// while small (`table::write_handle`, `table::wrote_untracked`).
through_handle! {
    handle write_handle, after wrote_untracked;
    write(fd: c_int, buf: *const c_void, len: usize) => |h|
        ret(engine(|| unsafe { h.write_iov(&one(buf, len), 1, Position::Current, 0) }).map(|n| n as isize), -1);
    writev(fd: c_int, v: *const libc::iovec, cnt: c_int) => |h|
        ret(engine(|| unsafe { h.write_iov(v, cnt, Position::Current, 0) }).map(|n| n as isize), -1);
    pwrite(fd: c_int, buf: *const c_void, len: usize, off: libc::off_t) => |h| match u64::try_from(off) {
        Ok(off) => ret(engine(|| unsafe { h.pwrite_raw(buf, len, off) }).map(|n| n as isize), -1),
        Err(_) => einval(),
    };
    pwrite64(fd: c_int, buf: *const c_void, len: usize, off: libc::off_t) => |h| match u64::try_from(off) {
        Ok(off) => ret(engine(|| unsafe { h.pwrite_raw(buf, len, off) }).map(|n| n as isize), -1),
        Err(_) => einval(),
    };
    pwritev(fd: c_int, v: *const libc::iovec, cnt: c_int, off: libc::off_t) => |h| match at(off) {
        Some(pos) => ret(engine(|| unsafe { h.write_iov(v, cnt, pos, 0) }).map(|n| n as isize), -1),
        None => einval(),
    };
    pwritev64(fd: c_int, v: *const libc::iovec, cnt: c_int, off: libc::off_t) => |h| match at(off) {
        Some(pos) => ret(engine(|| unsafe { h.write_iov(v, cnt, pos, 0) }).map(|n| n as isize), -1),
        None => einval(),
    };
    pwritev2(fd: c_int, v: *const libc::iovec, cnt: c_int, off: libc::off_t, flags: c_int) => |h| match at_v2(off) {
        Some(pos) => ret(engine(|| unsafe { h.write_iov(v, cnt, pos, flags) }).map(|n| n as isize), -1),
        None => einval(),
    };
    pwritev64v2(fd: c_int, v: *const libc::iovec, cnt: c_int, off: libc::off_t, flags: c_int) => |h| match at_v2(off) {
        Some(pos) => ret(engine(|| unsafe { h.write_iov(v, cnt, pos, flags) }).map(|n| n as isize), -1),
        None => einval(),
    };
}

through_handle! {
    handle get, after read_untracked;
    read(fd: c_int, buf: *mut c_void, len: usize) => |h|
        ret(engine(|| unsafe { h.read_iov(&one(buf, len), 1, Position::Current, 0) }).map(|n| n as isize), -1),
        // `preadv2` refuses a length over `isize::MAX` (EINVAL), `read` faults.
        cold if len <= isize::MAX as usize { cold_read(fd, &one(buf, len), 1, 0) } else { None };
    readv(fd: c_int, v: *const libc::iovec, cnt: c_int) => |h|
        ret(engine(|| unsafe { h.read_iov(v, cnt, Position::Current, 0) }).map(|n| n as isize), -1),
        cold cold_read(fd, v, cnt, 0);
    pread(fd: c_int, buf: *mut c_void, len: usize, off: libc::off_t) => |h| match at(off) {
        Some(pos) => ret(engine(|| unsafe { h.read_iov(&one(buf, len), 1, pos, 0) }).map(|n| n as isize), -1),
        None => einval(),
    };
    pread64(fd: c_int, buf: *mut c_void, len: usize, off: libc::off_t) => |h| match at(off) {
        Some(pos) => ret(engine(|| unsafe { h.read_iov(&one(buf, len), 1, pos, 0) }).map(|n| n as isize), -1),
        None => einval(),
    };
    preadv(fd: c_int, v: *const libc::iovec, cnt: c_int, off: libc::off_t) => |h| match at(off) {
        Some(pos) => ret(engine(|| unsafe { h.read_iov(v, cnt, pos, 0) }).map(|n| n as isize), -1),
        None => einval(),
    };
    preadv64(fd: c_int, v: *const libc::iovec, cnt: c_int, off: libc::off_t) => |h| match at(off) {
        Some(pos) => ret(engine(|| unsafe { h.read_iov(v, cnt, pos, 0) }).map(|n| n as isize), -1),
        None => einval(),
    };
    preadv2(fd: c_int, v: *const libc::iovec, cnt: c_int, off: libc::off_t, flags: c_int) => |h| match at_v2(off) {
        Some(pos) => ret(engine(|| unsafe { h.read_iov(v, cnt, pos, flags) }).map(|n| n as isize), -1),
        None => einval(),
    }, cold if off == -1 { cold_read(fd, v, cnt, flags) } else { None };
    preadv64v2(fd: c_int, v: *const libc::iovec, cnt: c_int, off: libc::off_t, flags: c_int) => |h| match at_v2(off) {
        Some(pos) => ret(engine(|| unsafe { h.read_iov(v, cnt, pos, flags) }).map(|n| n as isize), -1),
        None => einval(),
    }, cold if off == -1 { cold_read(fd, v, cnt, flags) } else { None };
}

#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    match get(fd) {
        Some(h) => ret(engine(|| h.fsync()).map(|_| 0), -1),
        None => real::fsync()(fd),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    match get(fd) {
        Some(h) => ret(engine(|| h.fdatasync()).map(|_| 0), -1),
        None => real::fdatasync()(fd),
    }
}

#[no_mangle]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: libc::off_t) -> c_int {
    match (get(fd), u64::try_from(len)) {
        (Some(h), Ok(len)) => ret(engine(|| h.truncate(len)).map(|_| 0), -1),
        _ => real::ftruncate()(fd, len),
    }
}

#[no_mangle]
pub unsafe extern "C" fn ftruncate64(fd: c_int, len: libc::off_t) -> c_int {
    match (get(fd), u64::try_from(len)) {
        (Some(h), Ok(len)) => ret(engine(|| h.truncate(len)).map(|_| 0), -1),
        _ => real::ftruncate64()(fd, len),
    }
}
