"""Task and runner code that leaves by ``sys.exit`` or another BaseException is a failure like any other.

``except Exception`` does not catch ``SystemExit`` or a user's ``BaseException`` subclass, so
without this a task calling ``sys.exit`` would end the run with its exit code and no message.
The run catches them where it catches a task's ordinary errors: at load (one line, exit 2),
around each (runner, case) and each preparation (a failed row with the reason), and around
the whole run (one line naming what was kept). KeyboardInterrupt is never caught here: it is
the path of SIGINT and SIGTERM (:mod:`benchbox.run.interrupt`); nor is the harness's
StopSampling, which the schedule handles.
"""

from __future__ import annotations

from benchbox.errors import error_line
from benchbox.harness import StopSampling

#: BaseExceptions that are control flow of the run itself, never contained
PASSED_ON: tuple[type[BaseException], ...] = (KeyboardInterrupt, StopSampling)


def contained(e: BaseException) -> bool:
    """Whether ``e`` is a BaseException (not an Exception) that the run contains."""
    return not isinstance(e, (Exception, *PASSED_ON))


def describe(e: BaseException) -> str:
    """One line for a failure: ``SystemExit: sys.exit(3) called by task or runner code``, else
    ``Class: message``."""
    if isinstance(e, SystemExit):
        return f"SystemExit: sys.exit({e.code!r}) called by task or runner code"
    return error_line(e)
