"""Testbeds: dcbench makes a fresh filesystem on a loop or zram device for a
run, records it and the kernel's RWF_DONTCACHE generation, undoes it on every
exit (Ctrl-C included), and never formats a user's device by surprise.

Real devices and filesystems throughout: root, losetup, mkfs.ext4 and
mkfs.xfs (the setup script installs xfsprogs).
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import DCLOAD, dcbench, needs_dcload, needs_root, start_run, wait_for_a_case

needs_xfs = pytest.mark.skipif(shutil.which("mkfs.xfs") is None, reason="needs mkfs.xfs (apt-get install xfsprogs)")


def loop_devices_over(path: Path) -> str:
    return subprocess.run(["losetup", "-j", str(path)], capture_output=True, text=True).stdout.strip()


def mounts_under(path: Path) -> list[str]:
    return [line.split()[4] for line in open("/proc/self/mountinfo") if line.split()[4].startswith(str(path))]


def assert_nothing_left(scratch: Path):
    assert mounts_under(scratch) == [], "the testbed is unmounted"
    assert not list(scratch.glob("dcbench-*")), "the image and mount point are removed"
    attached = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert str(scratch) not in attached, f"no loop device is left over the image: {attached}"


def only_run(results: Path) -> Path:
    (run_dir,) = [d for d in results.iterdir() if d.is_dir()]
    return run_dir


@needs_root
@needs_dcload
@pytest.mark.parametrize("fs", ["ext4", pytest.param("xfs", marks=needs_xfs)])
def test_a_run_on_a_fresh_loop_filesystem_records_it_and_leaves_nothing(fs, scratch, tmp_path):
    results = tmp_path / "results"
    r = dcbench("run", "--dir", str(scratch), "--results", str(results), "--fs", fs, "--device", "loop:1g",
                "--mount-opts", "noatime", "--fresh-fs-per-case", "--scenarios", "seq-write",
                "--modes", "buffered,dontcache", "--size", "32m", "--memory", "256m", "--no-balloon", "-q")
    assert r.returncode == 0, r.stderr + r.stdout
    run_dir = only_run(results)
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["status"] == "complete" and m["cases_done"] == 2
    tb = m["testbed"]
    assert (tb["fs"], tb["kind"], tb["size"], tb["direct_io"]) == (fs, "loop", 1 << 30, True), tb
    assert tb["name"].startswith("loop") and tb["mkfs"].startswith(f"mkfs.{fs} ")
    assert "noatime" in tb["mount_options"] and tb["backing_fs"] == "ext4"
    assert tb["made"] == 2, "made once, then again before the second case"
    assert tb["teardown_problems"] == []
    # The cases ran on the testbed, and its device is what the monitors sampled.
    assert m["system"]["target"]["fs_type"] == fs and m["system"]["target"]["disk"] == tb["name"]
    assert m["system"]["target"].get("ext4_journal") == (True if fs == "ext4" else None)
    assert m["modes"] == ["buffered", "dontcache"], m["skipped_modes"]
    # The kernel's generation, probed on the testbed itself.
    k = m["kernel_dontcache"]
    assert k["fs_type"] == fs and k["source"] == "behaviour" and k["generation"] == k["by_release"], k
    assert k["block_devices"]["device"] == f"/dev/{tb['name']}" and k["block_devices"]["supported"] is not None
    md = (run_dir / "summary.md").read_text()
    assert f"- testbed: {fs} on loop:1 GiB ({tb['name']}, direct I/O)" in md
    assert "- kernel RWF_DONTCACHE: " + {"inline-flush": "inline flush (6.14-7.1)",
                                          "flusher-kick": "flusher kick (7.2+)"}[k["generation"]] in md
    assert_nothing_left(scratch)


@needs_root
@needs_dcload
def test_creating_files_on_an_ext4_without_a_journal_is_called_out(scratch, tmp_path):
    # Such an ext4 does not reuse inodes freed in the last seconds, so files/s
    # depends on what the case before deleted: the run warns, and the summary
    # and the manifest say so.
    results = tmp_path / "results"
    r = dcbench("run", "--dir", str(scratch), "--results", str(results), "--fs", "ext4", "--device", "loop:1g",
                "--mkfs-opts", "-O ^has_journal", "--scenarios", "small-files", "--modes", "buffered",
                "--memory", "256m", "--no-balloon")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "small-files on an ext4 without a journal" in r.stdout + r.stderr
    run_dir = only_run(results)
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["system"]["target"]["ext4_journal"] is False
    md = (run_dir / "summary.md").read_text()
    assert "small-files ran on an ext4 without a journal" in md and "--fs ext4" in md
    assert_nothing_left(scratch)


@needs_root
@needs_dcload
@needs_xfs
def test_sigint_mid_run_unmounts_and_detaches_the_testbed(scratch, tmp_path):
    results = tmp_path / "results"
    p = start_run("--dir", str(scratch), "--results", str(results), "--fs", "xfs", "--scenarios", "axboe-write",
                  "--modes", "buffered", "--no-balloon", "--memory", "1g", "--size", "64m", "--repeat", "3")
    wait_for_a_case(p, results)
    assert mounts_under(scratch), "the testbed was mounted"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "Traceback" not in err, err
    assert_nothing_left(scratch)
    m = json.loads((only_run(results) / "manifest.json").read_text())
    assert m["status"] == "incomplete" and m["testbed"]["teardown_problems"] == []

    # Ctrl-C while the testbed is being made: held until it is, then everything is undone.
    early = tmp_path / "early"
    p = start_run("--dir", str(scratch), "--results", str(early), "--fs", "xfs", "--scenarios", "seq-write",
                  "--modes", "buffered", "--no-balloon", "--memory", "1g", "--size", "64m")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(scratch.glob("dcbench-*")):
        time.sleep(0.005)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "Traceback" not in err, err
    assert "results: none (stopped before the first case)" in out, out
    assert not early.exists() or not [d for d in early.iterdir() if d.is_dir()]
    assert_nothing_left(scratch)


@pytest.fixture
def ext4_loop_device(tmp_path):
    """A loop device holding an ext4 labelled 'keepme' with a file on it."""
    # Made here, exclusively (mkfs follows a link another user could have put at a name known in advance),
    # on the disk, and unique to this session: tmp_path's name ("test_x0") is the same in two at once.
    fd, name = tempfile.mkstemp(prefix=f"dcbench-test-dev-{tmp_path.name}-", suffix=".img", dir="/var/tmp")
    os.close(fd)
    image = Path(name)
    subprocess.run(["truncate", "-s", "600m", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "keepme", str(image)], check=True)
    dev = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True,
                         check=True).stdout.strip()
    yield Path(dev)
    subprocess.run(["umount", dev], capture_output=True)
    subprocess.run(["losetup", "-d", dev], capture_output=True)
    image.unlink()


def blkid_label(dev: Path) -> str:
    return subprocess.run(["blkid", "-p", "-s", "LABEL", "-o", "value", str(dev)], capture_output=True,
                          text=True).stdout.strip()


@needs_root
@needs_dcload
def test_a_mounted_device_is_refused_even_with_force(ext4_loop_device, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", str(ext4_loop_device), str(mnt)], check=True)
    (mnt / "precious").write_text("data")
    try:
        r = dcbench("run", "--dir", str(tmp_path), "--results", str(tmp_path / "r"), "--dcload", str(DCLOAD),
                    "--fs", "ext4", "--device", str(ext4_loop_device), "--force", "--scenarios", "seq-write",
                    "--size", "16m", "--no-balloon")
        assert r.returncode == 2, r.stderr
        assert f"mounted at {mnt}" in r.stderr and "even with --force" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert (mnt / "precious").read_text() == "data"
        assert not (tmp_path / "r").exists()
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@needs_root
@needs_dcload
def test_a_device_with_a_filesystem_needs_force_and_the_manifest_says_what_was_destroyed(
        ext4_loop_device, scratch, tmp_path):
    args = ["run", "--dir", str(scratch), "--results", str(tmp_path / "r"), "--fs", "ext4", "--device",
            str(ext4_loop_device), "--scenarios", "seq-write", "--modes", "buffered", "--size", "16m",
            "--memory", "64m", "--no-balloon", "-q"]
    r = dcbench(*args)
    assert r.returncode == 2, r.stderr
    assert "a filesystem or signature (ext4, labelled 'keepme')" in r.stderr and "--force" in r.stderr, r.stderr
    assert blkid_label(ext4_loop_device) == "keepme", "nothing was touched"
    r = dcbench(*args, "--force")
    assert r.returncode == 0, r.stderr + r.stdout
    m = json.loads((only_run(tmp_path / "r") / "manifest.json").read_text())
    assert m["testbed"]["destroyed"] == ["a filesystem or signature (ext4, labelled 'keepme')"]
    assert m["testbed"]["kind"] == "block" and m["testbed"]["size"] == 600 << 20
    assert blkid_label(ext4_loop_device) == "", "the new filesystem has no label"
    assert mounts_under(scratch) == []


@pytest.mark.parametrize("args, message", [
    (["--device", "loop:1g"], "--device needs --fs"),
    (["--fs", "xfs", "--device", "floppy"], "give a block device (/dev/nvme1n1), loop[:SIZE]"),
    (["--fs", "xfs", "--device", "loop:10m"], "10 MiB is too small for a filesystem"),
    (["--fs", "xfs", "--device", "loop:2g:lz4"], "only zram takes a compression algorithm"),
    (["--fs", "zfs"], "invalid choice: 'zfs'"),
])
@needs_dcload
def test_bad_testbed_options_are_one_line(args, message, tmp_path):
    r = dcbench("run", "--dir", str(tmp_path), "--dcload", str(DCLOAD), *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@needs_root
@needs_dcload
def test_a_file_or_a_too_small_device_is_refused_before_anything_is_made(tmp_path):
    r = dcbench("run", "--dir", str(tmp_path), "--results", str(tmp_path / "r"), "--dcload", str(DCLOAD),
                "--fs", "ext4", "--device", "/etc/hostname")
    assert r.returncode == 2 and "not a block device" in r.stderr, r.stderr
    r = dcbench("run", "--dir", str(tmp_path), "--results", str(tmp_path / "r"), "--dcload", str(DCLOAD),
                "--fs", "ext4", "--device", "zram:512m", "--scenarios", "seq-write", "--memory", "1g",
                "--no-balloon")
    assert r.returncode == 2 and "512 MiB is too small; the largest case needs 2.2 GiB" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


@needs_root
@needs_dcload
def test_a_zram_testbed_uses_the_chosen_algorithm_and_is_removed(scratch, tmp_path):
    if not Path("/sys/class/zram-control/hot_add").exists():
        pytest.skip("this kernel has no zram")
    before = sorted(p.name for p in Path("/sys/block").glob("zram*"))
    r = dcbench("run", "--dir", str(scratch), "--results", str(tmp_path / "r"), "--fs", "ext4", "--device",
                "zram:1g:lz4", "--scenarios", "seq-write", "--modes", "buffered", "--size", "32m",
                "--memory", "256m", "--no-balloon", "-q")
    assert r.returncode == 0, r.stderr + r.stdout
    tb = json.loads((only_run(tmp_path / "r") / "manifest.json").read_text())["testbed"]
    assert (tb["kind"], tb["algorithm"], tb["size"]) == ("zram", "lz4", 1 << 30), tb
    assert sorted(p.name for p in Path("/sys/block").glob("zram*")) == before, "the zram device is removed"
    r = dcbench("run", "--dir", str(scratch), "--results", str(tmp_path / "r2"), "--fs", "ext4", "--device",
                "zram:1g:nonsense", "--scenarios", "seq-write", "--size", "32m", "--no-balloon")
    assert r.returncode == 2 and "zram has no 'nonsense'; this kernel offers" in r.stderr, r.stderr
    assert sorted(p.name for p in Path("/sys/block").glob("zram*")) == before
    assert not (tmp_path / "r2").exists()
    assert_nothing_left(scratch)


@needs_dcload
def test_the_seed_repro_profile_brings_its_testbed_and_options_yield_to_the_users(tmp_path):
    r = dcbench("run", "--dir", str(tmp_path), "--dcload", str(DCLOAD), "--profile", "seed-repro", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "plan: 36 cases (4 scenarios x 3 modes x 3), profile seed-repro" in r.stdout
    assert "testbed: a new xfs on loop" in r.stdout
    assert "needs 4 GiB on the testbed (loop)" in r.stdout
    r = dcbench("run", "--dir", str(tmp_path), "--dcload", str(DCLOAD), "--profile", "seed-repro", "--dry-run",
                "--scenarios", "seq-write", "--repeat", "5", "--device", "loop:8g")
    assert r.returncode == 0, r.stderr
    assert "plan: 15 cases (1 scenarios x 3 modes x 5)" in r.stdout and "testbed: a new xfs on loop:8 GiB" in r.stdout
    assert list(tmp_path.iterdir()) == []
