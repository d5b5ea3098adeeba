"""Scratch filesystems made for a run: ``--fs FS --device SPEC``.

A testbed is a fresh filesystem on a device dcbench attaches (a loop device
over a file in ``--dir``, or a zram device) or one the user names, mounted
under the run's scratch directory. It is made before the first case (and
again before every case with ``--fresh-fs-per-case``) and undone on every
exit: unmounted, detached or reset, its backing file removed.

What a user's device holds is never destroyed by surprise: a device that is
mounted, swapped on or held by another device is refused outright, and one
that holds a filesystem or partitions is refused unless ``--force``, with
what would be lost named.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError
from .sizes import format_size, parse_size
from .system import mount_of

# mkfs per filesystem: the command that overwrites whatever is there without
# asking (dcbench has asked already) and quietly, the option that keeps it
# from discarding the device first, and its Debian package.
MKFS = {
    "ext4": (["mkfs.ext4", "-F", "-q"], ["-E", "nodiscard"], "e2fsprogs"),
    "xfs": (["mkfs.xfs", "-f", "-q"], ["-K"], "xfsprogs"),
    "btrfs": (["mkfs.btrfs", "-f", "-q"], ["-K"], "btrfs-progs"),
}
FILESYSTEMS = tuple(MKFS)
# The smallest device worth formatting: XFS refuses below 300 MiB.
MIN_DEVICE = 512 << 20


@dataclass(frozen=True)
class DeviceSpec:
    """What ``--device`` names: ``/dev/X``, ``loop:SIZE`` or ``zram:SIZE[:ALGORITHM]``."""

    kind: str  # "block", "loop" or "zram"
    path: Path | None = None
    size: int | None = None
    algorithm: str | None = None

    def __str__(self) -> str:
        if self.kind == "block":
            return str(self.path)
        if self.size is None:
            return self.kind
        tail = f":{self.algorithm}" if self.algorithm else ""
        return f"{self.kind}:{format_size(self.size or 0)}{tail}"


def parse_device(text: str) -> DeviceSpec:
    if text == "loop":
        return DeviceSpec("loop")  # sized by the run: its largest case
    kind, _, rest = text.partition(":")
    if kind in ("loop", "zram") and rest:
        size_text, _, algorithm = rest.partition(":")
        try:
            size = parse_size(size_text)
        except ValueError as e:
            raise UserError(f"--device {text}: {e}") from None
        if size < MIN_DEVICE:
            raise UserError(f"--device {text}: {format_size(size)} is too small for a filesystem; "
                            f"give at least {format_size(MIN_DEVICE)}")
        if algorithm and kind == "loop":
            raise UserError(f"--device {text}: only zram takes a compression algorithm (zram:SIZE:ALGORITHM)")
        return DeviceSpec(kind, size=size, algorithm=algorithm or None)
    if text.startswith("/"):
        return DeviceSpec("block", path=Path(text))
    raise UserError(f"--device {text}: give a block device (/dev/nvme1n1), loop[:SIZE] (a loop device over a file "
                    "in --dir, like loop:8g; without a size, the largest case's need) or zram:SIZE[:ALGORITHM] "
                    "(memory-backed, like zram:8g:lz4)")


def _run(args: list[str], what: str) -> str:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise UserError(f"{what}: {args[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"{what}: {' '.join(args)} did not finish in 300 s") from None
    if out.returncode != 0:
        err = (out.stderr.strip() or out.stdout.strip()).splitlines()
        raise UserError(f"{what}: {' '.join(args)} failed: {err[-1] if err else f'exit {out.returncode}'}")
    return out.stdout


def _sysfs(name: str) -> Path:
    return Path("/sys/class/block") / name


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _device_bytes(name: str) -> int:
    return int(_read(_sysfs(name) / "size") or 0) * 512


def _partitions(name: str) -> list[str]:
    d = _sysfs(name)
    return sorted(p.name for p in d.iterdir() if (p / "partition").exists()) if d.is_dir() else []


def _mounts_of(names: set[str]) -> list[str]:
    """Mount points whose source is one of the device numbers of ``names``."""
    numbers = {_read(_sysfs(n) / "dev") for n in names} - {""}
    out = []
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        f = line.split()
        if len(f) > 4 and f[2] in numbers:
            out.append(f[4].replace("\\040", " "))
    return out


def inspect_block_device(path: Path) -> tuple[str, list[str]]:
    """For a device the user named: its kernel name and what it holds that
    formatting would destroy. Raises for what dcbench never formats."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise UserError(f"--device {path}: {e.strerror}") from None
    if not stat.S_ISBLK(st.st_mode):
        raise UserError(f"--device {path}: not a block device; give /dev/..., loop:SIZE or zram:SIZE")
    name = Path(f"/sys/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}").resolve().name
    parts = _partitions(name)
    names = {name, *parts}
    if mounts := _mounts_of(names):
        raise UserError(f"--device {path}: mounted at {', '.join(mounts)}; dcbench never formats a mounted "
                        "device, even with --force: unmount it first, or pick another device")
    swaps = [line.split()[0] for line in _read(Path("/proc/swaps")).splitlines()[1:] if line.split()]
    if any(os.path.realpath(s) in {f"/dev/{n}" for n in names} for s in swaps):
        raise UserError(f"--device {path}: in use as swap; swapoff it first, or pick another device")
    holders = [h.name for n in names for h in (_sysfs(n) / "holders").glob("*")]
    if holders:
        raise UserError(f"--device {path}: held by {', '.join(sorted(holders))} (RAID, LVM or device-mapper); "
                        "dcbench never formats a device in use")
    contents = [f"partitions {', '.join(parts)}"] if parts else []
    try:
        probe = subprocess.run(["blkid", "-p", "-o", "export", str(path)], capture_output=True, text=True)
    except FileNotFoundError:
        raise UserError(f"--device {path}: blkid is not installed (apt-get install util-linux); dcbench "
                        "will not format a device it cannot look into") from None
    tags = dict(line.split("=", 1) for line in probe.stdout.splitlines() if "=" in line)
    if "PTTYPE" in tags:
        contents.append(f"a partition table ({tags['PTTYPE']})")
    if "TYPE" in tags:
        label = f", labelled {tags['LABEL']!r}" if "LABEL" in tags else ""
        contents.append(f"a filesystem or signature ({tags['TYPE']}{label})")
    return name, contents


@dataclass
class Testbed:
    fs: str
    device: DeviceSpec
    work: Path  # the run's scratch directory in --dir: the loop image and the mount point live there
    mkfs_opts: list[str] = field(default_factory=list)
    mount_opts: str | None = None
    force: bool = False
    # What is attached or mounted right now, for teardown.
    dev_path: Path | None = None
    image: Path | None = None
    zram_id: int | None = None
    mounted: bool = False
    mkfs_count: int = 0
    facts: dict = field(default_factory=dict)

    @property
    def mount_point(self) -> Path:
        return self.work / "mnt"

    @property
    def size(self) -> int:
        if self.device.kind == "block":
            return _device_bytes(self.facts["name"])
        return self.device.size or 0

    def check(self, need: int) -> None:
        """Everything that can be refused before anything is created."""
        if os.geteuid() != 0:
            raise UserError(f"--fs {self.fs}: making a filesystem needs root (losetup, mkfs, mount)")
        tool, _, package = MKFS[self.fs]
        if shutil.which(tool[0]) is None:
            raise UserError(f"--fs {self.fs}: {tool[0]} is not installed (apt-get install {package})")
        if self.device.kind == "block":
            name, contents = inspect_block_device(self.device.path)
            self.facts["name"] = name
            if contents and not self.force:
                raise UserError(f"--device {self.device.path}: holds {' and '.join(contents)} "
                                f"({format_size(_device_bytes(name))}); dcbench would destroy it with "
                                f"{tool[0]}: pass --force to allow that, or pick another device")
            self.facts["destroyed"] = contents
        elif self.device.kind == "zram" and not Path("/sys/class/zram-control/hot_add").exists():
            raise UserError(f"--device {self.device}: this kernel has no zram (no /sys/class/zram-control); "
                            "load the module (modprobe zram) or use loop:SIZE")
        if self.size < need:
            raise UserError(f"--device {self.device}: {format_size(self.size)} is too small; the largest case "
                            f"needs {format_size(need)}: give a bigger device, or a smaller --memory or --size")

    # -- making it ---------------------------------------------------------
    def setup(self) -> None:
        """Attaches the device, makes the filesystem and mounts it. Whatever
        was done before a failure is recorded, so teardown undoes it."""
        kind = self.device.kind
        if kind == "loop":
            self._attach_loop()
        elif kind == "zram":
            self._attach_zram()
        else:
            self.dev_path = self.device.path
        self.mount_point.mkdir(exist_ok=True)
        self._make_and_mount()

    def refresh(self) -> None:
        """A new filesystem on the same device (``--fresh-fs-per-case``)."""
        self._unmount()
        self._make_and_mount()

    def _attach_loop(self) -> None:
        self.image = self.work / "testbed.img"
        with open(self.image, "wb") as f:
            # Allocated up front: the backing filesystem cannot run out
            # of space under the testbed in the middle of a case.
            try:
                os.posix_fallocate(f.fileno(), 0, self.device.size)
            except OSError as e:
                raise UserError(f"--device {self.device}: cannot allocate {format_size(self.device.size)} in "
                                f"{self.work.parent}: {e.strerror}") from None
        # Direct I/O on the backing file: the loop device then runs at the disk's
        # speed, with no second page cache of the whole image in between.
        out = _run(["losetup", "--find", "--show", "--direct-io=on", str(self.image)], "loop device")
        self.dev_path = Path(out.strip())
        name = self.dev_path.name
        self.facts.update(name=name, backing_file=str(self.image),
                          direct_io=_read(_sysfs(name) / "loop" / "dio") == "1",
                          backing_fs=mount_of(self.work).get("fs_type"))

    def _attach_zram(self) -> None:
        self.zram_id = int(_read(Path("/sys/class/zram-control/hot_add")))
        name = f"zram{self.zram_id}"
        self.dev_path = Path("/dev") / name
        d = _sysfs(name)
        if self.device.algorithm:
            try:
                (d / "comp_algorithm").write_text(self.device.algorithm)
            except OSError:
                offered = _read(d / "comp_algorithm").replace("[", "").replace("]", "")
                raise UserError(f"--device {self.device}: zram has no {self.device.algorithm!r}; "
                                f"this kernel offers {offered}") from None
        (d / "disksize").write_text(str(self.device.size))
        chosen = next((w.strip("[]") for w in _read(d / "comp_algorithm").split() if w.startswith("[")), None)
        self.facts.update(name=name, algorithm=chosen)

    def _make_and_mount(self) -> None:
        tool, nodiscard, _ = MKFS[self.fs]
        # A loop image keeps the space allocated for it only if mkfs does not
        # discard (punch holes in) it; zram is discarded, which frees the
        # memory the last filesystem used. The user's options come last.
        mkfs = tool + (nodiscard if self.device.kind == "loop" else []) + self.mkfs_opts + [str(self.dev_path)]
        _run(mkfs, f"--fs {self.fs}")
        self.mkfs_count += 1
        mount = ["mount", "-t", self.fs] + (["-o", self.mount_opts] if self.mount_opts else [])
        _run(mount + [str(self.dev_path), str(self.mount_point)], f"mounting the {self.fs} testbed")
        self.mounted = True
        self.facts["mkfs"] = shlex.join(mkfs)
        self.facts["mount"] = mount_of(self.mount_point)

    # -- undoing it ---------------------------------------------------------
    def _unmount(self) -> None:
        if not self.mounted:
            return
        for _ in range(20):
            if subprocess.run(["umount", str(self.mount_point)], capture_output=True).returncode == 0:
                self.mounted = False
                return
            time.sleep(0.25)  # a process that held a file is still exiting
        raise UserError(f"cannot unmount the testbed at {self.mount_point}: still busy after 5 s")

    def teardown(self) -> list[str]:
        """Undoes everything setup did; returns what could not be undone (empty when all is gone)."""
        problems = []
        try:
            self._unmount()
        except UserError as e:
            # Lazy: detaches it from the tree now, frees it when the last user goes.
            subprocess.run(["umount", "-l", str(self.mount_point)], capture_output=True)
            self.mounted = False
            problems.append(f"{e}; unmounted lazily")
        if self.device.kind == "loop" and self.dev_path is not None:
            r = subprocess.run(["losetup", "-d", str(self.dev_path)], capture_output=True, text=True)
            if r.returncode != 0:
                problems.append(f"cannot detach {self.dev_path}: {r.stderr.strip()}")
            self.dev_path = None
        if self.zram_id is not None:
            d = _sysfs(f"zram{self.zram_id}")
            try:
                (d / "reset").write_text("1")
                Path("/sys/class/zram-control/hot_remove").write_text(str(self.zram_id))
            except OSError as e:
                problems.append(f"cannot remove zram{self.zram_id}: {e.strerror}")
            self.zram_id = None
        if self.image is not None:
            self.image.unlink(missing_ok=True)
            self.image = None
        return problems

    def record(self) -> dict:
        """The manifest's ``testbed``: enough to make the same filesystem again."""
        mount = self.facts.get("mount", {})
        out = {
            "fs": self.fs,
            "device": str(self.device),
            "kind": self.device.kind,
            "size": self.size,
            "name": self.facts.get("name"),
            "mkfs": self.facts.get("mkfs"),
            "mkfs_opts": self.mkfs_opts,
            "mount_options": mount.get("mount_options"),
            "mount_point": str(self.mount_point),
            "made": self.mkfs_count,
        }
        if self.device.kind == "loop":
            out.update(backing_file=self.facts.get("backing_file"), backing_fs=self.facts.get("backing_fs"),
                       direct_io=self.facts.get("direct_io"))
        if self.device.kind == "zram":
            out["algorithm"] = self.facts.get("algorithm")
        if self.device.kind == "block":
            out["destroyed"] = self.facts.get("destroyed")
        return out
