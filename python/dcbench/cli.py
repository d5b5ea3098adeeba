"""The ``dcbench`` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .errors import UserError
from .profiles import PROFILES, profiles_help

EPILOG = """\
examples:
  dcbench run                                  quick matrix in /var/tmp, results in ./results
  dcbench run --dir /mnt/scratch --repeat 3    three interleaved repetitions
  dcbench run --profile full --memory 4G       the seed's sizes, page cache limited to 4 GiB
  dcbench run --scenarios seq-write,noisy-neighbor --modes buffered,writebehind
  dcbench run --dry-run                        the plan with sizes and an estimated duration
  dcbench run --fs xfs --device zram:8g        on a fresh XFS on a memory-backed device
  dcbench run --nfs --modes buffered,dontcache,direct,writebehind:lazy
                                               over NFS: the modes are dcnfsd's io modes
  dcbench list                                 scenarios and modes
  dcbench compare RUN_A RUN_B --format commit  before/after with noise verdicts
  dcbench compare RUN --against dontcache      one run's modes against the kernel's, paired by repetition
  dcbench report RUN [--compare OTHER]         report.html and report.md with plots
  dcbench history --scenario seq-write --mode dontcache --metric mb_s

Memory: --memory SIZE leaves SIZE for the page cache by holding the rest of the
available memory in an anonymous balloon for the run (released on any exit);
files are sized from SIZE by each scenario's rules (2x for single streams,
SIZE/4 per multi-writer, ...). --cgroup DIR instead runs dcload in a cgroup v2
directory you created, with memory.max set to SIZE.

Testbeds: --fs xfs makes a fresh XFS for the run on a loop device over a
file in DIR (direct I/O, so it runs at the disk's speed); --device zram:8g
puts it on a memory-backed device instead, --device /dev/nvme1n1 on a disk
you name (never a mounted one; one holding data only with --force). The
manifest records the device, mkfs and mount options; the filesystem is
unmounted and the device detached on every exit, Ctrl-C included.

NFS: --nfs runs the seed's nfsd-io-bench idea: dcnfsd (or with --nfs nfsd the
kernel's nfsd) serves DIR/dcbench-<run-id>/export on loopback, each case puts
the server in its mode for reads and writes (nfsd's io_cache_read and
io_cache_write), and dcload's nfs engine is the client. Monitors sample the
server side (the same machine). Scenarios of many small files are skipped.
--nfs-server HOST:/EXPORT runs over a server already running elsewhere, in the
one mode it is in (--modes names it; recorded as given, not switched).

Every run records which RWF_DONTCACHE the kernel has (dontcache probe on the
target: inline flush in 6.14-7.1, flusher kick from 7.2, block devices from
7.3) in its manifest, summary and report; compare warns when two runs differ.

Safety: dcbench writes only in DIR/dcbench-<run-id>/, which it creates and
removes (with --nfs-server also files dcbench-<run-id>.* on that server, which
dcload unlinks), and refuses /, non-directories and too little free space. Ctrl-C
stops dcload, releases the balloon, removes the files and marks the results
incomplete. Needs root to drop caches before each case (else it warns).
"""


def _size(text: str) -> int:
    from .sizes import parse_size

    try:
        n = parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is no size: give more than 0 (like 512m or 4g)")
    return n


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return n


def _positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = 0
    # NaN compares false with everything: test for what is wanted.
    if not (0 < x <= 1000):
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate between 0 and 1000 per second")
    return x


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one line and exit 2, like every other bad input."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


# One piece: the argparse table of every subcommand and option, in --help order.
def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(
        prog="dcbench",
        description="The dontcache benchmark suite: buffered, RWF_DONTCACHE, O_DIRECT and libdontcache "
        "write-behind I/O through dcload, with monitors, repetitions and stored results.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--version", action="version", version=f"dcbench {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run = sub.add_parser("run", help="run the benchmark matrix", epilog=EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--dir", default="/var/tmp", help="scratch directory to create dcbench-<run-id>/ in (default %(default)s)")
    run.add_argument("--results", default="results", help="results root: <run-id>/ directories and their index dcbench.sqlite (default ./%(default)s)")
    run.add_argument("--scenarios", help="all (default) or a comma-separated list of names or .toml paths")
    run.add_argument("--modes",
                     help="default (buffered,dontcache,direct,writebehind:flusher), all, or a comma-separated "
                     "list of modes (`dcbench list` shows them; writebehind alone is every policy)")
    run.add_argument("--profile", choices=tuple(PROFILES), default="quick",
                     help=profiles_help() + " (default %(default)s)")
    run.add_argument("--memory", type=_size, help="memory the page cache may use (the profile's default otherwise)")
    run.add_argument("--no-balloon", action="store_true", help="size files from --memory but do not limit memory")
    run.add_argument("--cgroup", help="limit memory with this cgroup v2 directory (you create it) instead of a balloon")
    run.add_argument("--size", type=_size, help="per-file size for every role that scales with memory")
    run.add_argument("--repeat", type=_positive_int, help="repetitions, interleaved (default 1)")
    run.add_argument("--monitor-hz", type=_positive_float, default=4.0, help="monitor sampling rate (default %(default)s)")
    tb = run.add_argument_group(
        "testbed", "a fresh filesystem for the run, made before the first case and undone on any exit "
        "(needs root)")
    tb.add_argument("--fs", choices=("ext4", "xfs", "btrfs"),
                    help="make this filesystem for the run and put every case's files on it")
    tb.add_argument("--device", metavar="SPEC",
                    help="where: loop[:SIZE] (a loop device with direct I/O over a file in --dir; default, sized to "
                    "the largest case), zram:SIZE[:ALGORITHM] (memory-backed, fast), or a block device /dev/X "
                    "(refused when mounted; when it holds a filesystem or partitions, refused unless --force)")
    tb.add_argument("--mkfs-opts", metavar="OPTS", default="", help="extra mkfs options, one string ('-b size=4096')")
    tb.add_argument("--mount-opts", metavar="OPTS", help="mount -o options ('noatime,discard')")
    tb.add_argument("--force", action="store_true",
                    help="format a --device that holds a filesystem or partitions (what is destroyed is recorded)")
    tb.add_argument("--fresh-fs-per-case", action="store_true",
                    help="make the filesystem again before every case, not only once")
    run.add_argument("--nfs", nargs="?", const="dcnfsd", choices=("dcnfsd", "nfsd"),
                     help="run the cases over NFS, the mode being the server's io mode for reads and writes: "
                     "dcnfsd (default: this project's server, started on loopback over the scratch directory) or "
                     "nfsd (the kernel's, where /sys/kernel/debug/nfsd has io_cache_read/io_cache_write; dcbench "
                     "exports the directory with exportfs, sets the knobs and puts them back). Clients are dcload's "
                     "nfs engine, one connection per job")
    run.add_argument("--nfs-server", metavar="SERVER",
                     help="run the cases over an NFS server that is already running: HOST:/EXPORT or "
                     "nfs://HOST/EXPORT[?nfsport=P&mountport=P]. dcbench cannot switch its io mode: name the one "
                     "mode it is in with --modes (recorded as given); files dcbench-<run-id>.* are written at the "
                     "export's top and unlinked after each case. Monitors sample this machine, not the server")
    run.add_argument("--dcload", help="the dcload binary (default: this checkout's target/release/dcload, then PATH)")
    run.add_argument("--dry-run", action="store_true", help="print the plan and an estimated duration, do nothing")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no table, only the results path")
    sub.add_parser("list", help="list scenarios and modes")

    c = sub.add_parser("compare", help="before/after tables with a noise verdict per figure",
                       description="Compares runs (ids or directories): for each scenario, mode, role and figure, "
                       "A, B, change and a verdict: better/worse when Welch's t-test rejects equality at 95%% with "
                       ">= 3 repetitions on each side, noise when it does not, n<3 with fewer. Later runs are "
                       "compared with the first. Differences in the manifests and control cases (direct mode, "
                       "buffered reads) that moved are listed first.")
    c.add_argument("runs", nargs="+", metavar="RUN", help="run ids (in --results) or run directories; the first is A")
    c.add_argument("--against", metavar="MODE",
                   help="compare the modes of one RUN with its MODE instead (dontcache: the kernel's "
                   "RWF_DONTCACHE): each mode's figure over MODE's in the same repetition, the median ratio, its "
                   "range and a verdict from a t-test on the ratios; each role's files/s or MB/s unless --metrics")
    c.add_argument("--results", default="results", help="results root (default ./%(default)s)")
    c.add_argument("--format", choices=("term", "md", "commit"), default="term",
                   help="term: coloured table; md: Markdown; commit: plain text <= 72 columns for a commit message")
    c.add_argument("--metrics", default=None, help="comma-separated figures (default: " + ", ".join(
        ("mb_s", "files_s", "lat_p50_us", "lat_p99_us", "lat_p999_us", "cpu_system_pct", "peak_dirty",
         "peak_cached")) + ")")

    r = sub.add_parser("report", help="report.html and report.md with plots for a run (or two)")
    r.add_argument("run", metavar="RUN", help="run id or directory")
    r.add_argument("--compare", metavar="OTHER", help="a second run to overlay and compare (B)")
    r.add_argument("--results", default="results", help="results root (default ./%(default)s)")
    r.add_argument("--out", help="output directory (default RUN/report, or RUN/report-vs-OTHER)")

    h = sub.add_parser("history", help="one figure across every stored run")
    h.add_argument("--scenario", help="only this scenario")
    h.add_argument("--mode", help="only this mode")
    h.add_argument("--role", help="only this role ('*' for system-wide figures)")
    h.add_argument("--metric", default="mb_s", help="figure to show (default %(default)s; see docs/results.md)")
    h.add_argument("--results", default="results", help="results root (default ./%(default)s)")
    h.add_argument("--all", action="store_true", help="include incomplete runs")
    h.add_argument("--plot", metavar="FILE", help="also draw the history into FILE (.svg or .png)")
    h.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return ap


def _config(a: argparse.Namespace):
    from .modes import find_dcload, parse_modes, use_dcload
    from .runner import RunConfig
    from .scenario import select

    profile = PROFILES[a.profile]
    results = Path(a.results)
    if results.exists() and not results.is_dir():
        raise UserError(f"--results {a.results}: is a file, not a directory; name a directory for the results")
    if a.nfs and a.nfs_server:
        raise UserError(f"--nfs starts a server ({a.nfs}) and --nfs-server names a running one: pass one of them")
    if a.nfs_server:
        from .nfs import server_url

        server_url(a.nfs_server)  # refuses a malformed one before anything runs
    cgroup = None
    if a.cgroup:
        cgroup = Path(a.cgroup)
        if not (cgroup / "cgroup.procs").exists() or not (cgroup / "memory.max").exists():
            raise UserError(f"--cgroup {a.cgroup}: not a cgroup v2 directory with the memory controller "
                            "(it needs cgroup.procs and memory.max); create it and enable memory in its parent")
    if a.memory is not None:
        memory = a.memory
    elif profile.memory is not None:
        memory = profile.memory
    else:
        from . import procfs

        memory = procfs.parse_meminfo(Path("/proc/meminfo").read_text())["MemTotal"]
    explicit_limit = a.memory is not None or profile.memory is not None
    testbed = _testbed(a, profile)
    dcload = find_dcload(a.dcload)
    use_dcload(dcload)
    balloon = explicit_limit and not a.no_balloon and cgroup is None
    return RunConfig(
        scenarios=select(a.scenarios or profile.scenarios or "all"),
        modes=parse_modes(a.modes or profile.modes or "default"),
        repeat=a.repeat or profile.repeat or 1,
        profile=profile,
        memory=memory,
        balloon=balloon,
        size_override=a.size,
        target=Path(a.dir).absolute(),
        # Absolute: dcload runs in each case's directory and writes its output there.
        results=Path(a.results).absolute(),
        dcload=dcload,
        monitor_hz=a.monitor_hz,
        quiet=a.quiet,
        cgroup=cgroup,
        argv=sys.argv[:],
        testbed=testbed,
        nfs=a.nfs,
        nfs_server=a.nfs_server,
    )


def _testbed(a: argparse.Namespace, profile):
    import shlex

    from .runner import TestbedConfig
    from .testbed import parse_device

    fs, device = a.fs, a.device
    if fs is None and profile.fs is not None:
        # The profile's testbed, unless the user named another device for its filesystem.
        fs, device = profile.fs, device or profile.device
    if fs is None:
        given = [o for o, v in (("--device", a.device), ("--mkfs-opts", a.mkfs_opts), ("--mount-opts", a.mount_opts),
                                ("--force", a.force), ("--fresh-fs-per-case", a.fresh_fs_per_case)) if v]
        if given:
            raise UserError(f"{given[0]} needs --fs (ext4, xfs or btrfs): it describes the filesystem dcbench makes")
        return None
    try:
        mkfs_opts = shlex.split(a.mkfs_opts)
    except ValueError as e:
        raise UserError(f"--mkfs-opts {a.mkfs_opts!r}: {e}") from None
    return TestbedConfig(fs=fs, device=parse_device(device or "loop"), mkfs_opts=mkfs_opts,
                         mount_opts=a.mount_opts, force=a.force, fresh_per_case=a.fresh_fs_per_case)


def _dry_run(cfg) -> int:
    from .modes import io_conditions
    from .runner import case_bytes, estimate_s, file_bytes, plan_cases
    from .sizes import format_size

    cases = plan_cases(cfg, cfg.modes)
    print(f"plan: {len(cases)} cases ({len(cfg.scenarios)} scenarios x {len(cfg.modes)} modes x {cfg.repeat}), "
          f"profile {cfg.profile.name}, page-cache memory {format_size(cfg.memory)}"
          + (" (balloon)" if cfg.balloon else ""))
    if cfg.testbed:
        tb = cfg.testbed
        print(f"testbed: a new {tb.fs} on {tb.device}" + (" before every case" if tb.fresh_per_case else "")
              + (f", mkfs {' '.join(tb.mkfs_opts)}" if tb.mkfs_opts else "")
              + (f", mounted -o {tb.mount_opts}" if tb.mount_opts else ""))
    for s in cfg.scenarios:
        roles = ", ".join(
            f"{r.name}: {r.count}x{format_size(file_bytes(r, cfg))}"
            + (f"x{r.files_per_job} files" if r.files_per_job else "")
            + f" {io_conditions(r.job)}"
            + (" pre-created" if r.precreate else "")
            + (f" until {r.until}" if r.until else "")
            for r in s.roles
        )
        modes = [m.name for m in cfg.modes if m.family in s.modes]
        print(f"  {s.name:<22} {format_size(case_bytes(s, cfg)):>9}  {roles}  [{', '.join(modes)}]")
    total = sum(estimate_s(c, cfg) for c in cases)
    largest = format_size(max(case_bytes(s, cfg) for s in cfg.scenarios))
    where = f"on the testbed ({cfg.testbed.device})" if cfg.testbed else f"free in {cfg.target}"
    print(f"estimated duration: about {total / 60:.0f} min ({total:.0f} s); needs {largest} {where}")
    return 0


class _Progress:
    """A rich progress bar over the estimated seconds of the whole matrix."""

    def __init__(self, console, total: float):
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.p = Progress(TextColumn("{task.description:<40}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                          TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console,
                          transient=True)
        self.task = self.p.add_task("starting", total=total)
        self.p.start()

    def start_case(self, label: str) -> None:
        self.p.update(self.task, description=label)

    def advance(self, seconds: float) -> None:
        self.p.advance(self.task, seconds)

    def close(self) -> None:
        self.p.stop()


def _print_summary(console, runner) -> None:
    from rich.table import Table

    from .summary import cell, columns_for, io_note, mode_cell

    rows = getattr(runner, "summary_rows", [])
    if not rows:
        return
    if (note := io_note(rows)) is not None:
        console.print(note, style="bold yellow", markup=False, highlight=False)
    table = Table(title=f"dcbench {runner.run_id} (medians)", show_lines=False)
    cols = columns_for(rows)
    for h in ["scenario", "mode", "role", "n"] + [h for _, h, _ in cols]:
        table.add_column(h, justify="left" if h in ("scenario", "mode", "role") else "right")
    last = None
    for r in rows:
        table.add_row(r["scenario"] if r["scenario"] != last else "", mode_cell(r), r["role"], str(r["n"]),
                      *[cell(r, k, f) for k, _, f in cols])
        last = r["scenario"]
    console.print(table)


def cmd_run(a: argparse.Namespace) -> int:
    from rich.console import Console

    from .runner import Runner

    cfg = _config(a)
    if a.dry_run:
        return _dry_run(cfg)
    console = Console(stderr=True)
    interactive = console.is_terminal and not a.quiet
    runner = Runner(cfg, console=console)
    factory = (lambda total: _Progress(console, total)) if interactive else None
    rc = runner.run(progress_factory=factory)
    out = Console()
    if not a.quiet:
        if out.is_terminal:
            _print_summary(out, runner)
        elif (runner.run_dir / "summary.md").exists():
            # Not a terminal (a log, a pipe): the Markdown table, not one squeezed to 80 columns.
            sys.stdout.write((runner.run_dir / "summary.md").read_text())
    if not runner.run_dir.exists():
        print("results: none (stopped before the first case)")
        return rc
    status = runner.manifest.get("status", "failed")
    failed = runner.manifest.get("cases_failed", 0)
    if failed:
        status += f", {failed} case(s) failed: see summary.md"
        rc = rc or 1
    print(f"results: {runner.run_dir} ({status}; summary.md, manifest.json, {cfg.results}/dcbench.sqlite)")
    return rc


def cmd_list(_a) -> int:
    from .modes import DEFAULT_MODES, catalogue
    from .scenario import select

    for s in select("all"):
        print(f"{s.name:<22} {s.description}")
    print()
    print(f"modes (default: {', '.join(DEFAULT_MODES)}):")
    for m in catalogue()["modes"]:
        print(f"  {m['name']:<22} {m['description']}")
    return 0


def cmd_compare(a) -> int:
    from rich.console import Console

    from . import compare as cmp
    from .results import load

    root = Path(a.results)
    runs = [load(spec, root) for spec in a.runs]
    if a.against is not None:
        return _compare_modes(a, runs)
    if len(runs) < 2:
        raise UserError("compare needs at least two runs (A B [C ...])")
    metrics = tuple(m.strip() for m in a.metrics.split(",")) if a.metrics else cmp.DEFAULT_METRICS
    base = runs[0]
    for other in runs[1:]:
        c = cmp.compare(base, other, metrics)
        if not c.rows:
            raise UserError(f"{base.run_id} and {other.run_id} have no scenario and mode in common to compare")
        if a.format == "md":
            sys.stdout.write(cmp.render_markdown(c))
        elif a.format == "commit":
            sys.stdout.write(cmp.render_commit(c))
        else:
            cmp.print_terminal(c, Console())
    return 0


def _compare_modes(a, runs) -> int:
    """``compare RUN --against MODE``: the modes of one run against one of them."""
    from rich.console import Console

    from . import against

    if len(runs) != 1:
        raise UserError(f"--against compares the modes of one run; {len(runs)} runs were given: name one RUN "
                        "(to compare runs, leave --against out)")
    run = runs[0]
    modes = run.manifest.get("modes") or sorted({m for _, m in run.cases()})
    if a.against not in modes:
        raise UserError(f"--against {a.against}: run {run.run_id} has no such mode; it ran {', '.join(modes)}")
    metrics = tuple(m.strip() for m in a.metrics.split(",")) if a.metrics else None
    rows = against.against(run.by_rep, run.manifest, a.against, metrics)
    if not rows:
        raise UserError(f"run {run.run_id}: no scenario ran both {a.against} and another mode with "
                        f"{', '.join(metrics) if metrics else 'MB/s or files/s'} to set side by side")
    if a.format == "term":
        against.print_terminal(rows, a.against, run.run_id, Console())
    elif a.format == "commit":
        sys.stdout.write(against.render_commit(rows, a.against))
    else:
        sys.stdout.write("\n".join([f"# {run.run_id}", ""] + against.render_markdown(rows, a.against)))
    return 0


def cmd_report(a) -> int:
    from .report import build
    from .results import load

    root = Path(a.results)
    run = load(a.run, root)
    other = load(a.compare, root) if a.compare else None
    out = Path(a.out) if a.out else run.directory / ("report" if other is None else f"report-vs-{other.run_id}")
    html, md = build(run, other, out)
    print(f"report: {html}\n        {md}")
    return 0


def cmd_history(a) -> int:
    from . import history

    rows = history.query(Path(a.results), a.scenario, a.mode, a.metric, a.role, a.all)
    if not rows:
        raise UserError("no stored run has that figure; check --scenario, --mode, --role and --metric "
                        "(dcbench list shows scenarios and modes)")
    if a.json:
        print(history.to_json(rows))
    else:
        from rich.console import Console
        from rich.table import Table

        t = Table(title=f"{a.metric} across runs (median per run)")
        for col in ("started", "run", "host", "kernel", "scenario", "mode", "role", "n", a.metric):
            t.add_column(col, justify="right" if col in ("n", a.metric) else "left")
        for r in rows:
            t.add_row(r["started"], r["run_id"], r["host"] or "", r["kernel"] or "", r["scenario"], r["mode"],
                      r["role"], str(r["n"]), f"{r['median']:,.2f}")
        Console().print(t)
    if a.plot:
        history.plot(rows, a.metric, Path(a.plot))
        print(f"plot: {a.plot}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    if a.command is None:
        ap.print_help()
        return 2
    try:
        return {"run": cmd_run, "list": cmd_list, "compare": cmd_compare, "report": cmd_report,
                "history": cmd_history}[a.command](a)
    except UserError as e:
        print(f"dcbench: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dcbench: interrupted", file=sys.stderr)
        return 130
