//! The layer file behind an overlay's file, through which the library
//! asks the cache, writes back and drops (the overlay's own file has no
//! pages of its own).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::handle::{Described, OpenedAs};
use crate::own::OwnFd;

/// The layer file of `fd`, a file on the overlay `layers` that
/// `described` says: the file at the same path in the topmost layer that
/// has one, as overlayfs itself finds it. In the upper directory that is
/// the file (a file opened for writing is there, copied up if it came from
/// below, and the upper tree mirrors the overlay's names); in a lower one
/// only if it holds the same inode (overlayfs reports a lower file's own
/// inode number when all layers are on one filesystem, as Docker's overlay2
/// has them). Paths are followed below the layer without symlinks or `..`,
/// so they cannot lead out of it. Opened read-only, which is all that
/// `cachestat`, `sync_file_range` and `fadvise` need. `None` when no layer
/// file is found to be that one (a lower file below a renamed directory,
/// or with layers on several filesystems; a file deleted since).
///
/// The path the file was opened by is tried first, in the upper directory
/// and for the same inode only (a copied-up file keeps its lower file's
/// number, so that one must not be taken for it); the descriptor's path
/// from /proc (6 us an open: `tar -xf` of 50,000 files into an overlay
/// took 3.75 s with it, 3.41 s without) only when that fails.
pub(super) fn layer_file(
    fd: BorrowedFd<'_>,
    described: &Described<'_>,
    layers: &dc_sys::OverlayLayers,
) -> Option<OwnFd> {
    if layers.upper.is_none() && layers.lower.is_empty() {
        return None;
    }
    let st = &described.stat;
    // The layer's file at `rel`: Err when the layer has none there.
    let open = |layer: &PathBuf, rel: &Path, same_inode: bool| -> io::Result<Option<OwnFd>> {
        crate::own::making(|| layer_file_at(&layer.join(rel), st, same_inode))
    };
    let upper = layers.upper.as_ref();
    let opened = described.opened_as.and_then(|o| below(&layers.point, &opened_path(o)?));
    if let Some(f) = opened.and_then(|rel| open(upper?, &rel, true).ok().flatten()) {
        return Some(f);
    }
    let rel = below(&layers.point, &dc_sys::fd_path(fd).ok()?)?;
    // A layer that has the name hides the ones below it; any failure but
    // "not there" ends the search.
    for (layer, same_inode) in upper.map(|u| (u, false)).into_iter().chain(layers.lower.iter().map(|l| (l, true))) {
        match open(layer, &rel, same_inode) {
            Ok(found) => return found,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(_) => return None,
        }
    }
    None
}

/// The file at `path` in a layer, if it is the overlay file `st` (the same
/// size, and with `same_inode` the same inode): Err when there is none.
fn layer_file_at(path: &Path, st: &dc_sys::FileStat, same_inode: bool) -> io::Result<Option<OwnFd>> {
    let f = dc_sys::open_without_symlinks(path)?;
    let real = dc_sys::fstat(f.as_raw_fd())?;
    // Never the overlay's own file again (its st_dev is the overlay's).
    let layer = real.dev != st.dev && real.is_regular();
    let same = layer && real.size == st.size && (!same_inode || real.ino == st.ino);
    // Held while the file is: numbered with the engine's other
    // descriptors, out of the program's way.
    Ok(same.then(|| crate::own::move_high(f)))
}

/// The absolute path `opened` names: absolute already, or relative to the
/// working directory or to a directory whose path is known.
fn opened_path(opened: OpenedAs<'_>) -> Option<PathBuf> {
    if opened.path.is_absolute() {
        return Some(opened.path.to_path_buf());
    }
    if opened.dir == libc::AT_FDCWD {
        return std::env::current_dir().ok().map(|cwd| cwd.join(opened.path));
    }
    Some(dir_path(opened.dir)?.join(opened.path))
}

/// The path of the directory open as `dir`, as /proc last named it for
/// that directory (by device and inode: programs such as tar open every
/// file relative to one directory). A directory renamed since gives a
/// stale path, which the caller's inode check turns down. The list is only
/// ever tried, never waited for: a child forked while another thread held
/// it would wait for good.
fn dir_path(dir: libc::c_int) -> Option<PathBuf> {
    static NAMED: Mutex<Vec<((u64, u64), PathBuf)>> = Mutex::new(Vec::new());
    const REMEMBERED: usize = 16;
    let st = dc_sys::fstat(dir).ok()?;
    let key = (st.dev, st.ino);
    if let Some((_, p)) = NAMED.try_lock().ok()?.iter().find(|(k, _)| *k == key) {
        return Some(p.clone());
    }
    // SAFETY: `dir` is open for the length of this call (the caller's
    // open just resolved a path against it).
    let path = dc_sys::fd_path(unsafe { BorrowedFd::borrow_raw(dir) }).ok()?;
    if let Ok(mut named) = NAMED.try_lock() {
        if named.len() == REMEMBERED {
            named.remove(0);
        }
        named.push((key, path.clone()));
    }
    Some(path)
}

/// `path` below `point`, as names only: no `..`, which could lead out of
/// a layer.
fn below(point: &Path, path: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(point).ok()?;
    rel.components().all(|c| matches!(c, std::path::Component::Normal(_))).then(|| rel.to_path_buf())
}
