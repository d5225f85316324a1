"""The per-case time limit: a (runner, case) that runs too long becomes a failed row.

The limit covers one (runner, case) — its two validation calls, warm-up and samples — and
each case's reference call. It is enforced with ``SIGALRM`` (``setitimer``): when the time is
up, the handler raises :class:`TimeLimitExceeded` in the main thread, and again every
``REPEAT_S`` seconds should the code swallow it. It is a BaseException, so a task's
``except Exception`` does not catch it; the run turns it into a failed row.

What it cannot interrupt: Python runs a signal handler between bytecodes, so a C call that
never returns to the interpreter (a hung device kernel or driver call, a C extension in a
loop that holds the GIL without checking for signals) is not interrupted; ``time.sleep``,
``select`` and other calls that return on a signal are. It is enforced only when the run
is in the main thread (signals are), and the run's timer replaces any ``ITIMER_REAL`` timer
of the calling program while a case runs. Preparation (build, compile) has no limit.
"""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: after the first expiry the limit fires again this often (seconds), in case code swallowed it
REPEAT_S = 1.0


class TimeLimitExceeded(BaseException):  # noqa: N818 - named for what happened, like KeyboardInterrupt
    """A guarded block ran past its time limit (raised in the main thread by SIGALRM)."""


class TimeLimit:
    """Guards blocks with a time limit of ``seconds`` (0: none)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self._armed = False
        self._what = ""

    @property
    def enforceable(self) -> bool:
        return (self.seconds > 0 and math.isfinite(self.seconds) and hasattr(signal, "setitimer")
                and threading.current_thread() is threading.main_thread())

    @contextmanager
    def guard(self, what: str, left: float | None = None) -> Iterator[None]:
        """Raise TimeLimitExceeded inside the block once it has run ``seconds``, or ``left``
        seconds: what remains of the limit for a case whose time is spread over several blocks
        (``--repeats``: its rounds)."""
        if not self.enforceable:
            yield
            return
        previous = signal.signal(signal.SIGALRM, self._expired)
        self._armed, self._what = True, what
        first = self.seconds if left is None else max(left, 1e-3)
        signal.setitimer(signal.ITIMER_REAL, first, REPEAT_S)
        try:
            yield
        finally:
            self._armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def _expired(self, signum: int, frame: Any) -> None:
        if self._armed:
            raise TimeLimitExceeded(f"{self._what}: over the per-case time limit of {self.seconds:g} s "
                                    "(case_time_limit_s)")
