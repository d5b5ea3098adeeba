//! An `eventfd(2)` counter and `poll(2)` on one descriptor: how a thread
//! sleeps until another thread, or the kernel (an io_uring's completions,
//! `IORING_REGISTER_EVENTFD`), wakes it.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`: a counter that reads as
/// readable while it is above zero.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes two integers and returns a new descriptor.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `write(2)` of 1 to an eventfd: wakes whoever polls it.
pub fn eventfd_signal(fd: BorrowedFd<'_>) -> io::Result<()> {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live local buffer.
    let n = unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `read(2)` of a non-blocking eventfd: resets its counter to zero. Returns
/// the count it held (0 when it was zero: `EAGAIN`).
pub fn eventfd_drain(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut count = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a live local buffer.
    let n = unsafe { libc::read(fd.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EAGAIN) { Ok(0) } else { Err(e) };
    }
    Ok(u64::from_ne_bytes(count))
}

/// `poll(2)` for input on one descriptor, for at most `timeout` (`None`:
/// no limit). Returns whether it became readable; an interrupted poll
/// returns `false`, as a timeout does.
pub fn poll_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    let ms = match timeout {
        // Rounded up: a wait of 200 us must not become a busy loop of
        // zero-millisecond polls.
        Some(t) => t.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int,
        None => -1,
    };
    let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one live pollfd.
    let r = unsafe { libc::poll(&mut pfd, 1, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EINTR) { Ok(false) } else { Err(e) };
    }
    Ok(r > 0 && pfd.revents & libc::POLLIN != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_signal_makes_the_counter_readable_until_drained() {
        let fd = eventfd().unwrap();
        assert!(!poll_readable(fd.as_fd(), Some(Duration::ZERO)).unwrap());
        eventfd_signal(fd.as_fd()).unwrap();
        eventfd_signal(fd.as_fd()).unwrap();
        assert!(poll_readable(fd.as_fd(), Some(Duration::from_secs(1))).unwrap());
        assert_eq!(eventfd_drain(fd.as_fd()).unwrap(), 2);
        assert_eq!(eventfd_drain(fd.as_fd()).unwrap(), 0);
        assert!(!poll_readable(fd.as_fd(), Some(Duration::from_millis(1))).unwrap());
    }
}
