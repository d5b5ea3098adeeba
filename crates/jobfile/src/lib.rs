//! fio job descriptions, from job files and fio-style command lines, resolved
//! into typed [`JobSpec`]s.
//!
//! The precedence, from weakest to strongest, is: built-in defaults, `[global]`
//! sections (each applying to the jobs after it, across files), the job's own
//! section, then command-line options given before any `--name`. The last step
//! differs from fio 3.33, where a job file's `[global]` silently beats the
//! command line (so `fio seq-write.fio --direct=1` runs buffered when the file
//! says `direct=0`); dcload lets the command line win, which is what every
//! script written against fio assumed.

mod arith;
mod blocksizes;
mod distribution;
mod engines;
mod ini;
mod options;
mod pattern;
mod prio;
mod spec;
mod sprandom;
mod steadystate;
pub mod units;

pub use blocksizes::BlockSizes;
pub use distribution::{RandomDistribution, Zone, ZoneSize};
pub use ini::{Include, Section};
pub use options::{OptionDef, OptionKind, OPTIONS};
pub use prio::{CmdPrio, PrioRule};
pub use spec::{
    BufferContents, CpuBurn, CpuMode, Direction, EngineKind, ExecProgram, ExitWhat, FallocateMode, FileOp, JobSpec,
    LatencyTarget, LogWindow, RandomGenerator, RingSetup, RwPattern, StatType, DEFAULT_PERCENTILES,
};
pub use sprandom::SpRandom;
pub use steadystate::{SteadyMeasure, SteadyState};

use std::fmt;
use std::path::{Path, PathBuf};

/// Where an option came from, so every error can point at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    File {
        path: PathBuf,
        line: usize,
    },
    /// The n-th argument (1-based) of the command line.
    CommandLine {
        arg: usize,
    },
}

impl Origin {
    pub fn line(&self) -> Option<usize> {
        match self {
            Origin::File { line, .. } => Some(*line),
            Origin::CommandLine { .. } => None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line } => write!(f, "{} line {line}", path.display()),
            Origin::CommandLine { arg } => write!(f, "command-line argument {arg}"),
        }
    }
}

/// One `key[=value]` as written, before interpretation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawOption {
    /// Lower-cased option name.
    pub key: String,
    /// `None` for a bare `key` (a boolean switched on).
    pub value: Option<String>,
    pub origin: Origin,
}

impl RawOption {
    /// The value as written; a bare key prints as "" (as fio's "job options" does).
    pub fn value_text(&self) -> &str {
        self.value.as_deref().unwrap_or("")
    }
}

/// A user error in a job description, with its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub origin: Option<Origin>,
    pub message: String,
}

impl SpecError {
    pub fn new(origin: Origin, message: impl Into<String>) -> SpecError {
        SpecError { origin: Some(origin), message: message.into() }
    }
    pub fn global(message: impl Into<String>) -> SpecError {
        SpecError { origin: None, message: message.into() }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Some(o) => write!(f, "{o}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for SpecError {}

/// The jobs of one invocation plus what was tolerated on the way.
#[derive(Debug, Clone)]
pub struct JobSet {
    pub jobs: Vec<JobSpec>,
    /// Options of `[global]` sections and command-line globals, for the
    /// "global options" object of the JSON output.
    pub global_options: Vec<RawOption>,
    /// Unknown options skipped under `--ignore-unknown`, as "origin: message".
    pub warnings: Vec<String>,
}

/// A job file to read: its path and text (read by the caller, so that this
/// crate does no I/O and tests can feed text directly), and how to read
/// the files its `include` lines name (`None`: it includes none).
pub struct JobFile<'a> {
    pub path: &'a Path,
    pub text: &'a str,
    pub include: ini::Include<'a>,
}

/// Resolve job files and command-line options into jobs.
///
/// `cmdline` holds the job options of the command line in order (`--name=x`
/// starts a job; options before the first `--name` apply to every job).
pub fn resolve(files: &[JobFile<'_>], cmdline: &[RawOption], ignore_unknown: bool) -> Result<JobSet, SpecError> {
    resolve_sections(files, cmdline, ignore_unknown, &[])
}

/// As [`resolve`], with only the job-file sections named in `only` (every
/// one when empty), as fio's `--section`: `[global]`s still apply, and jobs
/// started on the command line always run. A name no file has is an error
/// (fio runs nothing and says nothing).
pub fn resolve_sections(
    files: &[JobFile<'_>],
    cmdline: &[RawOption],
    ignore_unknown: bool,
    only: &[String],
) -> Result<JobSet, SpecError> {
    let mut warnings = Vec::new();
    let first_name = cmdline.iter().position(|o| o.key == "name").unwrap_or(cmdline.len());
    let (cmd_global_args, cmd_jobs) = cmdline.split_at(first_name);
    let mut cmd_globals = Vec::new();
    for o in cmd_global_args {
        cmd_globals.extend(options::canonical(o, ignore_unknown, &mut warnings)?);
    }

    let mut sections = Vec::new();
    for file in files {
        sections.extend(ini::parse(file.text, file.path, file.include, &mut warnings)?);
    }
    keep_sections(&mut sections, only)?;
    check_engines(&sections, cmd_global_args, cmd_jobs)?;

    let mut drafts: Vec<Draft> = Vec::new();
    let mut globals: Vec<RawOption> = Vec::new();
    let mut all_globals: Vec<RawOption> = Vec::new();
    for section in sections {
        let mut own = Vec::new();
        for o in &section.options {
            own.extend(options::canonical(o, ignore_unknown, &mut warnings)?);
        }
        if section.is_global() {
            all_globals.extend(own.iter().cloned());
            globals.extend(own);
        } else {
            // File jobs: defaults < [global]s so far < own section < command-line globals.
            let mut layered = globals.clone();
            layered.extend(own.iter().cloned());
            layered.extend(cmd_globals.iter().cloned());
            let mut shown = own;
            shown.extend(cmd_globals.iter().cloned());
            drafts.push((section.name, section.origin, layered, shown));
        }
    }

    // Command-line jobs: each `--name=` starts one; `--name=global` is a global section.
    let mut cmd_scope: Vec<RawOption> = cmd_globals.clone();
    all_globals.extend(cmd_globals.iter().cloned());
    let mut iter = cmd_jobs.iter().peekable();
    while let Some(name_opt) = iter.next() {
        let name = name_opt
            .value
            .clone()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| SpecError::new(name_opt.origin.clone(), "--name needs a value (the job's name)"))?;
        let mut own = Vec::new();
        while let Some(o) = iter.next_if(|o| o.key != "name") {
            own.extend(options::canonical(o, ignore_unknown, &mut warnings)?);
        }
        if name == "global" {
            all_globals.extend(own.iter().cloned());
            cmd_scope.extend(own);
            continue;
        }
        let mut layered = cmd_scope.clone();
        layered.extend(own.iter().cloned());
        let mut shown = vec![name_opt.clone()];
        shown.extend(own);
        drafts.push((name, name_opt.origin.clone(), layered, shown));
    }

    if drafts.is_empty() {
        return Err(SpecError::global(
            "no jobs given: pass a job file, or start a job on the command line with --name=NAME",
        ));
    }
    let jobs = build_jobs(drafts, &mut warnings)?;
    Ok(JobSet { jobs, global_options: all_globals, warnings })
}

/// Each draft (name, origin, layered options, options shown) as a job; then
/// the checks that look across jobs.
fn build_jobs(drafts: Vec<Draft>, warnings: &mut Vec<String>) -> Result<Vec<JobSpec>, SpecError> {
    let jobs = drafts
        .into_iter()
        .map(|(name, origin, layered, shown)| spec::build(name, origin, &layered, shown, warnings))
        .collect::<Result<Vec<_>, _>>()?;
    check_waitees(&jobs)?;
    Ok(jobs)
}

type Draft = (String, Origin, Vec<RawOption>, Vec<RawOption>);

/// `wait_for` names exactly one job defined before the waiter, as fio
/// requires (a later or unknown waitee would never let it start).
fn check_waitees(jobs: &[JobSpec]) -> Result<(), SpecError> {
    for (i, job) in jobs.iter().enumerate() {
        let Some(waitee) = &job.wait_for else { continue };
        let err =
            |m: String| Err(SpecError::new(job.origin.clone(), format!("job '{}': wait_for={waitee}: {m}", job.name)));
        if *waitee == job.name {
            return err("a job cannot wait for itself".into());
        }
        match jobs[..i].iter().filter(|j| j.name == *waitee).count() {
            1 => {}
            0 if jobs[i..].iter().any(|j| j.name == *waitee) => {
                return err("the job waited for must come before the waiting one; move it up".into());
            }
            0 => return err("no job of that name; name an earlier job".into()),
            n => return err(format!("{n} earlier jobs have that name; give the one waited for a name of its own")),
        }
    }
    Ok(())
}

fn keep_sections(sections: &mut Vec<ini::Section>, only: &[String]) -> Result<(), SpecError> {
    check_section_names(sections.iter(), only)?;
    sections.retain(|s| wanted(s, only));
    Ok(())
}

/// Every name in `only` is a job section of `sections` (fio would run
/// nothing for a misspelt one, and say nothing).
fn check_section_names<'a>(sections: impl Iterator<Item = &'a ini::Section>, only: &[String]) -> Result<(), SpecError> {
    let jobs: Vec<&str> = sections.filter(|s| !s.is_global()).map(|s| s.name.as_str()).collect();
    match only.iter().find(|name| !jobs.contains(&name.as_str())) {
        None => Ok(()),
        Some(missing) => {
            let known = if jobs.is_empty() { "none".to_string() } else { jobs.join(", ") };
            Err(SpecError::global(format!(
                "--section={missing}: no job file has a section [{missing}] (its job sections: {known})"
            )))
        }
    }
}

/// Whether `--section` (`only`; empty: every section) keeps `section`.
fn wanted(section: &ini::Section, only: &[String]) -> bool {
    only.is_empty() || section.is_global() || only.contains(&section.name)
}

/// Each job file as one dcload command line, as `fio --showcmd` prints it:
/// its options in file order, each section's as `--name=NAME` and its
/// options. Unlike fio's, the line runs what the file runs: a `[global]`
/// after a job becomes `--name=global` (fio prints its options, which would
/// then belong to the job before it), and words are quoted for the shell.
pub fn showcmd(files: &[JobFile<'_>], only: &[String], warnings: &mut Vec<String>) -> Result<Vec<String>, SpecError> {
    let parsed = files
        .iter()
        .map(|file| ini::parse(file.text, file.path, file.include, warnings))
        .collect::<Result<Vec<_>, _>>()?;
    check_section_names(parsed.iter().flatten(), only)?;
    let mut lines = Vec::new();
    for sections in &parsed {
        let mut words = vec!["dcload".to_string()];
        let mut after_job = false;
        for section in sections.iter().filter(|s| wanted(s, only)) {
            if !section.is_global() {
                after_job = true;
                words.push(shell_word(&format!("--name={}", section.name)));
            } else if after_job {
                words.push("--name=global".into());
            }
            for o in &section.options {
                let arg = match &o.value {
                    Some(v) => format!("--{}={v}", o.key),
                    None => format!("--{}", o.key),
                };
                words.push(shell_word(&arg));
            }
        }
        lines.push(words.join(" "));
    }
    Ok(lines)
}

/// `word` as one shell word: as is when it is plain, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_=+:,./@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Refuses a job whose engine dcload does not run, before looking at any
/// of its options: such a job's engine-specific options are unknown here,
/// and the engine, not one of them, is what the user has to hear about.
/// The engine that counts is the one the job runs with: command-line
/// globals beat the job's own section, which beats the `[global]`s before
/// it (so `--ioengine=psync` runs a file written for another engine).
fn check_engines(sections: &[Section], cmd_global_args: &[RawOption], cmd_jobs: &[RawOption]) -> Result<(), SpecError> {
    fn check<'a>(name: &str, weakest_first: impl DoubleEndedIterator<Item = &'a RawOption>) -> Result<(), SpecError> {
        let Some(engine) = weakest_first.rev().find(|o| o.key == "ioengine") else { return Ok(()) };
        match engines::refusal(engine.value_text()) {
            Some(why) => Err(SpecError::new(engine.origin.clone(), format!("job '{name}': {why}"))),
            None => Ok(()),
        }
    }
    let mut globals: Vec<&RawOption> = Vec::new();
    for s in sections {
        if s.is_global() {
            globals.extend(&s.options);
        } else {
            check(&s.name, globals.iter().copied().chain(&s.options).chain(cmd_global_args))?;
        }
    }
    let mut scope: Vec<&RawOption> = cmd_global_args.iter().collect();
    let mut iter = cmd_jobs.iter().peekable();
    while let Some(name) = iter.next() {
        let mut own = Vec::new();
        while let Some(o) = iter.next_if(|o| o.key != "name") {
            own.push(o);
        }
        match name.value_text() {
            "global" => scope.extend(own),
            job => check(job, scope.iter().chain(&own).copied())?,
        }
    }
    Ok(())
}

/// Split fio-style `--key=value` / `--key` arguments into raw options.
/// `arg_index` is the argument's position, for error messages.
pub fn cmdline_option(arg: &str, arg_index: usize) -> Option<RawOption> {
    let body = arg.strip_prefix("--")?;
    let (key, value) = match body.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (body, None),
    };
    Some(RawOption { key: key.to_ascii_lowercase(), value, origin: Origin::CommandLine { arg: arg_index } })
}
