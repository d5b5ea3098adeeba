//! One instance's timed I/O loop, as named steps.
//!
//! Each turn of [`IoLoop::run`] fills the queue (ask what comes [`Next`],
//! issue it), submits what was started, reaps at least one completion,
//! accounts every completion (verify, sync cadence, pacing, statistics,
//! logs), ends the ramp when its time is up and checks the stop conditions.
//! [`IoLoop::finish`] settles write-behind and `end_fsync` and hands the
//! statistics to the instance's result.
//!
//! Nothing here allocates once the loop runs, and nothing but the I/O, the
//! clock and the syncs a job asks for makes a system call.

use super::depth_search::{DepthSearch, Step};
use super::{
    batch_bucket, clock_ns, depth_bucket, fail_io, finish_write, io_failure, logged_sync, next_file, span, Ctx, Depths,
    Failure, InstanceResult, Next,
};
use crate::engine::{Completion, Dir, Op};
use crate::iolog::{Action, Replay};
use crate::logs::Sample;
use crate::offsets::{Offsets, Sizes};
use crate::progress::Counter;
use crate::random::SplitMix;
use crate::sprandom::{Plan, SpRandomWrites};
use crate::stats::{DirStats, Latency};
use crate::steady::{Steady, Totals};
use crate::verify::{Whose, Writes};
use dc_jobfile::Direction;
use dc_sys::ThreadCpu;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Runs the instance's I/O; returns the bitmap of the blocks it wrote (for
/// the verify pass and `verify_state_save`).
pub(super) fn io_loop(
    ctx: &mut Ctx<'_>,
    stop: [&AtomicBool; 3],
    progress: Option<&Counter>,
    r: &mut InstanceResult,
) -> (Vec<u64>, Option<Writes>) {
    let sprandom = match sprandom_writes(ctx) {
        Ok(w) => w,
        Err(message) => {
            r.failure = Some(Failure { errno: libc::EINVAL, offset: None, message });
            return (Vec::new(), None);
        }
    };
    let mut l = IoLoop::new(ctx, stop, progress, r);
    if let Some(writes) = sprandom {
        // It writes the device's physical size, more than its span.
        if l.draw.total != u64::MAX {
            l.draw.total = writes.physical().saturating_mul(u64::from(l.ctx.job.loops));
        }
        l.draw.sprandom = Some(writes);
    }
    l.run();
    l.finish()
}

/// `sprandom=1`'s writes over the job's span (at most its io_size), or why
/// its options do not fit that span.
fn sprandom_writes(ctx: &Ctx<'_>) -> Result<Option<SpRandomWrites>, String> {
    let job = ctx.job;
    let Some(spec) = &job.sprandom else { return Ok(None) };
    let span = span(ctx);
    let logical = job.io_bytes_per_loop().unwrap_or(span).min(span);
    let plan = Plan::new(spec, logical, job.bs).map_err(|e| format!("job '{}': {e}", job.name))?;
    let seed = job.randseed.wrapping_add(u64::from(ctx.inst.jobnum));
    Ok(Some(SpRandomWrites::new(spec, plan, (logical, job.bs), seed)))
}

/// What the job draws its I/O from: its offsets, sizes and directions, or a
/// replayed log.
struct Draw {
    offsets: Offsets,
    sizes: Sizes,
    mix: SplitMix,
    replay: Option<Replay>,
    /// The smallest I/O: offsets are counted in these.
    unit: u64,
    /// Bytes the job's offsets span.
    file_size: u64,
    /// Bytes the job issues in all (`u64::MAX`: until its time or log ends).
    total: u64,
    /// nrfiles with filesize=: the bytes of each file the job creates as it goes.
    new_files: Option<u64>,
    current_file: u64,
    /// `trimwrite`: the range just trimmed, written next.
    trimmed: Option<(u64, u32)>,
    /// Rolls which of the I/Os `cmdprio` names get its priority.
    prio_roll: SplitMix,
    /// `sprandom=1`: the offsets come from here, and the job ends with them.
    sprandom: Option<SpRandomWrites>,
}

/// fio's `invalidate` when a job starts its file over (a time-based job
/// wrapping, a random one's map exhausted, each further loop): the cached
/// pages are dropped again, so every pass reads from the device as the
/// first did (fio 3.33 does this at each wrap; a time-based random job
/// with norandommap never exhausts a map, so fio never drops there).
fn invalidate_on_wrap(ctx: &Ctx<'_>) {
    let job = ctx.job;
    let no_map = job.norandommap && job.rw.random && job.time_based;
    if job.invalidate && ctx.mode != dc_vocab::Mode::Direct && !no_map && job.filesize.is_none_or(|_| job.nrfiles == 1)
    {
        if let Some(side) = &ctx.side {
            side.invalidate();
        }
    }
}

/// The I/Os in flight: a free list of slots and, per slot, its operation
/// and when it was issued and submitted.
struct Queue {
    depth: usize,
    /// fio's `iodepth_batch_submit`.
    batch: usize,
    sync_engine: bool,
    free: Vec<usize>,
    ops: Vec<Op>,
    issue_at: Vec<Instant>,
    submit_at: Vec<Instant>,
    /// Started since the last submit.
    started: Vec<usize>,
    completions: Vec<Completion>,
    inflight: usize,
    /// Bytes and I/Os issued so far.
    issued: u64,
    ios_issued: u64,
}

/// When statistics count: after the ramp, until the deadline.
struct Clock {
    t0: Instant,
    ramp_end: Instant,
    ramping: bool,
    deadline: Option<Instant>,
    /// Where the statistics' time starts (the end of the ramp).
    base: Instant,
    cpu0: ThreadCpu,
}

struct IoLoop<'l, 'c> {
    ctx: &'l mut Ctx<'c>,
    stop: [&'l AtomicBool; 3],
    progress: Option<&'l Counter>,
    r: &'l mut InstanceResult,
    draw: Draw,
    queue: Queue,
    clock: Clock,
    /// Read, write, trim (`Dir::log_code`).
    stats: [DirStats; 3],
    /// One bit per verify piece written (`verify_interval` bytes).
    written: Vec<u64>,
    /// Each piece's last write, where the job checks them
    /// (`checks_write_sequence`).
    writes: Option<Writes>,
    /// A buffer the verify check expands expected contents into.
    scratch: Vec<u8>,
    writes_since_sync: u32,
    /// `steadystate`: samples the job's rate and ends it once settled.
    steady: Option<Steady>,
    /// `latency_target`: the depth being tried, below the queue's.
    search: Option<DepthSearch>,
    /// The depth has settled: once the queue drains, statistics restart.
    restart_when_drained: bool,
    /// No more I/O is issued; what is in flight completes.
    stopping: bool,
}

impl Draw {
    fn new(ctx: &mut Ctx<'_>) -> Draw {
        let job = ctx.job;
        let file_size = span(ctx);
        let seed = job.randseed.wrapping_add(u64::from(ctx.inst.jobnum));
        // Random offsets are multiples of the smallest size, as fio aligns
        // them; sequential ones follow each I/O exactly.
        let unit = job.blockalign.unwrap_or_else(|| match job.rw.random {
            true => job.block_sizes.smallest(job.bs),
            false => job.block_sizes.granule(job.bs),
        });
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
        let replay = ctx.replay.take();
        let per_loop = job.io_bytes_per_loop().unwrap_or(file_size);
        // A replay ends with its log (Next::Stop), whatever the job's size.
        let total =
            if job.time_based || replay.is_some() { u64::MAX } else { per_loop.saturating_mul(u64::from(job.loops)) };
        Draw {
            offsets,
            sizes: Sizes::new(&job.block_sizes, job.bs, seed),
            mix: SplitMix::new(seed ^ 0xA11CE),
            replay,
            unit,
            file_size,
            total,
            // A file-operation engine moves through the files itself.
            new_files: job.filesize.filter(|_| job.nrfiles > 1 && !job.ioengine.is_diskless()),
            current_file: 0,
            trimmed: None,
            prio_roll: SplitMix::new(seed ^ 0x9210),
            sprandom: None,
        }
    }
}

impl Queue {
    fn new(depth: usize, batch: usize, sync_engine: bool, t0: Instant) -> Queue {
        Queue {
            depth,
            batch,
            sync_engine,
            free: (0..depth).rev().collect(),
            ops: vec![Op { dir: Dir::Read, offset: 0, len: 0, prio: 0 }; depth],
            issue_at: vec![t0; depth],
            submit_at: vec![t0; depth],
            started: Vec::with_capacity(depth),
            completions: Vec::with_capacity(depth),
            inflight: 0,
            issued: 0,
            ios_issued: 0,
        }
    }
}

impl Clock {
    fn new(t0: Instant, ramp: std::time::Duration, runtime: Option<std::time::Duration>) -> Clock {
        let ramp_end = t0 + ramp;
        Clock {
            t0,
            ramp_end,
            ramping: !ramp.is_zero(),
            // runtime counts from when statistics start (after the ramp), as in fio.
            deadline: runtime.map(|d| ramp_end + d),
            base: t0,
            cpu0: dc_sys::thread_cpu().unwrap_or_default(),
        }
    }
}

impl<'l, 'c> IoLoop<'l, 'c> {
    fn new(
        ctx: &'l mut Ctx<'c>,
        stop: [&'l AtomicBool; 3],
        progress: Option<&'l Counter>,
        r: &'l mut InstanceResult,
    ) -> IoLoop<'l, 'c> {
        let job = ctx.job;
        let draw = Draw::new(ctx);
        let t0 = Instant::now();
        let queue = Queue::new(ctx.engine.depth(), job.iodepth_batch as usize, ctx.engine.is_sync(), t0);
        let clock = Clock::new(t0, job.ramp_time, job.runtime);
        r.start_monotonic_ns = clock_ns(libc::CLOCK_MONOTONIC);
        r.start_realtime_ns = clock_ns(libc::CLOCK_REALTIME);
        let written = if job.verify.is_some() && job.rw.writes() {
            vec![0u64; draw.file_size.div_ceil(job.verify_interval).div_ceil(64) as usize]
        } else {
            Vec::new()
        };
        let numbered = job.verify.is_some() && job.checks_write_sequence() && ctx.content.seed().is_some();
        let writes = numbered.then(|| Writes::new(ctx.inst.start(), draw.file_size, job.verify_interval));
        let scratch = if job.verify.is_some() { vec![0u8; job.bs as usize] } else { Vec::new() };
        let search = DepthSearch::new(&job.latency, queue.depth, t0);
        IoLoop {
            ctx,
            stop,
            progress,
            r,
            draw,
            queue,
            clock,
            stats: [DirStats::default(), DirStats::default(), DirStats::default()],
            written,
            writes,
            scratch,
            writes_since_sync: 0,
            steady: job.steady.as_ref().map(|ss| Steady::new(ss, t0)),
            search,
            restart_when_drained: false,
            stopping: false,
        }
    }

    fn path(&self) -> &'c Path {
        self.ctx.inst.path.as_path()
    }

    fn stopped(&self) -> bool {
        self.stop.iter().any(|s| s.load(Ordering::Relaxed))
    }

    /// An I/O's error: counted and passed over when `continue_on_error`
    /// lets its kind and errno pass (and printed under `error_dump`), else
    /// the end of the job. Trims count as writes, as in fio. Under
    /// `fill_device` a write's ENOSPC or EDQUOT ends the job without error.
    fn io_error(&mut self, failure: Failure, dir: Dir) {
        let job = self.ctx.job;
        if job.fill_device && dir == Dir::Write && matches!(failure.errno, libc::ENOSPC | libc::EDQUOT) {
            // fill_device: a full filesystem is where the job ends.
            self.stopping = true;
            return;
        }
        if !job.lets_pass(usize::from(dir != Dir::Read), failure.errno) {
            return self.fail(failure);
        }
        self.r.pass_error(job, failure.errno, &failure.message);
    }

    /// Ends the loop at the first failure; later ones are dropped.
    fn fail(&mut self, failure: Failure) {
        self.r.failure.get_or_insert(failure);
        self.stopping = true;
    }

    fn run(&mut self) {
        loop {
            if self.queue.inflight == 0 {
                self.queue_drained();
            }
            self.fill_queue();
            if self.queue.inflight == 0 {
                break;
            }
            if let Err(e) = self.submit_started() {
                self.r.failure = Some(fail_io(self.path(), "io_uring submit", &e));
                break;
            }
            let mut completions = std::mem::take(&mut self.queue.completions);
            // iodepth_batch_complete: wait for that many, or for all there are.
            let min = (self.ctx.job.iodepth_batch_complete as usize).min(self.queue.inflight).max(1);
            if let Err(e) = self.ctx.engine.reap(min, &mut completions) {
                self.r.failure = Some(fail_io(self.path(), "waiting for completions", &e));
                break;
            }
            let done = Instant::now();
            self.r.depths.completes[batch_bucket(completions.len())] += 1;
            for c in completions.drain(..) {
                self.complete(c, done);
            }
            self.queue.completions = completions;
            if self.clock.ramping && done >= self.clock.ramp_end {
                self.end_ramp(done);
            }
            if self.clock.deadline.is_some_and(|d| done >= d) || self.stopped() || self.steady_now(done) {
                self.stopping = true;
            }
            if let Some(search) = self.search.as_mut().filter(|_| !self.clock.ramping) {
                let step = search.check(done);
                self.follow(step);
            }
        }
    }

    /// The queue is empty: a `latency_target` drain is over (and, once the
    /// depth has settled, the statistics start again, as fio resets them).
    fn queue_drained(&mut self) {
        let Some(search) = &mut self.search else { return };
        let now = Instant::now();
        search.drained(now);
        if std::mem::take(&mut self.restart_when_drained) {
            self.end_ramp(now);
        }
    }

    /// What a `latency_target` verdict asks of the loop.
    fn follow(&mut self, step: Step) {
        match step {
            Step::Go | Step::Drain => {}
            Step::Settle => self.restart_when_drained = true,
            Step::Done => self.stopping = true,
            Step::Unreachable => {
                let target = self.ctx.job.latency.target.unwrap_or_default();
                let f = Failure {
                    errno: libc::ETIMEDOUT,
                    offset: None,
                    message: format!(
                        "{}: an I/O took longer than latency_target={target:?} at depth 1: no depth meets the target",
                        self.path().display()
                    ),
                };
                self.fail(f);
            }
        }
    }

    /// How many I/Os may be in flight: the queue's depth, or the depth
    /// `latency_target` is trying.
    fn depth_limit(&self) -> usize {
        self.search.as_ref().map_or(self.queue.depth, |s| s.limit().min(self.queue.depth))
    }

    /// Issues I/O until the queue is full, the job has issued everything,
    /// or what comes next has to wait for what is in flight.
    fn fill_queue(&mut self) {
        while !self.stopping && self.queue.inflight < self.depth_limit() && self.queue.issued < self.draw.total {
            let Some(slot) = self.queue.free.pop() else { break };
            let next = match self.next() {
                Ok(next) => next,
                Err(failure) => {
                    self.queue.free.push(slot);
                    self.fail(failure);
                    break;
                }
            };
            match next {
                Next::Io(dir, offset, len) => {
                    let prio = self.prio_of(dir, len);
                    if !self.issue(slot, Op { dir, offset, len, prio }) {
                        break;
                    }
                }
                Next::Stop => {
                    self.queue.free.push(slot);
                    self.stopping = true;
                    break;
                }
                Next::Wait(wait) => {
                    // Reap what is in flight first, else wait (no longer than the runtime).
                    self.queue.free.push(slot);
                    if self.queue.inflight > 0 {
                        break;
                    }
                    let left = self.clock.deadline.map_or(wait, |d| d.saturating_duration_since(Instant::now()));
                    std::thread::sleep(wait.min(left));
                    if self.clock.deadline.is_some_and(|d| Instant::now() >= d) || self.stopped() {
                        self.stopping = true;
                    }
                }
                Next::Sync(data_only) => {
                    // A logged sync covers the writes before it: those complete first.
                    self.queue.free.push(slot);
                    if self.queue.inflight > 0 {
                        break;
                    }
                    if let Err(e) = logged_sync(self.ctx, data_only, self.clock.ramping, self.r) {
                        let f = fail_io(self.path(), "fsync", &e);
                        self.fail(f);
                    }
                    self.draw.replay.as_mut().expect("replaying").advance();
                }
            }
        }
    }

    /// `steadystate`: a sample when one is due; true once the rate has settled.
    fn steady_now(&mut self, now: Instant) -> bool {
        let Some(steady) = &mut self.steady else { return false };
        let mut t = Totals::default();
        for d in &self.stats {
            t.bytes += d.bytes;
            t.ios += d.ios;
            t.lat_n += d.lat.summary.n;
            t.lat_sum_ns += d.lat.summary.mean() * d.lat.summary.n as f64;
        }
        steady.check(now, t)
    }

    /// An I/O's priority: one `cmdprio` gives it, else the job's.
    fn prio_of(&mut self, dir: Dir, len: u32) -> u16 {
        let job = self.ctx.job;
        let own = job.ioprio.unwrap_or(0);
        let Some(c) = &job.cmdprio else { return own };
        let Some(d) = [Dir::Read, Dir::Write].iter().position(|&x| x == dir) else { return own };
        let roll = self.draw.prio_roll.below(100) as u32;
        c.pick(d, u64::from(len), roll).unwrap_or(own)
    }

    /// What to issue next: the replayed log's next action, or the job's own
    /// draw (direction, pacing, offset, size; nrfiles' next file).
    fn next(&mut self) -> Result<Next, Failure> {
        let job = self.ctx.job;
        if let Some(rp) = self.draw.replay.as_mut() {
            let t0 = self.clock.t0;
            return Ok(match rp.peek() {
                None => Next::Stop,
                Some((due, _)) if !job.replay_no_stall && t0 + due > Instant::now() => {
                    Next::Wait((t0 + due).saturating_duration_since(Instant::now()))
                }
                Some((_, Action::Sync { data_only })) => Next::Sync(data_only),
                Some((_, Action::Io { dir, offset, len })) => {
                    rp.advance();
                    Next::Io(dir, offset, len)
                }
            });
        }
        if job.number_ios > 0 && self.queue.ios_issued >= job.number_ios {
            return Ok(Next::Stop);
        }
        let draw = &mut self.draw;
        if let Some((offset, len)) = draw.trimmed {
            if let Some(wait) = self.ctx.pace.hold(Dir::Write, Instant::now()) {
                return Ok(Next::Wait(wait));
            }
            draw.trimmed = None;
            return Ok(Next::Io(Dir::Write, offset, len));
        }
        let dir = match job.rw.direction {
            Direction::Read => Dir::Read,
            Direction::Write => Dir::Write,
            Direction::Mixed if draw.mix.below(100) < u64::from(job.rwmixread) => Dir::Read,
            Direction::Mixed => Dir::Write,
            Direction::Trim | Direction::TrimWrite => Dir::Trim,
        };
        if let Some(wait) = self.ctx.pace.hold(dir, Instant::now()) {
            // Held by a rate cap or a flow share.
            return Ok(Next::Wait(wait));
        }
        let offset = match &mut draw.sprandom {
            Some(writes) => match writes.next_offset() {
                Some(offset) => offset,
                None => return Ok(Next::Stop),
            },
            None => {
                let pass = draw.offsets.pass();
                let offset = draw.offsets.next_offset();
                if draw.offsets.pass() != pass {
                    invalidate_on_wrap(self.ctx);
                }
                offset
            }
        };
        let draw = &mut self.draw;
        // The last I/O of a size-bound job ends where its bytes do.
        let len = draw
            .sizes
            .next_size(dir.log_code() as usize)
            .min(draw.file_size - offset)
            .min(draw.total - self.queue.issued) as u32;
        draw.offsets.skip(u64::from(len).div_ceil(draw.unit) - 1);
        let Some(per_file) = draw.new_files else {
            let at = self.ctx.inst.start() + offset;
            if job.rw.direction == Direction::TrimWrite {
                draw.trimmed = Some((at, len));
            }
            return Ok(Next::Io(dir, at, len));
        };
        // nrfiles: the offset runs over all the job's files end to end;
        // entering the next file creates it (in the timed part, as fs_mark).
        let k = offset / per_file;
        if k != draw.current_file {
            next_file(self.ctx, k as u32).map_err(|(p, e)| fail_io(&p, "creating the next file", &e))?;
            self.draw.current_file = k;
        }
        Ok(Next::Io(dir, offset % per_file, len))
    }

    /// Starts `op` in `slot`; false when the queue should stop filling (a
    /// synchronous engine completed it, or starting it failed).
    fn issue(&mut self, slot: usize, op: Op) -> bool {
        if op.dir == Dir::Write && self.ctx.job.verify.is_some() {
            let buf = &mut self.ctx.engine.buffer(slot)[..op.len as usize];
            self.ctx.content.fill(buf, op.offset, self.writes.as_mut());
        } else if let (Dir::Write, Some(contents)) = (op.dir, &mut self.ctx.contents) {
            contents.fill(&mut self.ctx.engine.buffer(slot)[..op.len as usize]);
        }
        let q = &mut self.queue;
        q.ops[slot] = op;
        q.issue_at[slot] = Instant::now();
        self.ctx.pace.issued(op.dir, u64::from(op.len), q.issue_at[slot]);
        if let Err(e) = self.ctx.engine.start(slot, op) {
            self.r.failure = Some(fail_io(self.path(), "submitting I/O", &e));
            self.queue.free.push(slot);
            self.stopping = true;
            return false;
        }
        if let Some(log) = &mut self.ctx.iolog {
            if let Err(e) = log.io(op.dir, op.offset, op.len, self.queue.issue_at[slot]) {
                let f = fail_io(self.path(), "writing the iolog", &e);
                self.fail(f);
            }
        }
        let q = &mut self.queue;
        q.inflight += 1;
        // A trimwrite job's bytes are its writes', as in fio.
        if op.dir != Dir::Trim || !self.ctx.job.rw.writes() {
            q.issued += u64::from(op.len);
        }
        q.ios_issued += 1;
        q.started.push(slot);
        if q.sync_engine {
            return false;
        }
        // fio submits every iodepth_batch_submit I/Os (default 1): an I/O waiting in the
        // queue for its batch would sit in the block plug, not at the device.
        if q.started.len() >= q.batch {
            if let Err(e) = self.submit_started() {
                self.r.failure = Some(fail_io(self.path(), "io_uring submit", &e));
                self.stopping = true;
            }
        }
        true
    }

    /// Hands the I/Os started since the last submit to the kernel and stamps
    /// their submission time (the end of slat). Like fio's "IO depths", each
    /// counts at the depth it was submitted into.
    fn submit_started(&mut self) -> std::io::Result<()> {
        let q = &mut self.queue;
        if q.started.is_empty() {
            return Ok(());
        }
        self.r.depths.levels[depth_bucket(q.inflight)] += q.started.len() as u64;
        self.r.depths.submits[batch_bucket(q.started.len())] += 1;
        self.ctx.engine.submit()?;
        let now = Instant::now();
        for s in q.started.drain(..) {
            q.submit_at[s] = now;
        }
        Ok(())
    }

    /// One completion: its result, verify, the sync cadence, pacing, then
    /// (outside the ramp) its latencies, statistics and log samples.
    fn complete(&mut self, c: Completion, done: Instant) {
        self.queue.free.push(c.slot);
        self.queue.inflight -= 1;
        let op = self.queue.ops[c.slot];
        let moved = self.completed_bytes(c, op);
        if let Some(w) = self.writes.as_mut().filter(|_| op.dir == Dir::Write) {
            w.end(op.offset, u64::from(op.len), moved.is_some());
        }
        let Some((n, short)) = moved else { return };
        if let Some(p) = self.progress {
            p.add(u64::from(n));
        }
        if !self.verify(c.slot, op, n) {
            return;
        }
        self.sync_cadence(op);
        if let Err(m) = self.ctx.pace.completed(op.dir, u64::from(n), done, !self.clock.ramping) {
            let f =
                Failure { errno: libc::ETIMEDOUT, offset: None, message: format!("{}: {m}", self.path().display()) };
            self.fail(f);
        }
        if !self.clock.ramping {
            self.record(c.slot, op, n, short, done);
            if let Some(search) = self.search.as_mut().filter(|_| op.dir != Dir::Trim) {
                let lat = done.duration_since(self.queue.issue_at[c.slot]).as_nanos() as u64;
                let step = search.completed(lat);
                self.follow(step);
            }
        }
    }

    /// The bytes a completion moved and whether it was short; `None` when it
    /// failed (the loop then stops). A short write is finished here.
    fn completed_bytes(&mut self, c: Completion, op: Op) -> Option<(u32, bool)> {
        let what = if op.dir == Dir::Read { "read" } else { "write" };
        let n = match c.result {
            Ok(n) => n,
            Err(errno) => {
                let f = io_failure(self.path(), what, op, errno);
                self.io_error(f, op.dir);
                return None;
            }
        };
        let short = n < op.len;
        if short && op.dir == Dir::Write {
            // A short write is the kernel saying "this much, then retry": finish it
            // so the real errno (ENOSPC, EIO) surfaces with its offset.
            return match finish_write(self.ctx, c.slot, op, n) {
                Ok(()) => Some((op.len, true)),
                Err(errno) => {
                    let f = io_failure(self.path(), what, op, errno);
                    self.io_error(f, op.dir);
                    None
                }
            };
        }
        if short {
            let f = Failure {
                errno: libc::EIO,
                offset: Some(op.offset),
                message: format!(
                    "{}: short read: {n} of {} bytes at offset {} (the file ends before size={})",
                    self.path().display(),
                    op.len,
                    op.offset,
                    self.draw.file_size
                ),
            };
            self.io_error(f, op.dir);
            return None;
        }
        Some((n, false))
    }

    /// verify: a write is marked as written; a read of a job that only reads
    /// is checked against what the block holds. A job that also writes
    /// checks its written pieces after its I/O (`verify_pass`), as fio
    /// does: its reads meet what other jobs write at once, and fio leaves
    /// them unchecked. False on a mismatch (the loop then stops).
    fn verify(&mut self, slot: usize, op: Op, n: u32) -> bool {
        let ctx = &mut *self.ctx;
        let job = ctx.job;
        let unrecorded = ctx.loaded.as_ref().is_some_and(|s| !s.holds(op.offset));
        if job.verify.is_none() || ctx.side.is_none() || unrecorded {
            return true;
        }
        if op.dir == Dir::Write {
            let first = (op.offset - ctx.inst.start()) / job.verify_interval;
            for b in first..first + u64::from(n).div_ceil(job.verify_interval) {
                self.written[(b / 64) as usize] |= 1 << (b % 64);
            }
            return true;
        }
        if job.rw.writes() {
            return true;
        }
        let got = &ctx.engine.buffer(slot)[..n as usize];
        // Any writer's pieces: a read job checks what other jobs wrote.
        if let Err(m) = ctx.content.check(got, &mut self.scratch, op.offset, Whose::Any) {
            let f = Failure {
                errno: libc::EILSEQ,
                offset: Some(op.offset),
                message: format!("{}: {m}", self.path().display()),
            };
            self.io_error(f, op.dir);
            return false;
        }
        self.r.verified_blocks += 1;
        true
    }

    /// fsync=/fdatasync=: a sync after every N writes.
    fn sync_cadence(&mut self, op: Op) {
        let job = self.ctx.job;
        let syncs = job.fsync_every > 0 || job.fdatasync_every > 0;
        if op.dir != Dir::Write || !syncs || self.ctx.side.is_none() {
            return;
        }
        self.writes_since_sync += 1;
        if self.writes_since_sync >= job.fsync_every.max(job.fdatasync_every) {
            self.writes_since_sync = 0;
            if let Err(e) = logged_sync(self.ctx, job.fsync_every == 0, self.clock.ramping, self.r) {
                let f = fail_io(self.path(), "fsync", &e);
                self.fail(f);
            }
        }
    }

    /// A measured completion's latencies, statistics and log sample.
    fn record(&mut self, slot: usize, op: Op, n: u32, short: bool, done: Instant) {
        let q = &self.queue;
        let now_ns = done.duration_since(self.clock.base).as_nanos() as u64;
        let lat = done.duration_since(q.issue_at[slot]).as_nanos() as u64;
        let (clat, slat) = if q.sync_engine {
            (lat, None)
        } else {
            let s = q.submit_at[slot].duration_since(q.issue_at[slot]).as_nanos() as u64;
            (done.duration_since(q.submit_at[slot]).as_nanos() as u64, Some(s))
        };
        let d = &mut self.stats[op.dir.log_code() as usize];
        d.lat.record(lat);
        d.clat.record(clat);
        if let Some(s) = slat {
            d.slat.record(s);
        }
        d.complete(now_ns, u64::from(n), short);
        if let Some(logs) = &mut self.ctx.logs {
            let sample = Sample {
                now_ns,
                dir: op.dir,
                bytes: u64::from(n),
                offset: op.offset,
                prio: op.prio,
                lat_ns: lat,
                clat_ns: clat,
                slat_ns: slat,
            };
            if let Err(e) = logs.record(&sample) {
                let f = fail_io(self.path(), "writing interval log", &e);
                self.fail(f);
            }
        }
    }

    /// Statistics start now: everything before was warm-up.
    fn end_ramp(&mut self, done: Instant) {
        let c = &mut self.clock;
        c.ramping = false;
        c.base = done;
        c.deadline = self.ctx.job.runtime.map(|d| done + d);
        c.cpu0 = dc_sys::thread_cpu().unwrap_or_default();
        self.stats = [DirStats::default(), DirStats::default(), DirStats::default()];
        self.r.sync = Latency::new();
        self.r.depths = Depths::default();
        if let Some(steady) = &mut self.steady {
            steady.restart(done);
        }
        self.r.start_monotonic_ns = clock_ns(libc::CLOCK_MONOTONIC);
        self.r.start_realtime_ns = clock_ns(libc::CLOCK_REALTIME);
        if let Some(logs) = &mut self.ctx.logs {
            logs.reset();
        }
    }

    /// After the last completion: a job that never left its ramp, write-behind's
    /// settling, end_fsync, the runtime and CPU, the logs' last lines.
    fn finish(self) -> (Vec<u64>, Option<Writes>) {
        let job = self.ctx.job;
        self.r.steady = self.steady.as_ref().map(Steady::report);
        let path = self.path();
        if self.clock.ramping && self.r.failure.is_none() && !self.stopped() {
            // A size-bound job that ended inside its ramp measured nothing: say
            // so rather than report zero I/O as a result. (Its length is not
            // known before it runs, so this cannot be refused up front.)
            self.r.failure = Some(Failure {
                errno: libc::EINVAL,
                offset: None,
                message: format!(
                    "job '{}' ended during ramp_time={:?}, before any statistics were recorded; shorten \
                     ramp_time, or make the job time_based",
                    job.name, job.ramp_time
                ),
            });
        }
        if self.r.failure.is_none() {
            // Write-behind settles here: its background writeback is part of
            // the cost, and an error it kept ends the job like any other.
            if let Err(e) = self.ctx.engine.finish() {
                self.r.failure = Some(fail_io(path, "write-behind writeback", &e));
            }
        }
        if job.end_fsync && job.rw.writes() && self.r.failure.is_none() {
            // Counted in the runtime, as fio does: the bandwidth then includes getting the data to disk.
            if let Some(Err(e)) = self.ctx.side.as_ref().map(|s| s.sync(false)) {
                self.r.failure = Some(fail_io(path, "end_fsync", &e));
            }
        }
        let r = &mut *self.r;
        r.latency_depth = self.search.as_ref().map_or(job.iodepth, |s| s.depth() as u32);
        r.runtime_ns = Instant::now().duration_since(self.clock.base).as_nanos() as u64;
        r.cpu = dc_sys::thread_cpu().unwrap_or_default().since(&self.clock.cpu0);
        if let Some(logs) = &mut self.ctx.logs {
            if let Err(e) = logs.finish(r.runtime_ns, !self.queue.sync_engine) {
                r.failure.get_or_insert(fail_io(path, "writing interval log", &e));
            }
        }
        let [read, write, trim] = self.stats;
        r.read = job.rw.reads().then_some(read);
        r.write = job.rw.writes().then_some(write);
        r.trim = job.rw.trims().then_some(trim);
        (self.written, self.writes)
    }
}
