//! One job instance's thread: open, wait on the barrier, run the I/O loop
//! with timing, then measure cache residency, verify and report.
//!
//! The loop does no allocation and no syscalls beyond the I/O itself and
//! the clock reads that timing needs; everything else (log lines, samples)
//! is a few integer operations per completion.

mod cpuio;
mod depth_search;
mod exec;
mod io_loop;

use io_loop::io_loop;

use crate::contents::Contents;
use crate::engine::{
    Dir, E4defragEngine, Engine, FallocEngine, FileOpEngine, Immediate, LibaioEngine, MmapEngine, NfsEngine, NfsTarget,
    NullEngine, Op, PageFaultEngine, PosixAioEngine, RwFlags, SyncEngine, TruncateEngine, UringEngine,
};
use crate::iolog::{IologWriter, Replay};
use crate::logs::IntervalLogs;
use crate::pace::Pace;
use crate::plan::Instance;
use crate::prepare::FileSetup;
use crate::progress::Counter;
use crate::random::fill_random;
use crate::side::Side;
use crate::stats::{DirStats, Latency};
use crate::steady::SteadyReport;
use crate::verify::{self, Whose, Writes};
use crate::verify_state::{state_file, written_runs, VerifyState};
use dc_jobfile::{Direction, EngineKind, ExitWhat, JobSpec};
use dc_sys::{Advice, AlignedBuf, AnonMap, CacheStat, ThreadCpu, RWF_ATOMIC, RWF_DONTCACHE};
use dc_vocab::Mode;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Why a job stopped early.
#[derive(Debug, Clone)]
pub struct Failure {
    /// errno (fio's `error` field); EILSEQ for verify mismatches, as in fio.
    pub errno: i32,
    pub offset: Option<u64>,
    pub message: String,
}

/// What a worker hands back.
#[derive(Debug, Clone, Default)]
pub struct InstanceResult {
    pub read: Option<DirStats>,
    pub write: Option<DirStats>,
    pub trim: Option<DirStats>,
    /// fsync/fdatasync latencies (fsync=/fdatasync=).
    pub sync: Latency,
    pub runtime_ns: u64,
    pub cpu: ThreadCpu,
    pub failure: Option<Failure>,
    /// Residency of the file right after the timed part.
    pub cache: Option<CacheStat>,
    pub file_pages: u64,
    pub mode: Option<Mode>,
    pub fallback_note: Option<String>,
    /// CLOCK_MONOTONIC and CLOCK_REALTIME when statistics started (ns).
    pub start_monotonic_ns: u64,
    pub start_realtime_ns: u64,
    pub log_paths: Vec<PathBuf>,
    /// Depths in flight and batch sizes, as fio's "IO depths" lines count them.
    pub depths: Depths,
    pub verified_blocks: u64,
    /// Errors `continue_on_error` let pass, and the first one's errno.
    pub errors_passed: u64,
    pub first_error: i32,
    /// `steadystate`: whether and how the rate settled.
    pub steady: Option<SteadyReport>,
    /// The depth the job ended at: `latency_target`'s finding, else `iodepth`.
    pub latency_depth: u32,
}

impl InstanceResult {
    /// An error `continue_on_error` lets pass: counted, its errno kept if it
    /// is the first, and printed under `error_dump`.
    fn pass_error(&mut self, job: &JobSpec, errno: i32, message: &str) {
        if job.error_dump {
            eprintln!("dcload: {message} (continue_on_error: counted, the job goes on)");
        }
        self.errors_passed += 1;
        if self.errors_passed == 1 {
            self.first_error = errno;
        }
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    dc_sys::clock_time(clock).map_or(0, |(s, ns)| s as u64 * 1_000_000_000 + u64::from(ns))
}

/// fio's three depth distributions: I/Os by the in-flight depth they were
/// submitted into (buckets 1, 2, 4, 8, 16, 32, >=64), and submit and reap
/// calls by how many I/Os each handed over or took back (buckets 0, 4, 8,
/// 16, 32, 64, >=64: "up to").
#[derive(Debug, Clone, Copy, Default)]
pub struct Depths {
    pub levels: [u64; 7],
    pub submits: [u64; 7],
    pub completes: [u64; 7],
}

impl Depths {
    pub fn add(&mut self, other: &Depths) {
        let pairs = [
            (&mut self.levels, &other.levels),
            (&mut self.submits, &other.submits),
            (&mut self.completes, &other.completes),
        ];
        for (mine, theirs) in pairs {
            for (x, y) in mine.iter_mut().zip(theirs) {
                *x += y;
            }
        }
    }
}

/// The bucket of a submit or reap call that moved `n` I/Os: up to 0, 4, 8,
/// 16, 32, 64, more.
fn batch_bucket(n: usize) -> usize {
    bucket(n, [0, 4, 8, 16, 32, 64])
}

/// The bucket of an I/O submitted at in-flight depth `depth`: 1, 2-3, 4-7,
/// 8-15, 16-31, 32-63, more.
fn depth_bucket(depth: usize) -> usize {
    bucket(depth, [1, 3, 7, 15, 31, 63])
}

/// The first of fio's seven buckets whose upper bound `n` is within.
fn bucket(n: usize, upper: [usize; 6]) -> usize {
    upper.iter().position(|&b| n <= b).unwrap_or(6)
}

fn open_file(path: &Path, job: &JobSpec, mode: Mode) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    // A replayed log writes if it logged writes, whatever rw= says;
    // fallocate(2), falloc's reads too, needs a descriptor open for writing.
    let replay = job.read_iolog.is_some() && !job.rw.writes();
    if job.rw.writes() || replay || job.ioengine == EngineKind::Falloc {
        o.write(true);
    }
    if mode == Mode::Direct {
        o.custom_flags(libc::O_DIRECT);
    }
    match o.open(path) {
        // A read-only file can still replay a log of reads.
        Err(e) if replay && matches!(e.raw_os_error(), Some(libc::EACCES | libc::EROFS)) => o.write(false).open(path),
        r => r,
    }
}

/// Everything the I/O loop needs, built before the barrier.
struct Ctx<'a> {
    job: &'a JobSpec,
    inst: &'a Instance,
    setup: &'a FileSetup,
    engine: Box<dyn Engine>,
    /// The file for syncs, cachestat, short-write completion and verify;
    /// none for the null engine, which has no file.
    side: Option<Side>,
    logs: Option<IntervalLogs>,
    /// What verified blocks hold (written, then checked).
    content: verify::Content,
    /// `buffer_compress_percentage`, `dedupe_percentage`: written buffers
    /// refilled per write.
    contents: Option<Contents>,
    /// Rate caps and floors, flow share: joined before the barrier.
    pace: Pace,
    /// `verify_state_load`: only the blocks a write job recorded are checked.
    loaded: Option<VerifyState>,
    /// `write_iolog`: every I/O issued is recorded; `read_iolog`: the I/O
    /// comes from a log instead of the job's pattern.
    iolog: Option<IologWriter>,
    replay: Option<Replay>,
    mode: Mode,
    /// Where relative file names resolve (nrfiles opens files as it goes).
    cwd: PathBuf,
}

/// What a group's instances share.
pub struct Shared<'a> {
    /// Where interval logs are written.
    pub log_dir: &'a Path,
    /// Releases the group's instances together.
    pub barrier: &'a Barrier,
    /// Raised by a signal; instances drain their in-flight I/O and return.
    pub stop: &'a AtomicBool,
    /// Raised when an `exitall` job with `exit_what=stonewall` (or `all`)
    /// ends: every job of the wave stops.
    pub wave_stop: &'a AtomicBool,
    /// One per reporting group of the wave: raised when an `exitall` job of
    /// the group ends (`exit_what=group`, fio's default).
    pub group_stops: &'a BTreeMap<u32, AtomicBool>,
    /// Raised by `exit_what=all`: no later wave runs either.
    pub exit_all: &'a AtomicBool,
    /// The wave's instances still running, by job name (`wait_for`).
    pub running: &'a Running,
}

/// How many instances of each job of a wave have not ended yet: a job
/// with `wait_for` starts when its waitee's count is 0 (a waitee of an
/// earlier wave has none here). Counted by name, as fio matches waitees.
pub struct Running {
    left: Mutex<BTreeMap<String, usize>>,
    changed: Condvar,
    /// The jobs that do I/O (not `cpuio` or `exec`), for `exit_on_io_done`.
    io_jobs: Vec<String>,
}

impl Running {
    pub fn new(members: &[&Instance]) -> Running {
        let mut left = BTreeMap::new();
        let mut io_jobs = Vec::new();
        for m in members {
            *left.entry(m.job.name.clone()).or_insert(0) += 1;
            if !m.job.ioengine.does_no_io() && !io_jobs.contains(&m.job.name) {
                io_jobs.push(m.job.name.clone());
            }
        }
        Running { left: Mutex::new(left), changed: Condvar::new(), io_jobs }
    }

    /// Whether any instance of a job that does I/O is still running.
    pub fn io_running(&self) -> bool {
        let left = self.left.lock().unwrap_or_else(|p| p.into_inner());
        self.io_jobs.iter().any(|j| left.get(j).is_some_and(|&n| n > 0))
    }

    /// One instance of `job` has ended (however it ended).
    pub fn ended(&self, job: &str) {
        let mut left = self.left.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = left.get_mut(job) {
            *n = n.saturating_sub(1);
        }
        self.changed.notify_all();
    }

    /// Waits until no instance of `job` is running, or one of `stops` is raised.
    fn wait_until_ended(&self, job: &str, stops: [&AtomicBool; 3]) {
        let mut left = self.left.lock().unwrap_or_else(|p| p.into_inner());
        while left.get(job).is_some_and(|&n| n > 0) && !stops.iter().any(|s| s.load(Ordering::Relaxed)) {
            // Stops are flags, not notifications: look at them every 10 ms.
            left = self.changed.wait_timeout(left, Duration::from_millis(10)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

impl Shared<'_> {
    fn group_stop(&self, group: u32) -> &AtomicBool {
        &self.group_stops[&group]
    }

    /// An `exitall` job ended: stop what its `exit_what` names.
    fn exit_others(&self, inst: &Instance) {
        match inst.job.exit_what {
            ExitWhat::Group => self.group_stop(inst.group).store(true, Ordering::Relaxed),
            ExitWhat::Stonewall => self.wave_stop.store(true, Ordering::Relaxed),
            ExitWhat::All => self.stop_everything(),
        }
    }

    /// Every running job stops and no later one starts (`exit_what=all`,
    /// and `exitall_on_error` when a job failed).
    fn stop_everything(&self) {
        self.exit_all.store(true, Ordering::Relaxed);
        self.wave_stop.store(true, Ordering::Relaxed);
    }
}

/// Waits for the job's `wait_for` job and its `startdelay`; returns the
/// flags that stop it (a signal, its wave, its group).
fn start_when_due<'s>(inst: &Instance, shared: &'s Shared<'_>) -> [&'s AtomicBool; 3] {
    let job = &inst.job;
    let stops = [shared.stop, shared.wave_stop, shared.group_stop(inst.group)];
    if let Some(waitee) = &job.wait_for {
        shared.running.wait_until_ended(waitee, stops);
    }
    // A signal ends the delay at once, like the run.
    let until = std::time::Instant::now() + job.startdelay;
    while std::time::Instant::now() < until && !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep((until - std::time::Instant::now()).min(std::time::Duration::from_millis(10)));
    }
    stops
}

/// Run one instance; `progress` counts its bytes for the live display.
pub fn run(
    inst: &Instance,
    setup: &FileSetup,
    mode: Mode,
    fallback_note: Option<String>,
    shared: &Shared<'_>,
    progress: Option<&Counter>,
) -> InstanceResult {
    let job = &inst.job;
    let (log_dir, barrier) = (shared.log_dir, shared.barrier);
    let mut result = InstanceResult { mode: Some(mode), fallback_note, ..Default::default() };
    let set_up = || schedule_thread(inst).and_then(|()| build(inst, setup, mode, log_dir));
    // A job that waits for another opens its file once that one has ended,
    // as fio opens a job's files when it starts: a reader then finds the
    // file the other job created (over NFS nothing creates it beforehand).
    let early = job.wait_for.is_none().then(set_up);
    // Every instance waits on the barrier, even a failed one, so the others are not stranded.
    barrier.wait();
    let mut stops = None;
    let built = early.unwrap_or_else(|| {
        stops = Some(start_when_due(inst, shared));
        set_up()
    });
    let mut ctx = match built {
        Ok(ctx) => ctx,
        Err(f) => {
            result.failure = Some(f);
            if job.exitall {
                shared.exit_others(inst);
            }
            if job.exitall_on_error {
                shared.stop_everything();
            }
            return result;
        }
    };
    let stops = stops.unwrap_or_else(|| start_when_due(inst, shared));
    if job.ioengine == EngineKind::CpuIo {
        cpuio::burn(&job.cpu, job.runtime, stops, shared.running, &mut result);
        return result;
    }
    if job.ioengine == EngineKind::Exec {
        exec::run(&job.exec, &job.name, job.runtime, stops, &mut result);
        return result;
    }
    let (written, writes) = io_loop(&mut ctx, stops, progress, &mut result);
    keep_records(&mut ctx, log_dir, &written, &mut result);
    if job.exitall {
        shared.exit_others(inst);
    }
    result.cache = ctx.side.as_ref().and_then(Side::cachestat);
    result.file_pages = setup.size.div_ceil(dc_sys::page_size() as u64);
    // A diskless engine's reads have nothing to check: fio counts them as verified.
    if result.failure.is_none()
        && job.verify.is_some()
        && job.do_verify
        && matches!(job.rw.direction, Direction::Write | Direction::Mixed)
        && ctx.side.is_some()
    {
        verify_pass(&ctx, &written, writes.as_ref(), &mut result);
    }
    if let Some(logs) = &mut ctx.logs {
        result.log_paths = std::mem::take(&mut logs.paths);
    }
    // A verify mismatch found after the run counts as an error too.
    if job.exitall_on_error && result.failure.is_some() {
        shared.stop_everything();
    }
    result
}

/// After the job's I/O: its iolog closed and, with `verify_state_save`, the
/// pieces it wrote recorded with their seed; a failure of either is the job's.
fn keep_records(ctx: &mut Ctx<'_>, log_dir: &Path, written: &[u64], r: &mut InstanceResult) {
    let (inst, job) = (ctx.inst, ctx.job);
    if let Some(log) = ctx.iolog.take() {
        if let Err(e) = log.close() {
            r.failure.get_or_insert(fail_io(&inst.path, "writing the iolog", &e));
        }
    }
    if job.verify_state_save && job.rw.writes() {
        let seed = ctx.content.seed().unwrap_or(job.randseed);
        let state = VerifyState::new(&inst.path, job.verify_interval, inst.start(), seed, written);
        if let Err(e) = state.save(&state_file(log_dir, &job.name, inst.jobnum)) {
            r.failure.get_or_insert(fail_io(&inst.path, "saving the verify state", &e));
        }
    }
}

/// The job's `nice`, `prio`/`prioclass`/`priohint` and `cpus_allowed`,
/// applied to this instance's thread (with `cpus_allowed_policy=split`,
/// one CPU of the set per instance, in the order of their numbers).
fn schedule_thread(inst: &Instance) -> Result<(), Failure> {
    let job = &inst.job;
    let failed = |what: &str, e: std::io::Error| Failure {
        errno: e.raw_os_error().unwrap_or(libc::EINVAL),
        offset: None,
        message: format!("job '{}': {what}: {e}", job.name),
    };
    if let Some(n) = job.nice {
        dc_sys::set_thread_nice(n).map_err(|e| failed(&format!("nice={n}"), e))?;
    }
    if let Some(p) = job.ioprio {
        dc_sys::ioprio_set_thread(p)
            .map_err(|e| failed(&format!("I/O priority class {} level {}", p >> 13, p & 7), e))?;
    }
    if let Some(cpus) = &job.cpus {
        let one = [cpus[(inst.number - 1) % cpus.len()]];
        let set = if job.cpus_split { &one[..] } else { cpus };
        dc_sys::set_thread_affinity(set).map_err(|e| failed(&format!("CPUs {set:?}"), e))?;
    }
    Ok(())
}

/// `page_fault`: anonymous memory of the job's span, untouched until its I/O.
fn page_fault_engine(setup: &FileSetup, region: AlignedBuf, bs: usize) -> Result<Box<dyn Engine>, Failure> {
    let memory = AnonMap::new(setup.size as usize).map_err(|e| fail_io(&setup.path, "mapping its memory", &e))?;
    Ok(Box::new(PageFaultEngine::new(memory, region, bs)))
}

/// `e4defrag`: the donor is `donorname` beside the job's file (fio makes it
/// in `directory=`, which is where the file is unless `filename=` points
/// elsewhere; ext4 moves blocks only between files of one filesystem),
/// allocated over the instance's span unless `inplace`.
fn e4defrag_engine(
    file: File,
    inst: &Instance,
    setup: &FileSetup,
    region: AlignedBuf,
) -> Result<Box<dyn Engine>, Failure> {
    let job = &*inst.job;
    let name = job.donorname.as_deref().expect("the job check asks for donorname with e4defrag");
    let donor = inst.path.parent().unwrap_or(Path::new("")).join(name);
    let span = (inst.start(), setup.size.saturating_sub(inst.start()));
    let engine = E4defragEngine::new(file, &donor, job.inplace, span, region)
        .map_err(|e| fail_io(&donor, "opening and allocating the donor file", &e))?;
    Ok(Box::new(Immediate::new(engine)))
}

fn fail_io(path: &Path, what: &str, e: &std::io::Error) -> Failure {
    Failure {
        errno: e.raw_os_error().unwrap_or(libc::EIO),
        offset: None,
        message: format!("{}: {what}: {e}", path.display()),
    }
}

fn build<'a>(inst: &'a Instance, setup: &'a FileSetup, mode: Mode, log_dir: &Path) -> Result<Ctx<'a>, Failure> {
    let job = &*inst.job;
    let path = &inst.path;
    let file = if job.ioengine.is_diskless() {
        None
    } else {
        let file = open_file(path, job, mode).map_err(|e| fail_io(path, "open", &e))?;
        if job.invalidate {
            // fio's invalidate=1: start from a cold cache so the run measures the device, not leftovers.
            let _ = dc_sys::fadvise(file.as_fd(), 0, 0, Advice::DontNeed);
        }
        let hint = if job.rw.random { Advice::Random } else { Advice::Sequential };
        let _ = dc_sys::fadvise(file.as_fd(), 0, 0, hint);
        Some(file)
    };
    let side = file.as_ref().map(File::try_clone).transpose().map_err(|e| fail_io(path, "dup", &e))?.map(Side::Local);
    let align = setup.dio.map_or(4096, |a| (a.memory as usize).max(4096));
    let depth = if job.ioengine.is_async() { job.iodepth as usize } else { 1 };
    // One region for all slots, like fio: a large allocation comes back as more
    // physically contiguous memory, so a 1M O_DIRECT buffer needs fewer segments and
    // the block layer can merge requests. Per-slot allocations were measured to give
    // 0.6 MB average requests on virtio where fio gets 1.3-2.8 MB (docs/benchmarks.md).
    let bs = job.bs as usize;
    let region = buffer_region(job, depth, align)?;
    let dontcache = if mode == Mode::Dontcache { RWF_DONTCACHE } else { 0 };
    let atomic = if job.atomic { RWF_ATOMIC } else { 0 };
    let rwf = RwFlags { read: dontcache, write: dontcache | atomic };
    let mut content = verify::Content::of(job, path, inst.number);
    // Every instance of every job its own buffers, as each of fio's threads.
    let seed = job.randseed.wrapping_add(inst.number as u64);
    let contents = Contents::new(&job.contents, seed, job.randseed, setup.size, job.bs);
    let loaded = if job.verify_state_load { Some(load_verify_state(inst, log_dir, &mut content)?) } else { None };
    let pace = Pace::new(job, job.randseed.wrapping_add(u64::from(inst.jobnum)));
    let (iolog, replay) = iologs(inst, log_dir)?;
    let (engine, side): (Box<dyn Engine>, Option<Side>) = match file {
        // A diskless engine: NFS (its own connection), or no I/O at all.
        None if job.ioengine == EngineKind::Nfs => {
            let url = job.nfs_url.as_deref().unwrap_or_default();
            let target = NfsTarget::open(url, &path.to_string_lossy(), job.rw.writes())
                .map_err(|e| fail_io(path, &format!("on {url}"), &e))?;
            let target = std::rc::Rc::new(std::cell::RefCell::new(target));
            (Box::new(NfsEngine::new(target.clone(), region, bs, depth)), Some(Side::Nfs(target)))
        }
        None if matches!(job.ioengine, EngineKind::FileOp(_)) => (file_op_engine(inst, log_dir, region)?, None),
        None if job.ioengine == EngineKind::PageFault => (page_fault_engine(setup, region, bs)?, None),
        None => (Box::new(NullEngine::new(region, bs, depth)), side),
        Some(file) if job.ioengine == EngineKind::E4defrag => (e4defrag_engine(file, inst, setup, region)?, side),
        Some(file) => {
            let engine = local_engine(file, job, mode, (region, bs, depth), rwf);
            (engine.map_err(|(what, e)| fail_io(path, what, &e))?, side)
        }
    };
    let logs = open_logs(inst, log_dir)?;
    Ok(Ctx {
        job,
        inst,
        setup,
        engine,
        side,
        logs,
        content,
        contents,
        pace,
        loaded,
        iolog,
        replay,
        mode,
        cwd: log_dir.to_path_buf(),
    })
}

/// `write_iolog`'s writer and `read_iolog`'s replay, if the job asks.
fn iologs(inst: &Instance, log_dir: &Path) -> Result<(Option<IologWriter>, Option<Replay>), Failure> {
    let job = &*inst.job;
    let iolog = match &job.write_iolog {
        // Each instance its own log when there are several, as each its own interval logs.
        Some(name) => {
            let name = if job.numjobs > 1 { format!("{name}.{}", inst.jobnum) } else { name.clone() };
            let at = log_dir.join(&name);
            Some(IologWriter::create(&at, &inst.path.to_string_lossy()).map_err(|e| fail_io(&at, "write_iolog", &e))?)
        }
        None => None,
    };
    let replay = match &job.read_iolog {
        Some(name) => Some(Replay::load(&log_dir.join(name)).map_err(|message| Failure {
            errno: libc::EINVAL,
            offset: None,
            message,
        })?),
        None => None,
    };
    Ok((iolog, replay))
}

/// The job's slot buffers, one region (see `build`): random bytes, or
/// `buffer_pattern` at each slot's start; verify fills them per I/O.
fn buffer_region(job: &JobSpec, depth: usize, align: usize) -> Result<AlignedBuf, Failure> {
    let bs = job.bs as usize;
    let mut region = AlignedBuf::zeroed(bs * depth, align).ok_or_else(|| Failure {
        errno: libc::ENOMEM,
        offset: None,
        message: format!("cannot allocate {depth} buffers of {bs} bytes"),
    })?;
    match &job.buffer_pattern {
        // Each slot's buffer starts with the pattern, as each of fio's does.
        Some(p) if job.verify.is_none() => region.as_mut_slice().chunks_mut(bs).for_each(|b| verify::tile(b, p)),
        _ if job.verify.is_none() => fill_random(region.as_mut_slice(), job.randseed),
        _ => {}
    }
    Ok(region)
}

/// `verify_state_load`: the writing job's saved state, whose seed the
/// blocks' expected contents then come from.
fn load_verify_state(inst: &Instance, log_dir: &Path, content: &mut verify::Content) -> Result<VerifyState, Failure> {
    let job = &*inst.job;
    let state = VerifyState::load(&state_file(log_dir, &job.name, inst.jobnum)).map_err(|message| Failure {
        errno: libc::ENOENT,
        offset: None,
        message,
    })?;
    if state.interval != job.verify_interval {
        return Err(Failure {
            errno: libc::EINVAL,
            offset: None,
            message: format!(
                "verify_state_load: the state was saved with verify pieces of {} bytes, this job's are {} \
                 (verify_interval, else bs): give the writing job's",
                state.interval, job.verify_interval
            ),
        });
    }
    // The pieces were generated from the writer's seed.
    content.set_seed(state.seed);
    Ok(state)
}

/// A file-operation engine over the job's files, with those that must
/// exist made now (before the barrier: not timed).
fn file_op_engine(inst: &Instance, cwd: &Path, region: AlignedBuf) -> Result<Box<dyn Engine>, Failure> {
    let job = &*inst.job;
    let EngineKind::FileOp(op) = job.ioengine else { unreachable!("called for file-operation engines") };
    let paths = crate::plan::file_op_paths(job, inst.jobnum, cwd);
    if let Some(dir) = paths[0].parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
        return Err(Failure {
            errno: libc::ENOENT,
            offset: None,
            message: format!("ioengine={}: directory {} does not exist; create it first", op.name(), dir.display()),
        });
    }
    let filesize = job.filesize.expect("the job check sets filesize for file-operation engines");
    FileOpEngine::prepare(op, &paths, filesize)
        .map_err(|e| fail_io(&paths[0], &format!("making the files {} works on", op.name()), &e))?;
    Ok(Box::new(Immediate::new(FileOpEngine::new(op, job.stat_type, paths, filesize, region))))
}

/// The engine of a job on a local file, in its mode; `Err` names the step
/// that failed. `region` holds `depth` buffers of `bs` bytes.
fn local_engine(
    file: File,
    job: &JobSpec,
    mode: Mode,
    (region, bs, depth): (AlignedBuf, usize, usize),
    rwf: RwFlags,
) -> Result<Box<dyn Engine>, (&'static str, std::io::Error)> {
    Ok(match job.ioengine {
        EngineKind::IoUring => Box::new(
            match mode {
                Mode::WriteBehind(policy) => UringEngine::write_behind(file, region, bs, depth, policy, job.ring),
                _ => UringEngine::new(file, region, (bs, depth), rwf, job.ring),
            }
            .map_err(|e| ("io_uring setup", e))?,
        ),
        EngineKind::Libaio => Box::new(
            match mode {
                Mode::WriteBehind(policy) => LibaioEngine::write_behind(file, region, bs, depth, policy),
                _ => LibaioEngine::new(file, region, bs, depth, rwf),
            }
            .map_err(|e| ("libaio setup", e))?,
        ),
        EngineKind::PosixAio => Box::new(match mode {
            Mode::WriteBehind(policy) => {
                PosixAioEngine::write_behind(file, region, bs, depth, policy).map_err(|e| ("libdontcache handle", e))?
            }
            _ => PosixAioEngine::new(file, region, bs, depth),
        }),
        EngineKind::Ftruncate => Box::new(Immediate::new(TruncateEngine::new(file, region))),
        EngineKind::Falloc => Box::new(Immediate::new(FallocEngine::new(file, region))),
        EngineKind::Mmap => {
            let writes = job.rw.writes();
            Box::new(Immediate::new(
                match mode {
                    Mode::WriteBehind(policy) => MmapEngine::write_behind(file, region, writes, policy),
                    _ => MmapEngine::new(file, region, writes),
                }
                .map_err(|e| ("mmap setup", e))?,
            ))
        }
        _ if matches!(mode, Mode::WriteBehind(_)) => {
            let Mode::WriteBehind(policy) = mode else { unreachable!() };
            Box::new(Immediate::new(
                SyncEngine::write_behind(file, region, policy).map_err(|e| ("libdontcache handle", e))?,
            ))
        }
        sync_kind => {
            let flags = (sync_kind == EngineKind::Pvsync2).then_some(rwf);
            Box::new(Immediate::new(SyncEngine::new(file, region, flags)))
        }
    })
}

fn open_logs(inst: &Instance, log_dir: &Path) -> Result<Option<IntervalLogs>, Failure> {
    IntervalLogs::open(log_dir, inst.number, &inst.job).map_err(|e| Failure {
        errno: e.raw_os_error().unwrap_or(libc::EIO),
        offset: None,
        message: e.to_string(),
    })
}

/// The bytes of file one instance works over.
fn span(ctx: &Ctx<'_>) -> u64 {
    if let Some(size) = ctx.job.size {
        return size;
    }
    let mut size = ctx.setup.size;
    if ctx.setup.filled && !ctx.job.fill_device {
        // After a fill_device job, one without size= runs over what it
        // wrote: the file's length now, as fio sizes a job when it starts.
        if let Some(Side::Local(f)) = &ctx.side {
            size = f.metadata().map_or(size, |m| m.len());
        }
    }
    size.saturating_sub(ctx.inst.start())
}

/// The timed part. Returns the bitmap of blocks written (only kept under verify).
fn io_failure(path: &Path, what: &str, op: Op, errno: i32) -> Failure {
    Failure {
        errno,
        offset: Some(op.offset),
        message: format!(
            "{}: {what} of {} bytes at offset {} failed: {} ({})",
            path.display(),
            op.len,
            op.offset,
            crate::error::errno_text(errno),
            crate::error::errno_name(errno)
        ),
    }
}

/// nrfiles: settle the current file and create file `k`.
fn next_file(ctx: &mut Ctx<'_>, k: u32) -> Result<(), (PathBuf, std::io::Error)> {
    let path = crate::plan::file_path(ctx.job, ctx.inst.jobnum, k, &ctx.cwd);
    let mut o = OpenOptions::new();
    o.read(true).write(true).create(true).truncate(true);
    if ctx.mode == Mode::Direct {
        o.custom_flags(libc::O_DIRECT);
    }
    let file = o.open(&path).map_err(|e| (path.clone(), e))?;
    let side = file.try_clone().map_err(|e| (path.clone(), e))?;
    ctx.engine.retarget(file).map_err(|e| (path.clone(), e))?;
    ctx.side = Some(Side::Local(side));
    Ok(())
}

/// Complete a short write of `op` from its slot buffer with plain pwrites.
fn finish_write(ctx: &mut Ctx<'_>, slot: usize, op: Op, mut done: u32) -> Result<(), i32> {
    // Only an engine with a file writes short.
    let Some(side) = &ctx.side else { return Err(libc::EIO) };
    while done < op.len {
        let off = op.offset + u64::from(done);
        let buf = &ctx.engine.buffer(slot)[done as usize..op.len as usize];
        match side.pwrite(buf, off) {
            Ok(0) => return Err(libc::ENOSPC),
            Ok(n) => done += n as u32,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.raw_os_error().unwrap_or(libc::EIO)),
        }
    }
    Ok(())
}

/// What the issue loop does next.
enum Next {
    Io(Dir, u64, u32),
    /// Not yet: a rate cap, a flow share or the replayed log's timing.
    Wait(std::time::Duration),
    /// The replayed log's sync (true: data only).
    Sync(bool),
    /// The replayed log is done.
    Stop,
}

/// An fsync (or fdatasync) of the job's file, timed and, under
/// `write_iolog`, logged.
fn logged_sync(ctx: &mut Ctx<'_>, data_only: bool, ramping: bool, r: &mut InstanceResult) -> std::io::Result<()> {
    let Some(side) = &ctx.side else { return Ok(()) };
    let t = Instant::now();
    side.sync(data_only)?;
    if !ramping {
        r.sync.record(t.elapsed().as_nanos() as u64);
    }
    if let Some(log) = &mut ctx.iolog {
        log.sync(data_only, t)?;
    }
    Ok(())
}

/// After a job that writes, with verify: read every written piece back and
/// check it, as many pieces a read as fit in bs: that each holds the job's
/// last write of it where `writes` numbered them (fio's header write
/// sequence check), else the job's own pieces where `checks_own_seed`
/// (fio's header seed check), else any writer's.
/// Not timed; reads through the job's own descriptor (so O_DIRECT reads the device).
fn verify_pass(ctx: &Ctx<'_>, written: &[u64], writes: Option<&Writes>, r: &mut InstanceResult) {
    let Some(side) = &ctx.side else { return };
    let job = ctx.job;
    let size = span(ctx);
    let align = ctx.setup.dio.map_or(4096, |a| (a.memory as usize).max(4096));
    let (Some(mut buf), mut scratch) = (AlignedBuf::zeroed(job.bs as usize, align), vec![0u8; job.bs as usize]) else {
        r.failure =
            Some(Failure { errno: libc::ENOMEM, offset: None, message: "cannot allocate a verify buffer".into() });
        return;
    };
    let interval = job.verify_interval;
    let whose = match writes {
        Some(w) => Whose::Last(w),
        None if job.checks_own_seed() => Whose::Own,
        None => Whose::Any,
    };
    for (first, count) in written_runs(written, job.bs / interval) {
        let len = (count * interval).min(size - first * interval) as usize;
        let offset = ctx.inst.start() + first * interval;
        let got = match side.pread(&mut buf.as_mut_slice()[..len], offset) {
            Ok(n) => n,
            Err(e) => {
                let op = Op { dir: Dir::Read, offset, len: len as u32, prio: job.ioprio.unwrap_or(0) };
                r.failure = Some(io_failure(&ctx.inst.path, "verify read", op, e.raw_os_error().unwrap_or(libc::EIO)));
                return;
            }
        };
        if got < len {
            r.failure = Some(Failure {
                errno: libc::EIO,
                offset: Some(offset),
                message: format!(
                    "{}: verify read: {got} of {len} bytes at offset {offset} (the file was truncated?)",
                    ctx.inst.path.display()
                ),
            });
            return;
        }
        if let Err(m) = ctx.content.check(&buf.as_slice()[..got], &mut scratch, offset, whose) {
            let message = format!("{}: {m}", ctx.inst.path.display());
            // continue_on_error=verify: counted, and the check goes on.
            if job.lets_pass(2, libc::EILSEQ) {
                r.pass_error(job, libc::EILSEQ, &message);
                continue;
            }
            r.failure = Some(Failure { errno: libc::EILSEQ, offset: Some(offset), message });
            return;
        }
        r.verified_blocks += 1;
    }
}
