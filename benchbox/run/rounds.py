"""``--repeats K``: every (runner, case) sampled in K independent rounds, separated in time.

All runners are prepared first (so they are held in memory together) and every case is
validated once; then round after round, each (runner, case) takes its share of the
samples after its own warm-up, in turn, so drift on the machine lands between rounds
rather than inside one runner's samples. Each round is one entry of the row's
``round_sizes``. Rows are written when their last round is in; an interrupt keeps the
rounds so far as partial rows. Fresh worker processes per round are not done here: a
round shares the process, the prepared runner and its compiled code with the others.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from benchbox.harness.loop import Measurement
from benchbox.harness.schedule import Sampled, sample


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


def measure_in_rounds(run: Any) -> None:
    """Prepare every runner, validate every case, then sample in ``run.cfg.repeats`` rounds."""
    cfg = run.cfg
    ready = []
    for name in cfg.runners:
        run.stop.check()
        got = run._prepare_runner(name)
        if got is None:
            continue
        runner, phases = got
        for case in run.cases:
            failed, gates = run._validate(runner, case, phases)
            if failed is not None:
                run._record(failed)
            else:
                ready.append((runner, case, phases, gates, [Sampled(Measurement()) for _ in run.harnesses]))
    sizes = round_sizes(cfg.samples, cfg.repeats)
    for r, size in enumerate(sizes):
        run.progress(f"round {r + 1} of {len(sizes)} ({size} samples per runner and case)")
        policy = dataclasses.replace(run.policy, samples=size)
        for runner, case, _phases, _gates, acc in ready:
            if any(a.error or a.interrupted for a in acc):
                continue
            for a, s in zip(acc, sample(run.harnesses, run.task, runner, case.request, policy,
                                        run.stop.should_stop)):
                _merge(a.measurement, s.measurement)
                a.error, a.traceback, a.interrupted = s.error, s.traceback, s.interrupted
            if any(a.interrupted for a in acc):
                break
        if any(a.interrupted for _r, _c, _p, _g, acc in ready for a in acc):
            break
    for runner, case, phases, gates, acc in ready:
        for a in acc:
            a.measurement.stop_reason = (f"fixed sample count {len(a.measurement.samples_ns)} reached in "
                                         f"{len(a.measurement.round_sizes)} independent round(s) "
                                         f"(--repeats {cfg.repeats})")
        rows = run._rows(runner, case, phases, gates, acc)
        run._record(rows)
        run.reporter.case_finished(runner.name, case.name, "\n".join(run._lines(runner.name, case, rows)))
