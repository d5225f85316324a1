"""How long `benchbox diff` takes on two synthetic receipts of 1,000 rows × 1,000 samples.

Run: python benchmarks/diff_speed.py [--rows 1000] [--samples 1000] [--processes 5] [--keep DIR]

The receipts are written to disk and loaded through benchbox.receipts.load_receipt, as
the CLI does, so the figure splits into loading (JSON parse and checks) and the diff
itself (Welch's t over the processes' log-quantiles, the stage explanation for every row,
Holm); then
one loaded receipt is written again, as a run rewrites its receipt after every case.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchbox import stats
from benchbox.contracts import STAGES, load_contract
from benchbox.receipts import load_receipt, write_receipt
from benchbox.receipts.diff import DiffOptions, diff_receipts

#: a receipt written by ``benchbox run`` (the current schema): the synthetic receipts keep its header
GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden" / "receipt-v2.json"


def synthetic(rows: int, samples: int, seed: int, slow_every: int = 0, processes: int = 5) -> dict[str, Any]:
    """A complete receipt (the golden one's header) whose rows' stage samples are lognormal noise,
    taken as ``processes`` rounds in fresh processes (as ``benchbox run --repeats`` takes them)."""
    rng = np.random.default_rng(seed)
    sizes = [samples // processes] * (processes - 1)
    sizes.append(samples - sum(sizes))
    doc = json.loads(GOLDEN.read_text())
    template = {k: v for k, v in doc["results"][0].items() if k != "process_probe_ns"}
    c = load_contract(doc["contract"]["name"])
    results, cases = [], []
    for i in range(rows):
        stages = {s: (rng.lognormal(np.log(1e5 * (1 + k)), 0.2, samples)).astype(np.int64)
                  for k, s in enumerate(STAGES) if s in c.stages}
        if slow_every and i % slow_every == 0 and "serialize" in stages:
            stages["serialize"] = (stages["serialize"] * 1.5).astype(np.int64)
        region = sum(stages.values()).tolist()
        sha = hashlib.sha256(str(i // 4).encode()).hexdigest()
        case = {"name": f"case{i // 4:04d}", "request_sha256": sha}
        if i % 4 == 0:
            cases.append(case)
        results.append({**template, "runner": f"runner{i % 4}", "case": case["name"],
                        "request_sha256": case["request_sha256"], "samples_ns": region,
                        "round_sizes": sizes, "round_process": list(range(processes)),
                        "stages_ns": {s: v.tolist() for s, v in stages.items()},
                        "summary": stats.summarize(region), "steady_state": _steady(region, sizes)})
    doc["task"]["cases"] = cases
    doc["results"] = results
    doc["settings"] = {**doc["settings"], "repeats": processes, "fresh_processes": processes > 1}
    doc["processes"] = [{"pid": 1000 + i} for i in range(processes)]
    doc.pop("comparisons", None)
    return doc


def _steady(region: list[int], sizes: list[int]) -> Any:
    if len(sizes) < 2:
        return stats.steady_state(region)
    bounds = np.cumsum([0, *sizes])
    return stats.steady_state_rounds([np.asarray(region[a:b]) for a, b in zip(bounds[:-1], bounds[1:])])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--processes", type=int, default=5, help="rounds a side, each in a process of its own")
    ap.add_argument("--keep", type=Path, default=None, help="write the receipts here and keep them")
    args = ap.parse_args(argv)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="diff_speed."))
    base_p, head_p = folder / "base.json", folder / "head.json"
    write_receipt(base_p, synthetic(args.rows, args.samples, 1, processes=args.processes))
    write_receipt(head_p, synthetic(args.rows, args.samples, 2, slow_every=50, processes=args.processes))
    size_mb = (base_p.stat().st_size + head_p.stat().st_size) / 1e6

    t0, c0 = time.perf_counter(), time.process_time()
    base, head = load_receipt(base_p), load_receipt(head_p)
    t1, c1 = time.perf_counter(), time.process_time()
    result = diff_receipts(base, head, DiffOptions())
    t2, c2 = time.perf_counter(), time.process_time()
    again = folder / "base-again.json"
    write_receipt(again, base)  # as a run rewrites its receipt after each case: encode, write, fsync
    t3 = time.perf_counter()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}")
    print(f"receipts: {args.rows} rows × {args.samples} samples each, {args.processes} processes a side "
          f"({size_mb:.0f} MB of JSON together)")
    print(f"load both: {t1 - t0:.2f} s wall ({c1 - c0:.2f} s CPU)   diff: {t2 - t1:.2f} s wall "
          f"({c2 - c1:.2f} s CPU)   total: {t2 - t0:.2f} s wall")
    print(f"write one loaded receipt again: {t3 - t2:.2f} s wall")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print(f"verdicts: {result.counts()}  exit code {result.exit_code}")
    if args.keep is None:
        again.unlink()
        base_p.unlink()
        head_p.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
