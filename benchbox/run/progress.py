"""What a run tells a person while it runs.

The run sequence calls a :class:`Reporter`; it never prints. The base class ignores every
event (a silent run); :class:`LineReporter` writes one plain line per step (logs, CI, a
``progress`` callback); :class:`LiveReporter` draws a live display with rich on a
terminal. Tests subclass :class:`Reporter` to assert on the phases without a terminal.

Phases, in the order a run goes through them: ``calibrate`` (the harness floors),
``reference`` (the float32 reference per case), then per runner ``compile`` (its
preparation: build, compile or load, timed apart) and per case ``validate`` (two untimed
calls through the accuracy gates) and ``sample``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from benchbox.durations import clock_text

PHASES = ("calibrate", "control", "reference", "compile", "validate", "sample")


@dataclass(frozen=True)
class RunPlan:
    """What the run will do, for progress and the ETA: runners × cases, and the sampling policy."""

    runners: tuple[str, ...]
    cases: tuple[str, ...]
    #: samples per case the policy asks for (every sampling pass of the run's contracts)
    samples_per_case: int
    #: adaptive sampling: ``samples_per_case`` is the cap, and each pass stops by ``max_time_s``
    adaptive: bool = False
    max_time_s: float | None = None
    passes: int = 1

    @property
    def total_cases(self) -> int:
        return len(self.runners) * len(self.cases)


class Reporter:
    """Receives a run's events. Every method is optional; the base ignores them all."""

    def run_started(self, plan: RunPlan) -> None:
        """The run is validated and about to calibrate."""

    def phase(self, phase: str, runner: str | None = None, case: str | None = None) -> None:
        """A phase of :data:`PHASES` starts (``runner``/``case`` where it concerns one)."""

    def sampled(self, done: int, total: int) -> None:
        """``done`` of the case's ``total`` planned samples are taken (called every few samples)."""

    def case_finished(self, runner: str, case: str, line: str) -> None:
        """A (runner, case) is recorded; ``line`` says how it went."""

    def note(self, text: str) -> None:
        """A one-line message (a receipt path, a runner that cannot run, a failure)."""

    def captured(self, text: str) -> None:
        """Library output captured during a phase (warnings, compiler logs); kept in the log file."""

    def run_finished(self) -> None:
        """The run ended (normally or not): close any live display."""


def eta_s(elapsed_s: float, done: int, total: int, cap_s: float | None = None) -> float | None:
    """Seconds left at the rate so far (None before the first sample), capped at ``cap_s`` left."""
    if done <= 0 or total <= done:
        return None if done <= 0 else 0.0
    left = elapsed_s / done * (total - done)
    if cap_s is not None:
        left = min(left, max(0.0, cap_s - elapsed_s))
    return left


class RunEta:
    """The time a run has left, moving while a case samples and counting preparation.

    The case in progress: its sampling time left at the rate so far (counting down between
    updates), or while it validates the mean case time less what it took so far. The cases
    after it: the mean time of the finished cases (validation and sampling). Preparation
    (build, compile) counts once it ran; a runner whose preparation is still to come is named
    in :meth:`left`, since nothing measured in this run says how long it takes.
    """

    def __init__(self, plan: RunPlan, now: Callable[[], float] = time.monotonic) -> None:
        self.plan = plan
        self.now = now
        self.prepared: dict[str, float] = {}
        self.preparing: tuple[str, float] | None = None
        self.case_s: list[float] = []
        self.case_start: float | None = None
        self.sampling_left: tuple[float, float] | None = None  # (seconds left, when said)
        self.done = 0

    def phase(self, phase: str, runner: str | None = None, case: str | None = None) -> None:
        t = self.now()
        if self.preparing is not None and phase != "compile":
            self.prepared[self.preparing[0]] = t - self.preparing[1]
            self.preparing = None
        if phase == "compile" and runner:
            self.preparing = (runner, t)
        elif phase == "validate" or (phase == "sample" and self.case_start is None):
            self.case_start, self.sampling_left = t, None

    def sampled(self, left_s: float | None) -> None:
        self.sampling_left = (left_s, self.now()) if left_s is not None else None

    def case_finished(self) -> None:
        if self.case_start is not None:
            self.case_s.append(self.now() - self.case_start)
        self.case_start, self.sampling_left = None, None
        self.done += 1

    def left(self) -> tuple[float | None, tuple[str, ...]]:
        """Seconds left (None before anything says), and the runners whose preparation is still to
        come and not in that figure."""
        t = self.now()
        to_prepare = tuple(r for r in self.plan.runners if r not in self.prepared)
        current = 0.0
        in_case = self.case_start is not None
        mean = sum(self.case_s) / len(self.case_s) if self.case_s else None
        if self.sampling_left is not None:
            current = max(0.0, self.sampling_left[0] - (t - self.sampling_left[1]))
            if mean is None and self.case_start is not None:
                mean = t - self.case_start + current
        elif in_case:
            current = max(0.0, mean - (t - self.case_start)) if mean is not None else 0.0
        if mean is None:
            return None, to_prepare
        after = max(0, self.plan.total_cases - self.done - (1 if in_case else 0))
        return current + after * mean, to_prepare


def eta_text(eta: RunEta | None) -> str:
    """``run: ≈1:10 left + preparing torch-compile``, or ``""`` while nothing says."""
    if eta is None:
        return ""
    left, to_prepare = eta.left()
    if left is None:
        return ""
    more = f" + preparing {', '.join(to_prepare)}" if to_prepare else ""
    return f"run: ≈{clock_text(left)} left{more}"


class LineReporter(Reporter):
    """One plain line per step, through ``emit`` (a progress callback)."""

    def __init__(self, emit: Callable[[str], None], verbose: bool = False) -> None:
        from benchbox.render.common import terminal_lines

        # names come from tasks and contracts: control characters are shown, never sent
        self.emit = lambda text: emit(terminal_lines(text))
        self.verbose = verbose
        self.eta: RunEta | None = None

    def run_started(self, plan: RunPlan) -> None:
        self.eta = RunEta(plan)

    def phase(self, phase: str, runner: str | None = None, case: str | None = None) -> None:
        if self.eta is not None:
            self.eta.phase(phase, runner, case)
        if phase in ("calibrate", "control", "reference") or (phase == "compile" and runner):
            what = {"calibrate": "calibrating the harness floors",
                    "control": "timing the control workload",
                    "reference": "computing the float32 reference"}.get(phase, f"{runner}: preparing")
            self.emit(what)
        elif self.verbose:
            self.emit(f"{runner} × {case}: {phase}")

    def case_finished(self, runner: str, case: str, line: str) -> None:
        if self.eta is not None:
            self.eta.case_finished()
        more = self.eta is not None and self.eta.done < self.eta.plan.total_cases
        left = eta_text(self.eta) if more else ""
        self.emit(f"{line} ({left})" if left else line)

    def note(self, text: str) -> None:
        self.emit(text)

    def captured(self, text: str) -> None:
        if self.verbose:
            self.emit(text.rstrip("\n"))


class LiveReporter(Reporter):
    """A live display on a terminal (rich): the run's cases done, the phase and the case's ETA."""

    def __init__(self, stream: IO[str], verbose: bool = False) -> None:
        from rich.console import Console

        self.console = Console(file=stream, stderr=True)
        self.verbose = verbose
        self.plan: RunPlan | None = None
        self.done_cases = 0
        self.where = ""
        self.what = "starting"
        self.t_phase = time.monotonic()
        self.t_start = time.monotonic()
        self.eta: RunEta | None = None
        self.live: Any = None

    def run_started(self, plan: RunPlan) -> None:
        from rich.live import Live

        self.plan = plan
        self.eta = RunEta(plan)
        self.t_start = time.monotonic()
        self.live = Live(self, console=self.console, refresh_per_second=4, transient=True)
        self.live.start()

    def __rich__(self) -> Any:
        from rich.text import Text

        total = self.plan.total_cases if self.plan else 0
        elapsed = time.monotonic() - self.t_phase
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{min(self.done_cases + 1, total)}/{total} ", "bold")
        if self.where:
            line.append(f"{self.where} ", "cyan")
        line.append(self.what, "yellow")
        line.append(f" · {clock_text(elapsed)}")
        run_eta = eta_text(self.eta)
        if run_eta:
            line.append(f" · {run_eta}", "dim")
        return line

    def phase(self, phase: str, runner: str | None = None, case: str | None = None) -> None:
        from benchbox.render.common import terminal

        self.where = terminal(" × ".join(x for x in (runner, case) if x))
        self.what = phase
        self.t_phase = time.monotonic()
        if self.eta is not None:
            self.eta.phase(phase, runner, case)

    def sampled(self, done: int, total: int) -> None:
        p = self.plan
        cap = p.max_time_s * p.passes if p is not None and p.adaptive and p.max_time_s else None
        left = eta_s(time.monotonic() - self.t_phase, done, total, cap)
        if self.eta is not None:
            self.eta.sampled(left)
        self.what = f"sample {done}/{total}{' at most' if p and p.adaptive else ''} ≈{clock_text(left)} left"

    def case_finished(self, runner: str, case: str, line: str) -> None:
        if self.eta is not None:
            self.eta.case_finished()
        self.done_cases += 1
        self._print(line)

    def note(self, text: str) -> None:
        self._print(text)

    def captured(self, text: str) -> None:
        if self.verbose:
            self._print(text.rstrip("\n"), style="dim")

    def _print(self, text: str, style: str | None = None) -> None:
        from benchbox.render.common import terminal_lines

        self.console.print(terminal_lines(text), highlight=False, markup=False, style=style)

    def run_finished(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def reporter_for(stream: IO[str] | None, quiet: bool = False, verbose: bool = False) -> Reporter:
    """Silent with ``quiet``; live on a terminal; plain lines otherwise."""
    if quiet or stream is None:
        return Reporter()
    if _is_terminal(stream):
        return LiveReporter(stream, verbose)
    return LineReporter(lambda s: print(s, file=stream, flush=True), verbose)


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def passes(keys: Sequence[Any]) -> int:
    """How many sampling passes a case takes: one per distinct sampling key."""
    return max(1, len(set(keys)))
