"""The runners of one run against its baseline runner, per case (valid rows only)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchbox.receipts.model import Calibration, ComparisonRow, Comparisons, Excluded, ResultRow
from benchbox.stats import FLOOR_MULTIPLE, floor_resolvable, ratio_ci


def _ratio_entry(r: ResultRow, base: ResultRow, calibration: Calibration | None) -> dict[str, Any]:
    """BCa intervals of the p50 (and, when both are resolvable, p99) ratios, and the floor verdict."""
    out: dict[str, Any] = {}
    for key, q in (("p50", 0.5), ("p99", 0.99)):
        if key == "p99" and (r.summary.p99_ci_ns is None or base.summary.p99_ci_ns is None):
            out["p99_ratio_ci"] = None
            continue
        ci = ratio_ci(base.samples_ns, r.samples_ns, q)
        out[f"{key}_ratio_ci"] = list(ci) if ci is not None else None
    out["ratio_ci_method"] = "BCa bootstrap (benchbox.stats.ratio_ci), 95%"
    clock, base_clock = r.clock, base.clock
    assert r.summary.p50_ns is not None and base.summary.p50_ns is not None
    delta = r.summary.p50_ns - base.summary.p50_ns
    floor = calibration.floor(clock) if calibration is not None else None
    out.update(p50_delta_ns=delta, floor_ns=floor, floor_multiple=FLOOR_MULTIPLE)
    ci = out["p50_ratio_ci"]
    if clock != base_clock:
        out["p50_verdict"] = f"not comparable: timed with the {clock} clock vs the {base_clock} clock"
    elif not floor_resolvable(delta, floor):
        out["p50_verdict"] = (f"unresolvable: |Δp50| {abs(delta)} ns is under {FLOOR_MULTIPLE:g}× "
                              f"the {clock} floor ({floor} ns)" if floor is not None
                              else "unresolvable: no floor measured for this clock")
    elif ci is None:
        out["p50_verdict"] = "unresolved: too few samples for an interval"
    elif ci[1] < 1.0:
        out["p50_verdict"] = "faster"
    elif ci[0] > 1.0:
        out["p50_verdict"] = "slower"
    else:
        out["p50_verdict"] = "indistinguishable: the interval holds 1"
    return out


def compare(results: Sequence[ResultRow], baseline: str | None,
            calibration: Calibration | None = None) -> Comparisons:
    """Per case, each valid runner's p50/p99 against the baseline runner's; invalid rows excluded.

    Ratios are runner / baseline, with BCa bootstrap intervals; a p50 difference under
    the stated multiple of the harness floor (from ``calibration``) is unresolvable.
    """
    excluded = tuple(Excluded(runner=r.runner, case=r.case, status=r.status, reasons=r.reasons,
                              extra={"options": r.runner_report.options})
                     for r in results if r.status != "valid")
    rows = []
    by_case: dict[str, dict[str, ResultRow]] = {}
    for r in results:
        if r.status == "valid":
            by_case.setdefault(r.case, {})[r.runner] = r
    for case, runners in by_case.items():
        if baseline not in runners:
            continue
        base = runners[baseline]
        for name, r in runners.items():
            if name == baseline:
                continue
            rows.append(ComparisonRow.of({
                "case": case, "runner": name, "baseline": baseline,
                "p50_ratio": r.summary.p50_ns / base.summary.p50_ns,  # type: ignore[operator]
                "p99_ratio": r.summary.p99_ns / base.summary.p99_ns,  # type: ignore[operator]
                **_ratio_entry(r, base, calibration)}))
    return Comparisons(baseline=baseline, rows=tuple(rows), excluded=excluded)
