//! Descriptors passed to another process over a Unix `SOCK_SEQPACKET`
//! socket with an abstract name (`SCM_RIGHTS`): message boundaries kept,
//! connections, so a sender can wait for a reply.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// `sockaddr_un` for the abstract name `name` (the leading NUL is added
/// here), and its length.
fn abstract_address(name: &[u8]) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain data.
    let mut addr: libc::sockaddr_un = unsafe { zeroed() };
    if name.is_empty() || name.len() + 1 > addr.sun_path.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, &s) in addr.sun_path[1..].iter_mut().zip(name) {
        *d = s as libc::c_char;
    }
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + 1 + name.len();
    Ok((addr, len as libc::socklen_t))
}

/// `socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)`.
fn seqpacket() -> io::Result<OwnedFd> {
    // SAFETY: no pointers involved.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just created, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A `SOCK_SEQPACKET` socket bound to the abstract name `name` and
/// listening (`bind` + `listen`).
pub fn seqpacket_listen(name: &[u8]) -> io::Result<OwnedFd> {
    let sock = seqpacket()?;
    let (addr, len) = abstract_address(name)?;
    // SAFETY: addr is a valid sockaddr_un of `len` bytes.
    if unsafe { libc::bind(sock.as_raw_fd(), &addr as *const _ as *const libc::sockaddr, len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: no pointers involved.
    if unsafe { libc::listen(sock.as_raw_fd(), 128) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sock)
}

/// A `SOCK_SEQPACKET` socket connected to the abstract name `name`.
pub fn seqpacket_connect(name: &[u8]) -> io::Result<OwnedFd> {
    let sock = seqpacket()?;
    let (addr, len) = abstract_address(name)?;
    // SAFETY: addr is a valid sockaddr_un of `len` bytes.
    if unsafe { libc::connect(sock.as_raw_fd(), &addr as *const _ as *const libc::sockaddr, len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sock)
}

/// `accept4(sock, NULL, NULL, SOCK_CLOEXEC)`.
pub fn accept(sock: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: null address pointers are allowed.
    let fd = unsafe { libc::accept4(sock.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Who is at the other end of a connected socket, as it was when it
/// connected (`SO_PEERCRED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCredentials {
    /// The connecting process (its thread group), in this process's pid
    /// namespace.
    pub pid: i32,
    pub uid: u32,
}

/// `getsockopt(SO_PEERCRED)` of a connected socket.
pub fn peer_credentials(sock: BorrowedFd<'_>) -> io::Result<PeerCredentials> {
    // SAFETY: ucred is plain data.
    let mut cred: libc::ucred = unsafe { zeroed() };
    let mut len = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for the call.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PeerCredentials { pid: cred.pid, uid: cred.uid })
}

/// `SO_RCVTIMEO` and `SO_SNDTIMEO`: a blocked receive or send on `sock`
/// fails with `EAGAIN` after `timeout`.
pub fn set_socket_timeouts(sock: BorrowedFd<'_>, timeout: Duration) -> io::Result<()> {
    let tv = libc::timeval { tv_sec: timeout.as_secs() as libc::time_t, tv_usec: timeout.subsec_micros() as _ };
    for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: tv is a valid timeval for the call.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &tv as *const _ as *const libc::c_void,
                size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `sendmsg` of one message, `payload` with `fd` attached (`SCM_RIGHTS`)
/// when given, without `SIGPIPE` if the other end is gone.
pub fn send_with_fd(sock: BorrowedFd<'_>, payload: &[u8], fd: Option<BorrowedFd<'_>>) -> io::Result<usize> {
    let mut iov = libc::iovec { iov_base: payload.as_ptr() as *mut libc::c_void, iov_len: payload.len() };
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as usize;
    // u64 words: the control buffer must be aligned for cmsghdr.
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain data; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space;
        // SAFETY: the control buffer holds one cmsghdr with room for one int.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut RawFd, fd.as_raw_fd());
        }
    }
    // SAFETY: msg and everything it points to are valid for the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// A message `recv_with_fd` received.
#[derive(Debug)]
pub struct Received {
    /// Bytes of payload; 0 at the end of the connection.
    pub len: usize,
    /// The first descriptor attached; any others were closed.
    pub fd: Option<OwnedFd>,
    /// The payload or the attachments did not fit and were cut.
    pub truncated: bool,
}

/// `recvmsg` of one message into `buf`, its descriptors received
/// close-on-exec.
pub fn recv_with_fd(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received> {
    const MAX_FDS: usize = 8;
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE((MAX_FDS * size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain data; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space;
    // SAFETY: msg and everything it points to are valid for the call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut got =
        Received { len: n as usize, fd: None, truncated: msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 };
    // SAFETY: walks the control messages the kernel wrote, within
    // msg_controllen; each descriptor in SCM_RIGHTS is now this process's
    // (owned here, so the ones not kept are closed).
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if ((*cmsg).cmsg_level, (*cmsg).cmsg_type) == (libc::SOL_SOCKET, libc::SCM_RIGHTS) {
                let data = libc::CMSG_DATA(cmsg);
                let data_len = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                for i in 0..data_len / size_of::<RawFd>() {
                    let owned = OwnedFd::from_raw_fd(std::ptr::read_unaligned((data as *const RawFd).add(i)));
                    got.fd.get_or_insert(owned);
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_descriptor_and_a_reply_cross_a_connection() {
        let name = format!("dc-sys-test-{}", std::process::id());
        let listener = seqpacket_listen(name.as_bytes()).unwrap();
        let client = seqpacket_connect(name.as_bytes()).unwrap();
        let server = accept(listener.as_fd()).unwrap();
        // SAFETY: getuid has no preconditions.
        let peer = PeerCredentials { pid: std::process::id() as i32, uid: unsafe { libc::getuid() } };
        assert_eq!(peer_credentials(server.as_fd()).unwrap(), peer);
        let file = std::fs::File::open("/proc/self/exe").unwrap();
        assert_eq!(send_with_fd(client.as_fd(), b"hello", Some(file.as_fd())).unwrap(), 5);
        assert_eq!(send_with_fd(client.as_fd(), b"bye", None).unwrap(), 3);
        let mut buf = [0u8; 16];
        let got = recv_with_fd(server.as_fd(), &mut buf).unwrap();
        assert_eq!((&buf[..got.len], got.truncated), (&b"hello"[..], false));
        let fd = got.fd.expect("a descriptor");
        assert_eq!(crate::fstat(fd.as_raw_fd()).unwrap().ino, crate::fstat(file.as_raw_fd()).unwrap().ino);
        let got = recv_with_fd(server.as_fd(), &mut buf).unwrap();
        assert_eq!((&buf[..got.len], got.fd.is_none()), (&b"bye"[..], true));
        set_socket_timeouts(client.as_fd(), Duration::from_millis(10)).unwrap();
        let mut reply = [0u8; 4];
        let timed_out = recv_with_fd(client.as_fd(), &mut reply).unwrap_err();
        assert_eq!(timed_out.raw_os_error(), Some(libc::EAGAIN));
        drop(server);
        assert_eq!(recv_with_fd(client.as_fd(), &mut reply).unwrap().len, 0, "the end of the connection");
        drop(listener);
        let refused = seqpacket_connect(name.as_bytes()).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::ECONNREFUSED));
    }
}
