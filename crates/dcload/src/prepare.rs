//! Before the timed part: resolve each file's size, create and lay files out
//! like fio does, and probe that the requested mode really works there.
//!
//! A mode that cannot run must fail here, loudly, with the filesystem, path
//! and kernel named: a benchmark that quietly ran buffered I/O under an
//! "uncached" label is worse than no benchmark.

use crate::error::{errno_name, DcError};
use crate::plan::Instance;
use crate::verify;
use dc_jobfile::{EngineKind, FallocateMode, JobSpec};
use dc_sys::{AlignedBuf, BlockDevice, DioAlignment, RWF_DONTCACHE};
use dc_vocab::Mode;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// What to do where `RWF_DONTCACHE` is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UncachedFallback {
    Fail,
    Buffered,
}

/// Everything known about one file before the timed part.
#[derive(Debug, Clone)]
pub struct FileSetup {
    pub path: PathBuf,
    /// Bytes the jobs use.
    pub size: u64,
    pub fs_type: String,
    pub device: Option<BlockDevice>,
    pub dio: Option<DioAlignment>,
    /// `Some(errno)` when an `RWF_DONTCACHE` probe was refused.
    pub uncached_refused: Option<i32>,
    /// The file was (re)written with data before the run (fio's "laying out").
    pub laid_out: bool,
    /// dcload created the file (so `unlink` may remove it).
    pub created: bool,
    /// A `fill_device` job writes it: how long it gets is known only when
    /// that job has ended.
    pub filled: bool,
}

impl FileSetup {
    /// The mode a job instance actually runs in, and the loud note when it
    /// differs from what was asked.
    pub fn effective_mode(&self, job: &JobSpec, fallback: UncachedFallback) -> (Mode, Option<String>) {
        let asked = job.mode();
        match (asked, self.uncached_refused, fallback) {
            (Mode::Dontcache, Some(errno), UncachedFallback::Buffered) => (
                Mode::Buffered,
                Some(format!(
                    "FALLBACK: RWF_DONTCACHE was refused ({}) by {} for {} on kernel {}; job '{}' ran BUFFERED I/O (--uncached-fallback=buffered)",
                    errno_name(errno),
                    self.fs_type,
                    self.path.display(),
                    dc_sys::kernel_release(),
                    job.name
                )),
            ),
            _ => (asked, None),
        }
    }
}

fn setup_err(path: &Path, what: &str, e: std::io::Error) -> DcError {
    DcError::Setup(format!("{}: {what}: {e}", path.display()))
}

/// Prepare every file the instances use. Returns the files by path.
/// `stop` (raised by a signal) ends laying out a file early.
pub fn prepare(
    instances: &[Instance],
    fallback: UncachedFallback,
    stop: &AtomicBool,
) -> Result<BTreeMap<PathBuf, FileSetup>, DcError> {
    let mut by_path: BTreeMap<PathBuf, Vec<&Instance>> = BTreeMap::new();
    for i in instances {
        by_path.entry(i.path.clone()).or_default().push(i);
    }
    let mut out = BTreeMap::new();
    for (path, users) in by_path {
        if users.iter().all(|u| u.job.ioengine.is_diskless()) {
            out.insert(path.clone(), diskless(&path, &users)?);
            continue;
        }
        let setup = prepare_file(&path, &users, stop)?;
        for u in &users {
            check_mode(&setup, &u.job, fallback)?;
        }
        out.insert(path, setup);
    }
    Ok(out)
}

/// The file a diskless engine's jobs (`null`, `nfs`) work over: only a size,
/// as in fio, and nothing on a local disk is created, opened or probed.
fn diskless(path: &Path, users: &[&Instance]) -> Result<FileSetup, DcError> {
    // cpuio and exec do no I/O at all: no size to run over.
    let no_io = users.iter().all(|u| u.job.ioengine.does_no_io());
    let size = users.iter().filter_map(|u| u.job.size.map(|s| u.start() + s)).max();
    let size = if no_io { Some(size.unwrap_or(0)) } else { size };
    let size = size.ok_or_else(|| {
        DcError::Usage(format!(
            "job '{}': ioengine={} needs size= or filesize= (the bytes its I/O runs over)",
            users[0].job.name,
            users[0].job.ioengine.name()
        ))
    })?;
    Ok(FileSetup {
        path: path.to_path_buf(),
        size,
        fs_type: if users[0].job.ioengine == EngineKind::Nfs { "nfs" } else { "none" }.into(),
        device: None,
        dio: None,
        uncached_refused: None,
        laid_out: false,
        created: false,
        filled: false,
    })
}

/// The directory a file is (or will be) in.
fn dir_of(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// The bytes a `fill_device` job without size= runs over: the free space of
/// the file's filesystem and the file's own bytes (a multiple of the
/// filesystem's block size; ENOSPC usually comes first anyway, as the
/// filesystem's own metadata grows too).
fn fill_space(path: &Path, existing: u64) -> Result<u64, DcError> {
    let dir = dir_of(path);
    let free = dc_sys::fs_free_bytes(dir).map_err(|e| setup_err(dir, "cannot read the free space (statfs)", e))?;
    Ok(free + existing)
}

/// `atomic=1`: the file must take writes of the job's block sizes
/// atomically (statx's atomic write units), else every write would fail
/// with EINVAL or EOPNOTSUPP; refused before the run, naming the units.
fn check_atomic(probe: &File, path: &Path, fs_type: &str, job: &JobSpec) -> Result<(), DcError> {
    let units = dc_sys::atomic_write_units(probe.as_fd()).map_err(|e| setup_err(path, "statx", e))?;
    let Some((min, max)) = units else {
        return Err(DcError::Setup(format!(
            "job '{}': atomic=1, but {} ({fs_type}) takes no atomic writes (statx gives no atomic write unit); \
             run it on a filesystem and device that do (XFS on Linux 6.16+, or ext4 with bigalloc on a device \
             with atomic writes), or drop atomic",
            job.name,
            path.display()
        )));
    };
    let sizes = job.block_sizes.distinct(job.bs);
    if let Some(bad) = sizes.iter().find(|&&bs| !bs.is_power_of_two() || bs < u64::from(min) || bs > u64::from(max)) {
        return Err(DcError::Setup(format!(
            "job '{}': atomic=1 with bs={bad}, but {} takes atomic writes of {min} to {max} bytes (powers of two)",
            job.name,
            path.display()
        )));
    }
    Ok(())
}

/// fio's `fallocate=`: reserves the file's blocks before the run; true
/// when they are. A file larger than the filesystem's free space is left
/// sparse instead (with a warning): ext4 and XFS keep what a failed
/// `fallocate` allocated, so trying would leave the disk full. Any other
/// failure (a filesystem without `fallocate`) also leaves it sparse, and
/// what it allocated is given back.
fn preallocate(f: &File, path: &Path, mode: FallocateMode, existing: u64, size: u64) -> Result<bool, DcError> {
    let flags = match mode {
        FallocateMode::Allocate => 0,
        FallocateMode::KeepSize => libc::FALLOC_FL_KEEP_SIZE,
        FallocateMode::None => return Ok(false),
    };
    let free = dc_sys::fs_free_bytes(dir_of(path)).unwrap_or(u64::MAX);
    if size.saturating_sub(existing) > free {
        eprintln!(
            "dcload: warning: {}: not preallocated (fallocate): its {size} bytes do not fit in the {free} bytes free \
             on its filesystem; the file is sparse, and writes may fail with ENOSPC",
            path.display()
        );
        return Ok(false);
    }
    if dc_sys::fallocate(f.as_fd(), flags, 0, size).is_ok() {
        return Ok(true);
    }
    // Blocks allocated before the failure sit past the old end (or inside a
    // size the call raised): cutting back to it frees them.
    f.set_len(existing).map_err(|e| setup_err(path, "cannot undo a failed fallocate", e))?;
    Ok(false)
}

/// One file before the timed part: created or checked, sized, laid out, probed.
// One piece: the steps depend on each other's findings in order (what exists
// decides the size, the size the layout, the layout what the probes see).
fn prepare_file(path: &Path, users: &[&Instance], stop: &AtomicBool) -> Result<FileSetup, DcError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            return Err(DcError::Setup(format!(
                "{}: directory {} does not exist; create it or point filename/directory elsewhere",
                path.display(),
                parent.display()
            )));
        }
    }
    let existing = std::fs::metadata(path).ok();
    if let Some(m) = &existing {
        if !m.is_file() {
            return Err(DcError::Setup(format!(
                "{}: not a regular file (dcload does I/O on regular files only)",
                path.display()
            )));
        }
    }
    if let (None, Some(u)) = (&existing, users.iter().find(|u| !u.job.allow_file_create)) {
        return Err(DcError::Setup(format!(
            "{}: does not exist, and job '{}' has allow_file_create=0; create the file first, or drop that option",
            path.display(),
            u.job.name
        )));
    }
    let existing_len = existing.as_ref().map(|m| m.len());
    // fill_device without size=: the filesystem's free space and what the
    // file holds already (fio writes until ENOSPC, over the file too).
    let filled = users.iter().any(|u| u.job.fill_device && u.job.rw.writes());
    let free = match users.iter().any(|u| u.job.fill_device && u.job.size.is_none()) {
        true => Some(fill_space(path, existing_len.unwrap_or(0))?),
        false => None,
    };
    // Each instance works over [start, start + size): the file holds them all.
    let asked = users
        .iter()
        .filter_map(|u| {
            // Whole blocks, so the last I/O does not wrap to the file's start.
            let largest = u.job.block_sizes.largest(u.job.bs).max(1);
            let fill = free.filter(|_| u.job.fill_device).map(|f| f - f % largest);
            u.job.size.or(fill).map(|s| u.start() + s)
        })
        .max();
    let size = match (asked, existing_len) {
        (Some(s), _) => s,
        (None, Some(len)) if len > 0 => len,
        _ => {
            return Err(DcError::Usage(format!(
                "job '{}': size= is needed because {} does not exist (or is empty)",
                users[0].job.name,
                path.display()
            )))
        }
    };
    let reads = users.iter().any(|u| u.job.rw.reads());
    let created = existing.is_none();
    let mut laid_out = false;
    // nrfiles: the first of the job's new files, created empty (the others
    // are created in the timed part); probed here like any other file.
    let new_files = users.iter().find(|u| u.job.nrfiles > 1).and_then(|u| u.job.filesize);
    let size = new_files.unwrap_or(size);
    if new_files.is_some() {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| setup_err(path, "cannot create", e))?;
    } else if filled {
        // Neither laid out nor preallocated: the filling job writes it, and
        // the jobs after it read what it wrote.
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| setup_err(path, "cannot create", e))?;
    } else if reads && existing_len.unwrap_or(0) < size {
        // Readers need data to read: write the whole file, as fio's layout does.
        lay_out(path, size, users, stop)?;
        laid_out = true;
    } else if existing_len.unwrap_or(0) < size {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| setup_err(path, "cannot create", e))?;
        let mode = users[0].job.fallocate;
        let allocated = preallocate(&f, path, mode, existing_len.unwrap_or(0), size)?;
        if !allocated || mode == FallocateMode::KeepSize {
            f.set_len(size).map_err(|e| setup_err(path, "cannot size file", e))?;
        }
    }
    let meta = std::fs::metadata(path).map_err(|e| setup_err(path, "cannot stat", e))?;
    let probe = File::open(path).map_err(|e| setup_err(path, "cannot open for probing", e))?;
    let dio = dc_sys::dio_alignment(probe.as_fd()).ok().flatten();
    let fs_type = dc_sys::fs_type_name(path).unwrap_or_else(|_| "unknown".into());
    let uncached_refused = if users.iter().any(|u| u.job.uncached) { probe_uncached(&probe) } else { None };
    for u in users.iter().filter(|u| u.job.atomic) {
        check_atomic(&probe, path, &fs_type, &u.job)?;
    }
    Ok(FileSetup {
        path: path.to_path_buf(),
        size,
        fs_type,
        device: dc_sys::block_device_of(meta.dev()),
        dio,
        uncached_refused,
        laid_out,
        created,
        filled,
    })
}

/// One `RWF_DONTCACHE` read of the first page. The kernel checks the flag
/// against the filesystem's `FOP_DONTCACHE` before looking at the file's
/// size, so this probes support without changing anything.
fn probe_uncached(f: &File) -> Option<i32> {
    let mut buf = AlignedBuf::zeroed(4096, 4096)?;
    match dc_sys::preadv2(f.as_fd(), buf.as_mut_slice(), 0, RWF_DONTCACHE) {
        Ok(_) => None,
        Err(e) => Some(e.raw_os_error().unwrap_or(libc::EOPNOTSUPP)),
    }
}

fn lay_out(path: &Path, size: u64, users: &[&Instance], stop: &AtomicBool) -> Result<(), DcError> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| setup_err(path, "cannot create", e))?;
    let job = &users[0].job;
    let verifier = users.iter().find(|u| u.job.verify.is_some());
    let verify_job = verifier.map(|u| &u.job);
    // Verified data is laid out in the verifying job's pieces so reads check out.
    let block = verify_job.map_or(1 << 20, |j| j.bs) as usize;
    let chunk_blocks = ((1usize << 20) / block).max(1);
    let mut buf = vec![0u8; block * chunk_blocks];
    if verify_job.is_none() {
        crate::random::fill_random(&mut buf, job.randseed);
    }
    let content = verifier.map(|u| verify::Content::of(&u.job, path, u.number));
    let mut off = 0u64;
    while off < size {
        if stop.load(Ordering::Relaxed) {
            return Err(DcError::Setup(format!("{}: interrupted while laying out the file", path.display())));
        }
        let n = (buf.len() as u64).min(size - off) as usize;
        if let Some(c) = &content {
            c.fill(&mut buf[..n], off, None);
        }
        let mut done = 0;
        while done < n {
            match dc_sys::pwrite(f.as_fd(), &buf[done..n], off + done as u64) {
                Ok(0) => {
                    return Err(DcError::Setup(format!(
                        "{}: laying out: write returned 0 at offset {}",
                        path.display(),
                        off + done as u64
                    )))
                }
                Ok(w) => done += w,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(DcError::Setup(format!(
                        "{}: laying out {size} bytes failed at offset {}: {e}",
                        path.display(),
                        off + done as u64
                    )))
                }
            }
        }
        off += n as u64;
    }
    f.sync_all().map_err(|e| setup_err(path, "fsync after laying out", e))?;
    Ok(())
}

fn check_mode(setup: &FileSetup, job: &JobSpec, fallback: UncachedFallback) -> Result<(), DcError> {
    if let Some(policy) = job.writebehind {
        if job.direct || job.uncached {
            return Err(DcError::Setup(format!(
                "job '{}': writebehind={policy} is buffered I/O through libdontcache; drop direct=1 and uncached=1 (use writebehind=kernel for RWF_DONTCACHE)",
                job.name
            )));
        }
    }
    match job.mode() {
        Mode::Dontcache => {
            if let (Some(errno), UncachedFallback::Fail) = (setup.uncached_refused, fallback) {
                return Err(DcError::Setup(format!(
                    "job '{}': RWF_DONTCACHE is refused ({}) by {} for {} on kernel {}: it needs Linux 6.14+ and a filesystem with FOP_DONTCACHE (ext4 from 6.17, xfs); use another filesystem, or pass --uncached-fallback=buffered to run buffered I/O and have the results say so",
                    job.name,
                    errno_name(errno),
                    setup.fs_type,
                    setup.path.display(),
                    dc_sys::kernel_release()
                )));
            }
        }
        Mode::Direct => {
            let (align, what) = match (setup.dio, &setup.device) {
                (Some(a), Some(d)) => (a.offset as u64, format!("the logical block size of {}", d.name)),
                (Some(a), None) => (a.offset as u64, format!("the O_DIRECT alignment of {}", setup.fs_type)),
                (None, Some(d)) => (d.logical_block_size as u64, format!("the logical block size of {}", d.name)),
                (None, None) => (512, "the usual O_DIRECT alignment".to_string()),
            };
            if let Some(bs) = job.block_sizes.distinct(job.bs).into_iter().find(|bs| bs % align != 0) {
                return Err(DcError::Setup(format!(
                    "job '{}': bs={bs} must be a multiple of {align}, {what}, for direct=1",
                    job.name
                )));
            }
            if let Some(ba) = job.blockalign.filter(|ba| ba % align != 0) {
                return Err(DcError::Setup(format!(
                    "job '{}': blockalign={ba} must be a multiple of {align}, {what}, for direct=1",
                    job.name
                )));
            }
            if let Err(e) = OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&setup.path) {
                return Err(DcError::Setup(format!(
                    "job '{}': O_DIRECT is not supported by {} for {}: {e}",
                    job.name,
                    setup.fs_type,
                    setup.path.display()
                )));
            }
        }
        Mode::Buffered | Mode::WriteBehind(_) => {}
    }
    Ok(())
}
