use dcload::cli::{self, Command, Format};
use dcload::error::{DcError, EXIT_JOB_FAILED, EXIT_OK};
use dcload::report::{Exporter, JsonExporter, TextExporter};
use dcload::run::{self, RunOptions, STOP};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;

extern "C" fn on_signal(_sig: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// First SIGINT/SIGTERM: stop the jobs and write what ran. SA_RESETHAND makes
/// a second one kill the process the usual way.
fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Write `text` to `path` via a temporary file and rename, so a reader never
/// sees half a result.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn real_main() -> Result<i32, DcError> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match cli::parse(&argv)? {
        Command::Help => {
            print!("{}", cli::help());
            return Ok(EXIT_OK);
        }
        Command::CmdHelp => {
            print!("{}", cli::cmdhelp());
            return Ok(EXIT_OK);
        }
        Command::Version => {
            println!("dcload {}", env!("CARGO_PKG_VERSION"));
            return Ok(EXIT_OK);
        }
        Command::Run(a) => a,
    };
    let mut texts = Vec::new();
    for p in &args.job_files {
        let t = std::fs::read_to_string(p)
            .map_err(|e| DcError::Usage(format!("cannot read job file {}: {e}", p.display())))?;
        texts.push(t);
    }
    let files: Vec<_> =
        args.job_files.iter().zip(&texts).map(|(p, t)| dc_jobfile::JobFile { path: p, text: t }).collect();
    let set = dc_jobfile::resolve(&files, &args.job_options, args.ignore_unknown)?;
    for w in &set.warnings {
        eprintln!("dcload: warning: {w}");
    }
    if args.parse_only {
        for j in &set.jobs {
            println!("{j:#?}");
        }
        return Ok(EXIT_OK);
    }
    install_signal_handlers();
    let report = run::run(set, &RunOptions { fallback: args.fallback, cwd: run::current_dir()? })?;
    let mut out = String::new();
    for f in &args.formats {
        match f {
            Format::Normal => out.push_str(&TextExporter.render(&report)),
            Format::Json => out.push_str(&JsonExporter.render(&report)),
        }
    }
    match &args.output {
        Some(p) => {
            write_atomically(p, &out).map_err(|e| DcError::Output(format!("cannot write {}: {e}", p.display())))?
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(out.as_bytes())
                .and_then(|_| stdout.flush())
                .map_err(|e| DcError::Output(format!("writing results: {e}")))?;
        }
    }
    for j in report.jobs.iter().filter_map(|j| j.failure.as_ref()) {
        eprintln!("dcload: job failed: {}", j.message);
    }
    Ok(if report.interrupted {
        130
    } else if report.failed() {
        EXIT_JOB_FAILED
    } else {
        EXIT_OK
    })
}

fn main() {
    let code = match real_main() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("dcload: {e}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}
