"""Starting children so that a Ctrl-C cannot orphan one: a signal that
arrives while a child starts is delivered only once the caller holds it."""

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from dcbench import spawn


def sig_blocked(pid: int) -> int:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("SigBlk:"))
    return int(line.split()[1], 16)


@pytest.mark.parametrize("other_thread", [False, True], ids=["alone", "with-another-thread"])
def test_a_signal_during_the_start_raises_after_the_child_is_kept(other_thread):
    # Another thread does not block the signal, so the kernel gives it the
    # process's SIGINT (numpy's OpenBLAS threads are such threads).
    release = threading.Event()
    helper = threading.Thread(target=release.wait)
    if other_thread:
        helper.start()
    kept = None
    try:
        with pytest.raises(KeyboardInterrupt):
            with spawn.held():
                os.kill(os.getpid(), signal.SIGINT)  # noted: raised when the block ends
                kept = spawn.popen(["sleep", "30"])
                time.sleep(0.05)  # had it been delivered, it would have raised before the assignment
    finally:
        release.set()
        if other_thread:
            helper.join()
    assert kept is not None, "the child was kept before the interrupt"
    try:
        blocked = sig_blocked(kept.pid)
        for sig in spawn.HELD:
            assert not blocked & (1 << (sig - 1)), f"{sig.name} is not blocked in the child: {blocked:#x}"
    finally:
        kept.kill()
        kept.wait()
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, []) & set(spawn.HELD), "dcbench holds nothing afterwards"


def test_run_kills_and_reaps_its_child_when_interrupted():
    start = time.monotonic()
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        spawn.run(["sleep", "30"], timeout=60)
    assert time.monotonic() - start < 10
    # No child is left: the only children of this process are gone.
    kids = subprocess.run(["pgrep", "-P", str(os.getpid()), "sleep"], capture_output=True, text=True).stdout
    assert kids.strip() == "", kids
