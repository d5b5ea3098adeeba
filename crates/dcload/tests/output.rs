//! Output formats as their consumers read them: fio's JSON through jq the
//! way parse-results.sh does, fio's interval-log names and lines, group
//! reporting, stonewall order, and the seed suite's job files run unchanged.

mod common;
use common::*;
use std::process::Command;

fn jq(filter: &str, json_file: &std::path::Path) -> String {
    let out = Command::new("jq")
        .args(["-r", filter])
        .arg(json_file)
        .output()
        .expect("jq must be installed (.ci/run installs it)");
    assert!(out.status.success(), "jq failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn json_reads_like_fio_through_jq() {
    let s = scratch!("jq");
    let fname = format!("--filename={}", s.file("f"));
    let out = dcload_in(
        &s.dir,
        &[
            "--name=seqwrite",
            "--size=16m",
            "--bs=1M",
            "--rw=write",
            "--ioengine=io_uring",
            "--iodepth=4",
            "--output-format=json",
            "--output=r.json",
            &fname,
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty(), "--output sends results to the file");
    let file = s.path("r.json");
    // The fields and units a fio consumer extracts: MB/s from bw (KiB/s), IOPS, clat in ns.
    let row = jq(
        r#".jobs[0].write as $d | [($d.bw / 1024 | floor), ($d.iops | floor), ($d.clat_ns.mean > 0), ($d.clat_ns.percentile["50.000000"] > 0), ($d.clat_ns.percentile["99.900000"] >= $d.clat_ns.percentile["99.000000"]), $d.io_bytes, $d.total_ios, .jobs[0].jobname, .jobs[0].groupid, .jobs[0].error] | @tsv"#,
        &file,
    );
    let cols: Vec<&str> = row.trim().split('\t').collect();
    assert_eq!(&cols[2..], ["true", "true", "true", "16777216", "16", "seqwrite", "0", "0"], "{row}");
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let w = &j["jobs"][0]["write"];
    let runtime_ns = j["jobs"][0]["dcload"]["runtime_ns"].as_f64().unwrap();
    let expect = (16u64 << 20) as f64 / (runtime_ns / 1e9);
    assert!((w["bw_bytes"].as_f64().unwrap() - expect).abs() <= 1.0, "bw_bytes is bytes over runtime");
    assert_eq!(w["runtime"].as_u64().unwrap(), ((runtime_ns + 5e5) / 1e6) as u64, "runtime in ms");
    assert_eq!(w["bw_bytes"].as_u64().unwrap() / 1024, w["bw"].as_u64().unwrap());
    let pct = w["clat_ns"]["percentile"].as_object().unwrap();
    let keys: Vec<&str> = pct.keys().map(|k| k.as_str()).collect();
    assert_eq!(keys.len(), 17, "fio's default percentile list");
    for k in ["1.000000", "50.000000", "99.000000", "99.500000", "99.900000", "99.950000", "99.990000"] {
        assert!(pct.contains_key(k), "{k}");
    }
    assert_eq!(j["jobs"][0]["job options"]["bs"], "1M");
    for key in ["fio version", "timestamp", "time", "jobs", "disk_util"] {
        assert!(j.get(key).is_some(), "top-level {key}");
    }
    for key in ["slat_ns", "lat_ns", "bw_min", "bw_max", "iops_mean", "short_ios"] {
        assert!(w.get(key).is_some(), "write.{key}");
    }
    assert_eq!(w["slat_ns"]["N"], 16, "io_uring has submission latency");
}

// One piece: one run's logs, every file name and column checked against what
// fio writes for the same job.
#[test]
fn interval_logs_use_fio_names_and_lines() {
    let s = scratch!("logs");
    let fname = format!("--filename={}", s.file("f"));
    let (code, j, err) = dcload_json(
        &s.dir,
        &[
            "--name=lg",
            "--size=4m",
            "--bs=64k",
            "--rw=randwrite",
            "--ioengine=io_uring",
            "--iodepth=2",
            "--write_bw_log=pp",
            "--write_lat_log=pp",
            "--write_iops_log=pp",
            "--log_avg_msec=0",
            "--log_offset=1",
            &fname,
        ],
    );
    assert_eq!(code, 0, "{err}");
    for kind in ["bw", "iops", "lat", "clat", "slat"] {
        let p = s.path(&format!("pp_{kind}.1.log"));
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 64, "{kind}: one line per I/O with log_avg_msec=0");
        let mut offsets = Vec::new();
        for l in &lines {
            let f: Vec<u64> = l.split(", ").map(|x| x.parse().unwrap()).collect();
            assert_eq!(f.len(), 6, "msec, value, direction, bs, offset, priority: {l}");
            assert_eq!((f[2], f[3], f[5]), (1, 65536, 0), "{l}");
            offsets.push(f[4]);
        }
        offsets.sort();
        assert_eq!(offsets, (0..64).map(|i| i * 65536).collect::<Vec<_>>(), "every block once");
    }
    assert_eq!(j["jobs"][0]["dcload"]["logs"].as_array().unwrap().len(), 5);
    // Without log_offset, fio 3.33's five columns: the fifth is the priority, not the offset.
    let (code, _, err) = dcload_json(
        &s.dir,
        &["--name=lg", "--size=1m", "--bs=64k", "--rw=write", "--write_lat_log=nooff", "--log_avg_msec=0", &fname],
    );
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(s.path("nooff_clat.1.log")).unwrap();
    assert_eq!(text.lines().count(), 16);
    assert!(text.lines().all(|l| l.split(", ").count() == 5 && l.ends_with(", 1, 65536, 0")), "{text}");

    // Averaged: windows of log_avg_msec, bs and offset zero, as fio writes them.
    let (code, j, err) = dcload_json(
        &s.dir,
        &[
            "--name=avg",
            "--size=4m",
            "--bs=4k",
            "--rw=randwrite",
            "--time_based",
            "--runtime=1",
            "--write_bw_log=av",
            "--log_avg_msec=100",
            &fname,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(s.path("av_bw.1.log")).unwrap();
    assert!(text.lines().all(|l| l.ends_with(", 1, 0, 0")), "{text}");
    let rows: Vec<(u64, u64)> = text
        .lines()
        .map(|l| {
            let f: Vec<u64> = l.split(", ").map(|x| x.parse().unwrap()).collect();
            (f[0], f[1])
        })
        .collect();
    assert!(rows.len() >= 2, "{text}");
    // Every window but the last spans at least log_avg_msec.
    assert!(rows.windows(2).take(rows.len().saturating_sub(2)).all(|w| w[1].0 >= w[0].0 + 100), "{text}");
    // The windows tile the run: bandwidth x window length adds up to the bytes written.
    let mut prev = 0u64;
    let mut kib = 0f64;
    for (t, bw) in &rows {
        kib += *bw as f64 * (*t - prev) as f64 / 1000.0;
        prev = *t;
    }
    let bytes = j["jobs"][0]["write"]["io_bytes"].as_f64().unwrap();
    assert!((kib * 1024.0 / bytes - 1.0).abs() < 0.02, "log integrates to {kib} KiB, JSON says {bytes} bytes");
}

/// fio's optional log columns: `log_window_value=both` puts each window's
/// maximum after its mean, `log_issue_time=1` ends each line with the I/O's
/// issue time (clat and slat logs; 0 in the others), `log_prio=1` prints the
/// priority as fio's value-and-class word.
#[test]
fn interval_logs_take_fio_s_window_value_issue_time_and_prio_columns() {
    let s = scratch!("log-columns");
    let fname = format!("--filename={}", s.file("f"));
    let base = ["--size=2m", "--bs=64k", "--rw=randwrite", "--ioengine=io_uring", "--iodepth=2", "--log_offset=1"];
    let run = |extra: &[&str]| {
        let (code, _, err) = dcload_json(&s.dir, &[&base[..], extra, &[fname.as_str()]].concat());
        assert_eq!(code, 0, "{extra:?}: {err}");
    };
    let fields = |name: &str| -> Vec<Vec<String>> {
        let text = std::fs::read_to_string(s.path(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        text.lines().map(|l| l.split(", ").map(str::to_string).collect()).collect()
    };

    // Per I/O: msec, value, direction, bs, offset, priority, issue time.
    run(&["--name=it", "--write_lat_log=it", "--write_bw_log=it", "--log_avg_msec=0", "--log_issue_time=1"]);
    for l in fields("it_clat.1.log").iter().chain(&fields("it_slat.1.log")) {
        assert_eq!(l.len(), 7, "{l:?}");
        let (ms, value, issued): (u64, u64, u64) =
            (l[0].parse().unwrap(), l[1].parse().unwrap(), l[6].parse().unwrap());
        assert!(issued <= ms * 1_000_000 + 999_999, "issued before it completed: {l:?}");
        assert!(issued > 0 && value > 0, "{l:?}");
    }
    let clat = fields("it_clat.1.log");
    assert_eq!(clat.len(), 32);
    for l in &clat {
        let (ms, value, issued): (u64, u64, u64) =
            (l[0].parse().unwrap(), l[1].parse().unwrap(), l[6].parse().unwrap());
        assert_eq!((issued + value) / 1_000_000, ms, "issue time + completion latency is the completion: {l:?}");
    }
    for name in ["it_lat.1.log", "it_bw.1.log"] {
        assert!(fields(name).iter().all(|l| l.len() == 7 && l[6] == "0"), "{name}: fio keeps no issue time there");
    }

    // Windows of 100 ms, mean and maximum; a rate's maximum is itself.
    let timed = ["--time_based", "--runtime=1", "--log_avg_msec=100", "--log_window_value=both", "--log_prio=1"];
    run(&[&["--name=w", "--write_lat_log=w", "--write_iops_log=w"][..], &timed[..]].concat());
    let lat = fields("w_clat.1.log");
    assert!(lat.len() >= 5, "{lat:?}");
    for l in &lat {
        assert_eq!(l.len(), 7, "msec, mean, max, direction, bs, offset, priority: {l:?}");
        let (mean, max): (u64, u64) = (l[1].parse().unwrap(), l[2].parse().unwrap());
        assert!(max >= mean && mean > 0, "{l:?}");
        assert_eq!(&l[3..], ["1", "0", "0", "0x0000"], "{l:?}");
    }
    assert!(fields("w_iops.1.log").iter().all(|l| l.len() == 7 && l[1] == l[2]), "one rate per window");
    run(&["--name=m", "--write_lat_log=m", "--time_based", "--runtime=1", "--log_avg_msec=100", "--log_max_value=1"]);
    assert!(fields("m_lat.1.log").iter().all(|l| l.len() == 6 && l[5] == "0"), "max alone: one value column");

    // As in fio: the issue time needs the latency logs and the offset column.
    for extra in [&["--name=x", "--log_issue_time=1", "--write_bw_log=x"][..], &["--name=x", "--log_issue_time=1"]] {
        let args: Vec<&str> = [&["--size=1m", &fname], extra].concat();
        let (code, _, err) = dcload_json(&s.dir, &args);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("log_issue_time=1 needs write_lat_log and log_offset=1"), "{err}");
    }
}

#[test]
fn group_reporting_and_stonewall() {
    let s = scratch!("groups");
    let dir = format!("--directory={}", s.dir.display());
    let (code, j, err) = dcload_json(
        &s.dir,
        &[
            &dir,
            "--size=2m",
            "--bs=64k",
            "--rw=write",
            "--name=a",
            "--numjobs=3",
            "--group_reporting",
            "--filename_format=$jobname.$jobnum",
            "--name=b",
            "--stonewall",
            "--rw=read",
            "--filename=a.0",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let jobs = j["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "three instances of a reported as one");
    assert_eq!((jobs[0]["jobname"].as_str(), jobs[0]["groupid"].as_u64()), (Some("a"), Some(0)));
    assert_eq!(jobs[0]["dcload"]["jobs"], 3);
    assert_eq!(jobs[0]["write"]["io_bytes"], 3 * (2 << 20));
    assert_eq!(jobs[0]["dcload"]["files"].as_array().unwrap().len(), 3);
    for n in 0..3 {
        assert!(s.path(&format!("a.{n}")).exists(), "$jobname.$jobnum");
    }
    assert_eq!(jobs[1]["groupid"], 1);
    assert_eq!(jobs[1]["read"]["io_bytes"], 2 << 20);
    let a_start = jobs[0]["dcload"]["clock"]["start_monotonic_ns"].as_u64().unwrap();
    let a_runtime = jobs[0]["dcload"]["runtime_ns"].as_u64().unwrap();
    let b_start = jobs[1]["dcload"]["clock"]["start_monotonic_ns"].as_u64().unwrap();
    assert!(b_start >= a_start + a_runtime, "stonewall: b starts after a ends");
}

/// `wait_for`: a job starts when the job it names has ended, while a job
/// beside them runs throughout; the checks on the name refuse what fio does.
#[test]
fn wait_for_starts_a_job_when_its_waitee_ends() {
    let s = scratch!("wait-for");
    let dir = format!("--directory={}", s.dir.display());
    let common = [dir.as_str(), "--size=2m", "--bs=64k", "--rw=write", "--time_based"];
    let mut args = common.to_vec();
    args.extend(["--name=first", "--runtime=300ms", "--name=beside", "--runtime=900ms"]);
    args.extend(["--name=after", "--runtime=300ms", "--wait_for=first"]);
    let (code, j, err) = dcload_json(&s.dir, &args);
    assert_eq!(code, 0, "{err}");
    let clock = |k: usize| {
        let d = &j["jobs"][k]["dcload"];
        let start = d["clock"]["start_monotonic_ns"].as_u64().unwrap();
        (start, start + d["runtime_ns"].as_u64().unwrap())
    };
    let (first, beside, after) = (clock(0), clock(1), clock(2));
    assert!(after.0 >= first.1, "after starts once first has ended: {first:?} {after:?}");
    assert!(after.0 < beside.1, "beside still runs when after starts (no stonewall): {beside:?} {after:?}");
    assert!(j["jobs"][2]["write"]["io_bytes"].as_u64().unwrap() > 0);
    for (extra, says) in [
        (&["--name=self", "--wait_for=self"][..], "a job cannot wait for itself"),
        (&["--name=early", "--wait_for=late", "--name=late"][..], "must come before the waiting one"),
        (&["--name=x", "--wait_for=nobody"][..], "no job of that name"),
        (&["--name=twin", "--name=twin", "--name=w", "--wait_for=twin"][..], "2 earlier jobs have that name"),
    ] {
        let mut args = common[..4].to_vec();
        args.extend(extra);
        let (code, _, err) = dcload_json(&s.dir, &args);
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
    }
}

/// `allow_file_create=0`: a missing file is an error and is not made.
#[test]
fn allow_file_create_0_refuses_a_missing_file() {
    let s = scratch!("no-create");
    let missing = s.file("missing");
    let (code, _, err) = dcload_json(
        &s.dir,
        &["--name=w", &format!("--filename={missing}"), "--size=1m", "--rw=write", "--allow_file_create=0"],
    );
    assert_ne!(code, 0);
    assert!(err.contains("does not exist, and job 'w' has allow_file_create=0"), "{err}");
    assert!(!std::path::Path::new(&missing).exists(), "the file was created");
}

/// fio's depth distributions: I/Os by the depth they joined, and submit
/// and reap calls by how many I/Os each moved, keyed as fio keys them, in
/// JSON and in the text's "IO depths", "submit", "complete" and "issued
/// rwts" lines; the latency ranges in "lat (usec)" lines; `desc`.
#[test]
fn depth_and_batch_distributions_read_as_fio_s() {
    let s = scratch!("depths");
    let fname = format!("--filename={}", s.file("f"));
    let job = [
        "--name=d",
        fname.as_str(),
        "--size=8m",
        "--bs=4k",
        "--rw=randread",
        "--ioengine=io_uring",
        "--iodepth=8",
        "--iodepth_batch_submit=8",
        "--iodepth_batch_complete_min=8",
        "--description=eight at a time",
    ];
    let (code, j, err) = dcload_json(&s.dir, &job);
    assert_eq!(code, 0, "{err}");
    let j = &j["jobs"][0];
    let batches = ["0", "4", "8", "16", "32", "64", ">=64"];
    for key in ["iodepth_submit", "iodepth_complete"] {
        let got: Vec<&str> = j[key].as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(got, batches, "{key}");
        // Batches of 8 (a full queue each time) fall in fio's "8" bucket.
        assert!(j[key]["8"].as_f64().unwrap() > 90.0, "{key}: {}", j[key]);
    }
    assert!(j["iodepth_level"]["8"].as_f64().unwrap() > 90.0, "{}", j["iodepth_level"]);
    assert_eq!(j["desc"], "eight at a time");
    let out = dcload_in(&s.dir, &job);
    let text = String::from_utf8_lossy(&out.stdout);
    for line in ["  IO depths    : 1=", "     submit    : 0=0.0%, 4=", "     complete  : 0=", "  lat (usec)   : "] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
    assert!(text.contains("     issued rwts: total=2048,0,0,0 short=0,0,0,0 dropped=0,0,0,0"), "{text}");
}

#[test]
fn writer_and_readers_overlap_in_one_invocation() {
    let s = scratch!("overlap");
    let dir = format!("--directory={}", s.dir.display());
    let (code, j, err) = dcload_json(
        &s.dir,
        &[
            &dir,
            "--name=writer",
            "--rw=write",
            "--bs=1M",
            "--size=64m",
            "--time_based",
            "--runtime=1",
            "--name=reader",
            "--rw=randread",
            "--numjobs=2",
            "--size=8m",
            "--time_based",
            "--runtime=1",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let jobs = j["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3);
    let starts: Vec<u64> = jobs.iter().map(|j| j["dcload"]["clock"]["start_monotonic_ns"].as_u64().unwrap()).collect();
    let spread = starts.iter().max().unwrap() - starts.iter().min().unwrap();
    assert!(spread < 50_000_000, "all start together on the barrier (spread {spread} ns)");
    assert!(jobs.iter().all(|j| j["groupid"] == 0));
}

#[test]
fn seed_dontcache_bench_job_files_run_unchanged() {
    let Some(files) = seed_job_files() else {
        return skip("seed_dontcache_bench_job_files_run_unchanged", "../shared/reference is absent");
    };
    let s = scratch!("seedjobs");
    let jobs: Vec<_> = files.iter().filter(|(p, _)| p.contains("dontcache-bench/")).collect();
    assert_eq!(jobs.len(), 8);
    for (path, text) in jobs {
        let name = path.rsplit('/').next().unwrap();
        std::fs::write(s.path(name), text).unwrap();
        for mode in [["--direct=0", "--uncached=0"], ["--direct=0", "--uncached=1"], ["--direct=1", "--uncached=0"]] {
            // As run-benchmarks.sh runs them, at a small size; the time-based Axboe job gets a short runtime.
            let fname = format!("--filename={}", s.file("testfile"));
            let mut args = vec![name, "--size=8m", &fname, mode[0], mode[1]];
            if name == "axboe-write.fio" {
                args.extend(["--runtime=1", "--numjobs=4"]);
            }
            let (code, j, err) = dcload_json(&s.dir, &args);
            assert_eq!(code, 0, "{name} {mode:?}: {err}");
            let job = &j["jobs"][0];
            assert_eq!(job["error"], 0);
            let expect_mode = if mode[0] == "--direct=1" {
                "direct"
            } else if mode[1] == "--uncached=1" {
                "dontcache"
            } else {
                "buffered"
            };
            assert_eq!(job["dcload"]["mode"], expect_mode, "{name}: the command line wins over the file's direct=0");
            let moved = job["read"]["io_bytes"].as_u64().unwrap() + job["write"]["io_bytes"].as_u64().unwrap();
            assert!(moved >= 8 << 20, "{name}: {moved}");
        }
    }
    // The job files name interval logs; they land beside the results, in fio's naming.
    assert!(s.path("seqwrite_bw.1.log").exists());
    assert!(s.path("axboe-write_bw.4.log").exists());
}

#[test]
fn disk_util_counts_the_requests_of_the_run() {
    use std::os::unix::fs::MetadataExt;
    let s = scratch!("diskutil");
    let disk =
        dc_sys::block_device_of(std::fs::metadata(&s.dir).unwrap().dev()).expect("the scratch dir is on a disk").disk;
    let fname = format!("--filename={}", s.file("f"));
    let args = ["--name=du", "--size=32m", "--bs=1M", "--rw=write", "--direct=1", &fname];
    let (code, j, err) = dcload_json(&s.dir, &args);
    assert_eq!(code, 0, "{err}");
    let du = j["disk_util"].as_array().unwrap();
    assert_eq!(du.len(), 1, "one disk under the one file: {du:?}");
    assert_eq!(du[0]["name"], disk.as_str());
    // 32 O_DIRECT writes, each waited for before the next: none can merge
    // into another, and the block layer may only split them.
    assert!(du[0]["write_ios"].as_u64().unwrap() >= 32, "{:?}", du[0]);
    let util = du[0]["util"].as_f64().unwrap();
    assert!(util > 0.0 && util <= 100.0, "{util}");
    for key in ["read_ios", "read_merges", "write_merges", "read_ticks", "write_ticks", "in_queue"] {
        assert!(du[0][key].is_u64(), "{key}");
    }
    // The text report ends with fio's "Disk stats" block.
    let out = dcload_in(&s.dir, &args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("Disk stats (read/write):\n  {disk}: ios=")), "{text}");

    // A file on tmpfs has no disk under it: nothing to report, as fio.
    let shm = format!("--filename=/dev/shm/dcload-diskutil-{}", std::process::id());
    let (code, j, err) = dcload_json(&s.dir, &["--name=du", "--size=4m", "--bs=1M", "--rw=write", "--unlink=1", &shm]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(j["disk_util"], serde_json::json!([]));
}

/// `per_job_logs=0` names logs `<prefix>_bw.log` as fio does, and refuses
/// instances that would share one; `gtod_reduce=1` runs and says latencies
/// are measured anyway.
#[test]
fn per_job_logs_off_names_logs_without_the_instance_number() {
    let s = scratch!("per-job-logs");
    let fname = format!("--filename={}", s.file("f"));
    let (code, _, err) = dcload_json(
        &s.dir,
        &["--name=pj", "--size=1m", "--rw=write", "--write_bw_log=one", "--per_job_logs=0", "--gtod_reduce=1", &fname],
    );
    assert_eq!(code, 0, "{err}");
    assert!(s.path("one_bw.log").exists() && !s.path("one_bw.1.log").exists());
    assert!(err.contains("gtod_reduce=1: dcload times every I/O anyway"), "{err}");

    let out =
        dcload_in(&s.dir, &["--name=pj", "--size=1m", "--write_bw_log=two", "--per_job_logs=0", "--numjobs=2", &fname]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("per_job_logs=0 with numjobs=2"), "{err}");
    assert!(!s.path("two_bw.log").exists());
}

/// `--output-format=json+`: each direction's completion latencies as fio's
/// `bins`, which fio's own `fio_jsonplus_clat2csv` turns into a CSV and
/// validates.
#[test]
fn json_plus_carries_latency_bins_fio_tools_read() {
    let s = scratch!("json-plus");
    let (fname, out) = (format!("--filename={}", s.file("f")), format!("--output={}", s.file("plus.json")));
    let args = ["--name=p", "--size=4m", "--rw=randwrite", "--output-format=json+", &fname, &out];
    let run = dcload_in(&s.dir, &args);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(s.path("plus.json")).unwrap()).unwrap();
    let w = &j["jobs"][0]["write"];
    let counted: u64 = w["clat_ns"]["bins"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(counted, w["total_ios"].as_u64().unwrap(), "every I/O in one bin");
    assert!(j["jobs"][0]["read"]["clat_ns"].get("bins").is_none(), "no bins for a direction without I/O");

    let tool = std::path::Path::new("/usr/bin/fio_jsonplus_clat2csv");
    if !tool.exists() {
        return skip("json_plus_carries_latency_bins_fio_tools_read (fio's tool)", "fio_jsonplus_clat2csv is absent");
    }
    let csv = s.file("csv");
    for extra in [None, Some("--validate")] {
        let mut cmd = std::process::Command::new("python3");
        cmd.arg(tool).args(extra).arg(s.path("plus.json")).arg(&csv);
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let rows = std::fs::read_to_string(format!("{csv}_job0")).unwrap().lines().count();
    assert!(rows > 2, "a header and a row per latency bin: {rows} lines");
}

/// `write_hist_log`: every `log_hist_msec`, a line per direction of
/// `msec, direction, bs` and the completions in each of fio's 1856
/// histogram bins since the last line (summed in runs of
/// 2^`log_hist_coarseness`). fio's own `fiologparser_hist.py` reads it, and
/// `fiologparser.py` the bandwidth log beside it (both from
/// `../shared/fio-tools`; the histogram tool needs pandas).
#[test]
fn histogram_logs_are_fio_s_and_fiologparser_hist_reads_them() {
    let s = scratch!("hist-log");
    let fname = format!("--filename={}", s.file("f"));
    let run = |extra: &[&str]| {
        let base = ["--name=h", "--size=8m", "--rw=randread", "--ioengine=io_uring", "--iodepth=4", "--time_based"];
        let (code, j, err) = dcload_json(&s.dir, &[&base[..], extra, &[fname.as_str()]].concat());
        assert_eq!(code, 0, "{extra:?}: {err}");
        j["jobs"][0]["read"]["total_ios"].as_u64().unwrap()
    };
    let lines = |name: &str| -> Vec<Vec<u64>> {
        let text = std::fs::read_to_string(s.path(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        text.lines().map(|l| l.split(", ").map(|v| v.parse().unwrap()).collect()).collect()
    };
    let ios =
        run(&["--runtime=2", "--write_hist_log=hh", "--log_hist_msec=250", "--write_bw_log=hh", "--log_avg_msec=100"]);
    let rows = lines("hh_clat_hist.1.log");
    assert!((6..=8).contains(&rows.len()), "a line per 250 ms of 2 s: {}", rows.len());
    let mut logged = 0;
    // Each line falls in its own 250 ms window, counted from the start: the
    // windows do not drift. A window with no completion (the job stalled
    // past its end, on a loaded machine) has no line, as in fio.
    let windows: Vec<u64> = rows.iter().map(|r| r[0] / 250).collect();
    assert!(windows[0] == 1 && windows.windows(2).all(|w| w[0] < w[1]), "a line per window: {windows:?}");
    assert!(windows.len() + 1 >= windows[windows.len() - 1] as usize, "at most one window without a line: {windows:?}");
    for r in &rows {
        assert_eq!(r.len(), 3 + 1856, "msec, direction, bs, 1856 bins");
        assert_eq!((r[1], r[2]), (0, 4096), "reads of 4 KiB");
        assert!(r[3 + 1600..].iter().all(|&c| c == 0), "nothing lasts 2^30 ns (about a second)");
        logged += r[3..].iter().sum::<u64>();
    }
    assert!(logged <= ios && logged >= ios / 2, "{logged} of {ios} completions in whole windows");

    run(&["--runtime=1", "--write_hist_log=hc", "--log_hist_msec=200", "--log_hist_coarseness=2"]);
    assert!(lines("hc_clat_hist.1.log").iter().all(|r| r.len() == 3 + 1856 / 4), "bins summed 4 at a time");

    let Some(tools) = fio_tools_dir() else {
        return skip("histogram_logs_are_fio_s_and_fiologparser_hist_reads_them", "no ../shared/fio-tools");
    };
    let pandas = std::process::Command::new("/usr/bin/python3").args(["-c", "import numpy, pandas"]).output();
    if !pandas.is_ok_and(|o| o.status.success()) {
        let why = "fiologparser_hist.py needs python3-pandas (scripts/setup.sh installs it)";
        return skip("histogram_logs_are_fio_s_and_fiologparser_hist_reads_them", why);
    }
    let out = std::process::Command::new("/usr/bin/python3")
        .arg(tools.join("fiologparser_hist.py"))
        .arg(s.path("hh_clat_hist.1.log"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let mut out_lines = text.lines();
    assert_eq!(out_lines.next(), Some("end-time, samples, min, avg, median, 90%, 95%, 99%, max"));
    let rows: Vec<Vec<f64>> = out_lines.map(|l| l.split(", ").map(|v| v.parse().unwrap()).collect()).collect();
    assert!(!rows.is_empty(), "{text}");
    for r in &rows {
        let (samples, min, median, max) = (r[1], r[2], r[4], r[8]);
        assert!(samples > 0.0 && min <= median && median <= max, "{text}");
    }
    // fiologparser.py's per-second sums of the bandwidth log (KiB/s).
    let out = std::process::Command::new("python3")
        .arg(tools.join("fiologparser.py"))
        .args(["-s", "hh_bw.1.log"])
        .current_dir(&s.dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let sums: Vec<f64> = text.lines().map(|l| l.split(", ").nth(1).unwrap().parse().unwrap()).collect();
    assert!(!sums.is_empty() && sums.iter().all(|&v| v > 0.0), "{text}");
}

/// `--minimal` and `--output-format=terse`: fio's `;`-separated line per
/// reported job, version 3 by default (121 fields, then 9 per disk), 4 with
/// a trim status (41 more), 5 with each direction's bandwidth sample count
/// and IOPS statistics too; the figures are the JSON output's.
#[test]
fn terse_lines_have_fio_s_fields_and_the_json_s_figures() {
    let s = scratch!("terse");
    let fname = format!("--filename={}", s.file("f"));
    let run = |extra: &[&str]| {
        let base = ["--name=t", "--size=2m", "--bs=64k", "--rw=write", "--numjobs=2", "--group_reporting"];
        let out = dcload_in(&s.dir, &[&base[..], extra, &[fname.as_str()]].concat());
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let both = run(&["--output-format=terse,json"]);
    let (terse, json) = both.split_once('\n').unwrap();
    let j: serde_json::Value = serde_json::from_str(json).unwrap();
    let disks = j["disk_util"].as_array().unwrap().len();
    let f: Vec<&str> = terse.split(';').collect();
    assert_eq!(f.len(), 121 + 9 * disks, "version 3's fields: {terse}");
    assert_eq!(f[..5], ["3", "fio-3.33", "t", "0", "0"]);
    let w = &j["jobs"][0]["write"];
    assert_eq!(f[46], (w["io_bytes"].as_u64().unwrap() >> 10).to_string(), "write KiB");
    assert_eq!(f[49], w["runtime"].to_string(), "write runtime (ms)");
    assert_eq!(f[5], "0", "nothing read");
    assert!(f[87].ends_with('%') && f[92].ends_with('%'), "CPU and depth percentages: {terse}");
    if disks > 0 {
        assert_eq!(f[121], j["disk_util"][0]["name"].as_str().unwrap());
    }

    let minimal = run(&["--minimal"]);
    assert_eq!(minimal.lines().count(), 1, "one line for the group: {minimal}");
    let v4 = run(&["--minimal", "--terse-version=4"]);
    assert_eq!(v4.trim_end().split(';').count(), 162 + 9 * disks, "{v4}");
    let v5 = run(&["--output-format=terse", "--terse-version=5"]);
    assert_eq!(v5.trim_end().split(';').count(), 180 + 9 * disks, "{v5}");
    let out = dcload_in(&s.dir, &["--minimal", "--terse-version=2", "--name=t", "--size=1m", &fname]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("use 3 (the default), 4"));
}
