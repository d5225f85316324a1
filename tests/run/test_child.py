"""The one executor of fresh processes (:mod:`benchbox.run.child`), as its two users start them:
a matrix cell (process group, CPUs, killed with its parent) and a fresh-process round (its own
session, configuration on stdin). Both are timed out and interrupted the same way: one SIGINT,
then SIGKILL after the grace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from benchbox.matrix import cell
from benchbox.run import child, workers

#: stops on SIGINT (exit 7) when ``catch``; else ignores it and needs SIGKILL
SCRIPT = ("import signal, sys, time\n"
          "signal.signal(signal.SIGINT, (lambda *a: sys.exit(7)) if sys.argv[1] == 'catch' "
          "else signal.SIG_IGN)\n"
          "sys.stdout.write(sys.stdin.read() + ' started\\n'); sys.stdout.flush()\n"
          "time.sleep(60)\n")


def _start(kind: str, mode: str, out_path: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-c", SCRIPT, mode]
    with open(out_path, "wb") as out:
        if kind == "cell":  # as matrix.cell starts a cell
            proc = child.start(argv, env=dict(os.environ), out=out, cpus=sorted(os.sched_getaffinity(0))[:1],
                               kill_with_parent=True)
        else:  # as run.workers starts a round's worker
            proc = child.start(argv, env=dict(os.environ), out=out, stdin_data=True, new_session=True)
    if kind == "round":
        child.feed(proc, b"payload")
    return proc


@pytest.mark.parametrize("kind", ["cell", "round"])
def test_a_time_out_sends_one_sigint_then_the_run_exits(tmp_path: Path, kind: str) -> None:
    proc = _start(kind, "catch", tmp_path / "out")
    time.sleep(0.5)
    ended = child.wait(proc, 1.0, grace_s=10.0)
    assert ended == child.Ended(7, timed_out=True)


@pytest.mark.parametrize("kind", ["cell", "round"])
def test_a_process_that_ignores_sigint_is_killed_after_the_grace(tmp_path: Path, kind: str) -> None:
    proc = _start(kind, "ignore", tmp_path / "out")
    time.sleep(0.5)
    began = time.monotonic()
    ended = child.wait(proc, 0.5, grace_s=1.0)
    assert ended.exit_code == -signal.SIGKILL and ended.timed_out and not ended.interrupted
    assert 1.0 <= time.monotonic() - began < 10


@pytest.mark.parametrize("kind", ["cell", "round"])
def test_a_keyboard_interrupt_while_waiting_stops_the_process_with_one_sigint(tmp_path: Path, kind: str
                                                                              ) -> None:
    # Python's own Ctrl-C handler, SIGINT unblocked, and the signal sent to the main thread: the
    # state an interactive parent is in, whatever an earlier test or library left behind
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    try:
        proc = _start(kind, "catch", tmp_path / "out")
        time.sleep(0.5)
        threading.Timer(0.5, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
        ended = child.wait(proc, 30.0, grace_s=10.0)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        signal.signal(signal.SIGINT, previous)
    assert ended == child.Ended(7, interrupted=True), f"handler before {previous!r}, blocked {blocked}"
    if kind == "round":
        assert (tmp_path / "out").read_text() == "payload started\n"


def test_a_second_keyboard_interrupt_while_it_stops_kills_the_process_and_goes_on_up(tmp_path: Path) -> None:
    """The first interrupt sends one SIGINT (ignored here, so the grace runs); a second during the
    grace must not leave the process running behind the caller."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    main = threading.main_thread().ident
    try:
        proc = _start("cell", "ignore", tmp_path / "out")
        time.sleep(0.5)
        for at in (0.5, 1.5):
            threading.Timer(at, signal.pthread_kill, (main, signal.SIGINT)).start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            child.wait(proc, 30.0, grace_s=30.0)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        signal.signal(signal.SIGINT, previous)
    assert proc.poll() == -signal.SIGKILL and time.monotonic() - began < 20


def test_both_users_go_through_the_one_executor() -> None:
    assert cell.child is child and workers.child is child
    assert not hasattr(cell, "subprocess")
    source = Path(cell.__file__).read_text() + Path(workers.__file__).read_text()
    assert "Popen(" not in source and "child.start(" in Path(cell.__file__).read_text()
    assert "child.start(" in Path(workers.__file__).read_text()
