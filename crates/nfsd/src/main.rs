//! dcnfsd: an NFSv3 server for benchmarking nfsd's io modes on any kernel.
//! It exports one directory, serves the MOUNT and NFS protocols on one
//! port, and does each direction's I/O in the mode the control directory
//! names (buffered, dontcache, direct, or libdontcache write-behind).

mod connection;
mod export;
mod modes;

use clap::Parser;
use dc_vocab::Mode;
use export::Export;
use fernfs::protocol::nfs::portmap::PortmapTable;
use fernfs::protocol::rpc::{Context, TransactionTracker};
use modes::{parse_mode, ControlDir, Modes};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// How to reach the server, its modes (named from the project's one list)
/// and what COMMIT and stable writes promise.
fn after_help() -> String {
    format!(
        "\
Clients reach it at the URL it prints, e.g.
  nfs://127.0.0.1/export?nfsport=PORT&mountport=PORT
(MOUNT and NFS share the port; no portmapper is needed).

Modes (for --read-mode, --write-mode and the control files): buffered (0),
dontcache (1), direct (2) as nfsd's debugfs knobs io_cache_read and
io_cache_write take them, or writebehind:<policy> through libdontcache, with
a policy of: {}. To switch while serving:
  echo 1 > CONTROL/io_cache_write; kill -HUP PID; cat CONTROL/applied

WRITEs marked DATA_SYNC or FILE_SYNC are on stable storage before the reply;
COMMIT fsyncs the file and returns a writeback error to the client.",
        dc_vocab::Policy::names()
    )
}

#[derive(Parser)]
#[command(
    name = "dcnfsd",
    about = "Export a directory over NFSv3 with nfsd's io modes, switched at run time",
    after_help = after_help()
)]
struct Args {
    /// The directory to export.
    #[arg(long)]
    export: PathBuf,
    /// The export's name in NFS URLs and MOUNT requests.
    #[arg(long, default_value = "export")]
    name: String,
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Listen on an address other than loopback (the export has no access control).
    #[arg(long)]
    allow_remote: bool,
    /// The read mode at start.
    #[arg(long, default_value = "buffered", value_parser = parse_mode)]
    read_mode: Mode,
    /// The write mode at start.
    #[arg(long, default_value = "buffered", value_parser = parse_mode)]
    write_mode: Mode,
    /// A directory with io_cache_read and io_cache_write (created with the
    /// start modes where missing; read at start and on SIGHUP).
    #[arg(long)]
    control: Option<PathBuf>,
    /// Write the port listened on to this file once serving.
    #[arg(long)]
    port_file: Option<PathBuf>,
    /// Threads doing the file I/O (as nfsd's thread count): READs, WRITEs
    /// and COMMITs beyond this many wait.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    threads: u16,
}

fn main() -> ExitCode {
    // A harness may start the server with these blocked (held while it
    // forks); before any thread starts, so every thread has them unblocked.
    unblock(&[libc::SIGHUP, libc::SIGTERM, libc::SIGINT]);
    let args = Args::parse();
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        eprintln!(
            "dcnfsd: refusing to listen on {}: anyone who reaches it may read and write the export; \
             add --allow-remote if that is meant",
            args.listen
        );
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(usize::from(args.threads))
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("dcnfsd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dcnfsd: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> Result<(), String> {
    let modes = Arc::new(Modes::new(args.read_mode, args.write_mode));
    let control = match &args.control {
        Some(dir) => Some(open_control(dir, &args, &modes)?),
        None => None,
    };
    // Write-behind reads and writes should drop closed files at exit too.
    dontcache::settle_closed_files_at_exit();
    let export = Export::new(&args.export, modes.clone()).map_err(|e| format!("{}: {e}", args.export.display()))?;
    let settler = export.settler();
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    // Handlers before the port is announced (stdout, the port file): a
    // harness sends SIGHUP as soon as it knows the port, and SIGHUP's
    // default action ends the process.
    use tokio::signal::unix::{signal, SignalKind};
    // SIGINT a harness may have set to be ignored on purpose, so that Ctrl-C
    // at its terminal reaches only the harness, which stops us in order.
    let interrupt_ignored = ignored(libc::SIGINT);
    let mut hup = signal(SignalKind::hangup()).map_err(|e| e.to_string())?;
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int =
        if interrupt_ignored { None } else { Some(signal(SignalKind::interrupt()).map_err(|e| e.to_string())?) };
    let name = args.name.trim_matches('/');
    let context = Context {
        local_port: port,
        client_addr: String::new(),
        auth: Default::default(),
        vfs: Arc::new(export),
        mount_signal: None,
        export_name: Arc::new(format!("/{name}")),
        // Not consulted: the connection loop answers retransmissions anew.
        transaction_tracker: Arc::new(TransactionTracker::new(std::time::Duration::ZERO)),
        portmap_table: Arc::new(std::sync::RwLock::new(PortmapTable::default())),
    };
    println!(
        "dcnfsd: serving {} as nfs://{}/{name}?nfsport={port}&mountport={port} (read={} write={})",
        args.export.display(),
        args.listen.ip(),
        modes.read(),
        modes.write()
    );
    if let Some(p) = &args.port_file {
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, format!("{port}\n"))
            .and_then(|()| std::fs::rename(&tmp, p))
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    let settler = Arc::new(settler);
    tokio::spawn(close_idle_files(settler.clone()));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (socket, peer) = accepted.map_err(|e| format!("accepting a connection failed: {e}"))?;
                let context = Context { client_addr: peer.to_string(), ..context.clone() };
                tokio::spawn(connection::serve(socket, context));
            }
            _ = hup.recv() => {
                if let Some(c) = &control {
                    reload(c, &modes);
                }
            }
            _ = term.recv() => break,
            Some(_) = async { match int.as_mut() { Some(i) => i.recv().await, None => std::future::pending().await } } => break,
        }
    }
    // Everything written back before the process is gone, so a harness that
    // stops the server finds the export settled.
    settler.settle_all().map_err(|e| format!("writeback at exit failed: {e}"))
}

/// Creates the control directory (with the start modes where its files are
/// missing) and takes the modes it holds.
fn open_control(dir: &std::path::Path, args: &Args, modes: &Modes) -> Result<ControlDir, String> {
    let c = ControlDir::create(dir, args.read_mode, args.write_mode)
        .map_err(|e| format!("control directory {}: {e}", dir.display()))?;
    let loaded = c.load();
    c.report(&loaded).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (r, w) = loaded?;
    modes.set(r, w);
    Ok(c)
}

/// SIGHUP: the control directory's modes, applied and reported in its
/// `applied` file; bad ones leave the modes as they were.
fn reload(c: &ControlDir, modes: &Modes) {
    let loaded = c.load();
    match &loaded {
        Ok((r, w)) => {
            modes.set(*r, *w);
            eprintln!("dcnfsd: modes now read={r} write={w}");
        }
        Err(e) => eprintln!("dcnfsd: modes unchanged: {e}"),
    }
    if let Err(e) = c.report(&loaded) {
        eprintln!("dcnfsd: {}: {e}", c.dir.display());
    }
}

/// Closes files no request has used for a while, on a blocking thread.
async fn close_idle_files(settler: Arc<export::Settler>) {
    let mut tick = tokio::time::interval(export::IDLE_CLOSE / 2);
    loop {
        tick.tick().await;
        let idle = settler.clone();
        let closed = tokio::task::spawn_blocking(move || idle.close_idle(export::IDLE_CLOSE)).await;
        if let Ok(Err(e)) = closed {
            eprintln!("dcnfsd: closing an idle file: {e}");
        }
    }
}

/// Whether `sig`'s disposition is "ignore".
fn ignored(sig: libc::c_int) -> bool {
    // SAFETY: a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Unblocks `sigs` in this thread; threads started afterwards inherit it.
fn unblock(sigs: &[libc::c_int]) {
    // SAFETY: the set is initialised by sigemptyset before use; changing
    // this thread's mask has no memory effects.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}
