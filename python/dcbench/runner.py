"""``dcbench run``: the matrix, case by case, with monitors and safe results.

A case is one scenario in one mode, one repetition. Cases run interleaved
(every scenario and mode once, then the next repetition) so drift over the
run hits all modes alike, and each repetition rotates the order of a
scenario's modes so that none always runs after the same other one. Per
case: remove the scenario's files, lay out the files readers need, sync and
drop caches, start the monitor, run every role in ONE dcload invocation (so
readers and writers overlap), stop the monitor, store the figures, remove
the files.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import RESULTS_FORMAT, __version__, generation, spawn, system
from .balloon import Balloon, available_memory, die_with_parent, plan_balloon
from .errors import Interrupted, UserError
from .metrics import role_metrics, system_metrics
from .modes import BUFFERED, Mode, io_conditions, probe, probe_write
from .monitor import Monitor
from .profiles import Profile
from .nfs import Dcnfsd, ExistingServer, KernelNfsd, find_dcnfsd, nfs_options
from .results import read_cases
from .scenario import Role, Scenario
from .sizes import dcload_size, format_size
from .store import Store, write_atomic, write_json
from .summary import attach_io, render_markdown, summarize
from .testbed import DeviceSpec, Testbed

# Assumed speeds for the --dry-run estimate and the progress ETA only.
SEQ_BYTES_S = 1.0e9
RAND_BYTES_S = 1.5e8
CASE_OVERHEAD_S = 2.0
# A time-based role that runs "until" another ends gets this as a backstop.
UNTIL_BACKSTOP_S = 24 * 3600


@dataclass
class RunConfig:
    scenarios: list[Scenario]
    modes: list[Mode]
    repeat: int
    profile: Profile
    memory: int  # what sizes are computed from
    balloon: bool
    size_override: int | None
    target: Path
    results: Path
    dcload: Path
    monitor_hz: float = 4.0
    quiet: bool = False
    cgroup: Path | None = None
    argv: list[str] = field(default_factory=list)
    # A filesystem made for the run (--fs, --device); None: the files go in --dir as it is.
    testbed: TestbedConfig | None = None
    # The NFS server under test (--nfs: "dcnfsd" or "nfsd"); None: local files.
    nfs: str | None = None
    # An existing NFS server (--nfs-server HOST:/EXPORT or nfs:// URL), in place of --nfs.
    nfs_server: str | None = None

    def __post_init__(self):
        # The profile's job options hold for every role of every scenario.
        self.scenarios = [s.with_job(self.profile.job) for s in self.scenarios]


@dataclass(frozen=True)
class TestbedConfig:
    fs: str
    device: DeviceSpec  # kind "loop" with size None: sized to the largest case
    mkfs_opts: list[str] = field(default_factory=list)
    mount_opts: str | None = None
    force: bool = False
    fresh_per_case: bool = False


@dataclass(frozen=True)
class Case:
    scenario: Scenario
    mode: Mode
    rep: int

    @property
    def label(self) -> str:
        return f"{self.scenario.name} {self.mode.name} #{self.rep + 1}"


def plan_cases(cfg: RunConfig, modes: list[Mode]) -> list[Case]:
    """Every scenario in every mode it has, then the next repetition; each
    repetition starts a scenario's modes one place further along their list.

    What ran just before moves a case's figure: on this project's virtual
    disk the kernel's ``RWF_DONTCACHE`` mode of the 32-writer scenario wrote
    2.2 GB/s (median of 3) run before the library's flusher each time, and
    2.9 GB/s run after buffered, the same hour. In a fixed order one mode
    would always follow the same other one; rotated, with as many
    repetitions as modes, each mode runs once in each place and the pairs
    of one repetition carry no fixed bias.
    """
    cases = []
    for rep in range(cfg.repeat):
        for s in cfg.scenarios:
            own = [m for m in modes if m.family in s.modes]
            turn = rep % len(own) if own else 0
            cases += [Case(s, m, rep) for m in own[turn:] + own[:turn]]
    return cases


def file_bytes(role: Role, cfg: RunConfig) -> int:
    """Per-file size: the role's rule, or --size for rules that scale with memory."""
    if cfg.size_override and "mem" in role.size:
        return cfg.size_override
    return role.file_bytes(cfg.memory)


def role_runtime(role: Role, cfg: RunConfig) -> float | None:
    rt = role.runtime
    cap = cfg.profile.max_runtime
    if rt is not None and cap is not None:
        return min(rt, cap)
    return rt if rt is not None else cap


def case_bytes(s: Scenario, cfg: RunConfig) -> int:
    return sum(file_bytes(r, cfg) * (r.files_per_job or 1) * r.count for r in s.roles)


def estimate_s(case: Case, cfg: RunConfig) -> float:
    """A rough duration for the progress bar and --dry-run."""
    longest = 0.0
    pre = 0
    for r in case.scenario.roles:
        b = file_bytes(r, cfg) * (r.files_per_job or 1) * r.count
        if r.precreate:
            pre += b
        if r.until:
            continue
        bs = str(r.job.get("bs", "4k")).lower()
        rate = RAND_BYTES_S if ("rand" in str(r.job.get("rw")) or bs.endswith("k")) else SEQ_BYTES_S
        t = b / rate
        rt = role_runtime(r, cfg)
        if r.runtime is not None:
            t = rt or t
        elif rt is not None:
            t = min(t, rt)
        longest = max(longest, t)
    return CASE_OVERHEAD_S + longest + pre / (2 * SEQ_BYTES_S)


def role_job(role: Role, mode: Mode, nfs_url: str | None) -> tuple[dict[str, object], list[str]]:
    """A role's dcload options in ``mode``: the mode's own, or over NFS the
    nfs engine's (the server is in the mode, for every role)."""
    if nfs_url is not None:
        return nfs_options(role.job, nfs_url)
    return (mode if role.mode == "test" else BUFFERED).options(role.job)


def role_io(scenario: Scenario, mode: Mode, nfs_url: str | None = None) -> dict[str, str]:
    """Each role's engine and depth when ``scenario`` runs in ``mode``."""
    return {r.name: io_conditions(role_job(r, mode, nfs_url)[0]) for r in scenario.roles}


def runs_over_nfs(s: Scenario) -> str | None:
    """None if ``s`` can run over NFS, else why not."""
    if any(r.files_per_job for r in s.roles):
        return "its many small files are written by the sync engines (nrfiles), and the nfs engine is not one"
    return None


def _opt(k: str, v: object) -> str:
    return f"--{k}={v}"


def dcload_args(case: Case, cfg: RunConfig, files: Path, output: Path, nfs_url: str | None = None,
                prefix: str = "", unlink: bool = False) -> tuple[list[str], list[str]]:
    """The one dcload command line of a case, and notes on mode adjustments.
    Over NFS, ``files`` is the directory's path inside the export. Each file
    is ``files/<prefix><role>.<jobnum>``; ``unlink``: dcload removes the
    files when done (where dcbench cannot remove a directory of them)."""
    args = [str(cfg.dcload), "--output-format=json", f"--output={output}"]
    notes: list[str] = []
    stoppers = {r.until for r in case.scenario.roles if r.until}
    for i, r in enumerate(case.scenario.roles):
        job, n = role_job(r, case.mode, nfs_url)
        notes += [f"{r.name}: {x}" for x in n]
        args.append(f"--name={r.name}")
        if i > 0:
            args.append("--new_group")  # reported apart, run together
        args += [
            "--group_reporting=1",
            _opt("numjobs", r.count),
            _opt("directory", files),
            _opt("filename_format", f"{prefix}{r.name}.$jobnum" + (".$filenum" if r.files_per_job else "")),
            _opt("write_bw_log", r.name),
            _opt("write_lat_log", r.name),
            _opt("log_avg_msec", cfg.profile.log_avg_msec),
        ]
        if r.files_per_job:
            args += [_opt("nrfiles", r.files_per_job), _opt("filesize", dcload_size(file_bytes(r, cfg)))]
        else:
            args.append(_opt("size", dcload_size(file_bytes(r, cfg))))
        rt = role_runtime(r, cfg)
        if r.until:
            args += ["--time_based", _opt("runtime", f"{UNTIL_BACKSTOP_S}s")]
        elif r.runtime is not None:
            args += ["--time_based", _opt("runtime", f"{rt:g}s")]
        elif rt is not None:
            args.append(_opt("runtime", f"{rt:g}s"))
        if r.name in stoppers:
            # Every role of the case, in its reporting group or not, stops with it.
            args += ["--exitall=1", "--exit_what=stonewall"]
        if unlink:
            args.append("--unlink=1")
        args += [_opt(k, v) for k, v in job.items()]
    return args, notes


def precreate_args(case: Case, cfg: RunConfig, files: Path, nfs_url: str | None = None,
                   prefix: str = "") -> list[str] | None:
    """Lays out the files of roles that read existing files: O_DIRECT, so
    nothing stays cached; with ``nfs_url`` through the server (in whatever
    mode it is), for a server dcbench cannot reach the files of."""
    args = [str(cfg.dcload)]
    engine = ["--ioengine=nfs", f"--nfs_url={nfs_url}"] if nfs_url else ["--direct=1", "--ioengine=io_uring"]
    for r in case.scenario.roles:
        if not r.precreate:
            continue
        args += [
            f"--name={r.name}", _opt("numjobs", r.count), _opt("directory", files),
            _opt("filename_format", f"{prefix}{r.name}.$jobnum"), _opt("size", dcload_size(file_bytes(r, cfg))),
            "--rw=write", "--bs=1M", *engine, "--iodepth=16",
        ]
    return args if len(args) > 1 else None


def make_testbed(tc: TestbedConfig, work: Path, need: int) -> Testbed:
    """The run's testbed; a ``loop`` device without a size gets the largest
    case's need, rounded up to a whole GiB."""
    device = tc.device
    if device.kind == "loop" and device.size is None:
        device = DeviceSpec("loop", size=max(1 << 30, -(-need // (1 << 30)) << 30))
    return Testbed(tc.fs, device, work, mkfs_opts=list(tc.mkfs_opts), mount_opts=tc.mount_opts, force=tc.force)


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def check_target(target: Path, need: int) -> None:
    """Refuse targets dcbench must not or cannot write into."""
    if not target.exists():
        raise UserError(f"--dir {target}: does not exist; create it or pick another directory")
    if not target.is_dir():
        raise UserError(f"--dir {target}: is not a directory")
    if target.resolve() == Path("/"):
        raise UserError("--dir /: refusing to write into the root directory; pick a scratch directory")
    if not os.access(target, os.W_OK | os.X_OK):
        raise UserError(f"--dir {target}: not writable by this user")
    st = os.statvfs(target)
    free = st.f_bavail * st.f_frsize
    if free < need:
        raise UserError(
            f"--dir {target}: needs {format_size(need)} free for the largest case, has {format_size(free)}; "
            "pick another --dir, or a smaller --memory or --size"
        )


class Runner:
    def __init__(self, cfg: RunConfig, console=None):
        self.cfg = cfg
        self.console = console
        self.run_id = new_run_id()
        self.run_dir = cfg.results / self.run_id
        self.work = cfg.target / f"dcbench-{self.run_id}"
        # Where the cases' files go: the work directory, or the testbed's mount point in it.
        self.files_root = self.work
        self.testbed: Testbed | None = None
        self.proc: subprocess.Popen | None = None
        self.manifest: dict = {}
        self.store: Store | None = None
        # The NFS server under test, and the scenarios that cannot run over NFS.
        self.server: Dcnfsd | KernelNfsd | ExistingServer | None = None
        self.not_over_nfs: dict[str, str] = {}

    # -- signals -----------------------------------------------------------
    # The first SIGINT or SIGTERM raises Interrupted in the main thread; the
    # run stops there and cleans up with both signals blocked, so a second
    # Ctrl-C (people press it twice) cannot cut the cleanup short and leave
    # the manifest "running". Signals that arrive meanwhile are discarded.
    _SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def _on_signal(self, signum, _frame):
        if getattr(self, "_interrupted", False):
            return
        self._interrupted = True
        raise Interrupted(signum)

    def _install_signals(self):
        self._old = {s: signal.signal(s, self._on_signal) for s in self._SIGNALS}

    def _block_signals(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, self._SIGNALS)

    def _restore_signals(self):
        # Pending signals are discarded: the run has stopped already. After
        # an interrupted run they stay ignored: the process is on its way
        # out with status 130, and a Ctrl-C pressed once more must not end
        # it by the signal (a run's cleanup can be over in well under the
        # 0.2 s a user takes to press it again).
        for s in self._SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self._SIGNALS)
        if getattr(self, "_interrupted", False):
            return
        for s, h in getattr(self, "_old", {}).items():
            signal.signal(s, h)

    # -- the run -------------------------------------------------------------
    def run(self, progress_factory=None) -> int:
        cfg = self.cfg
        need = max(case_bytes(s, cfg) for s in cfg.scenarios) * 105 // 100 + (64 << 20)
        if cfg.testbed:
            self.testbed = make_testbed(cfg.testbed, self.work, need)
            self.testbed.check(need)
            image = self.testbed.size if self.testbed.device.kind == "loop" else 0
            check_target(cfg.target, image + (64 << 20))
        else:
            check_target(cfg.target, need)
        self._install_signals()
        balloon = None
        cgroup_limit = None  # (memory.max, the value it had), to put back
        status = "failed"
        try:
            self.work.mkdir()
            if self.testbed:
                # Before the results exist: a testbed that cannot be made refuses the run.
                self._say(f"making the testbed: {cfg.testbed.fs} on {self.testbed.device}")
                self._unsignalled(self.testbed.setup)
                self.files_root = self.testbed.mount_point
            if cfg.nfs or cfg.nfs_server:
                self._start_server()
            self.run_dir.mkdir(parents=True)
            self.store = Store(cfg.results)
            modes, skipped = self._probe_modes()
            cases = [c for c in plan_cases(cfg, modes) if c.scenario.name not in self.not_over_nfs]
            self.manifest = self._manifest(modes, skipped, cases)
            self._save_manifest()
            self._warn_of_inode_reuse(cases)
            if not cases:
                raise UserError("no case can run: every selected mode was skipped (see above)")
            if cfg.cgroup:
                cgroup_limit = self._limit_cgroup(cfg.cgroup, cfg.memory)
            if cfg.balloon:
                system.drop_caches()
                available = available_memory()
                # zram's data lives in RAM: leave room for a full device beside the page cache.
                zram = self.testbed.size if self.testbed and self.testbed.device.kind == "zram" else 0
                # Assigned before inflating, so a signal while it fills still deflates it.
                balloon = Balloon(plan_balloon(cfg.memory + zram, available))
                self._inflate(balloon, available)
            self._run_cases(cases, progress_factory)
            status = "complete"
            return 0
        except Interrupted as e:
            self._block_signals()
            status = "incomplete"
            if self.manifest:  # else stopped before the run had results to mark
                self.manifest["interrupted_by"] = signal.Signals(e.signum).name
            return 130
        finally:
            self._block_signals()
            if getattr(self, "_interrupted", False):
                status = "incomplete"
            self._undo(balloon, cgroup_limit)
            # Results are written with the signals still blocked: a Ctrl-C
            # here must not leave the manifest half-written.
            try:
                self._close_results(status)
            finally:
                self._restore_signals()

    def _warn_of_inode_reuse(self, cases: list[Case]) -> None:
        """Says so before a run whose file-creating scenarios would measure an
        ext4 without a journal's inode allocation more than the modes."""
        if self.manifest["system"]["target"].get("ext4_journal") is not False:
            return
        creating = sorted({c.scenario.name for c in cases if any(r.files_per_job for r in c.scenario.roles)})
        if creating:
            self._say(f"[yellow]warning[/]: {', '.join(creating)} on an ext4 without a journal: files/s will "
                      "depend on the files the case before deleted; --fs ext4 gives comparable figures")

    def _inflate(self, balloon: Balloon, available: int) -> None:
        """Fills the balloon and records it in the manifest."""
        balloon.inflate()
        self.manifest["memory"].update(balloon=balloon.size, balloon_locked=balloon.locked,
                                       available_before=available)
        if balloon.size == 0:
            self.manifest["memory"]["note"] = (
                f"only {format_size(available)} available: no balloon, the cache may use all of it")
        self._save_manifest()

    def _undo(self, balloon: Balloon | None, cgroup_limit: tuple[Path, str] | None) -> None:
        """Everything the run set up, undone: dcload, the server, the cgroup's
        limit, the balloon, the testbed, the files."""
        self._stop_dcload()
        self._stop_server()
        if cgroup_limit:
            try:
                cgroup_limit[0].write_text(cgroup_limit[1] + "\n")
            except OSError:
                pass  # the cgroup went away: nothing to put back
        if balloon:
            balloon.deflate()
        self._teardown_testbed()
        if not os.path.ismount(self.files_root):
            shutil.rmtree(self.work, ignore_errors=True)

    def _close_results(self, status: str) -> None:
        """The manifest's final status and the summary; a run stopped before it
        had a manifest leaves no results directory."""
        if self.manifest:
            self.manifest["status"] = status
            self.manifest["finished"] = now_iso()
            self._finish_summary()
            self._save_manifest()
        elif self.run_dir.is_dir():
            # Stopped while probing modes, before the manifest: no result to keep.
            shutil.rmtree(self.run_dir, ignore_errors=True)
        if self.store:
            self.store.close()

    def _unsignalled(self, step) -> None:
        """Runs ``step`` with SIGINT and SIGTERM held back (``spawn.held``,
        which holds them from numpy's threads too): making or remaking the
        testbed takes seconds, and stopping halfway could leave a device
        attached that teardown does not know of. With the signals blocked
        in the main thread alone, a Ctrl-C between ``losetup`` and the
        testbed's note of the device left it attached over the deleted
        image. A held signal stops the run right after."""
        with spawn.held():
            step()

    def _teardown_testbed(self) -> None:
        if not self.testbed:
            return
        problems = self.testbed.teardown()
        if self.manifest:
            self.manifest["testbed"] = self.testbed.record()
            self.manifest["testbed"]["teardown_problems"] = problems
        for p in problems:
            self._say(f"[red]testbed[/]: {p}")

    def _limit_cgroup(self, cgroup: Path, memory: int) -> tuple[Path, str]:
        """Sets the user's cgroup's memory.max for the run; returns what to restore."""
        limit = cgroup / "memory.max"
        try:
            before = limit.read_text().strip()
            limit.write_text(f"{memory}\n")
        except OSError as e:
            raise UserError(f"--cgroup {cgroup}: cannot set memory.max to {memory}: {e.strerror}") from None
        self.manifest["memory"]["cgroup_memory_max_before"] = before
        self._save_manifest()
        return limit, before

    def _start_server(self) -> None:
        """The NFS server over ``export/`` in the files' place; the cases'
        files go in the export. An existing server's files are its own."""
        for s in self.cfg.scenarios:
            why = runs_over_nfs(s)
            if why:
                self.not_over_nfs[s.name] = why
                self._say(f"[yellow]skipping scenario {s.name} over NFS[/]: {why}")
        if self.cfg.nfs_server:
            if len(self.cfg.modes) != 1 or self.cfg.testbed:
                raise UserError("--nfs-server: dcbench cannot switch an existing server's io mode nor make its "
                                "filesystem; name the one mode it is in (--modes dontcache), no --fs/--device, and "
                                "run again after switching it yourself (dcbench compare sets the runs side by side)")
            self.server = ExistingServer(self.cfg.nfs_server)
            self._say(f"over the existing NFS server {self.server.url}, in the mode it is in")
            return
        export = self.files_root / "export"
        export.mkdir()
        if self.cfg.nfs == "nfsd":
            self.server = KernelNfsd(export)
        else:
            self.server = Dcnfsd(find_dcnfsd(self.cfg.dcload), export, self.work)
        self._say(f"starting the NFS server: {self.server.kind} over {export}")
        # Not with signals held: the server would inherit them blocked. A
        # signal meanwhile is safe, as self.server is set and the run's
        # cleanup stops it.
        self.server.start()
        self.files_root = export

    def _stop_server(self) -> None:
        if self.server is None:
            return
        problems = self.server.stop()
        if self.run_dir.is_dir():
            self.server.keep_log(self.run_dir)
        if self.manifest and self.manifest.get("nfs"):
            self.manifest["nfs"]["stop_problems"] = problems
        for p in problems:
            self._say(f"[red]nfs server[/]: {p}")

    def _probe_nfs_mode(self, m: Mode) -> str | None:
        """None if the server runs in ``m`` and a tiny write through it works."""
        why = self.server.supports(m)
        if why:
            return why
        try:
            self.server.set_mode(m)
        except UserError as e:
            return str(e)
        job, _ = nfs_options({"rw": "write", "bs": "4k"}, self.server.url)
        if self._remote():
            # Not the mode, which cannot be known: whether the server takes a write.
            job["unlink"] = 1
            why = probe_write(self.cfg.dcload, f"/{self._remote_prefix()}probe", job, self.work / "probe")
            if why:
                raise UserError(f"--nfs-server {self.cfg.nfs_server}: a 64 KiB write failed: {why}")
            return None
        return probe_write(self.cfg.dcload, "/.probe", job, self.files_root / ".probe")

    def _remote(self) -> bool:
        """The files are on a server dcbench reaches only through NFS."""
        return isinstance(self.server, ExistingServer)

    def _remote_prefix(self, scenario: str = "") -> str:
        return f"dcbench-{self.run_id}." + (f"{scenario}." if scenario else "")

    def _probe_modes(self) -> tuple[list[Mode], dict[str, str]]:
        ok, skipped = [], {}
        for m in self.cfg.modes:
            if self.server is not None:
                reason = self._probe_nfs_mode(m)
            else:
                reason = probe(self.cfg.dcload, m, self.files_root)
            if reason is None:
                ok.append(m)
            else:
                skipped[m.name] = reason
                self._say(f"[yellow]skipping mode {m.name}[/]: {reason}")
        return ok, skipped

    def _manifest(self, modes: list[Mode], skipped: dict[str, str], cases: list[Case]) -> dict:
        cfg = self.cfg
        return {
            "format": RESULTS_FORMAT,
            "dcbench": __version__,
            "run_id": self.run_id,
            "status": "running",
            "pid": os.getpid(),
            "started": now_iso(),
            "finished": None,
            "argv": cfg.argv,
            "profile": cfg.profile.name,
            "repeat": cfg.repeat,
            # Each repetition starts a scenario's modes one place further along
            # (plan_cases); runs recorded before this key ran them in one order.
            "mode_order": "rotated",
            "memory": {
                "effective": cfg.memory,
                "method": "balloon" if cfg.balloon else ("cgroup" if cfg.cgroup else "none"),
                "cgroup": str(cfg.cgroup) if cfg.cgroup else None,
                "size_override": cfg.size_override,
            },
            "monitor_hz": cfg.monitor_hz,
            "scenarios": [s.name for s in cfg.scenarios],
            "modes": [m.name for m in modes],
            "skipped_modes": skipped,
            # What summary, report and compare check before setting figures side by side.
            "io": {s.name: {m.name: role_io(s, m, self._nfs_url()) for m in modes} for s in cfg.scenarios
                   if s.name not in self.not_over_nfs},
            "controls": {s.name: list(s.controls) for s in cfg.scenarios},
            # libdontcache's settings dcload's in-process engine reads (DONTCACHE_SUBMIT=uring, ...).
            "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith("DONTCACHE_")},
            # Over NFS: the server, its export, and what its io knobs were before the run.
            "nfs": dict(self.server.record(), skipped_scenarios=self.not_over_nfs,
                        export_fs=None if self._remote() else system.mount_of(self.files_root).get("fs_type"))
            if self.server else None,
            "cases_planned": len(cases),
            "cases_done": 0,
            "cases_failed": 0,
            "failures": [],
            "drop_caches": None,
            "system": system.describe(self.files_root, cfg.dcload),
            "testbed": self.testbed.record() if self.testbed else None,
            "kernel_dontcache": generation.probe(
                cfg.dcload, self.files_root, self.testbed.dev_path if self.testbed else None),
        }

    def _nfs_url(self) -> str | None:
        return self.server.url if self.server else None

    def _save_manifest(self) -> None:
        write_json(self.run_dir / "manifest.json", self.manifest)
        if self.store:
            self.store.put_run(self.manifest, self.run_dir)

    def _say(self, text: str) -> None:
        if self.cfg.quiet:
            return
        if self.console is not None:
            self.console.print(text)
        else:
            print(text, file=sys.stderr)

    def _run_cases(self, cases: list[Case], progress_factory) -> None:
        estimates = [estimate_s(c, self.cfg) for c in cases]
        bar = progress_factory(sum(estimates)) if progress_factory else None
        try:
            for case, est in zip(cases, estimates):
                if bar:
                    bar.start_case(case.label)
                self._run_case(case)
                self.manifest["cases_done"] += 1
                self._save_manifest()
                if bar:
                    bar.advance(est)
        finally:
            if bar:
                bar.close()

    def _run_case(self, case: Case) -> None:
        cfg = self.cfg
        case_dir = self.run_dir / "cases" / case.scenario.name / case.mode.slug / f"rep{case.rep}"
        case_dir.mkdir(parents=True, exist_ok=True)
        # Failed cases count as done: every case after the first gets a new filesystem.
        if self.testbed and self.cfg.testbed.fresh_per_case and self.manifest["cases_done"] > 0:
            self._unsignalled(self.testbed.refresh)
            self.manifest["testbed"]["made"] = self.testbed.mkfs_count
        remote = self._remote()
        files = self.files_root / case.scenario.name
        if not remote:
            shutil.rmtree(files, ignore_errors=True)
            files.mkdir()
        started = now_iso()
        t_start = time.monotonic()
        status, message, metrics = "ok", None, {}
        try:
            if remote:
                # No directory to make or remove there: prefixed names at the
                # export's top, unlinked by dcload at the end of the case.
                prefix = self._remote_prefix(case.scenario.name)
                pre = precreate_args(case, cfg, Path("/"), self._nfs_url(), prefix)
            else:
                pre = precreate_args(case, cfg, files)
            if pre:
                rc, err = self._dcload(pre, case_dir, case_dir / "precreate.stderr", monitor=None)
                if rc != 0:
                    raise _CaseFailed(f"laying out read files failed: {err}")
            dropped = system.drop_caches()
            if dropped is not None and self.manifest.get("drop_caches") is None:
                self._say(f"[yellow]warning[/]: {dropped}")
            self.manifest["drop_caches"] = "ok" if dropped is None else dropped
            if remote:
                args, notes = dcload_args(case, cfg, Path("/"), case_dir / "dcload.json", self._nfs_url(),
                                          prefix=prefix, unlink=True)
            elif self.server:
                self.server.set_mode(case.mode)
                args, notes = dcload_args(case, cfg, Path("/") / files.relative_to(self.files_root),
                                          case_dir / "dcload.json", self._nfs_url())
            else:
                args, notes = dcload_args(case, cfg, files, case_dir / "dcload.json")
            write_json(case_dir / "command.json", {"argv": args, "notes": notes})
            mon = Monitor(case_dir / "monitor.csv", self.manifest["system"]["target"].get("disk"),
                          hz=cfg.monitor_hz)
            rc, err = self._dcload(args, case_dir, case_dir / "dcload.stderr", monitor=mon)
            if rc != 0:
                raise _CaseFailed(f"dcload exited {rc}: {err}")
            report = json.loads((case_dir / "dcload.json").read_text())
            metrics = self._metrics(case, report, mon.rows)
        except (_CaseFailed, UserError) as e:
            status, message = "failed", str(e)
            if remote:
                message += f" (files {self._remote_prefix(case.scenario.name)}* may remain on the server)"
            self.manifest["cases_failed"] += 1
            self.manifest["failures"].append({"case": case.label, "message": message})
            self._say(f"[red]{case.label} failed[/]: {message}")
        except Interrupted:
            status, message = "interrupted", "stopped by a signal"
            raise
        finally:
            wall = time.monotonic() - t_start
            write_json(case_dir / "case.json", {"format": RESULTS_FORMAT, "run_id": self.run_id,
                                                "seq": self.manifest["cases_done"], "scenario": case.scenario.name, "mode": case.mode.name,
                                                "rep": case.rep, "status": status, "message": message,
                                                "started": started, "wall_s": wall, "metrics": metrics})
            self.store.put_case(self.run_id, case.scenario.name, case.mode.name, case.rep, status,
                                started, wall, message, metrics)
            if not remote:
                shutil.rmtree(files, ignore_errors=True)

    def _metrics(self, case: Case, report: dict, rows: list[dict]) -> dict[str, dict[str, float]]:
        by_name = {j["jobname"]: j for j in report.get("jobs", [])}
        out: dict[str, dict[str, float]] = {}
        for r in case.scenario.roles:
            job = by_name.get(r.name)
            if job is None:
                continue
            small = file_bytes(r, self.cfg) if r.files_per_job else None
            out[r.name] = role_metrics(job, r.direction, small)
        out["*"] = system_metrics(rows)
        return out

    def _dcload(self, args: list[str], cwd: Path, stderr_path: Path, monitor: Monitor | None) -> tuple[int, str]:
        cg = self.cfg.cgroup

        def child_setup():
            die_with_parent()
            if cg is not None:
                (cg / "cgroup.procs").write_text(f"{os.getpid()}\n")

        with open(stderr_path, "wb") as err:
            if monitor:
                monitor.start()
            try:
                with spawn.held():
                    self.proc = spawn.popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err,
                                            preexec_fn=child_setup)
                rc = self.proc.wait()
            finally:
                if monitor:
                    monitor.stop()
            self.proc = None
        text = stderr_path.read_text(errors="replace").strip().splitlines()
        return rc, (text[-1] if text else "")

    def _stop_dcload(self) -> None:
        """dcload stops at SIGINT, drains in-flight I/O and reports; kill it if it hangs."""
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def _finish_summary(self) -> None:
        if not self.store:
            return
        cases = read_cases(self.run_dir)
        rows = attach_io(summarize(cases), self.manifest)
        self.summary_rows = rows
        write_json(self.run_dir / "summary.json", {"run_id": self.run_id, "status": self.manifest["status"],
                                                   "rows": rows})
        write_atomic(self.run_dir / "summary.md", render_markdown(self.manifest, rows, cases))


class _CaseFailed(Exception):
    pass
