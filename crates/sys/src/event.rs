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

/// A poll timeout in milliseconds, rounded up: a wait of 200 us must not
/// become a busy loop of zero-millisecond polls. `None`: no limit.
fn poll_ms(timeout: Option<Duration>) -> libc::c_int {
    match timeout {
        Some(t) => t.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int,
        None => -1,
    }
}

/// `poll(2)` for input on one descriptor, for at most `timeout` (`None`:
/// no limit). Returns whether a read would not block now (`poll_ready`);
/// an interrupted poll returns `false`, as a timeout does.
pub fn poll_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    Ok(poll_ready(&[fd], timeout)?[0])
}

/// `poll(2)` for input on each of `fds`, for at most `timeout` (`None`: no
/// limit). Returns, for each, whether a read would not block now: input
/// waiting, or the other end gone (`POLLHUP`, `POLLERR`: the read returns
/// the end or the error). An interrupted poll returns none ready, as a
/// timeout does.
pub fn poll_ready(fds: &[BorrowedFd<'_>], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> =
        fds.iter().map(|fd| libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    // SAFETY: `pfds` is a live array of as many pollfds as passed.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, poll_ms(timeout)) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EINTR) { Ok(vec![false; fds.len()]) } else { Err(e) };
    }
    let ready = libc::POLLIN | libc::POLLHUP | libc::POLLERR;
    Ok(pfds.iter().map(|p| p.revents & ready != 0).collect())
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

    #[test]
    fn poll_ready_tells_which_descriptor_can_be_read() {
        let quiet = eventfd().unwrap();
        let signalled = eventfd().unwrap();
        eventfd_signal(signalled.as_fd()).unwrap();
        let (r, w) = std::io::pipe().unwrap();
        drop(w);
        let ready = poll_ready(&[quiet.as_fd(), signalled.as_fd(), r.as_fd()], Some(Duration::ZERO)).unwrap();
        assert_eq!(ready, [false, true, true], "a pipe whose writer is gone reads its end at once");
    }
}
