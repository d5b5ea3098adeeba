"""compare, report and history on two real tiny runs (also copied elsewhere without the index), and the
report in headless Chromium."""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import dcbench, needs_dcload, needs_root


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two real runs of the same tiny matrix (3 repetitions each, so verdicts are decided)."""
    if not Path("/proc/sys/vm/drop_caches").exists():
        pytest.skip("needs /proc")
    base = tmp_path_factory.mktemp("runs")
    # On the disk, not in pytest's temporary directory (tmpfs on some machines); named for this process, as
    # pytest's numbering ("runs0") is the same in two test sessions at once.
    scratch = Path(tempfile.mkdtemp(prefix=f"dcbench-report-test-{os.getpid()}-", dir="/var/tmp"))
    results = base / "results"
    ids = []
    try:
        for _ in range(2):
            r = dcbench("run", "--dir", str(scratch), "--results", str(results), "--scenarios",
                        "seq-write,small-files", "--modes", "buffered,direct", "--memory", "128m", "--no-balloon",
                        "--repeat", "3", "--quiet")
            assert r.returncode == 0, r.stderr
            ids.append(r.stdout.split("results: ")[1].split()[0].rsplit("/", 1)[1])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results, ids


@needs_root
@needs_dcload
def test_compare_of_two_real_runs(two_runs):
    results, (a, b) = two_runs
    r = dcbench("compare", a, b, "--results", str(results), "--format", "md")
    assert r.returncode == 0, r.stderr
    assert f"# {a} (A) vs {b} (B)" in r.stdout
    assert "| buffered writer MB/s |" in r.stdout and "| direct creators files/s |" in r.stdout
    verdicts = {line.rsplit("|", 2)[1].strip() for line in r.stdout.splitlines() if line.startswith("| ")
                and not line.startswith("| figure")}
    assert verdicts <= {"better", "worse", "noise"}, "3 repetitions each side: every figure gets a verdict"
    r = dcbench("compare", a, b, "--results", str(results), "--format", "commit")
    assert r.returncode == 0 and max(len(x) for x in r.stdout.splitlines()) <= 72
    r = dcbench("compare", a, "nope", "--results", str(results))
    assert r.returncode == 2 and "unknown run 'nope'" in r.stderr and "Traceback" not in r.stderr


@needs_root
@needs_dcload
def test_the_modes_of_one_real_run_against_one_of_them(two_runs):
    results, (a, b) = two_runs
    summary = (results / a / "summary.md").read_text()
    assert "## Against buffered, paired by repetition" in summary
    assert "| seq-write | writer | direct | MB/s |" in summary and "| small-files | creators | direct | files/s |" \
        in summary
    r = dcbench("compare", a, "--against", "buffered", "--results", str(results), "--format", "md")
    assert r.returncode == 0, r.stderr
    rows = [line.split("|") for line in r.stdout.splitlines() if line.startswith("| ") and "scenario" not in line]
    assert {(x[1].strip(), x[3].strip()) for x in rows} == {("seq-write", "direct"), ("small-files", "direct")}
    assert {x[7].strip() for x in rows} == {"3"} and {x[8].strip() for x in rows} <= {"better", "worse", "noise"}
    r = dcbench("compare", a, "--against", "direct", "--metrics", "lat_p99_us", "--results", str(results),
                "--format", "md")
    assert r.returncode == 0 and "| seq-write | writer | buffered | p99 lat us |" in r.stdout
    r = dcbench("compare", a, "--against", "direct", "--results", str(results))
    assert r.returncode == 0 and "Against direct, paired by repetition" in r.stdout.replace("\n", " ")
    r = dcbench("compare", a, "--against", "buffered", "--results", str(results), "--format", "commit")
    assert r.returncode == 0 and "  small-files creators direct files/s: " in r.stdout
    assert max(len(x) for x in r.stdout.splitlines()) <= 72
    r = dcbench("compare", a, b, "--against", "buffered", "--results", str(results))
    assert r.returncode == 2 and "--against compares the modes of one run; 2 runs were given" in r.stderr
    r = dcbench("compare", a, "--against", "writebehind:lazy", "--results", str(results))
    assert r.returncode == 2 and "has no such mode; it ran buffered, direct" in r.stderr
    assert "Traceback" not in r.stderr


@needs_root
@needs_dcload
def test_history_lists_both_runs(two_runs):
    results, (a, b) = two_runs
    r = dcbench("history", "--results", str(results), "--scenario", "seq-write", "--mode", "direct",
                "--metric", "mb_s", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["run_id"] for x in rows] == [a, b] and all(x["n"] == 3 for x in rows)
    r = dcbench("history", "--results", str(results), "--metric", "speed")
    assert r.returncode == 2 and "unknown metric 'speed'" in r.stderr


@needs_root
@needs_dcload
def test_copied_run_directories_compare_report_and_index_without_the_database(two_runs, tmp_path):
    """The run directories are the truth: copied elsewhere, with no SQLite beside them, they compare,
    report and summarize as before, and history rebuilds its index from them."""
    results, (a, b) = two_runs
    elsewhere = tmp_path / "elsewhere"
    for run_id in (a, b):
        shutil.copytree(results / run_id, elsewhere / run_id)
    assert not (elsewhere / "dcbench.sqlite").exists()
    here = dcbench("compare", a, b, "--results", str(results), "--format", "md")
    there = dcbench("compare", str(elsewhere / a), str(elsewhere / b), "--format", "md")
    assert there.returncode == 0, there.stderr
    assert there.stdout == here.stdout, "the copy compares exactly as the original"
    r = dcbench("report", str(elsewhere / a), "--out", str(tmp_path / "report"))
    assert r.returncode == 0, r.stderr
    assert "seq-write" in (tmp_path / "report" / "report.md").read_text()
    assert not (elsewhere / "dcbench.sqlite").exists(), "reading a run never writes an index"

    r = dcbench("history", "--results", str(elsewhere), "--scenario", "seq-write", "--mode", "direct",
                "--metric", "mb_s", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["run_id"] for x in rows] == [a, b] and all(x["n"] == 3 for x in rows)
    shutil.rmtree(elsewhere / a)
    r = dcbench("history", "--results", str(elsewhere), "--metric", "mb_s", "--json")
    assert {x["run_id"] for x in json.loads(r.stdout)} == {b}, "a removed run leaves the index"
    from dcbench.results import read_cases
    from dcbench.summary import attach_io, summarize

    manifest = json.loads((elsewhere / b / "manifest.json").read_text())
    written = json.loads((elsewhere / b / "summary.json").read_text())["rows"]
    assert attach_io(summarize(read_cases(elsewhere / b)), manifest) == written, \
        "the summary the run wrote is what its case files say"


@needs_root
@needs_dcload
@pytest.mark.skipif(not shutil.which("chromium"), reason="needs Debian's chromium (scripts/setup.sh installs it)")
def test_report_renders_in_headless_chromium(two_runs, tmp_path):
    results, (a, b) = two_runs
    out = tmp_path / "report"
    r = dcbench("report", a, "--compare", b, "--results", str(results), "--out", str(out))
    assert r.returncode == 0, r.stderr
    html = (out / "report.html").read_text()
    assert html.count("<svg") >= 6, "bandwidth, memory and latency plots per scenario, inline"
    import re

    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)|@import|url\(\s*["']?https?:""", html), \
        "self-contained: nothing fetched from the network"
    assert "<script" not in html
    md = (out / "report.md").read_text()
    assert "![seq-write bandwidth](seq-write-bandwidth.svg)" in md and (out / "seq-write-bandwidth.svg").exists()
    assert (out / "small-files-disk.svg").exists(), "device IOPS and merges for small-files"
    assert "Against buffered, paired by repetition" in md and "| creators | direct | files/s |" in md
    assert "<th>x buffered</th>" in html
    shot = tmp_path / "shot.png"
    p = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=1200,3000", f"--screenshot={shot}", (out / "report.html").as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Uncaught" not in p.stderr and "ERROR:CONSOLE" not in p.stderr
    import matplotlib.image

    img = matplotlib.image.imread(shot)
    assert img.shape[0] >= 1000 and img.std() > 0.05, "the screenshot is not blank"
