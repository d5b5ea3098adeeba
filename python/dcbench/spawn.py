"""Starting child processes so that a Ctrl-C cannot orphan one.

dcbench's SIGINT/SIGTERM handler raises in the main thread. Raised while
``subprocess.Popen`` waits for its new child's exec (after the fork), it
leaves a running child that nobody will stop or wait for: a dcload that went
on writing into the scratch directory the cleanup had just removed.
"""

from __future__ import annotations

import signal
import subprocess

HELD = (signal.SIGINT, signal.SIGTERM)


def popen(args: list[str], preexec_fn=None, **kw) -> subprocess.Popen:
    """``subprocess.Popen`` with SIGINT and SIGTERM held while the child
    starts (delivered right after it has); the child starts with the signal
    mask dcbench had, so a held signal never stays blocked in it."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)

    def child_setup():
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        if preexec_fn is not None:
            preexec_fn()

    try:
        return subprocess.Popen(args, preexec_fn=child_setup, **kw)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def run(args: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    """``subprocess.run`` with output captured as text, started by :func:`popen`;
    the child is killed and reaped if the wait ends by an exception."""
    p = popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException:
        p.kill()
        p.wait()
        raise
    return subprocess.CompletedProcess(args, p.returncode, out, err)
