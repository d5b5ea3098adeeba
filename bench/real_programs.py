#!/usr/bin/env python3
"""Real programs under each way of keeping them out of the page cache.

Every program copies or unpacks a corpus (one big file, a tree of 50,000
small files and its tar archive, a text file) under each tool, interleaved
(program x tool, then the next repetition), caches dropped before each run.
"x plain" is the wall time against plain's; "x plain+sync" the same until
`sync` returned, which counts the writeback plain leaves behind:

  plain      the program as it is
  run        dontcache run -- PROGRAM (the LD_PRELOAD shim)
  run-syncfs the same with DONTCACHE_SUBMIT=syncfs (batches of closed files
             written back by one syncfs, merged on the disk)
  run-kernel dontcache run --policy kernel: the same shim, the kernel's own
             RWF_DONTCACHE writes instead of the flusher (where supported)
  early-wb   plain with vm.dirty_background_bytes at 8 MiB while it runs (restored
             after): the kernel's own writeback, plugged across files, started as
             early as the library starts its own; a reference for what writing
             back during the run costs, not a peer (it leaves everything cached)
  syncfs-50ms plain with a syncfs(2) of the output's filesystem every 50 ms while it
             runs: the rhythm of the library's batches of closed files (journal
             commits, cache flushes) without the library; a reference, not a peer
  watch      dontcache run --watch -- PROGRAM (shim and fanotify watcher)
  nocache    Debian's nocache PROGRAM
  cgroup     the program in a v1 memory cgroup limited to 256 MiB

Per run: wall time of the program, wall time until `sync` returns after it
(plain leaves its writeback to later), peak Dirty and Cached above idle
(/proc/meminfo at 10 Hz), bytes of output and of input left cached after the
program (cachestat of every file), whether the output is byte-exact
(sha256 of every file against the input's), and the share of the CPUs the
hypervisor took meanwhile (steal; on a busy host it slows any run, mostly
the ones that use more CPU).

--neighbour runs the second table: a hot file read into a memory cgroup that
stands for a small machine, then a copy several times that memory under each
tool inside it; what is left of the hot file in the cache is the figure.

Usage: .venv/bin/python bench/real_programs.py [--dir DIR] [--repeat N] [--programs a,b]
         [--tools plain,run,...] [--big-size 1G] [--json OUT]
       .venv/bin/python bench/real_programs.py --neighbour [--neighbour-memory 1G]
       .venv/bin/python bench/real_programs.py --from-json OUT   (tables again, no runs)

Needs root (drop_caches, cgroups, fanotify), nocache, rsync and busybox-static
(apt), and a release build (make build).
"""

import argparse
import ctypes
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

try:
    from dcbench.monitor import Monitor, peaks
    from dcbench.sizes import parse_size
    from dcbench.system import disk_of, drop_caches, ext4_journal, mount_of, open_files
except ModuleNotFoundError:
    sys.exit("bench/real_programs.py samples memory with dcbench's monitor: run it with the project's Python, "
             ".venv/bin/python bench/real_programs.py ... (make build sets .venv up)")

ROOT = Path(__file__).resolve().parent.parent

DONTCACHE = ROOT / "target" / "release" / "dontcache"
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
CGROUP_LIMIT = 256 << 20
EARLY_WRITEBACK = 8 << 20
SYNCFS_RHYTHM_S = 0.05  # how long the library gathers a batch of closed files for one syncfs
TREE_FILES = 50_000
MIB = 1 << 20

# name -> (argv template, input under the corpus, output under the run dir)
PROGRAMS = {
    "cp big": (["cp", "{src}/big", "{out}/big"], "big", "big"),
    "cat > (redirect)": (["sh", "-c", "cat {src}/big > {out}/big"], "big", "big"),
    "dd bs=1M": (["dd", "if={src}/big", "of={out}/big", "bs=1M", "status=none"], "big", "big"),
    "python shutil.copyfile": ([sys.executable, "-c", "import shutil, sys; shutil.copyfile(sys.argv[1], sys.argv[2])",
                                "{src}/big", "{out}/big"], "big", "big"),
    "busybox cp (static)": (["busybox", "cp", "{src}/big", "{out}/big"], "big", "big"),
    "sort -o": (["sort", "-S", "64M", "-o", "{out}/sorted", "{src}/text"], "text", "sorted"),
    "tar -xf tree": (["tar", "-xf", "{src}/tree.tar", "-C", "{out}"], "tree.tar", "tree"),
    "cp -a tree": (["cp", "-a", "{src}/tree", "{out}/tree"], "tree", "tree"),
    "rsync -a tree": (["rsync", "-a", "{src}/tree/", "{out}/tree/"], "tree", "tree"),
}
# The library holds closed files for its flusher up to 3/4 of its own
# descriptor numbers, and a program waits at that cap. The shim raises the
# soft limit above the program's for them (by the program's limit or 32,768,
# as far as the hard limit allows, crates/preload/src/limits.rs); where the
# hard limit is the soft one it has the upper half of the program's range:
# `tar -xf` of the tree took 1.55x plain's time so under 1,024 and 1.15x
# under 20,000. A soft limit under this one with a hard limit no higher (a
# cap under 3,072) is warned about.
FEW_OPEN_FILES = 8192

TOOLS = ("plain", "run", "run-syncfs", "run-kernel", "early-wb", "syncfs-50ms", "watch", "nocache", "cgroup")
REFERENCES = ("plain", "cgroup", "early-wb", "syncfs-50ms")  # the program itself, as it is


# ---- the corpus ---------------------------------------------------------------


def make_corpus(src: Path, big_size: int) -> None:
    """Lays out the inputs once; an existing corpus of the same size is reused."""
    src.mkdir(parents=True, exist_ok=True)
    big = src / "big"
    refuse_other(big, big_size, "--big-size")
    if not big.exists():
        print(f"writing {big} ({big_size / MIB:.0f} MiB)", flush=True)
        with open(big, "wb") as f:
            block = os.urandom(8 * MIB)
            for i in range(big_size // len(block)):
                f.write(block[: 4096] + i.to_bytes(8, "little") + block[4104:])
    if not (src / "text").exists():
        rng = random.Random(1)
        with open(src / "text.tmp", "w") as f:
            for _ in range(1_000_000):
                f.write(f"{rng.getrandbits(64):016x} {rng.getrandbits(32)}\n")
        os.rename(src / "text.tmp", src / "text")
    tree = src / "tree"
    if not (src / "tree.tar").exists():
        if tree.exists():
            sys.exit(f"{tree} exists without its tar: remove it (the corpus is made again) or pass another --dir")
        print(f"writing {tree} ({TREE_FILES:,} files) and its tar", flush=True)
        rng = random.Random(2)
        for i in range(TREE_FILES):
            d = tree / f"d{i // 200:03d}"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"f{i:05d}").write_bytes(rng.randbytes(rng.choice((1, 2, 4, 8, 16, 32)) * 1024 - rng.randrange(512)))
        with tarfile.open(src / "tree.tar.tmp", "w") as t:
            t.add(tree, arcname="tree")
        os.rename(src / "tree.tar.tmp", src / "tree.tar")
    os.sync()


def refuse_other(path: Path, size: int, option: str) -> None:
    """Stops before replacing a file of another size: it may not be ours."""
    if path.exists() and (not path.is_file() or path.stat().st_size != size):
        sys.exit(f"{path} exists and is not a {size}-byte file: remove it, pass its size with {option}, "
                 "or pass another --dir")


def digest(path: Path) -> str:
    """sha256 over a file, or over a tree's relative paths and contents."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for p in files:
        h.update(str(p.relative_to(path) if p != path else "").encode() + b"\0")
        with open(p, "rb") as f:
            while chunk := f.read(4 * MIB):
                h.update(chunk)
    return h.hexdigest()


# ---- cachestat ------------------------------------------------------------------


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("cache", "dirty", "writeback", "evicted", "recently_evicted")]


_libc = ctypes.CDLL(None, use_errno=True)
SYS_CACHESTAT = 451  # the same on every architecture (a 6.5 addition)


def cached_bytes(path: Path) -> int:
    """Bytes of ``path`` (a file, or every file under a directory) in the page cache."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for p in files:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            rng, st = _Range(0, 0), _Stat()
            if _libc.syscall(SYS_CACHESTAT, fd, ctypes.byref(rng), ctypes.byref(st), 0) != 0:
                raise OSError(ctypes.get_errno(), f"cachestat {p}")
            total += st.cache * page
        finally:
            os.close(fd)
    return total


# ---- tools ----------------------------------------------------------------------


class EarlyWriteback:
    """vm.dirty_background_bytes at ``limit`` inside the block, both of the
    background knobs as they were after it (setting one zeroes the other)."""

    KNOBS = (Path("/proc/sys/vm/dirty_background_bytes"), Path("/proc/sys/vm/dirty_background_ratio"))

    def __init__(self, limit: int, active: bool):
        self.limit, self.active = limit, active

    def __enter__(self):
        if self.active:
            self.saved = [k.read_text() for k in self.KNOBS]
            self.KNOBS[0].write_text(str(self.limit))
        return self

    def __exit__(self, *exc):
        if self.active:
            for knob, value in zip(self.KNOBS, self.saved):
                if int(value):  # the one not in use reads 0, and writing 0 would zero the other
                    knob.write_text(value)


class SyncfsRhythm:
    """A syncfs(2) of the filesystem holding ``path`` every ``interval``
    seconds inside the block, from a thread of this process."""

    def __init__(self, path: Path, interval: float, active: bool):
        self.path, self.interval, self.active = path, interval, active

    def __enter__(self):
        if self.active:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
            self.stop = threading.Event()
            self.failed: OSError | None = None
            self.thread = threading.Thread(target=self._loop, daemon=True)
            self.thread.start()
        return self

    def _loop(self) -> None:
        while not self.stop.wait(self.interval):
            if _libc.syncfs(self.fd) != 0:
                self.failed = OSError(ctypes.get_errno(), f"syncfs {self.path}")
                return

    def __exit__(self, *exc):
        if self.active:
            self.stop.set()
            self.thread.join()
            os.close(self.fd)
            if self.failed is not None:
                raise self.failed


class Cgroup:
    """A v1 memory cgroup that processes join from ``preexec_fn``."""

    def __init__(self, name: str, limit: int, parent: Path = CGROUP_ROOT):
        self.path = parent / name
        self.path.mkdir(exist_ok=True)
        (self.path / "memory.limit_in_bytes").write_text(str(limit))

    def join(self) -> None:
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        for child in [p for p in self.path.iterdir() if p.is_dir()]:
            child.rmdir()
        try:
            self.path.rmdir()
        except OSError:
            pass


def wrap(tool: str, argv: list[str]) -> list[str]:
    if tool in REFERENCES:
        return argv
    if tool == "run":
        return [str(DONTCACHE), "run", "--", *argv]
    if tool == "run-syncfs":
        return ["env", "DONTCACHE_SUBMIT=syncfs", str(DONTCACHE), "run", "--", *argv]
    if tool == "run-kernel":
        return [str(DONTCACHE), "run", "--policy", "kernel", "--", *argv]
    if tool == "watch":
        return [str(DONTCACHE), "run", "--watch", "--", *argv]
    if tool == "nocache":
        return ["nocache", *argv]
    raise ValueError(tool)


def run_one(program: str, tool: str, src: Path, out: Path, logdir: Path, digests: dict, cgroup: Cgroup) -> dict:
    template, inp, outp = PROGRAMS[program]
    argv = wrap(tool, [a.format(src=src, out=out) for a in template])
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if (why := drop_caches()) is not None:
        sys.exit(why)
    time.sleep(0.5)
    csv = logdir / f"{program.split()[0]}-{tool}-{time.time_ns()}.csv"
    with Monitor(csv, disk_of(out)["disk"], hz=10) as mon:
        with EarlyWriteback(EARLY_WRITEBACK, tool == "early-wb"), \
                SyncfsRhythm(out, SYNCFS_RHYTHM_S, tool == "syncfs-50ms"):
            t0 = time.monotonic()
            p = subprocess.run(argv, capture_output=True, text=True,
                               preexec_fn=cgroup.join if tool == "cgroup" else None)
            wall = time.monotonic() - t0
        os.sync()
        wall_sync = time.monotonic() - t0
    if p.returncode != 0:
        return {"failed": f"exit {p.returncode}: {p.stderr.strip()[-300:]}"}
    pk = peaks(mon.rows)
    result = {
        "wall s": wall, "wall+sync s": wall_sync,
        "peak Dirty MiB": pk["peak_dirty_above_idle"] / MIB, "peak Cached MiB": pk["peak_cached_above_idle"] / MIB,
        "out cached %": 100 * cached_bytes(out / outp) / max(1, digests["size:" + outp]),
        "in cached %": 100 * cached_bytes(src / inp) / max(1, digests["size:" + inp]),
        # The share of the CPUs the hypervisor took while the program ran: a
        # run the host slowed says little about the tool (the monitor's rows
        # during the run; the first holds no interval).
        "steal %": statistics.fmean(r.get("cpu_steal_pct", 0.0) for r in mon.rows[1:]) if len(mon.rows) > 1 else 0.0,
    }
    expect = digests[inp] if outp != "sorted" else digests["sorted"]
    result["exact"] = digest(out / outp) == expect
    return result


def input_digests(src: Path) -> dict:
    d = {"big": digest(src / "big"), "tree": digest(src / "tree")}
    d["tree.tar"] = d["tree"]  # unpacking the archive must give the tree
    # As digest() hashes a single file: an empty relative name, then the bytes.
    d["sorted"] = hashlib.sha256(b"\0" + subprocess.run(["sort", src / "text"], capture_output=True,
                                                         check=True).stdout).hexdigest()
    for name in ("big", "text", "tree.tar", "tree"):
        p = src / name
        d["size:" + name] = p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*")
                                                                     if f.is_file())
    d["size:sorted"] = d["size:text"]
    return d


# ---- the neighbour --------------------------------------------------------------


def neighbour(src: Path, scratch: Path, memory: int, repeat: int, tools: list[str]) -> dict:
    """A hot file of half ``memory`` read in a cgroup of ``memory``, then `cp big` under each tool in it."""
    hot = scratch / "hot"
    refuse_other(hot, memory // 2, "--neighbour-memory (twice its size)")
    if not hot.exists():
        subprocess.run(["head", "-c", str(memory // 2), "/dev/urandom"], stdout=open(hot, "wb"), check=True)
    machine = Cgroup("dontcache-bench-machine", memory)
    inner = Cgroup("copy", CGROUP_LIMIT, parent=machine.path)
    results: dict[str, list[float]] = {t: [] for t in tools}
    try:
        for rep in range(repeat):
            for tool in tools:
                drop_caches()
                subprocess.run(["cat", hot], stdout=subprocess.DEVNULL, check=True, preexec_fn=machine.join)
                before = cached_bytes(hot)
                out = scratch / f"copy-{os.getpid()}"
                out.unlink(missing_ok=True)
                argv = ["cp", str(src / "big"), str(out)]
                if tool == "dontcache cp":
                    argv = [str(DONTCACHE), "cp", str(src / "big"), str(out)]
                else:
                    argv = wrap(tool, argv)
                with EarlyWriteback(EARLY_WRITEBACK, tool == "early-wb"), \
                        SyncfsRhythm(scratch, SYNCFS_RHYTHM_S, tool == "syncfs-50ms"):
                    subprocess.run(argv, check=True, preexec_fn=inner.join if tool == "cgroup" else machine.join)
                kept = 100 * cached_bytes(hot) / max(1, before)
                results[tool].append(kept)
                print(f"[{rep + 1}/{repeat}] neighbour {tool:<12} hot file kept {kept:5.1f}% "
                      f"({before / MIB:.0f} MiB cached before)", flush=True)
                out.unlink(missing_ok=True)
    finally:
        inner.remove()
        machine.remove()
    return results


# ---- tables ---------------------------------------------------------------------

COLS = ("wall s", "wall+sync s", "peak Dirty MiB", "peak Cached MiB", "out cached %", "in cached %", "steal %")


def print_tables(raw: dict) -> None:
    progs = raw.get("programs", {})
    if "open_files" in raw:
        print(f"\nRLIMIT_NOFILE of the programs: soft {raw['open_files']['soft']:,}, "
              f"hard {raw['open_files']['hard']:,}")
    if "set_aside" in raw:
        aside = raw["set_aside"]
        print(f"\nRounds set aside, the hypervisor having taken over {aside['max_steal_pct']:g}% of the CPUs in one "
              f"of their runs: {len(aside['rounds'])}")
    if progs:
        n = max(len(r) for t in progs.values() for r in t.values())
        print(f"\n### Real programs (medians of {n}; x plain = wall time against plain's in the same "
              "repetition, median and range of those ratios)\n")
        print("| program | tool | " + " | ".join(COLS) + " | x plain | x plain+sync | exact |")
        print("|---|---|" + "---:|" * (len(COLS) + 2) + "---|")
        for prog, by_tool in progs.items():
            plain = by_tool.get("plain", [])
            for tool, runs in by_tool.items():
                failed = [r["failed"] for r in runs if "failed" in r]
                ok = [r for r in runs if "failed" not in r]
                if not ok:
                    print(f"| {prog} | {tool} | failed: {failed[0][:60]} |" + " |" * (len(COLS) + 2))
                    continue
                med = [_median(ok, c) for c in COLS]
                if tool == "plain":
                    ratio = ratio_sync = "1.00x"
                else:
                    ratio, ratio_sync = _paired(runs, plain, "wall s"), _paired(runs, plain, "wall+sync s")
                exact = "yes" if all(r["exact"] for r in ok) else "NO"
                print(f"| {prog} | {tool} | " + " | ".join("-" if v is None else f"{v:,.1f}" for v in med)
                      + f" | {ratio} | {ratio_sync} | {exact} |")
    if raw.get("neighbour"):
        nb = raw["neighbour"]
        print(f"\n### The neighbour: hot file pages kept, % (medians of {max(len(v) for v in nb.values())})\n")
        print("| tool | kept % | runs |\n|---|---:|---|")
        for tool, vals in nb.items():
            print(f"| {tool} | {statistics.median(vals):.1f} | {', '.join(f'{v:.0f}' for v in vals)} |")


def _paired(runs: list[dict], plain: list[dict], col: str) -> str:
    """A tool's figure over plain's in the same repetition (the runs are
    interleaved, and this machine's speed drifts more between repetitions
    than between neighbouring runs): the median ratio and the range."""
    ratios = [r[col] / p[col] for r, p in zip(runs, plain)
              if "failed" not in r and "failed" not in p and col in r and p.get(col)]
    if not ratios:
        return "-"
    if len(ratios) == 1:
        return f"{ratios[0]:.2f}x"
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def _median(runs: list[dict], col: str) -> float | None:
    vals = [r[col] for r in runs if col in r]
    return statistics.median(vals) if vals else None


# ---- main -----------------------------------------------------------------------


def main() -> None:
    global DONTCACHE
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp/real-programs", help="corpus and scratch (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per program and tool (default %(default)s)")
    ap.add_argument("--programs", default=",".join(PROGRAMS), help="comma-separated subset of: " + ", ".join(PROGRAMS))
    ap.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset of: " + ", ".join(TOOLS))
    ap.add_argument("--big-size", default="1G", help="size of the big file (default %(default)s)")
    ap.add_argument("--neighbour", action="store_true", help="run the neighbour table instead of the programs")
    ap.add_argument("--neighbour-memory", default="1G", help="the small machine's memory (default %(default)s); "
                    "--big-size should be several times this")
    ap.add_argument("--dontcache", default=str(DONTCACHE), help="dontcache binary (default %(default)s)")
    ap.add_argument("--max-steal", type=float, metavar="PCT",
                    help="run a round again when the hypervisor took more than PCT%% of the CPUs in any of its runs "
                         "(at most --repeat times; the rounds set aside stay in --json)")
    ap.add_argument("--json", help="also write every raw figure here")
    ap.add_argument("--from-json", metavar="OUT", help="print the tables of an earlier --json file, run nothing")
    args = ap.parse_args()
    if args.from_json:
        print_tables(json.loads(Path(args.from_json).read_text()))
        return
    DONTCACHE = Path(args.dontcache)
    programs = [p.strip() for p in args.programs.split(",") if p.strip()]
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    for p in programs:
        if p not in PROGRAMS:
            sys.exit(f"unknown program {p!r}; choose from {', '.join(PROGRAMS)}")
    for t in tools:
        if t not in TOOLS:
            sys.exit(f"unknown tool {t!r}; choose from {', '.join(TOOLS)}")
    if os.geteuid() != 0:
        sys.exit("needs root: drop_caches, memory cgroups and fanotify")
    for exe in ("nocache", "rsync", "busybox"):
        if shutil.which(exe) is None:
            sys.exit(f"{exe} is missing: apt-get install nocache rsync busybox-static")
    if not DONTCACHE.exists():
        sys.exit(f"{DONTCACHE} is missing: run `make build` first")
    root = Path(args.dir)
    # Outputs under a name of this run's own: removed between runs and at the end.
    src, out, logdir = root / "corpus", root / f"out-{os.getpid()}", root / "monitor"
    logdir.mkdir(parents=True, exist_ok=True)
    if mount_of(root).get("fs_type") == "ext4" and ext4_journal(disk_of(root)["device"]) is False:
        print(f"warning: {root} is on an ext4 without a journal, which does not reuse inodes freed in the last "
              "minute: the tree programs' creates slow down after each run's output is removed, plain's "
              "too, which hides what the tools cost; a --dir on a journaled filesystem gives figures that "
              "compare", file=sys.stderr)
    make_corpus(src, parse_size(args.big_size))
    raw: dict = {"open_files": open_files()}
    limits = raw["open_files"]
    if limits["soft"] < FEW_OPEN_FILES and limits["hard"] < limits["soft"] * 3 // 2:
        print(f"warning: the RLIMIT_NOFILE is {limits['soft']} (hard {limits['hard']}): the library holds closed "
              "files for its flusher up to 3/8 of it, and under 1,024 `run` unpacked the tree in 1.55x plain's "
              "time against 1.15x under 20,000; `ulimit -Hn` raises the hard limit for the programs run here",
              file=sys.stderr)
    if args.neighbour:
        tools_nb = [t for t in tools if t != "watch"] + ["dontcache cp"]
        raw["neighbour"] = neighbour(src, root, parse_size(args.neighbour_memory), args.repeat, tools_nb)
    else:
        raw["programs"], set_aside = run_programs(programs, tools, src, out, logdir, args.repeat, args.max_steal)
        if args.max_steal is not None:
            raw["set_aside"] = {"max_steal_pct": args.max_steal, "rounds": set_aside}
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1) + "\n")
    print_tables(raw)


def run_programs(programs: list[str], tools: list[str], src: Path, out: Path, logdir: Path, repeat: int,
                 max_steal: float | None = None) -> tuple[dict, list[dict]]:
    """``repeat`` rounds of every program under every tool. With
    ``max_steal``, a round during which the hypervisor took more than that
    share of the CPUs in any of its runs is set aside and run again, up to
    ``repeat`` times more in all: the kept rounds compare the tools, not the
    host's load. Returns the kept runs and the rounds set aside."""
    print("hashing the inputs", flush=True)
    digests = input_digests(src)
    cgroup = Cgroup("dontcache-bench-programs", CGROUP_LIMIT)
    raw = {p: {t: [] for t in tools} for p in programs}
    set_aside: list[dict] = []
    try:
        rep = 0
        while rep < repeat:
            round_ = {p: {} for p in programs}
            for prog in programs:
                for tool in tools:
                    r = run_one(prog, tool, src, out, logdir, digests, cgroup)
                    round_[prog][tool] = r
                    shown = r.get("failed") or "  ".join(f"{k} {v:7.1f}" for k, v in r.items() if k != "exact")
                    print(f"[{rep + 1}/{repeat}] {prog:<24} {tool:<8} {shown}"
                          + ("" if r.get("exact", True) else "  OUTPUT DIFFERS"), flush=True)
            worst = max(r.get("steal %", 0.0) for by_tool in round_.values() for r in by_tool.values())
            if max_steal is not None and worst > max_steal and len(set_aside) < repeat:
                print(f"[{rep + 1}/{repeat}] set aside: the hypervisor took {worst:.1f}% of the CPUs in one of its "
                      f"runs (--max-steal {max_steal:g}); running the round again", flush=True)
                set_aside.append(round_)
                continue
            for prog, by_tool in round_.items():
                for tool, r in by_tool.items():
                    raw[prog][tool].append(r)
            rep += 1
    finally:
        shutil.rmtree(out, ignore_errors=True)
        cgroup.remove()
    return raw, set_aside


if __name__ == "__main__":
    main()
