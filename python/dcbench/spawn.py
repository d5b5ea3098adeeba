"""Starting child processes so that a Ctrl-C cannot orphan one.

dcbench's SIGINT/SIGTERM handler raises in the main thread. Raised while
``subprocess.Popen`` waits for its new child's exec (after the fork), it
leaves a running child that nobody will stop or wait for: a dcload that went
on writing into the scratch directory the cleanup had just removed.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading

HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def held():
    """SIGINT and SIGTERM held for the block, delivered when it ends: a
    child started in it is in the caller's hands (``self.proc = popen(...)``)
    before a Ctrl-C can raise.

    Blocking them in this thread is not enough: the kernel hands a signal
    sent to the process to any thread that does not block it (numpy's
    OpenBLAS starts some), and Python then runs the handler in the main
    thread regardless. So the main thread's handlers only note a signal
    during the block, and it is raised again once the block ends."""
    noted: list[signal.Signals] = []
    old_handlers = {}
    if threading.current_thread() is threading.main_thread():
        for sig in HELD:
            if signal.getsignal(sig) is not None:  # None: a handler Python cannot put back
                old_handlers[sig] = signal.signal(sig, lambda signum, _frame: noted.append(signum))
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        # Unblocking runs the handlers of what was held: they note it too.
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(noted):
            signal.raise_signal(sig)


def popen(args: list[str], preexec_fn=None, **kw) -> subprocess.Popen:
    """``subprocess.Popen`` with SIGINT and SIGTERM held while the child
    starts (call it inside :func:`held`, so they stay held until the caller
    has kept the child); the child starts with them unblocked, whatever
    dcbench holds."""
    with held():
        child_mask = signal.pthread_sigmask(signal.SIG_BLOCK, []) - set(HELD)

        def child_setup():
            signal.pthread_sigmask(signal.SIG_SETMASK, child_mask)
            if preexec_fn is not None:
                preexec_fn()

        return subprocess.Popen(args, preexec_fn=child_setup, **kw)


def run(args: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    """``subprocess.run`` with output captured as text, started by :func:`popen`;
    the child is killed and reaped if the wait ends by an exception."""
    with contextlib.ExitStack() as holding:
        holding.enter_context(held())
        p = popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
        try:
            holding.close()  # a signal held while the child started raises here, inside the try
            out, err = p.communicate(timeout=timeout)
        except BaseException:
            p.kill()
            p.wait()
            raise
    return subprocess.CompletedProcess(args, p.returncode, out, err)
