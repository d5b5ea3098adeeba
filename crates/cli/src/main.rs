//! `dontcache`: run a program with its files going through libdontcache,
//! or copy files without flooding the page cache.

mod cp;
mod run;
mod watch;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dontcache::{Options, Policy};

#[derive(Parser)]
#[command(
    name = "dontcache",
    version,
    about = "Write and read files without flooding the page cache, on any kernel",
    long_about = "Write and read files without flooding the page cache, on any kernel.\n\n\
        Writes go through the page cache as usual; a background flusher, kicked by\n\
        the writers, writes the dirtied pages back in batches and drops them once\n\
        clean. Reads drop what they brought in behind them. Pages that were cached\n\
        before a file was opened are never dropped.\n\n\
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
    /// Block writers while the library's dirty bytes on a device exceed this
    /// (bytes, or with k/m/g/t suffixes: powers of 1024).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    high_water: Option<u64>,
}

fn parse_size(s: &str) -> Result<u64, String> {
    dontcache::policy::parse_size(s)
}

#[derive(Subcommand)]
enum Cmd {
    /// Run CMD with its regular files going through libdontcache.
    #[command(after_help = "Examples:\n  dontcache run -- tar -xf big.tar -C /data\n  \
        dontcache run --policy lazy -- sh -c 'gzip -c db.dump > /backup/db.gz'\n  \
        dontcache run --watch -- busybox cp big /backup/     # static binary, as root\n\n\
        The shim (LD_PRELOAD) covers every dynamically linked program: its reads and\n\
        writes, stdio, shell redirections, sendfile, splice, copy_file_range, mmap and\n\
        io_uring (found by sweeping its open files). Statically linked programs need\n\
        --watch, which follows the command's process tree with fanotify (root).\n\n\
        Exit status: the command's; or, when the command succeeded but the writeback\n\
        of a file it had closed failed, 74 (every such file is named on stderr); 125\n\
        when dontcache itself cannot start the command.")]
    Run {
        #[command(flatten)]
        knobs: Knobs,
        /// Also watch the command's process tree from outside with fanotify
        /// (needs root): covers statically linked programs.
        #[arg(long)]
        watch: bool,
        /// The program and its arguments (after --).
        #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
        cmd: Vec<OsString>,
    },
    /// Copy files without flooding the page cache; exits 1 on any error.
    #[command(after_help = "Like cp: SRC DST, or SRC... DIR.\n\n\
        A new DST is written under a temporary name next to it and renamed into place\n\
        only once it is complete and written back without error: a failed or\n\
        interrupted copy leaves nothing. An existing regular DST is overwritten in\n\
        place, as cp does (inode, mode, owner and hard links kept). Devices, FIFOs,\n\
        sockets and directories are refused as destinations before anything is\n\
        copied (exit 2). Holes in sparse files stay holes.")]
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
    let code = match cli.cmd {
        Cmd::Run { knobs, watch, cmd } => match options(&knobs).and_then(|o| run::run(o, watch, &cmd)) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("dontcache: {e}");
                125
            }
        },
        Cmd::Cp { knobs, stats, paths } => {
            match options(&knobs)
                .map_err(|message| cp::Failure { code: 2, message })
                .and_then(|o| cp::cp(o, stats, &paths))
            {
                Ok(()) => 0,
                Err(f) => {
                    eprintln!("dontcache: {}", f.message);
                    f.code
                }
            }
        }
    };
    ExitCode::from(code)
}
