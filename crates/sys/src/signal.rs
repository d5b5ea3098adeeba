//! A thread's signal mask and a futex word: what a library needs to keep
//! its own threads out of a program's signals, and what a signal handler
//! may use to wake another thread and wait for it (the futex calls are
//! system calls only, safe in a handler).

use std::io;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// A thread's signal mask, as `pthread_sigmask` gave it back.
struct SignalMask(libc::sigset_t);

/// Runs `f` with every signal blocked on the calling thread, then puts the
/// mask back: a thread `f` starts has every signal blocked for good (a
/// library's threads, which must never run a program's handler).
pub fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> T {
    let old = block_all_signals();
    let r = f();
    if let Ok(old) = old {
        let _ = set_signal_mask(&old);
    }
    r
}

/// `pthread_sigmask(SIG_BLOCK, every signal)`: the calling thread takes
/// no signal the kernel lets it block. Returns the mask it had.
fn block_all_signals() -> io::Result<SignalMask> {
    // SAFETY: sigset_t is plain data; sigfillset fills it.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets are live locals.
    let r = unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old)
    };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(SignalMask(old))
}

/// `pthread_sigmask(SIG_SETMASK, mask)`: puts back a mask
/// `block_all_signals` returned.
fn set_signal_mask(mask: &SignalMask) -> io::Result<()> {
    // SAFETY: a live sigset_t; the old mask is not asked for.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &mask.0, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// `FUTEX_WAIT_PRIVATE`: sleeps while `word` holds `expected`, for at
/// most `timeout` (`None`: no limit). Returns at once if it holds
/// something else; a wake, a timeout or a signal also end the sleep, so
/// callers look at `word` again.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a live, aligned u32 for the length of the call;
    // `ts_ptr` is null or a live timespec. The result is not needed: every
    // way out sends the caller back to look at `word`.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, expected, ts_ptr);
    }
}

/// `FUTEX_WAKE_PRIVATE`: wakes every thread in `futex_wait` on `word`.
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned u32; waking touches no other memory.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::Arc;
    use std::time::Instant;

    fn blocked(sig: libc::c_int) -> bool {
        // SAFETY: sigset_t is plain data, filled by pthread_sigmask.
        let mut now: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: asks for the mask only; `now` is a live local.
        unsafe {
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            libc::sigismember(&now, sig) == 1
        }
    }

    #[test]
    fn a_thread_started_while_all_are_blocked_takes_no_signal() {
        std::thread::spawn(|| {
            assert!(!blocked(libc::SIGTERM));
            let child = with_signals_blocked(|| {
                std::thread::spawn(|| (blocked(libc::SIGTERM), blocked(libc::SIGINT))).join().unwrap()
            });
            assert_eq!(child, (true, true), "the new thread inherits the full mask");
            assert!(!blocked(libc::SIGTERM), "the mask is put back");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_futex_sleeps_until_woken_or_its_time_is_up() {
        let word = Arc::new(AtomicU32::new(0));
        let t = Instant::now();
        futex_wait(&word, 1, None);
        assert!(t.elapsed() < Duration::from_secs(1), "a word that differs returns at once");
        let t = Instant::now();
        futex_wait(&word, 0, Some(Duration::from_millis(50)));
        assert!(t.elapsed() >= Duration::from_millis(40), "nothing woke it: it sleeps its timeout");
        let w = word.clone();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            w.store(1, SeqCst);
            futex_wake(&w);
        });
        let t = Instant::now();
        while word.load(SeqCst) == 0 {
            futex_wait(&word, 0, Some(Duration::from_secs(10)));
        }
        assert!(t.elapsed() < Duration::from_secs(5), "the wake ended the sleep");
        waker.join().unwrap();
    }
}
