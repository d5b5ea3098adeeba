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
    let s = scratch!("engine-cabi");
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

/// Compiles the C program `source` against include/dontcache.h (warnings
/// are errors) and returns what it prints.
fn run_against_the_header(s: &Scratch, name: &str, source: &str) -> String {
    let include = format!("-I{}", repo().join("include").display());
    let exe = compile_c(&s.dir, name, source, &[&include]);
    String::from_utf8(Command::new(&exe).output().unwrap().stdout).unwrap()
}

/// The header is the truth: a C program compiled against it prints every
/// field's offset and each struct's size, and the Rust types must agree.
#[test]
fn struct_layouts_match_the_header() {
    let s = scratch!("engine-layout");
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
    let out = run_against_the_header(&s, "layout", &c);
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

/// The header's enums name the numbers the library takes: every policy and
/// every way to submit writeback.
#[test]
fn enum_values_match_the_header() {
    use dontcache::{Policy, Submit};
    let s = scratch!("engine-enums");
    let names = [
        ("DC_POLICY_FLUSHER", Policy::Flusher as i32),
        ("DC_POLICY_LAZY", Policy::Lazy as i32),
        ("DC_POLICY_INLINE", Policy::Inline as i32),
        ("DC_POLICY_PER_FILE", Policy::PerFile as i32),
        ("DC_POLICY_KERNEL", Policy::Kernel as i32),
        ("DC_SUBMIT_LOOP", Submit::Loop as i32),
        ("DC_SUBMIT_URING", Submit::Uring as i32),
        ("DC_SUBMIT_SYNCFS", Submit::Syncfs as i32),
        ("DC_SUBMIT_AUTO", Submit::Auto as i32),
    ];
    let mut c = String::from("#include <stdio.h>\n#include \"dontcache.h\"\nint main(void) {\n");
    for (name, _) in names {
        c += &format!("printf(\"%d\\n\", (int){name});\n");
    }
    c += "return 0; }\n";
    let out = run_against_the_header(&s, "enums", &c);
    let header: Vec<i32> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(header.len(), names.len(), "{out}");
    for ((name, rust), c) in names.iter().zip(header) {
        assert_eq!(c, *rust, "{name}: the header says {c}, Rust has {rust}");
    }
    assert_eq!(Policy::ALL.len(), 5, "a new policy needs its line above");
}

/// Misuse of the C ABI gets the errno the system call would give, never a
/// crash: a bad iovec, a negative offset, files that are not regular, a
/// descriptor closed and reused behind the handle's back.
const MISUSE: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include "dontcache.h"
#define ERR(name, expr) do { errno = 0; long r = (long)(expr); printf("%s %ld %d\n", name, r < 0 ? -1L : r, r < 0 ? errno : 0); } while (0)
#define NUL(name, expr) do { errno = 0; void *p = (void *)(expr); printf("%s %d %d\n", name, p ? 1 : 0, p ? 0 : errno); } while (0)
int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/f", argv[1]);
    dc_handle *h = dc_open(path, O_RDWR | O_CREAT | O_TRUNC, 0644, NULL);
    char buf[8] = "abcdefg";
    ERR("pwrite", dc_pwrite(h, buf, 4, 0));
    ERR("pwritev-null", dc_pwritev(h, NULL, 3, 0));
    ERR("pwrite-neg", dc_pwrite(h, buf, 4, -1));
    ERR("pread-neg", dc_pread(h, buf, 4, -1));
    ERR("write-badbuf", dc_write(h, (void *)16, 64));
    ERR("note-neg", dc_note_write(h, -1, 1));
    ERR("read-flags", dc_read_flags(h));
    ERR("read-flags-null", dc_read_flags(NULL));
    int pipefd[2];
    (void)!pipe(pipefd);
    NUL("adopt-pipe", dc_adopt(pipefd[0], NULL));
    NUL("adopt-dir", dc_adopt(open(argv[1], O_RDONLY | O_DIRECTORY), NULL));
    NUL("adopt-zero", dc_adopt(open("/dev/zero", O_RDONLY), NULL));
    NUL("adopt-opath", dc_adopt(open(path, O_PATH), NULL));
    NUL("adopt-closed", dc_adopt(999, NULL));
    NUL("open-devnull", dc_open("/dev/null", O_WRONLY, 0, NULL));
    NUL("open-dir", dc_open(argv[1], O_RDONLY, 0, NULL));
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    NUL("adopt-socket", dc_adopt(sv[0], NULL));
    /* The caller closes the handle's descriptor, and the number is reused
     * for another file: the handle must not touch that file. */
    int fd = dc_fd(h);
    close(fd);
    char other[4096];
    snprintf(other, sizeof other, "%s/other", argv[1]);
    int o = open(other, O_RDWR | O_CREAT | O_TRUNC, 0644);
    printf("reused %d\n", o == fd);
    ERR("pwrite-reused", dc_pwrite(h, buf, 4, 0));
    ERR("close-reused", dc_close(h));
    ERR("other-still-open", write(o, "ok", 2));
    return 0;
}
"#;

#[test]
fn misuse_gets_the_system_calls_errno() {
    let s = scratch!("engine-misuse");
    let lib = lib_dir();
    let inc = format!("-I{}", repo().join("include").display());
    let libdir = format!("-L{}", lib.display());
    let rpath = format!("-Wl,-rpath,{}", lib.display());
    let exe = compile_c(&s.dir, "misuse", MISUSE, &[&inc, &libdir, &rpath, "-ldontcache", "-Wno-nonnull"]);
    let out = Command::new(&exe).arg(&s.dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: std::collections::BTreeMap<String, String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    let e = |errno: i32| format!("-1 {errno}");
    let null = |errno: i32| format!("0 {errno}");
    let want = [
        ("pwrite", "4 0".to_string()),
        ("pwritev-null", e(libc::EFAULT)),
        ("pwrite-neg", e(libc::EINVAL)),
        ("pread-neg", e(libc::EINVAL)),
        ("write-badbuf", e(libc::EFAULT)),
        ("note-neg", e(libc::EINVAL)),
        ("read-flags", "0 0".to_string()),
        ("read-flags-null", e(libc::EBADF)),
        ("adopt-pipe", null(libc::ESPIPE)),
        ("adopt-dir", null(libc::EISDIR)),
        ("adopt-zero", null(libc::EINVAL)),
        ("adopt-opath", null(libc::EBADF)),
        ("adopt-closed", null(libc::EBADF)),
        ("open-devnull", null(libc::EINVAL)),
        ("open-dir", null(libc::EISDIR)),
        ("adopt-socket", null(libc::ESPIPE)),
        ("reused", "1".to_string()),
        ("pwrite-reused", e(libc::EBADF)),
        ("close-reused", e(libc::EBADF)),
        ("other-still-open", "2 0".to_string()),
    ];
    for (k, v) in want {
        assert_eq!(got.get(k), Some(&v), "{k}: {}", String::from_utf8_lossy(&out.stdout));
    }
    assert_eq!(
        std::fs::metadata(s.path("other")).unwrap().len(),
        2,
        "nothing of the handle's went into the other file"
    );
}
