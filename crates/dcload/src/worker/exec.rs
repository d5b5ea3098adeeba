//! fio's `exec` engine: a job that does no I/O and runs a program instead,
//! beside the jobs that do (a monitor such as turbostat, or a load of the
//! user's own). The program starts with the job, may end on its own, and
//! is stopped when the job's runtime is over: SIGTERM, then SIGKILL if it
//! is still there `grace_time` later. It is always reaped, so no program
//! outlives dcload.

use super::{Failure, InstanceResult};
use dc_jobfile::ExecProgram;
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the job looks at its program and the clock (fio's engine
/// checks every 50 ms).
const POLL: Duration = Duration::from_millis(10);

pub(super) fn run(
    exec: &ExecProgram,
    name: &str,
    runtime: Option<Duration>,
    stops: [&AtomicBool; 3],
    r: &mut InstanceResult,
) {
    let start = Instant::now();
    let cpu0 = dc_sys::thread_cpu().unwrap_or_default();
    match start_program(exec, name, runtime) {
        Ok((mut child, argv)) => {
            let deadline = runtime.map(|t| start + t);
            let ended =
                || stops.iter().any(|s| s.load(Ordering::Relaxed)) || deadline.is_some_and(|d| Instant::now() >= d);
            // fio's job runs its whole runtime, whether or not the program ends first.
            let mut status = None;
            while !ended() {
                if status.is_none() {
                    status = child.try_wait().ok().flatten();
                }
                std::thread::sleep(POLL);
            }
            match status {
                Some(s) if !s.success() => {
                    eprintln!("dcload: job '{name}': its program ({}) ended early: {s}", argv.join(" "))
                }
                Some(_) => {}
                None => stop(&mut child, exec.grace_time),
            }
        }
        Err(failure) => r.failure = Some(failure),
    }
    r.runtime_ns = start.elapsed().as_nanos() as u64;
    r.cpu = dc_sys::thread_cpu().unwrap_or_default().since(&cpu0);
}

/// Starts the program, its output in `NAME.stdout` and `NAME.stderr` under
/// `std_redirect`, as fio does; returns it and its argument list.
fn start_program(exec: &ExecProgram, name: &str, runtime: Option<Duration>) -> Result<(Child, Vec<String>), Failure> {
    let argv = exec.argv(name, runtime);
    let fail = |what: String, e: std::io::Error| Failure {
        errno: e.raw_os_error().unwrap_or(libc::EIO),
        offset: None,
        message: format!("job '{name}': ioengine=exec: {what}: {e}"),
    };
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    if exec.std_redirect {
        let (out, err) = (format!("{name}.stdout"), format!("{name}.stderr"));
        let stdout = output_file(&out).map_err(|e| fail(format!("creating {out}"), e))?;
        let stderr = output_file(&err).map_err(|e| fail(format!("creating {err}"), e))?;
        cmd.stdout(Stdio::from(stdout)).stderr(Stdio::from(stderr));
    }
    let child = cmd.spawn().map_err(|e| fail(format!("cannot run {}", argv[0]), e))?;
    Ok((child, argv))
}

/// `NAME.stdout`/`NAME.stderr`, emptied as fio empties them, but only when
/// it is a regular file of its own name: a symlink is not followed, and a
/// device node or FIFO of that name is refused, not truncated or opened
/// for a program to write into.
fn output_file(name: &str) -> std::io::Result<File> {
    let not_regular = || std::io::Error::other("it exists and is not a regular file; remove it, or set std_redirect=0");
    if std::fs::symlink_metadata(name).is_ok_and(|m| !m.is_file()) {
        return Err(not_regular());
    }
    // The flags keep a name swapped in meanwhile from being followed or blocking.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(name)?;
    if !f.metadata()?.is_file() {
        return Err(not_regular());
    }
    f.set_len(0)?;
    Ok(f)
}

/// SIGTERM, up to `grace` for it to end, then SIGKILL; reaped either way.
fn stop(child: &mut Child, grace: Duration) {
    let _ = dc_sys::kill(child.id() as libc::pid_t, libc::SIGTERM);
    let until = Instant::now() + grace;
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(POLL);
    }
    let _ = child.kill();
    let _ = child.wait();
}
