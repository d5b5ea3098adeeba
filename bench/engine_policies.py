#!/usr/bin/env python3
"""libdontcache's policies next to buffered, kernel RWF_DONTCACHE and O_DIRECT.

Three workloads (the engine's speed targets), each in every mode, interleaved
(workload x mode, then the next repetition) so drift hits all modes alike:

  1 writer    one 8 GiB file of 1M sequential writes, end_fsync (in the time)
  4 writers   four 2 GiB files, 1M sequential writes each, end_fsync
  32 writers  the seed's "Axboe test": 32 files, 64k writes, 20 s time-based

All modes use dcload's pvsync2 engine so they differ only in the mode:
plain pwritev2, pwritev2(RWF_DONTCACHE), O_DIRECT, or libdontcache in
process with a policy (writebehind=...; `flusher+uring` is the flusher
submitting its pass as io_uring SYNC_FILE_RANGE SQEs). Before every run the
files are removed, the system synced and caches dropped. A monitor samples
/proc/meminfo at 10 Hz; "peak Dirty" and "peak Cached" are the highest value
during the run minus the value just before it.

Usage: bench/engine_policies.py [--dir DIR] [--repeat N] [--json OUT]
         [--workloads 1,4,32] [--modes buffered,kernel,...]
         bench/engine_policies.py --from-json OUT   (tables again, no runs)

Prints a Markdown table of medians per workload, then flusher's figures
against the engine's speed targets.
Needs root (drop_caches) and a release build (make build).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
from dcbench.monitor import Monitor, peaks  # noqa: E402
from dcbench.system import disk_of, drop_caches  # noqa: E402

DCLOAD = ROOT / "target" / "release" / "dcload"

WORKLOADS = {
    "1": ("1 writer, 1M seq, 8 GiB + fsync",
          ["--numjobs=1", "--size=8g", "--bs=1M", "--rw=write", "--end_fsync=1"]),
    "4": ("4 writers, 1M seq, 4 x 2 GiB + fsync",
          ["--numjobs=4", "--size=2g", "--bs=1M", "--rw=write", "--end_fsync=1"]),
    "32": ("32 writers, 64k seq, 20 s (Axboe)",
           ["--numjobs=32", "--size=1g", "--bs=64k", "--rw=write", "--time_based", "--runtime=20"]),
}

# mode name -> (dcload options, extra environment)
MODES = {
    "buffered": ([], {}),
    "kernel-dontcache": (["--uncached=1"], {}),
    "direct": (["--direct=1"], {}),
    "flusher": (["--writebehind=flusher"], {"DONTCACHE_SUBMIT": "loop"}),
    "flusher+uring": (["--writebehind=flusher"], {"DONTCACHE_SUBMIT": "uring"}),
    "lazy": (["--writebehind=lazy"], {}),
    "inline": (["--writebehind=inline"], {}),
    "per-file": (["--writebehind=per-file"], {}),
    "wb-kernel": (["--writebehind=kernel"], {}),
}


def clean(workdir: Path):
    for p in workdir.iterdir():
        p.unlink()


def run_one(workdir: Path, workload: str, mode: str, csv_path: Path) -> dict:
    opts, env_extra = MODES[mode]
    cmd = [str(DCLOAD), "--name=w", f"--directory={workdir}", "--ioengine=pvsync2",
           "--group_reporting", "--output-format=json", *WORKLOADS[workload][1], *opts]
    env = dict(os.environ, **env_extra)
    clean(workdir)
    if (why := drop_caches()) is not None:
        sys.exit(why)
    time.sleep(1)  # let the drop settle before the idle sample
    with Monitor(csv_path, disk_of(workdir)["disk"], hz=10) as mon:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"dcload failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr}")
    job = json.loads(out.stdout)["jobs"][0]
    w = job["write"]
    pct = w["clat_ns"]["percentile"]
    pk = peaks(mon.rows)
    return {
        "MB/s": w["bw_bytes"] / 1e6,
        "p99 ms": pct["99.000000"] / 1e6,
        "p99.9 ms": pct["99.900000"] / 1e6,
        "peak Dirty MiB": pk["peak_dirty_above_idle"] / 2**20,
        "peak Cached MiB": pk["peak_cached_above_idle"] / 2**20,
    }


def main():
    global DCLOAD
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp/engine-policies", help="scratch directory (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per workload and mode (default %(default)s)")
    ap.add_argument("--workloads", default="1,4,32", help="comma-separated: 1, 4, 32 (default %(default)s)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of: " + ", ".join(MODES))
    ap.add_argument("--json", help="also write every raw figure here")
    ap.add_argument("--dcload", default=str(DCLOAD), help="dcload binary (default %(default)s)")
    ap.add_argument("--from-json", metavar="OUT", help="print the tables of an earlier --json file, run nothing")
    args = ap.parse_args()
    if args.from_json:
        raw = json.loads(Path(args.from_json).read_text())
        print_tables(raw, max(len(runs) for modes in raw.values() for runs in modes.values()))
        return
    DCLOAD = Path(args.dcload)
    workloads = args.workloads.split(",")
    modes = args.modes.split(",")
    for w in workloads:
        if w not in WORKLOADS:
            sys.exit(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")
    for m in modes:
        if m not in MODES:
            sys.exit(f"unknown mode {m!r}; choose from {', '.join(MODES)}")
    if os.geteuid() != 0:
        sys.exit("needs root to drop caches between runs")
    if not DCLOAD.exists():
        sys.exit(f"{DCLOAD} is missing: run `make build` first")

    root = Path(args.dir)
    workdir = root / "files"
    logdir = root / "monitor"
    workdir.mkdir(parents=True, exist_ok=True)
    logdir.mkdir(parents=True, exist_ok=True)
    raw = {w: {m: [] for m in modes} for w in workloads}
    try:
        for rep in range(args.repeat):
            for w in workloads:
                for m in modes:
                    r = run_one(workdir, w, m, logdir / f"{w}-{m}-{rep}.csv")
                    raw[w][m].append(r)
                    print(f"[{rep + 1}/{args.repeat}] {WORKLOADS[w][0]:<38} {m:<17} "
                          + "  ".join(f"{k} {v:9.1f}" for k, v in r.items()), flush=True)
    finally:
        clean(workdir)

    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1) + "\n")
    print_tables(raw, args.repeat)


def print_tables(raw: dict, repeat: int):
    cols = ["MB/s", "p99 ms", "p99.9 ms", "peak Dirty MiB", "peak Cached MiB"]
    for w, by_mode in raw.items():
        print(f"\n### {WORKLOADS[w][0]} (median of {repeat})\n")
        print("| mode | " + " | ".join(cols) + " |")
        print("|---|" + "---:|" * len(cols))
        for m, runs in by_mode.items():
            med = [statistics.median(r[c] for r in runs) for c in cols]
            print(f"| {m} | " + " | ".join(f"{v:,.1f}" for v in med) + " |")
    print_targets(raw, repeat)


def print_targets(raw: dict, repeat: int):
    """Issue 3's targets for `flusher`, from the medians, where measured."""
    def med(w, m, col):
        runs = raw.get(w, {}).get(m)
        return statistics.median(r[col] for r in runs) if runs else None

    rows = []

    def ratio(label, w, num, den_modes, col, limit, at_most=False):
        a = med(w, num, col)
        dens = [(med(w, m, col), m) for m in den_modes]
        dens = [(v, m) for v, m in dens if v is not None]
        if a is None or not dens:
            return
        b, m = max(dens)
        x = a / b
        met = x <= limit if at_most else x >= limit
        rows.append((label, f"{a:,.1f} / {b:,.1f} ({m}) = {x:.2f}x", "yes" if met else "no"))

    ratio("1 writer: MB/s >= 0.9x kernel", "1", "flusher", ["kernel-dontcache"], "MB/s", 0.9)
    ratio("1 writer: MB/s >= 2x buffered", "1", "flusher", ["buffered"], "MB/s", 2.0)
    ratio("4 writers: MB/s >= 0.9x best of buffered, kernel", "4", "flusher",
          ["buffered", "kernel-dontcache"], "MB/s", 0.9)
    ratio("32 writers: MB/s >= 1.0x kernel", "32", "flusher", ["kernel-dontcache"], "MB/s", 1.0)
    for w, limit in (("1", 64), ("32", 256)):
        d = med(w, "flusher", "peak Dirty MiB")
        if d is not None:
            rows.append((f"{w} writer(s): peak Dirty <= {limit} MiB above idle", f"{d:,.1f} MiB",
                         "yes" if d <= limit else "no"))
    for w in ("1", "4", "32"):
        ratio(f"{w} writer(s): p99.9 <= 1.5x kernel's", w, "flusher", ["kernel-dontcache"], "p99.9 ms", 1.5,
              at_most=True)
    if rows:
        print(f"\n### flusher against the engine's speed targets (medians of {repeat})\n")
        print("| target | measured | met |\n|---|---|---|")
        for r in rows:
            print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
