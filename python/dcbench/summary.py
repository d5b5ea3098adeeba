"""The summary table of a run: median over repetitions per scenario, mode and role.

Columns follow the seed's tables (MB/s, IOPS, avg/p50/p99/p99.9 latency,
system CPU %, peak Dirty, peak Cached), with small-files' files/s and device
write IOPS and merges where present. summary.md ends with the run's other
modes against its reference mode, paired by repetition (``against.py``).
"""

from __future__ import annotations

import statistics

from . import against, generation
from .metrics import steal_note
from .results import case_order, samples_by_rep, samples_of
from .sizes import format_size

ROLE_METRICS = ("mb_s", "iops", "lat_avg_us", "lat_p50_us", "lat_p99_us", "lat_p999_us", "files_s", "runtime_s")

# A case shorter than this (the median of its repetitions) is as much the
# job's start and its final fsync as its steady state: four writers of 256
# MiB ran 0.5-0.7 s here, and in one repetition three of them spent their
# first quarter of a second at a fifth to a half of their later rate, 0.74x
# the kernel's mode where the other four repetitions made 0.89-0.94x.
SHORT_CASE_S = 2.0

# The library stands in for the kernel's RWF_DONTCACHE: its modes are judged
# against that mode, or against plain buffered I/O in runs without it.
SUMMARY_REFERENCES = ("dontcache", "buffered")

SYSTEM_METRICS = ("cpu_system_pct", "peak_dirty", "peak_cached", "disk_w_iops", "disk_w_merges_s")

COLUMNS = (
    # key, header, format
    ("mb_s", "MB/s", "{:,.1f}"),
    ("iops", "IOPS", "{:,.0f}"),
    ("lat_avg_us", "avg us", "{:,.0f}"),
    ("lat_p50_us", "p50 us", "{:,.0f}"),
    ("lat_p99_us", "p99 us", "{:,.0f}"),
    ("lat_p999_us", "p99.9 us", "{:,.0f}"),
    ("cpu_system_pct", "sys CPU %", "{:.1f}"),
    ("peak_dirty", "peak Dirty", None),
    ("peak_cached", "peak Cached", None),
)
SMALL_FILE_COLUMNS = (
    ("files_s", "files/s", "{:,.0f}"),
    ("disk_w_iops", "disk w IOPS", "{:,.0f}"),
    ("disk_w_merges_s", "w merges/s", "{:,.0f}"),
)


def summarize(cases: list[dict]) -> list[dict]:
    """Rows of {scenario, mode, role, n, <metric>: median} over a run's good cases (its ``case.json``s)."""
    rows = summarize_samples(samples_of(cases))
    order = {k: i for i, k in enumerate(case_order(cases))}
    rows.sort(key=lambda r: (order.get((r["scenario"], r["mode"]), 1 << 30), r["role"]))
    return rows


def summarize_samples(samples: dict[tuple[str, str, str, str], list[float]]) -> list[dict]:
    """Median rows from {(scenario, mode, role, metric): values}, in first-seen order."""
    by_case: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    for (scenario, mode, role, metric), values in samples.items():
        by_case.setdefault((scenario, mode, role), {})[metric] = values
    rows = []
    for (scenario, mode, role), ms in by_case.items():
        if role == "*":
            continue
        system = by_case.get((scenario, mode, "*"), {})
        n = max((len(v) for v in ms.values()), default=0)
        row = {"scenario": scenario, "mode": mode, "role": role, "n": n}
        for k in ROLE_METRICS:
            if k in ms:
                row[k] = statistics.median(ms[k])
        for k in SYSTEM_METRICS:
            if k in system:
                row[k] = statistics.median(system[k])
        rows.append(row)
    return rows


def attach_io(rows: list[dict], manifest: dict) -> list[dict]:
    """Adds each row's engine and depth (``io``) from the manifest, and
    ``io_differs`` where another mode ran the same role of the same scenario
    at another engine or depth: such figures are not comparable as they are."""
    io = manifest.get("io") or {}
    for r in rows:
        by_mode = io.get(r["scenario"], {})
        r["io"] = by_mode.get(r["mode"], {}).get(r["role"])
        seen = {m.get(r["role"]) for m in by_mode.values()} - {None}
        r["io_differs"] = len(seen) > 1
    return rows


def mode_cell(row: dict) -> str:
    """The mode as tables show it: with its engine and depth when these
    differ from the other modes' (``dontcache [pvsync2 QD1]``)."""
    return f"{row['mode']} [{row['io']}]" if row.get("io_differs") else row["mode"]


def io_note(rows: list[dict]) -> str | None:
    """One line naming the scenarios whose modes ran at different engines or depths."""
    scen = sorted({r["scenario"] for r in rows if r.get("io_differs")})
    if not scen:
        return None
    return (f"modes ran at different engines or depths in {', '.join(scen)} (shown in brackets): "
            "those figures differ by more than the mode")


def creation_note(manifest: dict, rows: list[dict]) -> str | None:
    """One line when scenarios that create many files ran on an ext4 without
    a journal, where their figures depend on the cases before them."""
    if manifest.get("system", {}).get("target", {}).get("ext4_journal") is not False:
        return None
    scen = sorted({r["scenario"] for r in rows if "files_s" in r})
    if not scen:
        return None
    return (f"{', '.join(scen)} ran on an ext4 without a journal: it does not reuse an inode freed in the last "
            "minute (six while its inode table block is dirty), and each case follows the deletion of the last "
            "case's files, so files/s depends on what ran before (buffered 4 KiB creates measured down to 0.56x "
            "after a delete); run those scenarios on a testbed (--fs ext4) to compare modes")


def short_note(rows: list[dict]) -> str | None:
    """One line naming the scenarios whose cases ran shorter than
    ``SHORT_CASE_S``, with the range of their runtimes."""
    short = {}
    for r in rows:
        if r.get("runtime_s", SHORT_CASE_S) < SHORT_CASE_S:
            short.setdefault(r["scenario"], []).append(r["runtime_s"])
    if not short:
        return None
    spans = ", ".join(f"{s} {min(t):.1f}-{max(t):.1f} s" for s, t in short.items())
    return (f"cases ran shorter than {SHORT_CASE_S:.0f} s ({spans}, medians per mode): their figures hold the "
            "job's start and end as much as its steady state (a slow first quarter of a second moved a 0.7 s "
            "case by a fifth); a larger --memory makes them longer")


def columns_for(rows: list[dict]):
    cols = list(COLUMNS)
    if any("files_s" in r for r in rows):
        cols += SMALL_FILE_COLUMNS
    return cols


def cell(row: dict, key: str, fmt: str | None) -> str:
    if key not in row:
        return "-"
    v = row[key]
    if fmt is None:
        return format_size(v)
    return fmt.format(v)


def testbed_line(manifest: dict) -> str:
    """``xfs on loop:8 GiB (loop0, direct I/O), made 1 time(s)``, or the --dir as it was."""
    tb = manifest.get("testbed")
    if not tb:
        return "none (the files went into --dir as it is)"
    extra = {"loop": "direct I/O" if tb.get("direct_io") else "buffered backing file",
             "zram": tb.get("algorithm")}.get(tb.get("kind"))
    where = f"{tb.get('name')}, {extra}" if extra else tb.get("name")
    opts = f", mkfs {' '.join(tb['mkfs_opts'])}" if tb.get("mkfs_opts") else ""
    return f"{tb.get('fs')} on {tb.get('device')} ({where}){opts}, mounted {tb.get('mount_options')}, " \
           f"made {tb.get('made')} time(s)"


def order_note(manifest: dict) -> str:
    """How the modes were ordered, where it matters (several repetitions)
    and the run recorded it."""
    if (manifest.get("repeat") or 1) > 1 and manifest.get("mode_order") == "rotated":
        return " (each starting the modes one place further along)"
    return ""


def render_markdown(manifest: dict, rows: list[dict], cases: list[dict] | None = None) -> str:
    """The run's summary.md; with its ``cases``, followed by the other modes
    against the reference mode (``summary_reference``), paired by repetition."""
    status = manifest.get("status", "?")
    out = [f"# dcbench run {manifest.get('run_id')}", ""]
    if status != "complete":
        out += [f"**Status: {status}** ({manifest.get('cases_done', 0)} of "
                f"{manifest.get('cases_planned', '?')} cases done): not a finished run.", ""]
    sysinfo = manifest.get("system", {})
    t = sysinfo.get("target", {})
    mem = manifest.get("memory", {})
    out += [
        f"- kernel {sysinfo.get('kernel')}, {sysinfo.get('cpus')} CPUs, "
        f"{format_size(sysinfo.get('mem_total') or 0)} RAM",
        f"- target {t.get('dir')}: {t.get('fs_type')} on {t.get('device')} ({t.get('scheduler')})",
        f"- testbed: {testbed_line(manifest)}",
        f"- kernel RWF_DONTCACHE: {generation.label(manifest.get('kernel_dontcache'))}",
        f"- profile {manifest.get('profile')}, page-cache memory {format_size(mem.get('effective') or 0)} "
        f"({mem.get('method')}), {manifest.get('repeat')} repetition(s){order_note(manifest)}, values are medians",
    ]
    for m, why in (manifest.get("skipped_modes") or {}).items():
        out.append(f"- mode {m} skipped: {why}")
    for f in manifest.get("failures") or []:
        out.append(f"- **case {f['case']} failed**: {f['message']}")
    stolen = steal_note(samples_of(cases)) if cases else None
    for note in (io_note(rows), creation_note(manifest, rows), short_note(rows), stolen):
        if note is not None:
            out.append(f"- **{note}**")
    out.append("")
    scenarios = []
    for r in rows:
        if r["scenario"] not in scenarios:
            scenarios.append(r["scenario"])
    for s in scenarios:
        srows = [r for r in rows if r["scenario"] == s]
        cols = columns_for(srows)
        out += [f"## {s}", ""]
        out.append("| mode | role | n | " + " | ".join(h for _, h, _ in cols) + " |")
        out.append("|---|---|---:|" + "---:|" * len(cols))
        for r in srows:
            out.append(f"| {mode_cell(r)} | {r['role']} | {r['n']} | "
                       + " | ".join(cell(r, k, f) for k, _, f in cols) + " |")
        out.append("")
    if not rows:
        out.append("No case finished.")
    reference = summary_reference(manifest)
    if cases and reference:
        out += against.render_markdown(against.against(samples_by_rep(cases), manifest, reference), reference)
    return "\n".join(out) + "\n"


def summary_reference(manifest: dict) -> str | None:
    """The mode the summary sets the others against: the first of
    ``SUMMARY_REFERENCES`` the run has, when it has another mode too."""
    modes = manifest.get("modes") or []
    if len(modes) < 2:
        return None
    return next((m for m in SUMMARY_REFERENCES if m in modes), None)
