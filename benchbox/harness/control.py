"""The control workload: a fixed piece of host work, timed in every process that measures.

It is benchbox's own code and never the code under test — decode a fixed JSON document, sort
and sum its numbers, encode it again: the kind of host work a task's ``parse`` and
``serialize`` do. What moves it between two runs is the machine (its clock, its load, its
caches), not a change to the task or runner. So a diff can tell machine drift from a code
change: when the control moved beyond the threshold, the row is ``unreliable (machine)``
(:func:`benchbox.receipts.conditions.control_difference`).

The **process probe** (:func:`probe`) is the second half: a fixed piece of memory-bound work
(sort a copy of 200,000 fixed doubles, 1.6 MB: more than a core's L2) timed at the start of each
run, before benchbox loads the task: no code of the task or runner under test has run in the
process (unless a caller gave a task object or ran an earlier run in the same interpreter). A
shared host's speed for such work moves over seconds — other tenants filling the last-level
cache and the memory bus — and a model's call can move with it, while cache-resident work such
as the control above hardly does. Where it does (on the H200 host, BENCHMARKS §4: the probe's
log correlated 0.40–0.48 with a tiny model's call between processes in one session, timed as
now; 0.59–0.69 in another, timed after the task had loaded), the diff adjusts each
row's processes for it (:func:`benchbox.receipts.adjust.adjusted_log_ratio`); where it does
not (the 2-core development VM), the adjustment costs a degree of freedom. It is timed before
the code under test because a covariate the change can move is not a valid one: timed beside
the samples (its first version), it was slower in every set of processes whose code slept more
per call (×1.08–1.50), and the adjustment took part of a real slowdown for the machine's.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import numpy as np

from benchbox.harness.clocks import HostClock, host_clock
from benchbox.stats import log_quantile_se, quantile

#: The control's name and version: a change to its work is a new version, never compared.
NAME = "json-sort-v1"
#: Timed calls (after the warm-up calls) per process.
CALLS = 200
WARMUP = 20


def _document() -> bytes:
    """A fixed request-like document: 32 records of text and 32 numbers each (about 12 KB)."""
    rng = np.random.default_rng(20261203)
    records = [{"id": i, "name": f"item-{i:04d}", "tags": ["alpha", "beta", "gamma"][: 1 + i % 3],
                "values": [round(float(v), 6) for v in rng.random(32)]} for i in range(32)]
    return json.dumps({"records": records}).encode()


def _work(doc: bytes) -> int:
    obj = json.loads(doc)
    total = 0.0
    for rec in obj["records"]:
        rec["values"].sort()
        total += sum(rec["values"])
    return len(json.dumps(obj)) + int(total)


#: The process probe's name and version (a change to its work or to when it is timed is a new
#: version, never adjusted across). v1 was timed beside each row's samples; v2 after the task was
#: loaded, before its first call; v3 before the task is loaded.
PROBE = "sort-200k-start-v3"
#: Timed probe calls at the run's start (after one untimed call).
PROBE_CALLS = 16


@lru_cache(maxsize=1)
def _probe_data() -> np.ndarray:
    return np.random.default_rng(20261204).random(200_000)


def probe(clock: HostClock = host_clock, calls: int = PROBE_CALLS) -> list[int]:
    """Time the process probe ``calls`` times (after one untimed call): the durations in ns."""
    data = _probe_data()
    np.sort(data)
    out = []
    for _ in range(calls):
        t0 = clock()
        np.sort(data)
        out.append(clock() - t0)
    return out


def measure_control(clock: HostClock = host_clock, calls: int = CALLS,
                    warmup: int = WARMUP) -> dict[str, Any]:
    """Time the control ``calls`` times after ``warmup`` untimed calls: its p50, the standard
    error of its log p50 (for comparing processes), and what it is."""
    doc = _document()
    for _ in range(warmup):
        _work(doc)
    samples = np.empty(calls, dtype=np.int64)
    for i in range(calls):
        t0 = clock()
        _work(doc)
        samples[i] = clock() - t0
    x = np.sort(samples)
    return {"name": NAME, "row_probe": PROBE, "n": calls, "p50_ns": int(round(quantile(x, 0.5))),
            "se_log": log_quantile_se(x, 0.5), "min_ns": int(x[0]),
            "what": "decode a fixed 12 KB JSON document, sort and sum its numbers, encode it again"}
