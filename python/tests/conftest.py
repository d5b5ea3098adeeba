"""Shared helpers: the real dcload of this checkout, root checks, scratch dirs."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
DCLOAD = REPO / "target" / "release" / "dcload"
DATA = Path(__file__).resolve().parent / "data"


def dcbench(*args, cwd=None, timeout=600, **kw):
    """Runs the dcbench command as a user would, returning the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "dcbench", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, **kw)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (drop_caches, tmpfs mounts)")
needs_dcload = pytest.mark.skipif(not DCLOAD.exists(), reason="needs a release build of dcload (make build)")


@pytest.fixture
def scratch():
    """A scratch directory on the disk (not tmpfs: RWF_DONTCACHE needs a real filesystem)."""
    d = Path(f"/var/tmp/dcbench-test-{os.getpid()}-{os.urandom(3).hex()}")
    d.mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def start_run(*args):
    """``dcbench run ARGS`` in the background, as a user's shell would start it."""
    return subprocess.Popen([sys.executable, "-m", "dcbench", "run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def children_of(pid):
    out = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [line.split(None, 1) for line in out.strip().splitlines()]


def wait_for_a_case(p, results: Path, timeout=120):
    """Waits until a case's dcload runs (not the modes' probe before the
    cases: a case's command is written just before it starts); returns
    dcbench's children then."""
    deadline = time.monotonic() + timeout
    kids = []
    while time.monotonic() < deadline:
        kids = children_of(p.pid)
        if any(c == "dcload" for _, c in kids) and list(results.glob("*/cases/*/*/rep0/command.json")):
            break
        time.sleep(0.05)
    return kids
