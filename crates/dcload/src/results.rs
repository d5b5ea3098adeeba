//! What a run produced, apart from the code that produces it (`run`) and the
//! exporters that write it (`report`).

use crate::diskutil::DiskUtil;
use crate::stats::{DirStats, Latency};
use crate::steady::SteadyReport;
use crate::worker::{Depths, Failure};
use dc_jobfile::{JobSpec, RawOption};
use dc_sys::{CacheStat, ThreadCpu};
use dc_vocab::Mode;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

/// Residency of one file after one instance's timed part.
#[derive(Debug, Clone)]
pub struct FileReport {
    pub path: PathBuf,
    pub fs_type: String,
    pub device: Option<String>,
    pub size: u64,
    pub mode: Mode,
    pub cache: Option<CacheStat>,
    pub pages: u64,
}

/// One reported job: an instance, or a whole group under `group_reporting`.
#[derive(Debug, Clone)]
pub struct JobReport {
    pub name: String,
    pub groupid: u32,
    pub instances: usize,
    pub job: Arc<JobSpec>,
    pub read: Option<DirStats>,
    pub write: Option<DirStats>,
    pub trim: Option<DirStats>,
    pub sync: Latency,
    /// Longest instance runtime.
    pub runtime_ns: u64,
    /// Sum of instance runtimes (fio divides CPU time by this).
    pub total_runtime_ns: u64,
    pub cpu: ThreadCpu,
    pub depths: Depths,
    pub failure: Option<Failure>,
    pub files: Vec<FileReport>,
    pub notes: Vec<String>,
    pub logs: Vec<PathBuf>,
    pub start_monotonic_ns: u64,
    pub start_realtime_ns: u64,
    pub verified_blocks: u64,
    /// Errors `continue_on_error` let pass (fio's `total_err`), and the
    /// first one's errno (`first_error`).
    pub errors_passed: u64,
    pub first_error: i32,
    /// `steadystate`: the first instance's outcome.
    pub steady: Option<SteadyReport>,
    /// The depth the last instance ended at (`latency_target`'s finding,
    /// else `iodepth`), as fio's group reports the last thread's.
    pub latency_depth: u32,
    pub mode: Mode,
}

impl JobReport {
    /// CPU time as a percentage of the summed instance runtimes, as fio
    /// reports `usr_cpu`/`sys_cpu` (per-thread utilisation, not machine share).
    pub fn cpu_percent(&self, t: std::time::Duration) -> f64 {
        if self.total_runtime_ns == 0 {
            0.0
        } else {
            t.as_nanos() as f64 * 100.0 / self.total_runtime_ns as f64
        }
    }
}

#[derive(Debug, Clone)]
pub struct Report {
    pub started: SystemTime,
    pub kernel: String,
    pub global_options: Vec<RawOption>,
    pub warnings: Vec<String>,
    pub jobs: Vec<JobReport>,
    /// The disks under the job files, over the jobs' run (not the layout).
    pub disk_util: Vec<DiskUtil>,
    pub interrupted: bool,
}

impl Report {
    pub fn failed(&self) -> bool {
        self.jobs.iter().any(|j| j.failure.is_some())
    }
}
