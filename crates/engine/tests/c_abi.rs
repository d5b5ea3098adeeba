//! The C ABI as a C program sees it: examples/copy.c compiled against
//! include/dontcache.h and linked with the built libdontcache.so.

mod common;
use common::*;

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// target/release (or debug), where cargo put libdontcache.so.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

#[test]
fn the_c_example_copies_byte_exact_and_uncached() {
    let s = Scratch::new("cabi");
    let lib = lib_dir();
    assert!(
        lib.join("libdontcache.so").exists(),
        "{} has no libdontcache.so: build the workspace first (make test does)",
        lib.display()
    );
    let exe = s.path("copy");
    let cc = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-o"])
        .arg(&exe)
        .arg(repo().join("examples/copy.c"))
        .arg(format!("-I{}", repo().join("include").display()))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-ldontcache")
        .output()
        .unwrap();
    assert!(cc.status.success(), "cc failed: {}", String::from_utf8_lossy(&cc.stderr));

    let src = s.path("src");
    std::fs::write(&src, pattern(20, 0, 40 << 20)).unwrap();
    drop_cache_of(&src);
    for policy in ["flusher", "lazy", "inline", "per-file", "kernel"] {
        let dst = s.path(&format!("dst-{policy}"));
        let out = Command::new(&exe).arg(&src).arg(&dst).env("DONTCACHE_POLICY", policy).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{policy}: {}{}", stdout, String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(&format!("policy={policy} written={}", 40 << 20)), "{stdout}");
        assert_pattern(&dst, 20, 40 << 20);
        assert!(cached_pages(&src) <= 1, "{policy}: the source was read drop-behind");
        drop_cache_of(&dst);
    }
    // A bad policy in the environment is refused, by name.
    let out = Command::new(&exe).arg(&src).arg(s.path("x")).env("DONTCACHE_POLICY", "fast").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad DONTCACHE_* variable"));
}

/// The header is the truth: a C program compiled against it prints every
/// field's offset and each struct's size, and the Rust types must agree.
#[test]
fn struct_layouts_match_the_header() {
    let s = Scratch::new("layout");
    let stats = [
        "bytes_written",
        "bytes_read",
        "kicks",
        "coalesced_kicks",
        "passes",
        "bytes_written_back",
        "bytes_dropped",
        "dirty_now",
        "highwater_stalls",
        "errors",
        "kernel_fallback",
        "late_errors",
    ];
    let opts = ["policy", "high_water", "submit"];
    let mut c = String::from("#include <stdio.h>\n#include <stddef.h>\n#include \"dontcache.h\"\nint main(void) {\n");
    for f in stats {
        c += &format!("printf(\"dc_stats.{f} %zu\\n\", offsetof(struct dc_stats, {f}));\n");
    }
    for f in opts {
        c += &format!("printf(\"dc_opts.{f} %zu\\n\", offsetof(struct dc_opts, {f}));\n");
    }
    c += "printf(\"sizeof dc_stats %zu\\nsizeof dc_opts %zu\\n\", sizeof(struct dc_stats), sizeof(struct dc_opts));\nreturn 0; }\n";
    let src = s.path("layout.c");
    std::fs::write(&src, c).unwrap();
    let exe = s.path("layout");
    let cc = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(format!("-I{}", repo().join("include").display()))
        .output()
        .unwrap();
    assert!(cc.status.success(), "cc failed: {}", String::from_utf8_lossy(&cc.stderr));
    let out = String::from_utf8(Command::new(&exe).output().unwrap().stdout).unwrap();
    use dontcache::{ffi::DcOpts, Stats};
    use std::mem::{offset_of, size_of};
    let rust = [
        offset_of!(Stats, bytes_written),
        offset_of!(Stats, bytes_read),
        offset_of!(Stats, kicks),
        offset_of!(Stats, coalesced_kicks),
        offset_of!(Stats, passes),
        offset_of!(Stats, bytes_written_back),
        offset_of!(Stats, bytes_dropped),
        offset_of!(Stats, dirty_now),
        offset_of!(Stats, highwater_stalls),
        offset_of!(Stats, errors),
        offset_of!(Stats, kernel_fallback),
        offset_of!(Stats, late_errors),
        offset_of!(DcOpts, policy),
        offset_of!(DcOpts, high_water),
        offset_of!(DcOpts, submit),
        size_of::<Stats>(),
        size_of::<DcOpts>(),
    ];
    let c: Vec<usize> = out.lines().map(|l| l.rsplit(' ').next().unwrap().parse().unwrap()).collect();
    let names: Vec<&str> = out.lines().collect();
    assert_eq!(c.len(), rust.len(), "{out}");
    for ((name, c), r) in names.iter().zip(&c).zip(rust) {
        assert_eq!(*c, r, "{name}: the header says {c}, Rust has {r}");
    }
}
