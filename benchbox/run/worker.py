"""One round of a run in fresh processes (:mod:`benchbox.run.workers`), in a process of its own.

``python -m benchbox.run.worker`` reads a :class:`~benchbox.run.config.RunConfig` as JSON
(:meth:`~benchbox.run.config.RunConfig.to_json`; one round: ``repeats = 1``) on stdin, runs
it and says how it goes as JSON lines on the file descriptor named by ``BENCHBOX_WORKER_FD``:
``{"note": text}`` per progress line and, for an error, ``{"error": line, "field": name or
null}``. Its own stdout and stderr go where the parent sends them (a file beside the round's
receipt). Exit 0: the receipt is written; 2: an error before or while measuring (the line says
which); 128 + N: signal N stopped it, its receipt keeping what was measured.

A worker dies with its parent (:mod:`benchbox.run.lifeline`).
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

from benchbox.run.lifeline import FD_VARIABLE, die_with_parent
from benchbox.run.progress import Reporter


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
        settings = [[s.field, s.value] for s in e.settings]
        if isinstance(e, FieldError):
            reporter.send(error=e.message, field=e.field, settings=settings)
        else:
            reporter.send(error=str(e), field=None, settings=settings)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
