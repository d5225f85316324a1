"""The comparison engine: match (task, case, runner) rows and give each a verdict CI can act on.

One engine and one vocabulary for ``benchbox diff``, the diff figure, the history site and
the run's runner-vs-baseline comparisons (:func:`compare_runners`).

- **Processes.** The unit of replication is the process (:mod:`benchbox.receipts.replication`):
  rounds that shared one are pooled into one replication. Each metric is judged by Welch's t on
  the processes' log-quantiles (:mod:`benchbox.receipts.judge`), valid with few of them; a side
  of one process has no spread of its own and takes one given or the largest measured.
- **Families.** Holm within the p50 family and within the p99 family; with ``--metric
  both`` each family gets half of ``alpha``, so the family-wise rate over all rows and
  both metrics stays at most ``alpha`` while p99 keeps its power.
- **Conditions.** Differences in what moves timings (:mod:`benchbox.receipts.conditions`) make
  a row ``unreliable`` (never ``slower``) unless accepted; its numbers are still shown.
- **Declarations.** A different contract refuses the diff; a different model, request,
  device class or runner options makes a row ``not comparable`` unless accepted.
  Compiler choices (autotune picks, graph breaks, ATen fallbacks) never do: they are
  listed as probable causes.

This module never imports torch or tensorrt: it reads receipts and does statistics.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchbox import stats
from benchbox.errors import FieldError, UsageError
from benchbox.fallbacks import draw_causes, identity, probable_causes
from benchbox.receipts.conditions import (
    CONDITION_KINDS,
    MEASURED_PROCESSES,
    RECEIPT_KINDS,
    environment_differences,
    row_conditions,
)
from benchbox.receipts.judge import PLAUSIBLE_DRIFT, MetricDiff, Pending, fmt_delta, judge, measure
from benchbox.receipts.model import ContractRecord, Receipt, ResultRow
from benchbox.receipts.replication import process_probes, process_samples, round_processes

__all__ = ["ACCEPT_KINDS", "VERDICTS", "ComparisonRefused", "DiffOptions", "DiffResult", "DiffRow",
           "MetricDiff", "accept_kinds", "check_contracts", "compare_runners", "diff_files",
           "diff_receipts", "fmt_delta"]

VERDICTS = ("slower", "faster", "unchanged", "unresolved", "unreliable", "invalid", "new", "removed",
            "not comparable")
#: Verdicts of a row whose statistics were taken: a diff with none of them could judge nothing.
JUDGED = ("slower", "faster", "unchanged", "unresolved")
#: Kinds of declared difference that make a row not comparable unless accepted with ``--accept``.
DECLARED_KINDS = ("device", "model", "options", "incomplete")
#: Every kind ``--accept`` takes: declared differences, then conditions. ``fallbacks`` is kept
#: for old command lines and has no effect (compiler choices never block a comparison).
ACCEPT_KINDS = (*DECLARED_KINDS, *CONDITION_KINDS, "fallbacks")
#: Runner options that do not change what is measured (where a cache lives).
IGNORED_OPTIONS = ("cache_dir",)
#: Probable causes listed per row at most.
CAUSE_LINES = 6
METRICS = ("p50", "p99", "both")
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
    #: the run-to-run spread (sd of the log of a process's quantile) to take for a side of one
    #: process, measured elsewhere; None: the other side's, else the largest measured
    drift: float | None = None
    #: the power at which the smallest detectable change and the processes needed are stated
    power: float = stats.DETECT_POWER
    #: how far the time between regions may move before the pacing counts as a condition
    pacing_margin: float = 0.25

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
        if self.drift is not None and not 0.0 <= self.drift < 5.0:
            raise FieldError("drift", f"must be a spread between 0% and 500%, got {self.drift:.4g}")
        if not 0.5 <= self.power < 1.0:
            raise FieldError("power", f"must be in [0.5, 1), got {self.power}")
        if not self.pacing_margin > 0:
            raise FieldError("pacing_margin", f"must be above 0, got {self.pacing_margin}")


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
    #: the conditions that made the row unreliable (kinds)
    conditions: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str, str]:
        return self.task, self.case, self.runner

    @property
    def regression(self) -> bool:
        """Whether this row fails the diff (exit 1)."""
        return self.verdict == "slower" or self.newly_invalid

    @property
    def judged(self) -> MetricDiff | None:
        """The first metric that was judged (not advisory) and has an interval."""
        return next((m for m in self.metrics if not m.advisory and m.ci is not None), None)

    @property
    def detectable(self) -> float | None:
        """The smallest relative change the row could have detected (its first judged metric)."""
        m = self.judged
        return m.detectable if m is not None else None

    @property
    def needed(self) -> int | None:
        """Processes a side that would detect a change of the threshold's size."""
        m = self.judged
        return m.needed if m is not None else None

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
    #: processes per side (the most any row had)
    processes: tuple[int, int] = (1, 1)

    @property
    def exit_code(self) -> int:
        """1: a slower or newly invalid row; else 3 when a row is unreliable or no row could be
        judged at all (every one not comparable, invalid, new, removed or without an interval);
        else 0."""
        if any(r.regression for r in self.rows):
            return 1
        if any(r.verdict == "unreliable" for r in self.rows):
            return 3
        return 0 if any(r.verdict in JUDGED and r.judged is not None for r in self.rows) else 3

    def counts(self) -> dict[str, int]:
        out = {v: 0 for v in VERDICTS}
        for r in self.rows:
            out[r.verdict] += 1
        return {k: v for k, v in out.items() if v}

    def resolution(self) -> dict[str, Any] | None:
        """What the diff could resolve: the median and largest smallest-detectable change over
        its judged rows, and the processes a side that would resolve the threshold on all."""
        judged = [r for r in self.rows if r.detectable is not None]
        if not judged:
            return None
        det = sorted(r.detectable for r in judged if r.detectable is not None)
        short = [r for r in judged if (r.detectable or 0) > self.options.threshold]
        needs = [r.needed for r in short]
        return {"rows": len(judged), "median": det[len(det) // 2], "largest": det[-1],
                "rows_over_threshold": len(short),
                "needed": None if (not short or None in needs) else max(n for n in needs if n),
                "processes": list(self.processes)}

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
            d["conditions"] = list(r.conditions)
            d["detectable"], d["needed"] = r.detectable, r.needed
            d["metrics"] = [{**asdict(m), "ci": list(m.ci) if m.ci else None,
                             "processes": list(m.processes), "spread": list(m.spread) if m.spread else None,
                             "df": None if m.df is None or m.df == float("inf") else m.df}
                            for m in r.metrics]
            rows.append(d)
        return {"base": self.base, "head": self.head, "contract": self.contract, "options": opts,
                "floor_ns": self.floor_ns, "notes": list(self.notes), "counts": self.counts(),
                "processes": list(self.processes), "resolution": self.resolution(),
                "exit_code": self.exit_code, "rows": rows}


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


def _floor(receipt: Receipt, clock_used: str) -> float | None:
    """The harness floor recorded in the receipt's calibration for this clock, if any."""
    v = receipt.floor(clock_used)
    return float(v) if v is not None else None


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
    priors: Mapping[tuple[str, str, str], float]


def _declared(s: _Sides, key: tuple[str, str, str], b: ResultRow, h: ResultRow) -> dict[str, str]:
    declared = dict(s.declared)
    if _request(s.base, b) != _request(s.head, h):
        declared["model"] = "; ".join(x for x in (declared.get("model"), f"request of case {key[1]} differs")
                                      if x)
    ob, oh = declared_options(b), declared_options(h)
    if _canon(ob) != _canon(oh):
        declared["options"] = _dict_changes(ob, oh)
    return declared


def _row_conditions(s: _Sides, b: ResultRow, h: ResultRow, a: list[Any], c: list[Any]) -> dict[str, str]:
    measured = min(len(a), len(c)) >= MEASURED_PROCESSES
    cond = row_conditions(b, h, s.base_name, s.head_name, receipts=(s.base, s.head), measured=measured,
                          region=tuple(s.base.contract.stages), pacing_margin=s.opts.pacing_margin,
                          threshold=s.opts.threshold)
    receipt_level = {k: v for k, v in s.conditions.items() if k != "machine" or b.clock == "host"}
    return {**receipt_level, **cond}


def _row(s: _Sides, key: tuple[str, str, str], b: ResultRow, h: ResultRow) -> DiffRow | Pending:
    """A row's verdict when it needs no statistics, else a Pending row to measure."""
    opts = s.opts
    common: dict[str, Any] = dict(base_status=b.status, head_status=h.status, causes=compiler_causes(b, h))
    if not (b.usable and h.usable):
        bad = [f"{n} {r.status}" + (f": {'; '.join(r.reasons)}" if r.reasons else "")
               for n, r in ((s.base_name, b), (s.head_name, h)) if not r.usable]
        return DiffRow(*key, "invalid", reason="; ".join(bad), newly_invalid=b.usable and not h.usable,
                       **common)
    declared = _declared(s, key, b, h)
    a, c = process_samples(s.base, b), process_samples(s.head, h)
    conditions = _row_conditions(s, b, h, a, c)
    accepted = [f"{k}: {why}" for k, why in {**declared, **conditions}.items() if k in opts.accept]
    refused = [k for k in declared if k not in opts.accept]
    if refused:
        return DiffRow(*key, "not comparable", accepted=tuple(accepted), **common,
                       reason="; ".join(f"{k}: {declared[k]}" for k in refused)
                       + " (pass " + " ".join(f"accept={k}" for k in refused) + " to compare anyway)")
    fl = [f for f in (_floor(s.base, b.clock), _floor(s.head, h.clock)) if f is not None]
    prior = opts.drift if opts.drift is not None else s.priors.get(key)
    probes = process_probes((s.base, s.head), (b, h)) if b.clock == "host" else None
    if probes and "machine" in conditions and "machine" not in opts.accept:
        # the row is adjusted for the machine's state process by process: a moved control is
        # what the adjustment is for, so it is stated, not a reason to refuse the row
        accepted.append(f"machine: {conditions.pop('machine')} (the row is adjusted for the row probe)")
    return Pending(key, b, h, a, c, max(fl) if fl else None, prior=prior,
                   fallback=PLAUSIBLE_DRIFT.get(b.clock, PLAUSIBLE_DRIFT["host"]),
                   probes=(probes[0], probes[1]) if probes else None,
                   unreliable={k: v for k, v in conditions.items() if k not in opts.accept},
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


def _check_complete(base: Receipt, head: Receipt, opts: DiffOptions, names: tuple[str, str]) -> None:
    if "incomplete" in opts.accept:
        return
    for name, r in zip(names, (base, head)):
        if not r.is_complete:
            why = r.interrupt_reason or "the run did not finish"
            raise ComparisonRefused(f"{name} is an incomplete receipt ({why}): rows it lacks would "
                                    "read as removed; rerun it, or pass accept=incomplete")


def _process_count(r: Receipt) -> int:
    return max((len(set(round_processes(r, row))) for row in r.results if row.samples_ns), default=0)


def diff_receipts(base: Receipt, head: Receipt, options: DiffOptions | None = None,
                  base_name: str = "BASE", head_name: str = "HEAD",
                  priors: Mapping[tuple[str, str, str], float] | None = None) -> DiffResult:
    """Compare two loaded receipts; raise ComparisonRefused for different contracts.

    ``priors``: a run-to-run spread per (task, case, runner) measured elsewhere (a row's history),
    taken for a side of one process unless ``options.drift`` gives one for every row.
    """
    opts = options or DiffOptions()
    check_contracts(base, head)
    _check_complete(base, head, opts, (base_name, head_name))
    ib, ih = _index(base, base_name), _index(head, head_name)
    declared, notes = _run_differences(base, head, opts)
    conditions = environment_differences(base, head, opts.threshold)
    notes += [f"accepted: {k} differs ({why})" if k in opts.accept else
              f"unreliable: {k} differs ({why}); every row it touches is unreliable (pass accept={k} to "
              "judge anyway)" for k, why in conditions.items()]
    sides = _Sides(base, head, base_name, head_name, opts, declared, conditions, priors or {})
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
                      floor_ns=max(floors) if floors else None,
                      processes=(_process_count(base), _process_count(head)))


def _unreliable_reason(p: Pending) -> str:
    """The conditions of an unreliable row: those of the whole receipts named (stated once, with
    how to judge anyway, in the notes), the row's own in full with how to judge anyway."""
    parts = [f"{k} (see the notes)" if k in RECEIPT_KINDS else f"{k}: {why}"
             for k, why in p.unreliable.items()]
    if all(k in RECEIPT_KINDS for k in p.unreliable):
        return "; ".join(parts)
    kinds = " ".join(f"accept={k}" for k in p.unreliable)
    return "; ".join(parts) + f" (pass {kinds} to judge anyway)"


def _judged(pending: Sequence[Pending], opts: DiffOptions) -> dict[tuple[str, str, str], DiffRow]:
    out = {}
    for p, (verdict, reason, ms) in zip(pending, judge(pending, opts)):
        if p.unreliable:
            out[p.key] = DiffRow(*p.key, verdict="unreliable", reason=_unreliable_reason(p),
                                 metrics=tuple(ms), conditions=tuple(p.unreliable), **p.kw)
            continue
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
    if cond:
        return "unreliable|" + "; ".join(f"{k}: {v}" for k, v in cond.items())
    paired = round_processes(receipt, b) == round_processes(receipt, h) and len(a) >= 2
    return Pending(key, b, h, a, c, _floor(receipt, b.clock), prior=opts.drift,
                   fallback=PLAUSIBLE_DRIFT.get(b.clock, PLAUSIBLE_DRIFT["host"]), paired=paired)


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
    base_name = str(baseline or (receipt.settings or {}).get("baseline") or (receipt.runners or ("",))[0])
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
        done[p.key] = _comparison_row(p.key[1], p.key[2], base_name, p.base, p.head, verdict, reason, ms)
    return Comparisons(baseline=base_name or None, rows=tuple(done[k] for k in order), excluded=excluded)
