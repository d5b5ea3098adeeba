//! From jobs to job instances: one per `numjobs`, each with its file, its
//! reporting group and its number in the invocation.

use dc_jobfile::JobSpec;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct Instance {
    pub job: Arc<JobSpec>,
    /// 0-based among the job's `numjobs` instances (`$jobnum`).
    pub jobnum: u32,
    /// 1-based across the whole invocation: fio's log file numbering.
    pub number: usize,
    /// Reporting group (`stonewall` or `new_group` start the next one).
    pub group: u32,
    /// Jobs of one wave run together; waves run one after another
    /// (`stonewall`). `new_group` starts a reporting group, not a wave.
    pub wave: u32,
    pub path: PathBuf,
}

impl Instance {
    /// Where this instance's I/O starts in its file: `offset`, plus
    /// `offset_increment` for each instance before it.
    pub fn start(&self) -> u64 {
        self.job.offset + u64::from(self.jobnum) * self.job.offset_increment
    }
}

/// Expand fio's `filename_format` variables.
pub fn expand_format(format: &str, jobname: &str, jobnum: u32, filenum: u32) -> String {
    format
        .replace("$jobname", jobname)
        .replace("$jobnum", &jobnum.to_string())
        .replace("$filenum", &filenum.to_string())
}

/// The names a file-operation engine's job works on, in order: file k by
/// `filename_format`, or with `filename=` and several files, FILENAME.k.
pub fn file_op_paths(job: &JobSpec, jobnum: u32, cwd: &Path) -> Vec<PathBuf> {
    (0..job.nrfiles)
        .map(|k| match &job.filename {
            Some(_) if job.nrfiles > 1 => {
                let mut p = file_path(job, jobnum, k, cwd).into_os_string();
                p.push(format!(".{k}"));
                PathBuf::from(p)
            }
            _ => file_path(job, jobnum, k, cwd),
        })
        .collect()
}

/// File `filenum` of instance `jobnum` (nrfiles: 0, 1, 2, ...).
pub fn file_path(job: &JobSpec, jobnum: u32, filenum: u32, cwd: &Path) -> PathBuf {
    let name = match &job.filename {
        Some(f) => PathBuf::from(f),
        None => PathBuf::from(expand_format(&job.filename_format, &job.name, jobnum, filenum)),
    };
    if name.is_absolute() {
        return name;
    }
    match &job.directory {
        Some(d) => PathBuf::from(d).join(name),
        // A file on an NFS server is named inside its export, not here.
        None if job.ioengine == dc_jobfile::EngineKind::Nfs => name,
        None => cwd.join(name),
    }
}

pub fn plan(jobs: Vec<JobSpec>, cwd: &Path) -> Vec<Instance> {
    let mut out = Vec::new();
    let (mut group, mut wave) = (0u32, 0u32);
    for (i, job) in jobs.into_iter().enumerate() {
        if i > 0 && (job.stonewall || job.new_group) {
            group += 1;
        }
        if i > 0 && job.stonewall {
            wave += 1;
        }
        let job = Arc::new(job);
        for jobnum in 0..job.numjobs {
            let path = file_path(&job, jobnum, 0, cwd);
            out.push(Instance { job: Arc::clone(&job), jobnum, number: out.len() + 1, group, wave, path });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dc_jobfile::{cmdline_option, resolve};

    fn jobs(args: &[&str]) -> Vec<JobSpec> {
        let raw: Vec<_> = args.iter().enumerate().map(|(i, a)| cmdline_option(a, i + 1).unwrap()).collect();
        resolve(&[], &raw, false).unwrap().jobs
    }

    #[test]
    fn numjobs_formats_and_groups() {
        let inst = plan(
            jobs(&[
                "--directory=/d",
                "--name=w",
                "--numjobs=2",
                "--filename_format=$jobname.$jobnum",
                "--name=r",
                "--stonewall",
                "--filename=shared",
            ]),
            Path::new("/cwd"),
        );
        let got: Vec<_> = inst.iter().map(|i| (i.path.to_str().unwrap(), i.number, i.group, i.jobnum)).collect();
        assert_eq!(got, [("/d/w.0", 1, 0, 0), ("/d/w.1", 2, 0, 1), ("/d/shared", 3, 1, 0)]);
        assert_eq!(inst.iter().map(|i| i.wave).collect::<Vec<_>>(), [0, 0, 1]);
    }

    #[test]
    fn new_group_reports_apart_but_runs_together() {
        let inst = plan(jobs(&["--name=w", "--name=r", "--new_group"]), Path::new("/cwd"));
        assert_eq!(inst.iter().map(|i| (i.group, i.wave)).collect::<Vec<_>>(), [(0, 0), (1, 0)]);
    }

    #[test]
    fn default_name_in_cwd() {
        let inst = plan(jobs(&["--name=x"]), Path::new("/cwd"));
        assert_eq!(inst[0].path, PathBuf::from("/cwd/x.0.0"));
    }
}
