"""The measuring step of every run: each (runner, case) sampled in K rounds (K = ``--repeats``).

A one-round run and ``--repeats K`` take this one path. A (runner, case)'s first turn validates
it (two untimed calls checked against the reference), settles it when a settle phase is declared,
then samples; each later round samples it again after its own warm-up; its rows are written once
its last round is in, or as soon as it fails. Each round is one entry of the row's
``round_sizes`` (a single round keeps its sampling's own).

With one round, each runner is prepared, measured and let go before the next is prepared (one in
memory at a time), so every case is validated just before its samples and written right after
them. With K rounds, every runner is prepared first and held in memory with the others, so that
round after round each (runner, case) takes its share of the samples in turn and drift on the
machine lands between rounds rather than inside one runner's samples.

The per-case time limit covers a case's validation and all its rounds together; ``sys.exit``, a
BaseException from task code or the time limit fail that (runner, case) alone, keeping what its
rounds measured before. An interrupt ends the sampling in progress: that (runner, case) keeps its
samples as a partial row, every other one keeps the rounds it has, and nothing more is prepared.
Fresh processes are not made here: a run in fresh processes (:mod:`benchbox.run.workers`) runs
this step with one round in each of its workers.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from benchbox.durations import left_text
from benchbox.harness.loop import Measurement
from benchbox.harness.quiet import gc_paused
from benchbox.harness.schedule import Sampled, measured_before, merge, sample
from benchbox.run.contain import contained

if TYPE_CHECKING:
    from benchbox.harness.loop import Harness, PhaseTimer
    from benchbox.harness.sampling import SamplingPolicy
    from benchbox.receipts.model import ResultRow
    from benchbox.run.capture import OutputLog
    from benchbox.run.config import RunConfig
    from benchbox.run.interrupt import Stop
    from benchbox.run.limits import TimeLimit
    from benchbox.run.output import Output
    from benchbox.run.progress import Reporter
    from benchbox.runners import Runner
    from benchbox.tasks import Case, Task


class RunSteps(Protocol):
    """What measuring takes from the run sequence: its state and its steps."""

    cfg: RunConfig
    task: Task
    cases: list[Case]
    harnesses: list[Harness]
    policy: SamplingPolicy
    stop: Stop
    limit: TimeLimit
    log: OutputLog
    reporter: Reporter
    receipts: Output
    #: cases whose reference call failed (their rows fail), with the reason
    reference_failures: dict[str, str]
    #: the process probe, timed at the process's start (every row of the process carries it)
    probe_ns: list[int]

    def prepare_runner(self, name: str) -> tuple[Runner, PhaseTimer] | None: ...

    def reference_failed(self, runner: Runner, case: Case, phases: PhaseTimer) -> list[ResultRow]: ...

    def validate_case(self, runner: Runner, case: Case,
                      phases: PhaseTimer) -> tuple[list[ResultRow] | None, Any]: ...

    def settle_case(self, runner: Runner, case: Case, phases: PhaseTimer) -> list[ResultRow] | None: ...

    def failed_case(self, runner: Runner, case: Case, phases: PhaseTimer, e: BaseException,
                    kept: Sequence[Measurement] = ()) -> list[ResultRow]: ...

    def counted(self, policy: SamplingPolicy) -> Callable[[Any], Any]: ...

    def rows(self, runner: Runner, case: Case, phases: PhaseTimer, gates: Any,
             results: Sequence[Sampled]) -> list[ResultRow]: ...

    def lines(self, runner: str, case: Case, rows: list[ResultRow]) -> list[str]: ...


def round_sizes(samples: int, k: int) -> list[int]:
    """``samples`` split into ``k`` rounds as evenly as possible."""
    return [samples // k + (1 if i < samples % k else 0) for i in range(k)]


def _as_round(part: Measurement) -> Measurement:
    """One contract's share of one round, as one round of the row: the schedule's own
    sub-rounds collapse into it (its load record stays with it, see :func:`_heaviest_load`)."""
    return dataclasses.replace(part, round_sizes=[])


def _heaviest_load(parts: list[Measurement]) -> dict[str, Any] | None:
    """The row's load under paced arrivals: its most loaded round's record (an overloaded
    round first, else the highest measured utilisation), so one overloaded round marks the
    row as overloaded; None under back-to-back arrivals."""
    loads = [m.load for m in parts if m.load]
    if not loads:
        return None
    return max(loads, key=lambda d: (bool(d.get("overloaded")), d.get("utilisation") or 0.0))


@dataclasses.dataclass
class _Item:
    """One (runner, case) across the rounds: what it has measured and how long it has taken."""

    #: the runner's name in the run (what the reporter is told)
    name: str
    runner: Any
    case: Any
    phases: Any
    gates: Any = None
    #: per contract, its share of each round so far
    parts: list[list[Measurement]] = dataclasses.field(default_factory=list)
    #: per contract, how its last round ended (its sampling as it came, for a single round)
    last: list[Sampled] = dataclasses.field(default_factory=list)
    spent_s: float = 0.0
    #: set once it has failed outside sampling (validation, settle, sys.exit, the time limit)
    rows: list[Any] | None = None
    validated: bool = False
    written: bool = False

    @property
    def label(self) -> str:
        return f"{self.runner.name} × {self.case.name}"

    @property
    def ended(self) -> bool:
        return self.rows is not None or any(s.error or s.interrupted for s in self.last)

    def kept(self, repeats: int, e: BaseException) -> list[Measurement]:
        """What the (runner, case) measured before ``e`` ended it, one per contract (none when
        nothing was): a single round's sampling as ``e`` left it; with rounds, the rounds so far
        and what the round in progress took before ``e``."""
        now = measured_before(e)
        if repeats == 1:
            return now
        parts = [p + [_as_round(m)] for p, m in zip(self.parts, now)] if now else self.parts
        n, k = sum(len(m.samples_ns) for m in parts[0]), sum(1 for m in parts[0] if m.samples_ns)
        if not n:
            return []
        why = f"sampling ended by {type(e).__name__} after {n} sample(s) in {k} round(s)"
        return [merge(p, stop_reason=why) for p in parts]

    def sampled(self, repeats: int) -> list[Sampled]:
        """The rounds joined, one per contract, with how its last round ended (fewer than the
        contracts when an interrupt cut its first round short)."""
        reached = [s for p, s in zip(self.parts, self.last) if p]
        if repeats == 1:
            return reached
        out = []
        for p, s in zip(self.parts, reached):
            n, k = sum(len(m.samples_ns) for m in p), sum(1 for m in p if m.samples_ns)
            reason = f"fixed sample count {n} reached in {k} independent round(s) (repeats = {repeats})"
            load = _heaviest_load(p)
            if load and load.get("overloaded"):
                reason += f"; a round was overloaded: {load.get('overload')}"
            joined = dataclasses.replace(merge(p, stop_reason=reason), load=load)
            out.append(dataclasses.replace(s, measurement=joined, shared_with=[]))
        return out


def _contained(run: RunSteps, item: _Item, step: Callable[[], Any]) -> Any:
    """``step()`` under what is left of the case's time limit; sys.exit, a BaseException or the
    time limit fail the (runner, case), keeping what its rounds measured before (also the round
    in progress, up to the sample it was in)."""
    left = run.limit.seconds - item.spent_s if run.limit.seconds > 0 else None
    t0 = time.perf_counter()
    try:
        with run.limit.guard(item.label, left):
            return step()
    except BaseException as e:
        if not contained(e):
            raise
        item.rows = run.failed_case(item.runner, item.case, item.phases, e, item.kept(run.cfg.repeats, e))
        return None
    finally:
        item.spent_s += time.perf_counter() - t0


def _items(run: RunSteps, names: Sequence[str]) -> list[_Item]:
    """Every (runner, case) of the runners named, each runner prepared (a runner that cannot
    run or fails to prepare has its rows recorded and no items)."""
    items = []
    for name in names:
        run.stop.check()
        got = run.prepare_runner(name)
        if got is not None:
            runner, phases = got
            items += [_Item(name, runner, case, phases, parts=[[] for _ in run.harnesses],
                            last=[Sampled(Measurement()) for _ in run.harnesses]) for case in run.cases]
    return items


def _first(run: RunSteps, item: _Item) -> None:
    """The (runner, case)'s first turn before sampling: the reference's failure, or validate and settle."""
    item.validated = True
    if item.case.name in run.reference_failures:
        item.rows = run.reference_failed(item.runner, item.case, item.phases)
        return

    def step() -> list[ResultRow] | None:
        failed, item.gates = run.validate_case(item.runner, item.case, item.phases)
        return failed if failed is not None else run.settle_case(item.runner, item.case, item.phases)

    failed = _contained(run, item, step)
    if failed is not None:
        item.rows = failed


def _turn(run: RunSteps, item: _Item, policy: SamplingPolicy) -> None:
    """The (runner, case)'s share of one round, added to what it has."""
    if not item.validated:
        _first(run, item)
        if item.ended:
            return

    # samples are counted for the reporter in a single round only: its time left is reckoned per
    # (runner, case), and with rounds a case's share of one round is not the case
    stop = run.counted(policy) if run.cfg.repeats == 1 else run.stop.should_stop

    def step() -> list[Sampled]:
        run.reporter.phase("sample", item.runner.name, item.case.name)
        with run.log.capture(f"{item.label}: sample", item.runner.name), gc_paused(run.cfg.gc_mode):
            return list(sample(run.harnesses, run.task, item.runner, item.case.request, policy, stop,
                               run.probe_ns))

    got = _contained(run, item, step)
    if got is None:
        return
    for i, s in enumerate(got):  # fewer than the contracts when an interrupt cut the round short
        item.parts[i].append(_as_round(s.measurement))
        item.last[i] = s


def _write(run: RunSteps, item: _Item) -> None:
    """The (runner, case)'s rows, into the receipts, and its line. The rows are made (the runner's
    report read) under the case's time limit, where sys.exit or a BaseException fails them too."""
    item.written = True
    if item.rows is None:
        made = _contained(run, item, lambda: run.rows(item.runner, item.case, item.phases, item.gates,
                                                      item.sampled(run.cfg.repeats)))
        item.rows = made if item.rows is None else item.rows  # (set by _contained when it failed)
    run.receipts.add_rows(item.rows)
    run.reporter.case_finished(item.name, item.case.name,
                               "\n".join(run.lines(item.runner.name, item.case, item.rows)))


def _measure(run: RunSteps, items: list[_Item], sizes: list[int]) -> None:
    """The rounds over ``items``; each item written when it ends or its last round is in. On an
    interrupt every item that measured something is written, and nothing more is measured."""
    walls: list[float] = []  # each round's wall time, for the time left
    for r, size in enumerate(sizes):
        started = time.perf_counter()
        if len(sizes) > 1:  # the first round also validates (and settles): later ones, once there are any
            left = left_text(walls[1:] or walls, len(sizes) - r, "round")
            run.reporter.note(f"round {r + 1} of {len(sizes)} ({size} samples per runner and case){left}")
        policy = dataclasses.replace(run.policy, samples=size)
        for item in items:
            if run.stop.requested:
                break
            if not item.ended:
                _turn(run, item, policy)
            if not item.written and (item.ended or r == len(sizes) - 1):
                _write(run, item)
        if run.stop.requested:
            break
        walls.append(time.perf_counter() - started)
    for item in items:  # after an interrupt: what the rounds so far measured
        if not item.written and item.validated and any(m.samples_ns for p in item.parts for m in p):
            _write(run, item)


def measure(run: RunSteps) -> None:
    """Every runner's cases sampled in ``run.cfg.repeats`` rounds (see the module's docstring)."""
    sizes = round_sizes(run.cfg.samples, run.cfg.repeats)
    names = list(run.cfg.runners)
    for group in ([n] for n in names) if len(sizes) == 1 else [names]:
        _measure(run, _items(run, group), sizes)
        if run.stop.requested:
            return
