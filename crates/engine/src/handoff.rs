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

use std::ops::Range;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;

use crate::file::FileState;

/// The environment variable that names the receiver's socket (an abstract
/// Unix socket name).
pub const ENV: &str = "DONTCACHE_HANDOFF";

/// The most ranges one file's message carries (16 bytes each): a file whose
/// droppable pages are more scattered is finished by its own process.
pub const MAX_RANGES: usize = 4096;

/// The largest message, for the receiver's buffer.
pub const MAX_MESSAGE: usize = 8 + 16 * MAX_RANGES;

const FILE: &[u8; 4] = b"DCHF";
const END: &[u8; 4] = b"DCHE";

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Keeps the closed files of this process findable for `unfinished_files`
/// from now on (the shim calls it where `ENV` is set; it costs a lock and a
/// list entry per closed file).
pub fn enable() {
    ENABLED.store(true, Release);
}

pub(crate) fn enabled() -> bool {
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
        let pages = self.0.droppable_touched();
        if pages.len() > MAX_RANGES {
            return None;
        }
        let mut m = Vec::with_capacity(8 + 16 * pages.len());
        m.extend_from_slice(FILE);
        m.extend_from_slice(&(pages.len() as u32).to_le_bytes());
        for r in pages {
            m.extend_from_slice(&r.start.to_le_bytes());
            m.extend_from_slice(&r.end.to_le_bytes());
        }
        Some(m)
    }
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
    /// A file (its descriptor came with it) and the pages to drop of it.
    File(Vec<Range<u64>>),
    /// The sender is done and waits for the count (`reply`).
    End,
}

/// Reads a message; `None` for anything malformed.
pub fn decode(m: &[u8]) -> Option<Message> {
    if m == END {
        return Some(Message::End);
    }
    let (head, rest) = m.split_at_checked(8)?;
    let count = u32::from_le_bytes(head[4..8].try_into().ok()?) as usize;
    if &head[..4] != FILE || count > MAX_RANGES || rest.len() != 16 * count {
        return None;
    }
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or_default());
    let pages: Vec<Range<u64>> = rest.chunks_exact(16).map(|c| word(&c[..8])..word(&c[8..])).collect();
    pages.iter().all(|r| r.start <= r.end).then_some(Message::File(pages))
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
        assert_eq!(decode(&m), Some(Message::File(pages)));
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
