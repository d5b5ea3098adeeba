"""dcbench run end to end with the real dcload on real files, and its safety.

These run on the machine's disk (/var/tmp) with tiny sizes. They need root
(drop_caches before each case, a tmpfs for the free-space refusal).
"""

import csv
import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from conftest import DCLOAD, children_of, dcbench, needs_dcload, needs_root, start_run, wait_for_a_case


def no_leftovers(scratch: Path):
    assert not list(scratch.glob("dcbench-*")), "the run's test files are removed"


@needs_root
@needs_dcload
def test_quick_run_of_two_scenarios_in_every_available_mode(scratch, tmp_path):
    results = tmp_path / "results"
    r = dcbench("run", "--dir", str(scratch), "--results", str(results), "--scenarios", "seq-write,noisy-neighbor",
                "--modes", "all", "--memory", "256m", "--no-balloon", "--monitor-hz", "10")
    assert r.returncode == 0, r.stderr
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    assert f"results: {run_dir}" in r.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["system"]["target"]["fs_type"] == "ext4"
    modes = manifest["modes"]
    assert modes[:3] == ["buffered", "dontcache", "direct"], manifest["skipped_modes"]
    assert len(modes) + len(manifest["skipped_modes"]) == 8
    assert manifest["cases_done"] == manifest["cases_planned"] == 2 * len(modes)
    no_leftovers(scratch)

    summary = json.loads((run_dir / "summary.json").read_text())["rows"]
    got = {(x["scenario"], x["mode"], x["role"]) for x in summary}
    want = {("seq-write", m, "writer") for m in modes}
    want |= {("noisy-neighbor", m, role) for m in modes for role in ("writer", "readers")}
    assert got == want
    for row in summary:
        assert row["mb_s"] > 0 and row["iops"] > 0 and row["lat_p99_us"] >= row["lat_p50_us"] > 0, row
        assert row["peak_cached"] > 0

    # The page cache tells the modes apart: buffered leaves the 512 MiB file cached, the others do not
    # (measured above the idle sample before the load: the machine's own cache differs from run to run).
    db = sqlite3.connect(results / "dcbench.sqlite")

    def rise(mode):
        return db.execute("SELECT value FROM metrics WHERE run_id=? AND scenario='seq-write' AND mode=? "
                          "AND role='*' AND metric='peak_cached_above_idle'", (run_dir.name, mode)).fetchone()[0]

    assert rise("buffered") > 400 << 20
    assert rise("direct") < 64 << 20
    md = (run_dir / "summary.md").read_text()
    assert "## seq-write" in md and "| dontcache | writer | 1 |" in md

    case = run_dir / "cases" / "noisy-neighbor" / "dontcache" / "rep0"
    rows = list(csv.DictReader((case / "monitor.csv").open()))
    assert len(rows) >= 3 and float(rows[-1]["t_s"]) > float(rows[0]["t_s"])
    assert {"dirty", "cached", "disk_w_iops", "cpu_system_pct", "cpu_steal_pct", "nr_dirtied"} <= set(rows[0])
    dc = json.loads((case / "dcload.json").read_text())
    writer, readers = dc["jobs"]
    assert writer["write"]["io_bytes"] == 512 << 20, "the writer wrote its whole file"
    assert readers["read"]["io_bytes"] > 0, "the readers ran beside it"
    assert abs(readers["job_runtime"] - writer["job_runtime"]) < 1000, "and as long as the writer"
    assert list(case.glob("writer_bw.*.log")) and list(case.glob("readers_lat.*.log"))

    (status,) = db.execute("SELECT status FROM runs WHERE run_id = ?", (run_dir.name,)).fetchone()
    assert status == "complete"
    n = db.execute("SELECT COUNT(*) FROM cases WHERE run_id = ? AND status = 'ok'", (run_dir.name,)).fetchone()[0]
    assert n == 2 * len(modes)
    mb = db.execute("SELECT value FROM metrics WHERE run_id=? AND scenario='seq-write' AND mode='direct' "
                    "AND role='writer' AND metric='mb_s'", (run_dir.name,)).fetchone()[0]
    assert mb == pytest.approx(writer_mb_s(run_dir, "seq-write", "direct"))


def writer_mb_s(run_dir, scenario, mode):
    dc = json.loads((run_dir / "cases" / scenario / mode / "rep0" / "dcload.json").read_text())
    return dc["jobs"][0]["write"]["bw_bytes"] / 1e6


@needs_root
@needs_dcload
def test_relative_results_directory_and_failed_cases_are_reported(scratch, tmp_path):
    # dcload runs in each case's directory: a relative --results must still work.
    r = dcbench("run", "--dir", str(scratch), "--results", "rel", "--scenarios", "seq-write", "--modes", "buffered",
                "--size", "16m", "--no-balloon", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    (first,) = [d for d in (tmp_path / "rel").iterdir() if d.is_dir()]
    assert json.loads((first / "summary.json").read_text())["rows"][0]["mb_s"] > 0
    # A scenario dcload refuses: the case fails, the run says so and exits 1.
    bad = tmp_path / "bad.toml"
    bad.write_text('description = "d"\n[[role]]\nname = "w"\nsize = "16m"\n[role.job]\nrw = "write"\n'
                   'bs = "4k"\nrandom_generator = "nonsense"\n')
    r = dcbench("run", "--dir", str(scratch), "--results", "rel", "--scenarios", str(bad), "--modes", "buffered",
                "--no-balloon", "--quiet", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "1 case(s) failed" in r.stdout
    (run_dir,) = {d for d in (tmp_path / "rel").iterdir() if d.is_dir()} - {first}
    assert "**case bad buffered #1 failed**: dcload exited" in (run_dir / "summary.md").read_text()
    no_leftovers(scratch)


@needs_root
@needs_dcload
def test_sigint_mid_run_leaves_no_process_file_or_balloon(scratch, tmp_path):
    results = tmp_path / "results"
    avail = int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemAvailable"))) * 1024
    # Leave all but ~1 GiB to the page cache: a real balloon, quick to fill.
    memory = f"{(avail - (1 << 30)) >> 20}m"
    p = start_run("--dir", str(scratch), "--results", str(results), "--scenarios", "axboe-write", "--modes",
                  "buffered", "--memory", memory, "--size", "64m", "--repeat", "3")
    kids = wait_for_a_case(p, results)
    names = sorted(c for _, c in kids)
    assert "dcload" in names and any(c.startswith("python") for c in names), f"dcload and the balloon run: {kids}"
    pids = [int(k) for k, _ in kids]
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "Traceback" not in err
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text(), \
            f"child {pid} is gone"
    no_leftovers(scratch)
    (run_dir,) = [d for d in results.iterdir() if d.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "incomplete" and manifest["interrupted_by"] == "SIGINT"
    assert manifest["memory"]["balloon"] > 0
    assert "not a finished run" in (run_dir / "summary.md").read_text()
    db = sqlite3.connect(results / "dcbench.sqlite")
    assert db.execute("SELECT status FROM runs").fetchone()[0] == "incomplete"


@needs_root
@needs_dcload
def test_ctrl_c_twice_and_during_cleanup_leave_an_incomplete_run_and_no_traceback(scratch, tmp_path):
    results = tmp_path / "results"
    p = start_run("--dir", str(scratch), "--results", str(results), "--scenarios", "axboe-write", "--modes",
                  "buffered", "--no-balloon", "--memory", "1g", "--size", "64m", "--repeat", "3")
    wait_for_a_case(p, results)
    # Twice at once, then once more while it cleans up.
    p.send_signal(signal.SIGINT)
    p.send_signal(signal.SIGINT)
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "Traceback" not in err, err
    no_leftovers(scratch)
    (run_dir,) = [d for d in results.iterdir() if d.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "incomplete", manifest["status"]


@needs_root
@needs_dcload
def test_ctrl_c_while_the_balloon_fills_stops_within_a_second(scratch, tmp_path):
    results = tmp_path / "results"
    # A balloon of nearly all memory: gigabytes to touch, seconds to fill.
    p = start_run("--dir", str(scratch), "--results", str(results), "--scenarios", "seq-write", "--modes",
                  "buffered", "--memory", "512m")
    deadline = time.monotonic() + 60
    balloon = None
    while time.monotonic() < deadline and balloon is None:
        balloon = next((int(k) for k, c in children_of(p.pid) if c.startswith("python")), None)
        time.sleep(0.02)
    assert balloon is not None, "the balloon started"
    time.sleep(0.2)
    t = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    took = time.monotonic() - t
    assert p.returncode == 130, err
    assert took < 1.5, f"stopped {took:.1f} s after Ctrl-C"
    assert not Path(f"/proc/{balloon}").exists() or "zombie" in Path(f"/proc/{balloon}/status").read_text()
    no_leftovers(scratch)


@pytest.mark.parametrize("target, message", [
    ("/", "refusing to write into the root directory"),
    ("/nonexistent-dcbench", "does not exist"),
    ("/etc/hostname", "is not a directory"),
])
@needs_dcload
def test_bad_targets_are_refused_in_one_line(target, message, tmp_path):
    r = dcbench("run", "--dir", target, "--results", str(tmp_path / "r"))
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "r").exists(), "nothing is written for a refused run"


@needs_root
@needs_dcload
def test_too_little_free_space_is_refused_with_the_numbers(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "dcbench-test", str(mnt)], check=True)
    try:
        r = dcbench("run", "--dir", str(mnt), "--results", str(tmp_path / "r"), "--dcload", str(DCLOAD),
                    "--scenarios", "seq-write", "--memory", "1g", "--no-balloon")
        assert r.returncode == 2
        assert "needs 2.2 GiB free for the largest case, has 16 MiB" in r.stderr, r.stderr
        assert list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.parametrize("args, message", [
    (["--scenarios", "nope"], "unknown scenario 'nope'"),
    (["--modes", "cached"], "unknown mode 'cached'"),
    (["--memory", "lots"], "not a size"),
    (["--memory", "0"], "'0' is no size"),
    (["--size", "0"], "'0' is no size"),
    (["--monitor-hz", "nan"], "'nan' is not a rate"),
    (["--monitor-hz", "inf"], "'inf' is not a rate"),
    (["--repeat", "0"], "not a positive whole number"),
    (["--results", "/etc/hostname"], "is a file, not a directory"),
])
@needs_dcload
def test_bad_options_are_one_line(args, message, tmp_path):
    r = dcbench("run", "--dir", str(tmp_path), "--dcload", str(DCLOAD), *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@needs_dcload
def test_bad_files_and_unknown_runs_are_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b'description = "\xff"\n')
    r = dcbench("run", "--dir", str(tmp_path), "--dcload", str(DCLOAD), "--scenarios", str(bad), "--dry-run")
    assert r.returncode == 2 and "not UTF-8 text" in r.stderr and "Traceback" not in r.stderr, r.stderr
    results = tmp_path / "results"
    (results / "20260101-000000-abcd").mkdir(parents=True)
    (results / "20260101-000000-abcd" / "manifest.json").write_text("{}")
    r = dcbench("compare", "nope", "nope2", "--results", str(results))
    assert r.returncode == 2 and "known runs: 20260101-000000-abcd" in r.stderr, r.stderr
    assert "runs: manifest.json" not in r.stderr


@needs_dcload
def test_dry_run_prints_the_plan_and_touches_nothing(tmp_path):
    r = dcbench("run", "--dir", str(tmp_path), "--results", str(tmp_path / "r"), "--dcload", str(DCLOAD),
                "--dry-run", "--profile", "full", "--memory", "4g")
    assert r.returncode == 0, r.stderr
    assert "plan: 40 cases" in r.stdout
    assert "axboe-write" in r.stdout and "32x256 MiB" in r.stdout
    assert "estimated duration" in r.stdout
    assert list(tmp_path.iterdir()) == []
