"""One run's modes against a reference mode, paired by repetition.

A run's repetitions are interleaved: each runs every scenario in every mode
before the next begins, so the cases of one repetition ran seconds to minutes
apart, while the machine's speed drifts between repetitions and runs (on
this project's virtual disk the kernel's ``RWF_DONTCACHE`` mode of the
32-writer scenario wrote 3.1-3.4 GB/s to the disk in one run, 1.9-3.0 GB/s
in others the same day). A mode's figure divided by
the reference mode's in the same repetition cancels that drift; the median of
those ratios, their range and a verdict on them say more than a ratio of two
medians taken over different repetitions.

The verdict is ``better`` or ``worse`` when a one-sample t-test on the
logarithms of the ratios rejects a ratio of 1 at 95% with at least 3 pairs,
``noise`` when it does not, ``n<3`` with fewer pairs, and ``conditions
differ`` when the mode ran the role at another engine or depth than the
reference (the ratio would be the harness's, not the mode's).
"""

from __future__ import annotations

import math
import statistics
import textwrap
import warnings
from dataclasses import dataclass

from scipy import stats

from .compare import COMMIT_WIDTH, CONDITIONS_DIFFER, LABELS, MIN_N, STYLE, decided, short_verdict, wrap
from .metrics import HIGHER_IS_BETTER
from .results import Key

# What a role's line stands for when no figure is asked for: files/s where
# the role creates files, else MB/s.
PRIMARY_METRICS = ("files_s", "mb_s")


@dataclass
class Paired:
    scenario: str
    mode: str
    role: str
    metric: str
    # The mode's figure over the reference's, one per repetition both finished.
    ratios: list[float]
    verdict: str

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)


def against(by_rep: dict[Key, dict[int, float]], manifest: dict, reference: str,
            metrics: tuple[str, ...] | None = None) -> list[Paired]:
    """Every other mode's figures over ``reference``'s, per scenario and role,
    from a run's figures by repetition (``results.samples_by_rep``) and its
    manifest. ``metrics``: the figures to pair (default: each role's primary
    figure)."""
    values = {k: v for k, v in by_rep.items() if k[2] != "*"}
    io = manifest.get("io") or {}
    rows = []
    for (scenario, mode, role, metric), figures in values.items():
        if mode == reference:
            continue
        ref = values.get((scenario, reference, role, metric))
        if ref is None or not _wanted(values, scenario, mode, role, metric, metrics):
            continue
        reps = sorted(set(figures) & set(ref))
        ratios = [figures[r] / ref[r] for r in reps if ref[r] > 0 and figures[r] > 0]
        if not ratios:
            continue
        roles = io.get(scenario, {})
        mine, theirs = roles.get(mode, {}).get(role), roles.get(reference, {}).get(role)
        if mine is not None and theirs is not None and mine != theirs:
            v = CONDITIONS_DIFFER
        else:
            v = verdict(ratios, HIGHER_IS_BETTER.get(metric, True))
        rows.append(Paired(scenario, mode, role, metric, ratios, v))
    order = {s: i for i, s in enumerate(manifest.get("scenarios", []))}
    morder = {m: i for i, m in enumerate(manifest.get("modes", []))}
    forder = {m: i for i, m in enumerate(metrics or ())}
    rows.sort(key=lambda r: (order.get(r.scenario, 1 << 30), r.scenario, r.role, morder.get(r.mode, 1 << 30),
                             r.mode, forder.get(r.metric, 0)))
    return rows


def _wanted(values: dict, scenario: str, mode: str, role: str, metric: str,
            metrics: tuple[str, ...] | None) -> bool:
    if metrics is not None:
        return metric in metrics
    present = [m for m in PRIMARY_METRICS if (scenario, mode, role, m) in values]
    return bool(present) and metric == present[0]


def verdict(ratios: list[float], higher_is_better: bool) -> str:
    """``better``/``worse`` (the mode against the reference), ``noise`` or ``n<3``."""
    if len(ratios) < MIN_N:
        return "n<3"
    logs = [math.log(r) for r in ratios]
    if statistics.pvariance(logs) == 0:
        # Every pair alike: any difference from 1 is real (exact counts).
        p = 1.0 if logs[0] == 0 else 0.0
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            p = float(stats.ttest_1samp(logs, 0.0).pvalue)
    return decided(p, statistics.fmean(logs) > 0, higher_is_better)


def fmt_ratio(r: float) -> str:
    return f"{r:.2f}x"


def fmt_range(p: Paired) -> str:
    return f"{fmt_ratio(min(p.ratios))}-{fmt_ratio(max(p.ratios))}"


def title(reference: str) -> str:
    return f"Against {reference}, paired by repetition"


def explanation(reference: str) -> str:
    return (f"Each mode's figure over {reference}'s in the same repetition: the median of those ratios, their "
            f"range, how many pairs; verdict by a t-test on the ratios' logarithms at 95% (better or worse than "
            f"{reference}, noise when a ratio of 1 is not ruled out, n<3 with too few pairs).")


def render_markdown(rows: list[Paired], reference: str) -> list[str]:
    """The table as Markdown lines (none without rows)."""
    if not rows:
        return []
    out = [f"## {title(reference)}", "", explanation(reference), "",
           f"| scenario | role | mode | figure | x {reference} | range | pairs | verdict |",
           "|---|---|---|---|---:|---|---:|---|"]
    for p in rows:
        out.append(f"| {p.scenario} | {p.role} | {p.mode} | {LABELS.get(p.metric, p.metric)} | "
                   f"{fmt_ratio(p.median)} | {fmt_range(p)} | {len(p.ratios)} | {p.verdict} |")
    out.append("")
    return out


def render_commit(rows: list[Paired], reference: str) -> str:
    """Plain text for a commit message, one line a figure, never wider than
    ``COMMIT_WIDTH`` columns."""
    out = wrap(f"{title(reference)} (median, range, pairs):", COMMIT_WIDTH)
    for p in rows:
        line = (f"{p.scenario} {p.role} {p.mode} {LABELS.get(p.metric, p.metric)}: {fmt_ratio(p.median)} "
                f"({min(p.ratios):.2f}-{max(p.ratios):.2f}, {len(p.ratios)}) {short_verdict(p.verdict)}")
        # A line too long goes on indented further, so each figure's first line stands out.
        out += textwrap.wrap(line, width=COMMIT_WIDTH, initial_indent="  ", subsequent_indent="      ")
    return "\n".join(out) + "\n"


def print_terminal(rows: list[Paired], reference: str, run_id: str, console) -> None:
    from rich.table import Table

    console.print(explanation(reference), markup=False, highlight=False)
    table = Table(title=f"{run_id}: {title(reference)}")
    for h, j in (("scenario", "left"), ("role", "left"), ("mode", "left"), ("figure", "left"),
                 (f"x {reference}", "right"), ("range", "right"), ("pairs", "right"), ("verdict", "left")):
        # Folded, not cut short, in a narrow terminal: a mode's name is what tells the rows apart.
        table.add_column(h, justify=j, overflow="fold")
    last = None
    for p in rows:
        table.add_row(p.scenario if p.scenario != last else "", p.role, p.mode, LABELS.get(p.metric, p.metric),
                      fmt_ratio(p.median), fmt_range(p), str(len(p.ratios)), p.verdict,
                      style=STYLE.get(p.verdict, ""))
        last = p.scenario
    console.print(table)
