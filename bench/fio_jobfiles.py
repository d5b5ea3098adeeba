#!/usr/bin/env python3
"""fio's own job files, run by fio and by dcload side by side.

For each job file (read from ../shared/fio-jobs, fio's licence: never copied
into the project), a derived copy is written to the scratch directory with
the same small sizes put into every job section (so neither tool's rule for
command-line options against job-file options matters): filename, size,
runtime, ramp_time and startdelay. fio and dcload then run that copy
alternately REPEAT times, caches dropped before each run, and the script
reports per file:

- I/O counts: each job's read, write and trim I/Os (total_ios), which must
  be equal for jobs bound by size (time-based jobs do as many as they can);
- bandwidth: dcload's over fio's, median of the runs;
- JSON key set: the key paths of each tool's job objects (array indices
  and percentile keys folded), missing in dcload's and added by it (its own
  `dcload` object aside).

Usage: bench/fio_jobfiles.py [--repeat N] [--size 64m] [--runtime 2] [--json OUT] [FILE ...]
Needs root (drop_caches), fio and a release build of dcload.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from dcload_vs_fio import DCLOAD, ROOT, drop_caches, preflight

JOBS = ROOT.parent / "shared" / "fio-jobs"

# Files that run on both tools with local files, covering sequential and
# random, sync and async engines, mixes, rates, verify, logs and groups.
DEFAULT_FILES = [
    "examples/fio-seq-read.fio",
    "examples/fio-seq-write.fio",
    "examples/fio-rand-read.fio",
    "examples/fio-rand-write.fio",
    "examples/fio-seq-RW.fio",
    "examples/fio-rand-RW.fio",
    "examples/aio-read.fio",
    "examples/backwards-read.fio",
    "examples/basic-verify.fio",
    "examples/butterfly.fio",
    "examples/iometer-file-access-server.fio",
    "examples/jesd219.fio",
    "examples/ssd-test.fio",
    "examples/tiobench-example.fio",
    "examples/zipf.fio",
    "examples/null.fio",
    "examples/fixed-rate-submission.fio",
    "examples/falloc.fio",
    "t-jobs/t0012.fio",
    "t-jobs/t0014.fio",
]

# Options the derived copy sets in every section, dropping the file's own.
OVERRIDDEN = {"filename", "directory", "size", "filesize", "io_size", "io_limit", "runtime", "timeout",
              "ramp_time", "startdelay", "loops", "nrfiles", "nr_files", "write_bw_log", "write_lat_log",
              "write_iops_log", "write_hist_log"}


def derived(text, filename, size, runtime):
    """The job file with our sizes in every section instead of its own."""
    put = [f"filename={filename}", f"size={size}", f"runtime={runtime}", "ramp_time=0", "startdelay=0"]
    out = []
    for line in text.splitlines():
        body = re.split(r"\s[;#]", line, maxsplit=1)[0].strip()
        key = body.split("=", 1)[0].strip().lower()
        if key in OVERRIDDEN:
            continue
        out.append(line)
        # Job sections only: fio adds a job's filename= to the one it
        # inherits from [global] (two files of half the size each).
        if re.fullmatch(r"\[[^\]]+\]", body) and body.lower() != "[global]":
            out.extend(put)
    return "\n".join(out) + "\n"


def run(tool, job_file, workdir):
    exe = str(DCLOAD) if tool == "dcload" else "fio"
    out_json = workdir / f"{tool}.json"
    cmd = [exe, str(job_file), "--output-format=json", f"--output={out_json}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, timeout=120)
    except subprocess.TimeoutExpired:
        return None, ["did not end within 120 s (killed)"]
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip().splitlines()[-1:] or ["failed"]
    text = out_json.read_text()
    return json.loads(text[text.index("{"):]), None


def key_paths(value, prefix=""):
    """`jq paths` of a job object, array indices and percentile keys folded."""
    paths = set()
    if isinstance(value, dict):
        for k, v in value.items():
            k = "<pct>" if re.fullmatch(r"\d+\.\d+", k) else k
            p = f"{prefix}.{k}"
            paths.add(p)
            paths |= key_paths(v, p)
    elif isinstance(value, list):
        for v in value:
            paths |= key_paths(v, prefix + "[]")
    return paths


def figures(doc):
    jobs = doc["jobs"]
    ios = [tuple(j[d]["total_ios"] for d in ("read", "write", "trim")) for j in jobs]
    bw = sum(j[d]["bw_bytes"] for j in jobs for d in ("read", "write", "trim"))
    return {"ios": ios, "bw": bw}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="job files under ../shared/fio-jobs (default: a list of 20)")
    ap.add_argument("--dir", default="/var/tmp/fio-jobfiles", help="scratch directory (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool and file (default %(default)s)")
    ap.add_argument("--size", default="64m", help="size= in every section (default %(default)s)")
    ap.add_argument("--runtime", default="2", help="runtime= in every section, seconds (default %(default)s)")
    ap.add_argument("--json", help="also write every raw figure here")
    args = ap.parse_args()
    fio_version = preflight()
    if not JOBS.is_dir():
        sys.exit(f"{JOBS} missing: fio's job files are read from there")
    scratch = Path(args.dir)
    scratch.mkdir(parents=True, exist_ok=True)
    raw = {}
    for name in args.files or DEFAULT_FILES:
        work = scratch / Path(name).stem
        work.mkdir(exist_ok=True)
        text = (JOBS / name).read_text()
        job_file = work / "job.fio"
        job_file.write_text(derived(text, work / "data", args.size, args.runtime))
        runs = {"fio": [], "dcload": []}
        keys = {}
        failed = None
        for i in range(args.repeat):
            for tool in ("fio", "dcload") if i % 2 == 0 else ("dcload", "fio"):
                drop_caches()
                doc, err = run(tool, job_file, work)
                if doc is None:
                    failed = f"{tool}: {err[0]}"
                    break
                runs[tool].append(figures(doc))
                keys[tool] = set().union(*(key_paths(j) for j in doc["jobs"]))
            if failed:
                break
        for p in work.glob("data*"):
            p.unlink()
        time_based = "time_based" in text
        raw[name] = {"runs": runs, "failed": failed, "time_based": time_based,
                     "missing": sorted(keys.get("fio", set()) - keys.get("dcload", set())),
                     "added": sorted(p for p in keys.get("dcload", set()) - keys.get("fio", set())
                                     if not p.startswith(".dcload"))}
        print(f"  {name}: {failed or 'ok'}", file=sys.stderr)
    kernel = os.uname().release
    print(f"dcload vs {fio_version}, kernel {kernel}, size={args.size} runtime={args.runtime}s in every section, "
          f"median of {args.repeat} interleaved runs\n")
    print("| job file | jobs | I/O counts (read, write, trim per job) | same counts | dcload/fio bandwidth "
          "| JSON keys missing in dcload | added |")
    print("|---|---:|---|---|---:|---:|---:|")
    for name, r in raw.items():
        if r["failed"]:
            print(f"| {name} | | {r['failed']} | | | | |")
            continue
        fio_ios, dc_ios = r["runs"]["fio"][0]["ios"], r["runs"]["dcload"][0]["ios"]
        same = "time-based" if r["time_based"] else ("yes" if fio_ios == dc_ios else f"no (fio {fio_ios})")
        bw = {t: statistics.median(x["bw"] for x in r["runs"][t]) for t in ("fio", "dcload")}
        ratio = f"{bw['dcload'] / bw['fio']:.2f}x" if bw["fio"] else "n/a"
        counts = "; ".join(",".join(str(n) for n in job) for job in dc_ios)
        print(f"| {name} | {len(dc_ios)} | {counts} | {same} | {ratio} | {len(r['missing'])} | {len(r['added'])} |")
    missing = sorted(set().union(*(set(r["missing"]) for r in raw.values())))
    if missing:
        print("\nKey paths fio's JSON has and dcload's lacks (any file):", ", ".join(missing))
    if args.json:
        Path(args.json).write_text(json.dumps({"fio": fio_version, "kernel": kernel, "files": raw}, indent=1))


if __name__ == "__main__":
    main()
