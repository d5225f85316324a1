"""``--repeats K``: every (runner, case) sampled in K independent rounds, separated in time.

All runners are prepared first (so they are held in memory together) and every case is
validated once; then round after round, each (runner, case) takes its share of the
samples after its own warm-up, in turn, so drift on the machine lands between rounds
rather than inside one runner's samples. Each round is one entry of the row's
``round_sizes``. Rows are written when their last round is in; an interrupt keeps the
rounds so far as partial rows. The per-case time limit covers a case's validation and all its
rounds together, and sys.exit or a BaseException from task code fails that (runner, case)
alone, keeping the samples of its earlier rounds, as in a one-round run. Fresh worker
processes per round are not done here: a round shares the process, the prepared runner and
its compiled code with the others (the CI recipe, ``examples/ci``, runs each round as its own
``benchbox run`` process and joins them with ``benchbox combine``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from benchbox.harness.loop import Measurement
from benchbox.harness.quiet import gc_paused
from benchbox.harness.schedule import Sampled, merge, sample
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
    """What measuring in rounds takes from the run sequence: its state and its steps."""

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

    def contained_case(self, runner: Runner, case: Case, phases: PhaseTimer) -> list[ResultRow]: ...

    def validate_case(self, runner: Runner, case: Case,
                      phases: PhaseTimer) -> tuple[list[ResultRow] | None, Any]: ...

    def failed_case(self, runner: Runner, case: Case, phases: PhaseTimer, e: BaseException,
                    kept: Sequence[Measurement] = ()) -> list[ResultRow]: ...

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
class _InRounds:
    """One (runner, case) across the rounds: what it has measured and how long it has taken."""

    runner: Any
    case: Any
    phases: Any
    gates: Any = None
    #: per contract, its share of each round so far
    parts: list[list[Measurement]] = dataclasses.field(default_factory=list)
    #: per contract, how its last round ended (an error or an interrupt ends its rounds)
    last: list[Sampled] = dataclasses.field(default_factory=list)
    spent_s: float = 0.0
    rows: list[Any] | None = None  # set once it has failed

    @property
    def label(self) -> str:
        return f"{self.runner.name} × {self.case.name}"

    @property
    def ended(self) -> bool:
        return self.rows is not None or any(s.error or s.interrupted for s in self.last)

    @property
    def interrupted(self) -> bool:
        return any(s.interrupted for s in self.last)

    def kept(self) -> list[Measurement]:
        """What the rounds so far measured, one per contract (none when nothing was)."""
        if not any(m.samples_ns for p in self.parts for m in p):
            return []
        return [merge(p, stop_reason="") for p in self.parts]

    def sampled(self, repeats: int) -> list[Sampled]:
        """The rounds joined, one per contract, with how its last round ended."""
        out = []
        for p, s in zip(self.parts, self.last):
            n, k = sum(len(m.samples_ns) for m in p), sum(1 for m in p if m.samples_ns)
            reason = f"fixed sample count {n} reached in {k} independent round(s) (repeats = {repeats})"
            load = _heaviest_load(p)
            if load and load.get("overloaded"):
                reason += f"; a round was overloaded: {load.get('overload')}"
            joined = dataclasses.replace(merge(p, stop_reason=reason), load=load)
            out.append(dataclasses.replace(s, measurement=joined, shared_with=[]))
        return out


def _contained(run: RunSteps, item: _InRounds, what: str, step: Callable[[], Any]) -> Any:
    """``step()`` under what is left of the case's time limit, its output captured into the
    runner's log; sys.exit, a BaseException or the time limit fail the (runner, case) with
    the samples of its earlier rounds kept, as a case of a one-round run would fail."""
    left = run.limit.seconds - item.spent_s if run.limit.seconds > 0 else None
    t0 = time.perf_counter()
    try:
        with run.limit.guard(item.label, left), run.log.capture(f"{item.label}: {what}", item.runner.name):
            return step()
    except BaseException as e:
        if not contained(e):
            raise
        item.rows = run.failed_case(item.runner, item.case, item.phases, e, item.kept())
        return None
    finally:
        item.spent_s += time.perf_counter() - t0


def _prepared(run: RunSteps) -> list[_InRounds]:
    """Every runner prepared and every case validated; failures recorded as they happen."""
    ready = []
    for name in run.cfg.runners:
        run.stop.check()
        got = run.prepare_runner(name)
        if got is None:
            continue
        runner, phases = got
        for case in run.cases:
            item = _InRounds(runner, case, phases)
            if case.name in run.reference_failures:
                run.receipts.add_rows(run.contained_case(runner, case, phases))  # the reference's failure
                continue
            got_v = _contained(run, item, "validate",
                               lambda i=item: run.validate_case(i.runner, i.case, i.phases))
            if item.rows is not None:
                run.receipts.add_rows(item.rows)
                continue
            failed, item.gates = got_v
            if failed is not None:
                run.receipts.add_rows(failed)
                continue
            item.parts = [[] for _ in run.harnesses]
            item.last = [Sampled(Measurement()) for _ in run.harnesses]
            ready.append(item)
    return ready


def _one_round(run: RunSteps, item: _InRounds, policy: SamplingPolicy) -> None:
    """The (runner, case)'s share of one round, added to what it has."""
    def step() -> list[Sampled]:
        with gc_paused(run.cfg.gc_mode):
            return list(sample(run.harnesses, run.task, item.runner, item.case.request, policy,
                               run.stop.should_stop, run.probe_ns))

    got = _contained(run, item, "sample", step)
    if got is None:
        return
    for i, s in enumerate(got):  # fewer than the contracts when an interrupt cut the round short
        item.parts[i].append(_as_round(s.measurement))
        item.last[i] = s


def measure_in_rounds(run: RunSteps) -> None:
    """Prepare every runner, validate every case, then sample in ``run.cfg.repeats`` rounds."""
    cfg = run.cfg
    ready = _prepared(run)
    sizes = round_sizes(cfg.samples, cfg.repeats)
    for r, size in enumerate(sizes):
        run.reporter.note(f"round {r + 1} of {len(sizes)} ({size} samples per runner and case)")
        policy = dataclasses.replace(run.policy, samples=size)
        for item in ready:
            if not item.ended:
                _one_round(run, item, policy)
            if item.interrupted:
                break
        if any(item.interrupted for item in ready):
            break
    for item in ready:
        if item.rows is not None:  # failed in a round: its rows, with what earlier rounds measured
            run.receipts.add_rows(item.rows)
            run.reporter.case_finished(item.runner.name, item.case.name,
                                       f"{item.label}: failed: {item.rows[0].reasons[0]}")
            continue
        rows = run.rows(item.runner, item.case, item.phases, item.gates, item.sampled(cfg.repeats))
        run.receipts.add_rows(rows)
        run.reporter.case_finished(item.runner.name, item.case.name,
                                   "\n".join(run.lines(item.runner.name, item.case, rows)))
