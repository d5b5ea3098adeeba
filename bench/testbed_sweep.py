#!/usr/bin/env python3
"""Where does the kernel's inline-flush RWF_DONTCACHE fall behind buffered I/O?

Runs dcbench's writer scenarios (one stream, 4 writers, 32 writers, a
dontcache writer against a buffered one) in buffered, dontcache (the running
kernel's RWF_DONTCACHE) and writebehind:flusher (libdontcache's flusher kick,
the design merged for 7.2) on each testbed, then prints one Markdown table of
medians with the ratios that matter: dontcache/buffered (the "before": below
1 is the collapse) and flusher/dontcache (the "after" against it). Modes are
interleaved within each testbed's run, so ratios within a row are valid;
figures across testbeds compare testbeds, not modes.

    bench/testbed_sweep.py --repeat 3 --json bench/testbed-sweep.json
    bench/testbed_sweep.py --table bench/testbed-sweep.json     # table only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DCBENCH = REPO / ".venv" / "bin" / "dcbench"
SCENARIOS = "seq-write,multi-write,axboe-write,competing-writers"
MODES = "buffered,dontcache,writebehind:flusher"
# (filesystem, device): the machine's disk through a loop device with direct
# I/O, and a memory-backed device far faster than the disk.
TESTBEDS = [("ext4", "loop:6g"), ("xfs", "loop:6g"), ("ext4", "zram:6g:lz4"), ("xfs", "zram:6g:lz4")]


def run_testbed(fs: str, device: str, args) -> str:
    cmd = [str(DCBENCH), "run", "--dir", args.dir, "--results", args.results, "--fs", fs, "--device", device,
           "--scenarios", SCENARIOS, "--modes", MODES, "--repeat", str(args.repeat), "--memory", args.memory, "-q"]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"testbed_sweep: {fs} on {device} failed:\n{out.stderr}{out.stdout}")
    line = next(x for x in out.stdout.splitlines() if x.startswith("results: "))
    return Path(line.split()[1]).name


def medians(results: Path, run_id: str) -> dict:
    """(scenario, mode, role) -> median MB/s and p99.9 latency, (scenario, mode) -> peak Dirty, and
    the run's testbed and kernel record."""
    run_dir = results / run_id
    manifest = json.loads((run_dir / "manifest.json").read_text())
    rows = json.loads((run_dir / "summary.json").read_text())["rows"]
    return {"testbed": manifest["testbed"], "kernel_dontcache": manifest["kernel_dontcache"],
            "memory": manifest["memory"]["effective"], "profile": manifest["profile"],
            "mb_s": {f"{r['scenario']}|{r['mode']}|{r['role']}": r["mb_s"] for r in rows},
            "peak_dirty": {f"{r['scenario']}|{r['mode']}": r["peak_dirty"] for r in rows if "peak_dirty" in r},
            "p999_us": {f"{r['scenario']}|{r['mode']}|{r['role']}": r["lat_p999_us"] for r in rows
                        if "lat_p999_us" in r},
            "n": min(r["n"] for r in rows)}


def table(sweep: list[dict]) -> str:
    out = ["| testbed | scenario | role | buffered MB/s | dontcache MB/s | flusher MB/s | dontcache / buffered "
           "| flusher / dontcache | n |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for t in sweep:
        tb = t["testbed"]
        name = f"{tb['fs']} on {tb['device'].split(':')[0]}, {t['memory'] >> 30} GiB cache, {t['profile']}"
        order = SCENARIOS.split(",")
        roles = {(s, r) for s, _, r in (k.split("|") for k in t["mb_s"]) if r != "*"}
        for scenario, role in sorted(roles, key=lambda sr: (order.index(sr[0]), sr[1])):
            b, d, f = (t["mb_s"].get(f"{scenario}|{m}|{role}") for m in MODES.split(","))
            if None in (b, d, f):
                continue
            out.append(f"| {name} | {scenario} | {role} | {b:,.0f} | {d:,.0f} | {f:,.0f} | {d / b:.2f} "
                       f"| {f / d:.2f} | {t['n']} |")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp", help="scratch directory (loop images go here)")
    ap.add_argument("--results", default=str(REPO / "results"), help="dcbench results root")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory", default="1g", help="page-cache memory (dcbench --memory)")
    ap.add_argument("--json", help="write the medians here")
    ap.add_argument("--table", metavar="JSON", help="print the table of an earlier sweep and stop")
    ap.add_argument("--from-runs", metavar="ID,...", help="collect these finished dcbench runs instead of running")
    args = ap.parse_args()
    if args.table:
        sys.stdout.write(table(json.loads(Path(args.table).read_text())["sweep"]))
        return 0
    def run_ids():
        if args.from_runs:
            yield from args.from_runs.split(",")
            return
        for fs, device in TESTBEDS:
            yield run_testbed(fs, device, args)

    sweep = []
    for run_id in run_ids():
        sweep.append({"run_id": run_id, **medians(Path(args.results), run_id)})
        if args.json:
            Path(args.json).write_text(json.dumps({"repeat": args.repeat, "memory": args.memory,
                                                   "sweep": sweep}, indent=1) + "\n")
    sys.stdout.write(table(sweep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
