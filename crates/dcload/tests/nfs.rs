//! ioengine=nfs against dcnfsd on this machine: every io mode of the server
//! round-trips byte-exact and leaves the exported file cached as the mode
//! says, a writeback error under the export reaches the client's COMMIT,
//! the seed's nfsd-io-bench job files run unchanged, and a SIGHUP sent as
//! soon as the server announces its port switches the modes.

mod common;

use common::*;
use std::time::{Duration, Instant};

/// Waits up to 3 s for `path`'s cached pages to fall to `at_most`; returns
/// the last count (writeback and the drop after it are asynchronous).
fn cached_settles(path: &std::path::Path, at_most: u64) -> u64 {
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        let n = cached_pages(path);
        if n <= at_most || Instant::now() > until {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// One piece: one server, every io mode in turn against the same files, so the
// modes are compared under the same conditions.
#[test]
fn every_server_io_mode_round_trips_byte_exact_and_caches_as_it_says() {
    let s = scratch!("dcload-nfs-modes");
    let export = s.path("export");
    std::fs::create_dir(&export).unwrap();
    let server = NfsServer::start(&export, &s.dir);
    let url = format!("--nfs_url={}", server.url());
    let pages = 16 * 1024 * 1024 / 4096;
    for mode in ["buffered", "dontcache", "direct", "writebehind:flusher", "writebehind:lazy"] {
        server.set_modes(mode, mode);
        let name = format!("f-{}", mode.replace(':', "-"));
        // A write with read-back through the same server (verify), then a
        // COMMIT (end_fsync): every byte crossed the wire both ways.
        let (code, json, err) = dcload_json(
            &s.dir,
            &[
                "--name=w",
                "--ioengine=nfs",
                &url,
                &format!("--filename={name}"),
                "--rw=write",
                "--bs=64k",
                "--size=16m",
                "--iodepth=4",
                "--verify=crc32c",
                "--end_fsync=1",
            ],
        );
        assert_eq!(code, 0, "{mode}: {err}\n{}", server.log());
        let job = &json["jobs"][0];
        assert_eq!(job["error"], 0, "{mode}: {job}");
        assert_eq!(job["write"]["io_bytes"], 16 << 20, "{mode}");
        let file = export.join(&name);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 16 << 20, "{mode}");
        let cached = cached_settles(&file, if mode == "buffered" { pages } else { pages / 16 });
        if mode == "buffered" {
            assert!(cached >= pages * 9 / 10, "{mode}: only {cached} of {pages} pages cached");
        } else {
            assert!(cached <= pages / 16, "{mode}: {cached} of {pages} pages left cached");
        }
    }
    // Read jobs in each mode over the last file, checking every block:
    // random (byte-exact), then sequential from a cold cache (residency).
    // Random RWF_DONTCACHE reads are not held to residency: readahead's
    // folios that no read copies from stay (about a quarter of the file
    // for 64 KiB random reads here), on nfsd as on this server.
    let file = export.join("f-writebehind-lazy");
    for mode in ["buffered", "dontcache", "direct", "writebehind:flusher"] {
        server.set_modes(mode, mode);
        for rw in ["--rw=randread", "--rw=read"] {
            if mode.starts_with("writebehind") {
                // The server closes a file two seconds unused, as nfsd does;
                // a write-behind handle kept across the drop below would
                // count the pages it found cached as not its to drop.
                std::thread::sleep(Duration::from_millis(3500));
            }
            drop_cache_of(&file);
            let (code, json, err) = dcload_json(
                &s.dir,
                &[
                    "--name=r",
                    "--ioengine=nfs",
                    &url,
                    "--filename=f-writebehind-lazy",
                    rw,
                    "--bs=64k",
                    "--size=16m",
                    "--iodepth=8",
                    "--verify=crc32c",
                ],
            );
            assert_eq!(code, 0, "{rw} in {mode}: {err}");
            assert_eq!(json["jobs"][0]["read"]["io_bytes"], 16 << 20, "{rw} in {mode}");
        }
        // The kernel drops a dontcache folio only when the read that copied
        // from it gets its lock: with eight reads in flight on the server's
        // threads some folios are held by another, and stay (7-11% of the
        // file here; nfsd, reading on many threads, would meet the same).
        let bound = if mode == "dontcache" { pages / 4 } else { pages / 16 };
        let cached = cached_settles(&file, if mode == "buffered" { pages } else { bound });
        if mode == "buffered" {
            assert!(cached >= pages * 9 / 10, "read in {mode}: only {cached} of {pages} pages cached");
        } else {
            assert!(cached <= bound, "read in {mode}: {cached} of {pages} pages left cached");
        }
    }
    assert!(server.stop(), "dcnfsd did not exit cleanly");
}

#[test]
fn a_writeback_error_under_the_export_reaches_the_clients_commit() {
    if !is_root() {
        skip("a_writeback_error_under_the_export_reaches_the_clients_commit", "needs root for a loop device");
        return;
    }
    let s = scratch!("dcload-nfs-eio");
    // 64 MiB of ext4 whose image may only grow to 24 MiB: writes succeed
    // into the server's page cache, writeback fails, COMMIT must say so.
    let fs = LoopFs::ext4_on_small_tmpfs(&s.dir, 64, 24);
    let server = NfsServer::start(&fs.mnt, &s.dir);
    let (code, json, err) = dcload_json(
        &s.dir,
        &[
            "--name=w",
            "--ioengine=nfs",
            &format!("--nfs_url={}", server.url()),
            "--filename=big",
            "--rw=write",
            "--bs=1m",
            "--size=48m",
            "--end_fsync=1",
        ],
    );
    assert_ne!(code, 0, "a failed COMMIT must fail the job: {err}");
    assert_eq!(json["jobs"][0]["error"], libc::EIO, "{err}");
    assert!(err.contains("COMMIT"), "the failure should name the COMMIT: {err}");
    drop(server);
}

#[test]
fn the_seed_nfsd_io_bench_job_files_run_unchanged() {
    let Some(files) = seed_job_files() else {
        skip("the_seed_nfsd_io_bench_job_files_run_unchanged", "../shared/reference is absent");
        return;
    };
    let files: Vec<_> = files.into_iter().filter(|(p, _)| p.contains("nfsd-io-bench")).collect();
    assert!(files.len() >= 7, "expected the nfsd-io-bench job files, found {}", files.len());
    let s = scratch!("dcload-nfs-seed");
    let export = s.path("export");
    std::fs::create_dir(&export).unwrap();
    let server = NfsServer::start(&export, &s.dir);
    // As the seed's run script does: the job file, then --filename and
    // --size; the URL points at this server's port instead of the
    // portmapper's, and time-based jobs run 1 s instead of 300.
    let mut order: Vec<_> = files.iter().collect();
    order.sort_by_key(|(p, _)| !p.contains("write")); // write first: the read jobs need the file
    for (path, text) in order {
        let job = s.path(path.rsplit('/').next().unwrap());
        std::fs::write(&job, text).unwrap();
        let out = dcload_in(
            &s.dir,
            &[
                job.to_str().unwrap(),
                &format!("--nfs_url={}", server.url()),
                "--filename=bench.dat",
                "--size=8m",
                "--runtime=1",
            ],
        );
        assert!(
            out.status.success(),
            "{path}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    assert_eq!(std::fs::metadata(export.join("bench.dat")).unwrap().len(), 8 << 20);
}

#[test]
fn unlink_removes_the_servers_file_and_never_the_local_one_of_that_name() {
    let s = scratch!("dcload-nfs-unlink");
    let export = s.path("export");
    std::fs::create_dir(&export).unwrap();
    let server = NfsServer::start(&export, &s.dir);
    // The same relative name in dcload's working directory: an nfs job's
    // file name is the export's, whatever the local directory holds.
    let local = s.path("victim");
    std::fs::write(&local, b"not the server's").unwrap();
    let (code, json, err) = dcload_json(
        &s.dir,
        &[
            "--name=w",
            "--ioengine=nfs",
            &format!("--nfs_url={}", server.url()),
            "--filename=victim",
            "--rw=write",
            "--bs=64k",
            "--size=1m",
            "--unlink=1",
        ],
    );
    assert_eq!(code, 0, "{err}\n{}", server.log());
    assert_eq!(json["jobs"][0]["write"]["io_bytes"], 1 << 20);
    assert!(!export.join("victim").exists(), "unlink=1 removes the file on the server");
    assert_eq!(std::fs::read(&local).unwrap(), b"not the server's", "the local file of that name is untouched");
}

/// A job with wait_for opens its file when it starts, as fio does: readers
/// waiting for the writer that creates the file on the server find it (no
/// local layout creates an NFS file beforehand). With the readers opening
/// their file beside the writer, three runs of three failed with
/// NFS3ERR_NOENT.
#[test]
fn a_reader_waiting_for_the_writer_finds_the_file_it_created() {
    let s = scratch!("dcload-nfs-wait-for");
    let export = s.path("export");
    std::fs::create_dir(&export).unwrap();
    let server = NfsServer::start(&export, &s.dir);
    let url = format!("--nfs_url={}", server.url());
    let common = ["--ioengine=nfs", url.as_str(), "--filename=made-by-writer", "--bs=64k", "--size=4m"];
    let mut args = vec!["--name=write", "--rw=write"];
    args.extend(common);
    args.extend(["--name=read", "--wait_for=write", "--rw=randread", "--numjobs=8"]);
    args.extend(common);
    let (code, json, err) = dcload_json(&s.dir, &args);
    assert_eq!(code, 0, "{err}\n{}", server.log());
    assert_eq!(json["jobs"][0]["write"]["io_bytes"], 4 << 20);
    for k in 1..9 {
        assert_eq!(json["jobs"][k]["read"]["io_bytes"], 4 << 20, "reader {k}");
    }
}

/// A harness sends SIGHUP (switch the io modes) as soon as it reads the
/// port: the server must already handle it then, as SIGHUP's default action
/// ends the process. The port file is watched without sleeping, so the
/// signal lands right after it appears; with the handlers installed after
/// the port was announced, 16 of 100 such servers died.
#[test]
fn a_hangup_as_soon_as_the_port_is_announced_reloads_the_modes() {
    let s = scratch!("dcload-nfs-early-hangup");
    let export = s.path("export");
    std::fs::create_dir(&export).unwrap();
    for attempt in 0..40 {
        let control = s.path(&format!("control-{attempt}"));
        let port_file = s.path(&format!("port-{attempt}"));
        let mut server = std::process::Command::new(workspace_binary("dcnfsd"))
            .arg("--export")
            .arg(&export)
            .arg("--control")
            .arg(&control)
            .arg("--port-file")
            .arg(&port_file)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(s.path(&format!("dcnfsd-{attempt}.err"))).unwrap())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while !port_file.exists() {
            assert!(server.try_wait().unwrap().is_none(), "dcnfsd exited before serving");
            assert!(Instant::now() < until, "dcnfsd did not start serving in 10 s");
            std::hint::spin_loop();
        }
        let applied = control.join("applied");
        std::fs::remove_file(&applied).unwrap();
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        unsafe { libc::kill(server.id() as i32, libc::SIGHUP) };
        let until = Instant::now() + Duration::from_secs(5);
        while !applied.exists() {
            if let Some(status) = server.try_wait().unwrap() {
                panic!("attempt {attempt}: SIGHUP right after the port file ended dcnfsd ({status})");
            }
            assert!(Instant::now() < until, "attempt {attempt}: SIGHUP did not reload the modes in 5 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: as above.
        unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
        assert!(server.wait().unwrap().success(), "attempt {attempt}: dcnfsd stopped in order");
    }
}
