"""How long the receipt loader takes to read three kinds of receipt.

Run: python -m benchmarks.receipt_loads [--label after] [--out benchmarks/results-receipt-loads.json]

Every command that reads a receipt (show, diff, plot, combine, export, store, report) parses it
with ``benchbox.receipts.io.parse_receipt``: JSON, then the typed model's checks of every field.
Three seeded documents, each parsed from bytes already in memory, several times in one process
after one untimed parse:

- ``golden``: the test suite's golden receipt (one run of the built-in task, 19 KB);
- ``picks``: 200 compiled rows of 400 samples, each row's runner report holding 40 autotune
  picks (a large model's compile): many small records, few samples;
- ``samples``: 200 rows × 5,000 samples (``benchmarks.export_memory``'s receipt): few records,
  many samples.

It prints the median and the fastest parse of each, in milliseconds. The time is wall time on
whatever machine runs it: record the load beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchbox import stats
from benchbox.receipts.io import parse_receipt, write_receipt
from benchmarks.export_memory import GOLDEN, _commit, make_receipt, record

#: parses timed per document (after one untimed parse)
REPEATS = {"golden": 200, "picks": 9, "samples": 5}


def _pick(i: int) -> dict[str, Any]:
    return {"kind": "autotune_choice", "op": f"op{i}", "input_shapes": [["4", "64", "64"]] * 2,
            "chosen": f"triton_bmm_{i}", "chosen_kind": "triton_template", "chosen_ms": 0.1,
            "alternatives": [{"kernel": "bmm", "ms": 0.13}], "count": 1}


def picks_receipt(path: Path, rows: int = 200, samples: int = 400, picks: int = 40, seed: int = 1) -> None:
    """The golden receipt's first row as ``rows`` compiled rows, each with ``picks`` autotune picks."""
    rng = np.random.default_rng(seed)
    doc = json.loads(GOLDEN.read_text())
    template = {k: v for k, v in doc["results"][0].items() if k not in ("round_process", "process_probe_ns")}
    out = []
    for i in range(rows):
        region = rng.lognormal(13.8, 0.05, samples).astype(np.int64).tolist()
        report = dict(template["runner_report"], fallbacks=[_pick(j) for j in range(picks)])
        out.append({**template, "runner": "torch-compile", "case": f"case-{i:03d}", "samples_ns": region,
                    "round_sizes": [samples], "stages_ns": {"parse": region}, "reasons": [],
                    "summary": stats.summarize(region), "steady_state": stats.steady_state(region),
                    "runner_report": report})
    doc["task"]["cases"] = [{"name": f"case-{i:03d}", "request_sha256": "0" * 64} for i in range(rows)]
    for row in out:
        row["request_sha256"] = "0" * 64
    doc["results"] = out
    for key in ("comparisons", "processes"):
        doc.pop(key, None)
    write_receipt(path, doc)


def time_parses(data: bytes, name: str, repeats: int) -> dict[str, Any]:
    parse_receipt(data, name)  # untimed: the first parse also builds the decoders
    took = []
    for _ in range(repeats):
        t = time.perf_counter()
        parse_receipt(data, name)
        took.append(time.perf_counter() - t)
    return {"kb": round(len(data) / 1024), "parses": repeats,
            "median_ms": round(statistics.median(took) * 1e3, 2), "min_ms": round(min(took) * 1e3, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="current")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    got: dict[str, Any] = {"commit": _commit()}
    with tempfile.TemporaryDirectory(prefix="benchbox-receipt-loads-") as tmp:
        picks_receipt(Path(tmp) / "picks.json")
        make_receipt(Path(tmp) / "samples.json", samples=5000)
        for name in REPEATS:
            path = GOLDEN if name == "golden" else Path(tmp) / f"{name}.json"
            got[name] = time_parses(path.read_bytes(), name, REPEATS[name])
    got["load_1min"] = os.getloadavg()[0]
    record(args.out, args.label, got, what="milliseconds the receipt loader takes to parse a receipt",
           command="python -m benchmarks.receipt_loads --label LABEL "
                   "--out benchmarks/results-receipt-loads.json")


if __name__ == "__main__":
    main()
