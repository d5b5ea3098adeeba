"""System monitors sampled in-process: memory, vmstat, the target's disk, CPU.

One thread reads the four /proc files at a fixed rate (4 Hz by default) and
appends a CSV row per sample. Time is seconds on the monotonic clock since a
start instant the caller chooses: dcbench passes the instant it started
dcload, and dcload's interval logs count milliseconds from its own start a
few milliseconds later, so both series share one axis.
"""

from __future__ import annotations

import csv
import threading
import time
from pathlib import Path

from . import procfs

MEM_COLUMNS = {
    "MemFree": "mem_free",
    "MemAvailable": "mem_available",
    "Cached": "cached",
    "Dirty": "dirty",
    "Writeback": "writeback",
    "Active(file)": "active_file",
    "Inactive(file)": "inactive_file",
    "AnonPages": "anon",
}
VMSTAT_COLUMNS = (
    "nr_dirtied",
    "nr_written",
    "nr_dirty_threshold",
    "nr_dirty_background_threshold",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgscan_direct_throttle",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "allocstall",
    "workingset_refault_file",
    "workingset_activate_file",
    "compact_stall",
)
DISK_COLUMNS = (
    "disk_r_iops",
    "disk_w_iops",
    "disk_r_mbps",
    "disk_w_mbps",
    "disk_r_merges_s",
    "disk_w_merges_s",
    "disk_in_flight",
    "disk_util_pct",
    "disk_writes",
    "disk_writes_merged",
    "disk_reads",
    "disk_reads_merged",
)
CPU_COLUMNS = ("cpu_user_pct", "cpu_system_pct", "cpu_iowait_pct", "cpu_idle_pct", "cpu_steal_pct")
COLUMNS = (
    ("t_s", "unix_s")
    + tuple(MEM_COLUMNS.values())
    + VMSTAT_COLUMNS
    + DISK_COLUMNS
    + CPU_COLUMNS
)


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read()


class Sampler:
    """Turns successive /proc readings into one row of absolute values and rates."""

    def __init__(self, device: str | None, t0: float):
        self.device = device
        self.t0 = t0
        self._prev_disk: procfs.DiskCounters | None = None
        self._prev_cpu: procfs.CpuTimes | None = None
        self._prev_t: float | None = None

    def sample(self) -> dict[str, float]:
        now = time.monotonic()
        row: dict[str, float] = {"t_s": round(now - self.t0, 3), "unix_s": round(time.time(), 3)}
        mem = procfs.parse_meminfo(_read("/proc/meminfo"))
        for field, col in MEM_COLUMNS.items():
            row[col] = mem.get(field, 0)
        vm = procfs.parse_vmstat(_read("/proc/vmstat"))
        for col in VMSTAT_COLUMNS:
            row[col] = vm.get(col, 0)
        cpu = procfs.parse_stat_cpu(_read("/proc/stat"))
        disk = (
            procfs.parse_diskstats(_read("/proc/diskstats"), self.device)
            if self.device
            else None
        )
        dt = now - self._prev_t if self._prev_t is not None else 0.0
        row.update(self._disk_rates(disk, dt))
        pct = procfs.cpu_percent(self._prev_cpu or cpu, cpu)
        row["cpu_user_pct"] = round(pct["user"], 2)
        row["cpu_system_pct"] = round(pct["system"], 2)
        row["cpu_iowait_pct"] = round(pct["iowait"], 2)
        row["cpu_idle_pct"] = round(pct["idle"], 2)
        row["cpu_steal_pct"] = round(pct["steal"], 2)
        self._prev_disk, self._prev_cpu, self._prev_t = disk, cpu, now
        return row

    def _disk_rates(self, disk: procfs.DiskCounters | None, dt: float) -> dict[str, float]:
        out = {c: 0.0 for c in DISK_COLUMNS}
        if disk is None:
            return out
        out["disk_writes"] = disk.writes
        out["disk_writes_merged"] = disk.writes_merged
        out["disk_reads"] = disk.reads
        out["disk_reads_merged"] = disk.reads_merged
        out["disk_in_flight"] = disk.in_flight
        prev = self._prev_disk
        if prev is None or dt <= 0:
            return out

        def rate(a: int, b: int) -> float:
            return round((a - b) / dt, 2)

        out["disk_r_iops"] = rate(disk.reads, prev.reads)
        out["disk_w_iops"] = rate(disk.writes, prev.writes)
        out["disk_r_mbps"] = round((disk.sectors_read - prev.sectors_read) * 512 / dt / 1e6, 2)
        out["disk_w_mbps"] = round(
            (disk.sectors_written - prev.sectors_written) * 512 / dt / 1e6, 2
        )
        out["disk_r_merges_s"] = rate(disk.reads_merged, prev.reads_merged)
        out["disk_w_merges_s"] = rate(disk.writes_merged, prev.writes_merged)
        out["disk_util_pct"] = round(
            min(100.0, 100.0 * (disk.io_ticks_ms - prev.io_ticks_ms) / (dt * 1000)), 1
        )
        return out


class Monitor:
    """Samples in a background thread into ``csv_path`` until ``stop()``.

    Rows are flushed as they are written, so a run interrupted mid-case still
    leaves the samples taken so far. ``rows`` keeps them for peak figures.
    """

    def __init__(self, csv_path: Path, device: str | None, hz: float = 4.0, t0: float | None = None):
        if hz <= 0:
            raise ValueError("monitor rate must be positive")
        self.csv_path = Path(csv_path)
        self.interval = 1.0 / hz
        self.sampler = Sampler(device, t0 if t0 is not None else time.monotonic())
        self.rows: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dcbench-monitor", daemon=True)
        self._file = None
        self.error: BaseException | None = None

    def start(self) -> "Monitor":
        self._file = open(self.csv_path, "w", newline="", encoding="ascii")
        self._writer = csv.DictWriter(self._file, fieldnames=COLUMNS)
        self._writer.writeheader()
        self._take()  # a baseline row before the load starts
        self._thread.start()
        return self

    def _take(self) -> None:
        row = self.sampler.sample()
        self.rows.append(row)
        self._writer.writerow(row)
        self._file.flush()

    def _run(self) -> None:
        next_at = time.monotonic() + self.interval
        try:
            while not self._stop.wait(max(0.0, next_at - time.monotonic())):
                self._take()
                next_at += self.interval
        except BaseException as e:  # reported by stop(); a monitor must not kill the run silently
            self.error = e

    def stop(self) -> list[dict[str, float]]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._file is not None:
            if self.error is None:
                self._take()  # a closing row after the load ends
            self._file.close()
            self._file = None
        return self.rows

    def __enter__(self) -> "Monitor":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def peaks(rows: list[dict[str, float]]) -> dict[str, float]:
    """Peak memory figures of a case, and how far they rose above the first (idle) row."""
    if not rows:
        return {}
    first = rows[0]
    out: dict[str, float] = {}
    for col in ("dirty", "writeback", "cached"):
        top = max(r[col] for r in rows)
        out[f"peak_{col}"] = top
        out[f"peak_{col}_above_idle"] = top - first[col]
    return out
