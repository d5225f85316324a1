"""``--repeats K --fresh-processes``: each round in a worker process of its own, as pyperf does.

In-process rounds (:mod:`benchbox.run.rounds`) share the process, the prepared runners and
their compiled code, so what a process decides once — the kernels an autotuner picked, a
graph's breaks, where memory landed, the address-space layout — is the same in every round,
and the spread between rounds leaves it out. With fresh processes each round is a run of its
own in a new process (:mod:`benchbox.run.worker`): the same configuration with one round of
``samples / K`` samples, which loads the task, computes the reference, prepares (compiles,
builds) every runner, measures every case and exits. The next round starts when it has
exited. The rounds' receipts are kept in ``OUT.rounds/`` beside the receipt and joined as
the rounds of one receipt by :func:`benchbox.receipts.combine.combine`, as the CI recipe
joins its alternating runs; the diff's interval then carries the spread between processes.

- The receipt paths are claimed (checked and locked) before the first round, as for any run.
- A round whose worker fails or is killed ends the rounds; the rounds so far are joined into
  the receipt, marked incomplete, and the error names the round. Nothing a worker measured is
  lost: its own receipt (``OUT.rounds/round-N.json``) is written as any run's is.
- SIGINT or SIGTERM is passed on to the round's worker, which stops as a run stops (its
  receipt keeps what it measured); the rounds so far are joined, marked interrupted.
- Workers run in their own session (a terminal's Ctrl-C reaches this process, which passes
  it on), and die with this process: if it is killed (SIGKILL), the round's worker is sent
  SIGTERM and stops as a run stops, its receipt keeping what it measured, or is killed
  :data:`~benchbox.run.lifeline.PARENT_GONE_GRACE_S` seconds later (:mod:`benchbox.run.lifeline`).
  The rounds already finished are in ``OUT.rounds/``; ``benchbox combine`` joins them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import benchbox
from benchbox.durations import left_text
from benchbox.errors import FieldError, Setting, UsageError
from benchbox.run import child
from benchbox.run.lifeline import FD_VARIABLE, LIFELINE_VARIABLE, PARENT_VARIABLE
from benchbox.run.outcome import RunOutcome
from benchbox.run.output import Output, out_paths
from benchbox.run.rounds import round_sizes

if TYPE_CHECKING:
    from benchbox.receipts.model import Receipt
    from benchbox.run.config import RunConfig
    from benchbox.run.progress import Reporter


def rounds_folder(first: Path) -> Path:
    """Where the rounds of the receipt ``first`` are kept: ``NAME.rounds/`` beside it."""
    return first.with_name(f"{first.stem}.rounds")


@dataclass
class _Round:
    """One round's worker: how it ended and the last thing it said."""

    exit_code: int = 0
    error: str | None = None
    field: str | None = None
    #: the settings its error names
    settings: tuple[Setting, ...] = ()
    last: str = ""


class _Forward:
    """SIGINT and SIGTERM passed on to the round's worker (main thread only); the first names
    the interrupt."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.signum: int | None = None

    def _handler(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signum)

    @contextmanager
    def installed(self) -> Iterator[_Forward]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.signal(s, self._handler) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for s, h in previous.items():
                signal.signal(s, h)


def _worker_env(fd: int, lifeline: int) -> dict[str, str]:
    """The environment of a worker: this one, with this benchbox first on the path, the progress
    pipe, and the lifeline and parent it dies with."""
    env = dict(os.environ)
    home = str(Path(benchbox.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([home, *filter(None, [env.get("PYTHONPATH")])])
    env[FD_VARIABLE] = str(fd)
    env[LIFELINE_VARIABLE] = str(lifeline)
    env[PARENT_VARIABLE] = str(os.getpid())
    return env


def _payload(cfg: RunConfig) -> bytes:
    """The configuration as the worker reads it: JSON (FieldError if an option is not JSON data)."""
    try:
        return json.dumps(cfg.to_json(), allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        raise FieldError("fresh_processes", f"the configuration must be JSON data to reach a worker "
                                            f"process ({e})") from None


def _run_round(cfg: RunConfig, label: str, output_file: Path, reporter: Reporter,
               forward: _Forward) -> _Round:
    """Run one round's worker to its end, passing its progress lines to ``reporter``."""
    data = _payload(cfg)
    r, w = os.pipe()
    life_r, life_w = os.pipe()  # this process alone holds life_w: it closes when this process dies
    try:
        with open(output_file, "ab") as out:
            proc = child.start([sys.executable, "-m", "benchbox.run.worker"], env=_worker_env(w, life_r),
                               out=out, stdin_data=True, pass_fds=(w, life_r), new_session=True)
    except BaseException:
        os.close(r)
        os.close(life_w)
        raise
    finally:
        os.close(w)
        os.close(life_r)
    try:
        return _follow(proc, data, r, label, reporter, forward)
    finally:
        os.close(life_w)


def _follow(proc: subprocess.Popen[bytes], data: bytes, r: int, label: str, reporter: Reporter,
            forward: _Forward) -> _Round:
    """Feed the worker its configuration and pass its progress on until it exits."""
    forward.proc = proc
    ended = _Round()
    try:
        child.feed(proc, data)
        with os.fdopen(r, "r", encoding="utf-8", errors="replace") as events:
            for line in events:
                _event(line, label, ended, reporter)
        ended.exit_code = proc.wait()
    finally:
        forward.proc = None
        child.reap(proc)  # after an error here too: the worker must not outlive the rounds
    return ended


def _event(line: str, label: str, ended: _Round, reporter: Reporter) -> None:
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return
    if not isinstance(event, dict):
        return
    if isinstance(event.get("error"), str):
        ended.error, ended.field = event["error"], event.get("field")
        ended.settings = tuple(Setting(str(f), str(v)) for f, v in event.get("settings") or ())
    elif isinstance(event.get("note"), str):
        ended.last = event["note"]
        reporter.note(f"{label}: {event['note']}")


def _make_folder(folder: Path) -> Path:
    """The rounds' folder, made if it is not there; anything but a directory there is refused."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise FieldError("out", f"{folder}, where the rounds' receipts go, is not a directory; remove it or "
                                "choose another receipt path")
    try:
        folder.mkdir(exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot make the rounds' folder {folder}: {e.strerror or e}") from None
    return folder


def _check_free(paths: list[Path], overwrite: bool) -> None:
    there = [p for p in paths if p.exists() or p.is_symlink()]
    if there and not overwrite:
        raise FieldError("overwrite", f"needed to replace {there[0]}, a round of an earlier run (or choose "
                                      "another receipt path)")


def run_in_fresh_processes(cfg: RunConfig, names: list[str], reporter: Reporter) -> RunOutcome:
    """Measure ``cfg`` in ``cfg.repeats`` rounds, each in a fresh worker process, and join them
    into one receipt per contract (``names``: the contracts' names, in the run's order)."""
    _payload(cfg)
    output = Output.claim(cfg.out, names, cfg.overwrite)
    try:
        folder = _make_folder(rounds_folder(_given(output.paths[0], names)))
        sizes = round_sizes(cfg.samples, cfg.repeats)
        given = [folder / f"round-{i + 1}.json" for i in range(len(sizes))]  # each round's --out
        rounds = [out_paths(out, names) for out in given]
        _check_free([p for paths in rounds for p in paths], cfg.overwrite)
        done: list[list[Path]] = []  # the rounds whose worker finished its receipt
        ended, forward, partial = _Round(), _Forward(), None
        with forward.installed():
            walls: list[float] = []  # each round's wall time, process start to exit: the time left
            for i, size in enumerate(sizes):
                if forward.signum is not None:
                    break
                label = f"round {i + 1} of {len(sizes)} (fresh process, {size} samples)"
                if walls:
                    reporter.note(f"{label}: starting{left_text(walls, len(sizes) - i, 'round')}")
                started = time.perf_counter()
                one = dataclasses.replace(cfg, repeats=1, samples=size, out=given[i], fresh_processes=False)
                ended = _run_round(one, label, folder / f"round-{i + 1}.out", reporter, forward)
                walls.append(time.perf_counter() - started)
                if _finished(rounds[i]):
                    done.append(rounds[i])
                elif all(p.exists() for p in rounds[i]):
                    partial = rounds[i]
                if ended.exit_code != 0 or partial is not None:
                    break
        # an unfinished round is kept in the folder; it stands for the run only when it is all there is
        joined = done or ([partial] if partial is not None else [])
        return _joined(cfg, output, folder, joined, ended, forward.signum, len(done) + 1)
    finally:
        output.release()


def _given(first: Path, names: list[str]) -> Path:
    """The receipt path the run was given, from its first receipt's (``out_paths`` undone)."""
    if len(names) == 1:
        return first
    return first.with_name(first.name.removesuffix(f".{names[0]}{first.suffix}") + first.suffix)


def _finished(paths: list[Path]) -> bool:
    from benchbox.receipts import load_receipt

    try:
        return all(load_receipt(p).is_complete for p in paths)
    except UsageError:
        return False


def _joined(cfg: RunConfig, output: Output, folder: Path, rounds: list[list[Path]], ended: _Round,
            signum: int | None, ended_in: int) -> RunOutcome:
    """The rounds' receipts joined into the run's receipts (written), or the error that ended them
    (``ended_in``: the round that ended them)."""
    from benchbox.run.interrupt import Interrupted

    if not rounds:
        if signum is not None:
            raise Interrupted(f"interrupted ({signal.Signals(signum).name}) before a round was measured",
                              None, None, signum)
        raise _round_error(ended, 1, folder)
    output.receipts = [_join(cfg, folder, [paths[j] for paths in rounds]) for j in range(len(rounds[0]))]
    whole = len(rounds) == cfg.repeats and ended.exit_code == 0 and signum is None
    if whole:
        from benchbox.receipts.diff import compare_runners

        output.finish([compare_runners(r, cfg.chosen_baseline) for r in output.receipts], None)
    else:
        output.update(lambda _, r: dataclasses.replace(r, complete=False))
    first = RunOutcome.of(output)
    if signum is not None:
        name = signal.Signals(signum).name
        output.mark_interrupted(name)
        raise Interrupted(f"interrupted ({name}) in round {ended_in} of {cfg.repeats}: the rounds so far "
                          f"joined in the incomplete receipt {output.where}, every round's receipt in "
                          f"{folder}", output.paths[0], output.receipts[0], signum)
    if not whole:
        raise _round_error(ended, ended_in, folder, kept=output.where)
    return first


def _join(cfg: RunConfig, folder: Path, paths: list[Path]) -> Receipt:
    from benchbox.receipts import load_receipt
    from benchbox.receipts.combine import combine

    receipts = [load_receipt(p) for p in paths]
    joined = combine(receipts, [f"{folder.name}/{p.name}" for p in paths]) if len(receipts) > 1 \
        else receipts[0]
    settings = {**(joined.settings or {}), "fresh_processes": True}
    return dataclasses.replace(joined, settings=settings)


def _round_error(ended: _Round, n: int, folder: Path, kept: str | None = None) -> UsageError:
    why = ended.error or ended.last or f"its worker exited with code {ended.exit_code}"
    where = f"; the rounds before it are joined in the incomplete receipt {kept}" if kept else ""
    tail = f" (its output: {folder / f'round-{n}.out'})"
    if ended.field is not None and kept is None:
        return FieldError(ended.field, ended.error or why, settings=ended.settings)
    return UsageError(f"round {n} failed: {why}{where}{tail}", settings=ended.settings)
