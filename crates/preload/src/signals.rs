//! Stop signals. A process that SIGINT, SIGTERM, SIGHUP or SIGPIPE kills
//! (Ctrl-C, `kill`, `timeout`, a closed terminal or pipe) dies without its
//! exit hook, and what the library had not finished stays cached: `dd`
//! stopped by SIGTERM after 2 GiB left 206 MiB of its output. Where the
//! program leaves such a signal at its default action, the shim catches
//! it, settles the process's files as at exit (under `dontcache run`:
//! hands them over) and then dies of the signal, as it would have: the
//! same status for its parent, no core.
//!
//! The program still sees the default action: asking for it gets
//! `SIG_DFL`, and setting one (a handler, `SIG_IGN`, `SIG_DFL`) puts the
//! program's in place, after which the shim leaves that signal alone. A
//! signal ignored when the program started (`nohup`, a shell's background
//! job) stays ignored. A stop signal that comes while the files are being
//! settled (for another signal, or at exit) takes effect once they are:
//! `kill` of a process group reaches `dontcache run` and the command, and
//! `run` passes its copy on, so the command gets two; systemd signals
//! every process of a service. SIGKILL still ends it at once.
//!
//! A signal that finds its thread inside the library (a write counted
//! only once the system call returned) takes effect as the library's call
//! returns, so that write is settled too. Otherwise the handler does only
//! what is safe in a signal handler: the settling runs on a thread of the
//! shim's (every signal blocked), which the handler wakes through a futex
//! and waits for, at most `SETTLE_LIMIT`. The interrupted thread may hold
//! a lock the settling needs (malloc's, the library's); then the process
//! dies after that wait as it would have without the shim.
//!
//! That thread starts with the process's first tracked file. A process
//! with none (only small inputs read without a handle) has no such
//! thread: the handler drops those inputs itself.
//! SIGKILL cannot be caught, and the signals whose default is a core dump
//! (SIGQUIT, SIGABRT) are left alone, so a core shows the process as it was.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering::*};
use std::time::{Duration, Instant};

use crate::{real, table};

const STOP_SIGNALS: [c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE];

/// How long a stopped process waits for its files to be settled before it
/// dies regardless. Under `dontcache run` the hand-over takes milliseconds;
/// alone, the process writes back what it has dirty (up to about twice
/// the high-water mark) and drops it.
const SETTLE_LIMIT: Duration = Duration::from_secs(10);

/// `SIG_HOLD` (glibc's `sigset`: block the signal, leave its action).
const SIG_HOLD: libc::sighandler_t = 2;

/// Which of `STOP_SIGNALS` have the shim's handler in place of the default.
static HELD: [AtomicBool; 4] = [const { AtomicBool::new(false) }; 4];

/// The process whose settling thread runs (0: none). A forked child has
/// none until it tracks a file of its own.
static SETTLER_OF: AtomicI32 = AtomicI32::new(0);
/// The stop signal the process dies of, once one came (0: none yet). The
/// settling thread waits for it.
static ASKED: AtomicU32 = AtomicU32::new(0);
/// Set once a settling of the files has begun (a stop's, or the exit's):
/// one at a time.
static SETTLING: AtomicBool = AtomicBool::new(false);
/// 1 once that settling has ended.
static SETTLED: AtomicU32 = AtomicU32::new(0);
/// A stop signal whose thread was inside the library: that thread settles
/// the files as its call returns (0: none).
static PENDING: AtomicI32 = AtomicI32::new(0);

fn handler() -> libc::sighandler_t {
    on_stop as extern "C" fn(c_int) as libc::sighandler_t
}

/// At load: every stop signal at its default action gets the shim's handler.
pub fn hold_default_stops() {
    for (sig, held) in STOP_SIGNALS.iter().zip(&HELD) {
        // SAFETY: sigaction is plain data; all zeroes is SIG_DFL, no flags,
        // an empty mask.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: asks for the action only, into a live local.
        if unsafe { real::sigaction()(*sig, std::ptr::null(), &mut old) } != 0 || old.sa_sigaction != libc::SIG_DFL {
            continue;
        }
        // SAFETY: as above.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = handler();
        act.sa_flags = libc::SA_RESTART;
        act.sa_mask = stop_signals();
        // SAFETY: a live, filled sigaction; the old one is not asked for.
        if unsafe { real::sigaction()(*sig, &act, std::ptr::null_mut()) } == 0 {
            held.store(true, Release);
        }
    }
}

/// With the process's first tracked file: the thread that settles its
/// files when a stop signal comes. Not before: the library's first
/// duplicate grows the descriptor table for the library's numbers, and in
/// a process with a second thread that waits for an RCU grace period
/// (12 ms a process, measured). Costs two loads once the thread runs.
pub fn start_settler() {
    let me = crate::PID.load(Relaxed);
    if SETTLER_OF.load(Acquire) == me || !HELD.iter().any(|h| h.load(Relaxed)) {
        return;
    }
    if SETTLER_OF.swap(me, AcqRel) == me {
        return;
    }
    let started = table::engine(|| {
        dc_sys::with_signals_blocked(|| std::thread::Builder::new().name("dc-settle".into()).spawn(settle_when_asked))
            .is_ok()
    });
    if !started {
        SETTLER_OF.store(0, Release);
    }
}

/// In a forked child: the settling, and any stop under way, were the
/// parent's.
pub fn forked() {
    ASKED.store(0, Release);
    SETTLING.store(false, Release);
    SETTLED.store(0, Release);
    PENDING.store(0, Release);
}

/// The settling thread: once a stop signal came, it settles the files
/// itself, or, where another thread does (the one the signal found inside
/// the library, or the exit's), waits for that at most `SETTLE_LIMIT`; then
/// the signal's default action.
fn settle_when_asked() {
    while ASKED.load(Acquire) == 0 {
        dc_sys::futex_wait(&ASKED, 0, None);
    }
    if claim_settling() {
        crate::settle_files();
    } else {
        await_settled();
    }
    die_of(ASKED.load(Acquire) as c_int);
}

/// Whether the caller is the one to settle the files (none has begun).
pub fn claim_settling() -> bool {
    !SETTLING.swap(true, AcqRel)
}

/// Waits, at most `SETTLE_LIMIT`, for the settling under way to end.
pub fn await_settled() {
    let deadline = Instant::now() + SETTLE_LIMIT;
    while SETTLED.load(Acquire) == 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        dc_sys::futex_wait(&SETTLED, 0, Some(left));
    }
}

/// The files are settled: a stop signal that came meanwhile ends the
/// process now.
pub fn settled() {
    SETTLED.store(1, Release);
    dc_sys::futex_wake(&SETTLED);
    let sig = ASKED.load(Acquire);
    if sig != 0 {
        die_of(sig as c_int);
    }
}

/// `STOP_SIGNALS` as a signal set.
fn stop_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset and sigaddset fill it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in STOP_SIGNALS {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

/// The shim's handler of a stop signal (the stop signals blocked while it
/// runs). The first one decides who settles the files: a thread inside the
/// library, as its call returns (`stop_if_pending`), the exit's settling
/// if under way, or else the settling thread, which this one waits for.
/// The settling thread bounds every one of these to `SETTLE_LIMIT`.
extern "C" fn on_stop(sig: c_int) {
    let saved = dc_sys::errno();
    if !crate::own_process() {
        // A vfork child: its memory, these flags and the table included,
        // is its parent's, and must stay as it is. It dies as it would
        // have; its parent settles the files.
        die_of(sig);
    } else if ASKED.compare_exchange(0, sig as u32, AcqRel, Acquire).is_ok() {
        // SAFETY: getpid has no preconditions.
        let settler = SETTLER_OF.load(Acquire) == unsafe { libc::getpid() };
        if SETTLING.load(Acquire) {
            // The exit's settling is under way, maybe on this thread: it
            // goes on, and dies of the signal when done (`settled`).
            wake_settler(settler);
        } else if table::in_engine_here() {
            SETTLING.store(true, Release);
            PENDING.store(sig, Release);
            wake_settler(settler);
        } else if settler {
            wake_settler(settler);
            await_settled();
            die_of(sig);
        } else {
            table::drop_cold_reads();
            die_of(sig);
        }
    }
    dc_sys::set_errno(saved);
}

/// Wakes the settling thread, if the process has one: it settles the
/// files, or bounds the wait for whoever does.
fn wake_settler(settler: bool) {
    if settler {
        dc_sys::futex_wake(&ASKED);
    }
}

/// After each call of the library's on the program's behalf: a stop
/// signal that came meanwhile settles the files now (no longer in a
/// handler, the stop signals blocked), then ends the process.
pub fn stop_if_pending() {
    if PENDING.load(Relaxed) == 0 {
        return;
    }
    let sig = PENDING.swap(0, AcqRel);
    if sig == 0 {
        return;
    }
    let set = stop_signals();
    // SAFETY: a live set; the old mask is not needed, this thread ends the process.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    crate::settle_files();
    die_of(sig);
}

/// The default action of `sig`, now: the action reset, the signal sent
/// again to this thread, where it is blocked, and then let through.
fn die_of(sig: c_int) {
    // SAFETY: all zeroes is SIG_DFL; raise sends to the calling thread; the
    // sets are live locals.
    unsafe {
        let dfl: libc::sigaction = std::mem::zeroed();
        real::sigaction()(sig, &dfl, std::ptr::null_mut());
        libc::raise(sig);
        let mut only: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut only);
        libc::sigaddset(&mut only, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
    }
}

/// The stop signal `sig`'s flag, if the shim's handler stands in for its
/// default action and the caller is the program (not the library, not a
/// vfork child, whose handlers are its own but whose memory is not).
fn held(sig: c_int) -> Option<&'static AtomicBool> {
    let i = STOP_SIGNALS.iter().position(|&s| s == sig)?;
    Some(&HELD[i]).filter(|h| h.load(Acquire) && !table::inside() && !crate::in_vfork_child())
}

type SigactionFn = unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
type SignalFn = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;

/// `sigaction` as the program sees it: `SIG_DFL` where the shim's handler
/// stands in for it; an action the program sets replaces the shim's.
unsafe fn program_sigaction(
    real: SigactionFn,
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let Some(held) = held(sig) else {
        // SAFETY: the caller's arguments, as it passed them.
        return unsafe { real(sig, act, old) };
    };
    if !act.is_null() {
        held.store(false, Release);
        // SAFETY: the caller's action; the shim's old one is not reported.
        let r = unsafe { real(sig, act, std::ptr::null_mut()) };
        if r != 0 {
            held.store(true, Release);
            return r;
        }
    }
    if !old.is_null() {
        // SAFETY: the caller's pointer, written as libc's sigaction writes
        // it; all zeroes is SIG_DFL with no flags and an empty mask.
        unsafe { *old = std::mem::zeroed() };
    }
    0
}

/// `signal` and its relatives as the program sees them (see `program_sigaction`).
unsafe fn program_signal(real: SignalFn, sig: c_int, action: libc::sighandler_t) -> libc::sighandler_t {
    let held = held(sig);
    if let Some(h) = held.filter(|_| action != SIG_HOLD) {
        h.store(false, Release);
    }
    // SAFETY: the caller's arguments, as it passed them.
    let r = unsafe { real(sig, action) };
    match (held, r) {
        (Some(h), libc::SIG_ERR) => {
            h.store(true, Release);
            r
        }
        (Some(_), _) => libc::SIG_DFL,
        (None, _) => r,
    }
}

/// One interposer per symbol of each family (`__sigaction` and the
/// `signal` variants are other names glibc exports for the same calls).
macro_rules! interpose {
    (sigaction: $($name:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
            // SAFETY: per sigaction(2).
            unsafe { program_sigaction(real::$name(), sig, act, old) }
        }
    )*};
    (signal: $($name:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(sig: c_int, action: libc::sighandler_t) -> libc::sighandler_t {
            // SAFETY: per signal(2) and sigset(3).
            unsafe { program_signal(real::$name(), sig, action) }
        }
    )*};
}

interpose!(sigaction: sigaction, __sigaction);
interpose!(signal: signal, bsd_signal, ssignal, sysv_signal, __sysv_signal, sigset);
