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
from collections.abc import Callable
from typing import Any

from benchbox.harness.loop import Measurement
from benchbox.harness.schedule import Sampled, sample
from benchbox.run.contain import contained


def round_sizes(samples: int, k: int) -> list[int]:
    """``samples`` split into ``k`` rounds as evenly as possible."""
    return [samples // k + (1 if i < samples % k else 0) for i in range(k)]


def _merge(into: Measurement, part: Measurement) -> None:
    if not into.samples_ns:
        into.clock_used, into.warmup, into.clock_note = part.clock_used, part.warmup, part.clock_note
        into.batch, into.host_span_ns = part.batch, part.host_span_ns
    if part.samples_ns:
        into.round_sizes.append(len(part.samples_ns))
    into.samples_ns.extend(part.samples_ns)
    for s, v in part.stages_ns.items():
        into.stages_ns[s].extend(v)


@dataclasses.dataclass
class _InRounds:
    """One (runner, case) across the rounds: what it has measured and how long it has taken."""

    runner: Any
    case: Any
    phases: Any
    gates: Any = None
    acc: list[Sampled] = dataclasses.field(default_factory=list)
    spent_s: float = 0.0
    rows: list[Any] | None = None  # set once it has failed

    @property
    def label(self) -> str:
        return f"{self.runner.name} × {self.case.name}"


def _contained(run: Any, item: _InRounds, what: str, step: Callable[[], Any]) -> Any:
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
        kept = [a.measurement for a in item.acc] if any(a.measurement.samples_ns for a in item.acc) else []
        item.rows = run.failed_case(item.runner, item.case, item.phases, e, kept)
        return None
    finally:
        item.spent_s += time.perf_counter() - t0


def _prepared(run: Any) -> list[_InRounds]:
    """Every runner prepared and every case validated; failures recorded as they happen."""
    ready = []
    for name in run.cfg.runners:
        run.stop.check()
        got = run._prepare_runner(name)
        if got is None:
            continue
        runner, phases = got
        for case in run.cases:
            item = _InRounds(runner, case, phases)
            if case.name in run.reference_failures:
                run._record(run._contained_case(runner, case, phases))  # the reference's failure
                continue
            got_v = _contained(run, item, "validate",
                               lambda i=item: run._validate(i.runner, i.case, i.phases))
            if item.rows is not None:
                run._record(item.rows)
                continue
            failed, item.gates = got_v
            if failed is not None:
                run._record(failed)
                continue
            item.acc = [Sampled(Measurement()) for _ in run.harnesses]
            ready.append(item)
    return ready


def _one_round(run: Any, item: _InRounds, policy: Any) -> None:
    """The (runner, case)'s share of one round, merged into what it has."""
    got = _contained(run, item, "sample", lambda: list(sample(run.harnesses, run.task, item.runner,
                                                              item.case.request, policy,
                                                              run.stop.should_stop)))
    if got is None:
        return
    for a, s in zip(item.acc, got):
        _merge(a.measurement, s.measurement)
        a.error, a.traceback, a.interrupted = s.error, s.traceback, s.interrupted


def measure_in_rounds(run: Any) -> None:
    """Prepare every runner, validate every case, then sample in ``run.cfg.repeats`` rounds."""
    cfg = run.cfg
    ready = _prepared(run)
    sizes = round_sizes(cfg.samples, cfg.repeats)
    for r, size in enumerate(sizes):
        run.progress(f"round {r + 1} of {len(sizes)} ({size} samples per runner and case)")
        policy = dataclasses.replace(run.policy, samples=size)
        for item in ready:
            if item.rows is None and not any(a.error or a.interrupted for a in item.acc):
                _one_round(run, item, policy)
            if any(a.interrupted for a in item.acc):
                break
        if any(a.interrupted for item in ready for a in item.acc):
            break
    for item in ready:
        if item.rows is not None:  # failed in a round: its rows, with what earlier rounds measured
            run._record(item.rows)
            run.reporter.case_finished(item.runner.name, item.case.name,
                                       f"{item.label}: failed: {item.rows[0].reasons[0]}")
            continue
        for a in item.acc:
            a.measurement.stop_reason = (f"fixed sample count {len(a.measurement.samples_ns)} reached in "
                                         f"{len(a.measurement.round_sizes)} independent round(s) "
                                         f"(--repeats {cfg.repeats})")
        rows = run._rows(item.runner, item.case, item.phases, item.gates, item.acc)
        run._record(rows)
        run.reporter.case_finished(item.runner.name, item.case.name,
                                   "\n".join(run._lines(item.runner.name, item.case, rows)))
