//! The typed job: what each option means once interpreted, with fio's
//! defaults, and the checks that need more than one option.

use crate::blocksizes::{gcd, one_for_all, parse_range, parse_split, BlockSizes};
use crate::distribution::{parse_distribution, RandomDistribution};
use crate::options::{lookup, OptionKind};
use crate::pattern::parse_pattern;
use crate::prio::{cpu_list, cpu_mask, ioprio_value, pair, CmdPrio, CmdPrioOptions};
use crate::sprandom::{SpRandom, SpRandomOptions};
use crate::steadystate::{parse_criterion, SteadyState};
use crate::units::{each_direction, parse_bool, parse_size, parse_time, parse_uint, KbBase};
use crate::{Origin, RawOption, SpecError};
use dc_vocab::{Mode, Policy};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
    /// Reads and writes mixed by `rwmixread`.
    Mixed,
    /// fio's `trim`/`randtrim`: every I/O discards its range.
    Trim,
    /// fio's `trimwrite`/`randtrimwrite`: each range is trimmed, then
    /// written; the job's bytes are the writes'.
    TrimWrite,
}

/// fio's `exit_what`: what an `exitall` job's end stops.
/// fio's `cpuio` engine's work: each cycle burns the CPU, then sleeps so
/// that the burning is `load` percent of the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuBurn {
    /// Percent of a CPU, 1-100 (`cpuload`; 0: not given).
    pub load: u32,
    /// One burn (`cpuchunks`; fio's default 50 ms).
    pub cycle: Duration,
    pub mode: CpuMode,
    /// End when the wave's other jobs have (`exit_on_io_done`).
    pub exit_on_io_done: bool,
}

/// fio's `exec` engine's program: started when the job starts, run beside
/// the other jobs for the job's runtime, then sent SIGTERM and, if it has
/// not ended `grace_time` later, SIGKILL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecProgram {
    /// `program` (looked up in PATH as execvp does; required).
    pub program: Option<String>,
    /// `arguments`: split at spaces, `%r` the runtime in seconds, `%n` the
    /// job's name.
    pub arguments: Option<String>,
    pub grace_time: Duration,
    /// `std_redirect`: its stdout and stderr go to `NAME.stdout` and
    /// `NAME.stderr` in the current directory (default), else dcload's.
    pub std_redirect: bool,
}

/// How ioengine=io_uring sets its ring up (fio's engine options of the same
/// names; given with another engine: refused).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingSetup {
    /// `sqthread_poll`: a kernel thread takes the submissions off the ring
    /// (SQPOLL), so submitting costs no system call while it is awake.
    pub sqthread_poll: bool,
    /// `sqthread_poll_cpu`: the CPU that thread is bound to.
    pub sqthread_poll_cpu: Option<u32>,
    /// `fixedbufs`: the slots' buffers are registered with the ring once,
    /// so the kernel does not map them on every I/O.
    pub fixedbufs: bool,
    /// `registerfiles`: the file is registered with the ring once, so the
    /// kernel does not look its descriptor up on every I/O.
    pub registerfiles: bool,
}

/// The options that fill [`RingSetup`].
const RING_OPTIONS: &[&str] = &["sqthread_poll", "sqthread_poll_cpu", "fixedbufs", "registerfiles"];

impl ExecProgram {
    /// The program and its arguments as the job runs them: `arguments` split
    /// at spaces after fio's `%r` and `%n` are put in.
    pub fn argv(&self, job_name: &str, runtime: Option<Duration>) -> Vec<String> {
        let secs = runtime.map_or(0, |r| r.as_secs()).to_string();
        let args = self.arguments.as_deref().unwrap_or("").replace("%r", &secs).replace("%n", job_name);
        let program = self.program.iter().map(String::as_str);
        program.chain(args.split(' ')).filter(|a| !a.is_empty()).map(str::to_string).collect()
    }
}

/// fio's `latency_target`: the job looks for the deepest queue at which
/// `percentile` percent of its I/Os complete within `target`, judged over
/// each `window`, starting at depth 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyTarget {
    /// `latency_target` (`None`: the job runs at `iodepth`).
    pub target: Option<Duration>,
    /// `latency_window`: how long each depth is tried.
    pub window: Duration,
    /// `latency_percentile`: the share of I/Os that must meet the target
    /// (default 100: one slower I/O fails the depth at once).
    pub percentile: f64,
    /// `latency_run`: keep adjusting for the whole run instead of ending
    /// once the depth has settled (and a last window measured at it).
    pub run: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuMode {
    /// Spin for the cycle.
    Noop,
    /// Sort a fixed array four ways; the cycle is as long as that takes.
    Qsort,
}

/// What written buffers hold when neither verify nor `buffer_pattern`
/// decides: fio's compressible and dedupable data, refilled per write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferContents {
    /// Percent of each `compress_chunk` that is zeros after random bytes.
    pub compress_percentage: u32,
    pub compress_chunk: u64,
    /// Percent of writes that repeat an earlier buffer.
    pub dedupe_percentage: u32,
    /// `dedupe_mode=working_set`: a repeat is one of a fixed set of
    /// buffers (`false`: `repeat`, the previous new buffer).
    pub working_set: bool,
    /// The working set's percent of the job's size.
    pub working_set_percentage: u32,
    /// `dedupe_global`: jobs that set it draw from one working set.
    pub global: bool,
}

impl BufferContents {
    /// Whether buffers are refilled per write (either option set).
    pub fn is_set(&self) -> bool {
        self.compress_percentage > 0 || self.dedupe_percentage > 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitWhat {
    /// The jobs of its reporting group (`new_group` and `stonewall` start one).
    Group,
    /// Every job running now; the jobs after the next `stonewall` still run.
    Stonewall,
    /// Every job, and nothing after.
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RwPattern {
    pub direction: Direction,
    pub random: bool,
}

impl RwPattern {
    pub fn reads(&self) -> bool {
        matches!(self.direction, Direction::Read | Direction::Mixed)
    }
    pub fn writes(&self) -> bool {
        matches!(self.direction, Direction::Write | Direction::Mixed | Direction::TrimWrite)
    }
    pub fn trims(&self) -> bool {
        matches!(self.direction, Direction::Trim | Direction::TrimWrite)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Psync,
    /// fio's `sync`, `vsync` and `pvsync`: one I/O at a time without
    /// per-call flags, run with pread/pwrite as `psync` is (fio's `sync`
    /// adds an lseek per I/O, `vsync` uses readv/writev: the same I/O).
    Sync(&'static str),
    Pvsync2,
    IoUring,
    Libaio,
    /// fio's `posixaio`: glibc's `aio_read`/`aio_write`, `iodepth` in flight.
    PosixAio,
    /// fio's `null`: every I/O completes at once without touching a file
    /// (measuring the load generator itself).
    Null,
    /// fio's `page_fault`: I/O copies to and from private anonymous memory
    /// of the job's size, faulting each page in at its first touch.
    PageFault,
    /// fio's `cpuio`: no I/O; the job burns a share of a CPU ([`CpuBurn`]).
    CpuIo,
    /// fio's `e4defrag`: each write moves its range's blocks in from a
    /// donor file with `EXT4_IOC_MOVE_EXT` (`donorname`, `inplace`).
    E4defrag,
    /// fio's `exec`: no I/O; the job runs a program for its runtime
    /// ([`ExecProgram`]).
    Exec,
    /// fio's `nfs`: an NFSv3 server's file through libnfs (`nfs_url=`),
    /// nothing local.
    Nfs,
    /// fio's file-operation engines: each file of the job (`nrfiles`) is
    /// created, stat'ed or removed (or a directory of its name made,
    /// stat'ed or removed) when its first I/O comes; no data is moved.
    FileOp(FileOp),
    /// fio's `ftruncate`: each write truncates the job's file to its offset.
    Ftruncate,
    /// fio's `falloc`: each I/O is fallocate(2) of its range (a read keeps
    /// the size).
    Falloc,
    /// fio's `mmap`: each I/O is a copy to or from a shared mapping of the file.
    Mmap,
}

/// What a file-operation engine does to each of the job's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOp {
    /// `filecreate`: `open(O_CREAT)` (and close).
    Create,
    /// `filestat`: `stat_type=` (stat, lstat or statx) of a file made before the run.
    Stat,
    /// `filedelete`: `unlink` of a file made before the run.
    Delete,
    /// `dircreate`: `mkdir`.
    DirCreate,
    /// `dirstat`: stat of a directory made before the run.
    DirStat,
    /// `dirdelete`: `rmdir` of a directory made before the run.
    DirDelete,
}

impl FileOp {
    pub const ALL: [FileOp; 6] =
        [FileOp::Create, FileOp::Stat, FileOp::Delete, FileOp::DirCreate, FileOp::DirStat, FileOp::DirDelete];

    pub fn name(self) -> &'static str {
        match self {
            FileOp::Create => "filecreate",
            FileOp::Stat => "filestat",
            FileOp::Delete => "filedelete",
            FileOp::DirCreate => "dircreate",
            FileOp::DirStat => "dirstat",
            FileOp::DirDelete => "dirdelete",
        }
    }

    /// Whether the files (or directories) must exist before the run; dcload
    /// makes them then, untimed, as fio does at setup.
    pub fn needs_existing(self) -> bool {
        matches!(self, FileOp::Stat | FileOp::Delete | FileOp::DirStat | FileOp::DirDelete)
    }

    pub fn on_directories(self) -> bool {
        matches!(self, FileOp::DirCreate | FileOp::DirStat | FileOp::DirDelete)
    }
}

/// `stat_type=` of the filestat and dirstat engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatType {
    #[default]
    Stat,
    Lstat,
    Statx,
}

impl EngineKind {
    pub fn name(&self) -> &'static str {
        match self {
            EngineKind::Psync => "psync",
            EngineKind::Sync(name) => name,
            EngineKind::Pvsync2 => "pvsync2",
            EngineKind::IoUring => "io_uring",
            EngineKind::Libaio => "libaio",
            EngineKind::PosixAio => "posixaio",
            EngineKind::Null => "null",
            EngineKind::PageFault => "page_fault",
            EngineKind::CpuIo => "cpuio",
            EngineKind::E4defrag => "e4defrag",
            EngineKind::Exec => "exec",
            EngineKind::Nfs => "nfs",
            EngineKind::FileOp(op) => op.name(),
            EngineKind::Ftruncate => "ftruncate",
            EngineKind::Falloc => "falloc",
            EngineKind::Mmap => "mmap",
        }
    }

    /// Engines that keep up to `iodepth` I/Os in flight.
    pub fn is_async(&self) -> bool {
        matches!(
            self,
            EngineKind::IoUring | EngineKind::Libaio | EngineKind::PosixAio | EngineKind::Null | EngineKind::Nfs
        )
    }

    /// Engines that do no I/O on a local file, which dcload then neither
    /// creates nor opens (fio's diskless engines).
    pub fn is_diskless(&self) -> bool {
        matches!(
            self,
            EngineKind::Null
                | EngineKind::Nfs
                | EngineKind::FileOp(_)
                | EngineKind::PageFault
                | EngineKind::CpuIo
                | EngineKind::Exec
        )
    }

    /// Engines whose jobs move no data at all (`cpuio`, `exec`): they have
    /// no size, and `exit_on_io_done` does not wait for them.
    pub fn does_no_io(&self) -> bool {
        matches!(self, EngineKind::CpuIo | EngineKind::Exec)
    }
}

/// `log_window_value=`: what an interval log's averaged window gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogWindow {
    /// The window's mean (fio rounds it to the nearest integer).
    Avg,
    /// The largest sample in the window.
    Max,
    /// Both, the mean then the maximum, in two columns.
    Both,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RandomGenerator {
    Tausworthe,
    Lfsr,
    Tausworthe64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallocateMode {
    /// `fallocate(fd, 0, 0, size)` (fio's `native`, `posix` and `1`).
    Allocate,
    /// `FALLOC_FL_KEEP_SIZE`.
    KeepSize,
    None,
}

/// One job section, fully interpreted. Instances (`numjobs`) share it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    pub name: String,
    /// Where the job was defined (section header or `--name`).
    pub origin: Origin,
    pub description: Option<String>,
    pub filename: Option<String>,
    pub directory: Option<String>,
    pub filename_format: String,
    /// `None`: use the existing file's size.
    pub size: Option<u64>,
    /// Files each instance creates and writes in turn (`nrfiles`, with
    /// `filesize`): many small new files, as fs_mark writes them.
    pub nrfiles: u32,
    pub filesize: Option<u64>,
    pub io_size: Option<u64>,
    /// The block size; with `block_sizes` varying, the largest (the size
    /// of each I/O buffer).
    pub bs: u64,
    /// `bsrange=`/`bssplit=`: I/O sizes that vary.
    pub block_sizes: BlockSizes,
    /// Where in the file the I/O starts (`offset`), and how much further
    /// each further instance starts (`offset_increment`).
    pub offset: u64,
    pub offset_increment: u64,
    pub rw: RwPattern,
    /// Percentage of reads for `Direction::Mixed`.
    pub rwmixread: u8,
    pub numjobs: u32,
    pub iodepth: u32,
    /// I/Os queued before one submit (fio's `iodepth_batch_submit`).
    pub iodepth_batch: u32,
    /// Completions to wait for per reap (fio's `iodepth_batch_complete_min`).
    pub iodepth_batch_complete: u32,
    /// `serialize_overlap=1`: no two overlapping I/Os in flight.
    pub serialize_overlap: bool,
    pub ioengine: EngineKind,
    pub direct: bool,
    pub uncached: bool,
    /// `writebehind=`: buffered I/O through libdontcache with this policy.
    pub writebehind: Option<Policy>,
    /// ioengine=nfs's server and export: `nfs://SERVER[:PORT]/EXPORT[?ARG=VAL...]`.
    pub nfs_url: Option<String>,
    /// ioengine=cpuio's options (given with another engine: refused).
    pub cpu: CpuBurn,
    /// ioengine=exec's program (given with another engine: ignored).
    pub exec: ExecProgram,
    /// `sprandom=1`: random writes that precondition an SSD.
    pub sprandom: Option<SpRandom>,
    /// ioengine=io_uring's ring setup.
    pub ring: RingSetup,
    /// ioengine=e4defrag's donor file and whether it is allocated per I/O.
    pub donorname: Option<String>,
    pub inplace: bool,
    pub runtime: Option<Duration>,
    pub time_based: bool,
    pub ramp_time: Duration,
    pub startdelay: Duration,
    pub loops: u32,
    pub group_reporting: bool,
    pub stonewall: bool,
    pub new_group: bool,
    /// `wait_for`: the earlier job whose instances must all have ended
    /// before this one starts.
    pub wait_for: Option<String>,
    pub end_fsync: bool,
    pub fsync_every: u32,
    pub fdatasync_every: u32,
    pub log_avg_msec: u32,
    /// `log_offset`: interval-log lines carry the I/O's offset.
    pub log_offset: bool,
    /// `log_window_value`: what a `log_avg_msec` window's entry gives.
    pub log_window: LogWindow,
    /// `log_issue_time`: interval-log lines end with the I/O's issue time.
    pub log_issue_time: bool,
    /// `log_prio`: the priority column as fio's value-and-class word.
    pub log_prio: bool,
    /// `per_job_logs`: log file names carry the instance's number
    /// (`<prefix>_bw.<n>.log`); without, `<prefix>_bw.log`.
    pub per_job_logs: bool,
    pub bw_log: Option<String>,
    /// `write_hist_log`: the completion-latency histogram log's prefix.
    pub hist_log: Option<String>,
    pub log_hist_msec: u32,
    /// Bins summed per column: 2^this.
    pub log_hist_coarseness: u32,
    pub lat_log: Option<String>,
    pub iops_log: Option<String>,
    pub random_generator: RandomGenerator,
    pub randseed: u64,
    pub randrepeat: bool,
    pub norandommap: bool,
    /// `rw=read:8k` on a sequential job: bytes skipped after each I/O
    /// (negative: the job goes backwards through the file).
    pub hole: i64,
    /// `rw=randread:8` on a random job: I/Os per random offset; the others
    /// follow it as `rw_sequencer` says.
    pub ios_per_offset: u32,
    /// `rw_sequencer=identical`: those I/Os repeat the offset (else they
    /// continue sequentially from it).
    pub repeat_offset: bool,
    /// `zonemode=strided`: sequential I/O in zones of `zone_size` bytes,
    /// `zone_skip` bytes skipped after each.
    pub strided: bool,
    pub zone_size: u64,
    pub zone_skip: u64,
    /// Caps per direction (read, write; 0: none): bytes/s and I/Os per
    /// second (`rate`, `rate_iops`), and the floors a job fails below
    /// (`rate_min`, `rate_iops_min`) over `rate_cycle`.
    pub rate: [u64; 2],
    pub rate_iops: [u64; 2],
    pub rate_min: [u64; 2],
    pub rate_iops_min: [u64; 2],
    pub rate_cycle: Duration,
    /// `rate_process=poisson`: capped I/Os arrive as a Poisson process.
    pub rate_poisson: bool,
    /// `flow=` weight (0: no flow control), its `flow_id` and `flow_sleep`.
    pub flow: u32,
    pub flow_id: u32,
    pub flow_sleep: Duration,
    /// Which blocks random I/O favours (`random_distribution`).
    pub random_distribution: RandomDistribution,
    /// `random_sequence_stride=1`: each round of a `sequence` moves on.
    pub random_sequence_stride: bool,
    /// Offsets are multiples of this (`blockalign`); `None`: of the smallest block size.
    pub blockalign: Option<u64>,
    /// The verify name asked for (`None` when off).
    pub verify: Option<String>,
    /// `verify_interval`: the bytes each piece with its own verify content
    /// covers (its header, or the pattern from its start). Given or 0 when
    /// read; with verify, the check sets it to one that divides every
    /// block size (fio's default: bs, or the smallest of varying sizes).
    pub verify_interval: u64,
    /// `verify_pattern`: with `verify=pattern`, every block is these bytes
    /// repeated from its start.
    pub verify_pattern: Option<Vec<u8>>,
    /// `buffer_pattern`: what written blocks hold when nothing is verified.
    pub buffer_pattern: Option<Vec<u8>>,
    /// fio's compressible and dedupable write buffers (refilled per write).
    pub contents: BufferContents,
    /// `verify_state_save`/`verify_state_load`: the written blocks recorded
    /// by a write job and checked by a later verifying one.
    pub verify_state_save: bool,
    pub verify_state_load: bool,
    /// `verify_header_seed`, where given: whether a written piece read back
    /// must hold this job's own seed (see `checks_own_seed`).
    pub verify_header_seed: Option<bool>,
    /// `verify_write_sequence`, where given (see `checks_write_sequence`).
    pub verify_write_sequence: Option<bool>,
    /// `verify_backlog` above 0 (dcload still checks after the writes).
    pub verify_backlog: bool,
    /// `thinktime` after every `thinktime_blocks` completions, of which
    /// `thinktime_spin` busy; `number_ios`: the job's I/O count cap (0: none).
    pub thinktime: Duration,
    pub thinktime_blocks: u32,
    pub thinktime_spin: Duration,
    pub number_ios: u64,
    /// The percentiles reported (`percentile_list`), and of which
    /// latencies (`slat_percentiles`, `clat_percentiles`, `lat_percentiles`).
    pub percentile_list: Vec<f64>,
    pub slat_percentiles: bool,
    pub clat_percentiles: bool,
    pub lat_percentiles: bool,
    /// `write_iolog`/`read_iolog`: fio's I/O logs written, or replayed;
    /// `replay_no_stall`: replayed without the log's timing.
    pub write_iolog: Option<String>,
    pub read_iolog: Option<String>,
    pub replay_no_stall: bool,
    pub do_verify: bool,
    pub invalidate: bool,
    pub fallocate: FallocateMode,
    pub unlink: bool,
    /// `allow_file_create=0`: a missing file is an error, not made.
    pub allow_file_create: bool,
    /// `atomic`: every write with RWF_ATOMIC (O_DIRECT, whole or not at all).
    pub atomic: bool,
    /// `latency_target` and its window, percentile and run options.
    pub latency: LatencyTarget,
    /// `fill_device`: write until the filesystem is full; ENOSPC (or
    /// EDQUOT) ends the job instead of failing it. Without size= the job
    /// runs over the filesystem's free space.
    pub fill_device: bool,
    /// The filestat and dirstat engines' system call.
    pub stat_type: StatType,
    /// When this job ends, the rest of its group stops (a writer with
    /// time-based readers beside it: the readers run as long as the writer).
    pub exitall: bool,
    /// `exitall_on_error`: this job failing stops every job.
    pub exitall_on_error: bool,
    /// Which jobs an `exitall` job's end stops (`exit_what`).
    pub exit_what: ExitWhat,
    /// `continue_on_error`: the kinds of error (bit 0 read, 1 write, 2
    /// verify) that are counted instead of ending the job, when their errno
    /// is in that kind's `ignore_error` list (default EIO, EILSEQ).
    pub continue_on_error: u8,
    pub ignore_error: [Vec<i32>; 3],
    /// `error_dump`: errors let pass are printed too.
    pub error_dump: bool,
    /// `steadystate`: the job ends once its rate has settled.
    pub steady: Option<SteadyState>,
    /// `nice`: the job's threads' nice value.
    pub nice: Option<i32>,
    /// `prio`/`prioclass`/`priohint`: the job's threads' I/O priority, and
    /// every I/O's on io_uring and libaio (`class << 13 | hint << 3 | level`).
    pub ioprio: Option<u16>,
    /// `cmdprio_*`: I/Os with a priority of their own (io_uring, libaio).
    pub cmdprio: Option<CmdPrio>,
    /// `cpus_allowed`/`cpumask`: the CPUs the job's threads may run on;
    /// `cpus_allowed_policy=split`: each thread on one of them in turn.
    pub cpus: Option<Vec<u32>>,
    pub cpus_split: bool,
    /// The options as written for this job (its section and command-line
    /// overrides), for the "job options" object of the JSON output.
    pub options: Vec<RawOption>,
}

/// The errnos `continue_on_error` lets pass when `ignore_error` names none
/// for the kind (fio's: EIO, and EILSEQ, a verify mismatch).
pub const NON_FATAL: [i32; 2] = [libc::EIO, libc::EILSEQ];

/// fio's default `percentile_list`.
pub const DEFAULT_PERCENTILES: [f64; 17] =
    [1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99];

/// fio's default block size.
pub const DEFAULT_BS: u64 = 4096;

/// fio's fixed seed for `randrepeat=1` without `randseed`.
pub const DEFAULT_SEED: u64 = 0x89;

impl JobSpec {
    /// Whether an error `errno` of `kind` (0 read, 1 write, 2 verify; EILSEQ
    /// is always a verify error, as fio counts it) is counted, not fatal.
    pub fn lets_pass(&self, kind: usize, errno: i32) -> bool {
        let kind = if errno == libc::EILSEQ { 2 } else { kind };
        self.continue_on_error & (1 << kind) != 0 && self.ignore_error[kind].contains(&errno)
    }

    /// How the job uses the page cache: `writebehind=`, else `direct=1`,
    /// else `uncached=1`, else buffered. (A job setting more than one is
    /// refused before it runs.)
    pub fn mode(&self) -> Mode {
        match (self.writebehind, self.direct, self.uncached) {
            (Some(p), _, _) => Mode::WriteBehind(p),
            (None, true, _) => Mode::Direct,
            (None, false, true) => Mode::Dontcache,
            (None, false, false) => Mode::Buffered,
        }
    }

    /// Whether the pieces a job reads back after its writes must hold its
    /// own seed, so that a piece another job (or another run) wrote last at
    /// that offset fails the check: by default for a job that both reads
    /// and writes (`rw`, `randrw`), without `verify_backlog`, as fio 3.33
    /// to 3.39 check the header seed; a job that only writes takes any
    /// writer's pieces for the offset (many jobs may verify one file's
    /// atomic writes, with `checks_write_sequence` off).
    /// `verify_header_seed` (fio 3.40) decides where given.
    pub fn checks_own_seed(&self) -> bool {
        let mixed = self.rw.reads() && self.rw.writes();
        self.rw.writes() && self.verify_header_seed.unwrap_or(mixed && !self.verify_backlog)
    }

    /// Whether the pieces a job reads back after its writes must each hold
    /// its last write of them, so that a write the storage lost is found
    /// though the piece holds the job's own earlier one (fio's header write
    /// sequence check): by default for a job that writes in one block size
    /// and not `time_based`, where fio checks; `verify_write_sequence`
    /// decides where given. It implies the job's own seed.
    pub fn checks_write_sequence(&self) -> bool {
        let one_size = self.block_sizes.is_fixed();
        self.rw.writes() && self.verify_write_sequence.unwrap_or(one_size && !self.time_based)
    }

    // One piece: fio's defaults as one struct literal, a line per field.
    fn defaults(name: String, origin: Origin) -> JobSpec {
        JobSpec {
            name,
            origin,
            description: None,
            filename: None,
            directory: None,
            filename_format: "$jobname.$jobnum.$filenum".into(),
            size: None,
            nrfiles: 1,
            filesize: None,
            io_size: None,
            bs: DEFAULT_BS,
            block_sizes: BlockSizes::Fixed,
            offset: 0,
            offset_increment: 0,
            rw: RwPattern { direction: Direction::Read, random: false },
            rwmixread: 50,
            numjobs: 1,
            iodepth: 1,
            iodepth_batch: 1,
            iodepth_batch_complete: 1,
            serialize_overlap: false,
            ioengine: EngineKind::Psync,
            direct: false,
            uncached: false,
            writebehind: None,
            nfs_url: None,
            cpu: CpuBurn { load: 0, cycle: Duration::from_micros(50_000), mode: CpuMode::Noop, exit_on_io_done: false },
            ring: RingSetup::default(),
            sprandom: None,
            exec: ExecProgram {
                program: None,
                arguments: None,
                grace_time: Duration::from_secs(1),
                std_redirect: true,
            },
            donorname: None,
            inplace: false,
            runtime: None,
            time_based: false,
            ramp_time: Duration::ZERO,
            startdelay: Duration::ZERO,
            loops: 1,
            group_reporting: false,
            stonewall: false,
            new_group: false,
            wait_for: None,
            end_fsync: false,
            fsync_every: 0,
            fdatasync_every: 0,
            log_avg_msec: 0,
            log_offset: false,
            log_window: LogWindow::Avg,
            log_issue_time: false,
            log_prio: false,
            per_job_logs: true,
            bw_log: None,
            hist_log: None,
            log_hist_msec: 0,
            log_hist_coarseness: 0,
            lat_log: None,
            iops_log: None,
            random_generator: RandomGenerator::Tausworthe,
            randseed: DEFAULT_SEED,
            randrepeat: true,
            norandommap: false,
            hole: 0,
            ios_per_offset: 1,
            repeat_offset: false,
            strided: false,
            zone_size: 0,
            zone_skip: 0,
            rate: [0; 2],
            rate_iops: [0; 2],
            rate_min: [0; 2],
            rate_iops_min: [0; 2],
            rate_cycle: Duration::from_millis(1000),
            rate_poisson: false,
            flow: 0,
            flow_id: 0,
            flow_sleep: Duration::ZERO,
            verify_pattern: None,
            verify_interval: 0,
            buffer_pattern: None,
            contents: BufferContents {
                compress_percentage: 0,
                compress_chunk: 512,
                dedupe_percentage: 0,
                working_set: false,
                working_set_percentage: 5,
                global: false,
            },
            verify_state_save: false,
            verify_state_load: false,
            verify_header_seed: None,
            verify_write_sequence: None,
            verify_backlog: false,
            thinktime: Duration::ZERO,
            thinktime_blocks: 1,
            thinktime_spin: Duration::ZERO,
            number_ios: 0,
            percentile_list: DEFAULT_PERCENTILES.to_vec(),
            slat_percentiles: false,
            clat_percentiles: true,
            lat_percentiles: false,
            write_iolog: None,
            read_iolog: None,
            replay_no_stall: false,
            random_distribution: RandomDistribution::Uniform,
            random_sequence_stride: false,
            blockalign: None,
            verify: None,
            do_verify: true,
            invalidate: true,
            fallocate: FallocateMode::Allocate,
            unlink: false,
            allow_file_create: true,
            fill_device: false,
            atomic: false,
            latency: LatencyTarget { target: None, window: Duration::ZERO, percentile: 100.0, run: false },
            stat_type: StatType::Stat,
            exitall: false,
            exitall_on_error: false,
            exit_what: ExitWhat::Group,
            steady: None,
            continue_on_error: 0,
            ignore_error: [NON_FATAL.to_vec(), NON_FATAL.to_vec(), NON_FATAL.to_vec()],
            error_dump: false,
            nice: None,
            ioprio: None,
            cmdprio: None,
            cpus: None,
            cpus_split: false,
            options: Vec::new(),
        }
    }

    /// Bytes of I/O one instance does per loop.
    pub fn io_bytes_per_loop(&self) -> Option<u64> {
        self.io_size.or(self.size)
    }
}

/// Interpret `layered` (weakest first; later settings win) into a job.
// One piece: one `match` arm per option of the table, so where an option is
// read is one search away; split by topic, the table would be scattered.
pub(crate) fn build(
    name: String,
    origin: Origin,
    layered: &[RawOption],
    shown: Vec<RawOption>,
    warnings: &mut Vec<String>,
) -> Result<JobSpec, SpecError> {
    let mut job = JobSpec::defaults(name, origin);
    // kb_base changes how every size reads, wherever it is written.
    let mut kb = KbBase::default();
    if let Some(o) = layered.iter().rev().find(|o| o.key == "kb_base") {
        kb = if o.value_text() == "1000" { KbBase::Si1000 } else { KbBase::Compat1024 };
    }
    let mut seed_given = false;
    let mut sprandom = SpRandomOptions::default();
    // The priority options are put together after the loop: fio reads them as one.
    let mut prio: [Option<u16>; 3] = [None; 3];
    let mut cmdprio = CmdPrioOptions::default();
    // steadystate and its window, read together after the loop.
    let mut ss_criterion = None;
    let mut ss_times = [Duration::ZERO, Duration::ZERO, Duration::from_secs(1)];
    // Per direction (read, write, trim): bs, and bsrange/bssplit's sizes.
    let mut dir_bs = [DEFAULT_BS; 3];
    let mut dir_sizes: [Option<BlockSizes>; 3] = [None, None, None];
    // Only the engine the job runs with is checked: a job file written for
    // another engine runs with the command line's --ioengine.
    let engine_at = layered.iter().rposition(|o| o.key == "ioengine");
    for (i, o) in layered.iter().enumerate() {
        if o.key == "ioengine" && Some(i) != engine_at {
            continue;
        }
        let at = |msg: String| SpecError::new(o.origin.clone(), format!("{}={}: {msg}", o.key, o.value_text()));
        let def = lookup(&o.key).ok_or_else(|| at("unknown option".into()))?;
        let text = o.value.as_deref();
        // A bare key is `1` for booleans and an error for everything that needs a value,
        // except the log options, whose bare form means "use the job name" as in fio.
        let need = || {
            text.ok_or_else(|| {
                SpecError::new(o.origin.clone(), format!("option '{}' needs a value ({}=...)", o.key, o.key))
            })
        };
        let boolean = || text.map_or(Ok(true), parse_bool).map_err(at);
        let size = || need().and_then(|t| parse_size(t, kb).map_err(at));
        let int = || need().and_then(|t| parse_uint(t).map_err(at));
        let time = || need().and_then(|t| parse_time(t, Duration::from_secs(1)).map_err(at));
        if sprandom.read(&o.key, text, kb).map_err(at)? {
            continue;
        }
        if let OptionKind::Choice(choices) = def.kind {
            // rw's `:N` suffix is read with the pattern below.
            let t = need()?.split(':').next().unwrap_or_default();
            if !choices.contains(&t) {
                return Err(at(format!("not one of: {}", choices.join(", "))));
            }
        }
        match def.name {
            "name" => {}
            "description" => job.description = Some(need()?.to_string()),
            "filename" => job.filename = Some(need()?.to_string()),
            "directory" => job.directory = Some(need()?.to_string()),
            "filename_format" => job.filename_format = need()?.to_string(),
            "size" => job.size = Some(nonzero(size()?, &at)?),
            "nrfiles" => job.nrfiles = to_u32(nonzero(int()?, &at)?, &at)?,
            "filesize" => job.filesize = Some(nonzero(size()?, &at)?),
            "io_size" => job.io_size = Some(nonzero(size()?, &at)?),
            "bs" => {
                dir_bs = each_direction(need()?, &DEFAULT_BS, |v| match parse_size(v, kb)? {
                    0 => Err("must be greater than zero".into()),
                    b if b > u32::MAX as u64 => Err("block size must be below 4 GiB".into()),
                    b => Ok(b),
                })
                .map_err(at)?;
            }
            "offset" => {
                if need()?.trim_end().ends_with('%') {
                    return Err(at("an offset in percent is not supported; give it in bytes".into()));
                }
                job.offset = size()?;
            }
            "offset_increment" => job.offset_increment = size()?,
            "bsrange" => dir_sizes = each_direction(need()?, &None, |v| parse_range(v, kb).map(Some)).map_err(at)?,
            "bssplit" => dir_sizes = each_direction(need()?, &None, |v| parse_split(v, kb).map(Some)).map_err(at)?,
            "rw" => {
                let (pattern, suffix) = need()?.split_once(':').map_or((need()?, None), |(p, n)| (p, Some(n)));
                job.rw = match pattern {
                    "read" => RwPattern { direction: Direction::Read, random: false },
                    "write" => RwPattern { direction: Direction::Write, random: false },
                    "randread" => RwPattern { direction: Direction::Read, random: true },
                    "randwrite" => RwPattern { direction: Direction::Write, random: true },
                    "rw" | "readwrite" => RwPattern { direction: Direction::Mixed, random: false },
                    "trim" => RwPattern { direction: Direction::Trim, random: false },
                    "randtrim" => RwPattern { direction: Direction::Trim, random: true },
                    "trimwrite" => RwPattern { direction: Direction::TrimWrite, random: false },
                    "randtrimwrite" => RwPattern { direction: Direction::TrimWrite, random: true },
                    _ => RwPattern { direction: Direction::Mixed, random: true },
                };
                (job.hole, job.ios_per_offset) = (0, 1);
                if let Some(n) = suffix {
                    let (negative, digits) = n.trim().strip_prefix('-').map_or((false, n.trim()), |d| (true, d));
                    let v = parse_size(digits, kb).map_err(at)?;
                    let v = i64::try_from(v).map_err(|_| at("the offset modifier is too large".into()))?;
                    if job.rw.random {
                        if negative || v == 0 {
                            return Err(at(
                                "a random pattern's :N is how many I/Os per random offset, 1 or more".into()
                            ));
                        }
                        job.ios_per_offset = u32::try_from(v).map_err(|_| at("too many I/Os per offset".into()))?;
                    } else {
                        job.hole = if negative { -v } else { v };
                    }
                }
            }
            "rw_sequencer" => job.repeat_offset = need()? == "identical",
            "rwmixread" | "rwmixwrite" => {
                let pct = percent(int()?, &at)? as u8;
                job.rwmixread = if def.name == "rwmixread" { pct } else { 100 - pct };
            }
            "numjobs" => job.numjobs = to_u32(nonzero(int()?, &at)?, &at)?,
            "iodepth" => job.iodepth = to_u32(nonzero(int()?, &at)?, &at)?,
            "iodepth_batch_submit" => job.iodepth_batch = to_u32(nonzero(int()?, &at)?, &at)?,
            // fio's 0 means "poll without waiting"; dcload always waits for one.
            "iodepth_batch_complete_min" => job.iodepth_batch_complete = to_u32(int()?.max(1), &at)?,
            "iodepth_batch_complete_max" => {
                int()?;
            }
            "serialize_overlap" => job.serialize_overlap = boolean()?,
            "ioengine" => {
                job.ioengine = match need()? {
                    "psync" => EngineKind::Psync,
                    "sync" => EngineKind::Sync("sync"),
                    "vsync" => EngineKind::Sync("vsync"),
                    "pvsync" => EngineKind::Sync("pvsync"),
                    "pvsync2" => EngineKind::Pvsync2,
                    "libaio" => EngineKind::Libaio,
                    "posixaio" => EngineKind::PosixAio,
                    "null" => EngineKind::Null,
                    "ftruncate" => EngineKind::Ftruncate,
                    "falloc" => EngineKind::Falloc,
                    "mmap" => EngineKind::Mmap,
                    "page_fault" => EngineKind::PageFault,
                    "cpuio" => EngineKind::CpuIo,
                    "e4defrag" => EngineKind::E4defrag,
                    "exec" => EngineKind::Exec,
                    name if FileOp::ALL.iter().any(|op| op.name() == name) => {
                        EngineKind::FileOp(*FileOp::ALL.iter().find(|op| op.name() == name).expect("found above"))
                    }
                    "nfs" => EngineKind::Nfs,
                    _ => EngineKind::IoUring,
                }
            }
            "direct" => job.direct = boolean()?,
            "buffered" => job.direct = !boolean()?,
            "uncached" => job.uncached = boolean()?,
            "writebehind" => job.writebehind = Some(need()?.parse::<Policy>().map_err(&at)?),
            "program" => job.exec.program = Some(need()?.to_string()),
            "arguments" => job.exec.arguments = Some(need()?.to_string()),
            "grace_time" => job.exec.grace_time = Duration::from_secs(int()?),
            "std_redirect" => job.exec.std_redirect = boolean()?,
            "sqthread_poll" => job.ring.sqthread_poll = boolean()?,
            "sqthread_poll_cpu" => {
                let cpu = cpu_list(need()?, crate::arith::ncpus()).map_err(&at)?;
                match cpu[..] {
                    [one] => job.ring.sqthread_poll_cpu = Some(one),
                    _ => return Err(at("one CPU, the poll thread's".into())),
                }
            }
            "fixedbufs" => job.ring.fixedbufs = boolean()?,
            "registerfiles" => job.ring.registerfiles = boolean()?,
            "donorname" => job.donorname = Some(need()?.to_string()),
            "inplace" => {
                job.inplace = match int()? {
                    0 => false,
                    1 => true,
                    n => return Err(at(format!("{n} is not 0 or 1"))),
                }
            }
            // fio caps the load at 100.
            "cpuload" => job.cpu.load = int()?.min(100) as u32,
            "cpuchunks" => {
                job.cpu.cycle = need().and_then(|t| parse_time(t, Duration::from_micros(1)).map_err(at))?;
                job.cpu.cycle = nonzero_time(job.cpu.cycle, &at)?;
            }
            "cpumode" => job.cpu.mode = if need()? == "qsort" { CpuMode::Qsort } else { CpuMode::Noop },
            "exit_on_io_done" => job.cpu.exit_on_io_done = boolean()?,
            "nfs_url" => {
                let url = need()?;
                if !url.starts_with("nfs://") {
                    return Err(at(format!("{url:?} is not an NFS URL: nfs://SERVER[:PORT]/EXPORT[?ARG=VAL]")));
                }
                job.nfs_url = Some(url.to_string());
            }
            "runtime" => job.runtime = Some(time()?).filter(|d| !d.is_zero()),
            "time_based" => job.time_based = boolean()?,
            "ramp_time" => job.ramp_time = time()?,
            "startdelay" => job.startdelay = time()?,
            "loops" => job.loops = to_u32(nonzero(int()?, &at)?, &at)?,
            "group_reporting" => job.group_reporting = boolean()?,
            "stonewall" => job.stonewall = boolean()?,
            "new_group" => job.new_group = boolean()?,
            "wait_for" => job.wait_for = Some(need()?.to_string()),
            "end_fsync" => job.end_fsync = boolean()?,
            "fsync" => job.fsync_every = to_u32(int()?, &at)?,
            "fdatasync" => job.fdatasync_every = to_u32(int()?, &at)?,
            "log_avg_msec" => job.log_avg_msec = to_u32(int()?, &at)?,
            "log_offset" => job.log_offset = boolean()?,
            "log_window_value" => {
                job.log_window = match need()? {
                    "max" | "1" => LogWindow::Max,
                    "both" => LogWindow::Both,
                    _ => LogWindow::Avg,
                }
            }
            "log_issue_time" => job.log_issue_time = boolean()?,
            "log_prio" => job.log_prio = boolean()?,
            "per_job_logs" => job.per_job_logs = boolean()?,
            "write_bw_log" => job.bw_log = Some(text.unwrap_or(&job.name).to_string()),
            "write_lat_log" => job.lat_log = Some(text.unwrap_or(&job.name).to_string()),
            "write_iops_log" => job.iops_log = Some(text.unwrap_or(&job.name).to_string()),
            "write_hist_log" => job.hist_log = Some(text.unwrap_or(&job.name).to_string()),
            "log_hist_msec" => job.log_hist_msec = to_u32(int()?, &at)?,
            "log_hist_coarseness" => {
                let c = int()?;
                if c > 6 {
                    return Err(at(format!("{c}: fio's coarseness is 0 to 6")));
                }
                job.log_hist_coarseness = c as u32;
            }
            "random_generator" => {
                job.random_generator = match need()? {
                    "lfsr" => RandomGenerator::Lfsr,
                    "tausworthe64" => RandomGenerator::Tausworthe64,
                    _ => RandomGenerator::Tausworthe,
                }
            }
            "randseed" => {
                job.randseed = int()?;
                seed_given = true;
            }
            "randrepeat" => job.randrepeat = boolean()?,
            "norandommap" => job.norandommap = boolean()?,
            "zonemode" => {
                job.strided = match need()? {
                    "zbd" => {
                        return Err(at(format!("zoned block devices, {}", crate::units::HARDWARE)));
                    }
                    "strided" => true,
                    _ => false,
                }
            }
            "zonesize" => job.zone_size = size()?,
            "zoneskip" => job.zone_skip = size()?,
            "rate" => job.rate = per_direction(need()?, kb).map_err(at)?,
            "rate_iops" => job.rate_iops = per_direction(need()?, kb).map_err(at)?,
            "rate_min" => job.rate_min = per_direction(need()?, kb).map_err(at)?,
            "rate_iops_min" => job.rate_iops_min = per_direction(need()?, kb).map_err(at)?,
            "rate_cycle" => job.rate_cycle = Duration::from_millis(nonzero(int()?, &at)?),
            "rate_process" => job.rate_poisson = need()? == "poisson",
            "flow" => job.flow = to_u32(int()?, &at)?,
            "flow_id" => job.flow_id = to_u32(int()?, &at)?,
            "flow_sleep" => job.flow_sleep = Duration::from_micros(int()?),
            "random_distribution" => job.random_distribution = parse_distribution(need()?, kb).map_err(at)?,
            "random_sequence_stride" => job.random_sequence_stride = boolean()?,
            "blockalign" => {
                let one = one_for_all(need()?, "blockalign").map_err(at)?;
                job.blockalign = Some(nonzero(parse_size(one, kb).map_err(at)?, &at)?);
            }
            "verify" => job.verify = Some(need()?.to_string()).filter(|v| v != "0" && v != "null"),
            "do_verify" => job.do_verify = boolean()?,
            "verify_pattern" => job.verify_pattern = Some(parse_pattern(need()?).map_err(at)?),
            "verify_interval" => job.verify_interval = nonzero(size()?, &at)?,
            "buffer_pattern" => job.buffer_pattern = Some(parse_pattern(need()?).map_err(at)?),
            "buffer_compress_percentage" => job.contents.compress_percentage = percent(int()?, &at)?,
            "buffer_compress_chunk" => job.contents.compress_chunk = nonzero(size()?, &at)?,
            "dedupe_percentage" => job.contents.dedupe_percentage = percent(int()?, &at)?,
            "dedupe_mode" => job.contents.working_set = need()? == "working_set",
            "dedupe_working_set_percentage" => job.contents.working_set_percentage = percent(int()?, &at)?,
            "dedupe_global" => job.contents.global = boolean()?,
            "thinktime" => job.thinktime = need().and_then(|t| parse_time(t, Duration::from_micros(1)).map_err(at))?,
            "thinktime_spin" => {
                job.thinktime_spin = need().and_then(|t| parse_time(t, Duration::from_micros(1)).map_err(at))?
            }
            "thinktime_blocks" => job.thinktime_blocks = to_u32(nonzero(int()?, &at)?, &at)?,
            "number_ios" => job.number_ios = int()?,
            "percentile_list" => job.percentile_list = parse_percentiles(need()?).map_err(at)?,
            "slat_percentiles" => job.slat_percentiles = boolean()?,
            "clat_percentiles" => job.clat_percentiles = boolean()?,
            "lat_percentiles" => job.lat_percentiles = boolean()?,
            "write_iolog" => job.write_iolog = Some(need()?.to_string()),
            "read_iolog" => {
                // As fio, which opens it while reading the job: a missing log is bad input.
                let name = need()?;
                std::fs::metadata(name).map_err(|e| at(format!("the log cannot be read: {e}")))?;
                job.read_iolog = Some(name.to_string());
            }
            "replay_no_stall" => job.replay_no_stall = boolean()?,
            "verify_state_save" => job.verify_state_save = boolean()?,
            "verify_state_load" => job.verify_state_load = boolean()?,
            // Taken for what fio does with them, and said where dcload differs.
            "verify_backlog" | "verify_fatal" | "verify_dump" | "io_submit_mode" | "experimental_verify" => {
                let differs = match def.name {
                    "verify_backlog" => {
                        job.verify_backlog = size()? > 0;
                        job.verify_backlog.then_some(
                            "dcload reads every written block back after the job's writes, not every N blocks \
                             during them",
                        )
                    }
                    "verify_fatal" => (!boolean()?).then_some("dcload ends a job at its first verify mismatch"),
                    "verify_dump" => boolean()?.then_some(
                        "dcload writes no dump files; a mismatch's message names the offset and whose data was there",
                    ),
                    "experimental_verify" => boolean()?.then_some(
                        "dcload checks each written block from its own record of them (fio's default way); the \
                         checks are the same",
                    ),
                    "io_submit_mode" => {
                        (need()? == "offload").then_some("dcload submits from each job's own thread (inline)")
                    }
                    _ => {
                        boolean()?;
                        None
                    }
                };
                if let Some(how) = differs {
                    warnings.push(format!("{}: job '{}': {}={}: {how}", o.origin, job.name, o.key, o.value_text()));
                }
            }
            "invalidate" => job.invalidate = boolean()?,
            "gtod_reduce" => {
                if boolean()? {
                    warnings.push(format!(
                        "{}: job '{}': gtod_reduce=1: dcload times every I/O anyway (a vDSO clock read costs tens \
                         of nanoseconds), so its output has the latencies fio's leaves at 0",
                        o.origin, job.name
                    ));
                }
            }
            "fallocate" => {
                job.fallocate = match need()? {
                    "keep" => FallocateMode::KeepSize,
                    "none" | "0" => FallocateMode::None,
                    _ => FallocateMode::Allocate,
                }
            }
            "unlink" => job.unlink = boolean()?,
            "allow_file_create" => job.allow_file_create = boolean()?,
            "fill_device" => job.fill_device = boolean()?,
            "atomic" => job.atomic = boolean()?,
            "verify_write_sequence" => job.verify_write_sequence = Some(boolean()?),
            "verify_header_seed" => job.verify_header_seed = Some(boolean()?),
            "latency_target" => {
                job.latency.target = Some(need().and_then(|t| parse_time(t, Duration::from_micros(1)).map_err(at))?)
            }
            "latency_window" => {
                job.latency.window = need().and_then(|t| parse_time(t, Duration::from_micros(1)).map_err(at))?
            }
            "latency_percentile" => {
                let v = need()?;
                job.latency.percentile = match v.parse::<f64>() {
                    Ok(p) if (0.0..=100.0).contains(&p) => p,
                    _ => return Err(at(format!("'{v}' is not a percentage (0 to 100)"))),
                }
            }
            "latency_run" => job.latency.run = boolean()?,
            "create_serialize" => {
                boolean()?;
            }
            "threads" => {
                int()?;
                warnings.push(format!(
                    "{}: threads= belongs to fio's tiobench profile, which dcload does not have; fio \
                     ignores it outside that profile, and so does dcload (numjobs= sets a job's thread count)",
                    o.origin
                ));
            }
            "stat_type" => {
                job.stat_type = match need()? {
                    "lstat" => StatType::Lstat,
                    "statx" => StatType::Statx,
                    _ => StatType::Stat,
                }
            }
            // dcload's file-making jobs (nrfiles, filecreate) always make their
            // files in the timed part; one file is open at a time.
            "create_on_open" | "openfiles" => {}
            "exitall" => job.exitall = boolean()?,
            "exitall_on_error" => job.exitall_on_error = boolean()?,
            "exit_what" => {
                job.exit_what = match need()? {
                    "stonewall" => ExitWhat::Stonewall,
                    "all" => ExitWhat::All,
                    _ => ExitWhat::Group,
                }
            }
            "kb_base" | "thread" => {}
            "nice" => {
                let n: i32 = need()?.trim().parse().map_err(|_| at("not a whole number".into()))?;
                if !(-20..=19).contains(&n) {
                    return Err(at("a nice value is -20 to 19".into()));
                }
                job.nice = Some(n);
            }
            "prio" | "prioclass" | "priohint" => {
                let (i, max) = match def.name {
                    "prio" => (0, 7),
                    "prioclass" => (1, 3),
                    _ => (2, 7),
                };
                let v = int()?;
                if v > max {
                    return Err(at(format!("{} is 0 to {max}", def.name)));
                }
                prio[i] = Some(v as u16);
            }
            "cmdprio_percentage" => cmdprio.percentage = Some(pair(need()?, 100).map_err(at)?),
            "cmdprio_class" => {
                let c = pair(need()?, 3).map_err(at)?;
                if c.contains(&0) {
                    return Err(at("a class is 1 (realtime), 2 (best-effort) or 3 (idle)".into()));
                }
                cmdprio.class = c.map(|v| v as u16);
            }
            "cmdprio" => cmdprio.level = pair(need()?, 7).map_err(at)?.map(|v| v as u16),
            "cmdprio_hint" => cmdprio.hint = pair(need()?, 7).map_err(at)?.map(|v| v as u16),
            "cmdprio_bssplit" => cmdprio.bssplit = Some(need()?.to_string()),
            "cpus_allowed" => job.cpus = Some(cpu_list(need()?, crate::arith::ncpus()).map_err(at)?),
            "cpumask" => job.cpus = Some(cpu_mask(need()?, crate::arith::ncpus()).map_err(at)?),
            "cpus_allowed_policy" => job.cpus_split = need()? == "split",
            "steadystate" => ss_criterion = Some((parse_criterion(need()?, kb).map_err(at)?, o.origin.clone())),
            "steadystate_duration" => ss_times[0] = time()?,
            "steadystate_ramp_time" => ss_times[1] = time()?,
            "steadystate_check_interval" => ss_times[2] = nonzero_time(time()?, &at)?,
            "continue_on_error" => {
                job.continue_on_error = match need()? {
                    "read" => 1,
                    "write" => 2,
                    "io" => 3,
                    "verify" => 4,
                    "all" | "1" => 7,
                    _ => 0,
                }
            }
            "ignore_error" => {
                job.ignore_error = each_error_kind(need()?).map_err(at)?;
            }
            "error_dump" => job.error_dump = boolean()?,
            "verify_async" => {
                if int()? > 0 {
                    warnings.push(format!(
                        "{}: job '{}': verify_async: dcload checks written blocks in the job's own thread, after its \
                         writes, not in separate threads",
                        o.origin, job.name
                    ));
                }
            }
            "verify_async_cpus" => {
                cpu_list(need()?, crate::arith::ncpus()).map_err(at)?;
            }
            other => return Err(at(format!("option '{other}' is registered but not interpreted (a dcload bug)"))),
        }
    }
    if !job.randrepeat && !seed_given {
        job.randseed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(DEFAULT_SEED);
    }
    // As fio: a verify_pattern without a verify= asks for verify=pattern.
    if job.verify_pattern.is_some() && !layered.iter().any(|o| o.key == "verify") {
        job.verify = Some("pattern".into());
    }
    let dirs: [(u64, BlockSizes); 3] =
        std::array::from_fn(|d| (dir_bs[d], dir_sizes[d].clone().unwrap_or(BlockSizes::Fixed)));
    if dirs.iter().all(|d| *d == dirs[0]) {
        (job.bs, job.block_sizes) = dirs[0].clone();
    } else {
        job.block_sizes = BlockSizes::PerDirection(Box::new(dirs));
    }
    match ss_criterion {
        Some(((measure, slope, limit, percent), _)) if !ss_times[0].is_zero() => {
            let [duration, ramp, interval] = ss_times;
            job.steady = Some(SteadyState { measure, slope, limit, percent, duration, ramp, interval });
        }
        Some((_, origin)) => warnings.push(format!(
            "{origin}: job '{}': steadystate does nothing without steadystate_duration (ss_dur), as in fio",
            job.name
        )),
        None => {}
    }
    if prio.iter().any(Option::is_some) {
        let [level, class, hint] = prio.map(Option::unwrap_or_default);
        job.ioprio = Some(ioprio_value(class, level, hint));
    }
    job.cmdprio =
        cmdprio.build(kb).map_err(|e| SpecError::new(job.origin.clone(), format!("job '{}': {e}", job.name)))?;
    let cmdprio_given = layered.iter().any(|o| o.key.starts_with("cmdprio"));
    if cmdprio_given && !matches!(job.ioengine, EngineKind::IoUring | EngineKind::Libaio) {
        return Err(SpecError::new(
            job.origin.clone(),
            format!(
                "job '{}': cmdprio options are fio's io_uring and libaio engines' (this job's engine is {}): use \
                 one of those, or prio/prioclass for every I/O",
                job.name,
                job.ioengine.name()
            ),
        ));
    }
    let ring_given = layered.iter().any(|o| RING_OPTIONS.contains(&o.key.as_str()));
    if ring_given && job.ioengine != EngineKind::IoUring {
        return Err(SpecError::new(
            job.origin.clone(),
            format!(
                "job '{}': sqthread_poll, sqthread_poll_cpu, fixedbufs and registerfiles set up fio's io_uring \
                 engine's ring (this job's engine is {}): use ioengine=io_uring, or drop them",
                job.name,
                job.ioengine.name()
            ),
        ));
    }
    // The kernel's poll thread looks up registered files only (before 5.11),
    // so fio registers the file whenever it polls; dcload does the same.
    job.ring.registerfiles |= job.ring.sqthread_poll;
    if job.ring.sqthread_poll_cpu.is_some() && !job.ring.sqthread_poll {
        warnings.push(format!(
            "{}: job '{}': sqthread_poll_cpu does nothing without sqthread_poll=1 (as in fio)",
            job.origin, job.name
        ));
    }
    if job.cmdprio.is_some() {
        warnings.push(format!(
            "{}: job '{}': dcload reports one latency distribution per direction, where fio also splits it by \
             priority (clat_prio in its JSON); the latency logs' priority column (log_prio=1) tells the I/Os apart",
            job.origin, job.name
        ));
    }
    if cmdprio_given && job.cmdprio.is_none() {
        warnings.push(format!(
            "{}: job '{}': cmdprio_class, cmdprio and cmdprio_hint do nothing without cmdprio_percentage or \
             cmdprio_bssplit, as in fio",
            job.origin, job.name
        ));
    }
    job.options = shown;
    sprandom
        .apply(&mut job, warnings)
        .map_err(|e| SpecError::new(job.origin.clone(), format!("job '{}': {e}", job.name)))?;
    check(&mut job, warnings)?;
    Ok(job)
}

/// `ignore_error=READ,WRITE,VERIFY`: each a `:` list of errno names or
/// numbers; an empty or missing kind keeps fio's default (EIO, EILSEQ).
fn each_error_kind(text: &str) -> Result<[Vec<i32>; 3], String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.len() > 3 {
        return Err("give at most READ,WRITE,VERIFY lists".into());
    }
    let mut kinds = [NON_FATAL.to_vec(), NON_FATAL.to_vec(), NON_FATAL.to_vec()];
    for (kind, list) in kinds.iter_mut().zip(&parts) {
        if list.is_empty() {
            continue;
        }
        *kind = list.split(':').map(str::trim).filter(|e| !e.is_empty()).map(errno_of).collect::<Result<_, _>>()?;
    }
    Ok(kinds)
}

/// An errno by its name (`ENOSPC`) or number.
fn errno_of(name: &str) -> Result<i32, String> {
    dc_vocab::errno_by_name(name).ok_or_else(|| format!("'{name}' is not an errno name dcload knows; give its number"))
}

/// `percentile_list=P:P:...`: at most 20, each within 0-100, in order.
fn parse_percentiles(text: &str) -> Result<Vec<f64>, String> {
    let mut list = Vec::new();
    for p in text.split(':').map(str::trim).filter(|p| !p.is_empty()) {
        let v: f64 = p.parse().map_err(|_| format!("'{p}' is not a percentile"))?;
        if !(0.0..=100.0).contains(&v) {
            return Err(format!("{v} is not within 0-100"));
        }
        list.push(v);
    }
    if list.is_empty() || list.len() > 20 {
        return Err(format!("give 1 to 20 percentiles (fio's limit), not {}", list.len()));
    }
    list.sort_by(f64::total_cmp);
    Ok(list)
}

/// fio's `READ,WRITE,TRIM` for a rate: an empty entry is no cap; trims are
/// not rate-capped here, so their value is read and not used.
fn per_direction(text: &str, kb: KbBase) -> Result<[u64; 2], String> {
    let [read, write, _trim] = each_direction(text, &0, |t| parse_size(t, kb))?;
    Ok([read, write])
}

fn nonzero_time(v: Duration, at: &dyn Fn(String) -> SpecError) -> Result<Duration, SpecError> {
    if v.is_zero() {
        Err(at("must be greater than zero".into()))
    } else {
        Ok(v)
    }
}

fn percent(v: u64, at: &dyn Fn(String) -> SpecError) -> Result<u32, SpecError> {
    if v > 100 {
        return Err(at(format!("{v} is not a percentage (0-100)")));
    }
    Ok(v as u32)
}

fn nonzero(v: u64, at: &dyn Fn(String) -> SpecError) -> Result<u64, SpecError> {
    if v == 0 {
        Err(at("must be greater than zero".into()))
    } else {
        Ok(v)
    }
}

fn to_u32(v: u64, at: &dyn Fn(String) -> SpecError) -> Result<u32, SpecError> {
    u32::try_from(v).map_err(|_| at("is too large".into()))
}

/// The file-operation engines: one operation per file of the job, in
/// order, when the file's first I/O comes; `size` is `nrfiles x filesize`.
fn check_file_op(job: &mut JobSpec, op: FileOp) -> Result<(), SpecError> {
    let err = |m: String| Err(SpecError::new(job.origin.clone(), format!("job '{}': {m}", job.name)));
    let name = op.name();
    let Some(filesize) = job.filesize.or(job.size.filter(|_| job.nrfiles == 1)) else {
        return err(format!("ioengine={name} needs filesize= (each file's share of the job's I/O), as in fio"));
    };
    if job.rw.random || job.time_based || job.loops > 1 {
        return err(format!(
            "ioengine={name} goes through the job's files once, in order: drop rw=rand*, time_based and loops"
        ));
    }
    if job.verify.is_some() {
        return err(format!("ioengine={name} moves no data: drop verify"));
    }
    if job.offset > 0 || job.offset_increment > 0 {
        return err(format!(
            "ioengine={name} goes through the job's files from the first: drop offset and offset_increment"
        ));
    }
    if filesize % job.bs != 0 {
        return err(format!("filesize={filesize} must be a multiple of bs={}", job.bs));
    }
    // A smaller size= (or io_size=) caps the I/O, so only the first files
    // see their operation, as in fio.
    let total = filesize * u64::from(job.nrfiles);
    let cap = job.io_size.or(job.size).filter(|&s| s < total);
    job.filesize = Some(filesize);
    job.size = Some(total);
    job.io_size = cap;
    Ok(())
}

/// The verify interval of a verified job, as fio sets it: the one given,
/// else bs (the smallest size when sizes vary); no more than the smallest
/// size; else the greatest common divisor of the smallest and largest.
/// dcload then takes the greatest common divisor of that and every size
/// the job can issue, so each I/O is whole pieces (fio would leave a
/// bssplit size that is not a multiple of it half covered).
/// ioengine=exec needs its program and a runtime to run it for; its
/// options on another engine's job (a `[global]` section's) are ignored, as
/// fio ignores them, with a warning.
fn check_exec(job: &JobSpec, warnings: &mut Vec<String>) -> Result<(), SpecError> {
    let err = |m: String| Err(SpecError::new(job.origin.clone(), format!("job '{}': {m}", job.name)));
    let given = job.exec.program.is_some() || job.exec.arguments.is_some();
    if job.ioengine != EngineKind::Exec {
        if given {
            warnings.push(format!(
                "job '{}': program= and arguments= are ioengine=exec's options; ignored with ioengine={}",
                job.name,
                job.ioengine.name()
            ));
        }
        return Ok(());
    }
    if job.exec.program.is_none() {
        return err("ioengine=exec needs program= (the program to run beside the other jobs)".into());
    }
    if job.runtime.is_none() {
        // fio stops the program once the job's runtime is over; without one
        // it stops it at its first check, 50 ms in.
        return err("ioengine=exec runs program= for the job's runtime=: give one".into());
    }
    Ok(())
}

/// `atomic=1`: RWF_ATOMIC goes on pvsync2, io_uring and libaio writes
/// only, and only with O_DIRECT, which it implies (as fio's does). A job
/// that does not write has nothing to make atomic (fio drops it there).
fn check_atomic(job: &mut JobSpec) -> Result<(), SpecError> {
    if !job.atomic {
        return Ok(());
    }
    if !job.rw.writes() {
        job.atomic = false;
        return Ok(());
    }
    if !matches!(job.ioengine, EngineKind::Pvsync2 | EngineKind::IoUring | EngineKind::Libaio) {
        return Err(SpecError::new(
            job.origin.clone(),
            format!(
                "job '{}': atomic=1 puts RWF_ATOMIC on each write, which ioengine={} cannot carry: use pvsync2, \
                 io_uring or libaio",
                job.name,
                job.ioengine.name()
            ),
        ));
    }
    if job.writebehind.is_some() || job.uncached {
        let other = if job.uncached { "uncached=1" } else { "writebehind=" };
        return Err(SpecError::new(
            job.origin.clone(),
            format!("job '{}': atomic=1 writes with O_DIRECT, and {other} is buffered I/O: drop one", job.name),
        ));
    }
    job.direct = true;
    Ok(())
}

fn verify_interval(job: &JobSpec) -> u64 {
    let (min, max) = (job.block_sizes.smallest(job.bs), job.bs);
    let mut interval = if job.verify_interval > 0 { job.verify_interval.min(min) } else { min };
    if !min.is_multiple_of(interval) || !max.is_multiple_of(interval) {
        interval = gcd(min, max);
    }
    gcd(interval, job.block_sizes.granule(job.bs))
}

/// Checks across options; each message says what to change.
// One piece: a list of short, independent checks run in one order (an
// earlier one may adjust the job a later one looks at); each names its fix.
fn check(job: &mut JobSpec, warnings: &mut Vec<String>) -> Result<(), SpecError> {
    check_atomic(job)?;
    let err = |m: String| Err(SpecError::new(job.origin.clone(), format!("job '{}': {m}", job.name)));
    if !job.block_sizes.is_fixed() {
        job.bs = job.block_sizes.largest(job.bs);
        if job.bs > u32::MAX as u64 {
            return err("block sizes must be below 4 GiB".into());
        }
        if job.nrfiles > 1 {
            return err("nrfiles= writes each file in blocks of one size: drop bsrange/bssplit, or nrfiles".into());
        }
    }
    if job.verify.is_some() {
        job.verify_interval = verify_interval(job);
    }
    if job.offset > 0 || job.offset_increment > 0 {
        if job.nrfiles > 1 {
            return err("nrfiles= writes each new file from its start: drop offset and offset_increment".into());
        }
        // A writer's pieces start where it writes; a reader checks pieces laid
        // out from the file's start, so its own must start on one of them.
        let interval = job.verify_interval;
        if job.verify.is_some()
            && job.rw.reads()
            && (!job.offset.is_multiple_of(interval) || !job.offset_increment.is_multiple_of(interval))
        {
            return err(format!(
                "verify= reads pieces of verify_interval={interval} laid out from the file's start: a job that \
                 reads needs offset and offset_increment to be multiples of it"
            ));
        }
    }
    match job.verify.as_deref() {
        Some("pattern") if job.verify_pattern.is_none() => {
            return err("verify=pattern needs verify_pattern= (the bytes every block holds)".into());
        }
        Some("pattern") => {}
        Some(v) => {
            for (given, name) in
                [(job.verify_pattern.is_some(), "verify_pattern"), (job.buffer_pattern.is_some(), "buffer_pattern")]
            {
                if given {
                    warnings.push(format!(
                        "{}: job '{}': {name} is not written with verify={v}: dcload's blocks carry their own \
                         content, which the verify checks byte for byte (use verify=pattern to write and check the \
                         pattern)",
                        job.origin, job.name
                    ));
                }
            }
        }
        None => {}
    }
    if job.verify.is_none() && (job.verify_state_save || job.verify_state_load) {
        return err("verify_state_save/verify_state_load record and check verified blocks: give verify= too".into());
    }
    if job.read_iolog.is_some() {
        if job.verify.is_some() {
            return err(
                "verify= checks the blocks of the job's own pattern; with read_iolog the log decides the I/O: \
                        drop one of them"
                    .into(),
            );
        }
        if job.nrfiles > 1 || job.ioengine.is_diskless() && job.ioengine == EngineKind::Nfs {
            return err("read_iolog replays onto one local file: drop nrfiles (or ioengine=nfs)".into());
        }
    }
    if job.strided {
        if job.zone_size == 0 {
            return err("zonemode=strided needs zonesize= (the bytes of I/O in each zone)".into());
        }
        if job.rw.random {
            return err("zonemode=strided strides sequential jobs here; random I/O within zones (zonerange) is not \
                 supported: use a sequential rw=, or offset/size for one zone"
                .into());
        }
        let unit = job.block_sizes.smallest(job.bs);
        if !job.zone_size.is_multiple_of(unit) || !job.zone_skip.is_multiple_of(unit) {
            return err(format!("zonesize and zoneskip must be multiples of the block size ({})", unit));
        }
    } else if job.zone_size > 0 || job.zone_skip > 0 {
        warnings.push(format!(
            "{}: job '{}': zonesize/zoneskip have no effect without zonemode=strided, as in fio",
            job.origin, job.name
        ));
    }
    if job.rate_poisson && job.rate == [0; 2] && job.rate_iops == [0; 2] {
        return err("rate_process=poisson spaces capped I/Os: give rate= or rate_iops= too".into());
    }
    if !job.random_distribution.is_uniform() && !job.rw.random {
        warnings.push(format!(
            "{}: job '{}': random_distribution has no effect on a sequential rw=, as in fio",
            job.origin, job.name
        ));
    }
    if let Some(ba) = job.blockalign {
        if job.verify.is_some() && ba % job.verify_interval != 0 {
            return err(format!(
                "verify= checks pieces of verify_interval={}: blockalign={ba} would let them overlap; drop \
                 blockalign, or make it a multiple",
                job.verify_interval
            ));
        }
    }
    if job.time_based && job.runtime.is_none() {
        warnings.push(format!(
            "{}: job '{}': time_based needs runtime= (how long to run); ignored, the job runs until its size is \
             done, as fio does",
            job.origin, job.name
        ));
        job.time_based = false;
    }
    if job.direct && job.uncached {
        return err(
            "direct=1 and uncached=1 exclude each other: O_DIRECT bypasses the page cache that RWF_DONTCACHE manages"
                .into(),
        );
    }
    let logs = job.bw_log.is_some() || job.iops_log.is_some() || job.lat_log.is_some() || job.hist_log.is_some();
    if job.hist_log.is_some() && job.log_hist_msec == 0 {
        warnings.push(format!(
            "{}: job '{}': write_hist_log without log_hist_msec writes no entries (as in fio): set log_hist_msec",
            job.origin, job.name
        ));
    }
    if job.log_issue_time && (job.lat_log.is_none() || !job.log_offset) {
        return err("log_issue_time=1 needs write_lat_log and log_offset=1 (as in fio): add them, or drop it".into());
    }
    if !job.per_job_logs && logs && job.numjobs > 1 {
        return err(format!(
            "per_job_logs=0 with numjobs={}: the instances would write one log file; dcload writes a file per \
             instance: drop per_job_logs=0 (its files are <prefix>_bw.<n>.log)",
            job.numjobs
        ));
    }
    if job.ioengine == EngineKind::Nfs && job.nfs_url.is_none() {
        return err("ioengine=nfs needs nfs_url=nfs://SERVER/EXPORT (the server and export the files are on)".into());
    }
    if job.contents.is_set() && (job.verify.is_some() || job.buffer_pattern.is_some()) {
        return err("buffer_compress_percentage= and dedupe_percentage= make their own buffer contents, and so do \
             verify= and buffer_pattern=: drop one of them"
            .into());
    }
    if job.ioengine == EngineKind::E4defrag {
        if job.donorname.is_none() {
            return err("ioengine=e4defrag needs donorname= (the file whose blocks each write moves in)".into());
        }
        if job.rw.direction != Direction::Write {
            return err(
                "ioengine=e4defrag moves blocks into the file and only writes: use rw=write or randwrite".into()
            );
        }
        if job.verify.is_some() || job.writebehind.is_some() || job.uncached {
            return err("ioengine=e4defrag moves blocks and transfers no data: drop verify=, writebehind= and \
                 uncached="
                .into());
        }
    } else if job.donorname.is_some() || job.inplace {
        // fio lets a [global] section give them to every job and ignores
        // them on other engines' jobs.
        warnings.push(format!(
            "job '{}': donorname= and inplace= are ioengine=e4defrag's options; ignored with ioengine={}",
            job.name,
            job.ioengine.name()
        ));
    }
    let cpu_given = job.cpu.load > 0 || job.cpu.exit_on_io_done;
    if job.ioengine == EngineKind::CpuIo && job.cpu.load == 0 {
        return err("ioengine=cpuio needs cpuload= (the percent of a CPU to burn, 1-100)".into());
    }
    if job.ioengine != EngineKind::CpuIo && cpu_given {
        warnings.push(format!(
            "job '{}': cpuload= and exit_on_io_done= are ioengine=cpuio's options; ignored with ioengine={}",
            job.name,
            job.ioengine.name()
        ));
    }
    if job.ioengine == EngineKind::CpuIo && job.runtime.is_none() && !job.cpu.exit_on_io_done {
        return err("ioengine=cpuio burns the CPU for runtime=: give one, or exit_on_io_done=1 to end with the \
             other jobs"
            .into());
    }
    check_exec(job, warnings)?;
    if job.ioengine != EngineKind::Nfs && job.nfs_url.is_some() {
        return err(format!("nfs_url= is ioengine=nfs's option; this job's engine is {}", job.ioengine.name()));
    }
    if job.ioengine == EngineKind::PageFault {
        if job.offset > 0 || job.offset_increment > 0 || job.nrfiles > 1 {
            return err("ioengine=page_fault works over one mapping from its start: drop offset and nrfiles, as fio \
                 refuses them"
                .into());
        }
        if job.verify.is_some() {
            return err("verify= is not supported with ioengine=page_fault: drop it, or use ioengine=mmap".into());
        }
    }
    if job.ioengine.is_diskless() {
        let what = match job.ioengine {
            EngineKind::Nfs => "the NFS server's io mode decides how its page cache is used",
            EngineKind::FileOp(_) => "its I/O is file operations, no data",
            EngineKind::PageFault => "its I/O is copies to and from anonymous memory",
            _ => "it does no I/O",
        };
        if job.writebehind.is_some() {
            return err(format!(
                "writebehind= is buffered I/O on a local file through libdontcache, and with ioengine={} {what}: drop \
                 one of them",
                job.ioengine.name()
            ));
        }
        // fio takes these and does nothing with them on its null and nfs
        // engines; dcload does the same but says so.
        for (set, name) in [(job.direct, "direct=1"), (job.uncached, "uncached=1")] {
            if set {
                warnings.push(format!(
                    "{}: job '{}': {name} has no effect with ioengine={}: {what}",
                    job.origin,
                    job.name,
                    job.ioengine.name()
                ));
            }
        }
        job.direct = false;
        job.uncached = false;
    }
    if job.uncached
        && matches!(job.ioengine, EngineKind::Psync | EngineKind::Sync(_) | EngineKind::PosixAio | EngineKind::Mmap)
    {
        return err(format!(
            "uncached=1 needs ioengine=pvsync2, io_uring or libaio: {}'s I/O cannot carry RWF_DONTCACHE",
            job.ioengine.name()
        ));
    }
    if job.iodepth > 1 && !job.ioengine.is_async() {
        // fio runs this at depth 1 without a word; dcload does the same but says so,
        // and the warning lands in the output next to the numbers it qualifies.
        warnings.push(format!(
            "{}: job '{}': iodepth={} has no effect with ioengine={}, which issues one I/O at a time; running at depth 1",
            job.origin,
            job.name,
            job.iodepth,
            job.ioengine.name()
        ));
        job.iodepth = 1;
    }
    // One file (fio's default nrfiles=1): filesize= is that file's size,
    // and a size= beside it the bytes of I/O over it, as in fio.
    if job.nrfiles == 1 {
        if let Some(filesize) = job.filesize.take() {
            if let Some(total) = job.size.filter(|&s| s != filesize) {
                job.io_size.get_or_insert(total);
            }
            job.size = Some(filesize);
        }
    }
    if let EngineKind::FileOp(op) = job.ioengine {
        return check_file_op(job, op);
    }
    if job.ioengine == EngineKind::Ftruncate {
        if job.rw.direction != Direction::Write {
            return err(
                "ioengine=ftruncate's I/O is ftruncate(2) to each write's offset: use rw=write or randwrite".into()
            );
        }
        if job.verify.is_some() || job.writebehind.is_some() || job.uncached {
            return err("ioengine=ftruncate moves no data: drop verify, writebehind and uncached".into());
        }
    }
    if job.rw.trims() {
        if !matches!(job.ioengine, EngineKind::Falloc | EngineKind::Null) {
            return err(format!(
                "trims run on ioengine=falloc (a hole punched) or null: fio trims with BLKDISCARD, which only block \
                 devices take (on a file, {}'s trims fail with ENOTTY)",
                job.ioengine.name()
            ));
        }
        if job.verify.is_some() {
            return err("verify= with trims: a trimmed range reads back as zeroes; drop verify".into());
        }
    }
    if job.ioengine == EngineKind::Falloc && (job.verify.is_some() || job.writebehind.is_some() || job.uncached) {
        return err(
            "ioengine=falloc moves no data (each I/O is fallocate(2)): drop verify, writebehind and uncached".into()
        );
    }
    if job.nrfiles > 1 {
        let Some(filesize) = job.filesize else {
            return err("nrfiles= needs filesize= (the size of each file)".into());
        };
        if job.rw.direction != Direction::Write || job.rw.random {
            return err("nrfiles= creates new files and writes each once: it needs rw=write".into());
        }
        if !matches!(job.ioengine, EngineKind::Psync | EngineKind::Pvsync2 | EngineKind::Sync(_)) {
            return err(format!(
                "nrfiles= works with the file engines that do one I/O at a time (psync, pvsync2, sync, vsync, \
                 pvsync), not {}",
                job.ioengine.name()
            ));
        }
        if job.verify.is_some()
            || job.time_based
            || job.loops > 1
            || job.io_size.is_some()
            || job.filename.is_some()
            || job.unlink
        {
            return err("nrfiles= writes each new file once: drop verify, time_based, loops, io_size, unlink and filename (files are named by filename_format's $filenum)".into());
        }
        if job.end_fsync || job.fsync_every > 0 || job.fdatasync_every > 0 {
            return err("nrfiles= writes without syncing (fs_mark -S0): drop fsync, fdatasync and end_fsync".into());
        }
        if filesize % job.bs != 0 {
            return err(format!("filesize={filesize} must be a multiple of bs={}", job.bs));
        }
        let total = filesize * u64::from(job.nrfiles);
        if job.size.is_some_and(|s| s != total) {
            return err(format!("size= must be nrfiles x filesize ({total}) or left out"));
        }
        job.size = Some(total);
    }
    if job.serialize_overlap && job.ioengine.is_async() && job.iodepth > 1 {
        return err(format!(
            "serialize_overlap=1: dcload does not hold back an I/O that overlaps one in flight, so it takes this \
             only with one I/O in flight: set iodepth=1 (this job has {} on {})",
            job.iodepth,
            job.ioengine.name()
        ));
    }
    if job.fsync_every > 0 && job.fdatasync_every > 0 {
        return err("give either fsync= or fdatasync=, not both".into());
    }
    if let (Some(size), Some(_)) = (job.size, &job.filename) {
        if size < job.bs {
            return err(format!("size={size} is smaller than bs={}", job.bs));
        }
    }
    Ok(())
}
