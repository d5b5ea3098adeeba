"""The modes a scenario runs in, and probing which ones the target supports.

A mode is what dcload does differently for the role under test:

- ``buffered``: plain buffered I/O;
- ``dontcache``: the kernel's ``RWF_DONTCACHE`` on every read and write;
- ``direct``: ``O_DIRECT``;
- ``writebehind:<policy>``: buffered I/O through libdontcache in process.

Every mode is probed on the target directory before the run with a tiny real
dcload job; a mode that fails there is skipped with dcload's own reason, never
run under a wrong label.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import spawn
from .errors import UserError

POLICIES = ("flusher", "lazy", "inline", "per-file", "kernel")
BASE_MODES = ("buffered", "dontcache", "direct")
ALL_MODES = BASE_MODES + tuple(f"writebehind:{p}" for p in POLICIES)
DEFAULT_MODES = ("buffered", "dontcache", "direct", "writebehind:flusher")


@dataclass(frozen=True)
class Mode:
    name: str

    @property
    def family(self) -> str:
        return self.name.split(":", 1)[0]

    @property
    def slug(self) -> str:
        """A file-name-safe form (``writebehind-flusher``)."""
        return self.name.replace(":", "-")

    def options(self, job: dict[str, object]) -> tuple[dict[str, object], list[str]]:
        """dcload options for a job in this mode, and notes on what was changed."""
        out = dict(job)
        notes: list[str] = []
        engine = str(out.get("ioengine", "psync"))
        if self.family == "dontcache":
            out["uncached"] = 1
            if engine == "psync":
                # RWF_DONTCACHE needs preadv2/pwritev2.
                out["ioengine"] = "pvsync2"
                notes.append("psync -> pvsync2 (RWF_DONTCACHE needs pwritev2)")
        elif self.family == "direct":
            out["direct"] = 1
        elif self.family == "writebehind":
            # On io_uring, dcload reports each completion to the library:
            # the same engine and depth as every other mode.
            out["writebehind"] = self.name.split(":", 1)[1]
        return out, notes


BUFFERED = Mode("buffered")

# Engines whose every job keeps one I/O in flight whatever iodepth says.
SYNC_ENGINES = frozenset({"sync", "psync", "vsync", "pvsync", "pvsync2"})


def io_conditions(job: dict[str, object]) -> str:
    """The engine and depth a job runs at (``pvsync2 QD1``): two figures are
    comparable only when these are equal."""
    engine = str(job.get("ioengine", "psync"))
    depth = 1 if engine in SYNC_ENGINES else int(str(job.get("iodepth", 1)))
    return f"{engine} QD{depth}"


def parse_modes(spec: str) -> list[Mode]:
    """``all``, ``default`` or a comma-separated list (``writebehind`` alone means every policy)."""
    if spec == "all":
        return [Mode(m) for m in ALL_MODES]
    if spec == "default":
        return [Mode(m) for m in DEFAULT_MODES]
    out: list[Mode] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        names = [m for m in ALL_MODES if m.startswith("writebehind:")] if item == "writebehind" else [item]
        for n in names:
            if n not in ALL_MODES:
                raise UserError(f"unknown mode {item!r}; modes are {', '.join(ALL_MODES)}, writebehind (every policy), all")
            if Mode(n) not in out:
                out.append(Mode(n))
    if not out:
        raise UserError("no modes selected")
    return out


def probe(dcload: Path, mode: Mode, directory: Path) -> str | None:
    """None if ``mode`` works on ``directory``, else the reason it does not."""
    target = directory / f".probe-{mode.slug}"
    job, _ = mode.options({"rw": "write", "bs": "4k", "ioengine": "pvsync2"})
    return probe_write(dcload, str(target), job, target)


def probe_write(dcload: Path, filename: str, job: dict[str, object], leftover: Path) -> str | None:
    """None if a tiny synced write of ``filename`` with ``job``'s options
    works, else dcload's reason; ``leftover`` (where the file lands) is
    removed either way."""
    args = [str(dcload), "--name=probe", f"--filename={filename}", "--size=64k", "--end_fsync=1"]
    args += [f"--{k}={v}" for k, v in job.items()]
    try:
        out = spawn.run(args, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"dcload could not run: {e}"
    finally:
        leftover.unlink(missing_ok=True)
    if out.returncode == 0:
        return None
    lines = [line for line in out.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"dcload exited {out.returncode}"
