"""The one executor of fresh benchbox processes: start, feed, follow, time out, interrupt, reap.

Both kinds of fresh process go through it: a round of ``--repeats K --fresh-processes``
(:mod:`benchbox.run.workers`, ``python -m benchbox.run.worker``) and a matrix cell
(:mod:`benchbox.matrix.cell`, ``python -m benchbox run``). A process is started with its output
into a file, in a session or process group of its own (a terminal's Ctrl-C reaches the parent
only, which passes one signal on), optionally pinned to CPUs and killed when its parent dies;
it is stopped the same way whatever ends it: one signal (a run keeps what it measured), then
SIGKILL if it has not exited ``grace_s`` seconds later; and it is always reaped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Ended:
    """How a process ended: its exit code (negative: the signal), and what stopped it."""

    exit_code: int | None
    timed_out: bool = False
    interrupted: bool = False


def _setup(cpus: Sequence[int], parent: int, kill_with_parent: bool) -> Callable[[], None] | None:
    """What the new process does before it runs: die with ``parent`` and keep to ``cpus``."""
    if not kill_with_parent and not cpus:
        return None

    libc = None
    if kill_with_parent and sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)  # loaded here: nothing is imported after the fork

    def setup() -> None:
        if libc is not None:
            # a benchmark must not outlive the process that owns its GPU
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:
                os._exit(1)
        if cpus:
            os.sched_setaffinity(0, list(cpus))
    return setup


def start(argv: Sequence[str], *, env: dict[str, str], out: IO[bytes], stdin_data: bool = False,
          pass_fds: Sequence[int] = (), cpus: Sequence[int] = (), kill_with_parent: bool = False,
          new_session: bool = False) -> subprocess.Popen[bytes]:
    """Start a fresh process, stdout and stderr into ``out``; its stdin a pipe (``stdin_data``,
    see :func:`feed`) or nothing. ``new_session``: a session of its own, else a process group."""
    return subprocess.Popen(list(argv), env=env, stdin=subprocess.PIPE if stdin_data else subprocess.DEVNULL,
                            stdout=out, stderr=subprocess.STDOUT, pass_fds=tuple(pass_fds),
                            start_new_session=new_session, process_group=None if new_session else 0,
                            preexec_fn=_setup(cpus, os.getpid(), kill_with_parent))


def feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    """Write ``data`` to the process's stdin and close it (a process already gone is not an error)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except BrokenPipeError:
        pass


def stop(proc: subprocess.Popen[bytes], signum: int, grace_s: float) -> int:
    """Send ``signum`` (a run stops and keeps what it measured), SIGKILL if it has not exited
    within ``grace_s`` seconds; its exit code."""
    if proc.poll() is None:
        proc.send_signal(signum)
    try:
        return proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def wait(proc: subprocess.Popen[bytes], timeout_s: float | None, grace_s: float,
         signum: int = signal.SIGINT) -> Ended:
    """Wait for the process; on a time-out or a KeyboardInterrupt here, :func:`stop` it. A second
    KeyboardInterrupt while it stops kills it (:func:`reap`) and goes on up: the process is never
    left running behind the caller."""
    try:
        return Ended(proc.wait(timeout=timeout_s))
    except subprocess.TimeoutExpired:
        timed_out = True
    except KeyboardInterrupt:
        timed_out = False
    try:
        return Ended(stop(proc, signum, grace_s), timed_out=timed_out, interrupted=not timed_out)
    except BaseException:
        reap(proc)
        raise


def reap(proc: subprocess.Popen[bytes]) -> None:
    """Make sure the process is gone: killed if it still runs (an error in the parent), then waited."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
