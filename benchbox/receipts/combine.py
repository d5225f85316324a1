"""Several runs of one configuration as the rounds of one receipt.

A CI job that runs base and head alternately (base, head, base, head, …) gets one receipt
per run; :func:`combine` joins the runs of one side into one receipt whose rows keep every
run's rounds (``round_sizes``) and the process that took each (``round_process``, indexing the
joined ``processes``), so the comparison counts processes — the spread between runs — instead
of taking one run's samples for independent draws of the code's speed.

A receipt given twice (the same content, or the same samples in every row: a copy, however
renamed or re-encoded) is refused, naming both files: copies are not runs, and joining them
would count one run's samples several times, narrowing an interval they do not support.

Only runs of the same configuration are joined: the same contract, task (model, cases,
options), runner settings and machine class. Anything else is refused with the reason.
Nothing measured is changed: samples and stage times are concatenated in input order and
the statistics are recomputed from them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from benchbox.errors import UsageError
from benchbox.receipts.model import (
    Environment,
    JoinedFrom,
    ProcessRecord,
    Receipt,
    ResultRow,
    Settings,
    SteadyState,
    Summary,
)
from benchbox.receipts.replication import processes, round_processes
from benchbox.stats import flagged_caveats, min_n_for_ci, summarize

#: Environment entries that must agree for runs to be rounds of one measurement.
SAME_MACHINE = ("cpu", "cpu_count", "device", "torch", "torch_threads", "cuda", "gpu")
#: Settings that may differ between the runs (where each run wrote, how it was invoked, and how
#: many samples it took: each run is a round of its own, and rounds may differ in size).
FREE_SETTINGS = frozenset({"out", "combined_from", "labels", "samples"})


def _settings(r: Receipt) -> dict[str, Any]:
    if r.settings is None:
        return {}
    out = {k: v for k, v in r.settings.to_json().items() if k not in FREE_SETTINGS}
    sampling = r.settings.sampling
    if sampling is not None and sampling.fixed:  # the count, not the policy
        out["sampling"] = {k: v for k, v in sampling.to_json().items()
                           if k not in ("samples", "p99_resolvable")}
    return out


def _machine(r: Receipt) -> dict[str, Any]:
    out = {k: getattr(r.environment, k) for k in SAME_MACHINE}
    gpu = r.environment.gpu
    if gpu is not None:  # the model, driver and power limit, not the clocks or memory in use at start
        out["gpu"] = {"name": gpu.name, "capability": gpu.capability, "driver": gpu.driver,
                      "power_limit_w": gpu.power_limit_w}
    return out


def _check_alike(receipts: Sequence[Receipt], names: Sequence[str]) -> None:
    first, name0 = receipts[0], names[0]
    checks = (("contract", lambda r: r.contract.to_json()),
              ("task", lambda r: r.task.to_json()),
              ("settings", _settings),
              ("machine", _machine),
              ("rows", lambda r: sorted(row.key for row in r.results)))
    for r, name in zip(receipts[1:], names[1:]):
        for what, get in checks:
            a, b = get(first), get(r)
            if a != b:
                diff = ""
                if isinstance(a, dict) and isinstance(b, dict):
                    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
                    diff = f" ({', '.join(map(str, keys[:5]))})"
                raise UsageError(f"{name} is not a run of the configuration of {name0}: its {what} "
                                 f"differs{diff}")


def _fingerprints(r: Receipt) -> tuple[str, str | None]:
    """The receipt's content hash, and a hash of its rows' samples (None when it has none)."""
    content = hashlib.sha256(json.dumps(r.to_json(), sort_keys=True, separators=(",", ":"),
                                        default=str).encode()).hexdigest()
    rows = sorted((row.runner, row.case, list(row.samples_ns)) for row in r.results if row.samples_ns)
    samples = hashlib.sha256(json.dumps(rows).encode()).hexdigest() if rows else None
    return content, samples


def _check_distinct(receipts: Sequence[Receipt], names: Sequence[str]) -> None:
    """Refuse a receipt that is a copy of an earlier one: the same content, or the same samples."""
    seen: dict[str, str] = {}
    for r, name in zip(receipts, names):
        content, samples = _fingerprints(r)
        for key, what in ((f"c{content}", "the same receipt"),
                          (f"s{samples}", "the same samples in every row")):
            if key != "sNone" and key in seen:
                raise UsageError(f"{name} is a copy of {seen[key]} ({what}): combine joins separate "
                                 "runs, and a copy would count one run's samples twice")
            seen.setdefault(key, name)


def _busy(r: Receipt) -> float | None:
    """How busy the machine was as the run started: the window's busy fraction, else (a run with
    no window) the load average per core, as the diff's busy verdict reads it."""
    return r.environment.load.busy if r.environment.load is not None else None


def _environment(receipts: Sequence[Receipt]) -> Environment:
    """The first run's environment, with the busiest run's load at start as the load: a
    comparison's conditions check (a machine busy on one side) sees a load that came during
    any round, not only the first. Every run's busy fraction (else load per core) is kept in
    ``load_by_run``."""
    env = receipts[0].environment
    busy = [_busy(r) for r in receipts]
    known = [(b, i) for i, b in enumerate(busy) if b is not None]
    if known:
        _, worst = max(known)
        load = replace(receipts[worst].environment.load, run=worst + 1, of_runs=len(receipts))
        env = replace(env, load=load, load_by_run=busy)
    return env


def _steady(rows: Sequence[ResultRow]) -> SteadyState | None:
    """An unsettled round's steady-state record (the first), else the first checked one."""
    states = [r.steady_state for r in rows if r.steady_state is not None]
    for i, s in enumerate(states):
        if s.settled is False:
            return replace(s, round=i)
    checked = [s for s in states if s.checked]
    if not checked:
        return states[0] if states else None
    return replace(checked[0], settled=True,
                   method=f"{checked[0].method}, within each of {len(states)} rounds")


def _joined_rounds(receipt: Receipt, row: ResultRow, offset: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The row's rounds (sizes) and, for each, its process in the joined receipt (``offset``: the
    processes of the receipts joined before this one)."""
    if not row.samples_ns:
        return (), ()
    if not row.round_sizes:
        return (len(row.samples_ns),), (offset,)
    procs = round_processes(receipt, row)
    return tuple(row.round_sizes), tuple(offset + p for p in procs)


def _join_rows(rows: Sequence[ResultRow], receipts: Sequence[Receipt], offsets: Sequence[int]) -> ResultRow:
    bad = next((r for r in rows if r.status != "valid"), None)
    if bad is not None:
        i = rows.index(bad)
        # its reasons, each under its round, no longer record flags: the joined row raises none
        return replace(bad, reasons=tuple(f"round {i + 1} of {len(rows)}: {x}" for x in bad.reasons),
                       flags=())
    samples = tuple(s for r in rows for s in r.samples_ns)
    stages = {st: tuple(v for r in rows for v in r.stages_ns.get(st, ())) for st in rows[0].stages_ns}
    summary = summarize(samples)
    steady = _steady(rows)
    cav, flags = flagged_caveats(summary, steady.to_json() if steady else None)
    keep = [x for x in rows[0].reasons if x.startswith("accuracy gate")]
    parts = [_joined_rounds(rec, r, off) for r, rec, off in zip(rows, receipts, offsets)]
    probes = None if any(r.process_probe_ns is None for r in rows) else \
        tuple(v for r in rows for v in r.process_probe_ns or ())
    return replace(rows[0], samples_ns=samples, round_sizes=tuple(n for sz, _ in parts for n in sz),
                   round_process=tuple(p for _, pr in parts for p in pr), process_probe_ns=probes,
                   stages_ns=stages, summary=Summary.of(summary), steady_state=steady,
                   reasons=tuple(keep + cav), flags=flags,
                   clock_cross_check=None,
                   nulls=rows[0].nulls - {"clock_cross_check"})


def _processes(receipts: Sequence[Receipt],
               names: Sequence[str]) -> tuple[list[int], tuple[ProcessRecord, ...]]:
    """Each receipt's offset into the joined processes, and the joined processes (each says which
    receipt it came from)."""
    offsets, joined = [], []
    for r, name in zip(receipts, names):
        offsets.append(len(joined))
        joined += [replace(p, source=p.source if p.source and not p.source.startswith("legacy") else name)
                   for p in processes(r)]
    return offsets, tuple(joined)


def _joined_settings(receipts: Sequence[Receipt], names: Sequence[str]) -> Settings:
    """The first run's settings with every run's samples and rounds, and where each came from."""
    # a receipt without settings gets them in the order a dict given these keys had
    given = [r.settings or Settings(order=("repeats", "samples", "combined_from")) for r in receipts]
    total = sum(int(s.samples or 0) for s in given)
    repeats = sum(int(s.repeats or 1) for s in given)
    joined = tuple(JoinedFrom(receipt=n, created_at=r.created_at, git=r.environment.git,
                              nulls=frozenset() if r.environment.git is not None else frozenset({"git"}))
                   for r, n in zip(receipts, names))
    settings = replace(given[0], repeats=repeats, samples=total, combined_from=joined)
    if settings.sampling is not None and settings.sampling.fixed:  # the joined count
        settings = replace(settings, sampling=replace(settings.sampling, samples=total,
                                                      p99_resolvable=total >= min_n_for_ci(0.99)))
    return settings


def combine(receipts: Sequence[Receipt], names: Sequence[str]) -> Receipt:
    """One receipt whose rows hold each input run as rounds, in input order."""
    if len(receipts) < 2:
        raise UsageError("combine needs at least two receipts")
    _check_alike(receipts, names)
    _check_distinct(receipts, names)
    first = receipts[0]
    by_key = [{row.key: row for row in r.results} for r in receipts]
    offsets, procs = _processes(receipts, names)
    rows = tuple(_join_rows([m[row.key] for m in by_key], receipts, offsets) for row in first.results)
    # every process is a replication: the diff counts them, whatever their rounds
    settings = _joined_settings(receipts, names)
    return replace(first, results=rows, settings=settings, comparisons=None, processes=procs,
                   environment=_environment(receipts),
                   complete=False if not all(r.is_complete for r in receipts) else first.complete,
                   interrupted=True if any(r.interrupted for r in receipts) else first.interrupted)
