"""The modes a scenario runs in, and probing which ones the target supports.

A mode is what dcload does differently for the role under test: buffered,
the kernel's ``RWF_DONTCACHE`` (``dontcache``), ``O_DIRECT`` (``direct``), or
buffered I/O through libdontcache (``writebehind:<policy>``). The list of
modes, the job option that selects each and the policies are dcload's
(``dcload --list-modes=json``, from the Rust crate that defines them), read
once per dcload binary, so no list is written twice.

Every mode is probed on the target directory before the run with a tiny real
dcload job; a mode that fails there is skipped with dcload's own reason, never
run under a wrong label.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import spawn
from .errors import UserError

# The harness's choice of what a plain ``dcbench run`` compares.
DEFAULT_MODES = ("buffered", "dontcache", "direct", "writebehind:flusher")

# The dcload whose list of modes Mode reads (cli.py sets it to --dcload's).
_dcload: Path | None = None


def find_dcload(explicit: str | None) -> Path:
    """``--dcload``, else ``$DCLOAD``, else this checkout's release build, else ``dcload`` on PATH."""
    if explicit:
        p = Path(explicit)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise UserError(f"--dcload {explicit}: not an executable file")
        return p
    if os.environ.get("DCLOAD"):
        return find_dcload(os.environ["DCLOAD"])
    repo = Path(__file__).resolve().parent.parent.parent / "target" / "release" / "dcload"
    if repo.is_file():
        return repo
    found = shutil.which("dcload")
    if found:
        return Path(found)
    raise UserError("dcload not found: build it (make build), put it on PATH, or pass --dcload PATH")


def use_dcload(dcload: Path) -> None:
    """Read the modes from this dcload from now on."""
    global _dcload
    _dcload = dcload


@functools.cache
def _list_modes(dcload: Path) -> dict:
    try:
        out = subprocess.run([str(dcload), "--list-modes=json"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"{dcload} --list-modes=json could not run: {e}") from None
    if out.returncode != 0:
        raise UserError(f"{dcload} --list-modes=json failed ({out.stderr.strip()}): is it an older dcload? "
                        "rebuild it (make build)")
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError:
        raise UserError(f"{dcload} --list-modes=json printed no list of modes: is it dcload? "
                        "pass --dcload PATH to this checkout's target/release/dcload") from None


def catalogue() -> dict:
    """dcload's ``--list-modes=json``: ``modes`` (name, family, options, description) and ``policies``."""
    return _list_modes(_dcload or find_dcload(None))


def all_modes() -> tuple[str, ...]:
    return tuple(m["name"] for m in catalogue()["modes"])


@dataclass(frozen=True)
class Mode:
    name: str

    def _entry(self) -> dict:
        for m in catalogue()["modes"]:
            if m["name"] == self.name:
                return m
        raise UserError(f"unknown mode {self.name!r}; modes are {', '.join(all_modes())}")

    @property
    def family(self) -> str:
        return self._entry()["family"]

    @property
    def slug(self) -> str:
        """A file-name-safe form (``writebehind-flusher``)."""
        return self.name.replace(":", "-")

    def options(self, job: dict[str, object]) -> tuple[dict[str, object], list[str]]:
        """dcload options for a job in this mode, and notes on what was changed."""
        out = dict(job)
        notes: list[str] = []
        out.update(self._entry()["options"])
        if "uncached" in out and str(out.get("ioengine", "psync")) == "psync":
            # RWF_DONTCACHE needs preadv2/pwritev2.
            out["ioengine"] = "pvsync2"
            notes.append("psync -> pvsync2 (RWF_DONTCACHE needs pwritev2)")
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
    known = all_modes()
    if spec == "all":
        return [Mode(m) for m in known]
    if spec == "default":
        return [Mode(m) for m in DEFAULT_MODES]
    out: list[Mode] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        names = [m for m in known if m.startswith("writebehind:")] if item == "writebehind" else [item]
        for n in names:
            if n not in known:
                raise UserError(f"unknown mode {item!r}; modes are {', '.join(known)}, writebehind (every policy), all")
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
