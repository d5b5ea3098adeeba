//! `dontcache`: run a program with its files going through libdontcache,
//! or copy files without flooding the page cache.

mod cp;
mod handoff;
mod probe;
mod run;
mod tree;
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
    long_about = long_about()
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct Knobs {
    /// Write-behind policy (`dontcache --help` says what each does).
    #[arg(long, short, value_name = "POLICY", value_parser = policy_parser())]
    policy: Option<Policy>,
    /// Block writers while the library's dirty bytes on a device exceed this
    /// (64m = 64 MiB; every size is read as in fio job files: README, "Sizes").
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    high_water: Option<u64>,
}

/// The top-level help: what the library does, and each policy from its
/// one description.
fn long_about() -> String {
    let mut text = String::from(
        "Write and read files without flooding the page cache, on any kernel.\n\n\
         Writes go through the page cache as usual; a background flusher, kicked by\n\
         the writers, writes the dirtied pages back in batches and drops them once\n\
         clean. Reads drop what they brought in behind them. Pages that were cached\n\
         before a file was opened are never dropped.\n\n\
         Policies (--policy or DONTCACHE_POLICY; flusher is the default):\n",
    );
    for p in Policy::ALL {
        text.push_str(&format!("  {:<9} {}\n", p.name(), p.description()));
    }
    text.push_str(
        "\nEnvironment: DONTCACHE_HIGH_WATER (--high-water); DONTCACHE_SUBMIT, how the flusher\n\
         starts writeback: auto (default: syncfs on ext4 and XFS, and on an overlay whose\n\
         upper layer is on one; loop elsewhere), loop (a sync_file_range per file), uring\n\
         (one io_uring submission per batch) or syncfs (a batch of closed files as one\n\
         syncfs, merged on the disk: fewer writes for trees of small files; see the README\n\
         for its costs).\n",
    );
    text
}

/// The policies' names as clap's possible values, so `--help` lists them
/// and a typo gets "did you mean".
fn policy_parser() -> impl clap::builder::TypedValueParser<Value = Policy> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Policy::ALL.map(Policy::name))
        .map(|name| name.parse::<Policy>().expect("a possible value is a policy's name"))
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
        The command's processes do not wait at exit for files not yet written back:\n\
        they hand them to dontcache run, which finishes them before it exits. So do\n\
        processes that Ctrl-C, SIGTERM, SIGHUP or SIGPIPE stops, which then die of the\n\
        signal as they would have; a process that execs another program writes its\n\
        files back first. Signals sent to dontcache run are passed on to the command.\n\
        Files a process has written or read 1 MiB of are also held by dontcache run\n\
        as it goes, so a process killed by SIGKILL, the OOM killer or a crash leaves\n\
        them to it too; smaller ones it had not finished stay cached (about 2 MiB\n\
        for a cp -a of small files).\n\n\
        The library keeps a descriptor for each file until it is written back, above\n\
        the program's own: the process's soft descriptor limit is raised where the\n\
        hard limit allows, and every program still sees, meets and passes on the\n\
        limit it was given (ulimit -n prints it; an open past it fails with EMFILE).\n\n\
        Exit status: the command's; or, when the command succeeded but the writeback\n\
        of a file failed where no process of it was told (a file it had closed, or\n\
        one of a killed process), 74 (every such file is named on stderr); 125\n\
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
        sockets, directories and files of procfs or sysfs are refused as destinations\n\
        before anything is copied (exit 2). Holes in sparse files stay holes.")]
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
    /// Say which RWF_DONTCACHE this kernel has on DIR's filesystem, by behaviour.
    #[command(after_help = "Writes 3 x 32 MiB with RWF_DONTCACHE to a nameless file in DIR (gone when\n\
        the probe ends) and looks at how much of each write is still dirty when the\n\
        call returns: none with the inline flush of Linux 6.14-7.1, most of it with\n\
        the flusher kick of 7.2+. Also reads one page of a block device (DIR's disk,\n\
        or --block-device) with RWF_DONTCACHE: block devices accept it from 7.3.\n\
        The answer comes from behaviour; where the filesystem refuses the flag, from\n\
        the kernel's release number, and the output says which.\n\n\
        Examples:\n  dontcache probe /var/tmp\n  dontcache probe --json --block-device /dev/loop0 /mnt/scratch\n\n\
        Exit status: 0, or 2 when DIR cannot be probed (not a writable directory).")]
    Probe {
        /// Print the report as JSON (for scripts; dcbench records it).
        #[arg(long)]
        json: bool,
        /// The block device to try RWF_DONTCACHE reads on (default: the disk under DIR).
        #[arg(long, value_name = "DEV")]
        block_device: Option<PathBuf>,
        /// A directory on the filesystem to probe.
        #[arg(default_value = ".", value_name = "DIR")]
        dir: PathBuf,
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
        Cmd::Probe { json, block_device, dir } => match probe::probe(&dir, block_device.as_deref()) {
            Ok(report) if json => {
                println!("{}", serde_json::to_string_pretty(&report).expect("a report serialises"));
                0
            }
            Ok(report) => {
                print!("{}", probe::render(&report));
                0
            }
            Err(e) => {
                eprintln!(
                    "dontcache probe: {}: {e}; name a writable directory on the filesystem to probe",
                    dir.display()
                );
                2
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
