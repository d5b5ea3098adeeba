//! At exit, the files not finished yet go to the process that runs this
//! one under `dontcache run` (the engine's `handoff`), so the exit does not
//! wait for their writeback.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;
use std::time::Duration;

use dontcache::handoff;

/// How long an exiting process waits for the receiver's reply before it
/// waits for its files itself (a receiver stopped, or gone).
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);

static RECEIVER: OnceLock<Option<OsString>> = OnceLock::new();

/// Notes the receiver `dontcache run` named, if any, as the shim starts
/// (the program may change its environment later), and has the engine keep
/// its closed files findable for it.
pub fn note_receiver() {
    let name = RECEIVER.get_or_init(|| std::env::var_os(handoff::ENV).filter(|n| !n.is_empty()));
    if name.is_some() {
        handoff::enable();
    }
}

/// Hands every file not finished to the receiver; whether it took them
/// all (then the exit need not wait for them). Anything short of that, and
/// the caller waits for all of them itself. Runs inside the engine.
pub fn hand_off_unfinished() -> bool {
    let Some(Some(name)) = RECEIVER.get() else { return false };
    let files = handoff::unfinished_files();
    let taken = !files.is_empty() && send(name, &files);
    if !taken {
        handoff::resume_waits();
    }
    taken
}

/// Sends `files` and the end message; whether the reply counts them all.
fn send(name: &OsString, files: &[handoff::Unfinished]) -> bool {
    let Ok(sock) = dc_sys::seqpacket_connect(name.as_bytes()) else { return false };
    if dc_sys::set_socket_timeouts(sock.as_fd(), REPLY_TIMEOUT).is_err() {
        return false;
    }
    for f in files {
        let Some(m) = f.message() else { return false };
        if dc_sys::send_with_fd(sock.as_fd(), &m, Some(f.fd())).is_err() {
            return false;
        }
    }
    if dc_sys::send_with_fd(sock.as_fd(), handoff::end_message(), None).is_err() {
        return false;
    }
    let mut buf = [0u8; 4];
    let taken = dc_sys::recv_with_fd(sock.as_fd(), &mut buf).ok().and_then(|r| handoff::decode_reply(&buf[..r.len]));
    taken == Some(files.len() as u32)
}
