//! `dontcache probe` on this kernel: the generation its behaviour shows must be
//! the one its release number names (kernel.org numbering), the filesystem's
//! refusal must fall back to the release number and say so, and block devices
//! must be probed without writing to them.

mod common;
use common::*;

use serde_json::Value;

fn probe(args: &[&str]) -> Value {
    let out = dontcache(&[&["probe", "--json"], args].concat());
    assert!(out.status.success(), "{}", said(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn behaviour_on_ext4_names_this_kernels_generation() {
    let s = scratch!("probe");
    let r = probe(&[p(&s.dir)]);
    assert_eq!(r["fs_type"], "ext4", "the scratch directory is on the machine's ext4");
    assert_eq!(r["filesystem_accepts"], true, "{r}");
    assert_eq!(r["source"], "behaviour");
    // Both ways of knowing agree on an unpatched kernel.org-numbered kernel:
    // 6.18 here, so the inline flush, with no page of any write left dirty.
    assert_eq!(r["by_behaviour"], r["by_release"], "{r}");
    let trials = r["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 3);
    if r["generation"] == "inline-flush" {
        assert!(trials.iter().all(|t| t["dirty"] == 0 && t["pages"] == 8192), "{r}");
    }
    // The probe's file had no name: nothing is left in the directory.
    assert_eq!(std::fs::read_dir(&s.dir).unwrap().count(), 0);
}

#[test]
fn a_filesystem_that_refuses_the_flag_falls_back_to_the_release_number() {
    let r = probe(&["/dev/shm"]);
    assert_eq!(r["fs_type"], "tmpfs");
    assert_eq!(r["filesystem_accepts"], false);
    assert_eq!(r["source"], "kernel release");
    assert_eq!(r["generation"], r["by_release"]);
    assert!(r["evidence"].as_str().unwrap().contains("refused on tmpfs"), "{r}");
    let human = dontcache(&["probe", "/dev/shm"]);
    assert!(String::from_utf8_lossy(&human.stdout).contains("from its kernel release"), "{}", said(&human));
}

#[test]
fn block_devices_are_probed_by_a_read_that_changes_nothing() {
    if !is_root() {
        skip("block_devices_are_probed_by_a_read_that_changes_nothing", "needs root for a loop device");
        return;
    }
    let s = scratch!("probe-block");
    let image = s.path("dev.img");
    std::fs::write(&image, pattern(7, 0, MIB as usize)).unwrap();
    let out = sh(&format!("losetup --find --show {}", p(&image)));
    assert!(out.status.success(), "{}", said(&out));
    let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let r = probe(&["--block-device", &dev, p(&s.dir)]);
    sh(&format!("losetup -d {dev}"));
    let kernel = r["kernel"].as_str().unwrap();
    let mut v = kernel.split(|c: char| !c.is_ascii_digit()).map(|x| x.parse::<u32>().unwrap_or(0));
    let since_7_3 = (v.next().unwrap(), v.next().unwrap()) >= (7, 3);
    assert_eq!(r["block_devices"]["supported"], since_7_3, "{r}");
    assert_pattern(&image, 7, MIB);

    let r = probe(&["--block-device", "/etc/hostname", p(&s.dir)]);
    assert_eq!(r["block_devices"]["supported"], Value::Null);
    assert!(r["block_devices"]["evidence"].as_str().unwrap().contains("not a block device"), "{r}");
}

#[test]
fn a_directory_that_cannot_be_probed_is_one_line_and_exit_2() {
    let out = dontcache(&["probe", "/nonexistent-dontcache"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent-dontcache") && err.contains("writable directory"), "{err}");
    assert_eq!(err.trim().lines().count(), 1);
}
