"""Shared helpers: the real dcload of this checkout, root checks, scratch dirs."""

import os
import shutil
import subprocess
import sys
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
