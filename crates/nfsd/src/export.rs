//! The exported directory as an NFSv3 file system: ids are inode numbers,
//! data goes through each direction's io mode.

use crate::modes::Modes;
use async_trait::async_trait;
use dc_sys::{AlignedBuf, RWF_DONTCACHE};
use dc_vocab::Mode;
use dontcache::{Handle, Options};
use fernfs::fs_util::{file_setattr, metadata_to_fattr3, path_setattr};
use fernfs::vfs::{Capabilities, DirEntry, NFSFileSystem, ReadDirResult};
use fernfs::xdr::nfs3::{self, fattr3, file::stable_how, fileid3, filename3, nfsstat3, sattr3};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard};
use std::time::Instant;

/// Open files kept between requests (nfsd's file cache); past this many the
/// least recently opened half is closed.
const OPEN_FILES_KEPT: usize = 1024;

/// A kept file no request used for this long is closed, as nfsd's file
/// cache closes NFSv3 files after about two seconds unused. Closing settles
/// its write-behind handle, whose idea of which pages were cached before it
/// came would otherwise outlive a harness's drop_caches between runs.
pub const IDLE_CLOSE: std::time::Duration = std::time::Duration::from_secs(2);

/// One exported file's descriptors, opened on first use and kept.
struct OpenFile {
    file: File,
    /// The `O_DIRECT` descriptor of the direct mode, opened on first use
    /// (None once the file system refused it).
    direct: OnceLock<Option<File>>,
    /// The libdontcache handle of the write-behind modes, on `file`, and the
    /// policy it was made with (a mode switch to another policy replaces it).
    behind: RwLock<Option<Handle>>,
    /// When a request last used the file (ms since the export's start).
    last_used: AtomicU64,
}

impl OpenFile {
    /// The write-behind handle for `policy`, made or remade as needed.
    /// Shared: READs and WRITEs of the file run through it at once (a
    /// handle takes concurrent calls, as the shim's do from many threads);
    /// only making, switching and settling it are exclusive.
    fn behind(&self, policy: dontcache::Policy) -> io::Result<RwLockReadGuard<'_, Option<Handle>>> {
        loop {
            let g = self.behind.read().unwrap_or_else(|e| e.into_inner());
            if g.as_ref().is_some_and(|h| h.options().policy == policy) {
                return Ok(g);
            }
            drop(g);
            let mut g = self.behind.write().unwrap_or_else(|e| e.into_inner());
            if g.as_ref().is_some_and(|h| h.options().policy != policy) {
                let (_, r, _) = g.take().expect("checked").release();
                r?;
            }
            if g.is_none() {
                let env = Options::from_env().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                *g = Some(Handle::adopt(self.file.as_raw_fd(), Options { policy, ..env })?);
            }
        }
    }

    /// Settles the write-behind handle, if any (writeback is handed to the
    /// flusher; the descriptor stays this file's).
    fn settle(&self) -> io::Result<()> {
        match self.behind.write().unwrap_or_else(|e| e.into_inner()).take() {
            Some(h) => h.release().1,
            None => Ok(()),
        }
    }
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        let _ = self.settle();
    }
}

pub struct Export {
    root: PathBuf,
    root_id: fileid3,
    generation: u64,
    paths: RwLock<HashMap<fileid3, PathBuf>>,
    open: Arc<Mutex<OpenFiles>>,
    data: Arc<DataPath>,
}

/// Kept descriptors by id, and when each was opened (a counter).
struct OpenFiles {
    by_id: HashMap<fileid3, Arc<OpenFile>>,
    opened: u64,
    stamps: HashMap<fileid3, u64>,
    /// What `OpenFile::last_used` counts from.
    epoch: Instant,
}

impl OpenFiles {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

/// Closes kept files: idle ones while serving, all at shutdown.
pub struct Settler(Arc<Mutex<OpenFiles>>);

impl Settler {
    /// Closes the kept files no request has used for `idle` (none in use).
    pub fn close_idle(&self, idle: std::time::Duration) -> io::Result<()> {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let cutoff = g.now_ms().saturating_sub(idle.as_millis() as u64);
        let stale: Vec<fileid3> = g
            .by_id
            .iter()
            .filter(|(_, f)| Arc::strong_count(f) == 1 && f.last_used.load(Ordering::Relaxed) <= cutoff)
            .map(|(id, _)| *id)
            .collect();
        let closing: Vec<Arc<OpenFile>> = stale
            .iter()
            .filter_map(|id| {
                g.stamps.remove(id);
                g.by_id.remove(id)
            })
            .collect();
        drop(g);
        let mut first = Ok(());
        for f in closing {
            let r = f.settle();
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    pub fn settle_all(&self) -> io::Result<()> {
        let files: Vec<Arc<OpenFile>> =
            self.0.lock().unwrap_or_else(|e| e.into_inner()).by_id.values().cloned().collect();
        let mut first = Ok(());
        for f in files {
            let r = f.settle();
            if first.is_ok() {
                first = r;
            }
        }
        first.and(dontcache::flush())
    }
}

/// What READ, WRITE and COMMIT need, shared with the blocking threads that
/// run them.
struct DataPath {
    root: PathBuf,
    modes: Arc<Modes>,
    /// Set once `RWF_DONTCACHE` was refused, so the fallback is logged once.
    dontcache_refused: AtomicBool,
}

fn stat_of(e: &io::Error) -> nfsstat3 {
    match e.raw_os_error().unwrap_or(libc::EIO) {
        libc::EPERM => nfsstat3::NFS3ERR_PERM,
        libc::ENOENT => nfsstat3::NFS3ERR_NOENT,
        libc::EACCES => nfsstat3::NFS3ERR_ACCES,
        libc::EEXIST => nfsstat3::NFS3ERR_EXIST,
        libc::EXDEV => nfsstat3::NFS3ERR_XDEV,
        libc::ENOTDIR => nfsstat3::NFS3ERR_NOTDIR,
        libc::EISDIR => nfsstat3::NFS3ERR_ISDIR,
        libc::EINVAL => nfsstat3::NFS3ERR_INVAL,
        libc::EFBIG => nfsstat3::NFS3ERR_FBIG,
        libc::ENOSPC => nfsstat3::NFS3ERR_NOSPC,
        libc::EROFS => nfsstat3::NFS3ERR_ROFS,
        libc::ENAMETOOLONG => nfsstat3::NFS3ERR_NAMETOOLONG,
        libc::ENOTEMPTY => nfsstat3::NFS3ERR_NOTEMPTY,
        libc::EDQUOT => nfsstat3::NFS3ERR_DQUOT,
        libc::ESTALE => nfsstat3::NFS3ERR_STALE,
        libc::EOPNOTSUPP => nfsstat3::NFS3ERR_NOTSUPP,
        _ => nfsstat3::NFS3ERR_IO,
    }
}

/// Runs blocking file work off the protocol's threads, as nfsd's threads
/// block on I/O while others serve other requests.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, nfsstat3> + Send + 'static) -> Result<T, nfsstat3> {
    tokio::task::spawn_blocking(f).await.unwrap_or(Err(nfsstat3::NFS3ERR_SERVERFAULT))
}

impl Export {
    pub fn new(root: &Path, modes: Arc<Modes>) -> io::Result<Export> {
        let root = root.canonicalize()?;
        let meta = std::fs::metadata(&root)?;
        if !meta.is_dir() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a directory", root.display())));
        }
        let generation = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_secs());
        let paths = RwLock::new(HashMap::from([(meta.ino(), root.clone())]));
        Ok(Export {
            data: Arc::new(DataPath { root: root.clone(), modes, dontcache_refused: AtomicBool::new(false) }),
            root,
            root_id: meta.ino(),
            generation,
            paths,
            open: Arc::new(Mutex::new(OpenFiles {
                by_id: HashMap::new(),
                opened: 0,
                stamps: HashMap::new(),
                epoch: Instant::now(),
            })),
        })
    }

    fn path(&self, id: fileid3) -> Result<PathBuf, nfsstat3> {
        self.paths.read().unwrap_or_else(|e| e.into_inner()).get(&id).cloned().ok_or(nfsstat3::NFS3ERR_STALE)
    }

    /// The path of `id` after checking it still names that inode.
    fn live_path(&self, id: fileid3) -> Result<(PathBuf, std::fs::Metadata), nfsstat3> {
        let p = self.path(id)?;
        let meta = std::fs::symlink_metadata(&p).map_err(|_| nfsstat3::NFS3ERR_STALE)?;
        if meta.ino() != id {
            return Err(nfsstat3::NFS3ERR_STALE);
        }
        Ok((p, meta))
    }

    fn child(&self, dirid: fileid3, name: &filename3) -> Result<PathBuf, nfsstat3> {
        let n = &name.0[..];
        if n.is_empty() || n.contains(&b'/') || n == b"." || n == b".." {
            return Err(nfsstat3::NFS3ERR_INVAL);
        }
        Ok(self.path(dirid)?.join(OsStr::from_bytes(n)))
    }

    /// Records `path` and returns its id and attributes.
    fn remember(&self, path: PathBuf) -> Result<(fileid3, fattr3), nfsstat3> {
        let meta = std::fs::symlink_metadata(&path).map_err(|e| stat_of(&e))?;
        let id = meta.ino();
        self.paths.write().unwrap_or_else(|e| e.into_inner()).insert(id, path);
        Ok((id, metadata_to_fattr3(id, &meta)))
    }

    fn attr(&self, id: fileid3) -> Result<fattr3, nfsstat3> {
        let (_, meta) = self.live_path(id)?;
        Ok(metadata_to_fattr3(id, &meta))
    }

    /// The kept descriptors of file `id`, opened read-write (read-only where
    /// that is all the file allows).
    fn open_file(&self, id: fileid3) -> Result<Arc<OpenFile>, nfsstat3> {
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let now = g.now_ms();
        if let Some(f) = g.by_id.get(&id) {
            f.last_used.store(now, Ordering::Relaxed);
            return Ok(f.clone());
        }
        let (path, meta) = self.live_path(id)?;
        if !meta.is_file() {
            return Err(if meta.is_dir() { nfsstat3::NFS3ERR_ISDIR } else { nfsstat3::NFS3ERR_INVAL });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .or_else(|_| File::open(&path))
            .map_err(|e| stat_of(&e))?;
        let f = Arc::new(OpenFile {
            file,
            direct: OnceLock::new(),
            behind: RwLock::new(None),
            last_used: AtomicU64::new(now),
        });
        if g.by_id.len() >= OPEN_FILES_KEPT {
            let mut by_age: Vec<(u64, fileid3)> = g.stamps.iter().map(|(id, t)| (*t, *id)).collect();
            by_age.sort_unstable();
            for (_, old) in by_age.into_iter().take(OPEN_FILES_KEPT / 2) {
                g.by_id.remove(&old);
                g.stamps.remove(&old);
            }
        }
        g.opened += 1;
        let stamp = g.opened;
        g.by_id.insert(id, f.clone());
        g.stamps.insert(id, stamp);
        Ok(f)
    }

    /// Forgets the kept descriptors of `id` (removed or replaced).
    fn forget_open(&self, id: fileid3) {
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        g.by_id.remove(&id);
        g.stamps.remove(&id);
    }

    /// What settles the export's write-behind at shutdown.
    pub fn settler(&self) -> Settler {
        Settler(self.open.clone())
    }
}

/// `RWF_DSYNC`/`RWF_SYNC` for a stable WRITE: the data (and for FILE_SYNC
/// the metadata) is on stable storage when the call returns.
fn sync_flags(stable: stable_how) -> i32 {
    match stable {
        stable_how::UNSTABLE => 0,
        stable_how::DATA_SYNC => libc::RWF_DSYNC,
        stable_how::FILE_SYNC => libc::RWF_SYNC,
    }
}

fn write_all(f: &File, data: &[u8], off: u64, flags: i32) -> io::Result<()> {
    let mut done = 0;
    while done < data.len() {
        let n = dc_sys::pwritev2(f.as_fd(), &data[done..], off + done as u64, flags)?;
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        done += n;
    }
    Ok(())
}

thread_local! {
    /// The direct mode's aligned buffer, one per I/O thread, reused: an
    /// aligned allocation per request fragmented malloc's arenas (the
    /// server grew to 0.9 GiB over 1 GiB of direct 1 MiB reads).
    static BOUNCE: RefCell<Option<AlignedBuf>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's aligned buffer, at least `len` bytes aligned
/// to `align` (made or remade as needed), and returns what `f` returns.
fn with_bounce<R>(len: usize, align: usize, f: impl FnOnce(&mut [u8]) -> io::Result<R>) -> io::Result<R> {
    BOUNCE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let fits =
            slot.as_ref().is_some_and(|b| b.len() >= len && (b.as_slice().as_ptr() as usize).is_multiple_of(align));
        if !fits {
            *slot = None;
            let size = len.next_power_of_two().max(1 << 20);
            let buf = AlignedBuf::zeroed(size, align.max(4096));
            *slot = Some(buf.ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?);
        }
        f(&mut slot.as_mut().expect("made above").as_mut_slice()[..len])
    })
}

/// The block size `O_DIRECT` needs on `f`'s file system.
fn direct_alignment(f: &File) -> (u64, usize) {
    match dc_sys::dio_alignment(f.as_fd()) {
        Ok(Some(a)) if a.offset > 0 => (u64::from(a.offset).max(512), (a.memory as usize).max(512)),
        _ => (4096, 4096),
    }
}

impl DataPath {
    fn note_refused(&self, e: &io::Error) {
        if !self.dontcache_refused.swap(true, Ordering::Relaxed) {
            eprintln!(
                "dcnfsd: RWF_DONTCACHE refused ({e}) on {} (kernel {}); dontcache falls back to buffered, as nfsd does",
                self.root.display(),
                dc_sys::kernel_release()
            );
        }
    }

    fn do_write(&self, of: &OpenFile, data: &[u8], off: u64, stable: stable_how) -> io::Result<()> {
        let flags = sync_flags(stable);
        match self.modes.write() {
            Mode::Buffered => write_all(&of.file, data, off, flags),
            Mode::Dontcache => match write_all(&of.file, data, off, flags | RWF_DONTCACHE) {
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    self.note_refused(&e);
                    write_all(&of.file, data, off, flags)
                }
                r => r,
            },
            Mode::Direct => self.write_direct(of, data, off, flags),
            Mode::WriteBehind(policy) => {
                let g = of.behind(policy)?;
                let h = g.as_ref().expect("made by behind()");
                let mut done = 0;
                while done < data.len() {
                    done += h.pwrite(&data[done..], off + done as u64)?;
                }
                match stable {
                    stable_how::UNSTABLE => Ok(()),
                    stable_how::DATA_SYNC => h.fdatasync(),
                    stable_how::FILE_SYNC => h.fsync(),
                }
            }
        }
    }

    /// nfsd's direct write: the unaligned head and tail buffered, the
    /// aligned middle `O_DIRECT` from an aligned copy; the buffered ends are
    /// written first so the direct write invalidates nothing it needs.
    fn write_direct(&self, of: &OpenFile, data: &[u8], off: u64, flags: i32) -> io::Result<()> {
        let Some(direct) = direct_file(of) else { return write_all(&of.file, data, off, flags) };
        let (align, mem) = direct_alignment(direct);
        let end = off + data.len() as u64;
        let (mid_start, mid_end) = (off.div_ceil(align) * align, end / align * align);
        if mid_start >= mid_end {
            return write_all(&of.file, data, off, flags);
        }
        let head = (mid_start - off) as usize;
        let tail = (end - mid_end) as usize;
        if head > 0 {
            write_all(&of.file, &data[..head], off, flags)?;
        }
        if tail > 0 {
            write_all(&of.file, &data[data.len() - tail..], mid_end, flags)?;
        }
        let middle = &data[head..data.len() - tail];
        with_bounce(middle.len(), mem, |buf| {
            buf.copy_from_slice(middle);
            write_all(direct, buf, mid_start, flags)
        })
    }

    fn do_read(&self, of: &OpenFile, off: u64, count: u32) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; count as usize];
        let n = match self.modes.read() {
            Mode::Buffered => read_full(&of.file, &mut buf, off, 0)?,
            Mode::Dontcache => match read_full(&of.file, &mut buf, off, RWF_DONTCACHE) {
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    self.note_refused(&e);
                    read_full(&of.file, &mut buf, off, 0)?
                }
                r => r?,
            },
            Mode::Direct => match direct_file(of) {
                Some(direct) => read_direct(direct, &mut buf, off)?,
                None => read_full(&of.file, &mut buf, off, 0)?,
            },
            Mode::WriteBehind(policy) => {
                let g = of.behind(policy)?;
                let h = g.as_ref().expect("made by behind()");
                let mut done = 0;
                while done < buf.len() {
                    let n = h.pread(&mut buf[done..], off + done as u64)?;
                    if n == 0 {
                        break;
                    }
                    done += n;
                }
                done
            }
        };
        buf.truncate(n);
        Ok(buf)
    }
}

fn direct_file(of: &OpenFile) -> Option<&File> {
    of.direct
        .get_or_init(|| {
            let path = dc_sys::fd_path(of.file.as_fd()).ok()?;
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)
                .or_else(|_| OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&path))
                .ok()
        })
        .as_ref()
}

fn read_full(f: &File, buf: &mut [u8], off: u64, flags: i32) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let n = dc_sys::preadv2(f.as_fd(), &mut buf[done..], off + done as u64, flags)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

/// nfsd's direct read: the aligned span covering the request, read
/// `O_DIRECT` into an aligned buffer, and the requested bytes out of it.
fn read_direct(direct: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    let (align, mem) = direct_alignment(direct);
    let start = off / align * align;
    let end = (off + buf.len() as u64).div_ceil(align) * align;
    with_bounce((end - start) as usize, mem, |span| {
        let got = read_full(direct, span, start, 0)?;
        let skip = (off - start) as usize;
        let n = got.saturating_sub(skip).min(buf.len());
        buf[..n].copy_from_slice(&span[skip..skip + n]);
        Ok(n)
    })
}

#[async_trait]
impl NFSFileSystem for Export {
    fn generation(&self) -> u64 {
        self.generation
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ReadWrite
    }

    fn root_dir(&self) -> fileid3 {
        self.root_id
    }

    async fn lookup(&self, dirid: fileid3, filename: &filename3) -> Result<fileid3, nfsstat3> {
        match &filename.0[..] {
            b"." => return Ok(dirid),
            b".." => {
                let p = self.path(dirid)?;
                if dirid == self.root_id {
                    return Ok(dirid);
                }
                return self.remember(p.parent().unwrap_or(&self.root).to_path_buf()).map(|(id, _)| id);
            }
            _ => {}
        }
        let (_, meta) = self.live_path(dirid)?;
        if !meta.is_dir() {
            return Err(nfsstat3::NFS3ERR_NOTDIR);
        }
        self.remember(self.child(dirid, filename)?).map(|(id, _)| id)
    }

    async fn getattr(&self, id: fileid3) -> Result<fattr3, nfsstat3> {
        self.attr(id)
    }

    async fn setattr(&self, id: fileid3, setattr: sattr3) -> Result<fattr3, nfsstat3> {
        let (path, _) = self.live_path(id)?;
        path_setattr(&path, &setattr).await?;
        self.attr(id)
    }

    async fn read(&self, id: fileid3, offset: u64, count: u32) -> Result<(Vec<u8>, bool), nfsstat3> {
        let of = self.open_file(id)?;
        let this = self.data.clone();
        blocking(move || {
            let data = this.do_read(&of, offset, count).map_err(|e| stat_of(&e))?;
            let size = of.file.metadata().map_err(|e| stat_of(&e))?.len();
            let eof = offset + data.len() as u64 >= size;
            if eof && matches!(this.modes.read(), Mode::WriteBehind(_)) {
                // A client that read to the end is done with the file, as a
                // program that closes it: its read pages are dropped now
                // rather than when the next drop-behind batch fills.
                of.settle().map_err(|e| stat_of(&e))?;
            }
            Ok((data, eof))
        })
        .await
    }

    async fn write(
        &self,
        id: fileid3,
        offset: u64,
        data: &[u8],
        stable: stable_how,
    ) -> Result<(fattr3, stable_how, nfs3::count3), nfsstat3> {
        let of = self.open_file(id)?;
        let this = self.data.clone();
        let data = data.to_vec();
        blocking(move || {
            this.do_write(&of, &data, offset, stable).map_err(|e| stat_of(&e))?;
            let meta = of.file.metadata().map_err(|e| stat_of(&e))?;
            Ok((metadata_to_fattr3(id, &meta), stable, data.len() as u32))
        })
        .await
    }

    async fn create(&self, dirid: fileid3, filename: &filename3, attr: sattr3) -> Result<(fileid3, fattr3), nfsstat3> {
        let path = self.child(dirid, filename)?;
        let mode = match attr.mode {
            nfs3::set_mode3::Some(m) => m,
            nfs3::set_mode3::None => 0o644,
        };
        let file =
            OpenOptions::new().read(true).write(true).create(true).mode(mode).open(&path).map_err(|e| stat_of(&e))?;
        file_setattr(&file, &attr).await?;
        let (id, fattr) = self.remember(path)?;
        self.forget_open(id);
        Ok((id, fattr))
    }

    async fn create_exclusive(
        &self,
        dirid: fileid3,
        filename: &filename3,
        _verifier: nfs3::createverf3,
    ) -> Result<fileid3, nfsstat3> {
        let path = self.child(dirid, filename)?;
        OpenOptions::new().write(true).create_new(true).mode(0o644).open(&path).map_err(|e| stat_of(&e))?;
        self.remember(path).map(|(id, _)| id)
    }

    async fn mkdir(&self, dirid: fileid3, dirname: &filename3) -> Result<(fileid3, fattr3), nfsstat3> {
        let path = self.child(dirid, dirname)?;
        std::fs::create_dir(&path).map_err(|e| stat_of(&e))?;
        self.remember(path)
    }

    async fn remove(&self, dirid: fileid3, filename: &filename3) -> Result<(), nfsstat3> {
        let path = self.child(dirid, filename)?;
        let meta = std::fs::symlink_metadata(&path).map_err(|e| stat_of(&e))?;
        if meta.is_dir() {
            std::fs::remove_dir(&path).map_err(|e| stat_of(&e))?;
        } else {
            std::fs::remove_file(&path).map_err(|e| stat_of(&e))?;
        }
        self.forget_open(meta.ino());
        if meta.nlink() <= 1 {
            self.paths.write().unwrap_or_else(|e| e.into_inner()).remove(&meta.ino());
        }
        Ok(())
    }

    async fn rename(
        &self,
        from_dirid: fileid3,
        from_filename: &filename3,
        to_dirid: fileid3,
        to_filename: &filename3,
    ) -> Result<(), nfsstat3> {
        let from = self.child(from_dirid, from_filename)?;
        let to = self.child(to_dirid, to_filename)?;
        if let Ok(replaced) = std::fs::symlink_metadata(&to) {
            self.forget_open(replaced.ino());
        }
        std::fs::rename(&from, &to).map_err(|e| stat_of(&e))?;
        let mut paths = self.paths.write().unwrap_or_else(|e| e.into_inner());
        for p in paths.values_mut() {
            if let Ok(rest) = p.strip_prefix(&from) {
                *p = if rest.as_os_str().is_empty() { to.clone() } else { to.join(rest) };
            }
        }
        Ok(())
    }

    async fn readdir(
        &self,
        dirid: fileid3,
        start_after: fileid3,
        max_entries: usize,
    ) -> Result<ReadDirResult, nfsstat3> {
        let (dir, meta) = self.live_path(dirid)?;
        if !meta.is_dir() {
            return Err(nfsstat3::NFS3ERR_NOTDIR);
        }
        let mut all: Vec<(fileid3, PathBuf)> = std::fs::read_dir(&dir)
            .map_err(|e| stat_of(&e))?
            .filter_map(|e| e.ok())
            .map(|e| (e.ino(), e.path()))
            .collect();
        all.sort_unstable();
        let from = if start_after == 0 {
            0
        } else {
            all.iter().position(|(id, _)| *id == start_after).map(|i| i + 1).ok_or(nfsstat3::NFS3ERR_BAD_COOKIE)?
        };
        let mut entries = Vec::new();
        for (_, path) in all.iter().skip(from).take(max_entries) {
            let Ok((fileid, attr)) = self.remember(path.clone()) else { continue };
            let name = path.file_name().map(|n| n.as_bytes().to_vec()).unwrap_or_default();
            entries.push(DirEntry { fileid, name: nfs3::nfsstring(name), attr });
        }
        let end = from + entries.len() >= all.len();
        Ok(ReadDirResult { entries, end })
    }

    async fn symlink(
        &self,
        dirid: fileid3,
        linkname: &filename3,
        symlink: &nfs3::nfspath3,
        _attr: &sattr3,
    ) -> Result<(fileid3, fattr3), nfsstat3> {
        let path = self.child(dirid, linkname)?;
        std::os::unix::fs::symlink(OsStr::from_bytes(&symlink.0), &path).map_err(|e| stat_of(&e))?;
        self.remember(path)
    }

    async fn readlink(&self, id: fileid3) -> Result<nfs3::nfspath3, nfsstat3> {
        let (path, _) = self.live_path(id)?;
        let target = std::fs::read_link(path).map_err(|e| stat_of(&e))?;
        Ok(nfs3::nfsstring(target.as_os_str().as_bytes().to_vec()))
    }

    async fn link(&self, file_id: fileid3, link_dir_id: fileid3, link_name: &filename3) -> Result<fattr3, nfsstat3> {
        let (from, _) = self.live_path(file_id)?;
        std::fs::hard_link(from, self.child(link_dir_id, link_name)?).map_err(|e| stat_of(&e))?;
        self.attr(file_id)
    }

    async fn mknod(
        &self,
        _dir_id: fileid3,
        _name: &filename3,
        _ftype: nfs3::ftype3,
        _specdata: nfs3::specdata3,
        _attrs: &sattr3,
    ) -> Result<(fileid3, fattr3), nfsstat3> {
        Err(nfsstat3::NFS3ERR_NOTSUPP)
    }

    /// nfsd's COMMIT: fsync, whose error (a writeback error since the last
    /// COMMIT on this file) goes back to the client.
    async fn commit(&self, file_id: fileid3, _offset: u64, _count: u32) -> Result<fattr3, nfsstat3> {
        let of = self.open_file(file_id)?;
        blocking(move || {
            let behind = of.behind.read().unwrap_or_else(|e| e.into_inner());
            match behind.as_ref() {
                Some(h) => h.fsync(),
                None => dc_sys::fsync(of.file.as_fd()),
            }
            .map_err(|e| stat_of(&e))?;
            drop(behind);
            let meta = of.file.metadata().map_err(|e| stat_of(&e))?;
            Ok(metadata_to_fattr3(file_id, &meta))
        })
        .await
    }
}
