//! The options dcload understands, with their kinds and help, and the check
//! that turns anything else into an error (or, under `--ignore-unknown`, a
//! recorded warning). Silently ignoring an option would silently change what
//! is measured, which is the failure this project exists to prevent.

use crate::{RawOption, SpecError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    Text,
    Size,
    Int,
    Bool,
    /// A time; bare numbers are seconds.
    Time,
    Choice(&'static [&'static str]),
}

#[derive(Debug, Clone, Copy)]
pub struct OptionDef {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub kind: OptionKind,
    pub help: &'static str,
}

const fn opt(name: &'static str, kind: OptionKind, help: &'static str) -> OptionDef {
    OptionDef { name, aliases: &[], kind, help }
}

const fn alias(
    name: &'static str,
    aliases: &'static [&'static str],
    kind: OptionKind,
    help: &'static str,
) -> OptionDef {
    OptionDef { name, aliases, kind, help }
}

use OptionKind::*;

pub const RW_CHOICES: &[&str] = &[
    "read",
    "write",
    "randread",
    "randwrite",
    "rw",
    "readwrite",
    "randrw",
    "trim",
    "randtrim",
    "trimwrite",
    "randtrimwrite",
];
pub const ENGINE_CHOICES: &[&str] = &[
    "psync",
    "pvsync2",
    "io_uring",
    "libaio",
    "posixaio",
    "sync",
    "vsync",
    "pvsync",
    "null",
    "nfs",
    "filecreate",
    "filestat",
    "filedelete",
    "dircreate",
    "dirstat",
    "dirdelete",
    "ftruncate",
    "falloc",
    "mmap",
    "page_fault",
    "cpuio",
    "e4defrag",
    "exec",
];
/// fio's verify names. dcload checks every one of them the same, stronger
/// way (regenerating each block's self-describing content and comparing all
/// bytes), so the name only records what the job file asked for.
pub const VERIFY_CHOICES: &[&str] = &[
    "0",
    "1",
    "md5",
    "crc64",
    "crc32c",
    "crc32c-intel",
    "crc32",
    "crc16",
    "crc7",
    "xxhash",
    "sha512",
    "sha256",
    "sha1",
    "sha3-224",
    "sha3-256",
    "sha3-384",
    "sha3-512",
    "meta",
    "pattern",
    "null",
];

/// Every option dcload accepts, in the order `--help` lists them.
pub const OPTIONS: &[OptionDef] = &[
    opt("name", Text, "start a new job (command line) with this name"),
    opt("description", Text, "free text describing the job"),
    opt("filename", Text, "file to do I/O on (shared by all numjobs instances)"),
    opt("directory", Text, "directory for files named by filename_format"),
    opt("filename_format", Text, "file name pattern: $jobname, $jobnum, $filenum (default $jobname.$jobnum.$filenum)"),
    opt("size", Size, "bytes of file each job does I/O over"),
    alias(
        "nrfiles",
        &["nr_files"],
        Int,
        "new files each job creates and writes one after another (with filesize=, rw=write)",
    ),
    opt(
        "filesize",
        Size,
        "size of each of the nrfiles files; with one file, its size (a size= beside it is the I/O done over it)",
    ),
    alias("io_size", &["io_limit"], Size, "bytes of I/O to do (default: size); may wrap around the file"),
    alias("bs", &["blocksize"], Size, "block size of each I/O (default 4k)"),
    opt("offset", Size, "start the job's I/O this many bytes into the file (default 0)"),
    opt(
        "offset_increment",
        Size,
        "each further instance (numjobs) starts this much further in: instance N at offset + N x increment",
    ),
    alias(
        "bsrange",
        &["blocksize_range"],
        Text,
        "MIN-MAX: each I/O a multiple of MIN up to MAX, drawn uniformly (offsets are multiples of MIN)",
    ),
    opt(
        "bssplit",
        Text,
        "SIZE/PERCENT:SIZE/PERCENT:...: each size gets its share of the I/Os; entries without a percentage \
         share what is left",
    ),
    alias(
        "rw",
        &["readwrite"],
        Choice(RW_CHOICES),
        "I/O pattern (default read; trims on ioengine=falloc or null); PATTERN:N skips N bytes after each \
         sequential I/O (negative: backwards), or does N I/Os per random offset",
    ),
    opt(
        "rw_sequencer",
        Choice(&["sequential", "identical"]),
        "with rw=randPATTERN:N, the I/Os after each random offset continue from it (sequential, default) or \
         repeat it (identical)",
    ),
    opt("rwmixread", Int, "percentage of reads in rw/randrw (default 50)"),
    opt("rwmixwrite", Int, "percentage of writes in rw/randrw"),
    opt("numjobs", Int, "identical instances of the job, one thread each (default 1)"),
    opt("iodepth", Int, "I/Os in flight per job with io_uring, libaio or null (default 1)"),
    alias(
        "iodepth_batch_submit",
        &["iodepth_batch"],
        Int,
        "I/Os handed to io_uring per submit (default 1, as fio: each I/O is submitted at once)",
    ),
    alias(
        "iodepth_batch_complete_min",
        &["iodepth_batch_complete"],
        Int,
        "completions to wait for when reaping (default 1; never more than are in flight)",
    ),
    opt("iodepth_batch_complete_max", Int, "accepted: dcload takes every completion there is when it reaps"),
    opt(
        "serialize_overlap",
        Bool,
        "never have two overlapping I/Os in flight: dcload takes it where that holds anyway (one I/O in flight)",
    ),
    opt(
        "ioengine",
        Choice(ENGINE_CHOICES),
        "psync (pread/pwrite), pvsync2 (preadv2/pwritev2), io_uring, libaio (Linux native AIO); sync, vsync, \
         pvsync run as psync; null completes every I/O at once without a file (measures dcload itself); \
         nfs: a file on an NFSv3 server through libnfs, see nfs_url; filecreate, filestat, filedelete, \
         dircreate, dirstat, dirdelete: each of the job's files (nrfiles, filesize) created, stat'ed or \
         removed (or a directory of its name) at its first I/O, no data moved; ftruncate: each write \
         truncates the file to its offset; page_fault: copies to and from anonymous memory of the job's size, \
         each page faulted in at its first touch, no file; cpuio: no I/O, the job burns cpuload percent of a \
         CPU; e4defrag: each write moves its range's blocks from donorname into the file (ext4's \
         EXT4_IOC_MOVE_EXT), the data unchanged; exec: no I/O, the job runs program= for its runtime (default psync)",
    ),
    opt(
        "cpuload",
        Int,
        "ioengine=cpuio: percent of a CPU to burn, 1-100 (above 100 is 100); each cycle of cpuchunks is burnt, \
         then slept for the rest",
    ),
    opt("cpuchunks", Time, "ioengine=cpuio: one burn cycle (default 50000, unit: microseconds)"),
    opt(
        "cpumode",
        Choice(&["noop", "qsort"]),
        "ioengine=cpuio: noop spins (default); qsort sorts 1 MiB of numbers four ways per cycle, the cycle \
         being as long as that takes",
    ),
    opt("exit_on_io_done", Bool, "ioengine=cpuio: end when every other job of the wave has"),
    opt(
        "program",
        Text,
        "ioengine=exec: the program to start with the job (found in PATH), sent SIGTERM when its runtime is over",
    ),
    opt(
        "arguments",
        Text,
        "ioengine=exec: the program's arguments, split at spaces; %r is the job's runtime in seconds, %n its name",
    ),
    opt("grace_time", Int, "ioengine=exec: seconds between SIGTERM and SIGKILL at the end (default 1)"),
    opt(
        "std_redirect",
        Bool,
        "ioengine=exec: the program's stdout and stderr go to NAME.stdout and NAME.stderr (default 1); 0: dcload's",
    ),
    opt(
        "buffer_compress_percentage",
        Int,
        "written buffers this percent compressible, refilled per write: each buffer_compress_chunk random bytes, \
         then zeros (0-100)",
    ),
    opt("buffer_compress_chunk", Size, "the piece buffer_compress_percentage applies to (default 512)"),
    opt(
        "dedupe_percentage",
        Int,
        "this percent of writes repeat an earlier buffer, the rest are new ones (refilled per write; 0-100)",
    ),
    opt(
        "dedupe_mode",
        Choice(&["repeat", "working_set"]),
        "what a repeated buffer repeats: the previous new one (repeat, default), or one of a fixed set of \
         dedupe_working_set_percentage of the job's size (working_set)",
    ),
    opt("dedupe_working_set_percentage", Int, "dedupe_mode=working_set: the set's share of the job's size (default 5)"),
    opt("dedupe_global", Bool, "dedupe_mode=working_set: the jobs that set it share one working set"),
    opt(
        "donorname",
        Text,
        "ioengine=e4defrag: the donor file whose blocks each write moves in (beside the job's file, made if \
         missing)",
    ),
    opt(
        "inplace",
        Int,
        "ioengine=e4defrag: 0 allocates the donor for the whole job first (default), 1 allocates each I/O's \
         range just before it and truncates the donor after",
    ),
    opt(
        "nfs_url",
        Text,
        "ioengine=nfs's server: nfs://SERVER[:PORT]/EXPORT[?ARG=VAL&...] with libnfs's arguments \
         (nfsport=, mountport=, uid=, gid=, ...); filename= is a path inside the export",
    ),
    opt("direct", Bool, "O_DIRECT I/O; buffers aligned to the device's logical block size"),
    opt("buffered", Bool, "the inverse of direct"),
    opt(
        "atomic",
        Bool,
        "each write with RWF_ATOMIC: on disk whole or not at all (implies direct=1; pvsync2, io_uring or libaio; \
         the file must take writes of bs atomically: statx's atomic write units, e.g. on XFS)",
    ),
    opt("uncached", Bool, "RWF_DONTCACHE (0x80) on every read and write (pvsync2, io_uring or libaio)"),
    opt(
        "sqthread_poll",
        Bool,
        "io_uring: a kernel thread takes the I/Os off the ring (SQPOLL): no system call per submit while it is \
         awake (implies registerfiles, as fio)",
    ),
    opt("sqthread_poll_cpu", Int, "io_uring: the CPU sqthread_poll's kernel thread is bound to"),
    opt("fixedbufs", Bool, "io_uring: the I/O buffers registered with the ring once (READ_FIXED/WRITE_FIXED)"),
    opt("registerfiles", Bool, "io_uring: the file registered with the ring once, not looked up per I/O"),
    opt("writebehind", Text, "libdontcache write-behind policy (dcload --list-modes names them)"),
    alias("runtime", &["timeout"], Time, "stop after this long (default unit: seconds)"),
    opt("time_based", Bool, "run for the whole runtime, wrapping around the file"),
    opt("ramp_time", Time, "run this long before recording statistics"),
    opt("startdelay", Time, "wait this long before starting the job"),
    opt("loops", Int, "repeat the job this many times (default 1)"),
    opt("group_reporting", Bool, "report each stonewall group as one job"),
    alias("stonewall", &["wait_for_previous"], Bool, "wait for all earlier jobs to finish first (starts a new group)"),
    opt(
        "wait_for",
        Text,
        "start only when every instance of the named earlier job has ended; the jobs beside it keep running",
    ),
    opt("new_group", Bool, "start a new reporting group without waiting"),
    opt("end_fsync", Bool, "fsync the file when the job ends (counted in its runtime)"),
    opt("fsync", Int, "fsync after every N writes"),
    opt("fdatasync", Int, "fdatasync after every N writes"),
    opt("log_avg_msec", Int, "average interval-log entries over this many ms (0: one entry per I/O)"),
    opt("log_offset", Bool, "interval logs give each entry's file offset too (a column before the priority)"),
    alias(
        "log_window_value",
        &["log_max_value"],
        Choice(&["avg", "max", "both", "0", "1"]),
        "with log_avg_msec: log each window's average (avg, 0; the default), its maximum (max, 1) or both (a column each)",
    ),
    opt(
        "log_issue_time",
        Bool,
        "interval logs end each entry with the I/O's issue time (ns since the job started; clat and slat logs, 0 \
         elsewhere); needs write_lat_log and log_offset",
    ),
    opt(
        "per_job_logs",
        Bool,
        "interval log names carry the job instance's number, <prefix>_bw.<n>.log (default 1); 0: <prefix>_bw.log",
    ),
    opt("write_bw_log", Text, "write <prefix>_bw.<n>.log (KiB/s)"),
    opt("write_lat_log", Text, "write <prefix>_{lat,clat,slat}.<n>.log (ns)"),
    opt(
        "write_hist_log",
        Text,
        "write <prefix>_clat_hist.<n>.log: per log_hist_msec window, completions per fio histogram bin \
         (fiologparser_hist.py reads it)",
    ),
    opt("log_hist_msec", Int, "the histogram log's window in ms (0, the default: no entries, as in fio)"),
    opt("log_hist_coarseness", Int, "sum the histogram log's bins in runs of 2^N (0-6; default 0: all 1856 bins)"),
    opt("write_iops_log", Text, "write <prefix>_iops.<n>.log"),
    opt(
        "random_generator",
        Choice(&["tausworthe", "lfsr", "tausworthe64"]),
        "offset generator; every choice visits each block once per pass",
    ),
    opt("randseed", Int, "seed for random offsets and data"),
    // One generator per job drives offsets and data, so fio's allrandrepeat
    // (every generator repeatable) is the same option here.
    alias(
        "randrepeat",
        &["rand_repeatable", "allrandrepeat", "allrand_repeatable"],
        Bool,
        "same random sequence on every run (default 1)",
    ),
    opt(
        "rate",
        Text,
        "cap each direction's bandwidth (bytes/s; READ,WRITE for separate caps): I/Os are held back to keep to it",
    ),
    opt("rate_iops", Text, "cap each direction's I/Os per second (READ,WRITE for separate caps)"),
    alias(
        "rate_min",
        &["ratemin"],
        Text,
        "fail the job when a direction's bandwidth over a rate_cycle falls below this (bytes/s)",
    ),
    opt("rate_iops_min", Text, "fail the job when a direction's IOPS over a rate_cycle falls below this"),
    opt("rate_cycle", Int, "milliseconds over which rate_min and rate_iops_min are checked (default 1000)"),
    opt(
        "rate_process",
        Choice(&["linear", "poisson"]),
        "how capped I/Os are spaced: evenly (linear, default) or as Poisson arrivals with the rate as their mean",
    ),
    opt(
        "flow",
        Int,
        "weight among the jobs of one flow_id: they run in the ratio of their weights (fio's token flow control)",
    ),
    opt("flow_id", Int, "the flow group this job's flow= weight counts in (default 0)"),
    opt("flow_sleep", Int, "microseconds a job ahead of its flow share waits before trying again (default 0: 100)"),
    opt(
        "zonemode",
        Choice(&["none", "strided", "zbd"]),
        "strided: sequential I/O in zones of zonesize, skipping zoneskip after each (zbd, zoned block devices, \
         is refused)",
    ),
    opt("zonesize", Size, "with zonemode=strided, the bytes of I/O in each zone"),
    opt("zoneskip", Size, "with zonemode=strided, the bytes skipped after each zone"),
    opt("norandommap", Bool, "random offsets may repeat within a pass"),
    opt(
        "sprandom",
        Bool,
        "precondition an SSD in one pass (fio's SPRandom): random writes of every block once, with regions \
         overwritten in part so each is left as a long random workload leaves it; rw=randwrite, bs the device's \
         mapping unit; implies random_generator=lfsr and norandommap",
    ),
    opt("spr_op", Text, "sprandom: the device's over-provisioning, a fraction (default 0.15)"),
    opt("spr_num_regions", Int, "sprandom: regions the span is cut into, each overwritten its own share (default 100)"),
    opt("spr_cs", Size, "sprandom: the device's write cache; a region's overwrites then come at the end of the next, not its start (default 0: none)"),
    opt(
        "random_distribution",
        Text,
        "which blocks random I/O favours: random (uniform, default), zipf:THETA, pareto:H, normal:DEV% (each \
         :CENTER 0-1 puts the peak there; else the hot blocks are scattered), zoned:ACCESS%/RANGE%:..., \
         zoned_abs:ACCESS%/SIZE:..., sequence:BLOCK,BLOCK,...; without norandommap a taken block gives way to \
         the next free one, as in fio",
    ),
    opt("random_sequence_stride", Bool, "random_distribution=sequence moves on by its length every round"),
    alias("blockalign", &["ba"], Size, "offsets are multiples of this (default: the smallest block size)"),
    opt(
        "thinktime",
        Time,
        "pause this long after every thinktime_blocks completed I/Os, as an application thinking (bare numbers: \
         microseconds)",
    ),
    opt("thinktime_blocks", Int, "I/Os between thinktime pauses (default 1)"),
    opt("thinktime_spin", Time, "the part of thinktime spent busy rather than asleep (bare numbers: microseconds)"),
    opt(
        "latency_target",
        Time,
        "find the deepest queue (up to iodepth, from 1) at which I/Os complete within this latency, trying each \
         depth for latency_window (bare numbers: microseconds); the job reports the depth found",
    ),
    opt("latency_window", Time, "how long latency_target tries each depth (bare numbers: microseconds)"),
    opt(
        "latency_percentile",
        Text,
        "the percentage of I/Os that must meet latency_target in a window (default 100: one slower I/O lowers the \
         depth at once)",
    ),
    opt(
        "latency_run",
        Bool,
        "keep adjusting the depth to latency_target for the whole run (default 0: end once it settles, after one \
         more window measured at that depth)",
    ),
    opt("number_ios", Int, "stop the job after this many I/Os, if nothing else stopped it first"),
    opt(
        "percentile_list",
        Text,
        "the completion-latency percentiles reported, P:P:... (default fio's 1:5:10:...:99.99; at most 20)",
    ),
    opt("slat_percentiles", Bool, "report percentiles of submission latency too"),
    opt("clat_percentiles", Bool, "report percentiles of completion latency (default 1)"),
    opt("lat_percentiles", Bool, "report percentiles of total latency (submission + completion) too"),
    opt(
        "write_iolog",
        Text,
        "record every I/O the job issues in this file (fio's iolog, version 3; .N appended per instance with numjobs)",
    ),
    opt(
        "read_iolog",
        Text,
        "replay this iolog (fio's version 2 or 3, one file) on the job's file instead of its rw= pattern",
    ),
    opt("replay_no_stall", Bool, "replay the iolog as fast as it goes, not at its recorded times"),
    opt(
        "verify_state_save",
        Bool,
        "a verified write job records the blocks it wrote in dcload-JOB-N-verify.state (dcload's format)",
    ),
    opt(
        "verify_state_load",
        Bool,
        "a verifying job checks only the blocks the state file of the job of its name records as written",
    ),
    opt(
        "experimental_verify",
        Bool,
        "fio replays the I/O to verify instead of recording it; dcload records what it wrote either way",
    ),
    opt("verify", Choice(VERIFY_CHOICES), "write self-describing blocks and check them on read-back"),
    opt(
        "verify_interval",
        Size,
        "each piece of this many bytes carries its own verify header (default: bs, or the smallest of varying \
         sizes); what lets bsrange/bssplit verify",
    ),
    opt(
        "verify_pattern",
        Text,
        "with verify=pattern, the bytes every block holds, repeated from its start: 0xHEX, a decimal, \
         \"text\" or 'file', in any order",
    ),
    opt(
        "buffer_pattern",
        Text,
        "fill write buffers with these bytes, repeated from each block's start (verify_pattern's syntax; not \
         with a verify= other than pattern, whose blocks carry their own content)",
    ),
    opt(
        "verify_write_sequence",
        Bool,
        "a job's writes of each block are numbered, and a block read back after them must hold the job's last \
         write of it, so a lost rewrite is found (default 1 for a job that writes in one block size and is not \
         time_based, as fio); 0 takes any of the job's writes, and with verify_header_seed=0 any job's",
    ),
    opt(
        "verify_header_seed",
        Bool,
        "the pieces a job reads back after its writes must hold its own seed, so a piece another job or run wrote \
         last fails; 0 takes any dcload writer's piece for the offset (default: 1 for a job that reads and writes \
         without verify_backlog, 0 for one that only writes, as fio 3.33-3.39)",
    ),
    opt("do_verify", Bool, "read back and check what a job that writes wrote, after its I/O (default 1)"),
    opt(
        "verify_backlog",
        Size,
        "accepted (blocks, k/m suffixes as in fio); dcload reads every written block back after the job's writes, not every N during them",
    ),
    opt(
        "verify_async",
        Int,
        "accepted: fio's threads that verify beside the job; dcload checks in the job's own thread, after its writes",
    ),
    opt("verify_async_cpus", Text, "the CPUs of fio's verify_async threads (checked; dcload has no such threads)"),
    opt("verify_fatal", Bool, "accepted; dcload always ends a job at its first mismatch (fio's verify_fatal=1)"),
    opt(
        "io_submit_mode",
        Choice(&["inline", "offload"]),
        "inline (default); offload is accepted and run inline: dcload submits from each job's own thread",
    ),
    opt(
        "verify_dump",
        Bool,
        "accepted; a mismatch's message names the offset and whose data was found there; no dump files are written",
    ),
    opt(
        "log_prio",
        Bool,
        "the priority column gives the priority value and class (0x0000: dcload sets none) instead of whether it is RT (0)",
    ),
    opt("invalidate", Bool, "drop the file's cached pages before the job (default 1)"),
    opt("gtod_reduce", Bool, "accepted; dcload times every I/O anyway (fio then reports no latencies)"),
    opt(
        "fallocate",
        Choice(&["native", "posix", "keep", "none", "0", "1"]),
        "how new files are preallocated (default native)",
    ),
    opt("unlink", Bool, "delete the job's files when it ends"),
    opt(
        "allow_file_create",
        Bool,
        "0: a job whose file does not exist fails instead of creating it (default 1)",
    ),
    opt(
        "stat_type",
        Choice(&["stat", "lstat", "statx"]),
        "filestat and dirstat: the system call each file's I/O makes (default stat)"
    ),
    opt(
        "create_on_open",
        Bool,
        "accepted: dcload's file-making jobs (nrfiles, filecreate) always make each file in the timed part"
    ),
    opt(
        "create_serialize",
        Bool,
        "accepted: dcload creates and lays out every file one after another before any job starts (fio's default, 1)",
    ),
    opt("openfiles", Int, "accepted: dcload keeps one of a job's files open at a time"),
    opt("exitall", Bool, "when this job ends, stop other jobs: those of its reporting group, or as exit_what says"),
    opt(
        "continue_on_error",
        Choice(&["none", "read", "write", "io", "verify", "all", "0", "1"]),
        "errors of these kinds do not end the job: they are counted (total_err, first_error) and the job goes on; \
         which errnos count is ignore_error's (default EIO and EILSEQ)",
    ),
    opt(
        "ignore_error",
        Text,
        "READ,WRITE,VERIFY lists of errnos (ENOSPC:EIO or numbers) that continue_on_error lets pass for that kind",
    ),
    opt("error_dump", Bool, "print each error continue_on_error lets pass too (default 0)"),
    opt(
        "fill_device",
        Bool,
        "write until the filesystem is full: ENOSPC ends the job instead of failing it; without size= the job runs \
         over the filesystem's free space (a later job without size= reads what it wrote)",
    ),
    opt("exitall_on_error", Bool, "when this job fails, stop every job, and start no later one"),
    opt(
        "exit_what",
        Choice(&["group", "stonewall", "all"]),
        "what an exitall job's end stops: its reporting group (default), every job running now (stonewall; the \
         jobs after the next stonewall still run), or everything (all)",
    ),
    opt("kb_base", Choice(&["1024", "1000"]), "unit base: 1024 (fio default: k=1024, KiB=1000) or 1000"),
    opt("thread", Bool, "accepted for fio compatibility: dcload always runs jobs as threads"),
    alias(
        "steadystate",
        &["ss"],
        Text,
        "end the job once its rate settles: iops|bw|lat[_slope]:LIMIT[%] (the largest deviation from the window's \
         mean, or the slope, within LIMIT), judged over steadystate_duration",
    ),
    alias("steadystate_duration", &["ss_dur"], Time, "the steady-state window (0, the default: no check, as fio)"),
    alias("steadystate_ramp_time", &["ss_ramp"], Time, "time before steady-state samples start (default 0)"),
    alias("steadystate_check_interval", &["ss_interval"], Time, "time between steady-state samples (default 1s)"),
    opt("nice", Text, "the nice value of the job's threads, -20 to 19 (below 0 needs CAP_SYS_NICE)"),
    opt(
        "prio",
        Int,
        "I/O priority level 0 (highest) to 7 of the job's threads (ioprio_set), and of each I/O on io_uring and libaio",
    ),
    opt(
        "prioclass",
        Int,
        "I/O priority class: 1 realtime (needs CAP_SYS_ADMIN), 2 best-effort, 3 idle (0: best-effort, as fio)",
    ),
    opt("priohint", Int, "I/O priority hint 0-7 (command duration limits on devices that have them)"),
    opt(
        "cmdprio_percentage",
        Text,
        "io_uring and libaio: this percentage of I/Os (READ,WRITE for each direction's) get the priority of \
         cmdprio_class and cmdprio, the rest the job's",
    ),
    opt("cmdprio_class", Text, "the class of cmdprio's I/Os, 1-3 (READ,WRITE; default 1, realtime, as fio)"),
    opt("cmdprio", Text, "the level of cmdprio's I/Os, 0-7 (READ,WRITE)"),
    opt("cmdprio_hint", Text, "the hint of cmdprio's I/Os, 0-7 (READ,WRITE)"),
    opt(
        "cmdprio_bssplit",
        Text,
        "io_uring and libaio: BS/PERCENT[/CLASS/LEVEL[/HINT]]:... (READ,WRITE lists): that share of the I/Os of \
         size BS get that priority (cmdprio_class and cmdprio when not given)",
    ),
    opt(
        "cpus_allowed",
        Text,
        "the CPUs the job's threads may run on: 0-3,5 (a CPU this machine lacks is refused, as fio does)",
    ),
    opt("cpumask", Text, "cpus_allowed as a bit mask: 0x3 is CPUs 0 and 1"),
    opt(
        "cpus_allowed_policy",
        Choice(&["shared", "split"]),
        "shared: every thread of the job on all those CPUs (default); split: each thread on one of them, in turn",
    ),
    opt(
        "threads",
        Int,
        "fio's tiobench profile's thread count: fio reads it only with profile=tiobench and ignores it elsewhere, \
         as dcload does (with a warning)",
    ),
];

/// fio options that exist but that dcload does not implement; named so the
/// error says "not supported" rather than "unknown" (a typo).
const FIO_UNSUPPORTED: &[&str] = &[
    "bs_unaligned",
    "hipri",
    "iodepth_low",
    "refill_buffers",
    "scramble_buffers",
    "zero_buffers",
    "overwrite",
    "numa_cpu_nodes",
    "ioscheduler",
    "sync",
    "trim",
    "verify_offset",
    "log_compression",
    "unified_rw_reporting",
    "lockfile",
    "mem",
    "iomem",
];

/// fio options for device features dcload does not drive, and the feature.
const HARDWARE_ONLY: &[(&[&str], &str)] = &[
    (
        &[
            "max_open_zones",
            "job_max_open_zones",
            "read_beyond_wp",
            "zone_reset_threshold",
            "zone_reset_frequency",
            "ignore_zone_limits",
            "zonecapacity",
        ],
        "zoned block devices",
    ),
    (&["fdp", "fdp_pli", "fdp_pli_select", "dataplacement", "plids", "plid_select"], "NVMe flexible data placement"),
    (&["md_per_io_size", "pi_act", "pi_chk", "apptag", "apptag_mask"], "NVMe protection information"),
];

/// The definition of `key` (canonical name or alias).
pub fn lookup(key: &str) -> Option<&'static OptionDef> {
    OPTIONS.iter().find(|d| d.name == key || d.aliases.contains(&key))
}

/// `Ok(Some(canonical))` for a known option, `Ok(None)` for an unknown one
/// under `ignore_unknown` (recorded in `warnings`), `Err` otherwise.
pub(crate) fn canonical(
    o: &RawOption,
    ignore_unknown: bool,
    warnings: &mut Vec<String>,
) -> Result<Option<RawOption>, SpecError> {
    if let Some(def) = lookup(&o.key) {
        let value = match &o.value {
            Some(v) => Some(crate::arith::replace_keywords(v).map_err(|e| SpecError::new(o.origin.clone(), e))?),
            None => None,
        };
        return Ok(Some(RawOption { key: def.name.to_string(), value, origin: o.origin.clone() }));
    }
    let hardware = HARDWARE_ONLY.iter().find(|(keys, _)| keys.contains(&o.key.as_str()));
    let why = if let Some((_, what)) = hardware {
        format!("option '{}' is for {what}, {}", o.key, crate::units::HARDWARE)
    } else if FIO_UNSUPPORTED.contains(&o.key.as_str()) {
        format!("fio option '{}' is not supported by dcload", o.key)
    } else {
        match closest(&o.key) {
            Some(s) => format!("unknown option '{}' (did you mean '{s}'?)", o.key),
            None => format!("unknown option '{}'", o.key),
        }
    };
    if ignore_unknown {
        warnings.push(format!("{}: {why}; ignored (--ignore-unknown)", o.origin));
        Ok(None)
    } else {
        Err(SpecError::new(
            o.origin.clone(),
            format!("{why}; remove it, or pass --ignore-unknown to run without it (see dcload --help for the options)"),
        ))
    }
}

/// The known option within edit distance 2 of `key`, if any.
fn closest(key: &str) -> Option<&'static str> {
    OPTIONS
        .iter()
        .flat_map(|d| std::iter::once(d.name).chain(d.aliases.iter().copied()))
        .map(|n| (edit_distance(key, n), n))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Origin;

    fn raw(key: &str) -> RawOption {
        RawOption { key: key.into(), value: Some("1".into()), origin: Origin::CommandLine { arg: 3 } }
    }

    #[test]
    fn aliases_become_canonical() {
        let mut w = vec![];
        assert_eq!(canonical(&raw("blocksize"), false, &mut w).unwrap().unwrap().key, "bs");
        // fio's own aliases, as its option table has them.
        for (alias, name) in [("timeout", "runtime"), ("nr_files", "nrfiles"), ("allrandrepeat", "randrepeat")] {
            assert_eq!(canonical(&raw(alias), false, &mut w).unwrap().unwrap().key, name);
        }
    }

    #[test]
    fn typo_gets_a_suggestion() {
        let mut w = vec![];
        let e = canonical(&raw("iodeph"), false, &mut w).unwrap_err();
        assert_eq!(
            e.to_string(),
            "command-line argument 3: unknown option 'iodeph' (did you mean 'iodepth'?); remove it, or pass --ignore-unknown to run without it (see dcload --help for the options)"
        );
    }

    #[test]
    fn unsupported_fio_option_is_named_as_such_and_can_be_ignored() {
        let mut w = vec![];
        assert!(canonical(&raw("overwrite"), false, &mut w).unwrap_err().message.contains("not supported by dcload"));
        assert_eq!(canonical(&raw("overwrite"), true, &mut w).unwrap(), None);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("overwrite") && w[0].contains("ignored"), "{w:?}");
        assert!(canonical(&raw("max_open_zones"), false, &mut w).unwrap_err().message.contains("zoned block devices"));
    }

    #[test]
    fn option_names_are_unique() {
        let mut names: Vec<&str> =
            OPTIONS.iter().flat_map(|d| std::iter::once(d.name).chain(d.aliases.iter().copied())).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
