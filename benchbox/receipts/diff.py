"""The comparison engine: match (task, case, runner) rows and give each a verdict CI can act on.

One engine and one vocabulary for ``benchbox diff``, the diff figure, the history site and
the run's runner-vs-baseline comparisons (:func:`compare_runners`).

- **Rounds.** The ratio of quantiles gets a hierarchical-bootstrap interval (rounds, then
  samples within rounds; seeded) and a p-value from it, so drift between rounds widens
  the interval instead of manufacturing significance. With one round on either side the
  run-to-run variance is unknown: a change must then also exceed ``single_round_effect``.
- **Families.** Holm within the p50 family and within the p99 family; with ``--metric
  both`` each family gets half of ``alpha``, so the family-wise rate over all rows and
  both metrics stays at most ``alpha`` while p99 keeps its power.
- **Conditions.** Rows flagged noisy or unsettled on either side, and environments that
  differ in what moves timings, are ``unreliable`` (never ``slower``) unless accepted.
- **Declarations.** A different contract refuses the diff; a different model, request,
  device class or runner options makes a row ``not comparable`` unless accepted.
  Compiler choices (autotune picks, graph breaks, ATen fallbacks) never do: they are
  listed as probable causes.

This module never imports torch or tensorrt: it reads receipts and does statistics.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchbox import stats
from benchbox.errors import FieldError, UsageError
from benchbox.fallbacks import draw_causes, identity, probable_causes
from benchbox.receipts.conditions import CONDITION_KINDS, environment_differences, row_conditions
from benchbox.receipts.model import ContractRecord, Receipt, ResultRow

VERDICTS = ("slower", "faster", "unchanged", "unresolved", "unreliable", "invalid", "new", "removed",
            "not comparable")
#: Kinds of declared difference that make a row not comparable unless accepted with ``--accept``.
DECLARED_KINDS = ("device", "model", "options", "incomplete")
#: Every kind ``--accept`` takes: declared differences, then conditions. ``fallbacks`` is kept
#: for old command lines and has no effect (compiler choices never block a comparison).
ACCEPT_KINDS = (*DECLARED_KINDS, *CONDITION_KINDS, "fallbacks")
#: With one round on either side, a change must exceed this ratio too (run-to-run variance unknown).
SINGLE_ROUND_EFFECT = 0.25
#: Runner options that do not change what is measured (where a cache lives).
IGNORED_OPTIONS = ("cache_dir",)
#: Probable causes listed per row at most.
CAUSE_LINES = 6
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
    n_resamples: int = stats.HIER_RESAMPLES
    seed: int = 0
    #: with one round on either side, the smallest relative change that may count
    single_round_effect: float = SINGLE_ROUND_EFFECT

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
    #: rounds per side the interval resampled
    rounds: tuple[int, int] = (1, 1)


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
    #: what the compiler decided differently ("bmm → triton_mm at 3 sites"), compact
    causes: tuple[str, ...] = ()
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
        """1 at least one slower or newly invalid row; else 3 when a row is unreliable; else 0."""
        if any(r.regression for r in self.rows):
            return 1
        return 3 if any(r.verdict == "unreliable" for r in self.rows) else 0

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
            d["causes"] = list(r.causes)
            d["accepted"] = list(r.accepted)
            d["metrics"] = [{**asdict(m), "ci": list(m.ci) if m.ci else None, "rounds": list(m.rounds)}
                            for m in r.metrics]
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


def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), default=str)


def compiler_causes(b: ResultRow, h: ResultRow, limit: int = CAUSE_LINES) -> tuple[str, ...]:
    """What the compiler decided differently, by identity (measured values ignored), compact."""
    fb = [x.to_json() for x in b.fallbacks]
    fh = [x.to_json() for x in h.fallbacks]
    drawn = tuple(draw_causes(b.runner_report.extra.get("compile"), h.runner_report.extra.get("compile")))
    if sorted(map(identity, fb)) == sorted(map(identity, fh)):
        return drawn
    return drawn + (tuple(probable_causes(fb, fh, limit - len(drawn))) or ("compiler choices differ",))


def declared_options(row: ResultRow) -> dict[str, Any]:
    """The runner options that decide what is measured (cache locations left out)."""
    return {k: v for k, v in row.options.items() if k not in IGNORED_OPTIONS}


def _dict_changes(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = sorted(set(a) | set(b))
    return ", ".join(f"{k} {_canon(a.get(k))} → {_canon(b.get(k))}" for k in keys
                     if _canon(a.get(k)) != _canon(b.get(k)))


# -- floors -----------------------------------------------------------------------

def _floor(receipt: Receipt, clock_used: str) -> float | None:
    """The harness floor recorded in the receipt's calibration for this clock, if any."""
    v = receipt.floor(clock_used)
    return float(v) if v is not None else None


def _resolvable(delta: float, floor: float | None, multiple: float) -> bool:
    """A change is held against the floor when one was measured (no floor: a note says so)."""
    return floor is None or bool(stats.floor_resolvable(delta, floor, multiple))


def row_rounds(receipt: Receipt, row: ResultRow) -> list[np.ndarray]:
    """The row's independent rounds: its ``round_sizes`` when the run took ``--repeats`` ≥ 2
    (interleaved sub-rounds of a single pass are not independent), else one round."""
    x = np.asarray(row.samples_ns, dtype=np.float64)
    repeats = (receipt.settings or {}).get("repeats", 1)
    if isinstance(repeats, int) and repeats > 1 and len(row.round_sizes) > 1:
        return [np.asarray(r, dtype=np.float64) for r in row.rounds() if len(r)]
    return [x]


# -- the statistics of one row ----------------------------------------------------------

@dataclass
class Pending:
    """A row whose metrics need family-adjusted p-values before the verdict."""

    key: tuple[str, str, str]
    base: ResultRow
    head: ResultRow
    a: list[np.ndarray]  # rounds of BASE
    b: list[np.ndarray]  # rounds of HEAD
    floor: float | None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    kw: dict[str, Any] = field(default_factory=dict)


def metric_names(opts: DiffOptions) -> tuple[str, ...]:
    return ("p50", "p99") if opts.metric == "both" else (opts.metric,)


def measure(p: Pending, opts: DiffOptions) -> None:
    """Ratio, hierarchical-bootstrap interval and p-value of each metric of one row."""
    na, nb = sum(map(len, p.a)), sum(map(len, p.b))
    for m in metric_names(opts):
        q = QUANT[m]
        qa = stats.quantile(np.concatenate(p.a), q) if na else None
        qb = stats.quantile(np.concatenate(p.b), q) if nb else None
        d: dict[str, Any] = {"metric": m, "base_ns": qa, "head_ns": qb,
                             "ratio": qb / qa if qa and qb is not None else None, "ci": None,
                             "p_value": None, "reason": "", "rounds": (len(p.a), len(p.b))}
        p.metrics.append(d)
        need = stats.min_n_for_ci(q, opts.level) if m == "p99" else stats.RATIO_CI_MIN_N
        if min(na, nb) < need:
            d["reason"] = (f"{m} needs ≥ {need} samples per side for a two-sided {opts.level:.0%} "
                           f"interval (have {na}/{nb})")
            continue
        got = stats.rounds_ratio(p.a, p.b, q, opts.level, n_resamples=opts.n_resamples,
                                  seed=opts.seed)
        if got is None:
            d["reason"] = f"no ratio interval: {m} is not positive on one side"
            continue
        d["ratio"], d["ci"], d["p_value"] = got


def _effect(d: dict[str, Any], opts: DiffOptions) -> tuple[float, str]:
    """The smallest change that may count, and what the rounds say about it."""
    ra, rb = d["rounds"]
    if min(ra, rb) < 2:
        eff = max(opts.threshold, opts.single_round_effect)
        return eff, (f"one round on {'both sides' if max(ra, rb) < 2 else 'one side'}: run-to-run "
                     f"variance unknown, so a change must exceed ±{eff:.0%}")
    return opts.threshold, f"{ra}/{rb} rounds"


def metric_verdict(d: dict[str, Any], p_adj: float | None, alpha: float, floor: float | None,
                   opts: DiffOptions) -> MetricDiff:
    """Slower/faster: significant in its family and beyond the effect; unchanged: CI in the band."""
    th = opts.threshold
    verdict, reason = "unresolved", d["reason"]
    ci = d["ci"]
    if ci is not None and p_adj is not None:
        lo, hi = ci
        eff, rounds = _effect(d, opts)
        span = (f"{d['metric']} ratio {d['ratio']:.3f}, {opts.level:.0%} CI [{lo:.3f}, {hi:.3f}] "
                f"({rounds}), Holm p={p_adj:.3g}")
        delta = d["head_ns"] - d["base_ns"]
        beyond = d["ratio"] >= 1 + eff or d["ratio"] <= 1 - eff
        if p_adj < alpha and beyond:
            if _resolvable(delta, floor, opts.floor_multiple):
                verdict, reason = ("slower" if d["ratio"] > 1 else "faster"), span
            else:
                reason = (f"{span}: the change {fmt_delta(delta)} is under {opts.floor_multiple:g}× "
                          f"the harness floor ({floor:.0f} ns)")
        elif 1 - th <= lo and hi <= 1 + th:
            verdict, reason = "unchanged", f"{span} within ±{th:.0%}"
        elif p_adj < alpha:
            reason = f"{span}: significant but not beyond ±{eff:.0%}"
        else:
            reason = f"{span}: not significant at {alpha:g}, interval straddles ±{th:.0%}"
    return MetricDiff(metric=d["metric"], base_ns=d["base_ns"], head_ns=d["head_ns"], ratio=d["ratio"],
                      ci=tuple(ci) if ci else None, p_value=d["p_value"], p_holm=p_adj,
                      verdict=verdict, reason=reason, rounds=d["rounds"])


def combine(metrics: list[MetricDiff]) -> tuple[str, str]:
    """A row's verdict from its metrics' (slower wins; faster only with nothing unresolved)."""
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


def judge(pending: Sequence[Pending], opts: DiffOptions) -> list[tuple[str, str, list[MetricDiff]]]:
    """Holm within each metric's family, then each row's verdict (same order as ``pending``).

    With two metrics each family gets half of alpha (Bonferroni between the families).
    """
    names = metric_names(opts)
    alpha = opts.alpha / len(names)
    padj: dict[tuple[int, int], float] = {}
    for m in names:
        flat = [(i, j) for i, p in enumerate(pending) for j, d in enumerate(p.metrics)
                if d["metric"] == m and d["p_value"] is not None]
        adjusted = stats.holm([pending[i].metrics[j]["p_value"] for i, j in flat])
        padj.update(zip(flat, adjusted))
    out = []
    for i, p in enumerate(pending):
        ms = [metric_verdict(d, padj.get((i, j)), alpha, p.floor, opts) for j, d in enumerate(p.metrics)]
        out.append((*combine(ms), ms))
    return out


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


def _one_sided(key: tuple[str, str, str], b: ResultRow | None, h: ResultRow | None, base_name: str,
               head_name: str) -> DiffRow:
    one = h if b is None else b
    assert one is not None
    return DiffRow(*key, "new" if b is None else "removed",
                   reason=f"only in {head_name if b is None else base_name}"
                   + (f" ({one.status})" if one.status != "valid" else ""),
                   base_status=None if b is None else b.status, head_status=None if h is None else h.status,
                   newly_invalid=b is None and one.status != "valid")


def _refusal(key: tuple[str, str, str], verdict: str, kinds: dict[str, str], accepted: list[str],
             opts: DiffOptions, common: dict[str, Any]) -> DiffRow:
    refused = [k for k in kinds if k not in opts.accept]
    return DiffRow(*key, verdict, reason="; ".join(f"{k}: {kinds[k]}" for k in refused)
                   + " (pass " + " ".join(f"accept={k}" for k in refused) + " to compare anyway)",
                   accepted=tuple(accepted), **common)


def _request(r: Receipt, row: ResultRow) -> str | None:
    return row.request_sha256 or {c.name: c.request_sha256 for c in r.task.cases}.get(row.case)


@dataclass
class _Sides:
    """What both receipts say once, for every row."""

    base: Receipt
    head: Receipt
    base_name: str
    head_name: str
    opts: DiffOptions
    declared: dict[str, str]
    conditions: dict[str, str]


def _row(s: _Sides, key: tuple[str, str, str], b: ResultRow, h: ResultRow) -> DiffRow | Pending:
    """A row's verdict when it needs no statistics, else a Pending row to measure."""
    opts = s.opts
    causes = compiler_causes(b, h)
    common: dict[str, Any] = dict(base_status=b.status, head_status=h.status, causes=causes)
    if not (b.usable and h.usable):
        bad = [f"{n} {r.status}" + (f": {'; '.join(r.reasons)}" if r.reasons else "")
               for n, r in ((s.base_name, b), (s.head_name, h)) if not r.usable]
        return DiffRow(*key, "invalid", reason="; ".join(bad), newly_invalid=b.usable and not h.usable,
                       **common)
    declared = dict(s.declared)
    if _request(s.base, b) != _request(s.head, h):
        declared["model"] = "; ".join(x for x in (declared.get("model"), f"request of case {key[1]} differs")
                                      if x)
    ob, oh = declared_options(b), declared_options(h)
    if _canon(ob) != _canon(oh):
        declared["options"] = _dict_changes(ob, oh)
    conditions = {**s.conditions, **row_conditions(b, h, s.base_name, s.head_name)}
    accepted = [f"{k}: {why}" for k, why in {**declared, **conditions}.items() if k in opts.accept]
    if any(k not in opts.accept for k in declared):
        return _refusal(key, "not comparable", declared, accepted, opts, common)
    if any(k not in opts.accept for k in conditions):
        return _refusal(key, "unreliable", conditions, accepted, opts, common)
    fl = [f for f in (_floor(s.base, b.clock), _floor(s.head, h.clock)) if f is not None]
    return Pending(key, b, h, row_rounds(s.base, b), row_rounds(s.head, h), max(fl) if fl else None,
                   kw=dict(accepted=tuple(accepted), **common))


def _run_differences(base: Receipt, head: Receipt, opts: DiffOptions) -> tuple[dict[str, str], list[str]]:
    declared: dict[str, str] = {}
    if base.device != head.device:
        declared["device"] = f"{base.device} → {head.device}"
    mb, mh = _model_facts(base), _model_facts(head)
    if mb != mh:
        declared["model"] = _dict_changes(mb, mh)
    notes = [f"{'accepted' if k in opts.accept else 'not comparable'}: {k} differs ({why})"
             for k, why in declared.items()]
    return declared, notes


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
                                        "read as removed; rerun it, or pass accept=incomplete")
    ib, ih = _index(base, base_name), _index(head, head_name)
    declared, notes = _run_differences(base, head, opts)
    conditions = environment_differences(base, head)
    notes += [f"{'accepted' if k in opts.accept else 'unreliable'}: {k} differs ({why})"
              for k, why in conditions.items()]
    sides = _Sides(base, head, base_name, head_name, opts, declared, conditions)
    keys = [*ib, *(k for k in ih if k not in ib)]
    rows: dict[tuple[str, str, str], DiffRow] = {}
    pending: list[Pending] = []
    for key in keys:
        b, h = ib.get(key), ih.get(key)
        one_sided = b is None or h is None
        got = _one_sided(key, b, h, base_name, head_name) if one_sided else _row(sides, key, b, h)
        if isinstance(got, Pending):
            measure(got, opts)
            pending.append(got)
        else:
            rows[key] = got
    rows.update(_judged(pending, opts))
    floors = [p.floor for p in pending if p.floor is not None]
    if pending and not floors:
        notes.append("no harness floor recorded in either receipt (calibration failed or was not run): "
                     "differences were not held against a floor")
    return DiffResult(base=base_name, head=head_name,
                      contract={k: getattr(base.contract, k) for k in ("name", "version", "first", "last",
                                                                          "clock", "hash")},
                      options=opts, rows=tuple(rows[k] for k in keys), notes=tuple(notes),
                      floor_ns=max(floors) if floors else None)


def _judged(pending: Sequence[Pending], opts: DiffOptions) -> dict[tuple[str, str, str], DiffRow]:
    out = {}
    for p, (verdict, reason, ms) in zip(pending, judge(pending, opts)):
        expl = _explain(p.base, p.head, p.floor) if verdict in ("slower", "faster") else ()
        out[p.key] = DiffRow(*p.key, verdict=verdict, reason=reason, metrics=tuple(ms), explanation=expl,
                             **p.kw)
    return out


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


# -- the runners of one run against its baseline runner ---------------------------------------

def _comparison_row(case: str, runner: str, baseline: str, b: ResultRow, h: ResultRow, verdict: str,
                    reason: str, metrics: Sequence[MetricDiff] = ()) -> Any:
    from benchbox.receipts.model import ComparisonRow

    by = {m.metric: m for m in metrics}
    sb, sh = b.summary, h.summary
    d: dict[str, Any] = {"case": case, "runner": runner, "baseline": baseline,
                         "p50_ratio": (sh.p50_ns or 0) / sb.p50_ns if sb.p50_ns else 0.0,
                         "p99_ratio": (sh.p99_ns or 0) / sb.p99_ns if sb.p99_ns else None,
                         "p50_verdict": verdict, "reason": reason,
                         "method": "benchbox.receipts.diff (the diff engine): hierarchical bootstrap over "
                                   "rounds, Holm per metric family"}
    for m in ("p50", "p99"):
        if m in by:
            d[f"{m}_ratio"] = by[m].ratio if by[m].ratio is not None else d[f"{m}_ratio"]
            d[f"{m}_ratio_ci"] = list(by[m].ci) if by[m].ci else None
            d[f"{m}_verdict"] = by[m].verdict
    return ComparisonRow.of(d)


def compare_runners(receipt: Receipt, baseline: str | None = None,
                    options: DiffOptions | None = None) -> Any:
    """Per case, each valid runner against the baseline runner, judged by the diff engine.

    The baseline's row is BASE and the runner's row HEAD; rows flagged noisy or unsettled
    are ``unreliable``, rows timed with different clocks ``not comparable``; Holm runs over
    the rows of the run. Invalid rows are listed as excluded.
    """
    from benchbox.receipts.model import Comparisons, Excluded

    opts = options or DiffOptions(metric="both")
    base_name = baseline or (receipt.settings or {}).get("baseline") or (receipt.runners or (None,))[0]
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
        b = runners.get(str(base_name))
        for name, h in runners.items():
            if b is None or name == base_name:
                continue
            key = (receipt.task.name, case, name)
            order.append(key)
            cond = {k: v for k, v in row_conditions(b, h, str(base_name), name).items()
                    if k != "versions" and k not in opts.accept}
            if b.clock != h.clock:
                done[key] = _comparison_row(case, name, str(base_name), b, h, "not comparable",
                                            f"timed with the {h.clock} clock vs the {b.clock} clock")
            elif cond:
                done[key] = _comparison_row(case, name, str(base_name), b, h, "unreliable",
                                            "; ".join(f"{k}: {v}" for k, v in cond.items()))
            else:
                p = Pending(key, b, h, row_rounds(receipt, b), row_rounds(receipt, h),
                            _floor(receipt, b.clock))
                measure(p, opts)
                pending.append(p)
    for p, (verdict, reason, ms) in zip(pending, judge(pending, opts)):
        done[p.key] = _comparison_row(p.key[1], p.key[2], str(base_name), p.base, p.head, verdict, reason,
                                      ms)
    return Comparisons(baseline=base_name, rows=tuple(done[k] for k in order), excluded=excluded)
