//! What the machine can hold, checked before any I/O: threads, descriptors,
//! memory for buffers, io_uring's ring size. A job that asks for more is a
//! usage error naming the option and the limit, not a crash, a wedged
//! machine or a failure after minutes of work.

use crate::error::DcError;
use crate::plan::Instance;
use dc_jobfile::{EngineKind, JobSpec};

/// io_uring's largest ring (`IORING_MAX_ENTRIES`).
const RING_MAX: u32 = 32768;

/// The soft `RLIMIT_NOFILE` dcload raises itself to, where the hard limit
/// allows: enough for thousands of jobs' files, and a descriptor table of
/// a few hundred KiB.
const OPEN_FILES_WANTED: u64 = 65536;

/// Raises the soft `RLIMIT_NOFILE` towards the hard one (at most
/// `OPEN_FILES_WANTED`), before any file is opened; never lowers it, and
/// a refusal leaves it as it was. fio runs each job in a process of its
/// own, with a descriptor table of its own, where dcload's jobs are
/// threads sharing one: at the usual soft limit of 1,024 a job file fio
/// runs could be refused here. And write-behind holds a descriptor for
/// each closed file until it is written back, up to a share of the limit:
/// 4 writers of 4 KiB files (a fresh 1 GiB loop ext4) made 0.84-0.86x
/// the kernel's RWF_DONTCACHE files/s under a soft limit of 1,024, against
/// 1.13-1.19x under 20,000.
pub fn raise_open_files() {
    let _ = dc_sys::raise_open_files_limit(OPEN_FILES_WANTED);
}

/// Threads one invocation starts for a wave at most, whatever the kernel
/// allows: one per job instance, all runnable at once.
const THREADS_MAX: usize = 4096;

/// Descriptors one instance may hold: its file and a second descriptor,
/// a ring, a write-behind duplicate, and interval logs (lat logs are three).
fn descriptors(job: &JobSpec) -> u64 {
    let logs = [job.bw_log.is_some(), job.iops_log.is_some()].iter().filter(|&&b| b).count() as u64
        + if job.lat_log.is_some() { 3 } else { 0 };
    4 + logs
}

/// Bytes one instance allocates up front: its I/O buffers, verify's block
/// and its map of written blocks.
fn memory(job: &JobSpec) -> u64 {
    let depth = if job.ioengine.is_async() { u64::from(job.iodepth) } else { 1 };
    let buffers = job.bs.saturating_mul(depth);
    let verify = if job.verify.is_some() { job.bs + job.size.unwrap_or(0) / job.bs.max(1) / 8 } else { 0 };
    buffers.saturating_add(verify)
}

fn threads_max() -> usize {
    std::fs::read_to_string("/proc/sys/kernel/threads-max")
        .ok()
        .and_then(|t| t.trim().parse::<usize>().ok())
        .map_or(THREADS_MAX, |m| (m / 2).min(THREADS_MAX))
}

fn name_of(jobs: &[&JobSpec]) -> String {
    let mut names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    names.dedup();
    names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ")
}

/// Checks every wave of `instances` against the machine's limits.
pub fn check(instances: &[Instance]) -> Result<(), DcError> {
    for job in instances.iter().map(|i| &i.job) {
        if job.ioengine == EngineKind::IoUring && job.iodepth > RING_MAX {
            return Err(DcError::Usage(format!(
                "job '{}': iodepth={} is more than an io_uring ring holds ({RING_MAX}); lower iodepth",
                job.name, job.iodepth
            )));
        }
    }
    let mut waves: Vec<u32> = instances.iter().map(|i| i.wave).collect();
    waves.dedup();
    let nofile = dc_sys::open_files_limit();
    let threads = threads_max();
    let memory_limit = dc_sys::meminfo_bytes(&["MemAvailable"]).ok().map(|m| m / 5 * 4);
    for wave in waves {
        let members: Vec<&JobSpec> = instances.iter().filter(|i| i.wave == wave).map(|i| &*i.job).collect();
        let who = name_of(&members);
        if members.len() > threads {
            return Err(DcError::Usage(format!(
                "jobs {who}: {} instances run at once (numjobs), one thread each, more than this machine \
                 should start ({threads}); lower numjobs or split the jobs with stonewall",
                members.len()
            )));
        }
        let fds: u64 = 64 + members.iter().map(|j| descriptors(j)).sum::<u64>();
        if fds > nofile {
            return Err(DcError::Usage(format!(
                "jobs {who}: {} instances at once need about {fds} descriptors, and RLIMIT_NOFILE is {nofile}; \
                 raise it (ulimit -n) or lower numjobs",
                members.len()
            )));
        }
        let bytes: u64 = members.iter().map(|j| memory(j)).fold(0u64, |a, b| a.saturating_add(b));
        if let Some(limit) = memory_limit.filter(|&l| bytes > l) {
            return Err(DcError::Usage(format!(
                "jobs {who}: buffers of bs x iodepth x numjobs (and verify's maps) need {} MiB, more than \
                 4/5 of the memory available ({} MiB); lower bs, iodepth or numjobs",
                bytes >> 20,
                (limit / 4 * 5) >> 20
            )));
        }
    }
    Ok(())
}
