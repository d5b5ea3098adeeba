//! Resolution semantics: inheritance, precedence, defaults, errors with
//! locations, and the seed benchmark suites' job files.

use dc_jobfile::*;
use std::path::Path;

use dc_testsupport::{seed_job_files, skip};
use std::time::Duration;

fn args(list: &[&str]) -> Vec<RawOption> {
    list.iter().enumerate().map(|(i, a)| cmdline_option(a, i + 1).unwrap()).collect()
}

fn resolve_text(text: &str, cmd: &[&str]) -> Result<JobSet, SpecError> {
    resolve(&[JobFile { path: Path::new("job.fio"), text, include: None }], &args(cmd), false)
}

#[test]
fn global_is_inherited_and_job_section_wins() {
    let set = resolve_text("[global]\nbs=64k\nsize=1m\nrw=write\n[a]\n[b]\nsize=3m\n", &[]).unwrap();
    let (a, b) = (&set.jobs[0], &set.jobs[1]);
    assert_eq!((a.name.as_str(), a.bs, a.size), ("a", 65536, Some(1 << 20)));
    assert_eq!((b.name.as_str(), b.bs, b.size), ("b", 65536, Some(3 << 20)));
    assert_eq!(a.rw, RwPattern { direction: Direction::Write, random: false });
}

#[test]
fn a_later_global_applies_only_to_later_jobs() {
    let set = resolve_text("[global]\nbs=8k\n[a]\n[global]\nbs=16k\n[b]\n", &[]).unwrap();
    assert_eq!(set.jobs[0].bs, 8192);
    assert_eq!(set.jobs[1].bs, 16384);
}

#[test]
fn command_line_overrides_the_file() {
    // The seed scripts run `fio seq-write.fio --direct=1` against a file whose [global] says direct=0.
    let set = resolve_text(
        "[global]\ndirect=0\nsize=1m\n[seqwrite]\nrw=write\n",
        &["--direct=1", "--size=4g", "--filename=/mnt/t/f"],
    )
    .unwrap();
    let j = &set.jobs[0];
    assert!(j.direct);
    assert_eq!(j.size, Some(4 << 30));
    assert_eq!(j.filename.as_deref(), Some("/mnt/t/f"));
    let shown: Vec<_> = j.options.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(shown, ["rw", "direct", "size", "filename"]);
}

#[test]
fn command_line_jobs_take_globals_before_them() {
    let set = resolve(
        &[],
        &args(&["--bs=1M", "--name=w", "--rw=write", "--size=8m", "--name=r", "--rw=randread", "--size=1g", "--bs=4k"]),
        false,
    )
    .unwrap();
    assert_eq!(set.jobs.len(), 2);
    assert_eq!((set.jobs[0].name.as_str(), set.jobs[0].bs), ("w", 1 << 20));
    assert_eq!((set.jobs[1].name.as_str(), set.jobs[1].bs), ("r", 4096));
    assert!(set.jobs[1].rw.random);
}

#[test]
fn defaults_are_fios() {
    let j = &resolve(&[], &args(&["--name=x"]), false).unwrap().jobs[0];
    assert_eq!(j.bs, 4096);
    assert_eq!(j.rw.direction, Direction::Read);
    assert_eq!(j.ioengine, EngineKind::Psync);
    assert_eq!((j.numjobs, j.iodepth, j.loops), (1, 1, 1));
    assert!(j.invalidate && j.randrepeat && !j.direct && !j.uncached);
    assert_eq!(j.filename_format, "$jobname.$jobnum.$filenum");
}

#[test]
fn values_are_interpreted() {
    let set = resolve_text(
        "[j]\nrw=randrw\nrwmixwrite=30\nruntime=2m\ntime_based\nramp_time=500ms\nwrite_bw_log\nverify=crc32c\nkb_base=1000\nsize=1MiB\nio_limit=2k\nblocksize=8k\n",
        &[],
    )
    .unwrap();
    let j = &set.jobs[0];
    assert_eq!(j.rwmixread, 70);
    assert_eq!(j.runtime, Some(Duration::from_secs(120)));
    assert!(j.time_based);
    assert_eq!(j.ramp_time, Duration::from_millis(500));
    assert_eq!(j.bw_log.as_deref(), Some("j"), "a bare write_bw_log uses the job name");
    assert_eq!(j.verify.as_deref(), Some("crc32c"));
    assert_eq!(j.size, Some(1 << 20), "kb_base=1000 makes MiB binary");
    assert_eq!(j.io_size, Some(2000));
    assert_eq!(j.bs, 8000);
}

#[test]
fn errors_name_the_line_and_the_fix() {
    let e = resolve_text("[global]\nbs=4k\n[j]\nrw=sideways\n", &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "job.fio line 4: rw=sideways: not one of: read, write, randread, randwrite, rw, readwrite, randrw, trim, \
         randtrim, trimwrite, randtrimwrite"
    );
    let e = resolve_text("[j]\nsize=12q\n", &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "job.fio line 2: size=12q: '12q': unknown size unit 'q' (use k, m, g, t, p, optionally with B or iB)"
    );
    let e = resolve_text("[j]\nioengine=pysnc\n", &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "job.fio line 2: ioengine=pysnc: not one of: psync, pvsync2, io_uring, libaio, posixaio, sync, vsync, pvsync, \
         null, nfs, filecreate, filestat, filedelete, dircreate, dirstat, dirdelete, ftruncate, falloc, mmap, page_fault, cpuio, \
         e4defrag, exec"
    );
    let e = resolve_text("[j]\nbs\n", &[]).unwrap_err();
    assert_eq!(e.to_string(), "job.fio line 2: option 'bs' needs a value (bs=...)");
    let e = resolve_text("[j]\nnumjobs=0\n", &[]).unwrap_err();
    assert_eq!(e.to_string(), "job.fio line 2: numjobs=0: must be greater than zero");
    let e = resolve_text("[j]\nioengine=psync\nuncached=1\n", &[]).unwrap_err();
    assert!(e.to_string().contains("uncached=1 needs ioengine=pvsync2, io_uring or libaio"), "{e}");
    let e = resolve(&[], &args(&["--name=x", "--bogus=1"]), false).unwrap_err();
    assert!(e.to_string().starts_with("command-line argument 2: unknown option 'bogus'"), "{e}");
    let e = resolve(&[], &[], false).unwrap_err();
    assert!(e.to_string().starts_with("no jobs given"), "{e}");
}

/// fio takes time_based without a runtime with a warning and runs the job
/// until its size is done; so does dcload.
#[test]
fn time_based_without_runtime_is_dropped_with_a_warning_as_fio_does() {
    let set = resolve_text("[j]\ntime_based\nsize=1m\n", &[]).unwrap();
    assert!(!set.jobs[0].time_based);
    assert!(
        set.warnings.iter().any(|w| w.contains("job 'j': time_based needs runtime=") && w.contains("until its size")),
        "{:?}",
        set.warnings
    );
    let set = resolve_text("[j]\ntime_based\nsize=1m\n", &["--runtime=1"]).unwrap();
    assert!(set.jobs[0].time_based && set.warnings.is_empty(), "{:?}", set.warnings);
}

#[test]
fn ignore_unknown_records_a_warning() {
    let set =
        resolve(&[JobFile { path: Path::new("x.fio"), text: "[j]\noverwrite=1\nsize=1m\n", include: None }], &[], true)
            .unwrap();
    assert_eq!(set.jobs[0].size, Some(1 << 20));
    assert_eq!(set.warnings.len(), 1);
    assert!(set.warnings[0].starts_with("x.fio line 2: fio option 'overwrite' is not supported"), "{:?}", set.warnings);
}

#[test]
fn iodepth_on_a_sync_engine_is_a_warning_not_silence() {
    let set = resolve_text("[j]\nioengine=psync\niodepth=16\n", &[]).unwrap();
    assert_eq!(set.jobs[0].iodepth, 1);
    assert!(set.warnings[0].contains("iodepth=16 has no effect with ioengine=psync"), "{:?}", set.warnings);
}

#[test]
fn every_seed_job_file_resolves() {
    let Some(files) = seed_job_files() else {
        return skip("every_seed_job_file_resolves", "../shared/reference is absent");
    };
    let dontcache: Vec<_> = files.iter().filter(|(p, _)| p.contains("dontcache-bench")).collect();
    assert_eq!(
        dontcache.len(),
        8,
        "dontcache-bench has eight job files: {:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    // nfsd-io-bench's: fio's nfs engine, as its run script runs them.
    let nfsd: Vec<_> = files.iter().filter(|(p, _)| p.contains("nfsd-io-bench")).collect();
    assert_eq!(nfsd.len(), 7, "nfsd-io-bench has seven job files");
    for (path, text) in nfsd {
        let set = resolve(
            &[JobFile { path: Path::new(path), text, include: None }],
            &args(&["--filename=bench/file", "--size=16m"]),
            false,
        )
        .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(set.warnings.is_empty(), "{path}: {:?}", set.warnings);
        let j = &set.jobs[0];
        assert_eq!((j.ioengine, j.numjobs), (EngineKind::Nfs, 16), "{path}");
        assert_eq!(j.nfs_url.as_deref(), Some("nfs://localhost/export"), "{path}");
    }
    for (path, text) in dontcache.iter().copied() {
        // As run-benchmarks.sh runs them: a filename, a size and the mode on the command line.
        let set = resolve(
            &[JobFile { path: Path::new(path), text, include: None }],
            &args(&["--filename=/tmp/x", "--size=16m", "--direct=0", "--uncached=1"]),
            false,
        )
        .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(set.jobs.len(), 1, "{path}");
        assert!(set.warnings.is_empty(), "{path}: {:?}", set.warnings);
        let j = &set.jobs[0];
        assert_eq!(j.ioengine, EngineKind::IoUring, "{path}");
        assert!(j.uncached && !j.direct);
    }
    let axboe = files.iter().find(|(p, _)| p.ends_with("dontcache-bench/fio-jobs/axboe-write.fio")).unwrap();
    let j =
        &resolve(&[JobFile { path: Path::new(&axboe.0), text: &axboe.1, include: None }], &[], false).unwrap().jobs[0];
    assert_eq!((j.numjobs, j.bs, j.log_avg_msec), (32, 65536, 1000));
    assert!(j.time_based && j.runtime == Some(Duration::from_secs(300)));
    assert_eq!(j.filename_format, "$jobname.$jobnum");
    assert_eq!(j.bw_log.as_deref(), Some("axboe-write"));
}

#[test]
fn a_job_on_an_engine_dcload_does_not_run_is_refused_for_the_engine_first() {
    // The engine's own option comes before it, and is unknown here.
    let e = resolve_text("[global]\ncmd_type=nvme\nioengine=io_uring_cmd\n[a]\nrw=randread\n", &[]).unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("job.fio line 3: job 'a': ioengine=io_uring_cmd: fio's engine for NVMe"), "{text}");
    assert!(text.contains("run this job with fio"), "{text}");
    // An engine dcload could run but does not yet says what to do instead.
    let e = resolve_text("[a]\nioengine=splice\n", &[]).unwrap_err().to_string();
    assert!(e.contains("does not run yet") && e.contains("--ioengine="), "{e}");
    // Command-line jobs too.
    let e = resolve_text("", &["--name=x", "--ioengine=rdma", "--verb=read"]).unwrap_err().to_string();
    assert!(e.starts_with("command-line argument 2: job 'x': ioengine=rdma"), "{e}");
}

#[test]
fn the_command_line_engine_runs_a_file_written_for_another() {
    let file = "[global]\nioengine=splice\niodepth=8\n[a]\nrw=randread\nsize=1m\n";
    let set = resolve_text(file, &["--ioengine=io_uring"]).unwrap();
    assert_eq!(set.jobs[0].ioengine, EngineKind::IoUring);
    // A job section's own engine beats the [global] before it.
    let set = resolve_text("[global]\nioengine=null\n[a]\nioengine=libaio\nsize=1m\n", &[]).unwrap();
    assert_eq!(set.jobs[0].ioengine, EngineKind::Libaio);
    // A bad name is still an error where it is the engine the job runs with.
    let e = resolve_text("[a]\nioengine=pysnc\n", &[]).unwrap_err().to_string();
    assert!(e.contains("ioengine=pysnc: not one of"), "{e}");
}

#[test]
fn filesize_of_one_file_is_its_size() {
    let set = resolve_text("[a]\nfilesize=1m\nrw=randread\n", &[]).unwrap();
    assert_eq!((set.jobs[0].size, set.jobs[0].io_size, set.jobs[0].nrfiles), (Some(1 << 20), None, 1));
    // size= beside it is the I/O done over the file.
    let set = resolve_text("[a]\nfilesize=1m\nsize=3m\nrw=read\n", &[]).unwrap();
    assert_eq!((set.jobs[0].size, set.jobs[0].io_size), (Some(1 << 20), Some(3 << 20)));
    // Several files are still new files written once each.
    let e = resolve_text("[a]\nfilesize=1m\nnrfiles=4\nrw=read\n", &[]).unwrap_err().to_string();
    assert!(e.contains("it needs rw=write"), "{e}");
}

/// fio's keywords and arithmetic, in a job file as on the command line.
#[test]
fn keywords_and_arithmetic_are_computed_as_fio_does() {
    // SAFETY: sysconf has no memory preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let set =
        resolve_text("[a]\nbs=$pagesize*2 ; two pages\nsize=(1m+3*$pagesize)\nnumjobs=$ncpus/$ncpus\n", &[]).unwrap();
    let j = &set.jobs[0];
    assert_eq!((j.bs, j.size, j.numjobs), (2 * page, Some((1 << 20) + 3 * page), 1));
    let set = resolve_text("[a]\nsize=1m\n", &["--runtime=(1+2)", "--thinktime=(1ms+5)"]).unwrap();
    let j = &set.jobs[0];
    assert_eq!(j.runtime, Some(std::time::Duration::from_secs(3)), "bare numbers in the option's own unit");
    assert_eq!(j.thinktime, std::time::Duration::from_micros(1005));
    let e = resolve_text("[a]\nsize=$mb_memory/0\n", &[]).unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("division by zero"), "{e}");
}

#[test]
fn the_nfs_engine_needs_its_url_and_the_url_needs_the_engine() {
    let e = resolve_text("[a]\nioengine=nfs\nsize=1m\n", &[]).unwrap_err().to_string();
    assert!(e.contains("ioengine=nfs needs nfs_url=nfs://SERVER/EXPORT"), "{e}");
    let e = resolve_text("[a]\nnfs_url=nfs://h/e\nsize=1m\n", &[]).unwrap_err().to_string();
    assert!(e.contains("nfs_url= is ioengine=nfs's option; this job's engine is psync"), "{e}");
    let e = resolve_text("[a]\nioengine=nfs\nnfs_url=h:/e\n", &[]).unwrap_err().to_string();
    assert!(e.contains("is not an NFS URL"), "{e}");
    let e = resolve_text("[a]\nioengine=nfs\nnfs_url=nfs://h/e\nwritebehind=flusher\n", &[]).unwrap_err().to_string();
    assert!(e.contains("the NFS server's io mode decides"), "{e}");
    // As fio: direct= is taken and does nothing on this engine, said aloud.
    let set = resolve_text("[a]\nioengine=nfs\nnfs_url=nfs://h/e\ndirect=1\niodepth=8\n", &[]).unwrap();
    assert!(!set.jobs[0].direct && set.jobs[0].iodepth == 8);
    assert!(set.warnings[0].contains("direct=1 has no effect with ioengine=nfs"), "{:?}", set.warnings);
}

/// Per-direction block sizes, priorities and CPUs, as fio reads them.
#[test]
fn per_direction_sizes_priorities_and_cpus() {
    let set = resolve_text("[a]\nrw=randrw\nbs=4k,16k\nbsrange=,1k-8k\n", &[]).unwrap();
    let j = &set.jobs[0];
    assert_eq!(j.bs, 8192, "the largest size (the write range's top) is the buffers'");
    assert_eq!(j.block_sizes.of_direction(0, j.bs), (4096, &BlockSizes::Fixed));
    assert_eq!(j.block_sizes.of_direction(1, j.bs).1, &BlockSizes::Range { min: 1024, max: 8192 });
    let set = resolve_text("[a]\nbs=8k,8k,8k\n", &[]).unwrap();
    assert_eq!((set.jobs[0].bs, &set.jobs[0].block_sizes), (8192, &BlockSizes::Fixed), "the same everywhere");

    let set = resolve_text("[a]\nprioclass=3\nprio=5\n", &[]).unwrap();
    assert_eq!(set.jobs[0].ioprio, Some((3 << 13) | 5));
    let set = resolve_text("[a]\nioengine=libaio\ncmdprio_percentage=30\n", &[]).unwrap();
    let c = set.jobs[0].cmdprio.as_ref().unwrap();
    assert_eq!((c.pick(0, 4096, 29), c.pick(0, 4096, 30)), (Some(1 << 13), None), "realtime unless a class is given");
    let e = resolve_text("[a]\ncmdprio_percentage=30\n", &[]).unwrap_err().to_string();
    assert!(e.contains("cmdprio options are fio's io_uring and libaio engines' (this job's engine is psync)"), "{e}");
    let e = resolve_text("[a]\nprioclass=4\n", &[]).unwrap_err().to_string();
    assert!(e.contains("prioclass is 0 to 3"), "{e}");

    let set = resolve_text("[a]\ncpus_allowed=0\ncpus_allowed_policy=split\nnice=7\n", &[]).unwrap();
    assert_eq!(
        (set.jobs[0].cpus.as_deref(), set.jobs[0].cpus_split, set.jobs[0].nice),
        (Some(&[0][..]), true, Some(7))
    );
    let e = resolve_text("[a]\ncpus_allowed=0-4095\n", &[]).unwrap_err().to_string();
    assert!(e.contains("CPU 4095 does not exist here"), "{e}");
    let e = resolve_text("[a]\nnice=20\n", &[]).unwrap_err().to_string();
    assert!(e.contains("-20 to 19"), "{e}");
}

#[test]
fn continue_on_error_and_the_errnos_it_lets_pass() {
    let set = resolve_text("[a]\ncontinue_on_error=io\nignore_error=,ENOSPC:5\n", &[]).unwrap();
    let j = &set.jobs[0];
    assert!(j.lets_pass(1, libc::ENOSPC) && j.lets_pass(1, libc::EIO), "the write list given");
    assert!(j.lets_pass(0, libc::EIO) && !j.lets_pass(0, libc::ENOSPC), "the read list is fio's default");
    assert!(!j.lets_pass(2, libc::EILSEQ), "verify errors are not among io's");
    let e = resolve_text("[a]\nignore_error=EWHAT\n", &[]).unwrap_err().to_string();
    assert!(e.contains("'EWHAT' is not an errno name"), "{e}");
}

#[test]
fn steadystate_reads_fio_s_options_and_aliases() {
    let set = resolve_text("[a]\nss=iops:10%\nss_dur=30s\nss_ramp=10s\n", &[]).unwrap();
    let ss = set.jobs[0].steady.as_ref().unwrap();
    assert_eq!((ss.measure, ss.slope, ss.limit, ss.percent), (SteadyMeasure::Iops, false, 10.0, true));
    assert_eq!(
        (ss.duration, ss.ramp, ss.interval),
        (Duration::from_secs(30), Duration::from_secs(10), Duration::from_secs(1))
    );
    assert_eq!((ss.samples(), ss.name().as_str()), (30, "iops:10.000000%"));
    let set = resolve_text("[a]\nsteadystate=bw_slope:1%\n", &[]).unwrap();
    assert!(set.jobs[0].steady.is_none(), "no window: no check, as fio");
    assert!(set.warnings.iter().any(|w| w.contains("does nothing without steadystate_duration")), "{:?}", set.warnings);
    let e = resolve_text("[a]\nss=iops\nss_dur=5\n", &[]).unwrap_err().to_string();
    assert!(e.contains("CRITERION:LIMIT"), "{e}");
}

#[test]
fn the_header_seed_is_checked_for_jobs_that_read_and_write() {
    let own = |extra: &str| {
        let text = format!("[j]\nsize=1m\nverify=crc32c\n{extra}\n");
        resolve_text(&text, &[]).unwrap().jobs[0].checks_own_seed()
    };
    assert!(own("rw=randrw"), "a mixed job finds another writer's pieces, as fio 3.33");
    assert!(!own("rw=randwrite"), "a job that only writes takes any writer's pieces");
    assert!(!own("rw=randread"), "a read has no pieces of its own");
    assert!(!own("rw=randrw\nverify_backlog=16"), "fio does not check the seed with a backlog");
    assert!(own("rw=randwrite\nverify_header_seed=1"), "given, the option decides");
    assert!(!own("rw=randrw\nverify_header_seed=0"));
}
