"""Building receipts during a run: the header, one row per (runner, case), the open set on disk.

The run hands over what it measured (a harness :class:`~benchbox.harness.Measurement`, the
accuracy gates, the runner's report); this module derives the statistics and caveats
and writes the receipts after every change, so a crash loses nothing already measured.
Nothing here changes a measurement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchbox.contracts import Contract
from benchbox.errors import error_line
from benchbox.harness.loop import Measurement, clock_cross_check
from benchbox.receipts.io import ReceiptEncoder, now_iso, write_receipt
from benchbox.receipts.model import (
    SCHEMA_VERSION,
    Accuracy,
    Calibration,
    ClockCrossCheck,
    Comparisons,
    ContractRecord,
    Environment,
    Gate,
    LoadRecord,
    ProcessRecord,
    Quieting,
    Receipt,
    ResultRow,
    RunnerReport,
    Settings,
    SteadyState,
    Summary,
    TaskRecord,
)
from benchbox.stats import flagged_caveats, steady_state, steady_state_rounds, summarize

REFERENCE = "eager float32 on cpu"


def this_process(environment: Mapping[str, Any], rounds: int, quieting: Mapping[str, Any]) -> ProcessRecord:
    """The record of the process measuring now: its id, when it started, the load at its start and
    what it does against noise."""
    import os

    load = Environment.of(environment).load
    return ProcessRecord(pid=os.getpid(), started_at=now_iso(), rounds=rounds, load=load,
                         quieting=Quieting.of(quieting))


def with_process_facts(receipt: Receipt, **facts: Any) -> Receipt:
    """The receipt with facts (``control``, ``gpu``) added to the record of its own process (the
    last one: a run measures in one)."""
    procs = list(receipt.processes or ())
    if not procs:
        return receipt
    procs[-1] = replace(procs[-1], **facts)
    return replace(receipt, processes=tuple(procs))


def gpu_while_working(readings: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The GPU's state while it worked, from readings taken right after each case's samples: the
    median SM clock of the readings not flagged idle, the throttle reasons other than idle, and
    how many readings were idle (a clock read while the GPU idles says nothing of the work)."""
    import statistics

    clocks, reasons, idle = [], set(), 0
    for r in readings:
        names = set(r.get("throttle_reasons") or ())
        if "gpu_idle" in names:
            idle += 1
        else:
            try:
                clocks.append(float(r["sm_clock_mhz"]))
            except (KeyError, TypeError, ValueError):
                pass
        reasons |= names - {"gpu_idle", "applications_clocks_setting"}
    return {"readings": len(readings), "idle_readings": idle,
            "sm_clock_mhz": statistics.median(clocks) if clocks else None,
            "sm_clock_min_mhz": min(clocks) if clocks else None, "throttle_reasons": sorted(reasons),
            "source": next((r.get("source") for r in readings if r.get("source")), None)}


def new_receipt(contract: Contract, *, command: Sequence[str], environment: Mapping[str, Any],
                task: Mapping[str, Any], cases: Sequence[Any], settings: Settings,
                process: ProcessRecord | None = None) -> Receipt:
    """An empty, incomplete receipt for one contract of a run (measured by ``process``)."""
    from benchbox import __version__

    return Receipt(processes=(process,) if process is not None else None,
        schema_version=SCHEMA_VERSION, benchbox_version=__version__, created_at=now_iso(),
        command=tuple(command) or ("benchbox", "run"), complete=False,
        contract=ContractRecord.of(contract.to_dict()), environment=Environment.of(environment),
        task=TaskRecord.of({**task, "cases": [{"name": c.name, "request_sha256": c.sha256}
                                              for c in cases]}),
        settings=settings, calibration=Calibration(), results=())


def _accuracy(gates: Sequence[Any]) -> Accuracy:
    return Accuracy(passed=all(g.passed for g in gates),
                    gates=tuple(Gate.of(g.to_dict()) for g in gates), reference=REFERENCE)


def _base(runner: str, case: Any, status: str, reasons: Sequence[str], report: Mapping[str, Any],
          **kw: Any) -> ResultRow:
    return ResultRow(runner=runner, case=case.name, request_sha256=case.sha256, status=status,
                     reasons=tuple(reasons), runner_report=RunnerReport.of(report),
                     accuracy=kw.pop("accuracy", None), samples_ns=kw.pop("samples_ns", ()),
                     round_sizes=kw.pop("round_sizes", ()),
                     stages_ns=kw.pop("stages_ns", {}), summary=kw.pop("summary", Summary(n=0)), **kw)


def _raw(m: Measurement) -> dict[str, Any]:
    """The samples, their rounds and stages; every round was taken by this run's one process."""
    rounds = tuple(m.rounds())
    probe = (int(round(float(np.median(m.probe_ns)))),) if m.probe_ns and rounds else None
    return {"samples_ns": tuple(m.samples_ns), "round_sizes": rounds, "round_process": (0,) * len(rounds),
            "stages_ns": {s: tuple(v) for s, v in m.stages_ns.items()}, "process_probe_ns": probe}


def _load(m: Measurement) -> LoadRecord | None:
    return LoadRecord.of(m.load) if m.load is not None else None


def _split(samples: Sequence[int], sizes: Sequence[int]) -> list[Sequence[int]]:
    out, at = [], 0
    for n in sizes:
        out.append(samples[at:at + n])
        at += n
    return out


def failed_row(runner: str, case: Any, reason: str, report: Mapping[str, Any],
               measurement: Measurement | None = None) -> ResultRow:
    """A (runner, case) that could not be measured, with the reason; samples kept if any."""
    raw = _raw(measurement) if measurement is not None else {}
    extra: dict[str, Any] = {}
    if measurement is not None and measurement.samples_ns:
        extra = dict(clock_used=measurement.clock_used, clock_note=measurement.clock_note,
                     warmup=measurement.warmup, stop_reason=measurement.stop_reason or None,
                     load=_load(measurement))
    return _base(runner, case, "failed", [reason], report, **raw, **extra)


def partial_row(runner: str, case: Any, gates: Sequence[Any], m: Measurement, report: Mapping[str, Any],
                why: str) -> ResultRow:
    """A case a signal stopped part way: the samples so far, invalid and never compared."""
    stop = f"interrupted by {why} after {len(m.samples_ns)} sample(s)"
    return _base(runner, case, "invalid", [f"partial: {stop}; not comparable"], report, partial=True,
                 accuracy=_accuracy(gates), **_raw(m), summary=Summary.of(summarize(m.samples_ns)),
                 load=_load(m), clock_used=m.clock_used, clock_note=m.clock_note, warmup=m.warmup,
                 stop_reason=stop)


def result_row(contract: Contract, runner: str, case: Any, gates: Sequence[Any], m: Measurement,
               report: Mapping[str, Any], independent_rounds: bool = False) -> ResultRow:
    """A finished measurement: status from the gates, statistics, caveats as reasons.

    If the statistics themselves fail, the samples are kept in a ``failed`` row.
    """
    failed = [g for g in gates if not g.passed]
    reasons = [f"accuracy gate {g.name} failed: value {g.value}, threshold {g.threshold}"
               + (f" ({g.detail})" if g.detail else "") for g in failed]
    try:
        summary = summarize(m.samples_ns)
        steady = (steady_state_rounds(_split(m.samples_ns, m.rounds())) if independent_rounds
                  else steady_state(m.samples_ns))
        cross = clock_cross_check(m, contract)
    except Exception as e:  # keep what was measured even if its statistics fail
        return failed_row(runner, case, f"statistics failed: {error_line(e)}", report, m)
    if m.overloaded:
        assert m.load is not None
        reasons.append(f"overloaded: {m.load.get('overload')}; the latency of these samples grows with "
                       "the run's length, so it is not a property of the runner at this load")
    cav, flags = flagged_caveats(summary, steady)
    reasons += cav  # caveats never change the status
    if cross and cross["violations"]:
        reasons.append(f"clock cross-check: {cross['violations']} of {cross['samples']} samples have "
                       f"device time above the host span {cross['host_span']}: the accounting is wrong")
    return _base(runner, case, "invalid" if failed or m.overloaded else "valid", reasons, report,
                 accuracy=_accuracy(gates), **_raw(m), summary=Summary.of(summary),
                 clock_used=m.clock_used, clock_note=m.clock_note, warmup=m.warmup,
                 stop_reason=m.stop_reason, steady_state=SteadyState.of(steady), flags=flags,
                 clock_cross_check=ClockCrossCheck.of(cross) if cross else None, load=_load(m),
                 nulls=frozenset() if cross else frozenset({"clock_cross_check"}))


class ReceiptSet:
    """The receipts of one run (one per contract), written to disk after every change."""

    def __init__(self, paths: Sequence[Path], receipts: Sequence[Receipt]) -> None:
        self.paths = list(paths)
        self.receipts = list(receipts)
        self.opened = False
        #: one a receipt: each keeps the JSON of the rows it wrote, so a write costs the new row
        self.encoders = [ReceiptEncoder() for _ in self.paths]

    @property
    def first(self) -> tuple[Path, Receipt]:
        return self.paths[0], self.receipts[0]

    @property
    def where(self) -> str:
        return ", ".join(str(p) for p in self.paths)

    def save(self) -> None:
        for path, receipt, encoder in zip(self.paths, self.receipts, self.encoders):
            write_receipt(path, receipt, encoder=encoder)
        self.opened = True

    def update(self, change: Callable[[int, Receipt], Receipt]) -> None:
        """Replace each receipt by ``change(index, receipt)`` and write them."""
        self.receipts = [change(i, r) for i, r in enumerate(self.receipts)]
        self.save()

    def add_rows(self, rows: Sequence[ResultRow]) -> None:
        """One row per receipt, in contract order (fewer: an interrupt cut the case short)."""
        self.update(lambda i, r: r.with_results(r.results + (rows[i],)) if i < len(rows) else r)

    def mark_interrupted(self, why: str) -> None:
        def mark(_: int, r: Receipt) -> Receipt:
            return replace(r, complete=False, interrupted=True, interrupted_at=now_iso(),
                           interrupt_reason=f"{why} after {len(r.results)} result(s)")
        self.update(mark)

    def finish(self, comparisons: Sequence[Comparisons], gpu_after: Mapping[str, Any] | None) -> None:
        def done(i: int, r: Receipt) -> Receipt:
            env = r.environment
            if gpu_after is not None:
                env = replace(env, gpu_state_after=dict(gpu_after))
            return replace(r, comparisons=comparisons[i], environment=env, complete=True)
        self.update(done)
