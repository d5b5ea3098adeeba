//! The next definition of each interposed symbol (libc's), found once with
//! `dlsym(RTLD_NEXT)` and cached.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

type Ssize = isize;
type Off = libc::off_t;
type File = *mut libc::FILE;

macro_rules! next {
    ($($name:ident : $ty:ty;)*) => {
        $(
            #[allow(non_snake_case)]
            pub fn $name() -> $ty {
                static ADDR: AtomicUsize = AtomicUsize::new(0);
                let mut a = ADDR.load(Relaxed);
                if a == 0 {
                    let sym = concat!(stringify!($name), "\0");
                    // SAFETY: a NUL-terminated symbol name.
                    a = unsafe { libc::dlsym(libc::RTLD_NEXT, sym.as_ptr().cast()) } as usize;
                    if a == 0 {
                        // Nothing sensible is left to do without libc's own
                        // function: say which, and stop.
                        let msg = concat!("libdontcache_preload: libc has no ", stringify!($name), "\n");
                        // SAFETY: writes a static buffer to stderr, then exits.
                        unsafe {
                            libc::write(2, msg.as_ptr().cast(), msg.len());
                            libc::_exit(127);
                        }
                    }
                    ADDR.store(a, Relaxed);
                }
                // SAFETY: the symbol has this C signature in glibc.
                unsafe { std::mem::transmute::<usize, $ty>(a) }
            }
        )*
    };
}

next! {
    open: unsafe extern "C" fn(*const c_char, c_int, libc::mode_t) -> c_int;
    open64: unsafe extern "C" fn(*const c_char, c_int, libc::mode_t) -> c_int;
    openat: unsafe extern "C" fn(c_int, *const c_char, c_int, libc::mode_t) -> c_int;
    openat64: unsafe extern "C" fn(c_int, *const c_char, c_int, libc::mode_t) -> c_int;
    creat: unsafe extern "C" fn(*const c_char, libc::mode_t) -> c_int;
    creat64: unsafe extern "C" fn(*const c_char, libc::mode_t) -> c_int;
    fopen: unsafe extern "C" fn(*const c_char, *const c_char) -> File;
    fopen64: unsafe extern "C" fn(*const c_char, *const c_char) -> File;
    fdopen: unsafe extern "C" fn(c_int, *const c_char) -> File;
    tmpfile: unsafe extern "C" fn() -> File;
    popen: unsafe extern "C" fn(*const c_char, *const c_char) -> File;
    tmpfile64: unsafe extern "C" fn() -> File;
    opendir: unsafe extern "C" fn(*const c_char) -> *mut libc::DIR;
    fdopendir: unsafe extern "C" fn(c_int) -> *mut libc::DIR;
    scandir: unsafe extern "C" fn(*const c_char, *mut c_void, *const c_void, *const c_void) -> c_int;
    scandir64: unsafe extern "C" fn(*const c_char, *mut c_void, *const c_void, *const c_void) -> c_int;
    scandirat: unsafe extern "C" fn(c_int, *const c_char, *mut c_void, *const c_void, *const c_void) -> c_int;
    scandirat64: unsafe extern "C" fn(c_int, *const c_char, *mut c_void, *const c_void, *const c_void) -> c_int;
    mkstemp: unsafe extern "C" fn(*mut c_char) -> c_int;
    mkstemp64: unsafe extern "C" fn(*mut c_char) -> c_int;
    mkostemp: unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
    mkostemp64: unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
    mkstemps: unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
    mkstemps64: unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
    mkostemps: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
    mkostemps64: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
    freopen: unsafe extern "C" fn(*const c_char, *const c_char, File) -> File;
    freopen64: unsafe extern "C" fn(*const c_char, *const c_char, File) -> File;
    fclose: unsafe extern "C" fn(File) -> c_int;
    write: unsafe extern "C" fn(c_int, *const c_void, usize) -> Ssize;
    writev: unsafe extern "C" fn(c_int, *const libc::iovec, c_int) -> Ssize;
    pwrite: unsafe extern "C" fn(c_int, *const c_void, usize, Off) -> Ssize;
    pwrite64: unsafe extern "C" fn(c_int, *const c_void, usize, Off) -> Ssize;
    pwritev: unsafe extern "C" fn(c_int, *const libc::iovec, c_int, Off) -> Ssize;
    pwritev64: unsafe extern "C" fn(c_int, *const libc::iovec, c_int, Off) -> Ssize;
    pwritev2: unsafe extern "C" fn(c_int, *const libc::iovec, c_int, Off, c_int) -> Ssize;
    pwritev64v2: unsafe extern "C" fn(c_int, *const libc::iovec, c_int, Off, c_int) -> Ssize;
    read: unsafe extern "C" fn(c_int, *mut c_void, usize) -> Ssize;
    readv: unsafe extern "C" fn(c_int, *const libc::iovec, c_int) -> Ssize;
    pread: unsafe extern "C" fn(c_int, *mut c_void, usize, Off) -> Ssize;
    pread64: unsafe extern "C" fn(c_int, *mut c_void, usize, Off) -> Ssize;
    preadv: unsafe extern "C" fn(c_int, *const libc::iovec, c_int, Off) -> Ssize;
    preadv64: unsafe extern "C" fn(c_int, *const libc::iovec, c_int, Off) -> Ssize;
    preadv2: unsafe extern "C" fn(c_int, *const libc::iovec, c_int, Off, c_int) -> Ssize;
    preadv64v2: unsafe extern "C" fn(c_int, *const libc::iovec, c_int, Off, c_int) -> Ssize;
    fsync: unsafe extern "C" fn(c_int) -> c_int;
    fdatasync: unsafe extern "C" fn(c_int) -> c_int;
    ftruncate: unsafe extern "C" fn(c_int, Off) -> c_int;
    ftruncate64: unsafe extern "C" fn(c_int, Off) -> c_int;
    close: unsafe extern "C" fn(c_int) -> c_int;
    close_range: unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int;
    closefrom: unsafe extern "C" fn(c_int);
    dup: unsafe extern "C" fn(c_int) -> c_int;
    dup2: unsafe extern "C" fn(c_int, c_int) -> c_int;
    dup3: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
    fcntl: unsafe extern "C" fn(c_int, c_int, usize) -> c_int;
    fcntl64: unsafe extern "C" fn(c_int, c_int, usize) -> c_int;
    flock: unsafe extern "C" fn(c_int, c_int) -> c_int;
    umount: unsafe extern "C" fn(*const c_char) -> c_int;
    umount2: unsafe extern "C" fn(*const c_char, c_int) -> c_int;
    lockf: unsafe extern "C" fn(c_int, c_int, Off) -> c_int;
    lockf64: unsafe extern "C" fn(c_int, c_int, libc::off64_t) -> c_int;
    copy_file_range: unsafe extern "C" fn(c_int, *mut libc::off64_t, c_int, *mut libc::off64_t, usize, c_uint) -> Ssize;
    sendfile: unsafe extern "C" fn(c_int, c_int, *mut Off, usize) -> Ssize;
    sendfile64: unsafe extern "C" fn(c_int, c_int, *mut libc::off64_t, usize) -> Ssize;
    splice: unsafe extern "C" fn(c_int, *mut libc::off64_t, c_int, *mut libc::off64_t, usize, c_uint) -> Ssize;
    mmap: unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, c_int, Off) -> *mut c_void;
    mmap64: unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, c_int, Off) -> *mut c_void;
    munmap: unsafe extern "C" fn(*mut c_void, usize) -> c_int;
    socket: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
    socketpair: unsafe extern "C" fn(c_int, c_int, c_int, *mut c_int) -> c_int;
    accept: unsafe extern "C" fn(c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> c_int;
    accept4: unsafe extern "C" fn(c_int, *mut libc::sockaddr, *mut libc::socklen_t, c_int) -> c_int;
    recvmsg: unsafe extern "C" fn(c_int, *mut libc::msghdr, c_int) -> Ssize;
    recvmmsg: unsafe extern "C" fn(c_int, *mut libc::mmsghdr, c_uint, c_int, *mut libc::timespec) -> c_int;
    pipe: unsafe extern "C" fn(*mut c_int) -> c_int;
    pipe2: unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
    eventfd: unsafe extern "C" fn(c_uint, c_int) -> c_int;
    epoll_create1: unsafe extern "C" fn(c_int) -> c_int;
    memfd_create: unsafe extern "C" fn(*const c_char, c_uint) -> c_int;
    signalfd: unsafe extern "C" fn(c_int, *const libc::sigset_t, c_int) -> c_int;
    timerfd_create: unsafe extern "C" fn(c_int, c_int) -> c_int;
    inotify_init1: unsafe extern "C" fn(c_int) -> c_int;
    epoll_create: unsafe extern "C" fn(c_int) -> c_int;
    inotify_init: unsafe extern "C" fn() -> c_int;
    fanotify_init: unsafe extern "C" fn(c_uint, c_uint) -> c_int;
    pidfd_open: unsafe extern "C" fn(libc::pid_t, c_uint) -> c_int;
    pidfd_getfd: unsafe extern "C" fn(c_int, c_int, c_uint) -> c_int;
    posix_openpt: unsafe extern "C" fn(c_int) -> c_int;
    getpt: unsafe extern "C" fn() -> c_int;
    shm_open: unsafe extern "C" fn(*const c_char, c_int, libc::mode_t) -> c_int;
    mq_open: unsafe extern "C" fn(*const c_char, c_int, libc::mode_t, *mut c_void) -> c_int;
    open_by_handle_at: unsafe extern "C" fn(c_int, *mut c_void, c_int) -> c_int;
    sigaction: unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
    __sigaction: unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
    signal: unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
    bsd_signal: unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
    ssignal: unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
    sysv_signal: unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
    __sysv_signal: unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
    sigset: unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
    execve: unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
    execv: unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int;
    execvp: unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int;
    execvpe: unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
    fexecve: unsafe extern "C" fn(c_int, *const *const c_char, *const *const c_char) -> c_int;
    execveat: unsafe extern "C" fn(c_int, *const c_char, *const *const c_char, *const *const c_char, c_int) -> c_int;
    posix_spawn: unsafe extern "C" fn(
        *mut libc::pid_t,
        *const c_char,
        *const libc::posix_spawn_file_actions_t,
        *const libc::posix_spawnattr_t,
        *const *mut c_char,
        *const *mut c_char,
    ) -> c_int;
    posix_spawnp: unsafe extern "C" fn(
        *mut libc::pid_t,
        *const c_char,
        *const libc::posix_spawn_file_actions_t,
        *const libc::posix_spawnattr_t,
        *const *mut c_char,
        *const *mut c_char,
    ) -> c_int;
    // Variadic: only jumped to, with the caller's arguments in place.
    execl: unsafe extern "C" fn();
    execlp: unsafe extern "C" fn();
    execle: unsafe extern "C" fn();
    _exit: unsafe extern "C" fn(c_int) -> !;
    _Exit: unsafe extern "C" fn(c_int) -> !;
    sysconf: unsafe extern "C" fn(c_int) -> libc::c_long;
    getdtablesize: unsafe extern "C" fn() -> c_int;
}

/// `fileno(3)`, which the shim does not interpose.
pub fn fileno(f: File) -> c_int {
    // SAFETY: the caller's stream; fileno only reads it.
    unsafe { libc::fileno(f) }
}

/// `lseek(2)` on a descriptor of the caller's (not interposed).
pub fn position(fd: c_int) -> Option<u64> {
    // SAFETY: no memory is passed.
    u64::try_from(unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) }).ok()
}
