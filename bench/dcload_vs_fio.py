#!/usr/bin/env python3
"""dcload next to fio on the same files, in one run, interleaved.

Each case runs fio and dcload alternately REPEAT times (default 3) and reports
the median of throughput, CPU time per I/O and clat percentiles, and the
dcload/fio ratios the targets are stated in. Caches are dropped before every
run; write cases start from a new file each time, as fio and dcload both lay
it out with fallocate.

Usage: bench/dcload_vs_fio.py [--dir DIR] [--repeat N] [--size 4g] [--json OUT]
Needs root (drop_caches), fio and a release build of dcload.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DCLOAD = ROOT / "target" / "release" / "dcload"

CASES = [
    # name, job options, direction
    ("buffered 1M seq write + end_fsync, io_uring QD16",
     ["--rw=write", "--bs=1M", "--ioengine=io_uring", "--iodepth=16", "--end_fsync=1"], "write"),
    ("buffered 1M seq write + end_fsync, psync",
     ["--rw=write", "--bs=1M", "--ioengine=psync", "--end_fsync=1"], "write"),
    ("O_DIRECT 1M seq write, io_uring QD16",
     ["--rw=write", "--bs=1M", "--ioengine=io_uring", "--iodepth=16", "--direct=1"], "write"),
    ("O_DIRECT 4k rand read, io_uring QD16, 10 s",
     ["--rw=randread", "--bs=4k", "--ioengine=io_uring", "--iodepth=16", "--direct=1",
      "--time_based", "--runtime=10"], "read"),
    ("O_DIRECT 4k rand read, io_uring QD16 sqthread_poll fixedbufs, 10 s",
     ["--rw=randread", "--bs=4k", "--ioengine=io_uring", "--iodepth=16", "--direct=1",
      "--sqthread_poll=1", "--fixedbufs=1", "--time_based", "--runtime=10"], "read"),
    ("O_DIRECT 16k rand write, io_uring QD8, 10 s",
     ["--rw=randwrite", "--bs=16k", "--ioengine=io_uring", "--iodepth=8", "--direct=1",
      "--time_based", "--runtime=10"], "write"),
]


def drop_caches():
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def preflight():
    """Refuses to run without root or a dcload build; returns fio's version line."""
    if os.geteuid() != 0:
        sys.exit("needs root to drop caches between runs")
    if not DCLOAD.exists():
        sys.exit(f"{DCLOAD} missing: run `make build` first")
    return subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()


def run(tool, opts, path, size):
    cmd = [str(DCLOAD) if tool == "dcload" else "fio", "--name=bench", f"--filename={path}",
           f"--size={size}", "--output-format=json", *opts]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{tool} failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr}")
    # fio may print warnings before the JSON.
    return json.loads(out.stdout[out.stdout.index("{"):])


def metrics(doc, direction):
    job = doc["jobs"][0]
    d = job[direction]
    runtime_s = job["job_runtime"] / 1000
    cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100 * runtime_s
    pct = d["clat_ns"]["percentile"]
    return {
        "MB/s": d["bw_bytes"] / 1e6,
        "IOPS": d["iops"],
        "CPU us/IO": cpu_s * 1e6 / max(d["total_ios"], 1),
        "clat p50 us": pct["50.000000"] / 1000,
        "clat p99 us": pct["99.000000"] / 1000,
        "clat p99.9 us": pct["99.900000"] / 1000,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp/dcload-vs-fio", help="scratch directory (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool and case (default %(default)s)")
    ap.add_argument("--size", default="4g", help="file size (default %(default)s)")
    ap.add_argument("--json", help="also write every raw figure here")
    ap.add_argument("--cases", default="", help="only cases whose name contains this text")
    args = ap.parse_args()
    fio_version = preflight()
    scratch = Path(args.dir)
    scratch.mkdir(parents=True, exist_ok=True)
    raw = {}
    try:
        for name, opts, direction in [c for c in CASES if args.cases in c[0]]:
            path = scratch / "bench.dat"
            if direction == "read":
                run("fio", ["--rw=write", "--bs=1M", "--end_fsync=1"], path, args.size)  # lay out once
            samples = {"fio": [], "dcload": []}
            for i in range(args.repeat):
                for tool in ("fio", "dcload") if i % 2 == 0 else ("dcload", "fio"):
                    if direction == "write" and path.exists():
                        path.unlink()
                    drop_caches()
                    samples[tool].append(metrics(run(tool, opts, path, args.size), direction))
                    print(f"  {name} [{tool} {i + 1}/{args.repeat}]: {samples[tool][-1]['MB/s']:.0f} MB/s",
                          file=sys.stderr)
            raw[name] = samples
            if path.exists():
                path.unlink()
    finally:
        for p in scratch.glob("bench.dat"):
            p.unlink()
    kernel = os.uname().release
    print(f"dcload vs {fio_version}, kernel {kernel}, {args.size} files, median of {args.repeat} interleaved runs")
    print("(MB/s range: lowest and highest run, to show the noise)\n")
    keys = ["MB/s", "IOPS", "CPU us/IO", "clat p50 us", "clat p99 us", "clat p99.9 us"]
    print("| case | tool | MB/s range | " + " | ".join(keys) + " |")
    print("|---|---|---|" + "---:|" * len(keys))
    for name, samples in raw.items():
        med = {t: {k: statistics.median(s[k] for s in samples[t]) for k in keys} for t in samples}
        for tool in ("fio", "dcload"):
            lo, hi = min(s["MB/s"] for s in samples[tool]), max(s["MB/s"] for s in samples[tool])
            print(f"| {name} | {tool} | {lo:,.0f}-{hi:,.0f} | " + " | ".join(f"{med[tool][k]:,.1f}" for k in keys) + " |")
        ratio = {k: med["dcload"][k] / med["fio"][k] if med["fio"][k] else float("nan") for k in keys}
        print(f"| {name} | **dcload/fio** | | " + " | ".join(f"{ratio[k]:.2f}x" for k in keys) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"fio": fio_version, "kernel": kernel, "runs": raw}, indent=1))


if __name__ == "__main__":
    main()
