"""Parsers for the /proc files the monitors sample.

Each parser takes the file's text and returns plain numbers, so the tests can
feed them captured samples and the monitor can read the live files with one
``read()`` each (no vmstat/iostat child processes).
"""

from __future__ import annotations

from dataclasses import dataclass


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` as bytes per field (all fields, not only the kept ones)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if not parts:
            continue
        value = int(parts[0])
        if len(parts) > 1 and parts[1] == "kB":
            value *= 1024
        out[name.strip()] = value
    return out


def parse_vmstat(text: str) -> dict[str, int]:
    """``/proc/vmstat`` as counters; ``allocstall_*`` zones are summed into ``allocstall``."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        name, value = parts[0], int(parts[1])
        if name.startswith("allocstall_"):
            out["allocstall"] = out.get("allocstall", 0) + value
        out[name] = value
    return out


@dataclass(frozen=True)
class DiskCounters:
    """One line of ``/proc/diskstats`` (see Documentation/admin-guide/iostats.rst)."""

    reads: int
    reads_merged: int
    sectors_read: int
    writes: int
    writes_merged: int
    sectors_written: int
    in_flight: int
    io_ticks_ms: int
    weighted_ms: int


def parse_diskstats(text: str, device: str) -> DiskCounters:
    """The counters of ``device`` (a kernel name such as ``vda``, not a path)."""
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 14 and f[2] == device:
            n = [int(x) for x in f[3:14]]
            return DiskCounters(
                reads=n[0],
                reads_merged=n[1],
                sectors_read=n[2],
                writes=n[4],
                writes_merged=n[5],
                sectors_written=n[6],
                in_flight=n[8],
                io_ticks_ms=n[9],
                weighted_ms=n[10],
            )
    raise KeyError(f"device {device!r} is not in /proc/diskstats")


@dataclass(frozen=True)
class CpuTimes:
    """The aggregate ``cpu`` line of ``/proc/stat``, in clock ticks."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def total(self) -> int:
        return (
            self.user + self.nice + self.system + self.idle
            + self.iowait + self.irq + self.softirq + self.steal
        )


def parse_stat_cpu(text: str) -> CpuTimes:
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "cpu":
            n = [int(x) for x in f[1:9]] + [0] * (8 - len(f[1:9]))
            return CpuTimes(*n[:8])
    raise ValueError("no aggregate cpu line in /proc/stat")


def cpu_percent(before: CpuTimes, after: CpuTimes) -> dict[str, float]:
    """Share of all CPUs' time between two samples, in percent."""
    dt = after.total - before.total
    if dt <= 0:
        return {"user": 0.0, "system": 0.0, "iowait": 0.0, "idle": 0.0, "steal": 0.0}

    def pct(a: int, b: int) -> float:
        return 100.0 * (a - b) / dt

    return {
        "user": pct(after.user + after.nice, before.user + before.nice),
        "system": pct(
            after.system + after.irq + after.softirq,
            before.system + before.irq + before.softirq,
        ),
        "iowait": pct(after.iowait, before.iowait),
        "idle": pct(after.idle, before.idle),
        # Time the hypervisor ran something else while this machine's CPUs
        # had work: a virtual machine's figures move with the host's load.
        "steal": pct(after.steal, before.steal),
    }
