use dcload::cli::{self, Command, Eta, Format};
use dcload::error::{DcError, EXIT_JOB_FAILED, EXIT_OK};
use dcload::output;
use dcload::progress::Progress;
use dcload::report::{Exporter, JsonExporter, TerseExporter, TextExporter};
use dcload::run::{self, RunOptions, STOP};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether descriptor 1 was closed when the process started. Rust's runtime
/// opens /dev/null on a closed standard descriptor before `main`, so this
/// is looked at earlier, by a constructor the C runtime calls first.
static STDOUT_CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

extern "C" fn note_closed_stdout() {
    // SAFETY: F_GETFD only reads the descriptor's flags.
    if unsafe { libc::fcntl(1, libc::F_GETFD) } < 0 {
        STDOUT_CLOSED_AT_START.store(true, Ordering::Relaxed);
    }
}

#[used]
#[link_section = ".init_array"]
static NOTE_CLOSED_STDOUT: extern "C" fn() = note_closed_stdout;

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
            println!("{}", cli::version_line());
            return Ok(EXIT_OK);
        }
        Command::ListModes { json } => {
            print!("{}", cli::list_modes(json));
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
    let read = |p: &std::path::Path| std::fs::read_to_string(p);
    let files: Vec<_> = args
        .job_files
        .iter()
        .zip(&texts)
        .map(|(p, t)| dc_jobfile::JobFile { path: p, text: t, include: Some(&read) })
        .collect();
    if args.showcmd {
        let mut warnings = Vec::new();
        for line in dc_jobfile::showcmd(&files, &args.sections, &mut warnings)? {
            println!("{line}");
        }
        for w in &warnings {
            eprintln!("dcload: warning: {w}");
        }
        return Ok(EXIT_OK);
    }
    let set = dc_jobfile::resolve_sections(&files, &args.job_options, args.ignore_unknown, &args.sections)?;
    for w in &set.warnings {
        eprintln!("dcload: warning: {w}");
    }
    if args.parse_only {
        return Ok(EXIT_OK);
    }
    let sink = output::sink(args.output.as_deref(), STDOUT_CLOSED_AT_START.load(Ordering::Relaxed))?;
    install_signal_handlers();
    let progress = match args.eta {
        Eta::Always => true,
        Eta::Never => false,
        Eta::Auto => Progress::enabled(),
    };
    let report = run::run(set, &RunOptions { fallback: args.fallback, cwd: run::current_dir()?, progress })?;
    let mut out = String::new();
    for f in &args.formats {
        match f {
            Format::Normal => out.push_str(&TextExporter.render(&report)),
            Format::Json => out.push_str(&JsonExporter { bins: false }.render(&report)),
            Format::JsonPlus => out.push_str(&JsonExporter { bins: true }.render(&report)),
            Format::Terse => out.push_str(&TerseExporter { version: args.terse_version }.render(&report)),
        }
    }
    output::write(&sink, &out)?;
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
