"""fio's own consumers on dcload's output, as fio users run them: fio-plot
(PyPI) draws its graphs from dcload's JSON, its bench-fio drives dcload as
its fio, and Debian's fio2gnuplot reads dcload's bandwidth logs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DCLOAD, needs_dcload

VENV_BIN = Path(sys.executable).parent
BENCH_FIO = VENV_BIN / "bench-fio"
FIO_PLOT = VENV_BIN / "fio-plot"
FIO2GNUPLOT = Path("/usr/bin/fio2gnuplot")

needs_fio_plot = pytest.mark.skipif(not BENCH_FIO.exists() or not FIO_PLOT.exists(),
                                    reason="needs fio-plot from PyPI (scripts/setup.sh installs it)")


@needs_dcload
@needs_fio_plot
def test_bench_fio_runs_dcload_as_its_fio_and_fio_plot_draws_the_results(scratch):
    # bench-fio runs whatever `fio` is first on PATH, and fails on any
    # stderr output: dcload must pass its version check and stay quiet.
    shim = scratch / "bin"
    shim.mkdir()
    (shim / "fio").symlink_to(DCLOAD)
    # bench-fio writes its job file to /tmp/<the target's name>-tmpjobfile.fio: a target named like another
    # session's at the same time had that session's job file, and its logs went there.
    target = scratch / f"target-{scratch.name}"
    target.mkdir()
    out = scratch / "out"
    env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}")
    cmd = [str(BENCH_FIO), "--target", str(target), "--type", "directory", "--size", "16M", "--mode", "randread",
           "--iodepth", "1", "4", "--numjobs", "1", "--runtime", "2", "--time-based", "--loginterval", "200",
           "--output", str(out)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=scratch)
    assert r.returncode == 0, r.stdout + r.stderr
    results = out / target.name / "4k"
    files = sorted(p.name for p in results.glob("*.json"))
    assert files == ["randread-1-1.json", "randread-4-1.json"], files
    for name in files:
        doc = json.loads((results / name).read_text())
        assert "dcload" in doc["fio version"], doc["fio version"]
        assert doc["jobs"][0]["read"]["total_ios"] > 0, name
        assert doc["jobs"][0]["job options"]["iodepth"] == name.split("-")[1]
    assert list(results.glob("*_bw.*log")), "bench-fio asks for bandwidth logs: dcload wrote none"
    # fio-plot: a bar chart of IOPS and latency by queue depth from those files.
    graph = scratch / "qd.png"
    r = subprocess.run([str(FIO_PLOT), "-i", str(results), "-T", "dcload via bench-fio", "-l", "-r", "randread",
                        "-d", "1", "4", "-n", "1", "-o", str(graph)], capture_output=True, text=True, timeout=300,
                       cwd=scratch)
    assert r.returncode == 0, r.stdout + r.stderr
    assert graph.stat().st_size > 10_000, "fio-plot drew an (almost) empty picture"
    # And a graph of the interval logs over time.
    graph = scratch / "log.png"
    r = subprocess.run([str(FIO_PLOT), "-i", str(results), "-T", "dcload logs", "-g", "-t", "bw", "iops",
                        "-r", "randread", "-d", "4", "-n", "1", "-o", str(graph)], capture_output=True, text=True,
                       timeout=300, cwd=scratch)
    assert r.returncode == 0, r.stdout + r.stderr
    assert graph.stat().st_size > 10_000


@needs_dcload
@pytest.mark.skipif(not FIO2GNUPLOT.exists(), reason="needs fio2gnuplot (Debian's fio package)")
def test_fio2gnuplot_reads_dcload_s_bandwidth_logs(scratch):
    r = subprocess.run([str(DCLOAD), "--name=w", f"--filename={scratch / 'f'}", "--size=8m", "--bs=4k",
                        "--rw=randwrite", "--write_bw_log=w", "--log_avg_msec=100", "--time_based", "--runtime=1"],
                       capture_output=True, text=True, cwd=scratch, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(FIO2GNUPLOT), "-b"], capture_output=True, text=True, cwd=scratch, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "w_bw.1.log" in r.stdout, r.stdout
    stats = dict(line.split("=") for line in (scratch / "result.global").read_text().split())
    # The logged windows' KiB/s: a few MiB/s at least for 4k writes to the page cache.
    assert 1000 < float(stats["avg"]) and float(stats["min"]) <= float(stats["avg"]) <= float(stats["max"]), stats
