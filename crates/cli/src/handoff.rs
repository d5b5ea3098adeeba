//! The receiving end of the shim's hand-off at exit (the engine's
//! `handoff`): the command's processes send the files they have not
//! finished as they exit; each is taken over by this process's engine and
//! closed, its flusher finishes it, and writeback errors are late errors
//! here, reported with the command's.

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::thread::JoinHandle;
use std::time::Duration;

use dontcache::handoff::{self, Message};
use dontcache::{Handle, Options};

/// How long a connection may keep the receiver waiting for its next
/// message (a sender stopped mid-way); its files so far are taken, and the
/// sender, without a reply, waits for all of them itself.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);

/// 128 bits from the kernel's random source.
fn random_bits() -> std::io::Result<[u8; 16]> {
    let mut bits = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bits)?;
    Ok(bits)
}

pub struct Receiver {
    name: String,
    /// What this process sends, last, to stop the thread.
    stop: [u8; 16],
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Listens on a fresh abstract socket name; a thread takes over the
    /// files sent to it until `finish`.
    pub fn start(opts: Options) -> std::io::Result<Receiver> {
        let name = format!("dontcache-run-{}-{:032x}", std::process::id(), u128::from_le_bytes(random_bits()?));
        let listener = dc_sys::seqpacket_listen(name.as_bytes())?;
        let stop = random_bits()?;
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let thread = std::thread::Builder::new()
            .name("dontcache-handoff".into())
            .spawn(move || serve(listener, opts, uid, stop))?;
        Ok(Receiver { name, stop, thread: Some(thread) })
    }

    /// The name the command's processes connect to (`handoff::ENV`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Takes the files of every connection made so far, then stops: a
    /// connection of this process's own, made after the command exited,
    /// is accepted after every one the command made.
    pub fn finish(mut self) {
        let stopped = dc_sys::seqpacket_connect(self.name.as_bytes())
            .and_then(|sock| dc_sys::send_with_fd(sock.as_fd(), &self.stop, None).map(|_| sock));
        if let (Ok(_sock), Some(t)) = (stopped, self.thread.take()) {
            let _ = t.join();
        }
    }
}

/// Accepts connections one at a time until the stop message.
fn serve(listener: OwnedFd, opts: Options, uid: u32, stop: [u8; 16]) {
    let mut buf = vec![0u8; handoff::MAX_MESSAGE];
    let me = dc_sys::getpid();
    loop {
        let conn = match dc_sys::accept(listener.as_fd()) {
            Ok(c) => c,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) || e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
            Err(_) => return,
        };
        if !dc_sys::peer_credentials(conn.as_fd()).is_ok_and(|peer| may_hand_over(peer, me, uid)) {
            // Closed unanswered: the sender waits for its files itself.
            continue;
        }
        let _ = dc_sys::set_socket_timeouts(conn.as_fd(), CONNECTION_TIMEOUT);
        if !take_connection(&conn, &mut buf, opts, &stop) {
            return;
        }
    }
}

/// Whether `peer` may hand files to this receiver (`me`, running as `uid`):
/// a process of the command's tree, or this process (its stop message).
/// Anyone else could make `run` report a late error of its file as the
/// command's (exit status 74). A root receiver takes files from whichever
/// user the tree's processes run as (a command may change its user);
/// another only from its own user's. A process orphaned out of the tree
/// (its parent gone, without `--watch`'s subreaper) is refused and waits
/// for its files itself, as outside `run`. The tree is read from /proc
/// when the peer connects: a peer that exits and whose pid is reused by
/// the tree in between is taken as the tree's (its files are written back
/// and dropped, nothing more).
fn may_hand_over(peer: dc_sys::PeerCredentials, me: i32, uid: u32) -> bool {
    (uid == 0 || peer.uid == uid) && crate::tree::descends_from(peer.pid, me)
}

/// Takes the files one sender sends, and replies to its last message with
/// how many were taken: at once, so the sender's exit waits for no more
/// than the messages' trip; the files are bound after. Returns false at the
/// stop message.
fn take_connection(conn: &OwnedFd, buf: &mut [u8], opts: Options, stop: &[u8; 16]) -> bool {
    let mut files = Vec::new();
    loop {
        let Ok(got) = dc_sys::recv_with_fd(conn.as_fd(), buf) else { break };
        let msg = &buf[..got.len];
        if got.len == 0 {
            break;
        }
        if msg == stop {
            return false;
        }
        match handoff::decode(msg).filter(|_| !got.truncated) {
            Some(Message::File(pages)) => files.extend(got.fd.map(|fd| (fd, pages))),
            Some(Message::End) => {
                let _ = dc_sys::send_with_fd(conn.as_fd(), &handoff::reply(files.len() as u32), None);
                break;
            }
            // Malformed: its descriptor is closed, not counted, and the
            // sender waits for its files itself.
            None => {}
        }
    }
    for (fd, pages) in files {
        take_over(fd, opts, &pages);
    }
    true
}

/// Binds a file handed over and closes it: the flusher finishes it. A file
/// the engine cannot bind (not a regular file: a sender's mistake) is
/// left as it is.
fn take_over(fd: OwnedFd, opts: Options, pages: &[std::ops::Range<u64>]) {
    if let Ok(h) = Handle::take_over(fd, opts, pages) {
        // Nothing was written through it: no error to return yet.
        let _ = h.close();
    }
}
