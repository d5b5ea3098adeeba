//! fio's own job files, read from `../shared/fio-jobs` (fio's licence: never
//! copied here): each one either runs with tiny overrides, or is refused in
//! one line that names the file, the line and why (for a job on an engine
//! dcload does not run, the engine, before any of its options). The outcome
//! of every file is docs/fio-compat.md, which this test keeps true: it
//! fails when the table differs, and `DCLOAD_BLESS=1` rewrites it.

mod common;
use common::*;

use std::path::{Path, PathBuf};

/// Every job gets these, so a file written for a 100 GiB device runs in a
/// second on a scratch file (command-line options beat the file's).
const OVERRIDES: &[&str] = &["--size=4m", "--runtime=1", "--ramp_time=0", "--startdelay=0", "--loops=1"];

/// Files that ran when the table was last written: fewer is a regression
/// even before the table is compared.
const RUN_AT_LEAST: usize = 92;

/// Files fio 3.33 fails too on this machine when run the same way, and how:
/// dcload failing them the same way is the faithful outcome, counted apart.
/// Each: the file, what its first failure may say (one of them: jobs that
/// race each other fail in either order), and why.
const FIO_FAILS_TOO: &[(&str, &[&str], &str)] = &[
    (
        "e4defrag2.fio",
        &["(EBUSY)"],
        "EBUSY: ext4 refuses to move extents of a file other jobs are writing; fio 3.33 fails the file the same way",
    ),
    (
        "e4defrag.fio",
        &["(EBUSY)", "another writer's data"],
        "its four libaio jobs write one file with verify=md5, so each finds blocks the others wrote last (fio 3.33: \
         bad header rand_seed, EILSEQ, every job every run); its e4defrag job fails with EBUSY where its first move \
         meets their direct writes (fio 3.33: every run here; dcload: in some)",
    ),
];

/// Files whose own header says how to run them, run that way (as a user
/// following it would): each, the environment and options the header
/// gives, and whether it needs its file to exist (allow_file_create=0,
/// written for a device).
struct HeaderSays {
    file: &'static str,
    env: &'static [(&'static str, &'static str)],
    args: &'static [&'static str],
    must_exist: bool,
}

const AS_ITS_HEADER_SAYS: &[HeaderSays] = &[
    HeaderSays {
        file: "xnvme-compare.fio",
        env: &[],
        args: &["--section=default", "--ioengine=io_uring", "--sqthread_poll=1"],
        must_exist: true,
    },
    HeaderSays { file: "sprandom.fio", env: &[("FIO_BS", "4096")], args: &["--ioengine=io_uring"], must_exist: false },
];

impl HeaderSays {
    /// A run's note, with how the header said to run it.
    fn note(&self, note: String) -> String {
        if self.file.is_empty() {
            return note;
        }
        let env = self.env.iter().map(|(k, v)| format!("{k}={v}"));
        let given: Vec<String> = env.chain(self.args.iter().map(|a| a.to_string())).collect();
        format!("{note}; run as its header says, with {}", given.join(" "))
    }
}

const NOTHING_SAID: HeaderSays = HeaderSays { file: "", env: &[], args: &[], must_exist: false };

fn as_its_header_says(path: &Path) -> &'static HeaderSays {
    AS_ITS_HEADER_SAYS.iter().find(|h| path.ends_with(h.file)).unwrap_or(&NOTHING_SAID)
}

/// dcload with `args` in `dir`, with `env` added to its environment.
fn dcload_with(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dcload"));
    cmd.args(args).current_dir(dir).envs(env.iter().copied()).output().unwrap()
}

struct Row {
    file: String,
    outcome: &'static str,
    note: String,
}

fn job_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "fio"))
        .collect();
    files.sort();
    files
}

/// The reason of a refusal, without the program name and the file's path
/// (which differ from machine to machine) and the standard advice.
fn reason(stderr: &str, path: &Path) -> String {
    let first = stderr.lines().next().unwrap_or("").trim();
    let first = first.strip_prefix("dcload: ").unwrap_or(first);
    let first = first.strip_prefix(path.to_str().unwrap()).map(str::trim_start).unwrap_or(first);
    let cut = first.find("; remove it, or pass --ignore-unknown").unwrap_or(first.len());
    first[..cut].replace('|', "\\|")
}

/// What fio's own test runner (t/run-fio-tests.py) puts beside a file
/// before running it, put here the same way: t0027 writes and verifies a
/// pattern read from a file of 16 KiB of random bytes; t0038 replays an
/// iolog of the runner's (not among the shared job files, so one of its
/// shape is written: 2 GiB trims, each followed by a 4 KiB write).
fn set_up_as_fios_runner_does(s: &Scratch, path: &Path) {
    let name = path.file_name().unwrap().to_string_lossy();
    if name == "t0027.fio" {
        let mut pattern = vec![0u8; 16 << 10];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut pattern).unwrap();
        std::fs::write(s.dir.join("t0027.pattern"), pattern).unwrap();
    }
    if name.starts_with("t0038") {
        let mut log = String::from("fio version 3 iolog\n0 /dev/null add\n1 /dev/null open\n");
        for k in 0..10u64 {
            log.push_str(&format!("{} /dev/null trim {} 2147483648\n", 2 + 2 * k, k * 4096));
            log.push_str(&format!("{} /dev/null write {} 4096\n", 3 + 2 * k, k * 4096));
        }
        log.push_str("30 /dev/null close\n");
        std::fs::write(s.dir.join("t0038.iolog"), log).unwrap();
    }
}

/// A refusal's kind and reason; it must be one line that names the line.
fn refusal(stderr: &str, path: &Path) -> (&'static str, String) {
    let p = path.display();
    assert_eq!(stderr.trim().lines().count(), 1, "{p}: a refusal is one line:\n{stderr}");
    assert!(stderr.contains(" line "), "{p}: a refusal names the line:\n{stderr}");
    let why = reason(stderr, path);
    let kind = if why.contains("which dcload does not run:") || why.contains("runs only inside fio") {
        "refused: out-of-scope engine"
    } else if why.contains(dc_jobfile::units::HARDWARE) {
        "refused: out-of-scope hardware"
    } else if why.contains("ioengine=") {
        "refused: engine not yet"
    } else {
        "refused"
    };
    (kind, why)
}

fn outcome_of(s: &Scratch, path: &Path) -> (&'static str, String) {
    let p = path.to_str().unwrap();
    set_up_as_fios_runner_does(s, path);
    let header = as_its_header_says(path);
    let mut parse_args = vec!["--parse-only", p];
    parse_args.extend(header.args);
    let parse = dcload_with(&s.dir, header.env, &parse_args);
    let stderr = String::from_utf8_lossy(&parse.stderr).into_owned();
    match parse.status.code() {
        Some(0) => {}
        Some(2) => return refusal(&stderr, path),
        other => panic!("{p}: dcload --parse-only ended with {other:?} (a crash?):\n{stderr}"),
    }
    for leftover in std::fs::read_dir(&s.dir).unwrap() {
        let leftover = leftover.unwrap().path();
        if leftover.is_file() {
            std::fs::remove_file(leftover).unwrap();
        }
    }
    set_up_as_fios_runner_does(s, path);
    let target = s.file("f");
    let out_json = s.file("out.json");
    let mut args = vec![p, "--output-format=json"];
    // The file-operation engines act on names (each job's files or
    // directories made, stat'ed, removed), so a file that uses them runs in
    // an empty directory of its own instead of on the one scratch file.
    let names = s.dir.join("names");
    let _ = std::fs::remove_dir_all(&names);
    let text = std::fs::read_to_string(p).unwrap_or_default();
    let file_ops = ["filecreate", "filestat", "filedelete", "dircreate", "dirstat", "dirdelete"]
        .iter()
        .any(|e| text.contains(&format!("ioengine={e}")));
    // An ioengine=nfs file talks to a dcnfsd serving a directory here,
    // the file named inside its export.
    let export = s.dir.join("export");
    let _ = std::fs::remove_dir_all(&export);
    let server = text.contains("ioengine=nfs").then(|| {
        std::fs::create_dir(&export).unwrap();
        NfsServer::start(&export, &s.dir)
    });
    // A file of atomic writes runs on a small XFS, which takes them in
    // software on any device (this machine's disk and ext4 take none).
    let xfs_dir = s.dir.join("xfs");
    let xfs = (text.contains("atomic=1") && is_root()).then(|| {
        std::fs::create_dir_all(&xfs_dir).unwrap();
        LoopFs::xfs(&xfs_dir, 300)
    });
    let target = xfs.as_ref().map_or(target, |fs| fs.mnt.join("f").display().to_string());
    // A file that names a directory= (fio prepends it to every file name,
    // absolute or not) gets the scratch directory and a relative name.
    let names_a_directory = text.lines().any(|l| l.trim_start().starts_with("directory="));
    let (filename, extra) = if file_ops {
        std::fs::create_dir(&names).unwrap();
        (format!("--directory={}", names.display()), None)
    } else if names_a_directory {
        (format!("--directory={}", s.dir.display()), Some("--filename=f".to_string()))
    } else if let Some(nfsd) = &server {
        ("--filename=f".to_string(), Some(format!("--nfs_url={}", nfsd.url())))
    } else {
        (format!("--filename={target}"), None)
    };
    let output = format!("--output={out_json}");
    args.extend([filename.as_str(), output.as_str()]);
    args.extend(extra.as_deref());
    args.extend(OVERRIDES);
    args.extend(header.args);
    if header.must_exist {
        std::fs::write(&target, vec![0u8; 4 << 20]).unwrap();
    }
    run_its_pre_file(s, &args);
    let run = dcload_with(&s.dir, header.env, &args);
    let (outcome, note) = judge(s, path, &run, &out_json);
    (outcome, header.note(note))
}

/// A file reads what its "-pre" file left (a verify state, an iolog):
/// fio's test runner runs the pair in order in one directory. `args` are
/// the file's own run's, the file first.
fn run_its_pre_file(s: &Scratch, args: &[&str]) {
    let p = args[0];
    let pre = p.strip_suffix("-post.fio").or(p.strip_suffix(".fio")).map(|stem| format!("{stem}-pre.fio"));
    if let Some(pre) = pre.filter(|pre| Path::new(pre).exists()) {
        let mut pre_args = args.to_vec();
        pre_args[0] = &pre;
        let out = dcload_in(&s.dir, &pre_args);
        assert!(out.status.success(), "{pre} (before {p}): {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// A run's outcome: it ran (with its job reports), failed as the file
/// means to or as fio fails it too, or failed.
fn judge(s: &Scratch, path: &Path, run: &std::process::Output, out_json: &str) -> (&'static str, String) {
    let p = path.to_str().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    match run.status.code() {
        Some(0) => {
            let json: serde_json::Value = serde_json::from_slice(&std::fs::read(out_json).unwrap()).unwrap();
            let jobs = json["jobs"].as_array().map_or(0, Vec::len);
            assert!(jobs > 0, "{p}: ran, but its JSON has no jobs");
            ("runs", format!("{jobs} job report{}", if jobs == 1 { "" } else { "s" }))
        }
        // A file written to make verify fail (its comment says so) runs
        // as meant when verify fails.
        Some(1)
            if stderr.contains("verify failed")
                && std::fs::read_to_string(path).unwrap().contains("Expected result: verify fails") =>
        {
            ("runs", "verify fails, as the file expects".to_string())
        }
        Some(_) => {
            // The first failure, past any warnings before it, without the
            // scratch directory (which differs from run to run).
            let failure = stderr.lines().find(|l| l.contains("job failed")).unwrap_or(&stderr);
            let failure = failure.replace(&format!("{}/", s.dir.display()), "");
            let failure = failure.as_str();
            let as_fio = |says: &[&str]| says.iter().any(|s| failure.contains(s));
            match FIO_FAILS_TOO.iter().find(|(f, says, _)| path.ends_with(f) && as_fio(says)) {
                Some((_, _, how)) => ("fails, as fio does", how.to_string()),
                None => ("fails", reason(failure, path)),
            }
        }
        None => panic!("{p}: dcload was killed by a signal (a crash?):\n{stderr}"),
    }
}

fn table(rows: &[Row]) -> String {
    let runs = rows.iter().filter(|r| r.outcome == "runs").count();
    let out_of_scope = rows.iter().filter(|r| r.outcome.starts_with("refused: out-of-scope")).count();
    let as_fio = rows.iter().filter(|r| r.outcome == "fails, as fio does").count();
    let local = rows.len() - out_of_scope;
    let mut t = String::new();
    t.push_str("# dcload and fio's own job files\n\n");
    t.push_str(
        "Generated by `crates/dcload/tests/fio_compat.rs` from the job files of fio's repository in \
         `../shared/fio-jobs` (`examples/` and `t-jobs/`; fio's licence, not copied here). Each file is \
         checked with `dcload --parse-only FILE`; a file that parses is run as \
         `dcload FILE --filename=SCRATCH --size=4m --runtime=1 --ramp_time=0 --startdelay=0 --loops=1` \
         (command-line options beat the file's; a file whose header says how to run it gets the options it \
         names, as its note says; SCRATCH is on a 300 MiB XFS for a file of atomic writes, \
         and a file naming a directory= gets the scratch directory and a relative name). The test fails when this table differs from what it \
         finds; `DCLOAD_BLESS=1 cargo test -p dcload --test fio_compat` rewrites it.\n\n",
    );
    t.push_str(&format!(
        "**{runs} of {} files run; {out_of_scope} are refused for an engine or a device feature outside \
         dcload's scope (devices, networks, services; zoned devices, NVMe data placement and protection \
         information); of the other {local}, {runs} run ({:.1}%), and {as_fio} fail{} as fio 3.33 fails \
         {} here.**\n\n",
        rows.len(),
        100.0 * runs as f64 / local.max(1) as f64,
        if as_fio == 1 { "s" } else { "" },
        if as_fio == 1 { "it" } else { "them" },
    ));
    t.push_str(
        "Outcomes: `runs`; `refused: out-of-scope engine` (hardware or services dcload will not drive); \
                `refused: out-of-scope hardware` (a local engine, but options for device features no file has); \
                `refused: engine not yet` (a local engine dcload could run but does not yet); `refused` (an \
                option or value dcload does not implement yet); `fails, as fio does` (parsed and run, and \
                the run failed as fio 3.33's fails here); `fails` (parsed, but the run failed).\n\n",
    );
    t.push_str("| file | outcome | note |\n|---|---|---|\n");
    for r in rows {
        t.push_str(&format!("| {} | {} | {} |\n", r.file, r.outcome, r.note));
    }
    t
}

#[test]
fn fio_job_files_run_or_are_refused_for_a_reason() {
    let Some(dir) = fio_jobs_dir() else {
        return skip("fio_job_files_run_or_are_refused_for_a_reason", "../shared/fio-jobs is absent");
    };
    let s = scratch!("fio-compat");
    let mut rows = Vec::new();
    for sub in ["examples", "t-jobs"] {
        for path in job_files(&dir.join(sub)) {
            let (outcome, note) = outcome_of(&s, &path);
            let file = format!("{sub}/{}", path.file_name().unwrap().to_string_lossy());
            rows.push(Row { file, outcome, note });
        }
    }
    // Failures first: they name the files, where the count below would not.
    let failed: Vec<&Row> = rows.iter().filter(|r| r.outcome == "fails").collect();
    assert!(
        failed.is_empty(),
        "parsed but failed to run: {:?}",
        failed.iter().map(|r| (&r.file, &r.note)).collect::<Vec<_>>()
    );
    let runs = rows.iter().filter(|r| r.outcome == "runs").count();
    assert!(runs >= RUN_AT_LEAST, "only {runs} of fio's job files run (at least {RUN_AT_LEAST} did)");

    let doc = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/fio-compat.md");
    let want = table(&rows);
    if std::env::var_os("DCLOAD_BLESS").is_some() {
        std::fs::write(&doc, &want).unwrap();
    }
    let have = std::fs::read_to_string(&doc).unwrap_or_default();
    // The rows that differ, so an outcome that changed from one run to the
    // next names its job file.
    let gone: Vec<&str> = have.lines().filter(|l| !want.lines().any(|w| w == *l)).collect();
    let new: Vec<&str> = want.lines().filter(|l| !have.lines().any(|h| h == *l)).collect();
    assert!(
        have == want,
        "docs/fio-compat.md is not what fio's job files give now; rerun with DCLOAD_BLESS=1 and commit it\n\
         in the file, not given now: {gone:#?}\ngiven now, not in the file: {new:#?}"
    );
}
