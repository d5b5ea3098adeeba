//! One job instance's thread: open, wait on the barrier, run the I/O loop
//! with timing, then measure cache residency, verify and report.
//!
//! The loop does no allocation and no syscalls beyond the I/O itself and
//! the clock reads that timing needs; everything else (log lines, samples)
//! is a few integer operations per completion.

use crate::engine::{
    Completion, Dir, Engine, LibaioEngine, NfsEngine, NfsTarget, NullEngine, Op, SyncEngine, UringEngine,
};
use crate::iolog::{Action, IologWriter, Replay};
use crate::logs::{IntervalLogs, Sample};
use crate::offsets::{Offsets, Sizes};
use crate::pace::Pace;
use crate::plan::Instance;
use crate::prepare::FileSetup;
use crate::progress::Counter;
use crate::random::{fill_random, SplitMix};
use crate::side::Side;
use crate::stats::{DirStats, Latency};
use crate::verify;
use crate::verify_state::{state_file, VerifyState};
use dc_jobfile::{Direction, EngineKind, ExitWhat, JobSpec};
use dc_sys::{Advice, AlignedBuf, CacheStat, ThreadCpu, RWF_DONTCACHE};
use dc_vocab::Mode;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::Instant;

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
    /// I/Os submitted at in-flight depth 1, 2, 4, 8, 16, 32, >=64.
    pub depth_levels: [u64; 7],
    pub verified_blocks: u64,
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn depth_bucket(depth: usize) -> usize {
    match depth {
        0..=1 => 0,
        2..=3 => 1,
        4..=7 => 2,
        8..=15 => 3,
        16..=31 => 4,
        32..=63 => 5,
        _ => 6,
    }
}

fn open_file(path: &Path, job: &JobSpec, mode: Mode) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    // A replayed log writes if it logged writes, whatever rw= says.
    let replay = job.read_iolog.is_some() && !job.rw.writes();
    if job.rw.writes() || replay {
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
            ExitWhat::All => {
                self.exit_all.store(true, Ordering::Relaxed);
                self.wave_stop.store(true, Ordering::Relaxed);
            }
        }
    }
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
    let (log_dir, barrier, stop) = (shared.log_dir, shared.barrier, shared.stop);
    let mut result = InstanceResult { mode: Some(mode), fallback_note, ..Default::default() };
    let ctx = match build(inst, setup, mode, log_dir) {
        Ok(c) => Some(c),
        Err(f) => {
            result.failure = Some(f);
            None
        }
    };
    // Every instance waits on the barrier, even a failed one, so the others are not stranded.
    barrier.wait();
    let Some(mut ctx) = ctx else {
        if job.exitall {
            shared.exit_others(inst);
        }
        return result;
    };
    // A signal ends the delay at once, like the run.
    let until = std::time::Instant::now() + job.startdelay;
    while std::time::Instant::now() < until && !stop.load(Ordering::Relaxed) {
        std::thread::sleep((until - std::time::Instant::now()).min(std::time::Duration::from_millis(10)));
    }
    let written = io_loop(&mut ctx, [stop, shared.wave_stop, shared.group_stop(inst.group)], progress, &mut result);
    if let Some(log) = ctx.iolog.take() {
        if let Err(e) = log.close() {
            result.failure.get_or_insert(fail_io(&inst.path, "writing the iolog", &e));
        }
    }
    if job.verify_state_save && job.rw.writes() {
        let state = VerifyState::new(&inst.path, job.bs, inst.start(), job.randseed, &written);
        if let Err(e) = state.save(&state_file(log_dir, &job.name, inst.jobnum)) {
            result.failure.get_or_insert(fail_io(&inst.path, "saving the verify state", &e));
        }
    }
    if job.exitall {
        shared.exit_others(inst);
    }
    result.cache = ctx.side.as_ref().and_then(Side::cachestat);
    result.file_pages = setup.size.div_ceil(dc_sys::page_size() as u64);
    // A diskless engine's reads have nothing to check: fio counts them as verified.
    if result.failure.is_none()
        && job.verify.is_some()
        && job.do_verify
        && job.rw.direction == Direction::Write
        && ctx.side.is_some()
    {
        verify_pass(&ctx, &written, &mut result);
    }
    if let Some(logs) = &mut ctx.logs {
        result.log_paths = std::mem::take(&mut logs.paths);
    }
    result
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
    let rwf = if mode == Mode::Dontcache { RWF_DONTCACHE } else { 0 };
    let mut content = verify::Content::of(job, path);
    let loaded = if job.verify_state_load {
        let state = VerifyState::load(&state_file(log_dir, &job.name, inst.jobnum)).map_err(|message| Failure {
            errno: libc::ENOENT,
            offset: None,
            message,
        })?;
        if state.bs != job.bs {
            return Err(Failure {
                errno: libc::EINVAL,
                offset: None,
                message: format!(
                    "verify_state_load: the state was saved with bs={}, this job has bs={}: give the writing job's",
                    state.bs, job.bs
                ),
            });
        }
        // The blocks were generated from the writer's seed.
        if let verify::Content::Blocks { seed, .. } = &mut content {
            *seed = state.seed;
        }
        Some(state)
    } else {
        None
    };
    let pace = Pace::new(job, job.randseed.wrapping_add(u64::from(inst.jobnum)));
    let iolog = match &job.write_iolog {
        // Each instance its own log when there are several, as each its own interval logs.
        Some(name) => {
            let name = if job.numjobs > 1 { format!("{name}.{}", inst.jobnum) } else { name.clone() };
            let at = log_dir.join(&name);
            Some(IologWriter::create(&at, &path.to_string_lossy()).map_err(|e| fail_io(&at, "write_iolog", &e))?)
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
    let (engine, side): (Box<dyn Engine>, Option<Side>) = match file {
        // A diskless engine: NFS (its own connection), or no I/O at all.
        None if job.ioengine == EngineKind::Nfs => {
            let url = job.nfs_url.as_deref().unwrap_or_default();
            let target = NfsTarget::open(url, &path.to_string_lossy(), job.rw.writes())
                .map_err(|e| fail_io(path, &format!("on {url}"), &e))?;
            let target = std::rc::Rc::new(std::cell::RefCell::new(target));
            (Box::new(NfsEngine::new(target.clone(), region, bs, depth)), Some(Side::Nfs(target)))
        }
        None => (Box::new(NullEngine::new(region, bs, depth)), side),
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
        pace,
        loaded,
        iolog,
        replay,
        mode,
        cwd: log_dir.to_path_buf(),
    })
}

/// The engine of a job on a local file, in its mode; `Err` names the step that failed.
/// `region` holds `depth` buffers of `bs` bytes.
fn local_engine(
    file: File,
    job: &JobSpec,
    mode: Mode,
    (region, bs, depth): (AlignedBuf, usize, usize),
    rwf: i32,
) -> Result<Box<dyn Engine>, (&'static str, std::io::Error)> {
    Ok(match job.ioengine {
        EngineKind::IoUring => Box::new(
            match mode {
                Mode::WriteBehind(policy) => UringEngine::write_behind(file, region, bs, depth, policy),
                _ => UringEngine::new(file, region, bs, depth, rwf),
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
        _ if matches!(mode, Mode::WriteBehind(_)) => {
            let Mode::WriteBehind(policy) = mode else { unreachable!() };
            Box::new(SyncEngine::write_behind(file, region, policy).map_err(|e| ("libdontcache handle", e))?)
        }
        sync_kind => {
            let flags = (sync_kind == EngineKind::Pvsync2).then_some(rwf);
            Box::new(SyncEngine::new(file, region, flags))
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
    ctx.job.size.unwrap_or(ctx.setup.size.saturating_sub(ctx.inst.start()))
}

/// The timed part. Returns the bitmap of blocks written (only kept under verify).
fn io_loop(ctx: &mut Ctx<'_>, stop: [&AtomicBool; 3], progress: Option<&Counter>, r: &mut InstanceResult) -> Vec<u64> {
    let job = ctx.job;
    let path = ctx.inst.path.as_path();
    let depth = ctx.engine.depth();
    let sync_engine = ctx.engine.is_sync();
    let batch = job.iodepth_batch as usize;
    let file_size = span(ctx);
    let seed = job.randseed.wrapping_add(u64::from(ctx.inst.jobnum));
    let unit = job.blockalign.unwrap_or_else(|| job.block_sizes.smallest(job.bs));
    let mut offsets = if job.rw.random && !job.random_distribution.is_uniform() {
        let (dist, stride) = (&job.random_distribution, job.random_sequence_stride);
        Offsets::skewed(file_size, unit, job.norandommap, seed, dist, stride)
    } else {
        Offsets::new(file_size, unit, job.rw.random, job.norandommap, seed)
    }
    .with_modifier(job.hole, job.ios_per_offset, job.repeat_offset);
    if job.strided {
        offsets = offsets.with_zones(job.zone_size, job.zone_skip);
    }
    let mut sizes = Sizes::new(&job.block_sizes, job.bs, seed);
    let per_loop = job.io_bytes_per_loop().unwrap_or(file_size);
    let mut replay = ctx.replay.take();
    // A replay ends with its log (Next::Stop), whatever the job's size.
    let total =
        if job.time_based || replay.is_some() { u64::MAX } else { per_loop.saturating_mul(u64::from(job.loops)) };
    let mut mix = SplitMix::new(seed ^ 0xA11CE);
    let mut stats = [DirStats::default(), DirStats::default()];
    let mut written = if job.verify.is_some() && job.rw.writes() {
        vec![0u64; offsets.blocks().div_ceil(64) as usize]
    } else {
        Vec::new()
    };
    let mut scratch = if job.verify.is_some() { vec![0u8; job.bs as usize] } else { Vec::new() };

    let mut free: Vec<usize> = (0..depth).rev().collect();
    let mut ops = vec![Op { dir: Dir::Read, offset: 0, len: 0 }; depth];
    let t0 = Instant::now();
    let mut issue_at = vec![t0; depth];
    let mut submit_at = vec![t0; depth];
    let mut started: Vec<usize> = Vec::with_capacity(depth);
    let mut comps: Vec<Completion> = Vec::with_capacity(depth);

    let ramp_end = t0 + job.ramp_time;
    let mut ramping = !job.ramp_time.is_zero();
    // runtime counts from when statistics start (after the ramp), as in fio.
    let mut deadline = job.runtime.map(|d| ramp_end + d);
    let mut base = t0;
    r.start_monotonic_ns = clock_ns(libc::CLOCK_MONOTONIC);
    r.start_realtime_ns = clock_ns(libc::CLOCK_REALTIME);
    let mut cpu0 = dc_sys::thread_cpu().unwrap_or_default();
    let mut issued = 0u64;
    let mut ios_issued = 0u64;
    let mut inflight = 0usize;
    let mut writes_since_sync = 0u32;
    let mut stopping = false;
    let new_files = job.filesize.filter(|_| job.nrfiles > 1);
    let mut current_file = 0u64;

    loop {
        while !stopping && inflight < depth && issued < total {
            let Some(slot) = free.pop() else { break };
            // What to issue next: the replayed log's next action, or the job's own draw.
            let next = match replay.as_mut() {
                Some(rp) => match rp.peek() {
                    None => Next::Stop,
                    Some((due, _)) if !job.replay_no_stall && t0 + due > Instant::now() => {
                        Next::Wait((t0 + due).saturating_duration_since(Instant::now()))
                    }
                    Some((_, Action::Sync { data_only })) => Next::Sync(data_only),
                    Some((_, Action::Io { dir, offset, len })) => {
                        rp.advance();
                        Next::Io(dir, offset, len)
                    }
                },
                None if job.number_ios > 0 && ios_issued >= job.number_ios => Next::Stop,
                None => {
                    let dir = match job.rw.direction {
                        Direction::Read => Dir::Read,
                        Direction::Write => Dir::Write,
                        Direction::Mixed if mix.below(100) < u64::from(job.rwmixread) => Dir::Read,
                        Direction::Mixed => Dir::Write,
                    };
                    match ctx.pace.hold(dir, Instant::now()) {
                        // Held by a rate cap or a flow share.
                        Some(wait) => Next::Wait(wait),
                        None => {
                            let offset = offsets.next_offset();
                            // The last I/O of a size-bound job ends where its bytes do.
                            let len = sizes.next_size().min(file_size - offset).min(total - issued) as u32;
                            offsets.skip(u64::from(len).div_ceil(unit) - 1);
                            // nrfiles: the offset runs over all the job's files end to end;
                            // entering the next file creates it (in the timed part, as fs_mark).
                            let mut io_offset = ctx.inst.start() + offset;
                            if let Some(per_file) = new_files {
                                let k = offset / per_file;
                                if k != current_file {
                                    if let Err((p, e)) = next_file(ctx, k as u32) {
                                        r.failure = Some(fail_io(&p, "creating the next file", &e));
                                        free.push(slot);
                                        stopping = true;
                                        break;
                                    }
                                    current_file = k;
                                }
                                io_offset = offset % per_file;
                            }
                            Next::Io(dir, io_offset, len)
                        }
                    }
                }
            };
            let (dir, io_offset, len) = match next {
                Next::Io(dir, offset, len) => (dir, offset, len),
                Next::Stop => {
                    free.push(slot);
                    stopping = true;
                    break;
                }
                Next::Wait(wait) => {
                    // Reap what is in flight first, else wait (no longer than the runtime).
                    free.push(slot);
                    if inflight > 0 {
                        break;
                    }
                    let left = deadline.map_or(wait, |d| d.saturating_duration_since(Instant::now()));
                    std::thread::sleep(wait.min(left));
                    if deadline.is_some_and(|d| Instant::now() >= d) || stop.iter().any(|s| s.load(Ordering::Relaxed)) {
                        stopping = true;
                    }
                    continue;
                }
                Next::Sync(data_only) => {
                    // A logged sync covers the writes before it: those complete first.
                    free.push(slot);
                    if inflight > 0 {
                        break;
                    }
                    if let Err(e) = logged_sync(ctx, data_only, ramping, r) {
                        r.failure.get_or_insert(fail_io(path, "fsync", &e));
                        stopping = true;
                    }
                    replay.as_mut().expect("replaying").advance();
                    continue;
                }
            };
            if dir == Dir::Write && job.verify.is_some() {
                ctx.content.fill(&mut ctx.engine.buffer(slot)[..len as usize], io_offset);
            }
            let op = Op { dir, offset: io_offset, len };
            ops[slot] = op;
            issue_at[slot] = Instant::now();
            ctx.pace.issued(dir, u64::from(len), issue_at[slot]);
            if let Err(e) = ctx.engine.start(slot, op) {
                r.failure = Some(fail_io(path, "submitting I/O", &e));
                free.push(slot);
                stopping = true;
                break;
            }
            if let Some(log) = &mut ctx.iolog {
                if let Err(e) = log.io(dir, io_offset, len, issue_at[slot]) {
                    r.failure.get_or_insert(fail_io(path, "writing the iolog", &e));
                    stopping = true;
                }
            }
            inflight += 1;
            issued += u64::from(len);
            ios_issued += 1;
            started.push(slot);
            if sync_engine {
                break;
            }
            // fio submits every iodepth_batch_submit I/Os (default 1): an I/O waiting in the
            // queue for its batch would sit in the block plug, not at the device.
            if started.len() >= batch {
                if let Err(e) = submit_started(ctx.engine.as_mut(), &mut started, &mut submit_at, inflight, r) {
                    r.failure = Some(fail_io(path, "io_uring submit", &e));
                    stopping = true;
                }
            }
        }
        if inflight == 0 {
            break;
        }
        if let Err(e) = submit_started(ctx.engine.as_mut(), &mut started, &mut submit_at, inflight, r) {
            r.failure = Some(fail_io(path, "io_uring submit", &e));
            break;
        }
        if let Err(e) = ctx.engine.reap(1, &mut comps) {
            r.failure = Some(fail_io(path, "waiting for completions", &e));
            break;
        }
        let done = Instant::now();
        let now_ns = done.duration_since(base).as_nanos() as u64;
        for c in comps.drain(..) {
            free.push(c.slot);
            inflight -= 1;
            let op = ops[c.slot];
            let what = if op.dir == Dir::Read { "read" } else { "write" };
            let mut n = match c.result {
                Ok(n) => n,
                Err(errno) => {
                    r.failure.get_or_insert(io_failure(path, what, op, errno));
                    stopping = true;
                    continue;
                }
            };
            let short = n < op.len;
            if short && op.dir == Dir::Write {
                // A short write is the kernel saying "this much, then retry": finish it
                // so the real errno (ENOSPC, EIO) surfaces with its offset.
                match finish_write(ctx, c.slot, op, n) {
                    Ok(()) => n = op.len,
                    Err(errno) => {
                        r.failure.get_or_insert(io_failure(path, what, op, errno));
                        stopping = true;
                        continue;
                    }
                }
            } else if short {
                r.failure.get_or_insert(Failure {
                    errno: libc::EIO,
                    offset: Some(op.offset),
                    message: format!(
                        "{}: short read: {n} of {} bytes at offset {} (the file ends before size={file_size})",
                        path.display(),
                        op.len,
                        op.offset
                    ),
                });
                stopping = true;
                continue;
            }
            if let Some(p) = progress {
                p.add(u64::from(n));
            }
            let unrecorded = ctx.loaded.as_ref().is_some_and(|s| !s.holds(op.offset));
            if job.verify.is_some() && ctx.side.is_some() && !unrecorded {
                if op.dir == Dir::Read {
                    let got = &ctx.engine.buffer(c.slot)[..n as usize];
                    if let Err(m) = ctx.content.check(got, &mut scratch, op.offset) {
                        r.failure.get_or_insert(Failure {
                            errno: libc::EILSEQ,
                            offset: Some(op.offset),
                            message: format!("{}: {m}", path.display()),
                        });
                        stopping = true;
                        continue;
                    }
                    r.verified_blocks += 1;
                } else {
                    let b = (op.offset - ctx.inst.start()) / job.bs;
                    written[(b / 64) as usize] |= 1 << (b % 64);
                }
            }
            let syncs = job.fsync_every > 0 || job.fdatasync_every > 0;
            if op.dir == Dir::Write && syncs && ctx.side.is_some() {
                writes_since_sync += 1;
                let every = job.fsync_every.max(job.fdatasync_every);
                if writes_since_sync >= every {
                    writes_since_sync = 0;
                    if let Err(e) = logged_sync(ctx, job.fsync_every == 0, ramping, r) {
                        r.failure.get_or_insert(fail_io(path, "fsync", &e));
                        stopping = true;
                    }
                }
            }
            if let Err(m) = ctx.pace.completed(op.dir, u64::from(n), done, !ramping) {
                r.failure.get_or_insert(Failure {
                    errno: libc::ETIMEDOUT,
                    offset: None,
                    message: format!("{}: {m}", path.display()),
                });
                stopping = true;
            }
            if ramping {
                continue;
            }
            let lat = done.duration_since(issue_at[c.slot]).as_nanos() as u64;
            let (clat, slat) = if sync_engine {
                (lat, None)
            } else {
                let s = submit_at[c.slot].duration_since(issue_at[c.slot]).as_nanos() as u64;
                (done.duration_since(submit_at[c.slot]).as_nanos() as u64, Some(s))
            };
            let d = &mut stats[op.dir.log_code() as usize];
            d.lat.record(lat);
            d.clat.record(clat);
            if let Some(s) = slat {
                d.slat.record(s);
            }
            d.complete(now_ns, u64::from(n), short);
            if let Some(logs) = &mut ctx.logs {
                let sample = Sample {
                    now_ns,
                    dir: op.dir,
                    bytes: u64::from(n),
                    offset: op.offset,
                    lat_ns: lat,
                    clat_ns: clat,
                    slat_ns: slat,
                };
                if let Err(e) = logs.record(&sample) {
                    r.failure.get_or_insert(fail_io(path, "writing interval log", &e));
                    stopping = true;
                }
            }
        }
        if ramping && done >= ramp_end {
            // Statistics start now: everything before was warm-up.
            ramping = false;
            base = done;
            deadline = job.runtime.map(|d| done + d);
            stats = [DirStats::default(), DirStats::default()];
            r.sync = Latency::new();
            r.depth_levels = [0; 7];
            r.start_monotonic_ns = clock_ns(libc::CLOCK_MONOTONIC);
            r.start_realtime_ns = clock_ns(libc::CLOCK_REALTIME);
            cpu0 = dc_sys::thread_cpu().unwrap_or_default();
            if let Some(logs) = &mut ctx.logs {
                logs.reset();
            }
        }
        if deadline.is_some_and(|d| done >= d) || stop.iter().any(|s| s.load(Ordering::Relaxed)) {
            stopping = true;
        }
    }
    if ramping && r.failure.is_none() && !stop.iter().any(|s| s.load(Ordering::Relaxed)) {
        // A size-bound job that ended inside its ramp measured nothing: say
        // so rather than report zero I/O as a result. (Its length is not
        // known before it runs, so this cannot be refused up front.)
        r.failure = Some(Failure {
            errno: libc::EINVAL,
            offset: None,
            message: format!(
                "job '{}' ended during ramp_time={:?}, before any statistics were recorded; shorten ramp_time, \
                 or make the job time_based",
                job.name, job.ramp_time
            ),
        });
    }
    if r.failure.is_none() {
        // Write-behind settles here: its background writeback is part of
        // the cost, and an error it kept ends the job like any other.
        if let Err(e) = ctx.engine.finish() {
            r.failure = Some(fail_io(path, "write-behind writeback", &e));
        }
    }
    if job.end_fsync && job.rw.writes() && r.failure.is_none() {
        // Counted in the runtime, as fio does: the bandwidth then includes getting the data to disk.
        if let Some(Err(e)) = ctx.side.as_ref().map(|s| s.sync(false)) {
            r.failure = Some(fail_io(path, "end_fsync", &e));
        }
    }
    let end = Instant::now();
    r.runtime_ns = end.duration_since(base).as_nanos() as u64;
    r.cpu = dc_sys::thread_cpu().unwrap_or_default().since(&cpu0);
    if let Some(logs) = &mut ctx.logs {
        if let Err(e) = logs.finish(r.runtime_ns, !sync_engine) {
            r.failure.get_or_insert(fail_io(path, "writing interval log", &e));
        }
    }
    let [read, write] = stats;
    r.read = job.rw.reads().then_some(read);
    r.write = job.rw.writes().then_some(write);
    written
}

/// Hand the I/Os started since the last submit to the kernel and stamp their
/// submission time (the end of slat). Like fio's "IO depths", each counts at the
/// depth it was submitted into.
fn submit_started(
    engine: &mut dyn Engine,
    started: &mut Vec<usize>,
    submit_at: &mut [Instant],
    inflight: usize,
    r: &mut InstanceResult,
) -> std::io::Result<()> {
    if started.is_empty() {
        return Ok(());
    }
    r.depth_levels[depth_bucket(inflight)] += started.len() as u64;
    engine.submit()?;
    let now = Instant::now();
    for s in started.drain(..) {
        submit_at[s] = now;
    }
    Ok(())
}

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

/// After a write job with verify: read every written block back and check it.
/// Not timed; reads through the job's own descriptor (so O_DIRECT reads the device).
fn verify_pass(ctx: &Ctx<'_>, written: &[u64], r: &mut InstanceResult) {
    let Some(side) = &ctx.side else { return };
    let job = ctx.job;
    let size = span(ctx);
    let align = ctx.setup.dio.map_or(4096, |a| (a.memory as usize).max(4096));
    let (Some(mut buf), mut scratch) = (AlignedBuf::zeroed(job.bs as usize, align), vec![0u8; job.bs as usize]) else {
        r.failure =
            Some(Failure { errno: libc::ENOMEM, offset: None, message: "cannot allocate a verify buffer".into() });
        return;
    };
    for (w, bits) in written.iter().enumerate() {
        let mut bits = *bits;
        while bits != 0 {
            let b = w as u64 * 64 + u64::from(bits.trailing_zeros());
            bits &= bits - 1;
            let len = job.bs.min(size - b * job.bs) as usize;
            let offset = ctx.inst.start() + b * job.bs;
            let got = match side.pread(&mut buf.as_mut_slice()[..len], offset) {
                Ok(n) => n,
                Err(e) => {
                    let op = Op { dir: Dir::Read, offset, len: len as u32 };
                    r.failure =
                        Some(io_failure(&ctx.inst.path, "verify read", op, e.raw_os_error().unwrap_or(libc::EIO)));
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
            if let Err(m) = ctx.content.check(&buf.as_slice()[..got], &mut scratch, offset) {
                r.failure = Some(Failure {
                    errno: libc::EILSEQ,
                    offset: Some(offset),
                    message: format!("{}: {m}", ctx.inst.path.display()),
                });
                return;
            }
            r.verified_blocks += 1;
        }
    }
}
