//! How a device's flusher sleeps, and how it is woken.
//!
//! The flusher sleeps until a writer or a waiter wakes it, until a
//! writeback wait it handed to io-wq completes, or until its timeout. Both
//! kinds of wake-up arrive on one eventfd: other threads signal it, and the
//! flusher's wait ring signals it for every completion
//! (`IORING_REGISTER_EVENTFD`). Looking for completions every millisecond
//! instead made every short-lived writing process wait up to that
//! millisecond more at exit, for its last file's drop.
//!
//! Waking costs a system call only while the flusher sleeps, as with
//! `std::thread::park`: a state word says whether it does, and a wake-up
//! that comes while it is awake is kept for its next sleep.
//!
//! Without an eventfd (the descriptor limit reached) the same calls park
//! and unpark the flusher's thread instead, and completions are not
//! signalled: the flusher then looks for them on a short timeout.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU8, Ordering::SeqCst};
use std::sync::OnceLock;
use std::thread::{self, Thread};
use std::time::Duration;

use crate::own::OwnFd;

const AWAKE: u8 = 0;
/// Woken while awake: the next sleep returns at once.
const WOKEN: u8 = 1;
const ASLEEP: u8 = 2;

pub struct Wakeup {
    fd: Option<OwnFd>,
    state: AtomicU8,
    /// The sleeping thread, for the fallback without an eventfd.
    sleeper: OnceLock<Thread>,
}

impl Wakeup {
    pub fn new() -> Wakeup {
        let fd = crate::own::made_high(dc_sys::eventfd).ok();
        Wakeup { fd, state: AtomicU8::new(AWAKE), sleeper: OnceLock::new() }
    }

    /// The fallback, as when no eventfd could be made.
    #[cfg(test)]
    fn without_eventfd() -> Wakeup {
        Wakeup { fd: None, state: AtomicU8::new(AWAKE), sleeper: OnceLock::new() }
    }

    /// The eventfd an io_uring may signal its completions to, if there is one.
    pub fn signalled_by_rings(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.fd.as_ref().map(|fd| fd.as_fd())
    }

    /// Wakes the sleeper, or makes its next sleep return at once.
    pub fn wake(&self) {
        if self.state.swap(WOKEN, SeqCst) != ASLEEP {
            return;
        }
        match (&self.fd, self.sleeper.get()) {
            (Some(fd), _) => {
                // Cannot fail short of a counter at 2^64 - 1, which the
                // sleeper's drain keeps far away.
                let _ = dc_sys::eventfd_signal(fd.as_fd());
            }
            (None, Some(t)) => t.unpark(),
            (None, None) => {}
        }
    }

    /// Sleeps until woken, until the eventfd is signalled, or for at most
    /// `timeout`; returns at once after a wake-up that came while awake, or
    /// when `ready` (looked at after this thread counts as asleep, so what
    /// it looks for cannot slip in unseen) says there is work.
    pub fn sleep(&self, timeout: Option<Duration>, ready: impl FnOnce() -> bool) {
        self.sleeper.get_or_init(thread::current);
        if let Some(fd) = &self.fd {
            // Signals of completions reaped already, and of wake-ups
            // consumed below.
            let _ = dc_sys::eventfd_drain(fd.as_fd());
        }
        if self.state.compare_exchange(AWAKE, ASLEEP, SeqCst, SeqCst).is_err() {
            self.state.store(AWAKE, SeqCst);
            return;
        }
        if !ready() {
            match (&self.fd, timeout) {
                (Some(fd), _) => {
                    let _ = dc_sys::poll_readable(fd.as_fd(), timeout);
                }
                (None, Some(t)) => thread::park_timeout(t),
                (None, None) => thread::park(),
            }
        }
        self.state.store(AWAKE, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    /// Both ways of sleeping: on the eventfd, and parked without one.
    fn both() -> [Wakeup; 2] {
        [Wakeup::new(), Wakeup::without_eventfd()]
    }

    #[test]
    fn a_wake_while_awake_is_kept_for_the_next_sleep() {
        for w in both() {
            w.wake();
            let t = Instant::now();
            w.sleep(Some(Duration::from_secs(5)), || false);
            assert!(t.elapsed() < Duration::from_secs(1), "the kept wake-up must end the sleep at once");
            let t = Instant::now();
            w.sleep(Some(Duration::from_millis(30)), || false);
            assert!(t.elapsed() >= Duration::from_millis(25), "nothing woke it: it sleeps its timeout");
        }
    }

    #[test]
    fn a_wake_from_another_thread_ends_the_sleep() {
        for w in both() {
            let w = Arc::new(w);
            let w2 = w.clone();
            let waker = thread::spawn(move || {
                thread::sleep(Duration::from_millis(50));
                w2.wake();
            });
            let t = Instant::now();
            w.sleep(Some(Duration::from_secs(10)), || false);
            assert!(t.elapsed() < Duration::from_secs(5), "eventfd: {}", w.fd.is_some());
            waker.join().unwrap();
        }
    }

    #[test]
    fn a_completion_on_a_ring_that_signals_ends_the_sleep() {
        use io_uring::{opcode, types, IoUring};
        let w = Wakeup::new();
        let Ok(mut ring) = IoUring::new(4) else { return eprintln!("skipped: no io_uring here") };
        let fd = w.signalled_by_rings().expect("an eventfd");
        ring.submitter().register_eventfd(std::os::fd::AsRawFd::as_raw_fd(&fd)).unwrap();
        let ts = types::Timespec::new().nsec(50_000_000);
        let entry = opcode::Timeout::new(&ts).build();
        // SAFETY: `ts` outlives the wait for the completion below.
        unsafe { ring.submission().push(&entry) }.unwrap();
        ring.submit().unwrap();
        let t = Instant::now();
        w.sleep(Some(Duration::from_secs(10)), || !ring.completion().is_empty());
        assert!(t.elapsed() < Duration::from_secs(5), "the timeout's completion must end the sleep");
        assert!(t.elapsed() >= Duration::from_millis(40) || !ring.completion().is_empty());
    }

    #[test]
    fn ready_work_ends_the_sleep() {
        for w in both() {
            let t = Instant::now();
            w.sleep(Some(Duration::from_secs(5)), || true);
            assert!(t.elapsed() < Duration::from_secs(1));
        }
    }
}
