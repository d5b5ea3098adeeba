//! Every mode on every engine, with data integrity proven by verify on a
//! cold read-back, and the page-cache effect of each mode proven by cachestat.

mod common;
use common::*;

const ENGINES: [&str; 5] = ["psync", "pvsync2", "io_uring", "libaio", "sync"];

fn mode_args(mode: &str) -> &'static [&'static str] {
    match mode {
        "buffered" => &[],
        "dontcache" => &["--uncached=1"],
        _ => &["--direct=1"],
    }
}

#[test]
fn every_mode_on_every_engine_writes_and_reads_back_verified_data() {
    let s = scratch!("modes");
    for mode in ["buffered", "dontcache", "direct"] {
        for engine in ENGINES {
            if mode == "dontcache" && (engine == "psync" || engine == "sync") {
                continue; // psync cannot carry RWF_DONTCACHE: see the test below.
            }
            for rw in ["write", "randwrite"] {
                let file = s.file(&format!("{mode}-{engine}-{rw}"));
                let engine_opt = format!("--ioengine={engine}");
                let depth = if engine == "io_uring" || engine == "libaio" { "--iodepth=8" } else { "--iodepth=1" };
                let rw_opt = format!("--rw={rw}");
                let mut args =
                    vec!["--name=w", "--size=8m", "--bs=16k", "--verify=crc32c", &engine_opt, depth, &rw_opt];
                let fname = format!("--filename={file}");
                args.push(&fname);
                args.extend_from_slice(mode_args(mode));
                let (code, j, err) = dcload_json(&s.dir, &args);
                assert_eq!(code, 0, "{mode} {engine} {rw}: {err}");
                let job = &j["jobs"][0];
                assert_eq!(job["error"], 0);
                assert_eq!(job["write"]["io_bytes"], 8 << 20, "{mode} {engine} {rw}");
                assert_eq!(job["write"]["total_ios"], 512);
                assert_eq!(job["dcload"]["mode"], mode);
                assert_eq!(job["dcload"]["ioengine"], engine);
                assert_eq!(job["dcload"]["verify"]["blocks_checked"], 512, "every block read back and checked");

                // Now read it back from the device, cold, in the same mode and engine.
                drop_cache_of(&s.path(&format!("{mode}-{engine}-{rw}")));
                let mut args = vec![
                    "--name=r",
                    "--size=8m",
                    "--bs=16k",
                    "--verify=crc32c",
                    "--rw=randread",
                    &engine_opt,
                    depth,
                    &fname,
                ];
                args.extend_from_slice(mode_args(mode));
                let (code, j, err) = dcload_json(&s.dir, &args);
                assert_eq!(code, 0, "read-back {mode} {engine} {rw}: {err}");
                assert_eq!(j["jobs"][0]["read"]["io_bytes"], 8 << 20);
                assert_eq!(j["jobs"][0]["dcload"]["verify"]["blocks_checked"], 512);
            }
        }
    }
}

#[test]
fn corrupted_block_fails_verify_with_file_and_offset() {
    let s = scratch!("corrupt");
    let f = s.file("data");
    let fname = format!("--filename={f}");
    let (code, _, err) =
        dcload_json(&s.dir, &["--name=w", "--size=1m", "--bs=4k", "--rw=write", "--verify=md5", &fname]);
    assert_eq!(code, 0, "{err}");
    // Overwrite the block at 64 KiB with the block from 0 (a misdirected write).
    let mut data = std::fs::read(&f).unwrap();
    let first: Vec<u8> = data[..4096].to_vec();
    data[65536..65536 + 4096].copy_from_slice(&first);
    std::fs::write(&f, &data).unwrap();
    let (code, j, err) =
        dcload_json(&s.dir, &["--name=r", "--size=1m", "--bs=4k", "--rw=read", "--verify=md5", &fname]);
    assert_eq!(code, 1, "a verify mismatch fails the run");
    let job = &j["jobs"][0];
    assert_eq!(job["error"], libc::EILSEQ);
    assert_eq!(job["dcload"]["error_offset"], 65536);
    let msg = job["dcload"]["error_message"].as_str().unwrap();
    assert!(msg.contains(&f) && msg.contains("offset 65536") && msg.contains("written for offset 0"), "{msg}");
    assert!(err.contains("offset 65536"), "{err}");
}

#[test]
fn cachestat_shows_buffered_cached_and_uncached_not() {
    let s = scratch!("cachestat");
    let run = |name: &str, extra: &[&str]| {
        let fname = format!("--filename={}", s.file(name));
        let mut args =
            vec!["--name=w", "--size=32m", "--bs=1M", "--rw=write", "--ioengine=pvsync2", "--end_fsync=1", &fname];
        args.extend_from_slice(extra);
        let (code, j, err) = dcload_json(&s.dir, &args);
        assert_eq!(code, 0, "{err}");
        j["jobs"][0]["dcload"]["files"][0].clone()
    };
    let buffered = run("buffered", &[]);
    let uncached = run("uncached", &["--uncached=1"]);
    let direct = run("direct", &["--direct=1"]);
    assert_eq!(buffered["pages"], 8192);
    // Cached, or taken by the kernel's reclaim (a shadow entry, counted
    // evicted), which this machine runs on cold memory all the time.
    let kept = |c: &serde_json::Value| c["nr_cache"].as_u64().unwrap() + c["nr_evicted"].as_u64().unwrap();
    assert_eq!(kept(&buffered["cachestat"]), 8192, "a buffered write stays cached: {buffered}");
    assert_eq!(buffered["mode"], "buffered");
    assert!(
        uncached["cachestat"]["nr_cache"].as_u64().unwrap() <= 256,
        "RWF_DONTCACHE leaves (almost) nothing: {uncached}"
    );
    assert_eq!(uncached["mode"], "dontcache", "uncached=1 is the dontcache mode, by the name every tool uses");
    assert_eq!(direct["cachestat"]["nr_cache"], 0, "{direct}");
    // The kernel agrees after the process is gone (its reclaim aside).
    assert_eq!(kept_or_reclaimed_in(&s.path("buffered"), 0, 0), 8192);
    assert!(cached_pages(&s.path("uncached")) <= 256);
}

#[test]
fn uncached_reads_leave_the_cache_empty_and_buffered_reads_fill_it() {
    let s = scratch!("reads");
    let fname = format!("--filename={}", s.file("f"));
    let (code, _, err) = dcload_json(&s.dir, &["--name=layout", "--size=16m", "--rw=write", "--bs=1M", &fname]);
    assert_eq!(code, 0, "{err}");
    for (mode, expect_cached) in [("--uncached=1", false), ("--uncached=0", true)] {
        drop_cache_of(&s.path("f"));
        let (code, j, err) = dcload_json(
            &s.dir,
            &["--name=r", "--size=16m", "--rw=read", "--bs=256k", "--ioengine=io_uring", "--iodepth=4", mode, &fname],
        );
        assert_eq!(code, 0, "{err}");
        let cached = j["jobs"][0]["dcload"]["files"][0]["cachestat"]["nr_cache"].as_u64().unwrap();
        if expect_cached {
            assert_eq!(cached, 4096, "buffered read caches the file");
        } else {
            assert!(cached <= 64, "uncached read left {cached} pages");
        }
    }
}

#[test]
fn mixed_rw_reads_and_writes_in_proportion() {
    let s = scratch!("mixed");
    let fname = format!("--filename={}", s.file("f"));
    let (code, j, err) = dcload_json(
        &s.dir,
        &[
            "--name=m",
            "--size=8m",
            "--bs=4k",
            "--rw=randrw",
            "--rwmixread=70",
            "--verify=crc32c",
            "--ioengine=io_uring",
            "--iodepth=4",
            &fname,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let job = &j["jobs"][0];
    let r = job["read"]["total_ios"].as_u64().unwrap();
    let w = job["write"]["total_ios"].as_u64().unwrap();
    assert_eq!(r + w, 2048);
    assert!((1300..1560).contains(&r), "70% of 2048 reads expected, got {r}");
    // As fio: the job's reads go unchecked, and every block it wrote is read
    // back and checked after its I/O (one I/O a block per pass: w blocks).
    assert_eq!(job["dcload"]["verify"]["blocks_checked"].as_u64().unwrap(), w, "every written block was checked");
}

#[test]
fn psync_cannot_be_uncached() {
    let s = scratch!("psync-uncached");
    let fname = format!("--filename={}", s.file("f"));
    let out = dcload_in(&s.dir, &["--name=w", "--size=1m", "--ioengine=psync", "--uncached=1", &fname]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("uncached=1 needs ioengine=pvsync2, io_uring or libaio"), "{err}");
}

/// `writebehind=<policy>` runs the job through libdontcache: every policy
/// writes verifiable data, reports its mode, and leaves the file uncached.
#[test]
fn writebehind_policies_verify_and_leave_nothing_cached() {
    let s = scratch!("writebehind");
    // Synchronous, and io_uring at depth 8 with completions reported to
    // the library: the same modes at any engine and depth.
    let engines = [
        ["--ioengine=pvsync2", "--iodepth=1"],
        ["--ioengine=io_uring", "--iodepth=8"],
        ["--ioengine=libaio", "--iodepth=8"],
    ];
    for (policy, engine) in
        ["flusher", "lazy", "inline", "per-file", "kernel"].into_iter().flat_map(|p| engines.map(|e| (p, e)))
    {
        let f = s.file(&format!("wb-{policy}"));
        let (code, j, err) = dcload_json(
            &s.dir,
            &[
                "--name=wb",
                &format!("--filename={f}"),
                "--size=64m",
                "--bs=256k",
                "--rw=randwrite",
                "--verify=crc32c",
                &format!("--writebehind={policy}"),
                engine[0],
                engine[1],
            ],
        );
        assert_eq!(code, 0, "{policy} {engine:?}: {err}");
        let job = &j["jobs"][0];
        assert_eq!(job["dcload"]["mode"], format!("writebehind:{policy}"), "{job}");
        assert_eq!(job["write"]["io_bytes"], 64 << 20);
        assert_eq!(job["dcload"]["verify"]["blocks_checked"], 256, "{policy} {engine:?}: {job}");
        assert_eq!(
            job["dcload"]["files"][0]["cachestat"]["nr_cache"], 0,
            "{policy} {engine:?}: {}",
            job["dcload"]["files"][0]
        );
        std::fs::remove_file(&f).unwrap();
    }
    let (code, _, err) =
        dcload_json(&s.dir, &["--name=wb", "--filename=x", "--size=1m", "--rw=write", "--writebehind=fast"]);
    assert_eq!(code, 2, "a bad policy is a bad command line, refused before anything runs");
    assert!(err.contains("unknown write-behind policy 'fast'") && err.contains("per-file"), "{err}");
    let (code, _, err) = dcload_json(
        &s.dir,
        &["--name=wb", "--filename=x", "--size=1m", "--rw=write", "--writebehind=lazy", "--direct=1"],
    );
    assert_eq!(code, 3);
    assert!(err.contains("drop direct=1"), "{err}");
}

/// `ioengine=null` (fio's): every I/O completes at once and no file is
/// created or opened, at any depth; what makes no sense without a file is
/// said, not silently dropped.
#[test]
fn the_null_engine_runs_without_a_file() {
    let s = scratch!("null-engine");
    let args = ["--name=n", "--ioengine=null", "--size=64m", "--bs=4k", "--rw=randread", "--iodepth=16"];
    let (code, j, err) = dcload_json(&s.dir, &args);
    assert_eq!(code, 0, "{err}");
    let job = &j["jobs"][0];
    assert_eq!(job["read"]["io_bytes"], 64 << 20);
    assert_eq!(job["read"]["total_ios"], 16384);
    assert_eq!(job["dcload"]["ioengine"], "null");
    assert_eq!(std::fs::read_dir(&s.dir).unwrap().count(), 0, "a diskless job leaves nothing behind");

    // Writes with verify: nothing to read back, counted as verified (fio's way).
    let args = ["--name=w", "--ioengine=null", "--size=1m", "--rw=randwrite", "--verify=crc32c", "--fsync=4"];
    let (code, j, err) = dcload_json(&s.dir, &args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(j["jobs"][0]["write"]["total_ios"], 256);

    // A mode flag is taken and said to do nothing, as fio takes it silently.
    let (code, j, err) = dcload_json(&s.dir, &["--name=d", "--ioengine=null", "--size=1m", "--direct=1"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("direct=1 has no effect with ioengine=null"), "{err}");
    assert_eq!(j["jobs"][0]["dcload"]["mode"], "buffered");
    assert_eq!(std::fs::read_dir(&s.dir).unwrap().count(), 0);

    for (args, says) in [
        (&["--name=x", "--ioengine=null"][..], "ioengine=null needs size= or filesize="),
        (
            &["--name=x", "--ioengine=null", "--size=1m", "--writebehind=flusher"][..],
            "with ioengine=null it does no I/O",
        ),
    ] {
        let out = dcload_in(&s.dir, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // The text report says why there is no page-cache figure.
    let out = dcload_in(&s.dir, &["--name=x", "--ioengine=null", "--size=1m"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("page cache   : not measured (no data moved: ioengine=null)"), "{text}");
}

/// `bssplit=` and `bsrange=`: I/Os of the sizes asked, in the shares asked,
/// adding up to the job's size exactly.
#[test]
fn varying_block_sizes_add_up_to_the_size() {
    let s = scratch!("block-sizes");
    let fname = format!("--filename={}", s.file("f"));
    let split = ["--name=s", "--size=8m", "--rw=write", "--bssplit=4k/50:64k/50", &fname];
    let (code, j, err) = dcload_json(&s.dir, &split);
    assert_eq!(code, 0, "{err}");
    let w = &j["jobs"][0]["write"];
    assert_eq!(w["io_bytes"], 8 << 20);
    // Half the I/Os of 4k, half of 64k: about 8 MiB / 34 KiB of them.
    let ios = w["total_ios"].as_u64().unwrap();
    assert!((180..320).contains(&ios), "{ios} I/Os");
    assert_eq!(std::fs::metadata(s.path("f")).unwrap().len(), 8 << 20);

    let range =
        ["--name=r", "--size=8m", "--rw=randwrite", "--bsrange=4k-16k", "--ioengine=io_uring", "--iodepth=8", &fname];
    let (code, j, err) = dcload_json(&s.dir, &range);
    assert_eq!(code, 0, "{err}");
    let w = &j["jobs"][0]["write"];
    assert_eq!(w["io_bytes"], 8 << 20);
    let ios = w["total_ios"].as_u64().unwrap();
    assert!((8 << 20) / (16 << 10) < ios && ios < (8 << 20) / (4 << 10), "{ios} I/Os");
}

/// Verify with sizes that vary: each `verify_interval` piece (by default
/// the smallest size, capped to what divides every size) carries its own
/// content, so overwrites of other sizes, a read-back in other sizes and
/// the verify pass all agree, and a changed byte is found in its piece.
#[test]
fn varying_block_sizes_verify_piece_by_piece() {
    let s = scratch!("verify-interval");
    let fname = format!("--filename={}", s.file("f"));
    let run = |args: &[&str]| {
        let base = ["--size=8m", "--verify=crc32c", "--ioengine=io_uring", "--iodepth=8"];
        dcload_json(&s.dir, &[&base[..], args, &[fname.as_str()]].concat())
    };
    let (code, j, err) = run(&["--name=w", "--rw=randwrite", "--bsrange=4k-64k"]);
    assert_eq!(code, 0, "{err}");
    assert!(j["jobs"][0]["dcload"]["verify"]["blocks_checked"].as_u64().unwrap() > 0, "{}", j["jobs"][0]);
    // Pieces of 1 KiB, written in 4 and 12 KiB I/Os over the whole file ...
    let (code, j, err) = run(&["--name=w", "--rw=write", "--bssplit=4k/50:12k/50", "--verify_interval=1k"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(j["jobs"][0]["write"]["io_bytes"], 8 << 20);
    // ... read back cold in other sizes.
    drop_cache_of(&s.path("f"));
    let (code, j, err) = run(&["--name=r", "--rw=randread", "--bssplit=1k/30:8k/30:32k/40", "--verify_interval=1k"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(j["jobs"][0]["read"]["io_bytes"], 8 << 20);
    // Sizes that are not multiples of the smallest (4k and 6k) still cover
    // a sequential job's bytes without gaps, in 2 KiB pieces.
    let (code, _, err) = run(&["--name=w", "--rw=write", "--bssplit=4k/50:6k/50"]);
    assert_eq!(code, 0, "{err}");
    drop_cache_of(&s.path("f"));
    let (code, j, err) = run(&["--name=r", "--rw=read", "--bs=2k"]);
    assert_eq!(code, 0, "every piece of the file verifies: {err}");
    assert_eq!(j["jobs"][0]["dcload"]["verify"]["blocks_checked"], 4096);
    // One changed byte in the middle of a piece is found there.
    let (code, _, err) = run(&["--name=w", "--rw=write", "--bssplit=4k/50:12k/50", "--verify_interval=1k"]);
    assert_eq!(code, 0, "{err}");
    let f = std::fs::OpenOptions::new().write(true).open(s.path("f")).unwrap();
    std::os::unix::fs::FileExt::write_at(&f, &[0xAA], 3 * 1024 + 100).unwrap();
    drop(f);
    drop_cache_of(&s.path("f"));
    let (code, _, err) = run(&["--name=r", "--rw=read", "--bs=8k", "--verify_interval=1k"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("verify failed at byte 100 of the 1024-byte block at offset 3072"), "{err}");

    // A reader at an offset that would cut the laid-out pieces is refused
    // before anything runs (a writer's pieces start where it writes).
    let (code, _, err) = run(&["--name=o", "--bsrange=4k-16k", "--offset=2k"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("verify= reads pieces of verify_interval=4096"), "{err}");
    let (code, _, err) = run(&["--name=o", "--rw=write", "--bsrange=4k-16k", "--offset=2k"]);
    assert_eq!(code, 0, "{err}");
}

/// `offset` and `offset_increment`: each instance works over its own
/// stretch of the file, fio's way, and verifies there.
#[test]
fn offsets_place_each_instance_in_its_own_stretch() {
    let s = scratch!("offsets");
    let fname = format!("--filename={}", s.file("f"));
    let args = [
        "--name=o",
        "--size=1m",
        "--bs=64k",
        "--rw=randwrite",
        "--numjobs=2",
        "--offset=1m",
        "--offset_increment=2m",
        "--verify=crc32c",
        &fname,
    ];
    let (code, j, err) = dcload_json(&s.dir, &args);
    assert_eq!(code, 0, "{err}");
    for job in j["jobs"].as_array().unwrap() {
        assert_eq!(job["write"]["io_bytes"], 1 << 20);
        assert_eq!(job["dcload"]["verify"]["blocks_checked"], 16);
    }
    let data = std::fs::read(s.path("f")).unwrap();
    assert_eq!(data.len(), 4 << 20, "the file holds the last instance's stretch");
    let zero = |r: std::ops::Range<usize>| data[r].iter().all(|&b| b == 0);
    assert!(zero(0..1 << 20) && zero(2 << 20..3 << 20), "nothing written outside the stretches");
    assert!(!zero(1 << 20..2 << 20) && !zero(3 << 20..4 << 20));

    let out = dcload_in(&s.dir, &["--name=p", "--size=1m", "--offset=10%", &fname]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("offset in percent is not supported"));
}

/// `--list-modes=json` is the list dcbench reads: every mode in it, run with
/// the options it names, is that mode, and leaves the page cache as that
/// mode does.
#[test]
fn the_list_of_modes_is_what_dcload_runs() {
    let s = scratch!("list-modes");
    let out = dcload_in(&s.dir, &["--list-modes=json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let modes = list["modes"].as_array().unwrap();
    let policies = list["policies"].as_array().unwrap();
    assert_eq!(modes.len(), 3 + policies.len(), "{list}");
    for m in modes {
        let name = m["name"].as_str().unwrap();
        let f = s.file(&format!("m-{}", name.replace(':', "-")));
        let mut args = vec![
            "--name=m".to_string(),
            format!("--filename={f}"),
            "--size=16m".into(),
            "--bs=256k".into(),
            "--rw=write".into(),
            "--ioengine=pvsync2".into(),
            "--end_fsync=1".into(),
        ];
        args.extend(m["options"].as_object().unwrap().iter().map(|(k, v)| format!("--{k}={}", v.as_str().unwrap())));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, j, err) = dcload_json(&s.dir, &args);
        assert_eq!(code, 0, "{name}: {err}");
        let job = &j["jobs"][0]["dcload"];
        assert_eq!(job["mode"], name, "{m}");
        let stat = &job["files"][0]["cachestat"];
        let cached = stat["nr_cache"].as_u64().unwrap();
        // Of 4,096 pages: buffered keeps them all (but for what the
        // kernel's reclaim took: shadow entries, counted evicted); every
        // other mode leaves at most a sixteenth (the kernel's RWF_DONTCACHE
        // drops each folio as its writeback ends, which end_fsync waits for).
        if name == "buffered" {
            let reclaimed = stat["nr_evicted"].as_u64().unwrap();
            assert_eq!(cached + reclaimed, 4096, "buffered keeps the file cached");
        } else {
            assert!(cached <= 256, "{name} leaves (almost) nothing cached: {cached} pages");
        }
        std::fs::remove_file(&f).unwrap();
    }
    let text = String::from_utf8(dcload_in(&s.dir, &["--list-modes"]).stdout).unwrap();
    for p in policies {
        assert!(text.contains(p["name"].as_str().unwrap()), "{text}");
    }
    let bad = dcload_in(&s.dir, &["--list-modes=yaml"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// The file-operation engines: each of a job's files (or directories) is
/// made, stat'ed or removed once, in order, one I/O each at bs=filesize;
/// what exists afterwards is the proof, and unlink=1 leaves nothing.
#[test]
fn file_operation_engines_make_stat_and_remove_each_file_once() {
    let s = scratch!("fileops");
    let dir = format!("--directory={}", s.dir.display());
    let run = |engine: &str, extra: &[&str]| {
        let mut args = vec!["--name=j", dir.as_str(), "--nrfiles=50", "--filesize=4k", "--bs=4k"];
        let e = format!("--ioengine={engine}");
        args.push(&e);
        args.extend(extra);
        let (code, j, err) = dcload_json(&s.dir, &args);
        assert_eq!(code, 0, "{engine}: {err}");
        let job = &j["jobs"][0];
        assert_eq!(job["read"]["total_ios"], 50, "{engine}: one I/O per file: {job}");
        assert!(job["read"]["clat_ns"]["min"].as_u64().unwrap() > 0, "{engine}: each I/O took the call's time");
        job.clone()
    };
    let name = |k: usize| s.dir.join(format!("j.0.{k}"));
    let count = |pred: fn(&std::path::Path) -> bool| (0..50).filter(|&k| pred(&name(k))).count();

    run("filecreate", &[]);
    assert_eq!(count(|p| p.is_file()), 50, "filecreate made every file");
    run("filestat", &["--stat_type=lstat"]);
    assert_eq!(count(|p| p.is_file()), 50, "filestat changed nothing");
    run("filedelete", &[]);
    assert_eq!(count(|p| p.exists()), 0, "filedelete removed every file");
    run("dircreate", &[]);
    assert_eq!(count(|p| p.is_dir()), 50, "dircreate made every directory");
    run("dirstat", &[]);
    run("dirdelete", &[]);
    assert_eq!(count(|p| p.exists()), 0, "dirdelete removed every directory");

    // filestat makes what it stats before the timed part; unlink=1 removes it after.
    run("filestat", &["--unlink=1"]);
    assert_eq!(count(|p| p.exists()), 0, "unlink=1 removes every file the job worked on");
    // A smaller size= caps the I/O: only the first files are made, as in fio.
    let (code, j, err) =
        dcload_json(&s.dir, &["--name=j", &dir, "--nrfiles=50", "--filesize=4k", "--size=40k", "--ioengine=dircreate"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(j["jobs"][0]["read"]["total_ios"], 10);
    assert_eq!(count(|p| p.is_dir()), 10, "size=40k of 4k files: the first ten");
    // An operation that fails ends the job with its errno: the directories exist.
    let (code, j, _) =
        dcload_json(&s.dir, &["--name=j", &dir, "--nrfiles=50", "--filesize=4k", "--ioengine=dircreate"]);
    assert_eq!(code, 1);
    assert_eq!(j["jobs"][0]["error"], libc::EEXIST, "{}", j["jobs"][0]);
    let (code, _, err) = dcload_json(
        &s.dir,
        &["--name=j", &dir, "--nrfiles=5", "--filesize=4k", "--ioengine=filecreate", "--verify=crc32c"],
    );
    assert_eq!(code, 2, "verify on an engine that moves no data is refused: {err}");
    assert!(err.contains("moves no data"), "{err}");
    let (code, _, err) =
        dcload_json(&s.dir, &["--name=j", &dir, "--nrfiles=5", "--filesize=4k", "--ioengine=filestat", "--offset=8k"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("drop offset"), "{err}");
}

/// ftruncate: each write truncates the file to its offset, so a sequential
/// job leaves the file at its last write's offset, and reads are refused.
#[test]
fn the_ftruncate_engine_truncates_to_each_write_offset() {
    let s = scratch!("ftruncate");
    let f = s.file("t");
    let fname = format!("--filename={f}");
    let (code, j, err) =
        dcload_json(&s.dir, &["--name=t", &fname, "--size=1m", "--bs=4k", "--rw=write", "--ioengine=ftruncate"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(j["jobs"][0]["write"]["total_ios"], 256);
    assert_eq!(std::fs::metadata(&f).unwrap().len(), (1 << 20) - 4096, "the last truncate was to 1 MiB - 4 KiB");
    let (code, _, err) = dcload_json(&s.dir, &["--name=t", &fname, "--size=1m", "--rw=read", "--ioengine=ftruncate"]);
    assert_eq!(code, 2);
    assert!(err.contains("use rw=write or randwrite"), "{err}");
}

/// posixaio keeps `iodepth` requests in flight through glibc's threads;
/// mmap copies through a shared mapping of the file. Both write data that
/// reads back verified, cold, on the same engine; buffered leaves it cached,
/// and under write-behind the library writes back and drops what they
/// dirtied (for mmap: pages dirtied by stores, not by a write call).
/// Neither has a call to put RWF_DONTCACHE on.
#[test]
fn posixaio_and_mmap_write_verified_data_buffered_and_behind() {
    let s = scratch!("posixaio-mmap");
    for (engine, depth) in [("posixaio", "--iodepth=16"), ("mmap", "--iodepth=1")] {
        let engine_opt = format!("--ioengine={engine}");
        for mode in ["buffered", "writebehind:flusher", "writebehind:lazy"] {
            let name = format!("{engine}-{}", mode.replace(':', "-"));
            let fname = format!("--filename={}", s.file(&name));
            let mode_opt = mode.strip_prefix("writebehind:").map(|p| format!("--writebehind={p}"));
            let mut args = vec!["--name=w", "--size=8m", "--bs=16k", "--rw=randwrite", "--verify=crc32c"];
            args.extend([engine_opt.as_str(), depth, fname.as_str()]);
            args.extend(mode_opt.as_deref());
            let (code, j, err) = dcload_json(&s.dir, &args);
            assert_eq!(code, 0, "{engine} {mode}: {err}");
            let job = &j["jobs"][0];
            assert_eq!(job["dcload"]["mode"], mode, "{job}");
            assert_eq!(job["dcload"]["ioengine"], engine);
            assert_eq!(job["write"]["io_bytes"], 8 << 20);
            assert_eq!(job["dcload"]["verify"]["blocks_checked"], 512, "{engine} {mode}");
            assert_eq!(std::fs::metadata(s.path(&name)).unwrap().len(), 8 << 20);
            if engine == "posixaio" {
                assert_eq!(job["write"]["slat_ns"]["N"], 512, "a queued request has a submission latency");
            }
            let cached = job["dcload"]["files"][0]["cachestat"]["nr_cache"].as_u64().unwrap();
            if mode == "buffered" {
                assert!(cached >= 2048 * 9 / 10, "{engine}: buffered leaves the file cached: {cached} pages");
            } else {
                assert_eq!(cached, 0, "{engine} {mode}: {}", job["dcload"]["files"][0]);
            }

            drop_cache_of(&s.path(&name));
            let args = ["--name=r", "--size=8m", "--bs=16k", "--rw=randread", "--verify=crc32c", &engine_opt, depth];
            let (code, j, err) = dcload_json(&s.dir, &[&args[..], &[fname.as_str()]].concat());
            assert_eq!(code, 0, "read-back {engine} {mode}: {err}");
            assert_eq!(j["jobs"][0]["read"]["io_bytes"], 8 << 20);
            assert_eq!(j["jobs"][0]["dcload"]["verify"]["blocks_checked"], 512);
        }
        let fname = format!("--filename={}", s.file("u"));
        let (code, _, err) = dcload_json(&s.dir, &["--name=u", "--size=1m", &engine_opt, "--uncached=1", &fname]);
        assert_eq!(code, 2, "{engine}: {err}");
        assert!(err.contains(&format!("{engine}'s I/O cannot carry RWF_DONTCACHE")), "{err}");
    }
}

/// falloc: each write allocates its range and extends the file, each read
/// allocates without changing the size; no data moves, so nothing is cached
/// and verify is refused.
#[test]
fn the_falloc_engine_allocates_each_range() {
    use std::os::unix::fs::MetadataExt;
    let s = scratch!("falloc");
    let f = s.file("a");
    let fname = format!("--filename={f}");
    let (code, j, err) =
        dcload_json(&s.dir, &["--name=a", &fname, "--size=1m", "--bs=64k", "--rw=write", "--ioengine=falloc"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(j["jobs"][0]["write"]["total_ios"], 16);
    let m = std::fs::metadata(&f).unwrap();
    assert_eq!(m.len(), 1 << 20);
    assert!(m.blocks() * 512 >= 1 << 20, "allocated: {} blocks", m.blocks());
    assert!(std::fs::read(&f).unwrap().iter().all(|&b| b == 0), "allocation writes no data");
    // Not preallocated (fallocate=none), four writes allocate their 256 KiB
    // and nothing more.
    std::fs::remove_file(&f).unwrap();
    let args = ["--name=a", &fname, "--size=1m", "--bs=64k", "--rw=write", "--ioengine=falloc", "--fallocate=none"];
    let (code, _, err) = dcload_json(&s.dir, &[&args[..], &["--number_ios=4"]].concat());
    assert_eq!(code, 0, "{err}");
    let allocated = std::fs::metadata(&f).unwrap().blocks() * 512;
    assert!((256 << 10..512 << 10).contains(&allocated), "the four writes' ranges: {allocated} bytes");

    // A sparse file: reads allocate its blocks and leave its size.
    let sparse = s.file("sparse");
    std::fs::File::create(&sparse).unwrap().set_len(2 << 20).unwrap();
    assert_eq!(std::fs::metadata(&sparse).unwrap().blocks(), 0);
    let fname = format!("--filename={sparse}");
    let (code, j, err) =
        dcload_json(&s.dir, &["--name=r", &fname, "--size=1m", "--bs=64k", "--rw=randread", "--ioengine=falloc"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(j["jobs"][0]["read"]["total_ios"], 16);
    let m = std::fs::metadata(&sparse).unwrap();
    assert_eq!(m.len(), 2 << 20, "KEEP_SIZE");
    assert!(m.blocks() * 512 >= 1 << 20 && m.blocks() * 512 < 2 << 20, "the first MiB allocated: {}", m.blocks());

    let (code, _, err) =
        dcload_json(&s.dir, &["--name=v", &fname, "--size=1m", "--ioengine=falloc", "--rw=write", "--verify=md5"]);
    assert_eq!(code, 2);
    assert!(err.contains("moves no data"), "{err}");
}

/// Trims (fio's `trim`, `randtrim`, `trimwrite`, `randtrimwrite`): falloc
/// punches a hole per trim, which reads back as zeroes and frees the
/// blocks; trimwrite writes each range right after trimming it, and its
/// bytes are the writes'. Engines whose trims fio sends as BLKDISCARD
/// (which files refuse) are refused before anything runs.
#[test]
fn trims_punch_holes_and_trimwrite_writes_each_trimmed_range() {
    use std::os::unix::fs::MetadataExt;
    let s = scratch!("trim");
    let f = s.file("t");
    let fname = format!("--filename={f}");
    let (code, _, err) = dcload_json(&s.dir, &["--name=w", &fname, "--size=1m", "--bs=64k", "--rw=write"]);
    assert_eq!(code, 0, "{err}");
    let full = std::fs::metadata(&f).unwrap().blocks();
    let (code, j, err) =
        dcload_json(&s.dir, &["--name=t", &fname, "--size=512k", "--bs=64k", "--rw=trim", "--ioengine=falloc"]);
    assert_eq!(code, 0, "{err}");
    let job = &j["jobs"][0];
    assert_eq!(job["trim"]["total_ios"], 8, "{job}");
    assert_eq!(job["trim"]["io_bytes"], 512 << 10);
    assert_eq!(job["write"]["total_ios"], 0);
    let m = std::fs::metadata(&f).unwrap();
    assert_eq!(m.len(), 1 << 20, "a punched hole keeps the size");
    assert!(m.blocks() * 512 <= full * 512 - (512 << 10), "half the blocks freed: {} of {full}", m.blocks());
    let data = std::fs::read(&f).unwrap();
    assert!(data[..512 << 10].iter().all(|&b| b == 0), "trimmed ranges read as zeroes");
    assert!(data[512 << 10..].iter().any(|&b| b != 0), "the rest is untouched");

    let (code, j, err) = dcload_json(
        &s.dir,
        &["--name=tw", "--size=1m", "--bs=4k", "--rw=randtrimwrite", "--ioengine=null", "--write_iolog=tw.log"],
    );
    assert_eq!(code, 0, "{err}");
    let job = &j["jobs"][0];
    assert_eq!((job["trim"]["total_ios"].as_u64(), job["write"]["total_ios"].as_u64()), (Some(256), Some(256)));
    assert_eq!(job["write"]["io_bytes"], 1 << 20, "the job's bytes are its writes'");
    let log = std::fs::read_to_string(s.path("tw.log")).unwrap();
    let ios: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect::<Vec<_>>()).filter(|f| f.len() == 5).collect();
    assert_eq!(ios.len(), 512);
    for pair in ios.chunks(2) {
        assert_eq!((pair[0][2], pair[1][2]), ("trim", "write"), "{pair:?}");
        assert_eq!(pair[0][3..], pair[1][3..], "the write goes where the trim went: {pair:?}");
    }

    for engine in ["psync", "io_uring", "libaio"] {
        let (code, _, err) =
            dcload_json(&s.dir, &["--name=x", &fname, "--size=1m", "--rw=randtrim", &format!("--ioengine={engine}")]);
        assert_eq!(code, 2, "{engine}: {err}");
        assert!(err.contains("trims run on ioengine=falloc"), "{err}");
    }
}

/// The io_uring ring dcload's job `pid` runs, as the kernel describes it in
/// the ring's fdinfo (`SqThreadCpu:`, `UserFiles:`, `UserBufs:`); waits up to
/// 5 s for the job to have set it up. The kernel leaves the ring's part out
/// while the ring's lock is held (the job is submitting), so it reads again.
fn ring_fdinfo(pid: u32) -> String {
    for _ in 0..100 {
        for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == "anon_inode:[io_uring]") {
                let info = format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy());
                let info = std::fs::read_to_string(info).unwrap();
                if info.contains("UserBufs:") {
                    return info;
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no io_uring ring described in process {pid} after 5 s");
}

/// The value of fdinfo line `key:`.
fn fdinfo_value<'a>(info: &'a str, key: &str) -> &'a str {
    let line = info.lines().find(|l| l.starts_with(&format!("{key}:"))).unwrap_or_else(|| panic!("no {key} in {info}"));
    line.split_once(':').unwrap().1.trim()
}

#[test]
fn io_urings_ring_options_set_the_ring_up_as_fio_does_and_keep_the_data_intact() {
    let s = scratch!("ring-options");
    let fname = format!("--filename={}", s.file("ring"));
    let poll = ["--sqthread_poll=1", "--sqthread_poll_cpu=1", "--fixedbufs=1"];
    for (mode, extra) in [("buffered", &[][..]), ("direct", &["--direct=1"][..])] {
        let mut args =
            vec!["--name=w", "--size=8m", "--bs=16k", "--rw=randwrite", "--verify=crc32c", "--ioengine=io_uring"];
        args.extend(["--iodepth=8", &fname]);
        args.extend(poll);
        args.extend(extra);
        let (code, j, err) = dcload_json(&s.dir, &args);
        assert_eq!(code, 0, "{mode}: {err}");
        assert_eq!(
            j["jobs"][0]["dcload"]["verify"]["blocks_checked"], 512,
            "{mode}: every block read back and checked"
        );
    }
    // What the kernel says of the ring, with the options and without: a poll
    // thread on CPU 1, the file and the 8 slots' buffers registered.
    for (options, thread_cpu, files, bufs) in [(&poll[..], "1", "1", "8"), (&[][..], "-1", "0", "0")] {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dcload"));
        cmd.args(["--name=r", "--size=8m", "--bs=4k", "--rw=randread", "--ioengine=io_uring", "--iodepth=8"]);
        cmd.args(["--time_based", "--runtime=3", &fname]).args(options).current_dir(&s.dir);
        let mut child = cmd.stdout(std::process::Stdio::null()).spawn().unwrap();
        let info = ring_fdinfo(child.id());
        assert!(child.wait().unwrap().success());
        assert_eq!(fdinfo_value(&info, "SqThreadCpu"), thread_cpu, "{options:?}: {info}");
        assert_eq!(fdinfo_value(&info, "UserFiles"), files, "{options:?}: {info}");
        assert_eq!(fdinfo_value(&info, "UserBufs"), bufs, "{options:?}: {info}");
    }
    // A poll thread's CPU without the poll thread is said to do nothing.
    let out = dcload_in(&s.dir, &["--name=x", "--size=1m", "--ioengine=io_uring", "--sqthread_poll_cpu=1", &fname]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("sqthread_poll_cpu does nothing without sqthread_poll=1"), "{err}");
    // fio's engine options of another engine are refused, naming the engine.
    let out = dcload_in(&s.dir, &["--name=x", "--size=1m", "--ioengine=libaio", "--fixedbufs", &fname]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("(this job's engine is libaio)"), "{err}");
}
