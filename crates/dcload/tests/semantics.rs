//! Job options that shape how much I/O is done and when, checked by exact
//! byte and operation counts.

mod common;
use common::*;

fn job(s: &Scratch, extra: &[&str]) -> serde_json::Value {
    let fname = format!("--filename={}", s.file("f"));
    let mut args = vec!["--name=j", "--bs=64k", &fname];
    args.extend_from_slice(extra);
    let (code, j, err) = dcload_json(&s.dir, &args);
    assert_eq!(code, 0, "{extra:?}: {err}");
    j["jobs"][0].clone()
}

#[test]
fn loops_and_io_size_multiply_the_work() {
    let s = scratch!("loops");
    let j = job(&s, &["--size=1m", "--rw=write", "--loops=3"]);
    assert_eq!(j["write"]["io_bytes"], 3 << 20);
    let j = job(&s, &["--size=1m", "--rw=randread", "--io_size=5m"]);
    assert_eq!(j["read"]["io_bytes"], 5 << 20, "io_size wraps around the file");
    assert_eq!(j["read"]["total_ios"], 80);
}

#[test]
fn fsync_every_n_writes_is_counted() {
    let s = scratch!("fsync");
    let j = job(&s, &["--size=1m", "--rw=write", "--fsync=4"]);
    assert_eq!(j["sync"]["total_ios"], 4, "16 writes, an fsync after every 4th");
    let j = job(&s, &["--size=1m", "--rw=write", "--fdatasync=8"]);
    assert_eq!(j["sync"]["total_ios"], 2);
}

#[test]
fn ramp_time_is_excluded_from_the_statistics() {
    let s = scratch!("ramp");
    let start = std::time::Instant::now();
    let j = job(&s, &["--size=4m", "--rw=randread", "--time_based", "--runtime=1", "--ramp_time=1"]);
    assert!(start.elapsed().as_millis() >= 2000, "ramp then runtime");
    let runtime = j["job_runtime"].as_u64().unwrap();
    assert!((1000..2000).contains(&runtime), "only the second after the ramp is reported: {runtime} ms");
}

#[test]
fn unlink_removes_the_file_and_existing_files_keep_their_size() {
    let s = scratch!("unlink");
    std::fs::write(s.path("f"), vec![7u8; 256 * 1024]).unwrap();
    // No size=: the existing file's size is used.
    let j = job(&s, &["--rw=read"]);
    assert_eq!(j["read"]["io_bytes"], 256 * 1024);
    job(&s, &["--rw=read", "--unlink=1"]);
    assert!(!s.path("f").exists());
}

#[test]
fn parse_only_and_cmdhelp_do_no_io() {
    let s = scratch!("parseonly");
    let out = dcload_in(&s.dir, &["--parse-only", "--name=x", "--size=1g", "--rw=write"]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "valid jobs: nothing printed, as fio");
    assert!(!s.path("x.0.0").exists(), "and creates no file");
    let out = dcload_in(&s.dir, &["--parse-only", "--name=x", "--size=1g", "--rw=sideways"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sideways"), "an invalid job is named");
    // The version line tools that look for fio 3 accept (fio-plot's bench-fio).
    let out = dcload_in(&s.dir, &["--version"]);
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(line.starts_with("fio-3.") && line.contains("(dcload "), "{line}");
    let out = dcload_in(&s.dir, &["--cmdhelp"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for opt in ["uncached", "filename_format", "write_bw_log", "random_generator", "io_size, io_limit"] {
        assert!(text.contains(opt), "--cmdhelp lists {opt}");
    }
}

/// `--section`, `--showcmd` and `--eta` as fio's: one section of a file runs,
/// a file becomes a command line that runs the same jobs, and the progress
/// line can be forced on or off.
#[test]
fn section_showcmd_and_eta() {
    let s = scratch!("section");
    let file = "[global]\nsize=1m\nbs=64k ; a comment\n[first]\nrw=write\nfilename=one\n\
                [global]\nrw=write\n[second]\nfilename=two file\n[third]\nfilename=three\n";
    std::fs::write(s.path("jobs.fio"), file).unwrap();
    let (code, j, err) = dcload_json(&s.dir, &["jobs.fio", "--section=second", "--section=third"]);
    assert_eq!(code, 0, "{err}");
    let names: Vec<_> = j["jobs"].as_array().unwrap().iter().map(|j| j["jobname"].as_str().unwrap()).collect();
    assert_eq!(names, ["second", "third"]);
    assert_eq!(j["jobs"][0]["write"]["io_bytes"], 1 << 20, "[global]s still apply");
    assert!(!s.path("one").exists() && s.path("two file").exists());
    let (code, j, _) = dcload_json(&s.dir, &["jobs.fio", "--section=first,third"]);
    assert_eq!((code, j["jobs"].as_array().unwrap().len()), (0, 2));
    let out = dcload_in(&s.dir, &["jobs.fio", "--section=fourth"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--section=fourth: no job file has a section [fourth] (its job sections: first, second, third)")
    );

    let out = dcload_in(&s.dir, &["--showcmd", "jobs.fio"]);
    assert!(out.status.success());
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        line,
        "dcload --size=1m --bs=64k --name=first --rw=write --filename=one --name=global --rw=write \
         --name=second '--filename=two file' --name=third --filename=three"
    );
    // The line runs what the file runs: the same jobs on the same files.
    for f in ["one", "two file", "three"] {
        std::fs::remove_file(s.path(f)).unwrap();
    }
    let out = sh(&format!(
        "cd '{}' && {} --output-format=json",
        s.dir.display(),
        line.replacen("dcload", env!("CARGO_BIN_EXE_dcload"), 1)
    ));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ran: Vec<_> =
        j["jobs"].as_array().unwrap().iter().map(|j| (j["jobname"].clone(), j["write"]["io_bytes"].clone())).collect();
    assert_eq!(ran.len(), 3);
    assert!(ran.iter().all(|(_, b)| b == 1 << 20), "{ran:?}");
    assert!(s.path("one").exists() && s.path("two file").exists() && s.path("three").exists());
    let out = dcload_in(&s.dir, &["--showcmd", "--section=fourth", "jobs.fio"]);
    assert_eq!(out.status.code(), Some(2), "a misspelt section is refused for --showcmd too");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no job file has a section [fourth]"));
    let out = dcload_in(&s.dir, &["--showcmd", "--section=third", "jobs.fio"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "dcload --size=1m --bs=64k --rw=write --name=third --filename=three"
    );

    // --eta=always draws the progress line even into a pipe; never and auto (not a terminal) do not.
    let job = ["--name=x", "--filename=f", "--size=4m", "--rw=write", "--time_based", "--runtime=2"];
    for (eta, shown) in [("always", true), ("never", false), ("auto", false)] {
        let mut args = vec![format!("--eta={eta}")];
        args.extend(job.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = dcload_in(&s.dir, &args);
        assert!(out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.contains("MB/s"), shown, "--eta={eta}: {err:?}");
    }
    let out = dcload_in(&s.dir, &["--eta=sometimes", "--name=x", "--size=1m"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--eta=sometimes: use auto"));
}

#[test]
fn exitall_stops_the_jobs_beside_it_and_new_group_does_not_wait() {
    // A sized writer and a time-based reader in a group of its own
    // (new_group): they run together, and with exit_what=stonewall the
    // reader stops when the writer ends (noisy-neighbor: readers run as
    // long as the writer).
    let s = scratch!("exitall");
    std::fs::write(s.path("r"), vec![1u8; 1 << 20]).unwrap();
    let w = format!("--filename={}", s.file("w"));
    let r = format!("--filename={}", s.file("r"));
    let start = std::time::Instant::now();
    let (code, j, err) = dcload_json(
        &s.dir,
        &[
            "--name=writer",
            &w,
            "--size=8m",
            "--bs=64k",
            "--rw=write",
            "--exitall=1",
            "--exit_what=stonewall",
            "--name=reader",
            "--new_group",
            &r,
            "--bs=4k",
            "--rw=randread",
            "--time_based",
            "--runtime=60",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(start.elapsed().as_secs() < 30, "the reader ran beside the writer and stopped with it");
    assert_eq!(j["jobs"][0]["write"]["io_bytes"], 8 << 20, "the writer did all its work");
    assert!(j["jobs"][1]["read"]["io_bytes"].as_u64().unwrap() > 0, "the reader ran");
    assert_eq!(j["jobs"][1]["groupid"], 1, "in a reporting group of its own");
}

#[test]
fn nrfiles_creates_each_new_file_in_turn_in_every_mode() {
    // fs_mark's small-files case: 4 KiB files, created and written in the timed part.
    for mode in ["--buffered=1", "--uncached=1", "--direct=1", "--writebehind=flusher"] {
        let s = scratch!("nrfiles");
        let dir = format!("--directory={}", s.dir.display());
        let (code, j, err) = dcload_json(
            &s.dir,
            &[
                "--name=small",
                &dir,
                "--numjobs=2",
                "--nrfiles=50",
                "--filesize=8k",
                "--bs=4k",
                "--rw=write",
                "--ioengine=pvsync2",
                "--filename_format=$jobname.$jobnum.$filenum",
                mode,
            ],
        );
        assert_eq!(code, 0, "{mode}: {err}");
        assert_eq!(j["jobs"][0]["write"]["io_bytes"], 50 * 8192, "{mode}: every file written once");
        assert_eq!(j["jobs"][0]["write"]["total_ios"], 100);
        for jobnum in 0..2 {
            for filenum in [0, 1, 25, 49] {
                let p = s.path(&format!("small.{jobnum}.{filenum}"));
                assert_eq!(std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0), 8192, "{mode}: {}", p.display());
            }
            assert!(!s.path(&format!("small.{jobnum}.50")).exists(), "{mode}: exactly nrfiles files");
        }
    }
}

#[test]
fn nrfiles_needs_filesize_and_sequential_writes() {
    let s = scratch!("nrfiles-bad");
    let dir = format!("--directory={}", s.dir.display());
    for (extra, msg) in [
        (vec!["--nrfiles=4", "--rw=write"], "nrfiles= needs filesize="),
        (vec!["--nrfiles=4", "--filesize=8k", "--rw=randwrite"], "it needs rw=write"),
        (vec!["--nrfiles=4", "--filesize=6k", "--rw=write"], "must be a multiple of bs"),
        (vec!["--nrfiles=4", "--filesize=8k", "--rw=write", "--end_fsync=1"], "drop fsync"),
    ] {
        let mut args = vec!["--name=x", &dir, "--bs=4k"];
        args.extend(extra);
        let out = dcload_in(&s.dir, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(msg), "{args:?}: {err}");
    }
}

/// io_uring completions are reaped as they come whatever the ring's setup:
/// cached 4k random reads at depth 4 never wait long behind others. A
/// deferred completion left unreaped until the run's end showed as 830-930
/// ms in most 1 s runs; fio's slowest here is 47 ms, and a loaded machine
/// (the whole test suite beside it) delayed one by 298 ms. The bound is
/// half the run: far above any scheduling delay, far below a completion
/// that waits for the end.
#[test]
fn io_uring_completions_are_reaped_as_they_come() {
    let s = scratch!("uring-reap");
    job(&s, &["--size=16m", "--rw=write"]);
    for run in 0..3 {
        let j = job(
            &s,
            &[
                "--size=16m",
                "--rw=randread",
                "--bs=4k",
                "--ioengine=io_uring",
                "--iodepth=4",
                "--time_based",
                "--runtime=2",
            ],
        );
        let clat = &j["read"]["clat_ns"];
        let (max, median) = (clat["max"].as_f64().unwrap(), clat["percentile"]["50.000000"].as_f64().unwrap());
        assert!(max < 1e9, "run {run}: slowest completion {:.0} ms (median {:.0} us)", max / 1e6, median / 1e3);
    }
}

/// fio's `include FILE`: the included lines are read in place, from the
/// including file's directory; a missing file is named with its line.
#[test]
fn job_files_include_other_files() {
    let s = scratch!("include");
    std::fs::create_dir_all(s.path("parts")).unwrap();
    std::fs::write(s.path("parts/size.fio"), "size=1m\nbs=64k\n").unwrap();
    std::fs::write(s.path("main.fio"), "[global]\ninclude parts/size.fio\n[w]\nrw=write\nfilename=out\n").unwrap();
    let (code, j, err) = dcload_json(&s.dir, &["main.fio"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(j["jobs"][0]["write"]["io_bytes"], 1 << 20);
    assert_eq!(j["jobs"][0]["write"]["total_ios"], 16);

    std::fs::write(s.path("bad.fio"), "[w]\nsize=1m\ninclude parts/none.fio\n").unwrap();
    let out = dcload_in(&s.dir, &["bad.fio"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.fio line 3: include parts/none.fio: cannot read"), "{err}");
}

/// The offsets a job's I/Os went to, in issue order, from its
/// `log_offset=1` completion-latency log.
fn logged_offsets(s: &Scratch, name: &str, extra: &[&str]) -> Vec<u64> {
    let log = format!("--write_lat_log={name}");
    let mut args = vec!["--log_avg_msec=0", "--log_offset=1", "--iodepth=1", log.as_str()];
    args.extend_from_slice(extra);
    job(s, &args);
    std::fs::read_to_string(s.path(&format!("{name}_clat.1.log")))
        .unwrap()
        .lines()
        .map(|l| l.split(", ").nth(4).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn random_distributions_put_the_io_where_they_say() {
    let s = scratch!("distribution");
    // All accesses in the first 10% of a 64-block file, half of them in the first block.
    let at = logged_offsets(
        &s,
        "zoned",
        &["--size=4m", "--rw=randread", "--norandommap", "--io_size=16m", "--random_distribution=zoned:50/2:50/8:0/90"],
    );
    assert_eq!(at.len(), 256);
    assert!(at.iter().all(|&o| o < 7 * 65536), "{at:?}");
    let first = at.iter().filter(|&&o| o == 0).count();
    assert!((90..170).contains(&first), "{first} of 256 at block 0 (a 50% zone of one block)");
    // Exactly the blocks a sequence names, moving on each round.
    let at = logged_offsets(
        &s,
        "seq",
        &[
            "--size=4m",
            "--rw=randread",
            "--io_size=384k",
            "--random_distribution=sequence:2,0,1",
            "--random_sequence_stride=1",
        ],
    );
    assert_eq!(at, [2, 0, 1, 5, 3, 4].map(|b| b * 65536));
    // Zipf with the random map: skewed first, still every block once per pass.
    let mut at = logged_offsets(&s, "zipf", &["--size=4m", "--rw=randwrite", "--random_distribution=zipf:1.2"]);
    at.sort_unstable();
    assert_eq!(at, (0..64).map(|b| b * 65536).collect::<Vec<_>>());
}

#[test]
fn offset_modifiers_leave_holes_go_backwards_and_repeat() {
    let s = scratch!("rw-modifier");
    let at = logged_offsets(&s, "holes", &["--size=1m", "--rw=write:64k", "--io_size=256k"]);
    assert_eq!(at, [0, 2, 4, 6].map(|b| b * 65536));
    let at = logged_offsets(&s, "back", &["--size=1m", "--rw=read:-128k", "--io_size=256k"]);
    assert_eq!(at, [0, 14, 13, 12].map(|b| b * 65536), "backwards from the end, as fio");
    let at =
        logged_offsets(&s, "same", &["--size=1m", "--rw=randread:4", "--rw_sequencer=identical", "--io_size=512k"]);
    assert!(at[..4].iter().all(|&o| o == at[0]) && at[4..].iter().all(|&o| o == at[4]), "{at:?}");
}

#[test]
fn patterns_are_written_and_checked_byte_for_byte() {
    let s = scratch!("pattern");
    let f = s.file("f");
    // buffer_pattern: each 64 KiB block is the pattern repeated from its start.
    job(&s, &["--size=256k", "--rw=write", "--buffer_pattern=\"ab\"0x0102"]);
    let data = std::fs::read(&f).unwrap();
    assert_eq!(data.len(), 256 << 10);
    assert!(data.chunks(4).all(|c| c == b"ab\x01\x02"), "the file is the pattern");
    // verify_pattern alone means verify=pattern, as in fio: written, read back, checked.
    let j = job(&s, &["--size=256k", "--rw=randwrite", "--verify_pattern=0xdeadbeef"]);
    assert_eq!(j["error"], 0);
    assert!(std::fs::read(&f).unwrap().chunks(4).all(|c| c == [0xde, 0xad, 0xbe, 0xef]));
    // A read job checks what is there: one byte changed is found and named.
    let mut data = std::fs::read(&f).unwrap();
    data[70_000] = 0;
    std::fs::write(&f, &data).unwrap();
    let fname = format!("--filename={f}");
    let (code, j, err) = dcload_json(
        &s.dir,
        &[
            "--name=r",
            "--bs=64k",
            &fname,
            "--size=256k",
            "--rw=read",
            "--verify=pattern",
            "--verify_pattern=0xdeadbeef",
        ],
    );
    assert_ne!(code, 0, "a changed byte fails the job");
    assert!(err.contains("byte 4464 of the 65536-byte block at offset 65536"), "{err}\n{j}");
}

#[test]
fn rate_caps_hold_io_back_and_a_floor_fails_the_job() {
    let s = scratch!("rate");
    // 2 MiB at 4 MiB/s: about half a second, never faster than the cap.
    let j = job(&s, &["--size=2m", "--rw=write", "--bs=4k", "--rate=4m"]);
    let bw = j["write"]["bw_bytes"].as_f64().unwrap();
    assert!((2.0 * 1048576.0..4.4 * 1048576.0).contains(&bw), "{bw} bytes/s at rate=4m");
    // rate_iops on the null engine (no device to be slow): about 200 in 1 s.
    let j = job(&s, &["--size=1g", "--ioengine=null", "--rate_iops=200", "--time_based", "--runtime=1"]);
    let ios = j["read"]["total_ios"].as_u64().unwrap();
    assert!((100..=221).contains(&ios), "{ios} I/Os in 1 s at rate_iops=200");
    // A floor above the cap fails once its first cycle ends.
    let fname = format!("--filename={}", s.file("f"));
    let (code, j, err) = dcload_json(
        &s.dir,
        &[
            "--name=j",
            &fname,
            "--size=1g",
            "--ioengine=null",
            "--rate=1m",
            "--rate_min=2m",
            "--time_based",
            "--runtime=3",
        ],
    );
    assert_eq!(code, 1, "{err}\n{j}");
    assert!(err.contains("is below rate_min=2097152"), "{err}");
}

#[test]
fn flow_weights_set_the_ratio_between_jobs() {
    let s = scratch!("flow");
    let fname = format!("--filename={}", s.file("f"));
    // exitall: the first job to end stops the other, which would otherwise
    // run on alone for as long as it started late (each job's runtime is
    // its own), outside any ratio.
    let mut args = vec![
        "--ioengine=null",
        "--size=1g",
        "--time_based",
        "--runtime=1",
        "--flow_id=3",
        "--exitall=1",
        fname.as_str(),
    ];
    args.extend(["--name=one", "--flow=1", "--name=five", "--flow=5"]);
    let (code, j, err) = dcload_json(&s.dir, &args);
    assert_eq!(code, 0, "{err}");
    let ios = |i: usize| j["jobs"][i]["read"]["total_ios"].as_f64().unwrap();
    let ratio = ios(1) / ios(0);
    assert!((3.5..7.0).contains(&ratio), "five : one = {} : {}", ios(1), ios(0));
}

/// Jobs that read and write one file with verify overwrite each other's
/// blocks; each job's check after its I/O finds a block another wrote last
/// and fails, as fio's header seed check does (fio 3.33 fails fio's own
/// examples/e4defrag.fio so).
#[test]
fn jobs_that_read_and_write_one_file_find_each_others_blocks() {
    let s = scratch!("verify-shared");
    let fname = format!("--filename={}", s.file("f"));
    // Capped (1,000 I/Os a second each way), so the two jobs write side by
    // side for over a tenth of a second.
    let one = ["--rw=randrw", "--bs=4k", "--size=1m", "--verify=crc32c", "--rate_iops=1000", fname.as_str()];
    let args: Vec<&str> = [&["--name=a"][..], &one, &["--name=b"], &one].concat();
    let (code, j, err) = dcload_json(&s.dir, &args);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("another writer's data for this offset"), "{err}");
    let jobs = j["jobs"].as_array().unwrap();
    assert!(jobs.iter().any(|job| job["error"] == libc::EILSEQ), "{jobs:?}");
}

/// A job's rewrite of a block that the storage loses leaves the job's own
/// earlier write there: the check after its I/O expects its last write and
/// says one was lost, as fio's header write sequence check does. Here the
/// "loss" is the first block as the first of two passes left it, put back
/// after the second pass rewrote it (each write but the last followed by a
/// second of think time, so the moments are far apart).
#[test]
fn a_lost_rewrite_is_found_by_its_write_number() {
    let s = scratch!("verify-sequence");
    let run = |sequence: &str| {
        let fname = format!("--filename={}", s.file("f"));
        let args = [
            "--output-format=json",
            "--name=w",
            &fname,
            "--rw=write",
            "--bs=4k",
            "--size=8k",
            "--loops=2",
            "--verify=crc32c",
            "--thinktime=1s",
            sequence,
        ];
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_dcload"))
            .args(args)
            .current_dir(&s.dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Writes of blocks 0, 1, 0, 1 at about 0, 1, 2 and 3 s; the check
        // right after the last.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let first_pass = std::fs::read(s.path("f")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1000));
        let f = std::fs::OpenOptions::new().write(true).open(s.path("f")).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &first_pass[..4096], 0).unwrap();
        let out = child.wait_with_output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run("--verify_write_sequence=1");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("this job's write number 1 of it, where its last was number 2"), "{err}");
    let (code, err) = run("--verify_write_sequence=0");
    assert_eq!(code, Some(0), "any of the job's own writes: {err}");
}

#[test]
fn a_saved_verify_state_limits_the_check_to_the_blocks_written() {
    let s = scratch!("verify-state");
    // A write phase that stops a quarter of the way in (io_size), recording what it wrote.
    job(
        &s,
        &["--size=1m", "--io_size=256k", "--rw=write", "--verify=crc32c", "--do_verify=0", "--verify_state_save=1"],
    );
    assert!(s.path("dcload-j-0-verify.state").exists());
    let fname = format!("--filename={}", s.file("f"));
    let read = |extra: &str| {
        let args = ["--name=j", "--bs=64k", &fname, "--size=1m", "--rw=read", "--verify=crc32c", extra];
        dcload_json(&s.dir, &args)
    };
    let (code, _, err) = read("--verify_state_load=1");
    assert_eq!(code, 0, "only the recorded blocks are checked: {err}");
    let (code, _, err) = read("--verify_state_load=0");
    assert_eq!(code, 1, "without the state every block is checked, and the fifth was never written");
    assert!(err.contains("at offset 262144"), "{err}");
    std::fs::remove_file(s.path("dcload-j-0-verify.state")).unwrap();
    let (code, _, err) = read("--verify_state_load=1");
    assert_ne!(code, 0);
    assert!(err.contains("verify_state_save=1"), "a missing state says how it is made: {err}");
}

#[test]
fn strided_zones_and_zoned_devices() {
    let s = scratch!("zones");
    let at = logged_offsets(
        &s,
        "stride",
        &["--size=1m", "--rw=read", "--zonemode=strided", "--zonesize=128k", "--zoneskip=192k", "--io_size=384k"],
    );
    assert_eq!(at, [0, 1, 5, 6, 10, 11].map(|b| b * 65536));
    let fname = format!("--filename={}", s.file("f"));
    let (code, _, err) = dcload_json(&s.dir, &["--name=z", &fname, "--size=1m", "--zonemode=zbd"]);
    assert_eq!(code, 2);
    assert!(err.contains("zoned block devices, which dcload does not drive"), "{err}");
}

#[test]
fn an_iolog_written_replays_the_same_io() {
    let s = scratch!("iolog");
    let written = logged_offsets(&s, "w", &["--size=1m", "--rw=randwrite", "--write_iolog=trace"]);
    let log = std::fs::read_to_string(s.path("trace")).unwrap();
    let mut lines = log.lines();
    assert_eq!(lines.next(), Some("fio version 3 iolog"), "fio 3.31+'s format");
    assert!(log.contains(&format!(" {} add\n", s.file("f"))), "{log}");
    assert_eq!(log.lines().filter(|l| l.contains(" write ")).count(), 16);
    // Replayed as reads of the same offsets, in the same order.
    let replayed: Vec<String> = log.lines().map(|l| l.replace(" write ", " read ")).collect();
    std::fs::write(s.path("trace-r"), replayed.join("\n") + "\n").unwrap();
    let again = logged_offsets(&s, "r", &["--size=1m", "--rw=read", "--read_iolog=trace-r"]);
    assert_eq!(again, written);
    // A version 2 log with a pause: the replay keeps its time unless told not to.
    let v2 = format!(
        "fio version 2 iolog\n{0} add\n{0} open\n{0} read 0 65536\n{0} wait 300000 0\n{0} read 65536 65536\n",
        s.file("f")
    );
    std::fs::write(s.path("trace-2"), v2).unwrap();
    let t = std::time::Instant::now();
    let j = job(&s, &["--size=1m", "--read_iolog=trace-2"]);
    assert!(t.elapsed() >= std::time::Duration::from_millis(300), "the wait is kept");
    assert_eq!(j["read"]["total_ios"], 2);
    let fname = format!("--filename={}", s.file("f"));
    let (code, _, err) = dcload_json(&s.dir, &["--name=j", &fname, "--size=1m", "--read_iolog=missing"]);
    assert_ne!(code, 0);
    assert!(err.contains("read_iolog") && err.contains("missing"), "{err}");
}

#[test]
fn thinktime_pauses_and_number_ios_stops() {
    let s = scratch!("think");
    let t = std::time::Instant::now();
    let j = job(&s, &["--size=1m", "--rw=read", "--thinktime=20ms"]);
    assert_eq!(j["read"]["total_ios"], 16);
    // A pause before each I/O after the first: nothing follows the last.
    assert!(t.elapsed() >= std::time::Duration::from_millis(300), "15 pauses of 20 ms: {:?}", t.elapsed());
    let t = std::time::Instant::now();
    job(&s, &["--size=1m", "--rw=read", "--thinktime=50ms", "--thinktime_blocks=4"]);
    let took = t.elapsed();
    assert!(took >= std::time::Duration::from_millis(150), "pauses after the 4th, 8th and 12th: {took:?}");
    let j = job(&s, &["--size=1m", "--rw=randread", "--number_ios=5"]);
    assert_eq!(j["read"]["total_ios"], 5);
}

#[test]
fn percentile_options_choose_the_list_and_the_latencies() {
    let s = scratch!("percentiles");
    let j =
        job(&s, &["--size=1m", "--rw=read", "--percentile_list=99:50", "--lat_percentiles=1", "--clat_percentiles=0"]);
    let keys = |v: &serde_json::Value| v["percentile"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>());
    assert_eq!(keys(&j["read"]["lat_ns"]), Some(vec!["50.000000".to_string(), "99.000000".to_string()]));
    assert_eq!(keys(&j["read"]["clat_ns"]), None);
    let fname = format!("--filename={}", s.file("f"));
    let (code, _, err) = dcload_json(&s.dir, &["--name=j", &fname, "--size=1m", "--percentile_list=50:101"]);
    assert_eq!(code, 2);
    assert!(err.contains("101 is not within 0-100"), "{err}");
}

#[test]
fn exit_what_group_stops_only_the_group_and_all_stops_what_comes_after() {
    let s = scratch!("exit-what");
    let f = format!("--filename={}", s.file("f"));
    let g = format!("--filename={}", s.file("g"));
    // fio's default: the ender's reporting group only. The reader beside it
    // in another group (new_group) runs its whole second; the one in its
    // group stops at once.
    let start = std::time::Instant::now();
    let (code, j, err) = dcload_json(
        &s.dir,
        &[
            "--ioengine=null",
            "--name=ender",
            &f,
            "--size=64k",
            "--exitall=1",
            "--name=same",
            &g,
            "--size=1m",
            "--time_based",
            "--runtime=30",
            "--name=other",
            "--new_group",
            &g,
            "--size=1m",
            "--time_based",
            "--runtime=1",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let took = start.elapsed();
    assert!(took >= std::time::Duration::from_millis(900) && took.as_secs() < 20, "{took:?}");
    assert!(j["jobs"][1]["job_runtime"].as_u64().unwrap() < 900, "the ender's group stopped: {}", j["jobs"][1]);
    assert!(j["jobs"][2]["job_runtime"].as_u64().unwrap() >= 900, "the other group ran on: {}", j["jobs"][2]);
    // all: the stonewalled job after it never runs.
    let (code, j, err) = dcload_json(
        &s.dir,
        &[
            "--ioengine=null",
            "--name=ender",
            &f,
            "--size=64k",
            "--exitall=1",
            "--exit_what=all",
            "--name=after",
            "--stonewall",
            &g,
            "--size=1m",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(j["jobs"][1]["read"]["total_ios"], 0, "{}", j["jobs"][1]);
}

/// exitall_on_error: a job that fails (here a verify mismatch on its first
/// read) stops the jobs running beside it and every later one; without it
/// they run on.
#[test]
fn exitall_on_error_stops_every_job_when_one_fails() {
    let s = scratch!("exitall-on-error");
    std::fs::write(s.path("zeros"), vec![0u8; 1 << 20]).unwrap();
    let bad = format!("--filename={}", s.file("zeros"));
    let run = |on_error: &str| {
        dcload_json(
            &s.dir,
            &[
                "--name=bad",
                &bad,
                "--size=1m",
                "--rw=read",
                "--verify=pattern",
                "--verify_pattern=0xab",
                on_error,
                "--name=beside",
                "--new_group",
                "--ioengine=null",
                "--size=1m",
                "--time_based",
                "--runtime=2",
                "--name=after",
                "--stonewall",
                "--ioengine=null",
                "--size=1m",
            ],
        )
    };
    let (code, j, err) = run("--exitall_on_error=1");
    assert_eq!(code, 1, "the mismatch is a failed job: {err}");
    assert!(err.contains("verify failed"), "{err}");
    assert!(j["jobs"][1]["job_runtime"].as_u64().unwrap() < 1500, "stopped early: {}", j["jobs"][1]);
    assert_eq!(j["jobs"][2]["read"]["total_ios"], 0, "the later job never ran: {}", j["jobs"][2]);
    let (code, j, _) = run("--exitall_on_error=0");
    assert_eq!(code, 1);
    assert!(j["jobs"][1]["job_runtime"].as_u64().unwrap() >= 1900, "ran its time: {}", j["jobs"][1]);
    assert_eq!(j["jobs"][2]["read"]["total_ios"], 256, "{}", j["jobs"][2]);
}

/// iodepth_batch_complete: reaps wait for that many completions, but never
/// for more than are in flight (a job's last few I/Os still complete), on
/// io_uring and libaio; serialize_overlap is taken with one I/O in flight
/// and refused at a depth where dcload would not hold overlapping I/O back.
#[test]
fn batched_completions_finish_the_job_and_serialize_overlap_needs_one_in_flight() {
    let s = scratch!("batch-complete");
    for engine in ["--ioengine=io_uring", "--ioengine=libaio"] {
        // 100 I/Os at depth 16, reaped 8 at a time: the last 4 are fewer than 8.
        let j = job(
            &s,
            &[
                "--size=400k",
                "--bs=4k",
                "--rw=randwrite",
                engine,
                "--iodepth=16",
                "--iodepth_batch_complete=8",
                "--verify=crc32c",
            ],
        );
        assert_eq!(j["write"]["total_ios"], 100, "{engine}");
        assert_eq!(j["dcload"]["verify"]["blocks_checked"], 100, "{engine}");
    }
    let j = job(&s, &["--size=64k", "--bs=4k", "--rw=randwrite", "--serialize_overlap=1"]);
    assert_eq!(j["write"]["total_ios"], 16);
    let fname = format!("--filename={}", s.file("f"));
    let (code, _, err) = dcload_json(
        &s.dir,
        &["--name=j", &fname, "--size=64k", "--ioengine=io_uring", "--iodepth=4", "--serialize_overlap=1"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("set iodepth=1"), "{err}");
}

/// Each line of a latency log written with log_offset=1: (direction,
/// bytes, offset, priority column).
fn lat_log_lines(path: &std::path::Path) -> Vec<(u32, u64, u64, String)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Vec<&str> = l.split(", ").collect();
            (v[2].parse().unwrap(), v[3].parse().unwrap(), v[4].parse().unwrap(), v[5].to_string())
        })
        .collect()
}

/// Per-direction block sizes go to their direction; cmdprio gives its share
/// of the I/Os its priority on the wire (libaio, io_uring) and the rest the
/// job's own, which the latency log's priority column shows as fio does.
#[test]
fn per_direction_block_sizes_and_io_priorities() {
    let s = scratch!("prio");
    for engine in ["libaio", "io_uring"] {
        let prefix = format!("--write_lat_log={}", s.file(engine));
        job(
            &s,
            &[
                "--size=8m",
                "--rw=randrw",
                "--bs=4k,16k",
                &format!("--ioengine={engine}"),
                "--iodepth=4",
                "--direct=1",
                "--prioclass=3",
                "--prio=5",
                "--cmdprio_percentage=50",
                "--cmdprio_class=2",
                "--cmdprio=1",
                "--log_prio=1",
                "--log_offset=1",
                &prefix,
            ],
        );
        let lines = lat_log_lines(&s.path(&format!("{engine}_clat.1.log")));
        assert!(lines.len() > 200, "{engine}: {} I/Os", lines.len());
        // A write drawn less than 16k from the file's end stops there, and
        // the job's last I/O where its 8 MiB do.
        let odd = lines
            .iter()
            .filter(|&&(dir, bytes, offset, _)| match dir {
                0 => bytes != 4096,
                _ => bytes != 16384 && offset + bytes != 8 << 20,
            })
            .count();
        assert!(odd <= 1, "{engine}: reads 4k, writes 16k: {odd} other I/Os");
        let own = lines.iter().filter(|l| l.3 == "0x6005").count();
        let cmd = lines.iter().filter(|l| l.3 == "0x4001").count();
        assert_eq!(own + cmd, lines.len(), "{engine}: only the job's and cmdprio's priorities");
        let share = cmd as f64 / lines.len() as f64;
        assert!((0.35..0.65).contains(&share), "{engine}: cmdprio gave {share:.2} of the I/Os its priority");
    }
    // Without log_prio the column says whether the class is realtime.
    let prefix = format!("--write_lat_log={}", s.file("rt"));
    job(&s, &["--size=1m", "--rw=read", "--prioclass=1", "--prio=0", "--log_offset=1", &prefix]);
    assert!(lat_log_lines(&s.path("rt_clat.1.log")).iter().all(|l| l.3 == "1"));
}

/// fio's invalidate at each wrap: a buffered job drops the file's cache
/// every time it starts the file over (here each of 4 loops), so every pass
/// reads the device; with invalidate=0 only the first does. The file is on
/// a filesystem of its own, so the device's counters are this job's.
#[test]
fn invalidate_drops_the_cache_at_every_pass() {
    let s = scratch!("invalidate-wrap");
    let fs = dc_testsupport::LoopFs::ext4(&s.dir, 16);
    let fname = format!("--filename={}", fs.mnt.join("f").display());
    let run = |invalidate: &str| {
        let args = ["--name=j", &fname, "--size=4m", "--bs=4k", "--rw=randread", "--loops=4", invalidate];
        let (code, j, err) = dcload_json(&s.dir, &args);
        assert_eq!(code, 0, "{err}");
        assert_eq!(j["jobs"][0]["read"]["io_bytes"], 16 << 20);
        let reads: u64 = j["disk_util"].as_array().unwrap().iter().map(|d| d["read_ios"].as_u64().unwrap()).sum();
        reads
    };
    let dropped = run("--invalidate=1");
    let kept = run("--invalidate=0");
    // 4 passes of 1024 pages against 1 (readahead may merge some).
    assert!(dropped >= 3 * kept.max(1), "device reads: {dropped} with invalidate=1, {kept} with invalidate=0");
}

/// steadystate: a job whose rate has settled ends before its runtime, with
/// fio's steadystate object; one whose criterion cannot be met runs it out.
#[test]
fn steadystate_ends_a_job_once_its_rate_settles() {
    let s = scratch!("steadystate");
    let base = ["--size=16m", "--bs=4k", "--rw=randread", "--time_based", "--invalidate=0", "--ss_dur=2"];
    let started = std::time::Instant::now();
    let j = job(&s, &[&base[..], &["--runtime=30", "--ss=iops:50%"]].concat());
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "steady cached reads ran {:?}", started.elapsed());
    let ss = &j["steadystate"];
    assert_eq!(
        (ss["ss"].as_str(), ss["duration"].as_u64(), ss["attained"].as_u64()),
        (Some("iops:50.000000%"), Some(2), Some(1)),
        "{ss}"
    );
    assert_eq!(ss["data"]["iops"].as_array().unwrap().len(), 2, "{ss}");
    assert!(ss["data"]["iops_mean"].as_u64().unwrap() > 0 && ss["data"]["bw_mean"].as_u64().unwrap() > 0, "{ss}");
    // No slope is below 0%: the job runs its whole runtime.
    let j = job(&s, &[&base[..], &["--runtime=3", "--ss=iops_slope:0%"]].concat());
    assert_eq!(j["steadystate"]["attained"], 0);
    assert!(j["job_runtime"].as_u64().unwrap() >= 2900, "{}", j["job_runtime"]);
}

/// ioengine=page_fault: the job's I/O goes to anonymous memory of its
/// size, each page faulted in at its first touch (the thread's minor
/// faults count them), and no file is made; offset and verify are refused.
#[test]
fn page_fault_engine_faults_each_page_in_once() {
    let s = scratch!("page-fault");
    let fname = s.file("f");
    let args = ["--name=p", "--ioengine=page_fault", "--size=8m", "--bs=4k", "--rw=randwrite"];
    let (code, j, err) = dcload_json(&s.dir, &[&args[..], &[&format!("--filename={fname}")]].concat());
    assert_eq!(code, 0, "{err}");
    let j = &j["jobs"][0];
    assert_eq!(j["write"]["total_ios"], 2048);
    assert!(j["minf"].as_u64().unwrap() >= 2048, "one fault per page at least: {}", j["minf"]);
    assert!(!std::path::Path::new(&fname).exists(), "page_fault made a file");
    for (extra, says) in [("--offset=4k", "drop offset"), ("--verify=crc32c", "verify= is not supported")] {
        let (code, _, err) = dcload_json(&s.dir, &[&args[..], &[extra]].concat());
        assert_eq!(code, 2, "{extra}: {err}");
        assert!(err.contains(says), "{extra}: {err}");
    }
}

/// ioengine=cpuio: no I/O and no file; each job burns its `cpuload` share
/// of a CPU (the 80% job several times the 20% one's CPU time, whatever
/// else the machine runs), `qsort` burns by sorting, `exit_on_io_done` ends
/// the burner with the wave's I/O, and the engine's options are refused
/// where they cannot apply.
#[test]
fn cpuio_burns_its_share_and_ends_with_the_io() {
    let s = scratch!("cpuio");
    let burn = |name: &str, extra: &[&str]| {
        let mut a = vec![format!("--name={name}"), "--ioengine=cpuio".into(), "--cpuchunks=5000".into()];
        a.extend(extra.iter().map(|x| x.to_string()));
        a
    };
    let mut args = burn("low", &["--cpuload=20", "--runtime=1"]);
    args.extend(burn("high", &["--cpuload=80", "--runtime=1"]));
    args.extend(burn("sort", &["--cpuload=50", "--cpumode=qsort", "--runtime=1"]));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, j, err) = dcload_json(&s.dir, &args);
    assert_eq!(code, 0, "{err}");
    let cpu = |k: usize| j["jobs"][k]["usr_cpu"].as_f64().unwrap() + j["jobs"][k]["sys_cpu"].as_f64().unwrap();
    let (low, high, sort) = (cpu(0), cpu(1), cpu(2));
    assert!(high > 2.0 * low && low > 0.0, "cpuload 80 burnt {high:.1}%, cpuload 20 {low:.1}%");
    assert!(sort > 0.0, "qsort burnt nothing");
    for k in 0..3 {
        assert_eq!(j["jobs"][k]["write"]["io_bytes"], 0);
        assert_eq!(j["jobs"][k]["read"]["io_bytes"], 0);
    }
    assert_eq!(std::fs::read_dir(&s.dir).unwrap().count(), 0, "cpuio made a file");

    // A burner of 60 s ends with the 1 MiB write beside it.
    let fname = s.file("w");
    let start = std::time::Instant::now();
    let (code, _, err) = dcload_json(
        &s.dir,
        &[
            "--name=burner",
            "--ioengine=cpuio",
            "--cpuload=10",
            "--runtime=60",
            "--exit_on_io_done=1",
            "--name=writer",
            "--size=1m",
            "--rw=write",
            &format!("--filename={fname}"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(start.elapsed().as_secs() < 30, "the burner outlived the I/O: {:?}", start.elapsed());

    for (args, says) in [
        (&["--name=x", "--ioengine=cpuio", "--runtime=1"][..], "needs cpuload="),
        (&["--name=x", "--ioengine=cpuio", "--cpuload=10"][..], "give one, or exit_on_io_done=1"),
    ] {
        let (code, _, err) = dcload_json(&s.dir, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // On another engine's job (a [global] section gives them to all), fio ignores them.
    let (code, _, err) =
        dcload_json(&s.dir, &["--name=x", "--size=1m", "--cpuload=10", &format!("--filename={fname}")]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("cpuio's options; ignored with ioengine=psync"), "{err}");
}

/// ioengine=exec: the program starts with the job (`%n`, `%r` put in its
/// arguments), its output in NAME.stdout/NAME.stderr, and is stopped when
/// the runtime is over: SIGTERM, then SIGKILL after grace_time for one that
/// ignores it; none outlives dcload. A missing program fails the job by name.
#[test]
fn exec_runs_its_program_for_the_runtime_and_stops_it() {
    use std::os::unix::fs::PermissionsExt;
    let s = scratch!("exec");
    let script = |name: &str, body: &str| {
        let path = s.dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\necho $$ > {name}.pid\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_str().unwrap().to_string()
    };
    let polite =
        script("polite", "echo \"args: $*\"\ntrap 'echo got TERM >&2; exit 0' TERM\nwhile :; do sleep 0.05; done");
    let stubborn = script("stubborn", "trap '' TERM\nwhile :; do sleep 0.05; done");
    let fname = s.file("w");
    let start = std::time::Instant::now();
    let (code, j, err) = dcload_json(
        &s.dir,
        &[
            "--name=mon",
            "--ioengine=exec",
            &format!("--program={polite}"),
            "--arguments=%n  %r x",
            "--runtime=1",
            "--name=deaf",
            "--ioengine=exec",
            &format!("--program={stubborn}"),
            "--grace_time=1",
            "--runtime=1",
            "--name=writer",
            "--size=1m",
            "--rw=write",
            &format!("--filename={fname}"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(start.elapsed().as_secs() < 20, "the programs were not stopped: {:?}", start.elapsed());
    assert_eq!(j["jobs"][2]["write"]["io_bytes"], 1 << 20);
    let read = |f: &str| std::fs::read_to_string(s.dir.join(f)).unwrap_or_default();
    assert_eq!(read("mon.stdout").trim(), "args: mon 1 x");
    assert_eq!(read("mon.stderr").trim(), "got TERM");
    for name in ["polite", "stubborn"] {
        let pid = read(&format!("{name}.pid")).trim().to_string();
        assert!(!pid.is_empty(), "{name} did not start");
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(!String::from_utf8_lossy(&cmdline).contains(name), "{name} (pid {pid}) outlived dcload");
    }

    // std_redirect=0: the program writes to dcload's own stderr.
    let loud = script("loud", "echo said-on-stderr >&2");
    let (code, _, err) = dcload_json(
        &s.dir,
        &["--name=l", "--ioengine=exec", &format!("--program={loud}"), "--std_redirect=0", "--runtime=1"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("said-on-stderr"), "{err}");
    assert!(!s.dir.join("l.stdout").exists(), "std_redirect=0 still made l.stdout");

    let missing = s.dir.join("no-such-program");
    let (code, _, err) = dcload_json(
        &s.dir,
        &["--name=m", "--ioengine=exec", &format!("--program={}", missing.display()), "--runtime=1"],
    );
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("cannot run") && err.contains("no-such-program"), "{err}");
    for (args, says) in [
        (&["--name=x", "--ioengine=exec", "--runtime=1"][..], "needs program="),
        (&["--name=x", "--ioengine=exec", "--program=/bin/true"][..], "runtime=: give one"),
    ] {
        let (code, _, err) = dcload_json(&s.dir, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// atomic=1: every write carries RWF_ATOMIC (O_DIRECT implied) on
/// pvsync2, io_uring and libaio, shown by the kernel's own rule: an atomic
/// write must be naturally aligned, so writes of 16 KiB at 4 KiB + n x 16
/// KiB fail with EINVAL with the flag and succeed without it. On XFS
/// (atomic writes in software) aligned random writes from several jobs
/// verify whole, whichever job wrote each block last; a file that takes no
/// atomic writes (ext4 here) is refused first.
#[test]
fn atomic_writes_carry_rwf_atomic_and_are_refused_where_the_file_takes_none() {
    let s = scratch!("atomic");
    let xfs_dir = s.path("xfs");
    std::fs::create_dir(&xfs_dir).unwrap();
    let fs = LoopFs::xfs(&xfs_dir, 300);
    let f = format!("--filename={}", fs.mnt.join("f").display());
    for engine in ["pvsync2", "io_uring", "libaio"] {
        let e = format!("--ioengine={engine}");
        let misaligned = ["--name=m", &f, &e, "--rw=write", "--bs=16k", "--offset=4k", "--size=1m"];
        let (code, j, err) = dcload_json(&s.dir, &misaligned);
        assert_eq!(code, 0, "{engine} without atomic: {err}");
        assert_eq!(j["jobs"][0]["write"]["io_bytes"], 1 << 20);
        let mut atomic = misaligned.to_vec();
        atomic.push("--atomic=1");
        let (code, j, err) = dcload_json(&s.dir, &atomic);
        assert_ne!(code, 0, "{engine}: a misaligned atomic write was taken: {err}");
        assert_eq!(j["jobs"][0]["error"], libc::EINVAL, "{engine}: {err}");
        assert_eq!(j["jobs"][0]["dcload"]["mode"], "direct", "{engine}: atomic=1 implies direct=1");
        let verified = [
            "--name=v",
            &f,
            &e,
            "--rw=randwrite",
            "--bs=16k",
            "--size=8m",
            "--atomic=1",
            "--verify=crc64",
            // Four jobs write each other's blocks: a block is then any
            // job's, not this one's last write (as in fio's own example).
            "--verify_write_sequence=0",
            "--numjobs=4",
            "--iodepth=8",
        ];
        let (code, j, err) = dcload_json(&s.dir, &verified);
        assert_eq!(code, 0, "{engine}: {err}");
        assert_eq!(j["jobs"][0]["error"], 0, "{engine}");
    }
    let ext4 = LoopFs::ext4(&s.dir, 32);
    let g = format!("--filename={}", ext4.mnt.join("g").display());
    let (code, _, err) =
        dcload_json(&s.dir, &["--name=a", &g, "--ioengine=pvsync2", "--rw=write", "--size=1m", "--atomic=1"]);
    assert_eq!(code, 3, "a setup error: {err}");
    assert!(err.contains("takes no atomic writes"), "{err}");
    let (code, _, err) =
        dcload_json(&s.dir, &["--name=a", &f, "--ioengine=psync", "--rw=write", "--size=1m", "--atomic=1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("use pvsync2, io_uring or libaio"), "{err}");
}

/// A job whose file is larger than the free space is not preallocated: a
/// failed fallocate keeps what it allocated on ext4, and the run would
/// have started on a full disk (and left it full). The file is sparse, a
/// warning says so, and the filesystem keeps its free space.
#[test]
fn a_file_larger_than_the_free_space_is_left_sparse_not_filling_the_disk() {
    let s = scratch!("fallocate-too-big");
    let fs = LoopFs::ext4(&s.dir, 32);
    let file = fs.mnt.join("big");
    let free_before = dc_sys::fs_free_bytes(&fs.mnt).unwrap();
    let f = format!("--filename={}", file.display());
    let (code, j, err) = dcload_json(&s.dir, &["--name=w", &f, "--rw=write", "--size=1g", "--number_ios=1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(j["jobs"][0]["write"]["io_bytes"], 4096);
    let free_after = dc_sys::fs_free_bytes(&fs.mnt).unwrap();
    assert!(free_after + (1 << 20) > free_before, "{free_before} bytes free before the run, {free_after} after");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 1 << 30);
    assert!(err.contains("not preallocated") && err.contains("sparse"), "{err}");
}

/// latency_target: with a target every depth meets, the search doubles
/// from 1 to iodepth, settles, runs one last window there and ends before
/// its runtime; with a target nothing meets it stays at depth 1 (below
/// 100%) or fails the job (at 100%, fio's ETIMEDOUT). The report carries
/// the depth found and the target, window and percentile in fio's units.
#[test]
fn latency_target_searches_the_depth_and_reports_it() {
    let s = scratch!("latency-target");
    let f = format!("--filename={}", s.file("f"));
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--name=lt",
            f.as_str(),
            "--size=16m",
            "--rw=randread",
            "--ioengine=io_uring",
            "--direct=1",
            "--iodepth=16",
            "--time_based",
            "--runtime=20",
            "--latency_window=100ms",
        ];
        args.extend(extra);
        let start = std::time::Instant::now();
        let (code, j, err) = dcload_json(&s.dir, &args);
        (code, j, err, start.elapsed())
    };
    let (code, j, err, took) = run(&["--latency_target=10s"]);
    assert_eq!(code, 0, "{err}");
    let job = &j["jobs"][0];
    assert_eq!(job["latency_depth"], 16, "{job}");
    assert_eq!(job["latency_target"], 10_000_000_000u64);
    assert_eq!(job["latency_window"], 100_000);
    assert!(took.as_secs() < 10, "the search did not end the job once settled: {took:?}");
    assert!(job["iodepth_level"]["16"].as_f64().unwrap() > 0.0, "never ran at depth 16: {}", job["iodepth_level"]);

    let (code, j, err, _) = run(&["--latency_target=1us", "--latency_percentile=50", "--runtime=1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(j["jobs"][0]["latency_depth"], 1);
    assert_eq!(j["jobs"][0]["latency_percentile"], 50.0);
    assert_eq!(j["jobs"][0]["iodepth_level"]["1"], 100.0, "went deeper than 1: {}", j["jobs"][0]["iodepth_level"]);

    let (code, j, err, _) = run(&["--latency_target=1us", "--runtime=1"]);
    assert_ne!(code, 0, "{err}");
    assert_eq!(j["jobs"][0]["error"], libc::ETIMEDOUT);
    assert!(err.contains("latency_target") && err.contains("no depth meets"), "{err}");
}

/// exec's NAME.stdout is emptied only when it is a regular file: one that
/// is a FIFO (or a device node) is refused and left as it was.
#[test]
fn exec_refuses_an_output_name_that_is_not_a_regular_file() {
    let s = scratch!("exec-fifo");
    let fifo = s.dir.join("f.stdout");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let (code, _, err) = dcload_json(&s.dir, &["--name=f", "--ioengine=exec", "--program=/bin/true", "--runtime=1"]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("f.stdout") && err.contains("not a regular file"), "{err}");
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&std::fs::metadata(&fifo).unwrap().file_type()));
}

/// fill_device: a job without size= writes until the filesystem is full
/// and ends without error at ENOSPC; the job after it (no size= either)
/// reads and verifies exactly what was written, as fio's surface-scan
/// example does. The filesystem is a 32 MiB ext4 on a loop device.
#[test]
fn fill_device_writes_until_full_and_the_next_job_reads_it_back() {
    let s = scratch!("fill-device");
    let fs = LoopFs::ext4(&s.dir, 32);
    let file = fs.mnt.join("datafile");
    let free_before = dc_sys::fs_free_bytes(&fs.mnt).unwrap();
    let f = format!("--filename={}", file.display());
    let common = ["--bs=64k", "--direct=1", "--verify=meta", "--verify_interval=512"];
    let mut args = vec!["--name=write-phase", &f, "--rw=write", "--fill_device=1", "--do_verify=0"];
    args.extend(common);
    args.extend(["--name=verify-phase", "--stonewall", &f, "--rw=read", "--do_verify=1"]);
    args.extend(common);
    let (code, j, err) = dcload_json(&s.dir, &args);
    assert_eq!(code, 0, "{err}");
    let written = j["jobs"][0]["write"]["io_bytes"].as_u64().unwrap();
    let len = std::fs::metadata(&file).unwrap().len();
    assert_eq!(written, len, "the file holds what the job wrote");
    assert!(written > free_before / 2, "wrote {written} of {free_before} free bytes");
    let free_after = dc_sys::fs_free_bytes(&fs.mnt).unwrap();
    assert!(free_after < 1 << 20, "{free_after} bytes still free: the job stopped before the filesystem was full");
    assert_eq!(j["jobs"][1]["read"]["io_bytes"].as_u64().unwrap(), written, "the reader read what was written");
    assert_eq!(j["jobs"][1]["dcload"]["verify"]["blocks_checked"].as_u64().unwrap(), written / 65536);

    // A size= beyond the free space: ENOSPC ends the job, without error.
    std::fs::remove_file(&file).unwrap();
    let (code, j, err) =
        dcload_json(&s.dir, &["--name=w", &f, "--rw=write", "--bs=64k", "--size=64m", "--fill_device=1"]);
    assert_eq!(code, 0, "{err}");
    let written = j["jobs"][0]["write"]["io_bytes"].as_u64().unwrap();
    assert!(written > free_before / 2 && written < 32 << 20, "wrote {written} bytes");
    assert_eq!(j["jobs"][0]["error"], 0);

    // Without fill_device, the same ENOSPC fails the job.
    std::fs::remove_file(&file).unwrap();
    let (code, _, err) = dcload_json(&s.dir, &["--name=w", &f, "--rw=write", "--bs=64k", "--size=64m"]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("ENOSPC"), "{err}");
}

/// ioengine=e4defrag: each write moves its range's blocks in from the donor
/// (ext4's EXT4_IOC_MOVE_EXT) and leaves the file's data as it was; with
/// inplace=1 the donor is allocated per I/O and truncated after; reads,
/// verify and a missing donor are refused. Needs ext4 (target/ is on it here).
#[test]
fn e4defrag_moves_blocks_and_keeps_the_data() {
    let s = scratch!("e4defrag");
    if dc_sys::fs_type_name(&s.dir).ok().as_deref() != Some("ext4") {
        return skip("e4defrag_moves_blocks_and_keeps_the_data", "the scratch directory is not on ext4");
    }
    let fname = s.file("f");
    let data = pattern(9, 0, 1 << 20);
    for inplace in ["0", "1"] {
        // On the disk first: ext4 will not move blocks under dirty pages (EBUSY).
        let mut f = std::fs::File::create(&fname).unwrap();
        std::io::Write::write_all(&mut f, &data).unwrap();
        f.sync_all().unwrap();
        drop(f);
        let donor = s.path("donor");
        let args = [
            "--name=d",
            "--ioengine=e4defrag",
            "--rw=write",
            "--bs=32k",
            "--size=1m",
            &format!("--filename={fname}"),
            &format!("--directory={}", s.dir.display()),
            "--donorname=donor",
            &format!("--inplace={inplace}"),
        ];
        let (code, j, err) = dcload_json(&s.dir, &args);
        assert_eq!(code, 0, "inplace={inplace}: {err}");
        assert_eq!(j["jobs"][0]["write"]["total_ios"], 32, "inplace={inplace}");
        assert!(std::fs::read(&fname).unwrap() == data, "inplace={inplace}: the data changed");
        let donor_len = std::fs::metadata(&donor).unwrap().len();
        if inplace == "1" {
            assert_eq!(donor_len, 0, "the donor is truncated after each I/O");
        } else {
            assert_eq!(donor_len, 1 << 20, "the donor is allocated over the job's span");
        }
        std::fs::remove_file(&donor).unwrap();
    }
    for (extra, says) in
        [("--rw=read", "only writes"), ("--verify=crc32c", "drop verify="), ("--donorname=", "needs donorname=")]
    {
        let mut args = vec!["--name=d", "--ioengine=e4defrag", "--size=1m", "--rw=write", "--donorname=donor"];
        let file = format!("--filename={fname}");
        args.push(&file);
        if extra == "--donorname=" {
            args.retain(|a| !a.starts_with("--donorname"));
        } else {
            args.push(extra);
        }
        let (code, _, err) = dcload_json(&s.dir, &args);
        assert_eq!(code, 2, "{extra}: {err}");
        assert!(err.contains(says), "{extra}: {err}");
    }
    // A donor name that is a FIFO is not opened (it would block) nor changed.
    let fifo = s.path("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let file = format!("--filename={fname}");
    let (code, _, err) =
        dcload_json(&s.dir, &["--name=d", "--ioengine=e4defrag", "--size=1m", "--rw=write", "--donorname=fifo", &file]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("not a regular file"), "{err}");
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&std::fs::metadata(&fifo).unwrap().file_type()));
}

/// buffer_compress_percentage and dedupe_percentage: the written file is
/// that compressible (each 512-byte chunk ends in its share of zeros) and
/// that share of its blocks repeat another block; with verify they are
/// refused (verify writes its own contents).
#[test]
fn written_buffers_are_as_compressible_and_dedupable_as_asked() {
    let s = scratch!("contents");
    let fname = s.file("f");
    for mode in ["repeat", "working_set"] {
        let args = [
            "--name=c",
            "--rw=write",
            "--bs=4k",
            "--size=8m",
            &format!("--filename={fname}"),
            "--buffer_compress_percentage=25",
            "--dedupe_percentage=50",
            &format!("--dedupe_mode={mode}"),
        ];
        let (code, _, err) = dcload_json(&s.dir, &args);
        assert_eq!(code, 0, "{mode}: {err}");
        let data = std::fs::read(&fname).unwrap();
        for chunk in data.chunks(512) {
            assert!(chunk[384..].iter().all(|&b| b == 0), "{mode}: a chunk does not end in 25% zeros");
        }
        let blocks: std::collections::HashSet<&[u8]> = data.chunks(4096).collect();
        let repeated = 2048 - blocks.len();
        assert!((800..1250).contains(&repeated), "{mode}: {repeated} of 2,048 blocks repeat another");
    }
    // Two jobs repeat blocks of one working set with dedupe_global, of their own without.
    for global in ["1", "0"] {
        let set = [
            "--rw=write",
            "--bs=4k",
            "--size=4m",
            "--dedupe_percentage=50",
            "--dedupe_mode=working_set",
            "--dedupe_working_set_percentage=50",
            &format!("--dedupe_global={global}"),
        ];
        let (a, b) = (s.file("a"), s.file("b"));
        let fa = format!("--filename={a}");
        let fb = format!("--filename={b}");
        let args = [&["--name=a", fa.as_str()][..], &set, &["--name=b", fb.as_str()], &set].concat();
        let (code, _, err) = dcload_json(&s.dir, &args);
        assert_eq!(code, 0, "dedupe_global={global}: {err}");
        let (da, db) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        let blocks_a: std::collections::HashSet<&[u8]> = da.chunks(4096).collect();
        let shared = db.chunks(4096).filter(|blk| blocks_a.contains(blk)).count();
        if global == "1" {
            assert!(shared > 100, "dedupe_global=1: only {shared} of b's blocks are a's too");
        } else {
            assert_eq!(shared, 0, "dedupe_global=0: b repeats a's blocks");
        }
    }
    let (code, _, err) = dcload_json(
        &s.dir,
        &[
            "--name=c",
            "--rw=write",
            "--size=1m",
            &format!("--filename={fname}"),
            "--dedupe_percentage=50",
            "--verify=crc32c",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("drop one of them"), "{err}");
}

#[test]
fn sprandom_writes_every_block_then_overwrites_early_regions_most() {
    let s = scratch!("sprandom");
    // 8 MiB at 4 KiB in 10 regions with 15% over-provisioning: the job
    // writes the physical size, 8 MiB * 1.15 in whole blocks = 2355 writes.
    let at =
        logged_offsets(&s, "spr", &["--size=8m", "--bs=4k", "--rw=randwrite", "--sprandom=1", "--spr_num_regions=10"]);
    assert_eq!(at.len(), 2355);
    let mut times = vec![0u32; 2048];
    for &o in &at {
        assert_eq!(o % 4096, 0);
        times[(o / 4096) as usize] += 1;
    }
    let unwritten = times.iter().filter(|&&t| t == 0).count();
    assert!(unwritten < 2048 / 100, "{unwritten} of 2048 blocks unwritten");
    // The overwrites of a region come at the start of the next: the early
    // regions lose the most (a quarter), the last none.
    let seen_before = |range: std::ops::Range<usize>| {
        let mut seen = std::collections::HashSet::new();
        at.iter().enumerate().filter(|&(i, o)| !seen.insert(*o) && range.contains(&i)).count()
    };
    let (early, late) = (seen_before(0..785), seen_before(1570..2355));
    assert!(early > 2 * late, "overwrites: {early} in the first third, {late} in the last");
    // What fio refuses, dcload refuses, each naming the fix.
    for (bad, says) in [
        ("--rw=randread", "use rw=randwrite"),
        ("--random_generator=tausworthe", "drop random_generator"),
        ("--norandommap=0", "drop norandommap=0"),
        ("--spr_op=1.5", "above 0 and below 1"),
        ("--spr_cs=1m", "lower spr_num_regions to 9 or fewer"),
    ] {
        let out = dcload_in(
            &s.dir,
            &["--name=p", "--filename=f", "--size=8m", "--rw=randwrite", "--sprandom", "--spr_num_regions=10", bad],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{bad}: {err}");
    }
}
