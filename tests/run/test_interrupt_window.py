"""The window between deciding an interrupt and the process exiting: a further signal changes nothing.

A CI run sent a second SIGINT just after the case's "interrupted; keeping" line; it landed while the
interrupt was on its way out of ``run`` and turned the one-line summary (what was kept, where) into
click's bare "interrupted". These tests hold that window open on purpose instead of racing for it.
"""

from __future__ import annotations

import os
import signal

import pytest

from benchbox.run import interrupt
from benchbox.run.interrupt import Interrupted, Stop


@pytest.fixture(autouse=True)
def _python_handlers() -> None:
    """Each test starts from Python's own handlers, whatever pytest was started with (a shell
    starts a background job with SIGINT ignored, and ignoring is what these tests look for)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_a_signal_after_the_interrupt_is_decided_raises_nothing() -> None:
    stop = Stop()
    with stop.installed():
        os.kill(os.getpid(), signal.SIGINT)  # the first: only a flag
        assert stop.requested
        err = stop.interrupted()  # decided: on its way out
        os.kill(os.getpid(), signal.SIGINT)  # the second lands in the same window as in CI
    assert isinstance(err, Interrupted) and err.exit_code == 130
    assert "before anything was measured" in str(err)


def test_before_the_decision_a_second_signal_still_stops_at_once() -> None:
    stop = Stop()
    with stop.installed():
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.parametrize("process_exits", [True, False])
def test_after_the_run_signals_stay_ignored_only_when_the_process_exits(
        monkeypatch: pytest.MonkeyPatch, process_exits: bool) -> None:
    monkeypatch.setattr(interrupt, "PROCESS_EXITS_ON_INTERRUPT", process_exits)
    before = {s: signal.getsignal(s) for s in Stop.signals}
    try:
        stop = Stop()
        with stop.installed():
            os.kill(os.getpid(), signal.SIGINT)
            stop.interrupted()
        for s in Stop.signals:
            if process_exits:  # the command line: no handler gap before its one line and exit
                assert signal.getsignal(s) is signal.SIG_IGN
            else:  # a library caller gets its own handlers back
                assert signal.getsignal(s) is before[s]
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def test_when_the_process_exits_the_previous_handler_is_never_put_back(monkeypatch) -> None:
    """Putting Python's handler back and then ignoring left a gap in which a second Ctrl-C raised
    KeyboardInterrupt out of the ``finally`` (a CI run's bare "interrupted" line): the handler goes
    straight from benchbox's to ignoring."""
    monkeypatch.setattr(interrupt, "PROCESS_EXITS_ON_INTERRUPT", True)
    before = {s: signal.getsignal(s) for s in Stop.signals}
    installed: list[object] = []
    real = signal.signal
    try:
        stop = Stop()
        with stop.installed():
            os.kill(os.getpid(), signal.SIGINT)
            stop.interrupted()
            monkeypatch.setattr(signal, "signal", lambda s, h: (installed.append(h), real(s, h))[1])
        assert installed and all(h is signal.SIG_IGN for h in installed), installed
    finally:
        monkeypatch.undo()
        for s, h in before.items():
            signal.signal(s, h)


def test_an_interrupt_from_the_fresh_processes_also_goes_straight_to_ignoring(monkeypatch) -> None:
    """The fresh-process rounds raise their own Interrupted, not through ``Stop.interrupted()``:
    ``run`` marks it on its way out too, so the same window does not open there."""
    from benchbox.run import sequence

    def interrupted_rounds(self):
        raise Interrupted("interrupted (SIGINT) in round 1 of 2", None, None)

    monkeypatch.setattr(interrupt, "PROCESS_EXITS_ON_INTERRUPT", True)
    monkeypatch.setattr(sequence._Run, "execute", interrupted_rounds)
    before = {s: signal.getsignal(s) for s in Stop.signals}
    installed: list[object] = []
    real = signal.signal
    try:
        monkeypatch.setattr(signal, "signal", lambda s, h: (installed.append(h), real(s, h))[1])
        with pytest.raises(Interrupted):
            sequence.run(sequence.RunConfig(runners=("torch-eager",), repeats=2))
        assert installed[-2:] == [signal.SIG_IGN, signal.SIG_IGN], installed
        assert not any(h in before.values() for h in installed[2:]), installed
    finally:
        monkeypatch.undo()
        for s, h in before.items():
            signal.signal(s, h)
