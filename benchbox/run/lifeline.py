"""How a worker process dies with its parent: the names both sides agree on, and the watch.

The parent (:mod:`benchbox.run.workers`) names itself (``BENCHBOX_WORKER_PARENT``) and hands
over the read end of a *lifeline* pipe (``BENCHBOX_WORKER_LIFELINE``) whose write end only it
holds. On Linux the worker (:mod:`benchbox.run.worker`) asks the kernel for SIGTERM when its
parent dies (``prctl(PR_SET_PDEATHSIG)``), and stops as a run stops on SIGTERM (its receipt
keeping what was measured). Everywhere, a thread waits on the lifeline: end of file means the
parent is gone (even a SIGKILL closes its end), and then the worker is sent SIGTERM where the
kernel does not, and is killed outright if it has not exited ``PARENT_GONE_GRACE_S`` seconds
later (task code stuck where a signal is not seen, with no case time limit).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

#: the file descriptor a worker writes its progress lines to
FD_VARIABLE = "BENCHBOX_WORKER_FD"
LIFELINE_VARIABLE = "BENCHBOX_WORKER_LIFELINE"
PARENT_VARIABLE = "BENCHBOX_WORKER_PARENT"
#: Seconds a worker whose parent died has to stop on SIGTERM before it is killed.
PARENT_GONE_GRACE_S = 5.0
_PR_SET_PDEATHSIG = 1


def _kernel_signal_on_parent_death() -> bool:
    """Ask Linux to send SIGTERM when the parent dies (True when it will)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_lifeline(fd: int, kernel_signals: bool) -> None:
    """Block until the parent's end of the lifeline closes; then stop this process."""
    try:
        while os.read(fd, 64):
            pass
    except OSError:
        pass
    if not kernel_signals:
        os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(PARENT_GONE_GRACE_S)
    os.kill(os.getpid(), signal.SIGKILL)


def die_with_parent() -> None:
    """Arm the parent-death signal and the lifeline watch (a no-op outside a worker); a parent
    already gone by now stops this worker at once."""
    parent, lifeline = os.environ.get(PARENT_VARIABLE), os.environ.get(LIFELINE_VARIABLE)
    if not parent or not lifeline:
        return
    kernel = _kernel_signal_on_parent_death()
    threading.Thread(target=_watch_lifeline, args=(int(lifeline), kernel), daemon=True,
                     name="benchbox-lifeline").start()
    if kernel and str(os.getppid()) != parent:  # it died before the signal was armed
        os.kill(os.getpid(), signal.SIGTERM)
