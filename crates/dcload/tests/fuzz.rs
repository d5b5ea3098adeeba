//! The job-file parser and the command line never panic, whatever they are
//! given: job files from the seed patches and fio's own repository, mutated
//! (values swapped for hostile ones, bytes inserted, lines dropped or
//! repeated), and command lines of every option with hostile values, go
//! through dcload's parser and resolver, which must answer with jobs or an
//! error. No I/O: parsing and resolving touch no file.
//!
//! `DCLOAD_FUZZ_CASES` sets the number of cases of each property (CI runs
//! the default; docs/benchmarks.md records a longer run).

mod common;
use common::*;

use dc_jobfile::{cmdline_option, resolve, JobFile, OPTIONS};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::path::Path;

fn cases() -> u32 {
    std::env::var("DCLOAD_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(50_000)
}

/// Values that have broken parsers: huge, negative, empty, units, exotic
/// text, variables, separators.
const HOSTILE: &[&str] = &[
    "",
    "0",
    "-1",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999p",
    "1.5g",
    "4k,8k",
    "4k:8k",
    "1k-16k",
    "1k/10:4k/90",
    "${DC_FUZZ_UNSET}",
    "${",
    "}",
    "$pagesize*2",
    "1e9",
    "0x10",
    "nan",
    "inf",
    "4KiB",
    "1tB",
    "\u{1F4A5}",
    "a\tb",
    "\\",
    "\"\"",
    "=",
    ";",
    "#",
    "[x]",
    "randrw:8",
    "/",
    "..",
    "%s%s%s",
];

fn corpus() -> Vec<String> {
    let mut texts: Vec<String> = seed_job_files().unwrap_or_default().into_iter().map(|(_, t)| t).collect();
    if let Some(dir) = fio_jobs_dir() {
        for sub in ["examples", "t-jobs"] {
            if let Ok(entries) = std::fs::read_dir(dir.join(sub)) {
                texts.extend(entries.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok()));
            }
        }
    }
    // Enough to go on without ../shared.
    texts.push("[global]\nbs=4k\nioengine=psync\n[job]\nrw=randwrite\nsize=1m\nnumjobs=2\n".into());
    texts.push("[a]\nrw=read\n[b]\nstonewall\nrw=write\nverify=crc32c\n".into());
    texts
}

fn option_names() -> Vec<&'static str> {
    OPTIONS.iter().flat_map(|d| std::iter::once(d.name).chain(d.aliases.iter().copied())).collect()
}

#[derive(Debug, Clone)]
enum Edit {
    /// Line `at` (mod the line count) gets `key=value`.
    Set(usize, usize, usize),
    /// A byte inserted at `at` (mod the length).
    Byte(usize, u8),
    DropLine(usize),
    RepeatLine(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<usize>(), any::<usize>()).prop_map(|(a, k, v)| Edit::Set(a, k, v)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Edit::Byte(a, b)),
        any::<usize>().prop_map(Edit::DropLine),
        any::<usize>().prop_map(Edit::RepeatLine),
    ]
}

fn apply(text: &str, edits: &[Edit], names: &[&str]) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    for e in edits {
        let n = lines.len().max(1);
        match *e {
            Edit::Set(at, k, v) => {
                let line = format!("{}={}", names[k % names.len()], HOSTILE[v % HOSTILE.len()]);
                lines.insert(at % (lines.len() + 1), line);
            }
            Edit::Byte(at, b) => {
                let mut bytes = lines.join("\n").into_bytes();
                let at = at % (bytes.len() + 1);
                bytes.insert(at, b);
                lines = String::from_utf8_lossy(&bytes).lines().map(String::from).collect();
            }
            Edit::DropLine(at) if !lines.is_empty() => {
                lines.remove(at % n);
            }
            Edit::RepeatLine(at) if !lines.is_empty() => {
                let l = lines[at % n].clone();
                lines.insert(at % n, l);
            }
            _ => {}
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn mutated_job_files_never_panic() {
    let corpus = corpus();
    let names = option_names();
    let mut runner = TestRunner::new(Config { cases: cases(), failure_persistence: None, ..Config::default() });
    let strategy = (0..corpus.len(), proptest::collection::vec(edit(), 0..8), any::<bool>());
    runner
        .run(&strategy, |(k, edits, ignore_unknown)| {
            let text = apply(&corpus[k], &edits, &names);
            let file = JobFile { path: Path::new("fuzz.fio"), text: &text, include: None };
            let _ = resolve(&[file], &[], ignore_unknown);
            Ok(())
        })
        .unwrap();
}

#[test]
fn hostile_command_lines_never_panic() {
    let names = option_names();
    let program =
        ["--output-format", "--parse-only", "--ignore-unknown", "--uncached-fallback", "--output", "-h", "x.fio"];
    let mut runner = TestRunner::new(Config { cases: cases(), failure_persistence: None, ..Config::default() });
    let arg = prop_oneof![
        (any::<usize>(), any::<usize>(), any::<bool>()).prop_map(move |(k, v, bare)| {
            let name = names[k % names.len()];
            if bare {
                format!("--{name}")
            } else {
                format!("--{name}={}", HOSTILE[v % HOSTILE.len()])
            }
        }),
        any::<usize>().prop_map(move |k| program[k % program.len()].to_string()),
        "[ -~]{0,12}".prop_map(|s| s),
        Just("--name=j".to_string()),
    ];
    runner
        .run(&proptest::collection::vec(arg, 0..12), |argv| {
            if let Ok(dcload::cli::Command::Run(args)) = dcload::cli::parse(&argv) {
                let _ = resolve(&[], &args.job_options, args.ignore_unknown);
            }
            let raw: Vec<_> = argv.iter().enumerate().filter_map(|(i, a)| cmdline_option(a, i + 1)).collect();
            let _ = resolve(&[], &raw, false);
            Ok(())
        })
        .unwrap();
}
