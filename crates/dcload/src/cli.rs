//! dcload's command line: fio's grammar, where job options (`--bs=4k`) and
//! job-starting `--name=` are interleaved with job files and the order
//! matters. That grammar is positional in a way argument-parser crates do not
//! model, so it is split here by hand: program options are a short fixed
//! list; every other `--key[=value]` is a job option.

use crate::error::DcError;
use crate::prepare::UncachedFallback;
use dc_jobfile::{cmdline_option, RawOption, OPTIONS};
use dc_vocab::{Mode, Policy, SIZE_GRAMMAR};
use std::fmt::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Normal,
    Json,
    /// fio's `json+`: JSON with each direction's latency histogram.
    JsonPlus,
    /// fio's terse lines (`--minimal`), in `--terse-version`'s layout.
    Terse,
}

/// When to show the progress line (`--eta`, as fio's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eta {
    /// When stderr is a terminal.
    Auto,
    Always,
    Never,
}

#[derive(Debug)]
pub struct Args {
    pub job_files: Vec<PathBuf>,
    pub job_options: Vec<RawOption>,
    pub output: Option<PathBuf>,
    pub formats: Vec<Format>,
    /// `--terse-version`: 3 (fio's default), 4 or 5.
    pub terse_version: u8,
    pub ignore_unknown: bool,
    pub fallback: UncachedFallback,
    pub parse_only: bool,
    /// `--section`: only these job-file sections (every one when empty).
    pub sections: Vec<String>,
    pub showcmd: bool,
    pub eta: Eta,
}

pub enum Command {
    Run(Args),
    Help,
    CmdHelp,
    Version,
    /// `--list-modes[=json]`: the modes and policies, as text or JSON.
    ListModes {
        json: bool,
    },
}

const PROGRAM_OPTIONS: &[&str] = &[
    "output",
    "output-format",
    "minimal",
    "terse-version",
    "ignore-unknown",
    "uncached-fallback",
    "parse-only",
    "section",
    "showcmd",
    "eta",
    "help",
    "cmdhelp",
    "version",
    "list-modes",
];

/// The command line: program options, job files and job options, in order.
// One piece: fio's grammar is positional, so one pass over argv with an arm
// per program option keeps the order that gives options their meaning visible.
pub fn parse(argv: &[String]) -> Result<Command, DcError> {
    let mut args = Args {
        job_files: Vec::new(),
        job_options: Vec::new(),
        output: None,
        formats: vec![Format::Normal],
        terse_version: 3,
        ignore_unknown: false,
        fallback: UncachedFallback::Fail,
        parse_only: false,
        sections: Vec::new(),
        showcmd: false,
        eta: Eta::Auto,
    };
    let mut i = 0;
    while i < argv.len() {
        let arg = &argv[i];
        let index = i + 1;
        i += 1;
        if arg == "-h" {
            return Ok(Command::Help);
        }
        let Some(body) = arg.strip_prefix("--") else {
            if arg.starts_with('-') && arg.len() > 1 {
                return Err(DcError::Usage(format!(
                    "unknown argument '{arg}': options are written --name=value (see dcload --help)"
                )));
            }
            args.job_files.push(PathBuf::from(arg));
            continue;
        };
        let (key, inline) = match body.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (body, None),
        };
        if !PROGRAM_OPTIONS.contains(&key) {
            if let Some(o) = cmdline_option(arg, index) {
                args.job_options.push(o);
            }
            continue;
        }
        // Program options that take a value accept "--key=value" and "--key value".
        let mut value = |name: &str| -> Result<String, DcError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            let v = argv.get(i).cloned().ok_or_else(|| DcError::Usage(format!("--{name} needs a value")))?;
            i += 1;
            Ok(v)
        };
        match key {
            "help" => return Ok(Command::Help),
            "cmdhelp" => return Ok(Command::CmdHelp),
            "version" => return Ok(Command::Version),
            "list-modes" => {
                return match inline.as_deref() {
                    None | Some("text") => Ok(Command::ListModes { json: false }),
                    Some("json") => Ok(Command::ListModes { json: true }),
                    Some(other) => {
                        Err(DcError::Usage(format!("--list-modes={other}: use --list-modes or --list-modes=json")))
                    }
                }
            }
            "ignore-unknown" => args.ignore_unknown = true,
            "parse-only" => args.parse_only = true,
            "showcmd" => args.showcmd = true,
            "section" => {
                let v = value("section")?;
                if v.split(',').any(str::is_empty) {
                    return Err(DcError::Usage(format!(
                        "--section={v}: name a job file section (--section=NAME, repeated or comma-separated)"
                    )));
                }
                args.sections.extend(v.split(',').map(str::to_string));
            }
            "eta" => {
                args.eta = match value("eta")?.as_str() {
                    "auto" => Eta::Auto,
                    "always" => Eta::Always,
                    "never" => Eta::Never,
                    other => {
                        return Err(DcError::Usage(format!(
                            "--eta={other}: use auto (a progress line when stderr is a terminal), always or never"
                        )))
                    }
                }
            }
            "output" => args.output = Some(PathBuf::from(value("output")?)),
            "output-format" => {
                let v = value("output-format")?;
                args.formats = v
                    .split(',')
                    .map(|f| match f {
                        "normal" => Ok(Format::Normal),
                        "json" => Ok(Format::Json),
                        "json+" => Ok(Format::JsonPlus),
                        "terse" => Ok(Format::Terse),
                        other => Err(DcError::Usage(format!(
                            "--output-format={other}: use normal, json, json+ (json with latency histograms) or \
                             terse (fio's ;-separated lines), or several (normal,json)"
                        ))),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "minimal" => args.formats = vec![Format::Terse],
            "terse-version" => {
                args.terse_version = match value("terse-version")?.as_str() {
                    "3" => 3,
                    "4" => 4,
                    "5" => 5,
                    other => {
                        return Err(DcError::Usage(format!(
                            "--terse-version={other}: use 3 (the default), 4 (with trim) or 5 (with IOPS statistics); \
                             dcload does not write version 2"
                        )))
                    }
                }
            }
            "uncached-fallback" => {
                args.fallback = match value("uncached-fallback")?.as_str() {
                    "fail" => UncachedFallback::Fail,
                    "buffered" => UncachedFallback::Buffered,
                    other => {
                        return Err(DcError::Usage(format!(
                            "--uncached-fallback={other}: use fail (the default) or buffered"
                        )))
                    }
                }
            }
            other => {
                return Err(DcError::Usage(format!(
                    "--{other} is listed as a program option but not handled (a dcload bug)"
                )))
            }
        }
    }
    Ok(Command::Run(args))
}

/// `--help`.
// One piece: the help text, read top to bottom as the user reads it.
pub fn help() -> String {
    format!(
        "\
dcload {version} - buffered, RWF_DONTCACHE and O_DIRECT I/O, measured the way fio measures it

USAGE:
    dcload [PROGRAM OPTIONS] [JOB FILE...] [--JOB_OPTION=VALUE...]

    Job files use fio's format: a [global] section inherited by the job
    sections after it, and one [section] per job. Job options can also be
    given on the command line; --name=NAME starts a new job there, and
    options before the first --name apply to every job and override the
    job files (unlike fio 3.33, where the file silently wins).

EXAMPLES:
    # 1 GiB of sequential 1M writes with RWF_DONTCACHE through io_uring, QD16:
    dcload --name=seq --filename=/mnt/t/f --size=1g --bs=1M --rw=write \\
           --ioengine=io_uring --iodepth=16 --uncached=1

    # A fio job file as the seed benchmark runs it, with JSON for jq/fio-plot:
    dcload seq-write.fio --filename=/mnt/t/f --size=4g --direct=1 \\
           --output-format=json --output=seq.json

    # Prove data integrity: write with verify, then read it back cold:
    dcload --name=w --filename=f --size=64m --rw=randwrite --verify=crc32c

PROGRAM OPTIONS:
    --output=FILE              write results to FILE (atomically) instead of stdout
    --output-format=FMT        normal (default), json, json+ (json with each
                               direction's clat histogram, for fio_jsonplus_clat2csv),
                               terse (fio's ;-separated line per job), or several
                               (normal,json)
    --minimal                  terse output alone (as --output-format=terse)
    --terse-version=N          terse layout: 3 (default), 4 (adds trim) or 5 (adds
                               bandwidth samples and IOPS statistics)
    --ignore-unknown           unknown or unsupported job options become warnings
                               recorded in the output, instead of errors
    --uncached-fallback=WHAT   where RWF_DONTCACHE is refused: fail (default), or
                               buffered (runs buffered and says so in the results)
    --parse-only               check the job files and options, do no I/O; prints
                               nothing when they are valid (as fio), else the errors
    --section=NAME             run only this job-file section ([global]s still apply;
                               repeat it or give a comma-separated list); a name no
                               file has is an error
    --showcmd                  print each job file as one dcload command line (as
                               fio --showcmd, quoted for the shell) and run nothing
    --eta=WHEN                 the progress line on stderr: auto (when stderr is a
                               terminal; the default), always or never
    --cmdhelp                  list every job option with its meaning
    --list-modes[=json]        list the modes below and libdontcache's policies (json:
                               for scripts; dcbench reads its modes from it)
    --help
    --version                  \"fio-{fio} (dcload {version})\": the fio release whose
                               outputs dcload writes; tools that check for fio 3
                               (fio-plot's bench-fio) accept it

MODES (how each job meets the page cache; the job option that selects each):
{modes}
    RWF_DONTCACHE (uncached=1) needs ioengine=pvsync2, io_uring or libaio and is
    probed on each file before the timed part. O_DIRECT (direct=1) needs bs a
    multiple of the device's logical block size; buffers are aligned to it.
    writebehind=POLICY runs on every local engine at any iodepth.
    After the timed part, cachestat(2) shows each file's page-cache residency
    (the \"page cache\" line; \"dcload.files\" in JSON): the proof of the mode.

OUTPUT:
    normal: per job IOPS, bandwidth, latency (slat/clat/lat), clat percentiles,
    CPU, page-cache residency. json: fio's JSON shape and units (bw in KiB/s,
    latencies in ns) plus a \"dcload\" object per job. Interval logs
    (write_bw_log, write_lat_log, write_iops_log) use fio's file names and line
    format: msec, value, direction, bs, priority; log_window_value=both adds
    the window's maximum after its mean, log_offset=1 the offset before the
    priority, log_issue_time=1 the issue time (ns) last; per_job_logs=0 names
    them <prefix>_bw.log. write_hist_log with log_hist_msec writes fio's
    completion-latency histogram log (<prefix>_clat_hist.<n>.log).

EXIT STATUS:
    0   every job completed
    1   a job failed during I/O (errno in \"error\", message and offset in the
        output), a verify mismatch, or results could not be written
    2   bad command line or job file: nothing was run
    3   the target cannot run the job as asked (mode refused, O_DIRECT
        misaligned or unsupported, file cannot be created): nothing was measured
    130 interrupted (SIGINT/SIGTERM): results cover what ran, marked interrupted
",
        version = env!("CARGO_PKG_VERSION"),
        fio = FIO_RELEASE,
        modes = modes_text(),
    )
}

/// Each mode as `    name  (option)  what it is`, one per line.
fn modes_text() -> String {
    let mut out = String::new();
    for m in Mode::ALL {
        let option = m.job_option().map_or("(none)".to_string(), |(k, v)| format!("{k}={v}"));
        let _ = writeln!(out, "    {:<22} {option:<22} {}", m.name(), short(&m.description()));
    }
    out.trim_end().to_string()
}

/// A description up to its first colon: the policy's own sentence is for `--list-modes`.
fn short(description: &str) -> &str {
    description.split(':').next().unwrap_or(description)
}

/// `--list-modes`: every mode (name, family, the job option that selects
/// it, what it is) and every libdontcache policy.
pub fn list_modes(json: bool) -> String {
    if !json {
        let mut out = format!("Modes:\n{}\n\nlibdontcache policies (writebehind=POLICY):\n", modes_text());
        for p in Policy::ALL {
            let _ = writeln!(out, "    {:<10} {}", p.name(), p.description());
        }
        return out;
    }
    let modes: Vec<_> = Mode::ALL
        .iter()
        .map(|m| {
            let option = m.job_option().map(|(k, v)| serde_json::json!({ k: v })).unwrap_or(serde_json::json!({}));
            serde_json::json!({
                "name": m.name(),
                "family": m.family(),
                "options": option,
                "description": m.description(),
            })
        })
        .collect();
    let policies: Vec<_> =
        Policy::ALL.iter().map(|p| serde_json::json!({ "name": p.name(), "description": p.description() })).collect();
    let doc = serde_json::json!({ "modes": modes, "policies": policies, "sizes": SIZE_GRAMMAR });
    format!("{}\n", serde_json::to_string_pretty(&doc).expect("a JSON value serializes"))
}

/// The fio release whose job-file semantics and output formats dcload
/// follows, named first in `--version` as fio names itself.
pub const FIO_RELEASE: &str = "3.33";

/// What `--version` prints.
pub fn version_line() -> String {
    format!("fio-{FIO_RELEASE} (dcload {})", env!("CARGO_PKG_VERSION"))
}

pub fn cmdhelp() -> String {
    let mut out = String::from("Job options (in job files as key=value, on the command line as --key=value):\n\n");
    for d in OPTIONS {
        let names = std::iter::once(d.name).chain(d.aliases.iter().copied()).collect::<Vec<_>>().join(", ");
        let _ = writeln!(out, "  {names:<24} {}", d.help);
    }
    let _ = writeln!(out, "\nSizes: {SIZE_GRAMMAR}; kb_base=1000 swaps the two. Times take us, ms, s, m, h.");
    out
}
