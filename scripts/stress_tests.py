#!/usr/bin/env python3
"""Runs the workspace's Rust test binaries several copies at once, their output to files.

CI runs each test binary once, alone, its output piped to `tee`. Two things
it does not try, both of which have hidden test failures: a machine busier
than the tests make it themselves (a copy of the binary beside it: a spin of
50 ms of wall time got 16 ms of CPU), and standard output and error that are
regular files (`cargo test > log`: programs a test starts under the shim
inherit them, and the shim tracks them like any file). This runs every test
binary (or the ones named) `--copies` at a time for `--rounds` rounds, each
copy's output in a file of its own in a new directory under `--logs`, and
names each failed test with the log that holds its message. Exits 1 if any
copy failed or ran past `--timeout`. Needs root and what `make test` needs;
takes about 12 minutes at the defaults. Run by `make stress`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAILED_TEST = re.compile(r"^test (\S+) \.\.\. FAILED$", re.MULTILINE)


def test_binaries() -> dict[str, Path]:
    """Every test binary of the workspace by its target name, built if needed."""
    r = subprocess.run(
        ["cargo", "test", "--release", "--workspace", "--no-run", "--message-format=json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        sys.exit(f"stress_tests: building the tests failed (run `make test` to see why):\n{r.stderr[-2000:]}")
    out = r.stdout
    binaries = {}
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["profile"]["test"]:
            target = msg["target"]
            # A crate's library, its programs and a test file may share a
            # name: say which.
            kind = target["kind"][0]
            name = target["name"] if kind == "test" else f"{target['name']} ({kind})"
            binaries[name] = Path(msg["executable"])
    return binaries


def run_copies(name: str, exe: Path, copies: int, logs: Path, tag: str, timeout: float) -> list[str]:
    """Runs `copies` of `exe` at once; returns what failed, one line each."""
    procs = []
    for i in range(1, copies + 1):
        log = logs / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.{tag}.{i}.log"
        with log.open("x") as f:
            procs.append((log, subprocess.Popen([exe], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)))
    failures = []
    deadline = time.monotonic() + timeout
    for log, proc in procs:
        try:
            rc = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            failures.append(f"{name}: still running after {timeout:.0f} s (killed), see {log}")
            continue
        if rc != 0:
            tests = FAILED_TEST.findall(log.read_text(errors="replace")) or [f"exit status {rc}"]
            failures.extend(f"{name}: {t}, see {log}" for t in tests)
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="test binaries to run (default: all; e.g. behaviour handoff)")
    ap.add_argument("--copies", type=int, default=2, help="copies of each binary run at once (default 2)")
    ap.add_argument("--rounds", type=int, default=2, help="times over the list (default 2)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds a round of one binary may take (default 900)")
    ap.add_argument("--logs", type=Path, default=Path("/var/tmp"),
                    help="where the run's own new log directory is made (default /var/tmp)")
    args = ap.parse_args()
    if args.copies < 1 or args.rounds < 1:
        ap.error("--copies and --rounds must be at least 1")
    if not args.logs.is_dir():
        ap.error(f"--logs {args.logs}: not a directory; give one the new log directory can be made in")
    binaries = test_binaries()
    unknown = [n for n in args.names if n not in binaries]
    if unknown:
        ap.error(f"no test binary named {', '.join(unknown)}; there are: {', '.join(sorted(binaries))}")
    chosen = {n: binaries[n] for n in (args.names or sorted(binaries))}
    # A directory of its own, made exclusively: nothing already there (another user's link in /var/tmp) is
    # written through.
    logs = Path(tempfile.mkdtemp(prefix="dontcache-stress-", dir=args.logs))
    print(f"logs in {logs}", flush=True)
    failures = []
    for rnd in range(1, args.rounds + 1):
        for name, exe in chosen.items():
            start = time.monotonic()
            failed = run_copies(name, exe, args.copies, logs, f"round{rnd}", args.timeout)
            failures += failed
            verdict = "ok" if not failed else f"{len(failed)} failed"
            print(f"round {rnd}/{args.rounds}  {name:<24} {verdict}  ({time.monotonic() - start:.0f} s)", flush=True)
    for f in failures:
        print(f"FAILED {f}")
    print(f"{len(failures)} failure(s) in {args.rounds} round(s) of {len(chosen)} binaries x {args.copies} copies")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
