"""The statistics of one diff row: each metric from the processes of both sides, then a verdict.

The unit of replication is the process (:mod:`benchbox.receipts.replication`): each side of a
row is one log-quantile per process that measured it. Per metric: Welch's t on those (their
Satterthwaite degrees of freedom; a floor for each side's spread from the quantile's own
sampling error), Holm within the metric's family across the rows, and

- ``slower``/``faster`` when the adjusted p-value is under alpha, the ratio is beyond
  ±threshold and the change is at least ``floor_multiple`` × the harness floor;
- ``unchanged`` when the interval lies inside ±threshold; else ``unresolved``.

A side of one process has no spread of its own: it takes the run-to-run spread given
(``DiffOptions.drift`` or the row's history), else the other side's, else the largest spread
measured between processes of such a contract (:data:`PLAUSIBLE_DRIFT`), so only what no
plausible drift explains is judged. Every judged metric says the smallest change it could
have detected and how many processes a side would detect a change of the threshold's size.
A quantile needs :data:`benchbox.stats.MIN_PER_REPLICATE` samples per process for a verdict;
with fewer it is advisory (shown, never judged).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchbox import stats
from benchbox.durations import duration_text
from benchbox.receipts import adjust

#: The largest run-to-run spread (sd of the log of a process's p50) measured between processes,
#: per clock: taken for a side of one process when nothing better is known. Host: the public
#: call of the tiny decision task on the H200 host, 0.12–0.21 between processes; device: fresh
#: max-autotune compiles of one model landing ×1.29 apart (BENCHMARKS.md §6).
PLAUSIBLE_DRIFT = {"host": 0.21, "device": 0.10}
QUANT = {"p50": 0.5, "p99": 0.99}


@dataclass(frozen=True)
class MetricDiff:
    """One metric (p50 or p99) of one row."""

    metric: str
    base_ns: float | None
    head_ns: float | None
    ratio: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    p_holm: float | None
    verdict: str
    reason: str = ""
    #: processes per side the comparison rests on
    processes: tuple[int, int] = (1, 1)
    #: the smallest relative change this metric could have detected (80% power), where judged
    detectable: float | None = None
    #: processes a side that would detect a change of the threshold's size (None: unknown or > 200)
    needed: int | None = None
    #: degrees of freedom of the interval (None: not judged; inf: every spread was given)
    df: float | None = None
    #: how each side's run-to-run spread was had: measured, prior, pooled, assumed, paired
    spread: tuple[str, str] | None = None
    #: too few samples per process for a verdict: shown, never judged
    advisory: bool = False


@dataclass
class Pending:
    """A row whose metrics need family-adjusted p-values before the verdict."""

    key: tuple[str, str, str]
    base: Any  # ResultRow
    head: Any
    a: list[np.ndarray]  # BASE's samples, one array per process
    b: list[np.ndarray]  # HEAD's
    floor: float | None
    prior: float | None = None  # the run-to-run spread given for this row
    fallback: float | None = None  # the plausible drift of its clock
    paired: bool = False  # both sides measured in the same processes
    #: the log of the process probe per process of each side (None: not timed on every process)
    probes: tuple[list[float], list[float]] | None = None
    #: conditions that make the row unreliable whatever its statistics: kind → why
    unreliable: dict[str, str] = field(default_factory=dict)
    #: the kinds of ``unreliable`` whose reason is the whole receipts', stated once in the notes
    noted: frozenset[str] = frozenset()
    metrics: list[dict[str, Any]] = field(default_factory=list)
    kw: dict[str, Any] = field(default_factory=dict)


def metric_names(metric: str) -> tuple[str, ...]:
    return ("p50", "p99") if metric == "both" else (metric,)


def _side_value(groups: Sequence[np.ndarray], q: float) -> float | None:
    """The side's value: the geometric mean of its processes' quantiles (the quantile with one)."""
    vals = [stats.quantile(np.sort(g), q) for g in groups if len(g)]
    if not vals or min(vals) <= 0:
        return stats.quantile(np.concatenate(groups), q) if vals else None
    return float(math.exp(np.mean(np.log(vals))))


def _no_spread(p: Pending) -> str:
    return ("one process a side and no run-to-run spread known (give one with drift): a change "
            "cannot be told from drift between processes")


def measure(p: Pending, opts: Any) -> None:
    """Each metric of one row: values, interval and p-value from the processes of both sides."""
    for m in metric_names(opts.metric):
        q = QUANT[m]
        qa, qb = _side_value(p.a, q), _side_value(p.b, q)
        d: dict[str, Any] = {"metric": m, "base_ns": qa, "head_ns": qb,
                             "ratio": qb / qa if qa and qb is not None else None, "ci": None,
                             "p_value": None, "reason": "", "processes": (len(p.a), len(p.b))}
        p.metrics.append(d)
        need = stats.MIN_PER_REPLICATE[q]
        fewest = min(len(g) for g in (*p.a, *p.b))
        if fewest < need:
            d["advisory"] = True
            d["reason"] = (f"{m} advisory: a verdict needs ≥ {need} samples per process (fewest here "
                           f"{fewest})")
            continue
        ra, rb = stats.replicates(p.a, q, opts.level), stats.replicates(p.b, q, opts.level)
        if ra is None or rb is None:
            d["reason"] = f"no interval: {m} is not positive on one side"
            continue
        _interval_of(d, p, ra, rb, opts)


def _interval_of(d: dict[str, Any], p: Pending, ra: stats.Replicates, rb: stats.Replicates,
                 opts: Any) -> None:
    alpha = opts.alpha / len(metric_names(opts.metric))
    got = stats.paired_log_ratio(ra, rb, opts.level) if p.paired else None
    if got is None and p.probes is not None:
        got = adjust.adjusted_log_ratio(ra, rb, *p.probes, level=opts.level)
    if got is not None and got.sources[0] == "adjusted":
        needed = adjust.adjusted_needed(got, ra.k, rb.k, opts.threshold, alpha, opts.power)
    else:
        got = got or stats.log_ratio(ra, rb, opts.level, p.prior, p.fallback)
        needed = stats.replications_needed(ra, rb, opts.threshold, alpha, p.prior, p.fallback, opts.power)
    if got is None:
        d["reason"] = _no_spread(p)
        return
    d.update(ratio=got.ratio, ci=got.ci, p_value=got.p, df=got.df, spread=got.sources,
             detectable=got.detectable(alpha, opts.power), needed=needed)


def _spread_text(d: dict[str, Any]) -> str:
    kb, kh = d["processes"]
    src = d.get("spread") or ("", "")
    text = f"{kb}/{kh} processes"
    if "assumed" in src:
        text += " (one process on a side: run-to-run spread assumed at the largest measured)"
    elif "prior" in src:
        text += " (run-to-run spread given)"
    elif "pooled" in src:
        text += " (one side's spread taken for both)"
    elif "paired" in src:
        text += ", paired"
    elif "adjusted" in src:
        text += ", adjusted for the process probe"
    return text


def metric_verdict(d: dict[str, Any], p_adj: float | None, alpha: float, floor: float | None,
                   opts: Any) -> MetricDiff:
    """Slower/faster: significant in its family and beyond the threshold; unchanged: CI in the band."""
    th = opts.threshold
    verdict, reason = "unresolved", d["reason"]
    ci = d["ci"]
    if ci is not None and p_adj is not None:
        lo, hi = ci
        df = d.get("df")
        span = (f"{d['metric']} ratio {d['ratio']:.3f}, {opts.level:.0%} CI [{lo:.3f}, {hi:.3f}] "
                f"({_spread_text(d)}, df {df:.3g}), Holm p={p_adj:.3g}")
        delta = d["head_ns"] - d["base_ns"]
        beyond = d["ratio"] >= 1 + th or d["ratio"] <= 1 - th
        if p_adj < alpha and beyond:
            if floor is None or stats.floor_resolvable(delta, floor, opts.floor_multiple):
                verdict, reason = ("slower" if d["ratio"] > 1 else "faster"), span
            else:
                reason = (f"{span}: the change {fmt_delta(delta)} is under {opts.floor_multiple:g}× "
                          f"the harness floor ({floor:.0f} ns)")
        elif 1 - th <= lo and hi <= 1 + th:
            verdict, reason = "unchanged", f"{span} within ±{th:.0%}"
        elif p_adj < alpha:
            reason = f"{span}: significant but not beyond ±{th:.0%}"
        else:
            reason = f"{span}: not significant at {alpha:g}, interval straddles ±{th:.0%}"
            reason += _resolve_text(d, th)
    return MetricDiff(metric=d["metric"], base_ns=d["base_ns"], head_ns=d["head_ns"], ratio=d["ratio"],
                      ci=tuple(ci) if ci else None, p_value=d["p_value"], p_holm=p_adj,
                      verdict=verdict, reason=reason, processes=d["processes"],
                      detectable=d.get("detectable"), needed=d.get("needed"), df=d.get("df"),
                      spread=d.get("spread"), advisory=bool(d.get("advisory")))


def _resolve_text(d: dict[str, Any], th: float) -> str:
    det, need = d.get("detectable"), d.get("needed")
    if det is None or det <= th:
        return ""
    more = f"{need} processes a side would resolve ±{th:.0%}" if need else \
        f"more than {stats.MOST_REPLICATES} processes a side would be needed for ±{th:.0%}"
    return f"; it could detect {det:+.1%} or more: {more}"


def fmt_delta(ns: float) -> str:
    """A signed duration in the most readable unit."""
    return duration_text(ns, digits=(1, 1), signed=True)


def combine(metrics: list[MetricDiff]) -> tuple[str, str]:
    """A row's verdict from its judged metrics' (slower wins; faster only with nothing unresolved);
    advisory metrics are shown and never decide."""
    vs = [m.verdict for m in metrics if not m.advisory] or ["unresolved"]
    if "slower" in vs:
        verdict = "slower"
    elif "faster" in vs:
        verdict = "faster" if all(v in ("faster", "unchanged") for v in vs) else "unresolved"
    elif all(v == "unchanged" for v in vs):
        verdict = "unchanged"
    else:
        verdict = "unresolved"
    return verdict, "; ".join(m.reason for m in metrics if m.reason)


def judge(pending: Sequence[Pending], opts: Any) -> list[tuple[str, str, list[MetricDiff]]]:
    """Holm within each metric's family, then each row's verdict (same order as ``pending``).

    With two metrics each family gets half of alpha (Bonferroni between the families). Rows held
    unreliable by a condition are measured and shown, never judged, and stay out of the families.
    """
    names = metric_names(opts.metric)
    alpha = opts.alpha / len(names)
    padj: dict[tuple[int, int], float] = {}
    for m in names:
        flat = [(i, j) for i, p in enumerate(pending) for j, d in enumerate(p.metrics)
                if d["metric"] == m and d["p_value"] is not None and not p.unreliable]
        adjusted = stats.holm([pending[i].metrics[j]["p_value"] for i, j in flat])
        padj.update(zip(flat, adjusted))
    out = []
    for i, p in enumerate(pending):
        ms = [metric_verdict(d, padj.get((i, j)), alpha, p.floor, opts) for j, d in enumerate(p.metrics)]
        out.append((*combine(ms), ms))
    return out
