//! One invocation: resolve jobs, prepare files, run the groups in order
//! (each group's instances as threads released together by a barrier), and
//! gather the results into a [`Report`].

use crate::diskutil::DiskProbe;
use crate::error::DcError;
use crate::plan::{plan, Instance};
use crate::prepare::{prepare, FileSetup, UncachedFallback};
use crate::progress::Progress;
use crate::results::{FileReport, JobReport, Report};
use crate::stats::DirStats;
use crate::worker::{self, Failure, InstanceResult};
use dc_jobfile::{EngineKind, JobSet};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::SystemTime;

/// Raised by SIGINT/SIGTERM (see `main`): workers drain and stop.
pub static STOP: AtomicBool = AtomicBool::new(false);

pub struct RunOptions {
    pub fallback: UncachedFallback,
    /// Where relative file names and interval logs go.
    pub cwd: PathBuf,
    /// Show the progress line on stderr.
    pub progress: bool,
}

pub fn run(set: JobSet, opts: &RunOptions) -> Result<Report, DcError> {
    let started = SystemTime::now();
    let JobSet { jobs, global_options, mut warnings } = set;
    crate::limits::raise_open_files();
    let instances = plan(jobs, &opts.cwd);
    crate::limits::check(&instances)?;
    let files = prepare(&instances, opts.fallback, &STOP)?;
    let disks = DiskProbe::start(&files);
    let mut results: Vec<InstanceResult> = Vec::with_capacity(instances.len());
    let waves: Vec<u32> = {
        let mut w: Vec<u32> = instances.iter().map(|i| i.wave).collect();
        w.dedup();
        w
    };
    // Raised by an exit_what=all job: the waves after it do not run.
    let exit_all = AtomicBool::new(false);
    for wave in waves {
        let members: Vec<&Instance> = instances.iter().filter(|i| i.wave == wave).collect();
        if STOP.load(Ordering::Relaxed) || exit_all.load(Ordering::Relaxed) {
            results.extend(members.iter().map(|_| InstanceResult::default()));
            continue;
        }
        results.extend(run_wave(&members, &files, opts, &exit_all));
    }
    let disk_util = disks.finish();
    for r in &results {
        warnings.extend(r.fallback_note.clone());
    }
    warnings.dedup();
    remove_unlinked(&instances, &opts.cwd, &mut warnings);
    Ok(Report {
        started,
        kernel: dc_sys::kernel_release(),
        global_options,
        warnings,
        jobs: aggregate(&instances, results, &files),
        disk_util,
        interrupted: STOP.load(Ordering::Relaxed),
    })
}

fn run_wave(
    members: &[&Instance],
    files: &BTreeMap<PathBuf, FileSetup>,
    opts: &RunOptions,
    exit_all: &AtomicBool,
) -> Vec<InstanceResult> {
    let barrier = Barrier::new(members.len());
    let wave_stop = AtomicBool::new(false);
    let group_stops: BTreeMap<u32, AtomicBool> = members.iter().map(|i| (i.group, AtomicBool::new(false))).collect();
    let running = worker::Running::new(members);
    let shared = worker::Shared {
        log_dir: &opts.cwd,
        barrier: &barrier,
        stop: &STOP,
        wave_stop: &wave_stop,
        group_stops: &group_stops,
        exit_all,
        running: &running,
    };
    let progress = opts.progress.then(|| Progress::new(members.len()));
    let label = format!("group {} ({} jobs)", members[0].group, members.len());
    std::thread::scope(|s| {
        if let Some(p) = &progress {
            s.spawn(|| p.display(&label));
        }
        let handles: Vec<_> = members
            .iter()
            .enumerate()
            .map(|(k, inst)| {
                let setup = &files[&inst.path];
                let (mode, note) = setup.effective_mode(&inst.job, opts.fallback);
                let shared = &shared;
                let counter = progress.as_ref().map(|p| &p.counters[k]);
                std::thread::Builder::new().name(format!("{}.{}", inst.job.name, inst.jobnum)).spawn_scoped(
                    s,
                    move || {
                        // Counted as ended even if the worker panics, so no waiter is stranded.
                        let _ended = Ended(shared.running, &inst.job.name);
                        worker::run(inst, setup, mode, note, shared, counter)
                    },
                )
            })
            .collect();
        let results = handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|_| crashed("the worker thread panicked (a dcload bug)")),
                Err(e) => crashed(&format!("cannot start a worker thread: {e}")),
            })
            .collect();
        if let Some(p) = &progress {
            p.finish();
        }
        results
    })
}

/// Marks its job's instance ended when dropped (`wait_for`).
struct Ended<'a>(&'a worker::Running, &'a str);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        self.0.ended(self.1);
    }
}

fn crashed(message: &str) -> InstanceResult {
    STOP.store(true, Ordering::Relaxed);
    InstanceResult {
        failure: Some(Failure { errno: libc::EIO, offset: None, message: message.into() }),
        ..Default::default()
    }
}

/// `unlink=1`: each file once, where it is. An `nfs` job's path names a
/// file in the server's export, never the local file of that name.
fn remove_unlinked(instances: &[Instance], cwd: &std::path::Path, warnings: &mut Vec<String>) {
    let mut done = std::collections::BTreeSet::new();
    for i in instances.iter().filter(|i| i.job.unlink) {
        let url = match i.job.ioengine {
            EngineKind::Nfs => i.job.nfs_url.clone(),
            _ => None,
        };
        if let EngineKind::FileOp(op) = i.job.ioengine {
            remove_file_op_names(op, &i.job, i.jobnum, cwd, warnings);
            continue;
        }
        if !done.insert((url.clone(), i.path.clone())) {
            continue;
        }
        let removed = match &url {
            Some(url) => unlink_nfs(url, &i.path),
            None => std::fs::remove_file(&i.path),
        };
        if let Err(e) = removed {
            if e.kind() != std::io::ErrorKind::NotFound {
                warnings.push(format!("unlink {}: {e}", i.path.display()));
            }
        }
    }
}

/// `unlink=1` on a file-operation engine: every file (or directory) of the
/// job that is there.
fn remove_file_op_names(
    op: dc_jobfile::FileOp,
    job: &dc_jobfile::JobSpec,
    jobnum: u32,
    cwd: &std::path::Path,
    warnings: &mut Vec<String>,
) {
    for p in crate::plan::file_op_paths(job, jobnum, cwd) {
        let removed = if op.on_directories() { std::fs::remove_dir(&p) } else { std::fs::remove_file(&p) };
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => warnings.push(format!("unlink {}: {e}", p.display())),
            _ => {}
        }
    }
}

fn unlink_nfs(url: &str, path: &std::path::Path) -> std::io::Result<()> {
    let mut mount = dc_nfs::Mount::connect(url)?;
    Ok(mount.unlink(&path.to_string_lossy())?)
}

fn file_report(inst: &Instance, setup: &FileSetup, r: &InstanceResult) -> FileReport {
    FileReport {
        path: inst.path.clone(),
        fs_type: setup.fs_type.clone(),
        device: setup.device.as_ref().map(|d| d.name.clone()),
        size: setup.size,
        mode: r.mode.unwrap_or_else(|| inst.job.mode()),
        cache: r.cache,
        pages: r.file_pages,
    }
}

fn merge_dir(into: &mut Option<DirStats>, from: &Option<DirStats>) {
    if let Some(f) = from {
        into.get_or_insert_with(DirStats::default).merge(f);
    }
}

/// One report per instance, except groups with `group_reporting`, which become one.
fn aggregate(
    instances: &[Instance],
    results: Vec<InstanceResult>,
    files: &BTreeMap<PathBuf, FileSetup>,
) -> Vec<JobReport> {
    let mut out: Vec<JobReport> = Vec::new();
    let mut group_slot: BTreeMap<u32, usize> = BTreeMap::new();
    for (inst, r) in instances.iter().zip(results) {
        let file = file_report(inst, &files[&inst.path], &r);
        let slot = if inst.job.group_reporting { group_slot.get(&inst.group).copied() } else { None };
        match slot {
            Some(k) => {
                let j = &mut out[k];
                j.instances += 1;
                merge_dir(&mut j.read, &r.read);
                merge_dir(&mut j.write, &r.write);
                merge_dir(&mut j.trim, &r.trim);
                j.sync.merge(&r.sync);
                j.runtime_ns = j.runtime_ns.max(r.runtime_ns);
                j.total_runtime_ns += r.runtime_ns;
                j.cpu.add(&r.cpu);
                j.depths.add(&r.depths);
                if j.failure.is_none() {
                    j.failure = r.failure;
                }
                j.files.push(file);
                j.notes.extend(r.fallback_note);
                j.logs.extend(r.log_paths);
                j.start_monotonic_ns = j.start_monotonic_ns.min(r.start_monotonic_ns);
                j.start_realtime_ns = j.start_realtime_ns.min(r.start_realtime_ns);
                j.verified_blocks += r.verified_blocks;
                if j.errors_passed == 0 {
                    j.first_error = r.first_error;
                }
                j.errors_passed += r.errors_passed;
                j.latency_depth = r.latency_depth;
            }
            None => {
                if inst.job.group_reporting {
                    group_slot.insert(inst.group, out.len());
                }
                out.push(JobReport {
                    name: inst.job.name.clone(),
                    groupid: inst.group,
                    instances: 1,
                    job: Arc::clone(&inst.job),
                    read: r.read,
                    write: r.write,
                    trim: r.trim,
                    sync: r.sync,
                    runtime_ns: r.runtime_ns,
                    total_runtime_ns: r.runtime_ns,
                    cpu: r.cpu,
                    depths: r.depths,
                    failure: r.failure,
                    mode: file.mode,
                    files: vec![file],
                    notes: r.fallback_note.into_iter().collect(),
                    logs: r.log_paths,
                    start_monotonic_ns: r.start_monotonic_ns,
                    start_realtime_ns: r.start_realtime_ns,
                    verified_blocks: r.verified_blocks,
                    errors_passed: r.errors_passed,
                    first_error: r.first_error,
                    steady: r.steady,
                    latency_depth: r.latency_depth,
                });
            }
        }
    }
    out
}

/// The directory interval logs and relative files go to.
pub fn current_dir() -> Result<PathBuf, DcError> {
    std::env::current_dir().map_err(|e| DcError::Setup(format!("cannot read the current directory: {e}")))
}
