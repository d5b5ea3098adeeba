//! Where descriptors come from and where they go: opens adopt regular
//! files, closes hand them to the flusher, dups track the copy, and every
//! other call that makes a descriptor clears what its number held.

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::table::{adopt, engine, forget, get, inside, ret, take, track_copy, MAX_FD};
use crate::{in_vfork_child, real};

// open(2) is variadic; on x86-64 and arm64 the mode travels in the same
// register whether or not the caller passed it, so reading it as a fixed
// third argument is the standard way to interpose it. It is only used with
// O_CREAT or O_TMPFILE, when the caller did pass it.
macro_rules! opens {
    ($($name:ident ($($arg:ident : $ty:ty),*) flags $flags:expr, at $dir:expr, $path:ident;)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                let fd = numbered_open(|| real::$name()($($arg),*));
                if fd >= 0 {
                    adopt(fd, $flags, opened_as($dir, $path));
                }
                fd
            }
        )*
    };
}

opens! {
    open(path: *const c_char, flags: c_int, mode: libc::mode_t) flags flags, at libc::AT_FDCWD, path;
    open64(path: *const c_char, flags: c_int, mode: libc::mode_t) flags flags, at libc::AT_FDCWD, path;
    openat(dir: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) flags flags, at dir, path;
    openat64(dir: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) flags flags, at dir, path;
    creat(path: *const c_char, mode: libc::mode_t) flags libc::O_WRONLY, at libc::AT_FDCWD, path;
    creat64(path: *const c_char, mode: libc::mode_t) flags libc::O_WRONLY, at libc::AT_FDCWD, path;
}

/// A call of the program's that makes one descriptor at or above `min`,
/// numbered as the kernel would have numbered it without the library,
/// whose threads make descriptors of their own now and then
/// (`dontcache::own::Numbering`), and within the program's limit
/// (`limits`: a `min` past it is the kernel's `EINVAL`).
fn numbered(min: c_int, call: impl Fn() -> c_int) -> c_int {
    numbered_looking_first(min, false, call)
}

/// `numbered` for an open, which near the program's limit first looks
/// whether a number is free below it (`limits::open_would_pass_limit`): an
/// open refused after it was made has created or truncated its file.
fn numbered_open(call: impl Fn() -> c_int) -> c_int {
    numbered_looking_first(0, true, call)
}

/// `numbered`, looking first where `look_first` says (`numbered_open`).
fn numbered_looking_first(min: c_int, look_first: bool, call: impl Fn() -> c_int) -> c_int {
    if inside() {
        return call();
    }
    if crate::limits::number_past_limit(min) {
        dc_sys::set_errno(libc::EINVAL);
        return -1;
    }
    with_room(
        || {
            if look_first && crate::limits::open_would_pass_limit() {
                return crate::limits::refuse_open();
            }
            crate::limits::within_limit(dontcache::own::numbered_as_alone(min, &call))
        },
        |&fd| fd < 0,
    )
}

/// How long a call that the library gave room to goes on trying once the
/// library holds nothing more to give: its threads make and close
/// descriptors of their own for a moment (a `syncfs` batch's file, a
/// binding under way, a number moved), which can fill the last of a table
/// another thread of the program nearly fills.
const PASSING_DESCRIPTORS_TIME: std::time::Duration = std::time::Duration::from_millis(20);

/// `call`, a call of the program's that makes descriptors, made again where
/// it `failed` for a full descriptor table (`EMFILE`) while the library
/// held descriptors for the program's files, which without the library the
/// program would have had: the library binds no new file meanwhile, lets
/// go of those it holds, and the call is made again each time one of its
/// duplicates closes (`table::give_room`; at once where one closed since
/// the call was made, or while room was looked for), until it succeeds,
/// nothing is left that could close (once the library gave some,
/// `PASSING_DESCRIPTORS_TIME` later),
/// or `RELEASE_LIMIT` has passed. The kernel refuses such a call before it
/// does anything, so making it again is safe.
pub fn with_room<T>(call: impl Fn() -> T, failed: impl Fn(&T) -> bool) -> T {
    let table_full = |made: &T| failed(made) && dc_sys::errno() == libc::EMFILE;
    let mut closed = dontcache::duplicates_closed();
    let mut made = call();
    // Where the library's numbers are all above the program's limit, a
    // full table is the program's own, as without the library.
    if !table_full(&made) || inside() || crate::limits::library_all_above_program() {
        return made;
    }
    let _wanted = crate::table::RoomWanted::new();
    let since = std::time::Instant::now();
    let mut gave = false;
    while table_full(&made) && since.elapsed() < dontcache::RELEASE_LIMIT {
        if dontcache::duplicates_closed() == closed {
            if crate::table::give_room() {
                gave = true;
            } else if dontcache::duplicates_closed() != closed {
                // One closed while room was looked for, and was no longer
                // counted as a closed file to wait for: the call may fit now.
            } else if gave && since.elapsed() < PASSING_DESCRIPTORS_TIME {
                std::thread::sleep(std::time::Duration::from_micros(100));
            } else {
                break;
            }
        }
        closed = dontcache::duplicates_closed();
        made = call();
    }
    made
}

/// The path an open was given, for the engine to find the file by (on an
/// overlay, its layer file) without asking /proc.
///
/// # Safety
/// `path` is null or a C string that lives as long as the result is used.
pub unsafe fn opened_as<'a>(dir: c_int, path: *const c_char) -> Option<dontcache::OpenedAs<'a>> {
    if path.is_null() {
        return None;
    }
    // SAFETY: the caller's promise above.
    let bytes = unsafe { std::ffi::CStr::from_ptr(path) }.to_bytes();
    let path = std::path::Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bytes));
    Some(dontcache::OpenedAs { dir, path })
}

/// Closes a tracked descriptor: the file is handed to the flusher, and a
/// writeback error the library kept for it (or a late one of an earlier
/// file on the device) is returned here, where cp, dd and tar check.
fn close_tracked(h: &dontcache::Handle) -> c_int {
    ret(engine(|| h.close_number_shared().0).map(|_| 0), -1)
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if inside() {
        return real::close()(fd);
    }
    if let Some(late) = crate::table::take_made(fd) {
        return close_made(fd, late);
    }
    match take(fd) {
        Some(h) => close_tracked(&h),
        // The library's own descriptors are not the program's to close.
        None => dontcache::own::close_unless_own(fd, || close_untracked(fd)),
    }
}

/// The close of a file the program made and wrote without a handle, just
/// handed over (`table::take_made`): a late error of its device not yet
/// returned is this close's, as for a file with a handle.
unsafe fn close_made(fd: c_int, late: Option<std::io::Error>) -> c_int {
    let r = real::close()(fd);
    match late {
        Some(e) if r == 0 => {
            dc_sys::set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            -1
        }
        _ => r,
    }
}

/// A locked file's descriptor is written back and dropped through first
/// (`dontcache::locked`); an error met there is the close's, after the
/// descriptor is closed as asked. Not in a vfork child, which shares its
/// parent's engine and must not lock it; asked only where a file is
/// locked, as it costs a `getpid` (rsync closes five untracked descriptors
/// per file it copies).
unsafe fn close_untracked(fd: c_int) -> c_int {
    let settled = if !dontcache::locked::any_locked() || in_vfork_child() {
        Ok(())
    } else {
        engine(|| dontcache::locked::settle_before_close(fd))
    };
    let r = real::close()(fd);
    match settled {
        Err(e) if r == 0 => {
            dc_sys::set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            -1
        }
        _ => r,
    }
}

/// Hands over every tracked descriptor in `first..=last` before a call
/// closes them all (their numbers stay open until that call).
fn release_range(first: c_uint, last: c_uint) {
    let last = (last as usize).min(MAX_FD - 1);
    for fd in first as usize..=last {
        if let Some(h) = take(fd as c_int) {
            let _ = engine(|| h.release_shared());
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    if inside() || flags & libc::CLOSE_RANGE_CLOEXEC as c_int != 0 || in_vfork_child() {
        return real::close_range()(first, last, flags);
    }
    release_range(first, last);
    // The library's own descriptors in the range stay open: the program
    // closes what it believes is all of its own.
    dontcache::own::close_range_sparing_own(first, last, |a, b| real::close_range()(a, b, flags))
}

#[no_mangle]
pub unsafe extern "C" fn closefrom(first: c_int) {
    if inside() || first < 0 || in_vfork_child() {
        return real::closefrom()(first);
    }
    release_range(first as c_uint, c_uint::MAX);
    dontcache::own::close_range_sparing_own(first as c_uint, c_uint::MAX, |a, b| {
        if b == c_uint::MAX {
            real::closefrom()(a as c_int);
        } else {
            real::close_range()(a, b, 0);
        }
        0
    });
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    let new = numbered(0, || real::dup()(fd));
    track_copy(fd, new);
    new
}

/// dup2 and dup3 silently close `new`: hand it over first (an error of its
/// has no caller to go to here, as with the kernel's own dup2; it is a late
/// error).
unsafe fn before_dup_over(old: c_int, new: c_int) {
    if old != new && !inside() {
        if let Some(h) = take(new) {
            let _ = engine(|| h.release_shared());
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if in_vfork_child() {
        return real::dup2()(old, new);
    }
    if crate::limits::number_past_limit(new) {
        dc_sys::set_errno(libc::EBADF);
        return -1;
    }
    before_dup_over(old, new);
    let r = dontcache::own::dup_onto_unless_own(new, || real::dup2()(old, new));
    crate::limits::note_given(r);
    track_copy(old, r);
    r
}

#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if in_vfork_child() {
        return real::dup3()(old, new, flags);
    }
    if crate::limits::number_past_limit(new) {
        dc_sys::set_errno(libc::EBADF);
        return -1;
    }
    before_dup_over(old, new);
    let r = dontcache::own::dup_onto_unless_own(new, || real::dup3()(old, new, flags));
    crate::limits::note_given(r);
    track_copy(old, r);
    r
}

/// fcntl(2) is variadic; the argument, where the command takes one, is an
/// int or a pointer, passed in the same register either way.
unsafe fn fcntl_common(
    real: unsafe extern "C" fn(c_int, c_int, usize) -> c_int,
    fd: c_int,
    cmd: c_int,
    arg: usize,
) -> c_int {
    // Unlocks too: the caller's `struct flock` is not read here, as it may
    // not be memory the shim can read (the kernel's EFAULT is the answer).
    // A lease is the open file's, as a `flock` is, and is refused while
    // another open of the file (a duplicate the library still holds of an
    // earlier one) may write it.
    if matches!(cmd, libc::F_SETLK | libc::F_SETLKW | libc::F_OFD_SETLK | libc::F_OFD_SETLKW | libc::F_SETLEASE) {
        crate::locks::before_lock(fd);
    }
    let r = match cmd {
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => numbered(arg as c_int, || real(fd, cmd, arg)),
        _ => real(fd, cmd, arg),
    };
    if inside() || r < 0 {
        return r;
    }
    match cmd {
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => track_copy(fd, r),
        // O_DIRECT switched on: the page cache is out of the picture.
        libc::F_SETFL if arg as c_int & libc::O_DIRECT != 0 => {
            if let Some(h) = take(fd) {
                engine(|| h.untrack());
            }
            forget(fd);
        }
        libc::F_SETFL => {
            if let Some(h) = get(fd) {
                engine(|| h.status_flags_set(arg as c_int));
            }
        }
        _ => {}
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    fcntl_common(real::fcntl(), fd, cmd, arg)
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    fcntl_common(real::fcntl64(), fd, cmd, arg)
}

// Calls that make descriptors the shim never tracks: whatever the number
// held before (a file closed where the shim could not see) is gone. Those
// `looking first` look whether a number below the program's limit is free
// before the call, as opens do: an accept refused after it was made has
// taken its connection off the listener's queue, where the kernel's
// refusal leaves it there for the next accept.
macro_rules! creators {
    (looking first: $($name:ident ($($arg:ident : $ty:ty),*);)*) => {
        creators!(@made true, $($name ($($arg: $ty),*);)*);
    };
    (@made $look_first:expr, $($name:ident ($($arg:ident : $ty:ty),*);)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                let fd = numbered_looking_first(0, $look_first, || real::$name()($($arg),*));
                if fd >= 0 && !inside() {
                    forget(fd);
                }
                fd
            }
        )*
    };
    ($($name:ident ($($arg:ident : $ty:ty),*);)*) => {
        creators!(@made false, $($name ($($arg: $ty),*);)*);
    };
}

creators! { looking first:
    accept(fd: c_int, addr: *mut libc::sockaddr, len: *mut libc::socklen_t);
    accept4(fd: c_int, addr: *mut libc::sockaddr, len: *mut libc::socklen_t, flags: c_int);
    // Opens (`O_CREAT`, `O_TRUNC`); glibc's `shm_open` opens with its own
    // `open`, which no interposer sees.
    shm_open(name: *const c_char, flags: c_int, mode: libc::mode_t);
    // Variadic as `open` is: the mode and attributes, read as fixed
    // arguments the same way, are used only with `O_CREAT`.
    mq_open(name: *const c_char, flags: c_int, mode: libc::mode_t, attr: *mut c_void);
    open_by_handle_at(mount: c_int, handle: *mut c_void, flags: c_int);
}

creators! {
    socket(domain: c_int, ty: c_int, proto: c_int);
    eventfd(init: c_uint, flags: c_int);
    epoll_create(size: c_int);
    epoll_create1(flags: c_int);
    memfd_create(name: *const c_char, flags: c_uint);
    timerfd_create(clock: c_int, flags: c_int);
    inotify_init();
    inotify_init1(flags: c_int);
    fanotify_init(flags: c_uint, event_flags: c_uint);
    pidfd_open(pid: libc::pid_t, flags: c_uint);
    pidfd_getfd(pidfd: c_int, fd: c_int, flags: c_uint);
    // glibc opens /dev/ptmx with its own `open`.
    posix_openpt(flags: c_int);
    getpt();
}

/// `opendir(3)`, made as glibc makes it (an `open` of the directory, then
/// `fdopendir`, which sets close-on-exec as the open did) so that its
/// descriptor is numbered and refused at the program's limit as an open's
/// is: glibc's own `open` inside its `opendir` is not interposable.
#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    if inside() {
        return real::opendir()(path);
    }
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // SAFETY: the caller's path, as `opendir` takes it.
    let fd = numbered_open(|| real::open()(path, flags, 0));
    if fd < 0 {
        return std::ptr::null_mut();
    }
    forget(fd);
    // SAFETY: a directory's descriptor just opened, which the stream owns.
    let dir = real::fdopendir()(fd);
    if dir.is_null() {
        let errno = dc_sys::errno();
        // The raw system call: the number is the program's no longer.
        // SAFETY: closes the descriptor opened above, once.
        libc::syscall(libc::SYS_close, fd);
        dc_sys::set_errno(errno);
    }
    dir
}

/// A call that reads a directory whole through a descriptor of its own
/// (glibc's `scandir` opens it with its own `opendir`, which no interposer
/// sees, and closes it before it returns): refused as an open is where
/// the number would pass the program's limit, looked for first.
unsafe fn directory_read(call: impl Fn() -> c_int) -> c_int {
    if inside() {
        return call();
    }
    with_room(|| if crate::limits::open_would_pass_limit() { crate::limits::refuse_open() } else { call() }, |&r| r < 0)
}

macro_rules! directory_reads {
    ($($name:ident ($($arg:ident : $ty:ty),*);)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                directory_read(|| real::$name()($($arg),*))
            }
        )*
    };
}

directory_reads! {
    scandir(dir: *const c_char, list: *mut c_void, filter: *const c_void, compare: *const c_void);
    scandir64(dir: *const c_char, list: *mut c_void, filter: *const c_void, compare: *const c_void);
    scandirat(at: c_int, dir: *const c_char, list: *mut c_void, filter: *const c_void, compare: *const c_void);
    scandirat64(at: c_int, dir: *const c_char, list: *mut c_void, filter: *const c_void, compare: *const c_void);
}

/// A call of the `mkstemp(3)` family on `template`, numbered and refused
/// at the program's limit as an open is, its file adopted as one the
/// program created (glibc creates it through its own `open`, which no
/// interposer sees). A file made and then refused (its number past the
/// limit, taken meanwhile by another of the program's threads) is removed,
/// as the kernel's refusal makes nothing; a call made again (`with_room`)
/// is given the template as the program gave it, as glibc fills in the
/// `XXXXXX` and wants it back.
unsafe fn temp_file(template: *mut c_char, flags: c_int, call: impl Fn() -> c_int) -> c_int {
    if inside() || template.is_null() {
        return call();
    }
    // SAFETY: the caller's template, a C string the call writes in place.
    let given = std::ffi::CStr::from_ptr(template).to_bytes_with_nul().to_vec();
    let made = std::cell::Cell::new(false);
    let remove_refused = || {
        if made.replace(false) {
            let errno = dc_sys::errno();
            // SAFETY: the name the refused call made, still in the template.
            libc::unlink(template);
            dc_sys::set_errno(errno);
        }
    };
    let fd = numbered_open(|| {
        remove_refused();
        // SAFETY: as many bytes as the template held, back into it.
        std::ptr::copy_nonoverlapping(given.as_ptr().cast(), template, given.len());
        let fd = call();
        made.set(fd >= 0);
        fd
    });
    if fd < 0 {
        remove_refused();
    } else {
        adopt(fd, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | flags, opened_as(libc::AT_FDCWD, template));
    }
    fd
}

macro_rules! temp_files {
    ($($name:ident ($($arg:ident : $ty:ty),*) flags $flags:expr;)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name(template: *mut c_char $(, $arg: $ty)*) -> c_int {
                temp_file(template, $flags, || real::$name()(template $(, $arg)*))
            }
        )*
    };
}

temp_files! {
    mkstemp() flags 0;
    mkstemp64() flags 0;
    mkostemp(flags: c_int) flags flags;
    mkostemp64(flags: c_int) flags flags;
    mkstemps(suffix: c_int) flags 0;
    mkstemps64(suffix: c_int) flags 0;
    mkostemps(suffix: c_int, flags: c_int) flags flags;
    mkostemps64(suffix: c_int, flags: c_int) flags flags;
}

/// `recvmsg(2)`: descriptors the message brought are given as the kernel
/// gives them at the program's limit (`received_within_limit`).
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> isize {
    let n = real::recvmsg()(fd, msg, flags);
    if n >= 0 && !inside() {
        received_within_limit(msg);
    }
    n
}

/// `recvmmsg(2)`, each message as `recvmsg`'s.
#[no_mangle]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    msgs: *mut libc::mmsghdr,
    len: c_uint,
    flags: c_int,
    timeout: *mut libc::timespec,
) -> c_int {
    let n = real::recvmmsg()(fd, msgs, len, flags, timeout);
    if n > 0 && !inside() {
        for i in 0..n as usize {
            // SAFETY: the kernel filled the first `n` of the caller's array.
            received_within_limit(&mut (*msgs.add(i)).msg_hdr);
        }
    }
    n
}

/// The descriptors a received message brought (`SCM_RIGHTS`, the last of
/// its control messages), as the kernel gives them at the program's
/// limit: it installs them in order until one finds no number below the
/// limit, drops the rest, writes the control message for those installed
/// only (none when none was) and sets `MSG_CTRUNC`. Under the raised limit
/// all came, past it: those are closed here and the message cut so. The
/// rest have new numbers: what the table held for those is forgotten.
unsafe fn received_within_limit(msg: *mut libc::msghdr) {
    if msg.is_null() || (*msg).msg_control.is_null() {
        return;
    }
    // SAFETY: the kernel wrote `msg_controllen` bytes of control messages
    // into the caller's buffer; the CMSG macros walk within them.
    let mut cmsg = libc::CMSG_FIRSTHDR(msg);
    while !cmsg.is_null() {
        if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
            let data = libc::CMSG_DATA(cmsg).cast::<c_int>();
            let count =
                ((*cmsg).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize) / std::mem::size_of::<c_int>();
            let fd = |i: usize| data.add(i).read_unaligned();
            let kept = (0..count).position(|i| crate::limits::number_past_limit(fd(i))).unwrap_or(count);
            for i in 0..kept {
                forget(fd(i));
                crate::limits::note_given(fd(i));
            }
            for i in kept..count {
                // The raw system call: the shim's `close` is the program's.
                // SAFETY: a number this message brought, closed once.
                libc::syscall(libc::SYS_close, fd(i));
            }
            if kept < count {
                (*msg).msg_flags |= libc::MSG_CTRUNC;
                let at = cmsg as usize - (*msg).msg_control as usize;
                let bytes = (kept * std::mem::size_of::<c_int>()) as c_uint;
                if kept == 0 {
                    (*msg).msg_controllen = at;
                } else {
                    (*cmsg).cmsg_len = libc::CMSG_LEN(bytes) as usize;
                    (*msg).msg_controllen = (*msg).msg_controllen.min(at + libc::CMSG_SPACE(bytes) as usize);
                }
            }
            return;
        }
        cmsg = libc::CMSG_NXTHDR(msg, cmsg);
    }
}

/// signalfd makes a descriptor only when given -1; otherwise it changes
/// the one it is given, whose number stays.
#[no_mangle]
pub unsafe extern "C" fn signalfd(fd: c_int, mask: *const libc::sigset_t, flags: c_int) -> c_int {
    let r =
        if fd == -1 { numbered(0, || real::signalfd()(fd, mask, flags)) } else { real::signalfd()(fd, mask, flags) };
    if r >= 0 && !inside() {
        forget(r);
    }
    r
}

/// A call that makes two descriptors into `fds` (0 on success), each
/// numbered as without the library, and forgets what their numbers held.
unsafe fn pair(fds: *mut c_int, call: impl Fn() -> c_int) -> c_int {
    if inside() {
        return call();
    }
    let numbering = dontcache::own::Numbering::begin();
    let made = || {
        if call() != 0 {
            return -1;
        }
        for i in 0..2 {
            *fds.add(i) = numbering.renumber(*fds.add(i), 0);
            forget(*fds.add(i));
        }
        // Past the program's limit, the kernel would have made neither. The
        // caller's array keeps the closed numbers: what it held before the
        // call is not read, as the caller's pointer may be one the kernel
        // refuses (`EFAULT`), which reading it here would crash on.
        if crate::limits::number_past_limit(*fds) || crate::limits::number_past_limit(*fds.add(1)) {
            for i in 0..2 {
                libc::syscall(libc::SYS_close, *fds.add(i));
            }
            dc_sys::set_errno(libc::EMFILE);
            return -1;
        }
        crate::limits::note_given(*fds);
        crate::limits::note_given(*fds.add(1));
        0
    };
    with_room(made, |&r| r < 0)
}

#[no_mangle]
pub unsafe extern "C" fn pipe(fds: *mut c_int) -> c_int {
    pair(fds, || real::pipe()(fds))
}

#[no_mangle]
pub unsafe extern "C" fn pipe2(fds: *mut c_int, flags: c_int) -> c_int {
    pair(fds, || real::pipe2()(fds, flags))
}

#[no_mangle]
pub unsafe extern "C" fn socketpair(domain: c_int, ty: c_int, proto: c_int, fds: *mut c_int) -> c_int {
    pair(fds, || real::socketpair()(domain, ty, proto, fds))
}
