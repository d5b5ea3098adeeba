"""``dcbench compare A B [C ...]``: before/after with a verdict per figure.

A verdict is ``better`` or ``worse`` when Welch's t-test (unequal variances)
rejects equal means at 95% with at least 3 repetitions on each side, ``noise``
when it does not, and ``n<3`` when either side has fewer than 3. Direction
matters: more MB/s is better, more latency is worse. Every later run is
compared with the first.

Control cases are figures a change to uncached writes should not move:
everything in ``direct`` mode, and buffered reads. When one of them moves
beyond noise, the machine or its conditions differ between the runs, and
the comparison says so first, as it does for differences in the manifests.

A figure measured at another engine or depth in B than in A (``io`` in the
manifests) gets the verdict ``conditions differ`` instead of a test: the
change would be the harness's, not the code's.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from . import generation
from .metrics import HIGHER_IS_BETTER, steal_note
from .results import Run
from .scenario import available, load_scenario

ALPHA = 0.05
CONDITIONS_DIFFER = "conditions differ"
MIN_N = 3
DEFAULT_METRICS = (
    "mb_s", "files_s", "lat_p50_us", "lat_p99_us", "lat_p999_us", "cpu_system_pct", "peak_dirty", "peak_cached",
)
LABELS = {
    "mb_s": "MB/s", "iops": "IOPS", "files_s": "files/s", "lat_avg_us": "avg lat us",
    "lat_p50_us": "p50 lat us", "lat_p99_us": "p99 lat us", "lat_p999_us": "p99.9 lat us",
    "cpu_system_pct": "sys CPU %", "cpu_sys_pct": "job sys CPU %", "peak_dirty": "peak Dirty MiB",
    "peak_cached": "peak Cached MiB", "peak_writeback": "peak Writeback MiB", "disk_w_iops": "disk w IOPS",
}
# Shown in MiB rather than bytes.
BYTES = {"peak_dirty", "peak_cached", "peak_writeback"}


def verdict(a: list[float], b: list[float], higher_is_better: bool) -> str:
    """``better``/``worse`` (B relative to A), ``noise`` or ``n<3``."""
    if len(a) < MIN_N or len(b) < MIN_N:
        return "n<3"
    ma, mb = float(np.mean(a)), float(np.mean(b))
    va, vb = float(np.var(a, ddof=1)), float(np.var(b, ddof=1))
    if va == 0 and vb == 0:
        # No spread at all: any difference is real (counts, exact figures).
        p = 1.0 if ma == mb else 0.0
    else:
        with warnings.catch_warnings():
            # Nearly identical samples make scipy warn about precision; the
            # verdict for them is noise either way.
            warnings.simplefilter("ignore", RuntimeWarning)
            p = float(stats.ttest_ind(b, a, equal_var=False).pvalue)
    return decided(p, mb > ma, higher_is_better)


def decided(p: float, up: bool, higher_is_better: bool) -> str:
    """The verdict of a test's p-value (NaN: samples too alike to test) on
    a figure that went ``up`` or down."""
    if math.isnan(p) or p >= ALPHA:
        return "noise"
    return "better" if up == higher_is_better else "worse"


@dataclass
class Row:
    scenario: str
    mode: str
    role: str
    metric: str
    a: list[float]
    b: list[float]
    verdict: str
    # A control case: a mode whose figures a change to uncached I/O should
    # not move (the scenario file's ``controls``).
    control: bool = False

    @property
    def mean_a(self) -> float:
        return float(np.mean(self.a))

    @property
    def mean_b(self) -> float:
        return float(np.mean(self.b))

    @property
    def change_pct(self) -> float | None:
        if self.mean_a == 0:
            return None
        return 100.0 * (self.mean_b - self.mean_a) / abs(self.mean_a)


@dataclass
class Comparison:
    a: Run
    b: Run
    rows: list[Row]
    manifest_diffs: list[str]
    only_a: list[tuple[str, str]]
    only_b: list[tuple[str, str]]
    warnings: list[str]

    @property
    def control_alarms(self) -> list[Row]:
        return [r for r in self.rows if r.control and r.verdict in ("better", "worse")]


def _flat(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


# Manifest fields whose difference changes what the numbers mean.
MANIFEST_FIELDS = (
    "system.kernel", "system.cpus", "system.mem_total", "system.open_files.soft", "system.open_files.hard",
    "system.target.fs_type", "system.target.device",
    "system.target.scheduler", "system.target.mount_options", "system.target.read_ahead_kb",
    "memory.effective", "memory.method", "profile",
    "testbed.fs", "testbed.device", "testbed.mkfs", "testbed.mount_options", "testbed.algorithm",
    "kernel_dontcache.generation", "kernel_dontcache.block_devices.supported",
)


def manifest_diffs(a: dict, b: dict) -> list[str]:
    fa, fb = _flat(a), _flat(b)
    keys = list(MANIFEST_FIELDS) + sorted(k for k in set(fa) | set(fb) if k.startswith(("system.vm.", "environment.")))
    return [f"{k}: {fa.get(k)} -> {fb.get(k)}" for k in keys if fa.get(k) != fb.get(k)]


def compare(a: Run, b: Run, metrics: tuple[str, ...] = DEFAULT_METRICS) -> Comparison:
    warnings = []
    for run in (a, b):
        if not run.complete:
            warnings.append(f"run {run.run_id} is {run.manifest.get('status', 'unknown')}: "
                            "comparing the cases it finished")
    ka, kb = (r.manifest.get("kernel_dontcache") or {} for r in (a, b))
    ga, gb = generation.label(ka), generation.label(kb)
    if ka.get("generation") and kb.get("generation") and ga != gb:
        warnings.append(f"the kernels' RWF_DONTCACHE differ: A {ga}; B {gb} (the dontcache mode is not the "
                        "same I/O in both)")
    for run in (a, b):
        if (stolen := steal_note(run.samples)) is not None:
            warnings.append(f"run {run.run_id}: {stolen}")
    ca, cb = a.cases(), b.cases()
    common = ca & cb
    rows = []
    io_changes: dict[tuple[str, str], str] = {}
    for key in sorted(set(a.samples) & set(b.samples)):
        scenario, mode, role, metric = key
        if metric not in metrics or (scenario, mode) not in common:
            continue
        va, vb = a.samples[key], b.samples[key]
        io_a, io_b = case_io(a, scenario, mode, role), case_io(b, scenario, mode, role)
        if io_a is not None and io_b is not None and io_a != io_b:
            v = CONDITIONS_DIFFER
            io_changes.setdefault((scenario, mode), f"{io_a} -> {io_b}")
        else:
            v = verdict(va, vb, HIGHER_IS_BETTER.get(metric, True))
        rows.append(Row(scenario, mode, role, metric, va, vb, v, is_control(a, scenario, mode)))
    order = {s: i for i, s in enumerate(a.manifest.get("scenarios", []))}
    morder = {m: i for i, m in enumerate(a.manifest.get("modes", []))}
    rows.sort(key=lambda r: (order.get(r.scenario, 99), r.scenario, morder.get(r.mode, 99), r.mode,
                             r.role == "*", r.role, metrics.index(r.metric)))
    for (scenario, mode), change in io_changes.items():
        warnings.append(f"{CONDITIONS_DIFFER} for {scenario} {mode}: engine and depth {change}, "
                        "its figures are not compared")
    return Comparison(a, b, rows, manifest_diffs(a.manifest, b.manifest),
                      sorted(ca - cb), sorted(cb - ca), warnings)


def is_control(run: Run, scenario: str, mode: str) -> bool:
    """Whether ``mode`` is a control case of ``scenario`` as the run
    recorded it, or, for runs that did not, as its scenario file says now."""
    controls = (run.manifest.get("controls") or {}).get(scenario)
    if controls is None:
        known = available()
        controls = load_scenario(known[scenario]).controls if scenario in known else ("direct",)
    return mode in controls or mode.split(":")[0] in controls


def case_io(run: Run, scenario: str, mode: str, role: str) -> str | None:
    """The engine and depth a role ran at (for ``*``, every role's, joined);
    None for runs that did not record it."""
    roles = (run.manifest.get("io") or {}).get(scenario, {}).get(mode)
    if not roles:
        return None
    if role == "*":
        return ", ".join(f"{k} {v}" for k, v in sorted(roles.items()))
    return roles.get(role)


def fmt_value(metric: str, v: float) -> str:
    if metric in BYTES:
        v = v / (1 << 20)
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_change(c: float | None) -> str:
    return "n/a" if c is None else f"{c:+.1f}%"


def label(r: Row, with_scenario: bool = False) -> str:
    who = r.mode if r.role in ("*",) else f"{r.mode} {r.role}"
    base = f"{who} {LABELS.get(r.metric, r.metric)}"
    return f"{r.scenario} {base}" if with_scenario else base


def header_lines(c: Comparison) -> list[str]:
    lines = []
    if c.manifest_diffs:
        lines.append(f"manifests differ between {c.a.run_id} and {c.b.run_id}:")
        lines += [f"  {d}" for d in c.manifest_diffs]
    alarms = c.control_alarms
    if alarms:
        what = ", ".join(f"{r.mode} {r.scenario}{'' if r.role == '*' else ' ' + r.role} "
                         f"{LABELS.get(r.metric, r.metric)} {fmt_change(r.change_pct)}" for r in alarms[:4])
        more = f" and {len(alarms) - 4} more" if len(alarms) > 4 else ""
        lines.append(f"conditions differ between A and B: {what}{more}, significant "
                     "(control cases a change to uncached writes should not move)")
    decided = [r for r in c.rows if r.verdict not in ("n<3", CONDITIONS_DIFFER)]
    moved = [r for r in decided if r.verdict in ("better", "worse")]
    if decided:
        lines.append(f"{len(moved)} of {len(decided)} figures beyond noise; at 95% about "
                     f"{ALPHA * len(decided):.0f} would be by chance alone (verdicts are per figure, "
                     "not corrected for comparing many)")
    for w in c.warnings:
        lines.append(f"warning: {w}")
    if c.only_a or c.only_b:
        lines.append("compared only the cases both runs have; "
                     + "; ".join(filter(None, [
                         f"only in A: {', '.join(f'{s} {m}' for s, m in c.only_a)}" if c.only_a else "",
                         f"only in B: {', '.join(f'{s} {m}' for s, m in c.only_b)}" if c.only_b else "",
                     ])))
    return lines


def render_markdown(c: Comparison) -> str:
    out = [f"# {c.a.run_id} (A) vs {c.b.run_id} (B)", ""]
    out += [f"- {line}" for line in header_lines(c)]
    out.append("")
    scenario = None
    for r in c.rows:
        if r.scenario != scenario:
            scenario = r.scenario
            out += ["", f"## {scenario}", "", "| figure | A | B | change | verdict |", "|---|---:|---:|---:|---|"]
        out.append(f"| {label(r)} | {fmt_value(r.metric, r.mean_a)} | {fmt_value(r.metric, r.mean_b)} | "
                   f"{fmt_change(r.change_pct)} | {r.verdict} |")
    out.append("")
    out.append(f"Means of {', '.join(sorted({str(len(r.a)) for r in c.rows}))} (A) and "
               f"{', '.join(sorted({str(len(r.b)) for r in c.rows}))} (B) repetitions; verdicts by Welch's "
               f"t-test at 95% (n<3: too few repetitions to tell).")
    return "\n".join(out) + "\n"


COMMIT_WIDTH = 72


def render_commit(c: Comparison) -> str:
    """Plain text for a commit message: Before/After/Change, never wider than 72 columns."""
    num, chg, ver = 9, 8, 7
    lab = COMMIT_WIDTH - 2 - 2 * (num + 1) - (chg + 1) - (ver + 1)
    out = []
    for line in header_lines(c):
        out += wrap(line, COMMIT_WIDTH)
    if out:
        out.append("")
    scenario = None
    for r in c.rows:
        if r.scenario != scenario:
            if scenario is not None:
                out.append("")
            scenario = r.scenario
            out.append(f"{scenario}:")
            out.append(f"  {'':<{lab}} {'Before':>{num}} {'After':>{num}} {'Change':>{chg}} {'':<{ver}}".rstrip())
        name = label(r)
        if len(name) > lab:
            # A long label gets a line of its own rather than being cut.
            out += wrap(f"  {name}", COMMIT_WIDTH)
            name = ""
        out.append(f"  {name:<{lab}} {fmt_value(r.metric, r.mean_a):>{num}} {fmt_value(r.metric, r.mean_b):>{num}} "
                   f"{fmt_change(r.change_pct):>{chg}} {short_verdict(r.verdict):<{ver}}".rstrip())
    return "\n".join(out) + "\n"


def short_verdict(v: str) -> str:
    """A verdict in at most 7 columns (the header says what ``io diff`` is)."""
    return "io diff" if v == CONDITIONS_DIFFER else v


def wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width=width, subsequent_indent="  ", break_long_words=True) or [""]


STYLE = {"better": "green", "worse": "red", "noise": "dim", "n<3": "yellow", CONDITIONS_DIFFER: "bold red"}


def print_terminal(c: Comparison, console) -> None:
    from rich.table import Table

    for line in header_lines(c):
        style = "bold red" if line.startswith(("conditions differ", "manifests differ", "warning: conditions")) else "yellow"
        console.print(line, style=style, markup=False, highlight=False)
    table = Table(title=f"{c.a.run_id} (A) vs {c.b.run_id} (B)")
    for h, j in (("scenario", "left"), ("figure", "left"), ("A", "right"), ("B", "right"),
                 ("change", "right"), ("verdict", "left")):
        table.add_column(h, justify=j)
    last = None
    for r in c.rows:
        style = STYLE.get(r.verdict, "")
        table.add_row(r.scenario if r.scenario != last else "", label(r), fmt_value(r.metric, r.mean_a),
                      fmt_value(r.metric, r.mean_b), fmt_change(r.change_pct), r.verdict, style=style)
        last = r.scenario
    console.print(table)
