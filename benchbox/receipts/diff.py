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
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchbox.errors import FieldError, Setting, UsageError
from benchbox.fallbacks import decisions, draw_causes, probable_causes
from benchbox.receipts.adjust import adjustable
from benchbox.receipts.baseline import compare_runners
from benchbox.receipts.conditions import (
    MEASURED_PROCESSES,
    environment_differences,
    row_conditions,
    unrecorded_facts,
    unrecorded_versions,
)
from benchbox.receipts.diff_result import (
    ACCEPT_KINDS,
    CAUSE_LINES,
    DECLARED_KINDS,
    EXPLAIN_STAGES,
    IGNORED_OPTIONS,
    JUDGED,
    METRICS,
    VERDICTS,
    ComparisonRefused,
    DiffOptions,
    DiffResult,
    DiffRow,
    harness_floor,
)
from benchbox.receipts.judge import PLAUSIBLE_DRIFT, MetricDiff, Pending, fmt_delta, judge, measure
from benchbox.receipts.model import ContractRecord, Receipt, ResultRow
from benchbox.receipts.replication import process_probes, process_samples, round_processes

__all__ = ["ACCEPT_KINDS", "DECLARED_KINDS", "JUDGED", "METRICS", "VERDICTS", "ComparisonRefused",
           "DiffOptions", "DiffResult", "DiffRow", "MetricDiff", "accept_kinds", "check_contracts",
           "compare_runners", "diff_receipts", "fmt_delta"]

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
    """What decides the model measured: the task, its size, dtype, weights and options (precision
    choices, dynamic shapes: the weights' hash stays the same under them)."""
    return {"task": r.task.name, "size": r.task.size, "dtype": r.task.dtype,
            "model_sha256": r.task.model_sha256, "options": dict(r.task.options or {})}


def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), default=str)


def compiler_causes(b: ResultRow, h: ResultRow, limit: int = CAUSE_LINES) -> tuple[str, ...]:
    """What the compiler decided differently, by identity (measured values ignored), compact."""
    fb, fh = b.fallbacks, h.fallbacks
    drawn = tuple(draw_causes(b.runner_report.compile_choice, h.runner_report.compile_choice))
    if decisions(fb) == decisions(fh):
        return drawn
    return drawn + (tuple(probable_causes(fb, fh, limit - len(drawn))) or ("compiler choices differ",))


def declared_options(row: ResultRow) -> dict[str, Any]:
    """The runner options that decide what is measured (cache locations left out)."""
    return {k: v for k, v in row.options.items() if k not in IGNORED_OPTIONS}


def _dict_changes(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = sorted(set(a) | set(b))
    return ", ".join(f"{k} {_canon(a.get(k))} → {_canon(b.get(k))}" for k in keys
                     if _canon(a.get(k)) != _canon(b.get(k)))


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
    if "versions" in cond and "versions" in receipt_level:  # torch or CUDA, and the runner's libraries
        cond["versions"] = f"{receipt_level['versions']}, {cond['versions']}"
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
        settings = tuple(Setting("accept", k) for k in refused)
        return DiffRow(*key, "not comparable", accepted=tuple(accepted), **common, settings=settings,
                       reason="; ".join(f"{k}: {declared[k]}" for k in refused)
                       + " (pass " + " ".join(map(str, settings)) + " to compare anyway)")
    fl = [f for f in (harness_floor(s.base, b.clock), harness_floor(s.head, h.clock)) if f is not None]
    prior = opts.drift if opts.drift is not None else s.priors.get(key)
    probes = process_probes((s.base, s.head), (b, h)) if b.clock == "host" else None
    if probes and adjustable(len(a), len(c)) and "machine" in conditions and "machine" not in opts.accept:
        # the row is adjusted for the machine's state process by process: a moved control is
        # what the adjustment is for, so it is stated, not a reason to refuse the row
        accepted.append(f"machine: {conditions.pop('machine')} (the row is adjusted for the process probe)")
    return Pending(key, b, h, a, c, max(fl) if fl else None, prior=prior,
                   fallback=PLAUSIBLE_DRIFT.get(b.clock, PLAUSIBLE_DRIFT["host"]),
                   probes=(probes[0], probes[1]) if probes else None,
                   unreliable={k: v for k, v in conditions.items() if k not in opts.accept},
                   noted=frozenset(k for k, v in conditions.items() if s.conditions.get(k) == v),
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
            accept = Setting("accept", "incomplete")
            raise ComparisonRefused(f"{name} is an incomplete receipt ({why}): rows it lacks would "
                                    f"read as removed; rerun it, or pass {accept}", settings=(accept,))


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
    settings = tuple(Setting("accept", k) for k in conditions if k not in opts.accept)
    notes += [f"accepted: {k} differs ({why})" if k in opts.accept else
              f"unreliable: {k} differs ({why}); every row it touches is unreliable (pass "
              f"{Setting('accept', k)} to judge anyway)" for k, why in conditions.items()]
    notes += unrecorded_facts(base, head, (base_name, head_name))
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
    notes += _version_notes(pending, (base_name, head_name))
    floors = [p.floor for p in pending if p.floor is not None]
    if pending and not floors:
        notes.append("no harness floor recorded in either receipt (calibration failed or was not run): "
                     "differences were not held against a floor")
    return DiffResult(base=base_name, head=head_name,
                      contract={k: getattr(base.contract, k) for k in ("name", "version", "first", "last",
                                                                          "clock", "hash")},
                      options=opts, rows=tuple(rows[k] for k in keys), notes=tuple(notes),
                      floor_ns=max(floors) if floors else None,
                      processes=(_process_count(base), _process_count(head)), settings=settings)


def _version_notes(pending: Sequence[Pending], names: tuple[str, str]) -> list[str]:
    one_sided = sorted({v for p in pending for v in unrecorded_versions(p.base, p.head, names)})
    return ([f"not compared: runner library versions recorded by one side only: {', '.join(one_sided)}"]
            if one_sided else [])


def _unreliable_reason(p: Pending) -> tuple[str, tuple[Setting, ...]]:
    """The conditions of an unreliable row: those of the whole receipts named (stated once, with
    how to judge anyway, in the notes), the row's own in full with how to judge anyway; and the
    settings it suggests."""
    parts = [f"{k} (see the notes)" if k in p.noted else f"{k}: {why}" for k, why in p.unreliable.items()]
    if all(k in p.noted for k in p.unreliable):
        return "; ".join(parts), ()
    settings = tuple(Setting("accept", k) for k in p.unreliable)
    return "; ".join(parts) + f" (pass {' '.join(map(str, settings))} to judge anyway)", settings


def _judged(pending: Sequence[Pending], opts: DiffOptions) -> dict[tuple[str, str, str], DiffRow]:
    out = {}
    for p, (verdict, reason, ms) in zip(pending, judge(pending, opts)):
        if p.unreliable:
            why, settings = _unreliable_reason(p)
            out[p.key] = DiffRow(*p.key, verdict="unreliable", reason=why, settings=settings,
                                 metrics=tuple(ms), conditions=tuple(p.unreliable), **p.kw)
            continue
        expl = _explain(p.base, p.head, p.floor) if verdict in ("slower", "faster") else ()
        out[p.key] = DiffRow(*p.key, verdict=verdict, reason=reason, metrics=tuple(ms), explanation=expl,
                             **p.kw)
    return out


def accept_kinds(values: Iterable[str]) -> frozenset[str]:
    """Parse repeated/comma-separated ``--accept`` values."""
    out = {v.strip() for item in values for v in item.split(",") if v.strip()}
    bad = sorted(out - set(ACCEPT_KINDS))
    if bad:
        raise FieldError("accept", f"{bad[0]!r} is not one of {', '.join(ACCEPT_KINDS)}")
    return frozenset(out)
