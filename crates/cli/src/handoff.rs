//! The receiving end of the shim's hand-off (the engine's `handoff`): the
//! command's processes send the files they have not finished as they exit;
//! each is taken over by this process's engine and closed, its flusher
//! finishes it, and writeback errors are late errors here, reported with
//! the command's. Files a process put in escrow are held until it releases
//! them; if it ends without (killed, crashed), they are finished the same
//! way.
//!
//! One thread serves every connection at once (`poll`): a connection with
//! files in escrow stays open as long as its process lives. A process's
//! end is seen on a pidfd of it, not only on its connection, which its
//! forked children may hold open long after.

use std::collections::HashMap;
use std::io::Read;
use std::ops::Range;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::Duration;

use dontcache::handoff::{self, Message};
use dontcache::{Handle, Options};

/// How long a sender in the middle of its hand-over may keep the stopping
/// receiver waiting for its next message, and the most a reply may wait
/// to be sent; its files so far are taken, and the sender, without a
/// reply, waits for all of them itself.
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
    thread: Option<JoinHandle<Late>>,
}

impl Receiver {
    /// Listens on a fresh abstract socket name; a thread takes over the
    /// files sent to it until `finish`.
    pub fn start(opts: Options) -> std::io::Result<Receiver> {
        let name = format!("dontcache-run-{}-{:032x}", std::process::id(), u128::from_le_bytes(random_bits()?));
        let listener = dc_sys::seqpacket_listen(name.as_bytes())?;
        // The files taken over are descriptors of this process: their
        // numbers are given room while it has no thread yet.
        dontcache::own::make_room_for_numbers(listener.as_fd());
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
    /// is accepted after every one the command made. Returns the writeback
    /// errors of files in escrow whose processes ended before they were
    /// told (errno, path).
    pub fn finish(mut self) -> Vec<(i32, PathBuf)> {
        let stopped = dc_sys::seqpacket_connect(self.name.as_bytes())
            .and_then(|sock| dc_sys::send_with_fd(sock.as_fd(), &self.stop, None).map(|_| sock));
        match (stopped, self.thread.take()) {
            (Ok(_sock), Some(t)) => t.join().unwrap_or_default(),
            _ => Vec::new(),
        }
    }
}

/// What one connection has sent so far.
struct Sender {
    sock: OwnedFd,
    /// Polls readable once the process has ended (`None` where it could
    /// not be had: then only the connection's end says so).
    ended: Option<OwnedFd>,
    /// Files handed over at its exit.
    files: Vec<(OwnedFd, Vec<Range<u64>>)>,
    /// Files in escrow, by the number the process gave each.
    escrowed: HashMap<u32, Escrowed>,
}

/// A file in escrow.
struct Escrowed {
    fd: OwnedFd,
    /// What to drop of it should its process end without releasing it.
    pages: Vec<Range<u64>>,
    /// A writeback error its process was not told of (0: none).
    errno: i32,
}

/// Writeback errors of files whose process ended before it was told.
type Late = Vec<(i32, PathBuf)>;

/// After a message: whether the connection goes on.
#[derive(PartialEq)]
enum Next {
    More,
    /// Its end, or its last message: what it sent is settled.
    Over,
    /// This process's stop message.
    Stop,
}

/// Files in escrow held at most at once, over every connection: each is a
/// descriptor, and a command of many processes must not take this
/// process's last.
fn escrow_limit() -> usize {
    (dc_sys::open_files_limit() / 2) as usize
}

/// Serves every connection until the stop message.
fn serve(listener: OwnedFd, opts: Options, uid: u32, stop: [u8; 16]) -> Late {
    let mut buf = vec![0u8; handoff::MAX_MESSAGE];
    let me = dc_sys::getpid();
    let mut senders: Vec<Sender> = Vec::new();
    let mut late = Late::new();
    let limit = escrow_limit();
    loop {
        let mut fds = vec![listener.as_fd()];
        for s in &senders {
            fds.push(s.sock.as_fd());
            fds.push(s.ended.as_ref().map_or(s.sock.as_fd(), |e| e.as_fd()));
        }
        let Ok(ready) = dc_sys::poll_ready(&fds, None) else { return late };
        let held = senders.iter().map(|s| s.escrowed.len()).sum::<usize>();
        let mut stopped = false;
        let mut i = 0;
        senders.retain_mut(|s| {
            let (readable, ended) = (ready[1 + 2 * i], ready[2 + 2 * i]);
            i += 1;
            let next = if ended {
                drain(s, &mut buf, &stop, held, limit)
            } else if readable {
                take_message(s, &mut buf, &stop, held, limit)
            } else {
                Next::More
            };
            stopped |= next == Next::Stop;
            if next == Next::More {
                return true;
            }
            settle(s, opts, next == Next::Over, &mut late);
            false
        });
        if stopped {
            finish_senders(senders, &mut buf, opts, &stop, &mut late);
            return late;
        }
        if ready[0] {
            senders.extend(accept(&listener, me, uid));
        }
    }
}

/// A new connection, from a process that may hand files over.
fn accept(listener: &OwnedFd, me: i32, uid: u32) -> Option<Sender> {
    let sock = dc_sys::accept(listener.as_fd()).ok()?;
    // Closed unanswered otherwise: the sender waits for its files itself.
    let peer = dc_sys::peer_credentials(sock.as_fd()).ok().filter(|peer| may_hand_over(*peer, me, uid))?;
    let _ = dc_sys::set_socket_timeouts(sock.as_fd(), CONNECTION_TIMEOUT);
    let ended = dc_sys::pidfd_open(peer.pid).ok();
    Some(Sender { sock, ended, files: Vec::new(), escrowed: HashMap::new() })
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

/// Reads everything a sender whose process has ended left queued.
fn drain(s: &mut Sender, buf: &mut [u8], stop: &[u8; 16], held: usize, limit: usize) -> Next {
    while dc_sys::poll_readable(s.sock.as_fd(), Some(Duration::ZERO)).unwrap_or(false) {
        let next = take_message(s, buf, stop, held, limit);
        if next != Next::More {
            return next;
        }
    }
    Next::Over
}

/// Reads and acts on one message of `s`.
fn take_message(s: &mut Sender, buf: &mut [u8], stop: &[u8; 16], held: usize, limit: usize) -> Next {
    let Ok(got) = dc_sys::recv_with_fd(s.sock.as_fd(), buf) else { return Next::Over };
    let msg = &buf[..got.len];
    if got.len == 0 {
        return Next::Over;
    }
    if msg == stop {
        return Next::Stop;
    }
    match handoff::decode(msg).filter(|_| !got.truncated) {
        Some(Message::File(pages)) => s.files.extend(got.fd.map(|fd| (fd, pages))),
        Some(Message::Escrow(id, pages)) if held < limit => {
            s.escrowed.extend(got.fd.map(|fd| (id, Escrowed { fd, pages, errno: 0 })));
        }
        Some(Message::Release(id)) => drop(s.escrowed.remove(&id)),
        Some(Message::Error(id, errno)) => {
            if let Some(e) = s.escrowed.get_mut(&id) {
                e.errno = errno;
            }
        }
        // A process of the command is about to unmount the filesystem:
        // the files taken over there are finished and closed first, here
        // on the serving thread (other senders wait, or, past their
        // reply's timeout, finish their files themselves).
        Some(Message::ReleaseFilesystem(dev)) => {
            dontcache::release_filesystem(dev);
            let _ = dc_sys::send_with_fd(s.sock.as_fd(), &handoff::reply(0), None);
        }
        // Every earlier message of the connection is acted on already.
        Some(Message::Sync) => {
            let _ = dc_sys::send_with_fd(s.sock.as_fd(), &handoff::reply(0), None);
        }
        Some(Message::End) => {
            // Replied at once, so the sender's exit waits for no more than
            // the message's trip; the files are bound after.
            let _ = dc_sys::send_with_fd(s.sock.as_fd(), &handoff::reply(s.files.len() as u32), None);
            s.escrowed.clear();
            return Next::Over;
        }
        // Malformed, or past the limit: its descriptor is closed, not
        // counted, and the sender waits for its files itself.
        _ => {}
    }
    Next::More
}

/// A sender is done: its files handed over are taken and, where its
/// process ended without releasing them, its files in escrow too, and the
/// errors it was not told of are `late` (at its last message it released
/// them all).
fn settle(s: &mut Sender, opts: Options, ended: bool, late: &mut Late) {
    let escrowed = std::mem::take(&mut s.escrowed);
    let orphans = escrowed.into_values().filter(|_| ended).map(|e| {
        if e.errno != 0 {
            late.push((e.errno, dc_sys::fd_path(e.fd.as_fd()).unwrap_or_default()));
        }
        (e.fd, e.pages)
    });
    let files = std::mem::take(&mut s.files);
    for (fd, pages) in files.into_iter().chain(orphans) {
        take_over(fd, opts, &pages);
    }
}

/// At the stop: what every connection still open has sent is taken; a
/// sender in the middle of its hand-over gets `CONNECTION_TIMEOUT` a
/// message to finish it. Files in escrow of processes still running stay
/// theirs (they finish them themselves); those of processes that have
/// ended are finished.
fn finish_senders(senders: Vec<Sender>, buf: &mut [u8], opts: Options, stop: &[u8; 16], late: &mut Late) {
    for mut s in senders {
        let gone =
            s.ended.as_ref().is_some_and(|e| dc_sys::poll_readable(e.as_fd(), Some(Duration::ZERO)).unwrap_or(false));
        let mut next = Next::More;
        while next == Next::More {
            let wait = if s.files.is_empty() { Duration::ZERO } else { CONNECTION_TIMEOUT };
            if !dc_sys::poll_readable(s.sock.as_fd(), Some(wait)).unwrap_or(false) {
                break;
            }
            next = take_message(&mut s, buf, stop, 0, usize::MAX);
        }
        settle(&mut s, opts, gone || next == Next::Over, late);
    }
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
