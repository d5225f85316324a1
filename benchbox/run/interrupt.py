"""Interrupts during a run: finish the sample in progress, keep every finished result, stop.

SIGINT (Ctrl-C) and SIGTERM (``kill``, a job scheduler, a container stop) are handled
alike; the exit code says which (130 or 143: 128 + the signal's number). The signal
handler only sets a flag; the run checks it between samples (through the harness's
``should_stop`` callback) and between (runner, case) results. While no sample is in
progress (task loading, build, compile, calibration, reference) a signal stops at once. A
second signal raises KeyboardInterrupt at once; the receipt on disk still holds every finished result.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbox.errors import BenchboxError
from benchbox.harness.loop import StopSampling

if TYPE_CHECKING:
    from benchbox.receipts.build import ReceiptSet
    from benchbox.receipts.model import Receipt


class Interrupted(BenchboxError):
    """A signal stopped the run; the receipt on disk holds every finished result (exit 128 + the
    signal's number: 130 for SIGINT, 143 for SIGTERM)."""

    exit_code = 130

    def __init__(self, message: str, path: Path | None, receipt: Receipt | None,
                 signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.path = path
        self.receipt = receipt
        self.exit_code = 128 + int(signum)


def ignore_further_signals() -> None:
    """The process is exiting after an interrupt: ignore further SIGINT and SIGTERM (main thread only).

    Without this, a second Ctrl-C while the interpreter shuts down raises KeyboardInterrupt inside
    an exit handler (torch registers several) and prints its traceback, or, once the interpreter
    has reset its handlers, kills the process (exit -2 instead of 130). Ignored, the exit
    handlers finish — temporary folders removed, compiler processes stopped — in a second or two.
    """
    if threading.current_thread() is threading.main_thread():
        for s in Stop.signals:
            signal.signal(s, signal.SIG_IGN)


#: Set by the command line: the process exits once a run is interrupted, so the signals stay
#: ignored from the moment the interrupt is decided (a library caller gets its handlers back).
PROCESS_EXITS_ON_INTERRUPT = False


class SignalInterrupt(KeyboardInterrupt):
    """What the run's signal handler raises: a KeyboardInterrupt that every ``except
    KeyboardInterrupt`` catches, but not of that exact type.

    CPython marks an exception of exactly that type as unhandled when it leaves code run by
    ``exec`` or ``eval`` of a string (torch.compile runs the code it generates that way), even
    once it is caught, and a ``python -m`` process so marked ends by killing itself with SIGINT,
    whatever exit code it chose: its parent saw -2, not 130 or 143 (or 0, for a library caller
    that caught the :class:`Interrupted` and went on). A subclass is not marked.
    """


class SampleInterrupt(StopSampling):
    """Raised from the harness's stop callback after the sample in progress has finished."""


class Stop:
    """The run's interrupt state. Installed for SIGINT and SIGTERM in the main thread only."""

    signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested = False
        self.immediate = False
        self.signal_name = "SIGINT"
        self.signum = int(signal.SIGINT)
        #: the receipts are being marked interrupted: a further signal must not cut the write
        self.finishing = False
        #: the interrupt has been decided and is on its way out: further signals change nothing
        self.exiting = False
        self.receipts: ReceiptSet | None = None
        self._previous: dict[signal.Signals, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        if self.finishing or self.exiting:
            return
        if not self.requested:  # the first signal names the interrupt
            self.signal_name, self.signum = signal.Signals(signum).name, int(signum)
        if self.requested or self.immediate:
            self.requested = True  # also if a library turns the KeyboardInterrupt into its own error
            raise SignalInterrupt
        self.requested = True

    @contextmanager
    def installed(self) -> Iterator[Stop]:
        """Handle the signals for the duration of the block (main thread only), then restore."""
        if threading.current_thread() is threading.main_thread():
            for s in self.signals:
                self._previous[s] = signal.signal(s, self._handler)
        try:
            yield self
        finally:
            if self.exiting and PROCESS_EXITS_ON_INTERRUPT:
                # straight from this handler to ignoring: restoring the previous handler first
                # (Python's, which raises KeyboardInterrupt) left a window in which a second
                # Ctrl-C replaced the interrupt's message with a bare "interrupted"
                ignore_further_signals()
            else:
                for s, previous in self._previous.items():
                    signal.signal(s, previous)
            self._previous.clear()

    @contextmanager
    def preparing(self) -> Iterator[None]:
        """No sample is in progress (build, compile, calibration): a signal stops at once."""
        self.check()
        self.immediate = True
        try:
            yield
        finally:
            self.immediate = False

    def should_stop(self, inner: Callable[[Any], str | None] | None = None
                    ) -> Callable[[Any], str | None]:
        """The harness's stop callback, with the interrupt check in front of ``inner``."""
        def stop(m: Any) -> str | None:
            if self.requested:
                raise SampleInterrupt(m)
            return inner(m) if inner is not None else None
        return stop

    def check(self) -> None:
        if self.requested:
            raise self.interrupted()

    def interrupted(self) -> Interrupted:
        """Mark the receipts interrupted and incomplete, write them, and build the error."""
        why = self.signal_name
        self.exiting = True
        if self.receipts is None or not self.receipts.opened:
            return Interrupted(f"interrupted ({why}) before anything was measured", None, None, self.signum)
        self.finishing = True
        try:
            self.receipts.mark_interrupted(why)
        finally:
            self.finishing = False
        path, receipt = self.receipts.first
        n = len(receipt.results)
        e = Interrupted(f"interrupted ({why}): {n} result(s) kept in the incomplete receipt "
                        f"{self.receipts.where}", path, receipt, self.signum)
        if getattr(self.receipts, "in_memory", False):  # no write succeeded: the results only here
            e.unsaved = tuple(self.receipts.receipts)
        return e
