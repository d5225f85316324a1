"""The runners of one run against its baseline runner, judged by the diff engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from benchbox.receipts.conditions import (
    MEASURED_PROCESSES,
    row_conditions,
)
from benchbox.receipts.diff_result import DiffOptions, harness_floor
from benchbox.receipts.judge import PLAUSIBLE_DRIFT, MetricDiff, Pending, judge, measure
from benchbox.receipts.model import Receipt, ResultRow
from benchbox.receipts.replication import process_samples, round_processes

METHOD = ("benchbox.receipts.diff (the diff engine): Welch's t on the processes' log-quantiles (paired "
          "per process where the run had several), Holm per metric family")


def _comparison_row(case: str, runner: str, baseline: str, b: ResultRow, h: ResultRow, verdict: str,
                    reason: str, metrics: Sequence[MetricDiff] = ()) -> Any:
    from benchbox.receipts.model import ComparisonRow

    by = {m.metric: m for m in metrics}
    sb, sh = b.summary, h.summary
    d: dict[str, Any] = {"case": case, "runner": runner, "baseline": baseline,
                         "p50_ratio": (sh.p50_ns or 0) / sb.p50_ns if sb.p50_ns else 0.0,
                         "p99_ratio": (sh.p99_ns or 0) / sb.p99_ns if sb.p99_ns else None,
                         "p50_verdict": verdict, "reason": reason, "method": METHOD}
    for m in ("p50", "p99"):
        if m in by:
            d[f"{m}_ratio"] = by[m].ratio if by[m].ratio is not None else d[f"{m}_ratio"]
            d[f"{m}_ratio_ci"] = list(by[m].ci) if by[m].ci else None
            d[f"{m}_verdict"] = by[m].verdict
    return ComparisonRow.of(d)


def _runner_pending(receipt: Receipt, key: tuple[str, str, str], b: ResultRow, h: ResultRow,
                    opts: DiffOptions, base_name: str) -> Pending | str:
    """The statistics to take for one runner against the baseline, or why there are none."""
    a, c = process_samples(receipt, b), process_samples(receipt, h)
    measured = min(len(a), len(c)) >= MEASURED_PROCESSES
    cond = {k: v for k, v in row_conditions(b, h, base_name, key[2], receipts=(receipt, receipt),
                                            measured=measured).items()
            if k != "versions" and k not in opts.accept}
    if b.clock != h.clock:
        return f"not comparable|timed with the {h.clock} clock vs the {b.clock} clock"
    paired = round_processes(receipt, b) == round_processes(receipt, h) and len(a) >= 2
    # an unreliable row keeps its numbers, as in benchbox diff: measured, then not judged
    return Pending(key, b, h, a, c, harness_floor(receipt, b.clock), prior=opts.drift,
                   fallback=PLAUSIBLE_DRIFT.get(b.clock, PLAUSIBLE_DRIFT["host"]), paired=paired,
                   unreliable=cond)


def compare_runners(receipt: Receipt, baseline: str | None = None,
                    options: DiffOptions | None = None) -> Any:
    """Per case, each valid runner against the baseline runner, judged by the diff engine.

    The baseline's row is BASE and the runner's row HEAD; rows flagged noisy or unsettled
    are ``unreliable``, rows timed with different clocks ``not comparable``; Holm runs over
    the rows of the run. Both rows come from the same processes, so with several processes
    the comparison is paired. Invalid rows are listed as excluded.
    """
    from benchbox.receipts.model import Comparisons, Excluded

    opts = options or DiffOptions(metric="both")
    base_name = str(baseline or receipt.declared_baseline or (receipt.runners or ("",))[0])
    excluded = tuple(Excluded(runner=r.runner, case=r.case, status=r.status, reasons=r.reasons,
                              extra={"options": r.runner_report.options})
                     for r in receipt.results if r.status != "valid")
    by_case: dict[str, dict[str, ResultRow]] = {}
    for r in receipt.results:
        if r.usable:
            by_case.setdefault(r.case, {})[r.runner] = r
    done: dict[tuple[str, str, str], Any] = {}
    pending: list[Pending] = []
    order: list[tuple[str, str, str]] = []
    for case, runners in by_case.items():
        b = runners.get(base_name)
        for name, h in runners.items():
            if b is None or name == base_name:
                continue
            key = (receipt.task.name, case, name)
            order.append(key)
            got = _runner_pending(receipt, key, b, h, opts, base_name)
            if isinstance(got, str):
                verdict, why = got.split("|", 1)
                done[key] = _comparison_row(case, name, base_name, b, h, verdict, why)
            else:
                measure(got, opts)
                pending.append(got)
    for p, (verdict, reason, ms) in zip(pending, judge(pending, opts)):
        if p.unreliable:
            verdict, reason = "unreliable", "; ".join(f"{k}: {v}" for k, v in p.unreliable.items())
            ms = [dataclasses.replace(m, verdict="unreliable") for m in ms]
        done[p.key] = _comparison_row(p.key[1], p.key[2], base_name, p.base, p.head, verdict, reason, ms)
    return Comparisons(baseline=base_name or None, rows=tuple(done[k] for k in order), excluded=excluded)
