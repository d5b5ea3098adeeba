//! stdio streams. glibc's `fwrite`/`fread` reach the kernel through its
//! own internal write and read, which no interposer sees; the shim tracks
//! the stream's descriptor instead, and the flusher sweeps the file for
//! what those calls did (every tracked file is swept). `fclose` closes the
//! descriptor inside glibc, so the shim takes it out of its table first.

use std::ffi::{c_char, c_int, CStr};

use crate::real;
use crate::table::{adopt, engine, inside, set_errno, take};

/// open(2) flags of an fopen(3) mode string ("r", "w+", "ab", "re", ...).
fn mode_flags(mode: *const c_char) -> c_int {
    if mode.is_null() {
        return libc::O_RDONLY;
    }
    // SAFETY: fopen's caller passes a C string; glibc already read it.
    let m = unsafe { CStr::from_ptr(mode) }.to_bytes();
    let plus = m.contains(&b'+');
    match (m.first(), plus) {
        (Some(b'r'), false) => libc::O_RDONLY,
        (Some(b'r'), true) => libc::O_RDWR,
        (_, false) => libc::O_WRONLY,
        (_, true) => libc::O_RDWR,
    }
}

unsafe fn track_stream(f: *mut libc::FILE, path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    if !f.is_null() && !inside() {
        adopt(real::fileno(f), mode_flags(mode), crate::fds::opened_as(libc::AT_FDCWD, path));
    }
    f
}

/// Where glibc keeps a stream's descriptor: `_fileno` of its `struct
/// _IO_FILE`, after an int and thirteen pointers (the struct is public in
/// its headers, and so fixed by its ABI).
const FILENO_AT: usize = 8 + 13 * 8;

/// A stream `fopen` just made, its descriptor numbered as without the
/// library (see `fds::numbered`): glibc opens it through its own internal
/// `open`, which the shim does not see, so the number is moved after, and
/// the stream told, where the struct holds the number where it should.
unsafe fn numbered_stream(numbering: &dontcache::own::Numbering, f: *mut libc::FILE) -> *mut libc::FILE {
    if f.is_null() || inside() || !numbering.overlapped() || !cfg!(all(target_env = "gnu", target_pointer_width = "64"))
    {
        return f;
    }
    let fd = real::fileno(f);
    let at = f.cast::<u8>().add(FILENO_AT).cast::<c_int>();
    if fd < 0 || at.read_unaligned() != fd {
        return f;
    }
    at.write_unaligned(numbering.renumber(fd, 0));
    f
}

unsafe fn open_stream(open: impl Fn() -> *mut libc::FILE, path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    if inside() {
        return open();
    }
    let numbering = dontcache::own::Numbering::begin();
    let within_limit = || {
        if crate::limits::open_would_pass_limit() {
            crate::limits::refuse_open();
            return std::ptr::null_mut();
        }
        let stream = numbered_stream(&numbering, open());
        if !stream.is_null() {
            if crate::limits::number_past_limit(real::fileno(stream)) {
                // Nothing is written yet: the close only frees the stream.
                real::fclose()(stream);
                set_errno(libc::EMFILE);
                return std::ptr::null_mut();
            }
            crate::limits::note_given(real::fileno(stream));
        }
        stream
    };
    track_stream(crate::fds::with_room(within_limit, |f| f.is_null()), path, mode)
}

#[no_mangle]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    open_stream(|| real::fopen()(path, mode), path, mode)
}

#[no_mangle]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    open_stream(|| real::fopen64()(path, mode), path, mode)
}

/// `tmpfile(3)`: a file of no name, opened `w+`, numbered and refused at
/// the program's limit as `fopen`'s are (a refused one, nameless, is gone
/// with its close).
#[no_mangle]
pub unsafe extern "C" fn tmpfile() -> *mut libc::FILE {
    open_stream(|| real::tmpfile()(), std::ptr::null(), c"w+".as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn tmpfile64() -> *mut libc::FILE {
    open_stream(|| real::tmpfile64()(), std::ptr::null(), c"w+".as_ptr())
}

/// `popen(3)`, refused at the program's limit as the kernel refuses its
/// pipe, which needs two numbers (glibc makes it with its own `pipe2`,
/// which no interposer sees): looked for first, as a refusal after the
/// call would come after the command started.
#[no_mangle]
pub unsafe extern "C" fn popen(command: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    if inside() {
        return real::popen()(command, mode);
    }
    let within_limit = || {
        if crate::limits::numbers_would_pass_limit(2) {
            crate::limits::refuse_open();
            return std::ptr::null_mut();
        }
        let stream = real::popen()(command, mode);
        if !stream.is_null() {
            crate::limits::note_given(real::fileno(stream));
        }
        stream
    };
    crate::fds::with_room(within_limit, |f| f.is_null())
}

#[no_mangle]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut libc::FILE {
    // Usually tracked already (opened through the shim); if not, now.
    let f = real::fdopen()(fd, mode);
    if !f.is_null() && !inside() && !crate::table::handles_file(fd) {
        adopt(fd, mode_flags(mode), None);
    }
    f
}

/// Takes the stream's descriptor out of the table before glibc closes it
/// (the number may be reused the moment it is closed); the file is then
/// handed to the flusher, with what stdio wrote while closing.
unsafe fn closing_stream<T>(f: *mut libc::FILE, close: impl FnOnce() -> T) -> (T, std::io::Result<()>) {
    let h = if f.is_null() || inside() { None } else { take(real::fileno(f)) };
    let r = close();
    let kept = match h {
        Some(h) => engine(|| h.release_shared().0),
        None => Ok(()),
    };
    (r, kept)
}

#[no_mangle]
pub unsafe extern "C" fn fclose(f: *mut libc::FILE) -> c_int {
    let (r, kept) = closing_stream(f, || real::fclose()(f));
    match kept {
        // fclose has succeeded; report the kept writeback error as its own.
        Err(e) if r == 0 => {
            set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            libc::EOF
        }
        _ => r,
    }
}

#[no_mangle]
pub unsafe extern "C" fn freopen(path: *const c_char, mode: *const c_char, f: *mut libc::FILE) -> *mut libc::FILE {
    let (r, _) = closing_stream(f, || real::freopen()(path, mode, f));
    track_stream(r, path, mode)
}

#[no_mangle]
pub unsafe extern "C" fn freopen64(path: *const c_char, mode: *const c_char, f: *mut libc::FILE) -> *mut libc::FILE {
    let (r, _) = closing_stream(f, || real::freopen64()(path, mode, f));
    track_stream(r, path, mode)
}
