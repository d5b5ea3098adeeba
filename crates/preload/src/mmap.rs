//! Memory-mapped files. Stores through a shared mapping dirty the file's
//! pages without any call the shim sees: the flusher's sweep writes them
//! back while the program runs (every tracked file is swept), and `munmap`
//! reports the whole mapped range (`note_write` for a writable shared
//! mapping, `note_read` for one only read), so its pages are written back
//! and dropped once the mapping no longer pins them. A mapping keeps its
//! file's handle alive after the descriptor is closed, as the kernel keeps
//! the file.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard};

use dontcache::Handle;

use crate::real;
use crate::table::{engine, get_for_mapping, inside};

struct Mapping {
    addr: usize,
    len: usize,
    /// File offset of `addr`.
    offset: u64,
    writable: bool,
    handle: Arc<Handle>,
    /// The process that mapped it: a forked child's exit or `exec` leaves
    /// its parent's mappings to the parent.
    pid: i32,
}

/// Every mapping of a tracked file. A forking thread takes the list across
/// the fork (`before_fork`), so no child starts with it held.
static MAPPINGS: Mutex<Vec<Mapping>> = Mutex::new(Vec::new());

fn mappings() -> MutexGuard<'static, Vec<Mapping>> {
    MAPPINGS.lock().unwrap_or_else(|e| e.into_inner())
}

thread_local! {
    /// The list, held by the forking thread across a `fork`.
    static HELD_ACROSS_FORK: RefCell<Option<MutexGuard<'static, Vec<Mapping>>>> = const { RefCell::new(None) };
}

/// Before a `fork`: takes the list, so that no other thread holds it as the
/// child is made. A child forked while another thread held it would have
/// waited for it at its exit for good (random call sequences on four
/// threads that map files and fork: 46 of 200 runs hung).
pub extern "C" fn before_fork() {
    let held = mappings();
    HELD_ACROSS_FORK.with(|h| *h.borrow_mut() = Some(held));
}

/// After a `fork`, in the parent and in the child (the same thread in each):
/// gives the list back.
pub fn after_fork() {
    HELD_ACROSS_FORK.with(|h| drop(h.borrow_mut().take()));
}

unsafe fn mapped(p: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, off: libc::off_t) -> *mut c_void {
    if p == libc::MAP_FAILED || inside() || flags & libc::MAP_ANONYMOUS != 0 {
        return p;
    }
    let (Some(handle), Ok(offset)) = (get_for_mapping(fd), u64::try_from(off)) else { return p };
    let writable = flags & libc::MAP_SHARED != 0 && prot & libc::PROT_WRITE != 0;
    let pid = crate::PID.load(std::sync::atomic::Ordering::Relaxed);
    mappings().push(Mapping { addr: p as usize, len, offset, writable, handle, pid });
    p
}

#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off_t,
) -> *mut c_void {
    mapped(real::mmap()(addr, len, prot, flags, fd, off), len, prot, flags, fd, off)
}

#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off_t,
) -> *mut c_void {
    mapped(real::mmap64()(addr, len, prot, flags, fd, off), len, prot, flags, fd, off)
}

#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: usize) -> c_int {
    if inside() {
        return real::munmap()(addr, len);
    }
    // The parts of recorded mappings this unmaps; what is left of them stays.
    let (start, end) = (addr as usize, (addr as usize).saturating_add(len));
    let mut gone = Vec::new();
    {
        let mut list = mappings();
        let mut kept = Vec::with_capacity(list.len());
        for m in list.drain(..) {
            let (ms, me) = (m.addr, m.addr + m.len);
            if me <= start || ms >= end {
                kept.push(m);
                continue;
            }
            let (cs, ce) = (ms.max(start), me.min(end));
            gone.push((m.offset + (cs - ms) as u64, (ce - cs) as u64, m.writable, m.handle.clone()));
            if ms < cs {
                kept.push(Mapping { len: cs - ms, handle: m.handle.clone(), ..m });
            }
            if ce < me {
                let offset = m.offset + (ce - ms) as u64;
                kept.push(Mapping { addr: ce, len: me - ce, offset, handle: m.handle.clone(), ..m });
            }
        }
        *list = kept;
    }
    let r = real::munmap()(addr, len);
    for (offset, len, writable, handle) in gone {
        engine(|| if writable { handle.note_write(offset, len) } else { handle.note_read(offset, len) });
    }
    r
}

/// Lets go of the files this process's mappings keep open in the library,
/// for a program whose descriptor table is full
/// (`table::give_room`): their pages stay as the kernel keeps
/// them, and their unmaps report nothing. Called inside the engine.
pub fn let_go_all() {
    let me = crate::PID.load(std::sync::atomic::Ordering::Relaxed);
    let mine: Vec<Mapping> = {
        let mut list = mappings();
        let (mine, others) = list.drain(..).partition(|m| m.pid == me);
        *list = others;
        mine
    };
    for m in mine {
        m.handle.untrack();
    }
}

/// At exit: mappings still in place pin their pages; write the dirty ones
/// back now so that the kernel's own unmapping at exit leaves them clean.
pub fn settle_at_exit() {
    sync_writable();
    mappings().clear();
}

/// Writes back the dirty pages of every writable mapping this process made
/// (before an `exec`, which unmaps them all, and at exit).
pub fn sync_writable() {
    let me = crate::PID.load(std::sync::atomic::Ordering::Relaxed);
    let writable: Vec<(usize, usize)> =
        mappings().iter().filter(|m| m.writable && m.pid == me).map(|m| (m.addr, m.len)).collect();
    for (addr, len) in writable {
        // SAFETY: a mapping the program made and had not unmapped; one it
        // unmapped meanwhile is an error return.
        unsafe { libc::msync(addr as *mut c_void, len, libc::MS_SYNC) };
    }
}
