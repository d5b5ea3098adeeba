"""``dcbench report RUN [--compare OTHER]``: report.html (self-contained) and report.md.

Per scenario: the summary table (or the compare table), and the plots that
show what the numbers cannot: bandwidth over time per mode (the Axboe test's
page-cache cliff), Dirty/Writeback/Cached over time per mode, completion
latency percentiles per mode and role, and device write IOPS and merges where
the scenario is about small files. Plots come from the first repetition; in
compare mode, A is solid and B dashed on the same axes. SVG is inlined in the
HTML (no network, no scripts); report.md links the same SVG files.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt  # noqa: E402

# Text stays text in the SVG (a tenth of the size of glyphs drawn as paths).
plt.rcParams["svg.fonttype"] = "none"
from jinja2 import Environment, PackageLoader, select_autoescape  # noqa: E402

from . import against  # noqa: E402
from . import compare as cmp  # noqa: E402
from . import generation  # noqa: E402
from .results import Run  # noqa: E402
from .sizes import format_size  # noqa: E402
from .metrics import steal_note  # noqa: E402
from .summary import (  # noqa: E402
    attach_io, cell, columns_for, creation_note, io_note, mode_cell, short_note, summarize_samples,
    summary_reference, testbed_line,
)

MIB = 1 << 20


def case_dir(run: Run, scenario: str, mode: str, rep: int = 0) -> Path:
    return run.directory / "cases" / scenario / mode.replace(":", "-") / f"rep{rep}"


def read_bw_log(paths: list[Path]) -> tuple[list[float], list[float]]:
    """Summed bandwidth (MB/s) of all instances' ``*_bw.<n>.log`` by time (s).

    Each instance logs at its own milliseconds (250, 251, 253, ...), so
    entries are summed per logging interval, not per exact timestamp.
    """
    entries: list[tuple[int, float]] = []
    for p in paths:
        for line in p.read_text().splitlines():
            f = [x.strip() for x in line.split(",")]
            if len(f) >= 2 and f[0].isdigit():
                entries.append((int(f[0]), float(f[1]) * 1024 / 1e6))  # KiB/s -> MB/s
    if not entries:
        return [], []
    first = sorted(t for t, _ in entries[: max(2, len(entries) // max(1, len(paths)))])
    steps = [b - a for a, b in zip(first, first[1:]) if b > a]
    bucket = max(1, statistics.median(steps)) if steps else 1000
    total: dict[int, float] = defaultdict(float)
    for t, v in entries:
        total[round(t / bucket)] += v
    keys = sorted(total)
    return [k * bucket / 1000 for k in keys], [total[k] for k in keys]


def read_monitor(path: Path) -> dict[str, list[float]]:
    if not path.exists():
        return {}
    cols: dict[str, list[float]] = defaultdict(list)
    with path.open() as f:
        for row in csv.DictReader(f):
            for k, v in row.items():
                try:
                    cols[k].append(float(v))
                except (TypeError, ValueError):
                    pass
    return cols


def read_percentiles(path: Path) -> dict[str, tuple[list[float], list[float]]]:
    """Per job (role): completion-latency percentiles (percent, microseconds)."""
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    out = {}
    for job in doc.get("jobs", []):
        for direction in ("write", "read"):
            pct = (job.get(direction) or {}).get("clat_ns", {}).get("percentile") or {}
            if job.get(direction, {}).get("total_ios"):
                items = sorted((float(k), v / 1000) for k, v in pct.items())
                out[f"{job['jobname']} ({direction})"] = ([k for k, _ in items], [v for _, v in items])
    return out


def _svg(fig) -> str:
    buf = io.StringIO()
    # No RDF metadata block: no date (reports of the same run are identical).
    fig.savefig(buf, format="svg", bbox_inches="tight",
                metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # inline: no XML prolog


def _modes(runs: list[Run], scenario: str) -> list[str]:
    """The scenario's modes in the runs, in the order the first run ran them."""
    seen = []
    for run in runs:
        order = {m: i for i, m in enumerate(run.manifest.get("modes", []))}
        for m in sorted((m for s, m in run.cases() if s == scenario), key=lambda m: order.get(m, len(order))):
            if m not in seen:
                seen.append(m)
    return seen


STYLES = ("-", "--")


def plot_bandwidth(runs: list[Run], scenario: str):
    fig, ax = plt.subplots(figsize=(8, 3.2))
    drew = False
    for run, ls in zip(runs, STYLES):
        for i, mode in enumerate(_modes(runs, scenario)):
            d = case_dir(run, scenario, mode)
            logs = sorted(d.glob("*_bw.*.log")) if d.exists() else []
            # The scenario's first role (the writer or the only reader) is what the cliff is about.
            roles = sorted({p.name.split("_bw.")[0] for p in logs})
            if not roles:
                continue
            first = json.loads((d / "command.json").read_text())["argv"] if (d / "command.json").exists() else []
            role = next((a.split("=", 1)[1] for a in first if a.startswith("--name=")), roles[0])
            t, bw = read_bw_log([p for p in logs if p.name.startswith(f"{role}_bw.")])
            if t:
                ax.plot(t, bw, ls, color=f"C{i}", label=f"{mode}" + (f" ({run.run_id})" if len(runs) > 1 else ""))
                drew = True
    if not drew:
        plt.close(fig)
        return None
    ax.set(xlabel="seconds", ylabel="MB/s", title=f"{scenario}: bandwidth over time (first role, all instances)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return fig


def _monitor_series(runs: list[Run], scenario: str):
    """(colour index, line style, label, monitor columns) per run and mode with samples."""
    for run, ls in zip(runs, STYLES):
        for i, mode in enumerate(_modes(runs, scenario)):
            cols = read_monitor(case_dir(run, scenario, mode) / "monitor.csv")
            if cols.get("t_s"):
                yield i, ls, mode + (f" ({run.run_id})" if len(runs) > 1 else ""), cols


def plot_memory(runs: list[Run], scenario: str):
    fig, axes = plt.subplots(1, 3, figsize=(11, 3), sharex=True)
    drew = False
    for i, ls, name, cols in _monitor_series(runs, scenario):
        for ax, key in zip(axes, ("dirty", "writeback", "cached")):
            ax.plot(cols["t_s"], [v / MIB for v in cols[key]], ls, color=f"C{i}", label=name)
        drew = True
    if not drew:
        plt.close(fig)
        return None
    for ax, key in zip(axes, ("Dirty", "Writeback", "Cached")):
        ax.set(title=f"{key} (MiB)", xlabel="seconds")
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{scenario}: page cache over time", y=1.04)
    return fig


def plot_latency(runs: list[Run], scenario: str):
    fig, ax = plt.subplots(figsize=(8, 3.2))
    drew = False
    for run, ls in zip(runs, STYLES):
        for i, mode in enumerate(_modes(runs, scenario)):
            for j, (name, (p, us)) in enumerate(read_percentiles(case_dir(run, scenario, mode) / "dcload.json").items()):
                # x: how rare a completion is ("99.9" sits at 1000), so the tail is visible.
                x = [1 / max(1e-6, 1 - q / 100) for q in p]
                ax.plot(x, us, ls, color=f"C{i}", marker=".o^s"[j % 4], markersize=3,
                        label=f"{mode} {name}" + (f" ({run.run_id})" if len(runs) > 1 else ""))
                drew = True
    if not drew:
        plt.close(fig)
        return None
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [2, 10, 100, 1000, 10000]
    ax.set_xticks(ticks, ["p50", "p90", "p99", "p99.9", "p99.99"])
    ax.set(ylabel="completion latency (us)", title=f"{scenario}: latency percentiles")
    ax.legend(fontsize=6, ncol=2)
    ax.grid(alpha=0.3, which="both")
    return fig


def plot_disk(runs: list[Run], scenario: str):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3))
    drew = False
    for i, ls, name, cols in _monitor_series(runs, scenario):
        axes[0].plot(cols["t_s"], cols["disk_w_iops"], ls, color=f"C{i}", label=name)
        axes[1].plot(cols["t_s"], cols["disk_w_merges_s"], ls, color=f"C{i}", label=name)
        drew = True
    if not drew:
        plt.close(fig)
        return None
    axes[0].set(title="device write IOPS", xlabel="seconds")
    axes[1].set(title="device write merges/s", xlabel="seconds")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return fig


def build(run: Run, other: Run | None, out: Path) -> tuple[Path, Path]:
    """Writes report.html, report.md and the plot SVGs into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    runs = [run] + ([other] if other else [])
    comparison = cmp.compare(run, other) if other else None
    mode_order = {m: i for i, m in enumerate(run.manifest.get("modes", []))}
    rows = sorted(attach_io(summarize_samples(run.samples), run.manifest),
                  key=lambda r: (mode_order.get(r["mode"], 99), r["role"]))
    reference = summary_reference(run.manifest)
    paired = against.against(run.by_rep, run.manifest, reference) if reference else []
    sections = []
    scenarios = [s for s in run.manifest.get("scenarios", []) if any(c[0] == s for c in run.cases())]
    for scenario in scenarios:
        plots = []
        makers = [("bandwidth", plot_bandwidth), ("memory", plot_memory), ("latency", plot_latency)]
        if scenario == "small-files":
            makers.append(("disk", plot_disk))
        for kind, maker in makers:
            fig = maker(runs, scenario)
            if fig is None:
                continue
            svg = _svg(fig)
            name = f"{scenario}-{kind}.svg"
            (out / name).write_text(svg)
            plots.append({"name": name, "svg": svg, "kind": kind})
        srows = [r for r in rows if r["scenario"] == scenario]
        cols = columns_for(srows)
        table = {"head": ["mode", "role", "n"] + [h for _, h, _ in cols],
                 "rows": [[mode_cell(r), r["role"], str(r["n"])] + [cell(r, k, f) for k, _, f in cols] for r in srows]}
        crow = [r for r in comparison.rows if r.scenario == scenario] if comparison else []
        ctable = [[cmp.label(r), cmp.fmt_value(r.metric, r.mean_a), cmp.fmt_value(r.metric, r.mean_b),
                   cmp.fmt_change(r.change_pct), r.verdict] for r in crow]
        arows = [[r.role, r.mode, cmp.LABELS.get(r.metric, r.metric), against.fmt_ratio(r.median),
                  against.fmt_range(r), str(len(r.ratios)), r.verdict] for r in paired if r.scenario == scenario]
        sections.append({"scenario": scenario, "table": table, "compare": ctable, "against": arows, "plots": plots})
    env = Environment(loader=PackageLoader("dcbench", "templates"), autoescape=select_autoescape(["html", "html.j2"]))
    context = {
        "run": run, "other": other, "sections": sections, "manifest": run.manifest,
        "header": [n for n in [io_note(rows), creation_note(run.manifest, rows), short_note(rows),
                               steal_note(run.samples)] if n]
        + (cmp.header_lines(comparison) if comparison else []),
        "memory": format_size(run.manifest.get("memory", {}).get("effective") or 0),
        "complete": run.complete,
        "reference": reference,
        "testbed": testbed_line(run.manifest),
        "kernel_dontcache": generation.label(run.manifest.get("kernel_dontcache")),
    }
    html = out / "report.html"
    md = out / "report.md"
    html.write_text(env.get_template("report.html.j2").render(**context))
    md.write_text(env.get_template("report.md.j2").render(**context))
    return html, md
