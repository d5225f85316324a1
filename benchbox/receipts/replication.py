"""The process as the unit of replication: which process took each round of a row.

A fresh process re-draws everything a run depends on (memory layout, hash seed, thread
placement, compile draws); rounds taken in one process share all of it. So a comparison across
runs counts processes, not rounds: the rounds of one process are pooled into one replication.

A receipt written by this version says it outright (``processes`` and each row's
``round_process``). For older receipts it is read from how they were made: a run of fresh-process
rounds (``settings.fresh_processes``) or a ``combine`` of one-round runs has one process per round;
a ``combine`` of runs with in-process rounds has one process per joined run, its rounds in equal
consecutive shares; any other receipt — one run, with or without in-process ``--repeats`` — is
one process.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchbox.harness.control import PROBE
from benchbox.receipts.model import MachineLoad, ProcessRecord, Receipt, ResultRow


def _legacy_runs(receipt: Receipt) -> int:
    joined = receipt.settings.combined_from if receipt.settings is not None else None
    return len(joined) if joined else 1


def round_processes(receipt: Receipt, row: ResultRow) -> tuple[int, ...]:
    """For each round of ``row``, the index of the process that took it."""
    rounds = len(row.round_sizes)
    if row.round_process is not None and len(row.round_process) == rounds:
        return tuple(row.round_process)
    fresh = receipt.settings is not None and receipt.settings.fresh_processes is True
    runs = _legacy_runs(receipt)
    if fresh or (runs > 1 and runs == rounds):
        return tuple(range(rounds))
    if runs > 1 and rounds % runs == 0:
        share = rounds // runs
        return tuple(i // share for i in range(rounds))
    return (0,) * rounds


def process_samples(receipt: Receipt, row: ResultRow) -> list[np.ndarray]:
    """The row's samples, one array per process that took some, in order of first appearance."""
    if not row.round_sizes:
        return [np.asarray(row.samples_ns, dtype=np.float64)] if row.samples_ns else []
    groups: dict[int, list[tuple[int, ...]]] = {}
    for proc, samples in zip(round_processes(receipt, row), row.rounds()):
        if samples:
            groups.setdefault(proc, []).append(samples)
    return [np.asarray([v for part in parts for v in part], dtype=np.float64) for parts in groups.values()]


def processes(receipt: Receipt) -> tuple[ProcessRecord, ...]:
    """The processes that measured: as recorded, else one record per legacy run, from its
    environment (the load of each joined run, the GPU reading of the first)."""
    if receipt.processes:
        return receipt.processes
    env = receipt.environment
    by_run = env.load_by_run
    runs = _legacy_runs(receipt)
    loads: list[Any] = list(by_run) if by_run is not None and len(by_run) == runs else [None] * runs
    out = []
    for i, busy in enumerate(loads):
        load = MachineLoad(busy_fraction=busy) if busy is not None else (env.load if i == 0 else None)
        out.append(ProcessRecord(load=load, source="legacy receipt (processes not recorded)"))
    return tuple(out)


#: The probes a diff adjusts for (:data:`benchbox.harness.control.PROBE`): timed before any call
#: of the code under test (v3 before the task is loaded; v2, kept in BENCHMARKS §4's receipts,
#: after it was loaded and before its first call). ``sort-200k-v1`` was timed beside each row's
#: samples, where the code under test moved it (a change that sleeps more made it ×1.08–1.50
#: slower), so receipts that carry it are compared without the adjustment. A diff whose
#: processes name different probes is not adjusted either.
ADJUSTED_PROBES = ("sort-200k-start-v2", PROBE)


def process_probes(receipts: Sequence[Receipt], rows: Sequence[ResultRow]) -> list[list[float]] | None:
    """The log of the process probe of each process of each row (the order of
    :func:`process_samples`), or None unless every process of every row has one and all the
    receipts timed the same probe, one the diff adjusts for (:data:`ADJUSTED_PROBES`)."""
    names = {p.control.row_probe if p.control is not None else None for r in receipts for p in processes(r)}
    if len(names) != 1 or next(iter(names)) not in ADJUSTED_PROBES:
        return None
    out = []
    for receipt, row in zip(receipts, rows):
        probe = row.process_probe_ns
        if probe is None or len(probe) != len(process_samples(receipt, row)) or min(probe) <= 0:
            return None
        out.append([math.log(v) for v in probe])
    return out
