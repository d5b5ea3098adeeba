"""The memory balloon: anonymous memory held so the page cache has only ``--memory``.

The balloon is a child process that maps, touches and (where swap exists, so
the pages could otherwise be swapped out and given back to the cache) locks
the given number of bytes, reports ``ready`` and then holds them until its
standard input closes. It dies with dcbench in every way dcbench can end:
stdin reaches EOF when dcbench exits or is killed, and the kernel sends it
SIGKILL when its parent dies (PR_SET_PDEATHSIG), so no exit leaves it behind.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import select
import signal
import subprocess
import sys
import time

from . import procfs
from .errors import UserError
from .sizes import format_size

PR_SET_PDEATHSIG = 1
# Left to the kernel, dcload and dcbench itself beyond --memory.
HEADROOM = 256 << 20


def die_with_parent() -> None:
    """preexec_fn for children: SIGKILL when dcbench dies, however it dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # Signals from the terminal go to dcbench, which stops children in order.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def swap_total() -> int:
    with open("/proc/meminfo") as f:
        return procfs.parse_meminfo(f.read()).get("SwapTotal", 0)


def available_memory() -> int:
    with open("/proc/meminfo") as f:
        return procfs.parse_meminfo(f.read())["MemAvailable"]


def plan_balloon(memory: int, available: int) -> int:
    """Bytes to hold so that about ``memory`` bytes stay available; 0 if none."""
    return max(0, available - memory - HEADROOM)


class Balloon:
    """Holds ``size`` bytes of anonymous memory in a child process while open."""

    def __init__(self, size: int):
        self.size = size
        self.proc: subprocess.Popen | None = None
        self.locked = False
        self.ready = False

    def inflate(self, timeout: float = 300.0) -> "Balloon":
        if self.size <= 0:
            return self
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dcbench.balloon", str(self.size)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=die_with_parent,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        )
        deadline = time.monotonic() + timeout
        line = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                line = self.proc.stdout.readline()
                break
            if self.proc.poll() is not None:
                break
        if not line.startswith(b"ready"):
            err = self.proc.stderr.read().decode(errors="replace").strip() if self.proc.poll() is not None else ""
            self.deflate()
            raise UserError(
                f"cannot hold a {format_size(self.size)} memory balloon: {err or 'it did not become ready'}; "
                "use a larger --memory or free some memory"
            )
        self.locked = line.split()[-1] == b"locked"
        self.ready = True
        return self

    def deflate(self) -> None:
        p, self.proc = self.proc, None
        if p is None:
            return
        if not self.ready:
            # Still filling (a signal came while it inflated): it reads its
            # stdin only once full, gigabytes later. Nothing of it is worth
            # keeping; end it now.
            p.kill()
        try:
            p.stdin.close()
        except OSError:
            pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        for stream in (p.stdout, p.stderr):
            stream.close()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def __enter__(self) -> "Balloon":
        return self.inflate()

    def __exit__(self, *exc) -> None:
        self.deflate()


def _hold(size: int) -> int:
    """The balloon child: map, touch, maybe lock, report, hold until stdin closes."""
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0))
    page = mmap.PAGESIZE
    # MAP_POPULATE already faulted the pages in; write one byte per page so
    # they are private anonymous pages, not the shared zero page.
    for off in range(0, size, page):
        m[off] = 1
    locked = "unlocked"
    if swap_total() > 0:
        libc = ctypes.CDLL(None, use_errno=True)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        if libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(size)) != 0:
            err = ctypes.get_errno()
            print(f"mlock of {format_size(size)} failed: {os.strerror(err)} (swap is on, so the balloon must be locked; run as root)", file=sys.stderr)
            return 1
        locked = "locked"
    sys.stdout.write(f"ready {locked}\n")
    sys.stdout.flush()
    sys.stdin.buffer.read()  # returns at EOF: dcbench is done or gone
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise SystemExit(_hold(int(sys.argv[1])))
