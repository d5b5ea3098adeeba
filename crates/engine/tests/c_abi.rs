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

#[test]
fn struct_layouts_match_the_header() {
    assert_eq!(std::mem::size_of::<dontcache::Stats>(), 11 * 8);
    assert_eq!(std::mem::size_of::<dontcache::ffi::DcOpts>(), 24);
}
