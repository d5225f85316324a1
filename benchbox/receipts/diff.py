"""Diff two receipts: match (task, case, runner) rows and give each a verdict CI can act on.

This module never imports torch or tensorrt: it reads receipts and does statistics.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchbox import stats
from benchbox.errors import FieldError, UsageError
from benchbox.receipts.model import ContractRecord, Receipt, ResultRow

VERDICTS = ("slower", "faster", "unchanged", "unresolved", "invalid", "new", "removed", "not comparable")
#: Kinds of difference that make a row not comparable unless accepted with ``--accept``.
ACCEPT_KINDS = ("device", "model", "options", "fallbacks", "incomplete")
METRICS = ("p50", "p99", "both")
QUANT = {"p50": 0.5, "p99": 0.99}
#: A median difference under this multiple of the harness floor is unresolved.
FLOOR_MULTIPLE = float(stats.FLOOR_MULTIPLE)
#: Stages named in an explanation at most.
EXPLAIN_STAGES = 3


class ComparisonRefused(UsageError):
    """The two receipts cannot be compared at all (exit 2)."""


@dataclass(frozen=True)
class DiffOptions:
    """How to judge a difference."""

    threshold: float = 0.05
    metric: str = "p50"
    alpha: float = 0.05
    level: float = 0.95
    accept: frozenset[str] = frozenset()
    floor_multiple: float = FLOOR_MULTIPLE
    n_resamples: int = stats.RATIO_CI_RESAMPLES
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise FieldError("threshold", f"must be between 0% and 100%, got {self.threshold:.4g}")
        if self.metric not in METRICS:
            raise FieldError("metric", f"must be one of {', '.join(METRICS)}, got {self.metric!r}")
        if not 0.0 < self.alpha < 1.0:
            raise FieldError("alpha", f"must be between 0 and 1, got {self.alpha}")
        if not 0.5 <= self.level < 1.0:
            raise FieldError("level", f"must be in [0.5, 1), got {self.level}")
        bad = sorted(set(self.accept) - set(ACCEPT_KINDS))
        if bad:
            raise FieldError("accept", f"{bad[0]!r} is not one of {', '.join(ACCEPT_KINDS)}")
        if self.n_resamples < 100:
            raise FieldError("n_resamples", f"must be at least 100, got {self.n_resamples}")


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


@dataclass(frozen=True)
class DiffRow:
    """One (task, case, runner) row of a diff."""

    task: str
    case: str
    runner: str
    verdict: str
    reason: str = ""
    metrics: tuple[MetricDiff, ...] = ()
    base_status: str | None = None
    head_status: str | None = None
    newly_invalid: bool = False
    explanation: tuple[tuple[str, float], ...] = ()
    fallbacks_added: tuple[str, ...] = ()
    fallbacks_removed: tuple[str, ...] = ()
    accepted: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str, str]:
        return self.task, self.case, self.runner

    @property
    def regression(self) -> bool:
        """Whether this row fails the diff (exit 1)."""
        return self.verdict == "slower" or self.newly_invalid

    def explain(self) -> str:
        """The stages whose medians moved most, e.g. "serialize +20.1 ms, d2h +0.4 ms"."""
        return ", ".join(f"{s} {fmt_delta(d)}" for s, d in self.explanation)


@dataclass(frozen=True)
class DiffResult:
    """A whole diff: what was compared, how, and one row per (task, case, runner)."""

    base: str
    head: str
    contract: dict[str, Any]
    options: DiffOptions
    rows: tuple[DiffRow, ...]
    notes: tuple[str, ...] = ()
    floor_ns: float | None = None

    @property
    def exit_code(self) -> int:
        """0 no regression, 1 at least one slower or newly invalid row."""
        return 1 if any(r.regression for r in self.rows) else 0

    def counts(self) -> dict[str, int]:
        out = {v: 0 for v in VERDICTS}
        for r in self.rows:
            out[r.verdict] += 1
        return {k: v for k, v in out.items() if v}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``benchbox diff --format json``)."""
        opts = asdict(self.options)
        opts["accept"] = sorted(self.options.accept)
        rows = []
        for r in self.rows:
            d = asdict(r)
            d["explanation"] = [{"stage": s, "delta_ns": dl} for s, dl in r.explanation]
            d["explain"] = r.explain()
            d["regression"] = r.regression
            d["fallbacks_added"] = list(r.fallbacks_added)
            d["fallbacks_removed"] = list(r.fallbacks_removed)
            d["accepted"] = list(r.accepted)
            d["metrics"] = [{**asdict(m), "ci": list(m.ci) if m.ci else None} for m in r.metrics]
            rows.append(d)
        return {"base": self.base, "head": self.head, "contract": self.contract, "options": opts,
                "floor_ns": self.floor_ns, "notes": list(self.notes), "counts": self.counts(),
                "exit_code": self.exit_code, "rows": rows}


def fmt_delta(ns: float) -> str:
    """A signed duration in the most readable unit."""
    a = abs(ns)
    if a >= 1e6:
        return f"{ns / 1e6:+.1f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:+.1f} µs"
    return f"{ns:+.0f} ns"


# -- refusals and comparability ------------------------------------------------------

def _contract_label(c: ContractRecord) -> str:
    return f"{c.name} v{c.version} ({c.first}..{c.last}, {c.clock} clock, hash {c.hash[:12]})"


def check_contracts(base: Receipt, head: Receipt) -> None:
    """Refuse (ComparisonRefused) when the two receipts were measured under different contracts."""
    cb, ch = base.contract, head.contract
    if cb.hash == ch.hash:
        return
    sb, sh = list(cb.stages), list(ch.stages)
    parts = []
    only_b = [s for s in sb if s not in sh]
    only_h = [s for s in sh if s not in sb]
    if only_b:
        parts.append(f"only BASE times {', '.join(only_b)}")
    if only_h:
        parts.append(f"only HEAD times {', '.join(only_h)}")
    if not parts:
        parts.append(f"both time {sb[0]}..{sb[-1]}" if sb else "same stages")
    ab, ah = (c.arrival.label() if c.arrival is not None else "back to back" for c in (cb, ch))
    if ab != ah:
        parts.append(f"calls arrived {ab} in BASE and {ah} in HEAD")
    db, dh = cb.to_json(), ch.to_json()
    other = sorted(k for k in set(db) | set(dh)
                   if k not in ("hash", "stages", "first", "last", "description", "source")
                   and db.get(k) != dh.get(k))
    if other:
        parts.append(f"they also differ in {', '.join(other)}")
    raise ComparisonRefused(
        f"refusing to diff: BASE was measured under contract {_contract_label(cb)} and HEAD "
        f"under {_contract_label(ch)}; {'; '.join(parts)}. Results under different contracts "
        "do not measure the same thing")


def _model_facts(r: Receipt) -> dict[str, Any]:
    return {"size": r.task.size, "dtype": r.task.dtype, "model_sha256": r.task.model_sha256}


def _requests(r: Receipt) -> dict[str, str]:
    return {c.name: c.request_sha256 for c in r.task.cases}


def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), default=str)


def _fallback_changes(b: ResultRow, h: ResultRow) -> tuple[tuple[str, ...], tuple[str, ...]]:
    fb = [_canon(x.to_json()) for x in b.fallbacks]
    fh = [_canon(x.to_json()) for x in h.fallbacks]
    return tuple(x for x in fh if x not in fb), tuple(x for x in fb if x not in fh)


def _dict_changes(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = sorted(set(a) | set(b))
    return ", ".join(f"{k} {_canon(a.get(k))} → {_canon(b.get(k))}" for k in keys
                     if _canon(a.get(k)) != _canon(b.get(k)))


def _incomparable(kinds: dict[str, str], accept: frozenset[str]) -> tuple[list[str], list[str]]:
    """Split (kind → reason) into refused reasons and accepted ones."""
    refused = [f"{k}: {why}" for k, why in kinds.items() if k not in accept]
    accepted = [f"{k}: {why}" for k, why in kinds.items() if k in accept]
    return refused, accepted


# -- floors -----------------------------------------------------------------------

def _floor(receipt: Receipt, clock_used: str) -> float | None:
    """The harness floor recorded in the receipt's calibration for this clock, if any."""
    v = receipt.floor(clock_used)
    return float(v) if v is not None else None


def _resolvable(delta: float, floor: float | None, multiple: float) -> bool:
    """The same rule as the run's comparisons: no floor recorded means unresolvable."""
    return bool(stats.floor_resolvable(delta, floor, multiple))


# -- the statistics of one row ----------------------------------------------------------

@dataclass
class _Pending:
    """A row whose metrics need Holm-adjusted p-values before the verdict."""

    key: tuple[str, str, str]
    base: ResultRow
    head: ResultRow
    a: np.ndarray  # sorted
    b: np.ndarray  # sorted
    floor: float | None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    kw: dict[str, Any] = field(default_factory=dict)


def _measure(p: _Pending, opts: DiffOptions) -> None:
    names = ("p50", "p99") if opts.metric == "both" else (opts.metric,)
    for m in names:
        q = QUANT[m]
        qa = stats._quantile_sorted(p.a, q) if len(p.a) else None
        qb = stats._quantile_sorted(p.b, q) if len(p.b) else None
        ratio = qb / qa if qa and qb is not None else None
        d: dict[str, Any] = {"metric": m, "base_ns": qa, "head_ns": qb, "ratio": ratio,
                             "ci": None, "p_value": None, "reason": ""}
        if m == "p99":
            need = stats.min_n_for_ci(q, opts.level)
            if min(len(p.a), len(p.b)) < need:
                d["reason"] = (f"p99 needs ≥ {need} samples per side for a two-sided "
                               f"{opts.level:.0%} interval (have {len(p.a)}/{len(p.b)})")
                p.metrics.append(d)
                continue
            d["p_value"] = stats.tail_test(p.a, p.b, q)[0]
        else:
            d["p_value"] = stats.brunner_munzel(p.a, p.b)
        d["ci"] = stats.ratio_ci(p.a, p.b, q, opts.level, n_resamples=opts.n_resamples, seed=opts.seed)
        if d["ci"] is None:
            d["reason"] = (f"too few samples for a ratio interval (need ≥ {stats.RATIO_CI_MIN_N} "
                           f"per side, have {len(p.a)}/{len(p.b)})")
        p.metrics.append(d)


def _metric_verdict(d: dict[str, Any], p_holm: float | None, floor: float | None,
                    opts: DiffOptions) -> MetricDiff:
    th = opts.threshold
    verdict, reason = "unresolved", d["reason"]
    ci = d["ci"]
    if ci is not None and p_holm is not None:
        lo, hi = ci
        span = f"{d['metric']} ratio {d['ratio']:.3f}, {opts.level:.0%} CI [{lo:.3f}, {hi:.3f}]"
        delta = d["head_ns"] - d["base_ns"]
        if lo > 1 + th or hi < 1 - th:
            direction = "slower" if lo > 1 + th else "faster"
            if p_holm >= opts.alpha:
                reason = (f"{span} beyond ±{th:.0%} but the test does not reject after Holm "
                          f"(p={p_holm:.3g} ≥ {opts.alpha})")
            elif not _resolvable(delta, floor, opts.floor_multiple):
                reason = (f"{span}: the change {fmt_delta(delta)} is under {opts.floor_multiple:g}× "
                          f"the harness floor ({floor:.0f} ns)")
            else:
                verdict, reason = direction, f"{span}, Holm p={p_holm:.3g}"
        elif 1 - th <= lo and hi <= 1 + th:
            verdict, reason = "unchanged", f"{span} within ±{th:.0%}"
        else:
            reason = f"{span} straddles ±{th:.0%}"
    return MetricDiff(metric=d["metric"], base_ns=d["base_ns"], head_ns=d["head_ns"], ratio=d["ratio"],
                      ci=tuple(ci) if ci else None, p_value=d["p_value"], p_holm=p_holm,
                      verdict=verdict, reason=reason)


def _combine(metrics: list[MetricDiff]) -> tuple[str, str]:
    vs = [m.verdict for m in metrics]
    if "slower" in vs:
        verdict = "slower"
    elif "faster" in vs:
        verdict = "faster" if all(v in ("faster", "unchanged") for v in vs) else "unresolved"
    elif all(v == "unchanged" for v in vs):
        verdict = "unchanged"
    else:
        verdict = "unresolved"
    return verdict, "; ".join(m.reason for m in metrics if m.reason)


def _explain(base: ResultRow, head: ResultRow, floor: float | None) -> tuple[tuple[str, float], ...]:
    """The stages whose medians moved most, largest first."""
    sb, sh = base.stages_ns, head.stages_ns
    moves = []
    for s in sb:
        if s in sh and sb[s] and sh[s]:
            moves.append((s, float(np.median(sh[s])) - float(np.median(sb[s]))))
    if not moves:
        return ()
    moves.sort(key=lambda x: -abs(x[1]))
    top = abs(moves[0][1])
    keep = [m for m in moves if abs(m[1]) >= 0.05 * top and (floor is None or abs(m[1]) >= floor)]
    return tuple((s, round(d, 1)) for s, d in (keep or moves[:1])[:EXPLAIN_STAGES])


# -- the diff ---------------------------------------------------------------------------

def _index(r: Receipt, where: str) -> dict[tuple[str, str, str], ResultRow]:
    task = r.task.name
    out: dict[tuple[str, str, str], ResultRow] = {}
    for row in r.results:
        key = (task, row.case, row.runner)
        if key in out:
            raise UsageError(f"{where}: two results for runner {key[2]!r}, case {key[1]!r}")
        out[key] = row
    return out


def diff_receipts(base: Receipt, head: Receipt, options: DiffOptions | None = None,
                  base_name: str = "BASE", head_name: str = "HEAD") -> DiffResult:
    """Compare two loaded receipts; raise ComparisonRefused for different contracts."""
    opts = options or DiffOptions()
    check_contracts(base, head)
    if "incomplete" not in opts.accept:
        for name, r in ((base_name, base), (head_name, head)):
            if not r.is_complete:
                why = r.interrupt_reason or "the run did not finish"
                raise ComparisonRefused(f"{name} is an incomplete receipt ({why}): rows it lacks would "
                                        "read as removed; rerun it, or pass --accept incomplete")
    ib, ih = _index(base, base_name), _index(head, head_name)
    notes: list[str] = []

    run_kinds: dict[str, str] = {}
    if base.device != head.device:
        run_kinds["device"] = f"{base.device} → {head.device}"
    mb, mh = _model_facts(base), _model_facts(head)
    if mb != mh:
        run_kinds["model"] = _dict_changes(mb, mh)
    for k, why in run_kinds.items():
        notes.append(f"{'accepted' if k in opts.accept else 'not comparable'}: {k} differs ({why})")
    rq_b, rq_h = _requests(base), _requests(head)

    rows: dict[tuple[str, str, str], DiffRow] = {}
    pending: list[_Pending] = []
    floors: list[float] = []
    for key in [*ib, *(k for k in ih if k not in ib)]:
        task, case, runner = key
        b, h = ib.get(key), ih.get(key)
        if b is None or h is None:
            one = h if b is None else b
            verdict = "new" if b is None else "removed"
            newly_invalid = b is None and one.status != "valid"
            rows[key] = DiffRow(task, case, runner, verdict,
                                reason=f"only in {head_name if b is None else base_name}"
                                + (f" ({one.status})" if one.status != "valid" else ""),
                                base_status=None if b is None else b.status,
                                head_status=None if h is None else h.status,
                                newly_invalid=newly_invalid)
            continue
        added, removed = _fallback_changes(b, h)
        common = dict(base_status=b.status, head_status=h.status,
                      fallbacks_added=added, fallbacks_removed=removed)
        if not (b.usable and h.usable):
            bad = [f"{n} {r.status}" + (f": {'; '.join(r.reasons)}" if r.reasons else "")
                   for n, r in ((base_name, b), (head_name, h)) if not r.usable]
            rows[key] = DiffRow(task, case, runner, "invalid", reason="; ".join(bad),
                                newly_invalid=b.usable and not h.usable, **common)
            continue
        kinds = dict(run_kinds)
        if rq_b.get(case) != rq_h.get(case):
            kinds["model"] = "; ".join(x for x in (kinds.get("model"), f"request of case {case} differs")
                                       if x)
        ob, oh = b.options, h.options
        if _canon(ob) != _canon(oh):
            kinds["options"] = _dict_changes(ob, oh)
        if added or removed:
            kinds["fallbacks"] = f"+{len(added)} −{len(removed)} fallback entries"
        refused, accepted = _incomparable(kinds, opts.accept)
        if refused:
            rows[key] = DiffRow(task, case, runner, "not comparable",
                                reason="; ".join(refused) + " (pass --accept "
                                + " --accept ".join(k for k in kinds if k not in opts.accept)
                                + " to compare anyway)", accepted=tuple(accepted), **common)
            continue
        fl = [f for f in (_floor(base, b.clock), _floor(head, h.clock)) if f is not None]
        floor = max(fl) if fl else None
        if floor is not None:
            floors.append(floor)
        p = _Pending(key, b, h, np.sort(np.asarray(b.samples_ns, dtype=np.float64)),
                     np.sort(np.asarray(h.samples_ns, dtype=np.float64)), floor,
                     kw=dict(accepted=tuple(accepted), **common))
        _measure(p, opts)
        pending.append(p)

    # Holm across every (row, metric) test that was made: the pass/fail decision is one family.
    flat = [(i, j) for i, p in enumerate(pending) for j, d in enumerate(p.metrics)
            if d["p_value"] is not None]
    adjusted = stats.holm([pending[i].metrics[j]["p_value"] for i, j in flat])
    padj = {ij: v for ij, v in zip(flat, adjusted)}
    for i, p in enumerate(pending):
        ms = [_metric_verdict(d, padj.get((i, j)), p.floor, opts) for j, d in enumerate(p.metrics)]
        verdict, reason = _combine(ms)
        expl = _explain(p.base, p.head, p.floor) if verdict in ("slower", "faster") else ()
        rows[p.key] = DiffRow(*p.key, verdict=verdict, reason=reason, metrics=tuple(ms),
                              explanation=expl, **p.kw)

    if not floors:
        notes.append("no harness floor recorded in either receipt: differences were not held "
                     "against a floor")
    ordered = tuple(rows[k] for k in [*ib, *(k for k in ih if k not in ib)])
    return DiffResult(base=base_name, head=head_name,
                      contract={k: getattr(base.contract, k) for k in ("name", "version", "first", "last",
                                                                          "clock", "hash")},
                      options=opts, rows=ordered, notes=tuple(notes),
                      floor_ns=max(floors) if floors else None)


def diff_files(base: str | Path, head: str | Path, options: DiffOptions | None = None) -> DiffResult:
    """Load two receipts (through benchbox.receipts.load_receipt) and diff them."""
    from benchbox.receipts import load_receipt

    return diff_receipts(load_receipt(base), load_receipt(head), options, str(base), str(head))


def accept_kinds(values: Iterable[str]) -> frozenset[str]:
    """Parse repeated/comma-separated ``--accept`` values."""
    out = {v.strip() for item in values for v in item.split(",") if v.strip()}
    bad = sorted(out - set(ACCEPT_KINDS))
    if bad:
        raise FieldError("accept", f"{bad[0]!r} is not one of {', '.join(ACCEPT_KINDS)}")
    return frozenset(out)
