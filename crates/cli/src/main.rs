//! `dontcache`: run a program with its file writes routed through
//! libdontcache, or copy files without flooding the page cache.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::{Parser, Subcommand};
use dontcache::{Handle, Options, Policy};

#[derive(Parser)]
#[command(
    name = "dontcache",
    version,
    about = "Write files without flooding the page cache, on any kernel",
    long_about = "Write files without flooding the page cache, on any kernel.\n\n\
        Writes go through the page cache as usual; a background flusher, kicked by\n\
        the writers, writes the dirtied pages back in batches and drops them once\n\
        clean. Pages that were cached before are never dropped.\n\n\
        Policies (--policy or DONTCACHE_POLICY):\n  \
        flusher   writers count and kick; batched background writeback (default)\n  \
        lazy      writer flushes what it wrote unless writeback is in flight\n  \
        inline    writer starts writeback after every write (kernels 6.14-7.1)\n  \
        per-file  the flusher writes back only the file that kicked it\n  \
        kernel    RWF_DONTCACHE; flusher where the kernel or filesystem refuses it"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct Knobs {
    /// Write-behind policy: flusher, lazy, inline, per-file or kernel.
    #[arg(long, short, value_name = "POLICY")]
    policy: Option<Policy>,
    /// Block writers while the library's dirty bytes on a device exceed this (e.g. 64m).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    high_water: Option<u64>,
}

fn parse_size(s: &str) -> Result<u64, String> {
    dontcache::policy::parse_size(s)
}

#[derive(Subcommand)]
enum Cmd {
    /// Run CMD with its writes to regular files going through libdontcache (LD_PRELOAD).
    #[command(after_help = "Example: dontcache run --policy flusher -- tar -xf big.tar -C /data\n\n\
        Statically linked programs and stdio's internal writes are not intercepted.")]
    Run {
        #[command(flatten)]
        knobs: Knobs,
        /// The program and its arguments (after --).
        #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
        cmd: Vec<OsString>,
    },
    /// Copy files without flooding the page cache; exits 1 on any error.
    #[command(after_help = "Like cp: SRC DST, or SRC... DIR. Each copy is written to a temporary name\n\
        next to its destination and renamed into place only once it is complete and\n\
        written back without error, so a failed copy never leaves a half-written DST.")]
    Cp {
        #[command(flatten)]
        knobs: Knobs,
        /// Print the library's counters for each copy.
        #[arg(long)]
        stats: bool,
        /// Source files, then the destination (a file, or a directory for several sources).
        #[arg(required = true, num_args = 2.., value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
}

fn options(k: &Knobs) -> Result<Options, String> {
    let mut o = Options::from_env()?;
    if let Some(p) = k.policy {
        o.policy = p;
    }
    if let Some(h) = k.high_water {
        o.high_water = h;
    }
    Ok(o)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Run { knobs, cmd } => run(&knobs, &cmd),
        Cmd::Cp { knobs, stats, paths } => cp(&knobs, stats, &paths),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dontcache: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The shim sits next to this binary (target/release, or PREFIX/lib when
/// installed); DONTCACHE_PRELOAD overrides.
fn preload_path() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("DONTCACHE_PRELOAD") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find my own path: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    for cand in [dir.join("libdontcache_preload.so"), dir.join("../lib/libdontcache_preload.so")] {
        if cand.exists() {
            return Ok(cand);
        }
    }
    Err(format!(
        "libdontcache_preload.so is not next to {} nor in ../lib: build it (cargo build --release) or set DONTCACHE_PRELOAD",
        exe.display()
    ))
}

fn run(k: &Knobs, cmd: &[OsString]) -> Result<(), String> {
    let o = options(k)?;
    let shim = preload_path()?;
    let mut preload = OsString::from(shim.as_os_str());
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let err = Command::new(&cmd[0])
        .args(&cmd[1..])
        .env("LD_PRELOAD", preload)
        .env("DONTCACHE_POLICY", o.policy.name())
        .env("DONTCACHE_HIGH_WATER", o.high_water.to_string())
        .exec();
    Err(format!("cannot run {}: {err}", cmd[0].to_string_lossy()))
}

fn cp(k: &Knobs, stats: bool, paths: &[PathBuf]) -> Result<(), String> {
    let o = options(k)?;
    let (dst, srcs) = paths.split_last().expect("clap requires two paths");
    let into_dir = dst.is_dir();
    if srcs.len() > 1 && !into_dir {
        return Err(format!(
            "copying {} files needs a directory as destination; {} is not one",
            srcs.len(),
            dst.display()
        ));
    }
    let mut failed = 0;
    for src in srcs {
        let target = if into_dir {
            match src.file_name() {
                Some(n) => dst.join(n),
                None => {
                    eprintln!("dontcache: {}: cannot copy a path without a file name", src.display());
                    failed += 1;
                    continue;
                }
            }
        } else {
            dst.clone()
        };
        match copy_one(src, &target, o) {
            Ok(s) => {
                if stats {
                    println!(
                        "{} -> {}: {} bytes, written back {}, dropped {}, kicks {} (+{} coalesced), passes {}, stalls {}",
                        src.display(),
                        target.display(),
                        s.bytes_written,
                        s.bytes_written_back,
                        s.bytes_dropped,
                        s.kicks,
                        s.coalesced_kicks,
                        s.passes,
                        s.highwater_stalls
                    );
                }
            }
            Err(e) => {
                eprintln!("dontcache: {e}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {} copies failed", srcs.len()));
    }
    Ok(())
}

fn copy_one(src: &Path, dst: &Path, o: Options) -> Result<dontcache::Stats, String> {
    let meta = std::fs::metadata(src).map_err(|e| format!("{}: {e}", src.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file (dontcache cp copies files, not directories)", src.display()));
    }
    let name = dst.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dst.with_file_name(format!(".{name}.dontcache-{}", std::process::id()));
    let input = Handle::open(src, libc::O_RDONLY, 0, o).map_err(|e| format!("{}: {e}", src.display()))?;
    let output =
        Handle::open(&tmp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, meta.permissions().mode() & 0o7777, o)
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
    let result = pump(&input, &output, src, dst);
    let s = output.stats();
    let closed = output.close_and_wait().map_err(|e| format!("{}: {e}", dst.display()));
    let _ = input.close();
    match result.and(closed) {
        Ok(()) => {
            std::fs::rename(&tmp, dst).map_err(|e| format!("{}: {e}", dst.display()))?;
            Ok(s)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn pump(input: &Handle, output: &Handle, src: &Path, dst: &Path) -> Result<(), String> {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = input.read(&mut buf).map_err(|e| format!("reading {}: {e}", src.display()))?;
        if n == 0 {
            return Ok(());
        }
        let mut done = 0;
        while done < n {
            done += output.write(&buf[done..n]).map_err(|e| format!("writing {}: {e}", dst.display()))?;
        }
    }
}
