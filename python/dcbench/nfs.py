"""The NFS server under test in ``dcbench run --nfs``, its io mode switched per case.

Three servers, one interface (``start``, ``supports``, ``set_mode``,
``record``, ``keep_log``, ``stop``):

- :class:`Dcnfsd`, this project's userspace NFSv3 server: dcbench starts it on
  loopback over the export directory it made, switches its modes through its
  control directory and stops it on any exit.
- :class:`KernelNfsd`, the kernel's nfsd where debugfs has its io knobs
  (``io_cache_read``, ``io_cache_write``: 0 buffered, 1 dontcache, 2 direct;
  and ``disable-splice-read``): dcbench exports the directory to loopback with
  exportfs, sets the knobs as the seed's nfsd-io-bench does, records what they
  were, and puts them back.
- :class:`ExistingServer`, one the user names (``--nfs-server``): neither
  started nor switched; the run's one mode is recorded as given.

In all, a mode is the server's for every role of a case: the knobs are
server-wide, as nfsd's are.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from . import spawn
from .balloon import die_with_parent
from .errors import UserError
from .modes import Mode

NFSD_DEBUGFS = Path("/sys/kernel/debug/nfsd")
# nfsd's knob values for the modes it has.
NFSD_MODES = {"buffered": "0", "dontcache": "1", "direct": "2"}
START_TIMEOUT_S = 10.0
SWITCH_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 30.0


def find_dcnfsd(dcload: Path) -> Path:
    """dcnfsd beside the dcload in use (one build), else on PATH."""
    beside = dcload.parent / "dcnfsd"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("dcnfsd")
    if found:
        return Path(found)
    raise UserError(f"dcnfsd not found beside {dcload} or on PATH: build it (make build)")


class Dcnfsd:
    kind = "dcnfsd"

    def __init__(self, binary: Path, export: Path, work: Path):
        self.binary = binary
        self.export = export
        self.control = work / "nfsd-control"
        self.port_file = work / "nfsd.port"
        self.log = work / "nfsd.stderr"
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        return f"nfs://127.0.0.1/export?nfsport={self.port}&mountport={self.port}"

    def start(self) -> None:
        args = [str(self.binary), "--export", str(self.export), "--control", str(self.control),
                "--port-file", str(self.port_file)]
        with open(self.log, "wb") as err, spawn.held():
            self.proc = spawn.popen(args, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.port_file.exists():
                self.port = int(self.port_file.read_text().strip())
                return
            if self.proc.poll() is not None:
                raise UserError(f"dcnfsd exited {self.proc.returncode} at start: {self._last_line()}")
            time.sleep(0.02)
        raise UserError(f"dcnfsd did not start serving in {START_TIMEOUT_S:g} s: {self._last_line()}")

    def _last_line(self) -> str:
        lines = self.log.read_text(errors="replace").strip().splitlines() if self.log.exists() else []
        return lines[-1] if lines else "(nothing on stderr)"

    def supports(self, mode: Mode) -> str | None:
        return None

    def set_mode(self, mode: Mode) -> None:
        """Both directions in ``mode``; returns once dcnfsd says they apply."""
        for knob in ("io_cache_read", "io_cache_write"):
            (self.control / knob).write_text(mode.name + "\n")
        applied = self.control / "applied"
        applied.unlink(missing_ok=True)
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + SWITCH_TIMEOUT_S
        while time.monotonic() < deadline:
            if applied.exists():
                text = applied.read_text().strip()
                if text.startswith("error"):
                    raise UserError(f"dcnfsd refused mode {mode.name}: {text}")
                return
            if self.proc.poll() is not None:
                raise UserError(f"dcnfsd exited {self.proc.returncode}: {self._last_line()}")
            time.sleep(0.01)
        raise UserError(f"dcnfsd did not switch to {mode.name} in {SWITCH_TIMEOUT_S:g} s")

    def record(self) -> dict[str, object]:
        return {"server": self.kind, "binary": str(self.binary), "url": self.url, "export": str(self.export),
                "modes_switched_by": str(self.control)}

    def keep_log(self, run_dir: Path) -> None:
        """dcnfsd's stderr (mode switches, fallbacks, failed calls) into the results."""
        if self.log.exists():
            shutil.copyfile(self.log, run_dir / "dcnfsd.stderr")

    def stop(self) -> list[str]:
        """SIGTERM (dcnfsd settles its write-behind and exits), SIGKILL if it hangs."""
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return []
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return [f"dcnfsd did not stop in {STOP_TIMEOUT_S:g} s and was killed"]
        return [] if p.returncode == 0 else [f"dcnfsd exited {p.returncode}: {self._last_line()}"]


class KernelNfsd:
    """The kernel's nfsd, exporting ``export`` to loopback. ``debugfs`` is
    where its io knobs are (a test points it at a directory laid out alike)."""

    kind = "nfsd"
    KNOBS = ("io_cache_read", "io_cache_write", "disable-splice-read")

    def __init__(self, export: Path, debugfs: Path = NFSD_DEBUGFS, exportfs: bool = True):
        self.export = export
        self.debugfs = debugfs
        self.exportfs = exportfs
        self.before: dict[str, str] = {}
        self.current: dict[str, str] = {}

    @staticmethod
    def available(debugfs: Path = NFSD_DEBUGFS) -> str | None:
        """None where this kernel's nfsd has io knobs, else why not."""
        missing = [k for k in ("io_cache_read", "io_cache_write") if not (debugfs / k).exists()]
        if missing:
            return (f"{debugfs} has no {', '.join(missing)} (nfsd's io modes need Linux 6.18+, nfsd loaded and "
                    "debugfs mounted); use --nfs dcnfsd")
        return None

    @property
    def url(self) -> str:
        return f"nfs://127.0.0.1{self.export}"

    def start(self) -> None:
        why = self.available(self.debugfs)
        if why:
            raise UserError(why)
        self.before = {k: (self.debugfs / k).read_text().strip() for k in self.KNOBS if (self.debugfs / k).exists()}
        if self.exportfs:
            out = subprocess.run(["exportfs", "-o", "rw,insecure,no_root_squash,no_subtree_check,sync",
                                  f"127.0.0.1:{self.export}"], capture_output=True, text=True)
            if out.returncode != 0:
                raise UserError(f"exportfs 127.0.0.1:{self.export} failed: {out.stderr.strip()}")

    def supports(self, mode: Mode) -> str | None:
        if mode.name not in NFSD_MODES:
            return f"the kernel's nfsd has no {mode.name} mode (it has {', '.join(NFSD_MODES)})"
        return None

    def set_mode(self, mode: Mode) -> None:
        """As the seed sets them: both knobs, and splice reads only for
        buffered (dontcache and direct reads cannot splice)."""
        value = NFSD_MODES[mode.name]
        want = {"io_cache_read": value, "io_cache_write": value}
        if "disable-splice-read" in self.before:
            want["disable-splice-read"] = "N" if mode.name == "buffered" else "Y"
        for knob, v in want.items():
            path = self.debugfs / knob
            try:
                path.write_text(v + "\n")
            except OSError as e:
                raise UserError(f"{path}: cannot set {v} ({e.strerror}): this kernel's nfsd may not have "
                                f"{mode.name}") from None
        self.current = want

    def record(self) -> dict[str, object]:
        return {"server": self.kind, "url": self.url, "export": str(self.export), "debugfs": str(self.debugfs),
                "knobs_before": dict(self.before)}

    def keep_log(self, run_dir: Path) -> None:
        """The kernel's server keeps its log in the kernel's."""

    def stop(self) -> list[str]:
        """Puts the knobs back and withdraws the export."""
        problems = []
        for knob, v in self.before.items():
            try:
                (self.debugfs / knob).write_text(v + "\n")
            except OSError as e:
                problems.append(f"{self.debugfs / knob}: cannot put back {v!r}: {e.strerror}")
        self.before = {}
        if self.exportfs:
            out = subprocess.run(["exportfs", "-u", f"127.0.0.1:{self.export}"], capture_output=True, text=True)
            if out.returncode != 0:
                problems.append(f"exportfs -u 127.0.0.1:{self.export}: {out.stderr.strip()}")
            self.exportfs = False
        return problems


class ExistingServer:
    """An NFS server dcbench neither starts nor switches (``--nfs-server``):
    its io mode is whatever it is in, and the run's one mode is recorded as
    the user gave it. The files are made and unlinked through NFS, at the
    top of the export, named ``dcbench-<run-id>.*``."""

    kind = "existing"

    def __init__(self, spec: str):
        self.spec = spec
        self.url = server_url(spec)

    def start(self) -> None:
        """Nothing to start: the run's first write (the probe) finds out whether it serves."""

    def supports(self, mode: Mode) -> str | None:
        return None

    def set_mode(self, mode: Mode) -> None:
        """The server's mode is its operator's to set."""

    def record(self) -> dict[str, object]:
        return {"server": self.kind, "url": self.url, "given_as": self.spec,
                "modes": "as given: dcbench cannot switch or probe an existing server's io mode",
                "monitors": "this machine, the client: the server's memory and disks are not sampled"}

    def keep_log(self, run_dir: Path) -> None:
        """An existing server keeps its own log."""

    def stop(self) -> list[str]:
        return []


def server_url(spec: str) -> str:
    """``HOST:/EXPORT`` (as mount(8) names it) or an ``nfs://`` URL as
    libnfs takes it (``?nfsport=&mountport=`` for a server without
    portmapper), as the URL dcload's nfs engine takes."""
    if spec.startswith("nfs://"):
        if len(spec) == len("nfs://") or "/" not in spec[len("nfs://"):]:
            raise UserError(f"--nfs-server {spec}: the URL names no export; nfs://HOST/EXPORT")
        return spec
    host, sep, export = spec.partition(":/")
    if not sep or not host or "/" in host:
        raise UserError(f"--nfs-server {spec}: not HOST:/EXPORT or nfs://HOST/EXPORT "
                        "(e.g. fileserver:/srv/bench, nfs://10.0.0.5/srv/bench)")
    return f"nfs://{host}/{export}"


def nfs_options(job: dict[str, object], url: str) -> tuple[dict[str, object], list[str]]:
    """A role's dcload options over NFS: fio's nfs engine at the role's depth,
    the mode left to the server."""
    out = {k: v for k, v in job.items() if k not in ("uncached", "direct", "writebehind")}
    notes = []
    engine = str(out.get("ioengine", "psync"))
    if engine != "nfs":
        notes.append(f"{engine} -> nfs (the server's io mode is under test)")
    out["ioengine"] = "nfs"
    out["nfs_url"] = url
    return out, notes
