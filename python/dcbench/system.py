"""What the manifest records about the machine and the target, and cache control."""

from __future__ import annotations

import os
import platform
import resource
import socket
import subprocess
from pathlib import Path

from . import procfs

REPO = Path(__file__).resolve().parent.parent.parent


def _read(path: str | Path, default: str = "") -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def mount_of(path: Path) -> dict[str, str]:
    """Mount point, filesystem type, source and options of the mount holding ``path``."""
    path = path.resolve()
    best: dict[str, str] = {}
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        f, g = left.split(), right.split()
        if len(f) < 6 or len(g) < 2:
            continue
        mnt = f[4].replace("\\040", " ")
        if (path == Path(mnt) or Path(mnt) in path.parents) and len(mnt) >= len(best.get("mount_point", "")):
            best = {
                "mount_point": mnt,
                "fs_type": g[0],
                "source": g[1],
                "mount_options": f[5] + ("," + g[2] if len(g) > 2 else ""),
            }
    return best


def disk_of(path: Path) -> dict[str, str | None]:
    """The block device under ``path``: its name, whole disk, scheduler, readahead."""
    dev = os.stat(path).st_dev
    sys_dev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if not sys_dev.exists():
        return {"device": None, "disk": None, "scheduler": None, "read_ahead_kb": None}
    real = sys_dev.resolve()
    name = real.name
    disk_dir = real if (real / "queue").exists() else real.parent
    sched = _read(disk_dir / "queue" / "scheduler")
    active = next((w.strip("[]") for w in sched.split() if w.startswith("[")), sched or None)
    return {
        "device": name,
        "disk": disk_dir.name,
        "scheduler": active,
        "read_ahead_kb": _read(disk_dir / "queue" / "read_ahead_kb") or None,
        "rotational": _read(disk_dir / "queue" / "rotational") or None,
    }


def ext4_journal(device: str | None) -> bool | None:
    """Whether the ext4 on ``device`` (a name in /sys/fs/ext4) has a journal;
    None when that cannot be told."""
    if not device:
        return None
    task = _read(f"/sys/fs/ext4/{device}/journal_task")
    return None if not task else task != "<none>"


def vm_sysctls() -> dict[str, str]:
    names = (
        "dirty_ratio", "dirty_background_ratio", "dirty_bytes", "dirty_background_bytes",
        "dirty_expire_centisecs", "dirty_writeback_centisecs", "swappiness",
    )
    return {n: _read(f"/proc/sys/vm/{n}") for n in names}


def cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def dcload_version(dcload: Path) -> str | None:
    try:
        out = subprocess.run([str(dcload), "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def open_files() -> dict[str, int]:
    """This process's RLIMIT_NOFILE, which the programs it starts inherit.
    dcload raises its soft limit towards the hard one, and write-behind
    holds closed files for the flusher up to 3/8 of it: small-file figures
    depend on the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {"soft": soft, "hard": hard}


def describe(target: Path, dcload: Path) -> dict[str, object]:
    mem = procfs.parse_meminfo(_read("/proc/meminfo"))
    where = {"dir": str(target), **mount_of(target), **disk_of(target)}
    if where.get("fs_type") == "ext4":
        where["ext4_journal"] = ext4_journal(where.get("device"))
    return {
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "mem_total": mem.get("MemTotal"),
        "swap_total": mem.get("SwapTotal"),
        "open_files": open_files(),
        "target": where,
        "vm": vm_sysctls(),
        "dcload": str(dcload),
        "dcload_version": dcload_version(dcload),
        "git_commit": git_commit(),
        "python": platform.python_version(),
    }


def drop_caches() -> str | None:
    """sync, then drop clean caches. None on success, else why not (not root)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as e:
        return f"cannot drop caches ({e.strerror}); run as root for cold-cache cases"
    return None
