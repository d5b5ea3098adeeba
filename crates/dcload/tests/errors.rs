//! Failure paths on real filesystems: a full ext4 image on a loop device,
//! tmpfs refusing RWF_DONTCACHE, misaligned O_DIRECT, bad input, signals.

mod common;
use common::*;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Waits until dcload, started with `--eta=always` and stderr piped, prints
/// a progress line for which `ready` (given the MiB done) holds: the signal
/// tests signal a process that says where it is, not one a sleep guessed at.
/// The reader thread keeps draining stderr until dcload exits.
fn wait_for_progress(child: &mut Child, ready: fn(f64) -> bool) {
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut buf, mut text) = ([0u8; 512], String::new());
        while let Ok(n @ 1..) = stderr.read(&mut buf) {
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
            let done = text
                .rsplit('\r')
                .filter_map(|line| line.split("MiB done").next()?.split_whitespace().last()?.parse().ok())
                .next();
            if done.is_some_and(ready) {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30)).expect("dcload printed the progress line asked for");
}

/// continue_on_error with ignore_error: ENOSPC writes are counted and the
/// job goes on (fio's total_err and first_error, in JSON and text); an
/// errno not listed still ends it, and without the option the first does.
#[test]
fn continue_on_error_counts_the_errors_it_lets_pass() {
    let s = scratch!("continue-on-error");
    let fs = LoopFs::ext4(&s.dir, 16);
    let file = fs.mnt.join("big");
    let fname = format!("--filename={}", file.display());
    let fill = ["--name=fill", "--size=32m", "--bs=1M", "--rw=write", "--fallocate=none", &fname];
    let run = |extra: &[&str]| {
        let _ = std::fs::remove_file(&file);
        let mut args = fill.to_vec();
        args.extend(extra);
        dcload_json(&s.dir, &args)
    };
    let (code, j, err) = run(&["--continue_on_error=write", "--ignore_error=,ENOSPC"]);
    assert_eq!(code, 0, "{err}");
    let job = &j["jobs"][0];
    assert_eq!((job["error"].as_i64(), job["first_error"].as_i64()), (Some(0), Some(libc::ENOSPC as i64)), "{job}");
    let failed = job["total_err"].as_u64().unwrap();
    let written = job["write"]["io_bytes"].as_u64().unwrap();
    assert!(failed >= 16 && written < 16 << 20, "{failed} writes failed, {written} bytes written into 16 MiB");
    assert!(!err.contains("No space left"), "errors let pass are not printed without error_dump: {err}");
    let out = dcload_in(&s.dir, &[&fill[..], &["--continue_on_error=write", "--ignore_error=,ENOSPC"]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("errors    : total=") && text.contains("first_error=28/<No space left on device>"), "{text}");
    // error_dump prints each one.
    let (_, _, err) = run(&["--continue_on_error=write", "--ignore_error=,ENOSPC", "--error_dump=1"]);
    assert!(err.matches("No space left on device").count() >= 16, "{err}");
    // ENOSPC is not among the default errnos (EIO, EILSEQ), and reads are another kind.
    for extra in [&["--continue_on_error=write"][..], &["--continue_on_error=read", "--ignore_error=ENOSPC"], &[]] {
        let (code, j, err) = run(extra);
        assert_eq!((code, j["jobs"][0]["error"].as_i64()), (1, Some(libc::ENOSPC as i64)), "{extra:?}: {err}");
    }
}

#[test]
fn enospc_ends_the_job_with_errno_file_and_offset() {
    let s = scratch!("enospc");
    let fs = LoopFs::ext4(&s.dir, 16);
    let file = fs.mnt.join("big");
    let fname = format!("--filename={}", file.display());
    for engine in ["psync", "io_uring"] {
        let e = format!("--ioengine={engine}");
        // fallocate=none so the write path, not the layout, meets the full disk.
        let (code, j, err) = dcload_json(
            &s.dir,
            &["--name=fill", "--size=64m", "--bs=1M", "--rw=write", "--fallocate=none", "--end_fsync=1", &e, &fname],
        );
        assert_eq!(code, 1, "{engine}: {err}");
        let job = &j["jobs"][0];
        assert_eq!(job["error"], libc::ENOSPC, "{engine}: {job}");
        let msg = job["dcload"]["error_message"].as_str().unwrap();
        assert!(msg.contains(file.to_str().unwrap()) && msg.contains("ENOSPC") && msg.contains("at offset"), "{msg}");
        let off = job["dcload"]["error_offset"].as_u64().unwrap();
        assert!(off > 0 && off < 16 << 20, "ENOSPC happens inside a 16 MiB filesystem, at {off}");
        assert!(err.contains("No space left on device"), "{err}");
        std::fs::remove_file(&file).unwrap();
    }
}

#[test]
fn tmpfs_refuses_dontcache_loudly_and_fallback_says_so() {
    let shm = Path::new("/dev/shm");
    let fs = dc_sys::fs_type_name(shm).unwrap();
    assert_eq!(fs, "tmpfs", "this test needs /dev/shm on tmpfs");
    let file = shm.join(format!("dcload-test-{}", std::process::id()));
    let fname = format!("--filename={}", file.display());
    let args = ["--name=u", "--size=1m", "--rw=write", "--ioengine=pvsync2", "--uncached=1", &fname];
    let out = dcload_in(shm, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let kernel = dc_sys::kernel_release();
    assert!(
        err.contains("RWF_DONTCACHE is refused (EOPNOTSUPP) by tmpfs")
            && err.contains(file.to_str().unwrap())
            && err.contains(&kernel),
        "the message names filesystem, path and kernel: {err}"
    );
    assert!(err.contains("--uncached-fallback=buffered"), "and the way out: {err}");

    let mut with_fallback = vec!["--uncached-fallback=buffered"];
    with_fallback.extend_from_slice(&args);
    let (code, j, err) = dcload_json(shm, &with_fallback);
    assert_eq!(code, 0, "{err}");
    let job = &j["jobs"][0];
    assert_eq!(job["dcload"]["mode"], "buffered", "the result is labelled with what ran");
    let note = job["dcload"]["notes"][0].as_str().unwrap();
    assert!(note.starts_with("FALLBACK: RWF_DONTCACHE was refused") && note.contains("BUFFERED"), "{note}");
    assert!(j["dcload"]["warnings"][0].as_str().unwrap().starts_with("FALLBACK"), "also a top-level warning");
    let _ = std::fs::remove_file(&file);
}

#[test]
fn misaligned_direct_io_names_the_device_block_size() {
    let s = scratch!("dio");
    let fname = format!("--filename={}", s.file("f"));
    let out = dcload_in(&s.dir, &["--name=d", "--size=1m", "--bs=1000", "--rw=write", "--direct=1", &fname]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let dev = std::os::unix::fs::MetadataExt::dev(&std::fs::metadata(&s.dir).unwrap());
    let d = dc_sys::block_device_of(dev).expect("the scratch dir is on a block device");
    let f = std::fs::File::open(s.path("f")).unwrap();
    let align = dc_sys::dio_alignment(std::os::fd::AsFd::as_fd(&f)).unwrap().unwrap().offset;
    assert_eq!(
        err.trim(),
        format!(
            "dcload: job 'd': bs=1000 must be a multiple of {align}, the logical block size of {}, for direct=1",
            d.name
        )
    );
}

#[test]
fn bad_input_gets_one_line_and_exit_2() {
    let s = scratch!("badinput");
    std::fs::write(s.path("job.fio"), "[global]\nbs=4k\n\n[j]\nrw=write\nsize=1m\niodepht=4\n").unwrap();
    let out = dcload_in(&s.dir, &["job.fio"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        "dcload: job.fio line 7: unknown option 'iodepht' (did you mean 'iodepth'?); remove it, or pass --ignore-unknown to run without it (see dcload --help for the options)"
    );
    // --ignore-unknown runs and records the warning in the output.
    let (code, j, _) = dcload_json(&s.dir, &["--ignore-unknown", "job.fio"]);
    assert_eq!(code, 0);
    assert!(j["dcload"]["warnings"][0].as_str().unwrap().contains("'iodepht'"));
    assert_eq!(j["jobs"][0]["write"]["io_bytes"], 1 << 20);

    for (args, expect) in [
        (
            vec!["--name=x", "--size=1m", "--output-format=xml"],
            "--output-format=xml: use normal, json, json+ (json with latency histograms) or terse",
        ),
        (vec!["nonexistent.fio"], "cannot read job file nonexistent.fio"),
        (vec!["--name=x", "--rw=write"], "job 'x': size= is needed because"),
        (vec!["--name=x", "--size=1m", "--filename=/nonexistent-dir/f"], "directory /nonexistent-dir does not exist"),
        (vec![], "no jobs given"),
    ] {
        let out = dcload_in(&s.dir, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(out.status.code(), Some(2) | Some(3)), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
}

#[test]
fn sigint_stops_a_time_based_run_and_marks_it_interrupted() {
    let s = scratch!("sigint");
    let fname = format!("--filename={}", s.file("f"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_dcload"))
        .args([
            "--output-format=json",
            "--name=w",
            "--size=16m",
            "--rw=randwrite",
            "--time_based",
            "--runtime=60",
            &fname,
            "--eta=always",
        ])
        .current_dir(&s.dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_progress(&mut child, |mib| mib > 0.0);
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let start = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(start.elapsed().as_secs() < 10, "stopped promptly");
    assert_eq!(out.status.code(), Some(130));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["dcload"]["interrupted"], true);
    assert!(j["jobs"][0]["write"]["io_bytes"].as_u64().unwrap() > 0);
}

/// `--output` never replaces anything but a regular file, and a bad one is
/// found before any I/O; so are a closed stdout, a NUL byte in a job file,
/// and jobs that ask for more than the machine holds.
// One piece: a table of refusals, each with the one line that must say why.
#[test]
fn unusable_outputs_and_impossible_jobs_are_refused_before_any_io() {
    let s = scratch!("refuse");
    let fifo = s.path("fifo");
    assert!(sh(&format!("mkfifo '{}'", fifo.display())).status.success());
    let node = s.path("null");
    let mut outputs = vec![
        (fifo.clone(), "is a FIFO"),
        (s.dir.clone(), "is a directory"),
        (s.path("missing/out.json"), "cannot create a file in its directory"),
    ];
    if is_root() {
        // A device node of our own, never /dev's.
        assert!(sh(&format!("mknod '{}' c 1 3", node.display())).status.success());
        outputs.push((node.clone(), "is a device"));
    }
    let job = ["--name=x", "--filename=f", "--size=1m", "--rw=write"];
    for (out, expect) in &outputs {
        let mut args = job.to_vec();
        let o = format!("--output={}", out.display());
        args.push(&o);
        let r = dcload_in(&s.dir, &args);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{expect}: {err}");
        assert!(err.contains(expect), "{expect}: {err}");
        assert!(!s.path("f").exists(), "{expect}: nothing is laid out before the output is known to work");
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    if is_root() {
        assert!(std::fs::metadata(&node).unwrap().file_type().is_char_device(), "the device node is still one");
    }
    // A closed stdout: the results would be lost.
    let r = Command::new(env!("CARGO_BIN_EXE_dcload"))
        .args(job)
        .current_dir(&s.dir)
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "/dev/null on purpose is fine");
    // Opened read-write too (Python's subprocess.DEVNULL): what Rust's
    // runtime puts on a closed descriptor, but given on purpose.
    let r = sh(&format!(
        "cd '{}' && '{}' --name=x --filename=f --size=1m --rw=write 1<>/dev/null",
        s.dir.display(),
        env!("CARGO_BIN_EXE_dcload")
    ));
    assert_eq!(r.status.code(), Some(0), "{}", String::from_utf8_lossy(&r.stderr));
    let r = sh(&format!(
        "cd '{}' && '{}' --name=x --filename=f --size=1m --rw=write >&-",
        s.dir.display(),
        env!("CARGO_BIN_EXE_dcload")
    ));
    assert_eq!(r.status.code(), Some(2), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stderr).contains("stdout is closed"));
    // A NUL byte in a section name (it used to panic with exit 101).
    std::fs::write(s.path("nul.fio"), b"[a\0b]\nrw=read\nsize=1m\n").unwrap();
    for extra in [&["--parse-only"][..], &[][..]] {
        let mut args = vec!["nul.fio"];
        args.extend_from_slice(extra);
        let r = dcload_in(&s.dir, &args);
        assert_eq!(r.status.code(), Some(2), "{}", String::from_utf8_lossy(&r.stderr));
        assert!(String::from_utf8_lossy(&r.stderr).contains("line 1: a NUL byte"));
    }
    // More than the machine holds: named by option, before any I/O.
    for (args, expect) in [
        (vec!["--numjobs=10000"], "numjobs"),
        (vec!["--ioengine=io_uring", "--iodepth=100000"], "iodepth=100000"),
        (vec!["--size=1t", "--bs=1g", "--ioengine=io_uring", "--iodepth=4096"], "lower bs, iodepth or numjobs"),
    ] {
        let mut all = job.to_vec();
        all.extend(args.iter());
        let t = std::time::Instant::now();
        let r = dcload_in(&s.dir, &all);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert!(t.elapsed().as_secs() < 5, "{args:?}: refused at once");
    }
    // A size-bound job that ends inside its ramp measured nothing: a failure.
    let (code, j, err) =
        dcload_json(&s.dir, &["--name=x", "--filename=f", "--size=1m", "--rw=write", "--ramp_time=30"]);
    assert_eq!(code, 1, "{err}");
    assert!(j["jobs"][0]["dcload"]["error_message"].as_str().unwrap().contains("ended during ramp_time"), "{j}");
}

/// fio runs each job in a process with a descriptor table of its own;
/// dcload's are threads sharing one, and raise the soft `RLIMIT_NOFILE`
/// to what the hard one allows: 300 jobs at once (about 1,264 descriptors)
/// run under a soft limit of 1,024, and are refused, naming the limit, only
/// where the hard limit is that low too.
#[test]
fn many_jobs_at_once_raise_the_soft_descriptor_limit() {
    let hard = dc_sys::open_files_limits().unwrap().1;
    if hard < 2048 {
        eprintln!("skipped: the hard RLIMIT_NOFILE here is {hard}, under the 2,048 this test raises the soft one to");
        return;
    }
    let s = scratch!("nofile");
    let run = |limits: &str| {
        sh(&format!(
            "cd '{}' && ulimit {limits} && exec '{}' --name=x --numjobs=300 --size=4k --rw=write --output-format=terse",
            s.dir.display(),
            env!("CARGO_BIN_EXE_dcload")
        ))
    };
    let r = run("-Sn 1024");
    assert_eq!(r.status.code(), Some(0), "{}", String::from_utf8_lossy(&r.stderr));
    let files = std::fs::read_dir(&s.dir).unwrap().count();
    assert_eq!(files, 300, "one file per job");
    let r = run("-n 1024");
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("RLIMIT_NOFILE is 1024"), "{err}");
}

/// SIGINT ends a start delay at once.
#[test]
fn sigint_ends_startdelay_at_once() {
    let s = scratch!("startdelay");
    let mut child = Command::new(env!("CARGO_BIN_EXE_dcload"))
        .args(["--output-format=json", "--name=w", "--size=1m", "--rw=write", "--filename=f", "--startdelay=60"])
        .arg("--eta=always")
        .current_dir(&s.dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // In its start delay: running, nothing written yet.
    wait_for_progress(&mut child, |mib| mib == 0.0);
    let start = std::time::Instant::now();
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(start.elapsed().as_secs() < 3, "took {:?}", start.elapsed());
    assert_eq!(out.status.code(), Some(130));
}
