//! The dontcache command on real programs and real filesystems: cp, dd and
//! tar under `dontcache run` give byte-identical, uncached output; `dontcache
//! cp` fails loudly and leaves no half-written file on a full filesystem.

mod common;
use common::*;

use std::process::Command;

fn source(s: &Scratch) -> std::path::PathBuf {
    let src = s.path("src");
    std::fs::write(&src, pattern(30, 0, (96 * MIB) as usize)).unwrap();
    drop_cache_of(&src);
    src
}

#[test]
fn real_programs_under_run_write_identical_uncached_files() {
    let s = scratch!("cli-run");
    let src = source(&s);
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("cp", vec!["cp".into(), p(&src).into(), p(&s.path("by-cp")).into()]),
        (
            "dd",
            vec![
                "dd".into(),
                format!("if={}", p(&src)),
                format!("of={}", p(&s.path("by-dd"))),
                "bs=1M".into(),
                "status=none".into(),
            ],
        ),
    ];
    for policy in ["flusher", "lazy", "inline", "per-file", "kernel"] {
        for (tool, argv) in &cases {
            let out_path = s.path(&format!("by-{tool}"));
            let mut args = vec!["run", "--policy", policy, "--"];
            args.extend(argv.iter().map(|a| a.as_str()));
            let out = dontcache(&args);
            assert!(out.status.success(), "{policy} {tool}: {}", String::from_utf8_lossy(&out.stderr));
            let cached = cached_pages(&out_path);
            assert!(cached <= 1, "{policy} {tool}: {cached} pages of the output still cached");
            assert_pattern(&out_path, 30, 96 * MIB);
            std::fs::remove_file(&out_path).unwrap();
        }
    }
    // tar: an archive out, then extracted again under run.
    let tar = s.path("a.tar");
    let out = dontcache(&["run", "--", "tar", "-C", p(&s.dir), "-cf", p(&tar), "src"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let left = cached_pages(&tar);
    assert!(left <= 1, "the archive is not left cached: {left} pages");
    let x = s.path("x");
    std::fs::create_dir_all(&x).unwrap();
    let out = dontcache(&["run", "--", "tar", "-C", p(&x), "-xf", p(&tar)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let left = cached_pages(&x.join("src"));
    assert!(left <= 1, "the extracted file is not left cached: {left} pages");
    assert_pattern(&x.join("src"), 30, 96 * MIB);
    // The control: plain cp leaves its output cached, so the checks above can fail.
    let plain = s.path("plain");
    assert!(Command::new("cp").arg(&src).arg(&plain).status().unwrap().success());
    assert!(cached_pages(&plain) > 20_000, "plain cp leaves the copy cached");
}

#[test]
fn dontcache_cp_copies_and_counts() {
    let s = scratch!("cli-cp");
    let src = source(&s);
    let dir = s.path("d");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dontcache(&["cp", "--stats", p(&src), p(&dir)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("{} bytes", 96 * MIB)), "{stdout}");
    assert!(cached_pages(&dir.join("src")) <= 1);
    assert!(cached_pages(&src) <= 1, "the source is read drop-behind");
    assert_pattern(&dir.join("src"), 30, 96 * MIB);
}

#[test]
fn bad_input_gets_one_clear_line() {
    let out = dontcache(&["cp", "--policy", "fast", "a", "b"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid value 'fast'") && err.contains("flusher, lazy, inline, per-file, kernel"),
        "the policies are named: {err}"
    );
    let out = dontcache(&["cp", "/nonexistent/a", "/tmp"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/a") && err.contains("No such file"), "{err}");
    let out = dontcache(&["run", "--", "/nonexistent/prog"]);
    assert_eq!(out.status.code(), Some(125), "dontcache itself could not start the command");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run /nonexistent/prog"));
}

/// A shim path the dynamic loader would not load (missing, a directory, a
/// colon or space in it) is refused before the command runs: the loader
/// itself only warns and runs the command without the shim. An empty
/// `DONTCACHE_PRELOAD` is unset; a relative one is made absolute, for
/// processes that change directory first.
#[test]
fn run_refuses_a_shim_the_loader_would_not_load() {
    let s = scratch!("cli-preload");
    let marker = s.path("ran");
    let shim = std::path::Path::new(env!("CARGO_BIN_EXE_dontcache")).with_file_name("libdontcache_preload.so");
    let odd = s.path("a b:c.so");
    std::fs::copy(&shim, &odd).unwrap();
    let touch = format!("touch '{}'", p(&marker));
    let with = |preload: &str, cwd: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_dontcache"))
            .args(["run", "--", "sh", "-c", &touch])
            .env("DONTCACHE_PRELOAD", preload)
            .current_dir(cwd)
            .output()
            .unwrap()
    };
    for (preload, says) in
        [("/nonexistent/shim.so", "is not a file"), ("/tmp", "is not a file"), (p(&odd), "colon or a space")]
    {
        let out = with(preload, &s.dir);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{preload}: {err}");
        assert!(err.contains(says) && err.contains("DONTCACHE_PRELOAD"), "{preload}: {err}");
        assert!(!marker.exists(), "{preload}: the command ran");
    }
    let (dir, name) = (shim.parent().unwrap(), shim.file_name().unwrap().to_str().unwrap());
    for preload in ["", name] {
        let out = Command::new(env!("CARGO_BIN_EXE_dontcache"))
            .args(["run", "--", "sh", "-c", "cd / && printenv LD_PRELOAD && cat /proc/self/maps"])
            .env("DONTCACHE_PRELOAD", preload)
            .current_dir(dir)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{preload:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(
            said.starts_with('/') && said.contains(p(&shim)),
            "{preload:?}: the shim is loaded by its whole path: {said}"
        );
    }
}

#[test]
fn cp_onto_a_full_filesystem_fails_and_leaves_nothing() {
    let s = scratch!("cli-cpfull");
    let src = source(&s);
    let fs = LoopFs::ext4(&s.dir, 32);
    let dst = fs.mnt.join("copy");
    let out = dontcache(&["cp", p(&src), p(&dst)]);
    assert_eq!(out.status.code(), Some(1), "a 96 MiB copy into 32 MiB must fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("No space left on device"), "{err}");
    let left: Vec<_> =
        std::fs::read_dir(&fs.mnt).unwrap().map(|e| e.unwrap().file_name()).filter(|n| n != "lost+found").collect();
    assert!(left.is_empty(), "no half-written copy may remain: {left:?}");
}

#[test]
fn cp_reports_writeback_errors_from_the_device() {
    let s = scratch!("cli-cpeio");
    let src = source(&s);
    // 128 MiB of ext4 whose backing tmpfs holds only 48 MiB: writeback fails.
    let fs = LoopFs::ext4_on_small_tmpfs(&s.dir, 128, 48);
    let dst = fs.mnt.join("copy");
    let out = dontcache(&["cp", p(&src), p(&dst)]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout {} stderr {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Input/output error") || err.contains("No space left on device"), "{err}");
    assert!(!dst.exists(), "the failed copy is not renamed into place");
}
