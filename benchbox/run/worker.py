"""One round of a run in fresh processes (:mod:`benchbox.run.workers`), in a process of its own.

``python -m benchbox.run.worker`` reads a :class:`~benchbox.run.config.RunConfig` as JSON
(:meth:`~benchbox.run.config.RunConfig.to_json`; one round: ``repeats = 1``) on stdin, runs
it and says how it goes as JSON lines on the file descriptor named by ``BENCHBOX_WORKER_FD``:
``{"note": text}`` per progress line and, for an error, ``{"error": line, "field": name or
null}``. Its own stdout and stderr go where the parent sends them (a file beside the round's
receipt). Exit 0: the receipt is written; 2: an error before or while measuring (the line says
which); 128 + N: signal N stopped it, its receipt keeping what was measured.

A worker dies with its parent. The parent names itself (``BENCHBOX_WORKER_PARENT``) and hands
over the read end of a *lifeline* pipe (``BENCHBOX_WORKER_LIFELINE``) whose write end only it
holds. On Linux the worker asks the kernel for SIGTERM when its parent dies
(``prctl(PR_SET_PDEATHSIG)``), and stops as a run stops on SIGTERM (its receipt keeping what
was measured). Everywhere, a thread waits on the lifeline: end of file means the parent is
gone (even a SIGKILL closes its end), and then the worker is sent SIGTERM where the kernel
does not, and is killed outright if it has not exited ``PARENT_GONE_GRACE_S`` seconds later
(task code stuck where a signal is not seen, with no case time limit).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import IO, Any

from benchbox.run.progress import Reporter

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


class PipeReporter(Reporter):
    """Progress lines and finished cases, one JSON object per line, to the parent."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def send(self, **event: Any) -> None:
        try:
            self.stream.write(json.dumps(event) + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # the parent is gone: the receipt is still written
            pass

    def note(self, text: str) -> None:
        self.send(note=text)

    def case_finished(self, runner: str, case: str, line: str) -> None:
        self.send(note=line)


def main() -> int:
    from benchbox.errors import BenchboxError, FieldError
    from benchbox.run import interrupt
    from benchbox.run.config import RunConfig
    from benchbox.run.sequence import run

    die_with_parent()
    fd = os.environ.get(FD_VARIABLE)
    stream = os.fdopen(int(fd), "w", buffering=1) if fd else sys.stdout
    reporter = PipeReporter(stream)
    cfg = RunConfig.from_json(json.load(sys.stdin))
    interrupt.PROCESS_EXITS_ON_INTERRUPT = True
    try:
        run(cfg, reporter=reporter)
    except interrupt.Interrupted as e:
        reporter.send(note=str(e))
        return e.exit_code
    except BenchboxError as e:
        if isinstance(e, FieldError):
            reporter.send(error=e.message, field=e.field)
        else:
            reporter.send(error=str(e), field=None)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
