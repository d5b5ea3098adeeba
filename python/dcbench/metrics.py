"""Figures of one case: per role from dcload's JSON, system-wide from the monitor.

Names and units (also in docs/results.md): ``mb_s`` (1e6 bytes/s), ``iops``,
``lat_avg_us``/``lat_p50_us``/``lat_p99_us``/``lat_p999_us`` (completion
latency), ``runtime_s``, ``io_bytes``, ``files_s`` (small-files), ``cpu_sys_pct``
(the role's threads); system-wide (role ``*``): ``peak_dirty``, ``peak_writeback``,
``peak_cached`` (bytes, highest sample), ``*_above_idle`` (minus the sample
before the load), ``cpu_system_pct``/``cpu_iowait_pct``/``cpu_steal_pct`` (mean over the case),
``disk_w_iops``/``disk_w_mbps``/``disk_w_merges_s`` (mean), ``pgscan``,
``allocstall``, ``compact_stall``, ``workingset_refault`` (counts during the case).
"""

from __future__ import annotations

import statistics

from .monitor import peaks

# A case during which the hypervisor took more than this share of the
# machine's CPUs (``cpu_steal_pct``, mean over the case) is named in the
# summary, the report and compare's warnings: on a 2-CPU virtual machine,
# nine interleaved `cp -a` of the same tree took 9.6-9.7 s with 0.8-0.9% of
# the CPUs stolen, 12.0 s with 5.5%, 13.5-14.3 s with 9-10% and 22.7 s
# with 21%.
STOLEN_PCT = 5.0

# For compare: whether a higher value is better.
HIGHER_IS_BETTER = {
    "mb_s": True, "iops": True, "files_s": True,
    "lat_avg_us": False, "lat_p50_us": False, "lat_p99_us": False, "lat_p999_us": False,
    "cpu_sys_pct": False, "cpu_system_pct": False, "peak_dirty": False, "peak_cached": False,
    "peak_writeback": False, "disk_w_iops": False,
}


def role_metrics(job: dict, direction: str, file_size: int | None = None) -> dict[str, float]:
    """``file_size``: a small-files role's file size, for files/s (whole files
    written, so a run stopped by a runtime cap counts only what it did)."""
    d = job.get(direction) or {}
    clat = d.get("clat_ns") or {}
    pct = clat.get("percentile") or {}
    runtime_s = job.get("job_runtime", 0) / 1000.0
    out = {
        "mb_s": d.get("bw_bytes", 0) / 1e6,
        "iops": d.get("iops", 0.0),
        "io_bytes": d.get("io_bytes", 0),
        "runtime_s": runtime_s,
        "lat_avg_us": clat.get("mean", 0.0) / 1000.0,
        "lat_p50_us": pct.get("50.000000", 0) / 1000.0,
        "lat_p99_us": pct.get("99.000000", 0) / 1000.0,
        "lat_p999_us": pct.get("99.900000", 0) / 1000.0,
        "cpu_sys_pct": job.get("sys_cpu", 0.0),
    }
    if file_size and runtime_s > 0:
        out["files_s"] = (d.get("io_bytes", 0) // file_size) / runtime_s
    return out


def system_metrics(rows: list[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    out = dict(peaks(rows))
    during = rows[1:] or rows

    def mean(col: str) -> float:
        return statistics.fmean(r[col] for r in during)

    for col in ("cpu_system_pct", "cpu_iowait_pct", "disk_w_iops", "disk_w_mbps", "disk_w_merges_s",
                "disk_r_iops", "disk_r_mbps"):
        out[col] = mean(col)
    # A monitor file written before the column existed has no steal.
    out["cpu_steal_pct"] = statistics.fmean(r.get("cpu_steal_pct", 0.0) for r in during)
    first, last = rows[0], rows[-1]
    out["pgscan"] = (last["pgscan_kswapd"] + last["pgscan_direct"]) - (first["pgscan_kswapd"] + first["pgscan_direct"])
    out["allocstall"] = last["allocstall"] - first["allocstall"]
    out["compact_stall"] = last.get("compact_stall", 0) - first.get("compact_stall", 0)
    out["workingset_refault"] = last["workingset_refault_file"] - first["workingset_refault_file"]
    out["disk_writes"] = last["disk_writes"] - first["disk_writes"]
    out["disk_writes_merged"] = last["disk_writes_merged"] - first["disk_writes_merged"]
    return out


def steal_note(samples: dict[tuple[str, str, str, str], list[float]]) -> str | None:
    """One line naming the scenarios and modes with a repetition during
    which the hypervisor took more than ``STOLEN_PCT`` of the CPUs, and the
    most it took."""
    stolen = {(s, m): max(v) for (s, m, role, metric), v in samples.items()
              if role == "*" and metric == "cpu_steal_pct" and v and max(v) > STOLEN_PCT}
    if not stolen:
        return None
    cases = ", ".join(f"{s} {m} {pct:.0f}%" for (s, m), pct in stolen.items())
    return (f"the hypervisor took CPU time from this machine during some repetitions ({cases} at most): "
            "their figures move with the host's load as much as with the mode; compare within one run, "
            "repetitions interleaved, or run again on a quieter host")
