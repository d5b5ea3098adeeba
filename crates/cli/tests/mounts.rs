//! A filesystem the command is done with unmounts under `dontcache run` as
//! without it: the library's descriptors of files the program closed (its
//! duplicates, and the files `run` took over from exited processes) made
//! `cp big /mnt/ && umount /mnt` fail with EBUSY.

mod common;
use common::*;

use std::path::Path;

/// Writes 16 MiB to `argv[1]/f`, closes it, and unmounts `argv[1]` at once.
const WRITE_THEN_UNMOUNT: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>
int main(int argc, char **argv) {
    static char buf[1 << 20];
    char path[4096];
    snprintf(path, sizeof path, "%s/f", argv[1]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    memset(buf, 'u', sizeof buf);
    for (int i = 0; i < 16; i++)
        if (fd < 0 || write(fd, buf, sizeof buf) != sizeof buf) return 2;
    if (close(fd)) return 3;
    if (umount2(argv[1], 0)) { perror("umount2"); return 4; }
    return 0;
}
"#;

fn mounted(mnt: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(p(mnt)))
}

fn remount(dir: &Path, mnt: &Path) {
    let ok = sh(&format!("mount -o loop {} {}", dir.join("fs.img").display(), mnt.display()));
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
}

#[test]
fn a_filesystem_the_command_is_done_with_unmounts() {
    let s = scratch!("shim-unmount");
    let fs = LoopFs::ext4(&s.dir, 96);
    let src = s.path("src");
    std::fs::write(&src, pattern(7, 0, 32 << 20)).unwrap();

    // Another process's files, taken over by `run` as it exits.
    let script = format!("cp {} {}/ && umount {}", p(&src), p(&fs.mnt), p(&fs.mnt));
    let out = dontcache(&["run", "--", "sh", "-c", &script]);
    assert!(out.status.success(), "cp, then umount: {}", said(&out));
    assert!(!mounted(&fs.mnt), "still mounted after umount succeeded");
    remount(&s.dir, &fs.mnt);
    assert_pattern(&fs.mnt.join("src"), 7, 32 << 20);

    // The process's own file, still in its library's hands.
    let exe = compile_c(&s.dir, "unmount", WRITE_THEN_UNMOUNT, &[]);
    let out = dontcache(&["run", "--", p(&exe), p(&fs.mnt)]);
    assert!(out.status.success(), "write, close, umount2 in one process: {}", said(&out));
    assert!(!mounted(&fs.mnt), "still mounted after umount2 succeeded");
    remount(&s.dir, &fs.mnt);
    assert_eq!(std::fs::read(fs.mnt.join("f")).unwrap(), vec![b'u'; 16 << 20]);
}
