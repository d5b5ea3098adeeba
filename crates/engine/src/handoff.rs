//! Files a process has not finished at its exit, handed to a process that
//! outlives it (`dontcache run`), so the exit need not wait for their
//! writeback: a `cp` of one small file under the shim spent most of its
//! extra millisecond at exit waiting for the write's trip to the disk.
//!
//! Each file goes as its descriptor (`SCM_RIGHTS`, over the
//! `SOCK_SEQPACKET` socket whose abstract name is in `ENV`) with the pages
//! the library may drop of it; a last message asks how many the receiver
//! took. The receiver binds each with `Handle::take_over` and closes it:
//! its own flusher writes back what is still dirty, waits, drops, and keeps
//! writeback errors as late errors of its own, which `dontcache run`
//! reports. A sender that gets no reply, or a count short of what it sent,
//! waits for all its files itself, as without a receiver (a file finished
//! twice is dropped twice; an error is reported once, by whichever wait
//! sees it first on the shared open file). A sender waits for no writeback
//! once it has listed its files (`unfinished_files`): its wait would see
//! an error first and leave the receiver none to report.
//!
//! A process that ends without its exit hook (SIGKILL, the OOM killer, a
//! crash) can hand nothing over, and left its open files' last batches
//! cached: a `dd` killed under `dontcache run` 191 MiB, one killed by
//! SIGSEGV 161 MiB, a `cat` reader 18-25 MiB. So a file the library has
//! written or read `ESCROW_BYTES` of goes to the receiver early, in
//! escrow: its descriptor and every page of it but those cached before
//! the library bound it, over one connection the process keeps. The
//! receiver holds it until the process releases it (when the library lets
//! the file go, or all at once with the exit's last message); if the
//! process ends first, the receiver finishes the file as one handed over.
//! Whole files, not the pages the process touched: those are known only
//! as it goes.
//!
//! A process about to unmount a filesystem asks the receiver to finish and
//! close the files it holds there first (`release_filesystem`), and waits
//! for its reply: they would keep the filesystem busy. One about to lock a
//! file waits until the receiver has read the releases it sent
//! (`sync_with_receiver`): a copy of the open file in escrow would hold a
//! `flock` the program's close released.

use std::ffi::OsString;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::file::FileState;
use crate::own::OwnFd;

/// The environment variable that names the receiver's socket (an abstract
/// Unix socket name).
pub const ENV: &str = "DONTCACHE_HANDOFF";

/// The most ranges one file's message carries (16 bytes each): a file whose
/// droppable pages are more scattered is finished by its own process.
pub const MAX_RANGES: usize = 4096;

/// The largest message, for the receiver's buffer.
pub const MAX_MESSAGE: usize = 12 + 16 * MAX_RANGES;

/// What a file's I/O seen by the library must reach before it goes in
/// escrow: a file smaller than that is finished within
/// a batch or two of its close, and a tree of 50,000 small files must not
/// cost a message and a held descriptor each.
pub const ESCROW_BYTES: u64 = 1 << 20;

/// The most files one process keeps in escrow at once (each is a
/// descriptor held by the receiver); files past it are left as before.
pub const MAX_ESCROWED: usize = 256;

/// How long a sender waits for the receiver: for its reply at exit (then
/// it waits for its files itself), or to take a message.
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);

const FILE: &[u8; 4] = b"DCHF";
const ESCROW: &[u8; 4] = b"DCHS";
const RELEASE: &[u8; 4] = b"DCHR";
const ERROR: &[u8; 4] = b"DCHX";
const END: &[u8; 4] = b"DCHE";
const RELEASE_FILESYSTEM: &[u8; 4] = b"DCHU";
const SYNC: &[u8; 4] = b"DCHP";

/// How long an unmount waits for the receiver to let go of the files it
/// holds on the filesystem: their writeback comes first, as an unmount's
/// own would.
const RELEASE_FILESYSTEM_TIMEOUT: Duration = Duration::from_secs(600);

static ENABLED: AtomicBool = AtomicBool::new(false);
/// Set once, without a blocking once (see `handle::closed_files_cap`).
static RECEIVER: once_cell::race::OnceBox<OsString> = once_cell::race::OnceBox::new();

/// Hands this process's unfinished files to the receiver named `name` (the
/// value of `ENV`) from now on, and keeps its closed files findable for
/// `unfinished_files` (the shim calls it where `ENV` is set; it costs a
/// lock and a list entry per closed file).
pub fn enable(name: OsString) {
    if RECEIVER.set(Box::new(name)).is_ok() {
        ENABLED.store(true, Release);
    }
}

/// Whether `enable` named a receiver.
pub fn enabled() -> bool {
    ENABLED.load(Acquire)
}

/// A closed file this process has not finished.
pub struct Unfinished(Arc<FileState>);

impl Unfinished {
    /// The descriptor to send: the one whose page cache is the file's (on
    /// an overlay, its layer's file).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.0.cache_fd()
    }

    /// The message that goes with `fd`; `None` for a file another process
    /// cannot finish from a descriptor (written through an overlay whose
    /// layer file the library could not open), or whose pages to drop are
    /// too scattered for one message.
    pub fn message(&self) -> Option<Vec<u8>> {
        if self.0.through_overlay() {
            return None;
        }
        encode(FILE, None, &self.0.droppable_touched())
    }
}

/// A message of `tag`, with `id` if given, carrying `pages`; `None` past
/// `MAX_RANGES`.
fn encode(tag: &[u8; 4], id: Option<u32>, pages: &[Range<u64>]) -> Option<Vec<u8>> {
    if pages.len() > MAX_RANGES {
        return None;
    }
    let mut m = Vec::with_capacity(12 + 16 * pages.len());
    m.extend_from_slice(tag);
    m.extend(id.map(u32::to_le_bytes).into_iter().flatten());
    m.extend_from_slice(&(pages.len() as u32).to_le_bytes());
    for r in pages {
        m.extend_from_slice(&r.start.to_le_bytes());
        m.extend_from_slice(&r.end.to_le_bytes());
    }
    Some(m)
}

/// Every closed file of this process not finished yet (files closed before
/// `enable` are not known). From now on this process waits for no
/// writeback, and the waits in flight are over when this returns: a wait
/// here on a file handed over would take the writeback error the receiver
/// must report (the open file is shared, and an error is reported once per
/// open file), and this process is about to exit. Errors the waits in
/// flight found are late errors here, as usual. A sender whose files are
/// not all taken calls `resume_waits` and finishes them itself.
pub fn unfinished_files() -> Vec<Unfinished> {
    crate::engine::engine().stop_waits_for_unfinished().into_iter().map(Unfinished).collect()
}

/// Undoes `unfinished_files`'s stop: this process's flushers wait for
/// writeback again.
pub fn resume_waits() {
    crate::engine::engine().resume_waits();
}

/// The last message of a sender: it asks for the count of files taken.
pub fn end_message() -> &'static [u8] {
    END
}

/// What a received message is.
#[derive(Debug, PartialEq, Eq)]
pub enum Message {
    /// A file handed over (its descriptor came with it) and the pages to
    /// drop of it.
    File(Vec<Range<u64>>),
    /// A file in escrow (its descriptor came with it), its number on this
    /// connection, and the pages to drop of it should the sender end
    /// without releasing it.
    Escrow(u32, Vec<Range<u64>>),
    /// The sender lets go of the file it put in escrow under this number.
    Release(u32),
    /// The writeback of a file in escrow failed with this errno, which the
    /// program has not been told yet (0: it has been told since): the
    /// receiver reports it should the sender end without releasing it.
    Error(u32, i32),
    /// The sender is done: every file it put in escrow is released, and it
    /// waits for the count of files handed over (`reply`).
    End,
    /// The sender is about to unmount the filesystem of this device number:
    /// it waits (`reply`) until the receiver has finished and closed every
    /// file it took over there.
    ReleaseFilesystem(u64),
    /// The sender waits (`reply`) until the receiver has acted on all it
    /// sent before: its releases, so that no descriptor of a file it let go
    /// of is left open there.
    Sync,
}

/// Reads a message; `None` for anything malformed.
pub fn decode(m: &[u8]) -> Option<Message> {
    if m == END {
        return Some(Message::End);
    }
    if m == SYNC {
        return Some(Message::Sync);
    }
    let (tag, rest) = m.split_at_checked(4)?;
    let word32 = |c: &[u8]| c.try_into().ok().map(u32::from_le_bytes);
    match tag {
        t if t == RELEASE && rest.len() == 4 => Some(Message::Release(word32(rest)?)),
        t if t == ERROR && rest.len() == 8 => Some(Message::Error(word32(&rest[..4])?, word32(&rest[4..])? as i32)),
        t if t == ESCROW => {
            let (id, rest) = rest.split_at_checked(4)?;
            Some(Message::Escrow(word32(id)?, decode_pages(rest)?))
        }
        t if t == FILE => Some(Message::File(decode_pages(rest)?)),
        t if t == RELEASE_FILESYSTEM => Some(Message::ReleaseFilesystem(u64::from_le_bytes(rest.try_into().ok()?))),
        _ => None,
    }
}

/// A count and that many page ranges.
fn decode_pages(m: &[u8]) -> Option<Vec<Range<u64>>> {
    let (head, rest) = m.split_at_checked(4)?;
    let count = u32::from_le_bytes(head.try_into().ok()?) as usize;
    if count > MAX_RANGES || rest.len() != 16 * count {
        return None;
    }
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or_default());
    let pages: Vec<Range<u64>> = rest.chunks_exact(16).map(|c| word(&c[..8])..word(&c[8..])).collect();
    pages.iter().all(|r| r.start <= r.end).then_some(pages)
}

/// A file's place in escrow (`FileState::escrow`): `NOT_YET`, `NEVER`, or
/// the fork generation (low 32 bits) and number it went under.
pub(crate) const NOT_YET: u64 = 0;
const NEVER: u64 = u64::MAX;

fn token(generation: u64, id: u32) -> u64 {
    (generation as u32 as u64) << 32 | u64::from(id)
}

/// One process's connection to the receiver, made for its first file in
/// escrow or at its exit, whichever comes first. Kept per engine, so a
/// forked child makes its own: the receiver tells processes apart by
/// their connections.
#[derive(Default)]
pub(crate) struct Connection(Mutex<State>);

#[derive(Default)]
enum State {
    #[default]
    Unused,
    Open(Open),
    /// Ended (the exit's last message went) or broken: nothing more is sent.
    Closed,
}

struct Open {
    sock: OwnFd,
    next_id: u32,
    escrowed: usize,
}

impl Connection {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// The connection, made now if it was not yet; `None` once closed or
    /// where the receiver cannot be reached.
    fn open(&mut self) -> Option<&mut Open> {
        if matches!(self, State::Unused) {
            *self = connect().map_or(State::Closed, State::Open);
        }
        match self {
            State::Open(open) => Some(open),
            _ => None,
        }
    }

    /// Sends one message; a failure closes the connection.
    fn send(&mut self, m: &[u8], fd: Option<BorrowedFd<'_>>) -> bool {
        let State::Open(open) = self else { return false };
        let sent = dc_sys::send_with_fd(open.sock.as_fd(), m, fd).is_ok();
        if !sent {
            *self = State::Closed;
        }
        sent
    }
}

fn connect() -> Option<Open> {
    let name = RECEIVER.get()?;
    // Where a program's `closefrom(3)` spares it, as the library's others.
    let sock = crate::own::made_high(|| dc_sys::seqpacket_connect(name.as_bytes())).ok()?;
    dc_sys::set_socket_timeouts(sock.as_fd(), REPLY_TIMEOUT).ok()?;
    Some(Open { sock, next_id: 1, escrowed: 0 })
}

/// Puts `file` in escrow once the library has seen `ESCROW_BYTES` of its I/O
/// (see the module's comment); called as the flusher takes the file into a
/// batch, and as its reads are dropped. A file that cannot go (on an overlay reached without its
/// layer's file, on tmpfs whose pages are the file, foreign pages too
/// scattered for one message, `MAX_ESCROWED` reached, no receiver) is
/// never tried again.
pub(crate) fn escrow(file: &FileState) {
    if !enabled() || file.escrow.load(Acquire) != NOT_YET || file.io_seen() < ESCROW_BYTES {
        return;
    }
    let placed = (!file.through_overlay() && file.droppable).then(|| file.escrow_pages()).and_then(|pages| {
        let engine = crate::engine::engine();
        let mut state = engine.handoff.lock();
        let open = state.open().filter(|o| o.escrowed < MAX_ESCROWED)?;
        let id = open.next_id;
        let m = encode(ESCROW, Some(id), &pages)?;
        // Counted before it goes: a failed send closes the connection.
        open.next_id += 1;
        open.escrowed += 1;
        state.send(&m, Some(file.cache_fd())).then(|| token(engine.generation, id))
    });
    file.escrow.store(placed.unwrap_or(NEVER), Release);
}

/// The library lets go of a file that went in escrow as `token` (its
/// `FileState` is dropped): the receiver closes its descriptor, so an
/// unlinked file's blocks are not held.
pub(crate) fn release(token: u64) {
    if send_about(token, RELEASE, &[]) {
        if let State::Open(open) = &mut *crate::engine::engine().handoff.lock() {
            open.escrowed = open.escrowed.saturating_sub(1);
        }
    }
}

/// The writeback of the file in escrow as `token` failed with `errno`, or
/// (0) the program has been told of its error: a process killed before it
/// was told leaves the error to the receiver to report.
pub(crate) fn failed(token: u64, errno: i32) {
    send_about(token, ERROR, &errno.to_le_bytes());
}

/// Sends `tag`, the file's number and `rest` about the file in escrow as
/// `token`; whether it went. Nothing about files not in escrow, nor, in a
/// forked child, about its parent's.
fn send_about(token: u64, tag: &[u8; 4], rest: &[u8]) -> bool {
    if token == NOT_YET || token == NEVER {
        return false;
    }
    let engine = crate::engine::engine();
    if token >> 32 != engine.generation as u32 as u64 {
        return false;
    }
    let mut m = tag.to_vec();
    m.extend_from_slice(&(token as u32).to_le_bytes());
    m.extend_from_slice(rest);
    engine.handoff.lock().send(&m, None)
}

/// Asks the receiver to finish and close every file it took over on the
/// filesystem of device number `dev`, which this process is about to
/// unmount, and waits until it has (at most `RELEASE_FILESYSTEM_TIMEOUT`);
/// whether it said so.
pub fn release_filesystem(dev: u64) -> bool {
    if !enabled() {
        return false;
    }
    let mut m = RELEASE_FILESYSTEM.to_vec();
    m.extend_from_slice(&dev.to_le_bytes());
    let engine = crate::engine::engine();
    let mut state = engine.handoff.lock();
    if state.open().is_none() || !state.send(&m, None) {
        return false;
    }
    let State::Open(open) = &*state else { return false };
    let since = std::time::Instant::now();
    let mut buf = [0u8; 4];
    // The socket's receive timeout is `REPLY_TIMEOUT`: asked again until
    // the reply comes, the receiver is gone, or the wait is over.
    while since.elapsed() < RELEASE_FILESYSTEM_TIMEOUT {
        match dc_sys::recv_with_fd(open.sock.as_fd(), &mut buf) {
            Ok(r) if r.len > 0 && decode_reply(&buf[..r.len]).is_some() => return true,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) => continue,
            _ => break,
        }
    }
    // A reply that comes later would be taken for the next request's.
    *state = State::Closed;
    false
}

/// Waits until the receiver has acted on every message this process sent
/// it, if it has a connection (files in escrow): the files it let go of
/// are closed there too. A lock needs that: a copy of the open file kept
/// there holds a `flock` the program's close released, and counts as an
/// open for writing, which refuses a lease.
pub fn sync_with_receiver() {
    let engine = crate::engine::engine();
    let mut state = engine.handoff.lock();
    if !matches!(*state, State::Open(_)) || !state.send(SYNC, None) {
        return;
    }
    if let State::Open(open) = &*state {
        let mut buf = [0u8; 4];
        // At most the socket's receive timeout (`REPLY_TIMEOUT`); a reply
        // that comes later would be taken for the next request's, so the
        // connection ends then (the process finishes its files itself).
        let replied = dc_sys::recv_with_fd(open.sock.as_fd(), &mut buf).is_ok_and(|r| r.len > 0);
        if !replied {
            *state = State::Closed;
        }
    }
}

/// Hands `files` (`unfinished_files`) to the receiver, with the last
/// message, which also releases every file in escrow; whether the reply
/// counts them all (then the exit need not wait for them). Anything short
/// of that, and the caller waits for all of them itself. Nothing is sent
/// by a process that has no file to hand over and none in escrow.
pub fn hand_over(files: &[Unfinished]) -> bool {
    let engine = crate::engine::engine();
    let mut state = engine.handoff.lock();
    if files.is_empty() && !matches!(*state, State::Open(_)) {
        return false;
    }
    let taken = send_files(&mut state, files);
    *state = State::Closed;
    taken && !files.is_empty()
}

/// Sends `files` and the end message; whether the reply counts them all.
fn send_files(state: &mut State, files: &[Unfinished]) -> bool {
    if state.open().is_none() {
        return false;
    }
    for f in files {
        let Some(m) = f.message() else { return false };
        if !state.send(&m, Some(f.fd())) {
            return false;
        }
    }
    if !state.send(END, None) {
        return false;
    }
    let State::Open(open) = state else { return false };
    let mut buf = [0u8; 4];
    let taken = dc_sys::recv_with_fd(open.sock.as_fd(), &mut buf).ok().and_then(|r| decode_reply(&buf[..r.len]));
    taken == Some(files.len() as u32)
}

/// The receiver's reply to `End`: how many files of the connection it took.
pub fn reply(taken: u32) -> [u8; 4] {
    taken.to_le_bytes()
}

/// Reads a reply.
pub fn decode_reply(m: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(m.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_malformed_ones_are_refused() {
        let pages = vec![0..3, 7..7, 9..u64::MAX];
        let mut m = FILE.to_vec();
        m.extend_from_slice(&3u32.to_le_bytes());
        for r in &pages {
            m.extend_from_slice(&r.start.to_le_bytes());
            m.extend_from_slice(&r.end.to_le_bytes());
        }
        assert_eq!(decode(&m), Some(Message::File(pages.clone())));
        assert_eq!(encode(FILE, None, &pages), Some(m.clone()));
        let escrow = encode(ESCROW, Some(7), &pages).unwrap();
        assert_eq!(decode(&escrow), Some(Message::Escrow(7, pages.clone())));
        assert_eq!(decode(&escrow[..11]), None, "an escrow cut inside its count");
        assert_eq!(decode(b"DCHR\x05\0\0\0"), Some(Message::Release(5)));
        assert_eq!(decode(b"DCHU\x07\x01\0\0\0\0\0\0"), Some(Message::ReleaseFilesystem(0x107)));
        assert_eq!(decode(b"DCHU\x07\x01\0"), None, "a device number cut short");
        assert_eq!(decode(b"DCHP"), Some(Message::Sync));
        assert_eq!(decode(b"DCHR\x05\0\0"), None, "a release cut short");
        assert_eq!(decode(b"DCHX\x05\0\0\0\x1c\0\0\0"), Some(Message::Error(5, libc::ENOSPC)));
        assert_eq!(decode(b"DCHX\x05\0\0\0\x1c\0\0"), None, "an error cut short");
        assert_eq!(encode(FILE, None, &vec![0..1; MAX_RANGES + 1]), None);
        assert_eq!(decode(end_message()), Some(Message::End));
        assert_eq!(decode(&m[..m.len() - 1]), None, "cut short");
        let mut backwards = m.clone();
        backwards[8..16].copy_from_slice(&5u64.to_le_bytes());
        assert_eq!(decode(&backwards), None, "a range ending before it starts");
        let mut other = m.clone();
        other[..4].copy_from_slice(b"XXXX");
        assert_eq!(decode(&other), None);
        assert_eq!(decode(b""), None);
        assert_eq!(decode_reply(&reply(17)), Some(17));
        assert_eq!(decode_reply(b"12345"), None);
    }
}
