"""Time a run spends writing its receipt as rows come in: 200 rows × 5,000 samples.

Run: python -m benchmarks.receipt_saves [--label after] [--samples 5000]
         [--out benchmarks/results-receipt-saves.json]

A run writes its receipt after every (runner, case) row, so that a crash loses nothing already
measured. This replays that: the synthetic receipt of ``benchmarks.export_memory`` (seeded)
with 200 rows of 5,000 samples (a run of 200 rows may take at most 5,373 a row: its receipt
must stay under the read limit), loaded, emptied of its rows, then given its rows back one at
a time through ``ReceiptSet.add_rows``, each write atomic (temporary file, fsync, rename) as
in a run. It prints the seconds of all the writes, the first and the last,
and checks that the final file's bytes are ``encode_receipt`` of the final receipt. The time is
wall time on whatever machine runs it: record the load beside it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchbox.receipts import load_receipt
from benchbox.receipts.build import ReceiptSet
from benchbox.receipts.io import encode_receipt
from benchmarks.export_memory import ROWS, _commit, make_receipt, record


def replay(folder: Path, samples: int) -> dict[str, Any]:
    source = folder / "big.json"
    make_receipt(source, samples=samples)
    full = load_receipt(source)
    book = ReceiptSet([folder / "run.json"], [replace(full, results=())])
    book.save()
    saves = []
    for row in full.results:
        t = time.perf_counter()
        book.add_rows([row])
        saves.append(time.perf_counter() - t)
    final = (folder / "run.json").read_bytes()
    if final != encode_receipt(book.receipts[0]):
        raise SystemExit("the file written row by row is not encode_receipt of the final receipt")
    return {"commit": _commit(), "samples_per_row": samples, "receipt_mb": round(len(final) / 2**20, 1),
            "rows": len(saves),
            "all_writes_s": round(sum(saves), 2), "first_write_s": round(saves[0], 3),
            "last_write_s": round(saves[-1], 3), "load_1min": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="current")
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="benchbox-receipt-saves-") as tmp:
        got = replay(Path(tmp), args.samples)
    what = f"seconds a run spends writing its receipt after each of {ROWS} rows"
    record(args.out, args.label, got, what=what,
           command="python -m benchmarks.receipt_saves --label LABEL "
                   "--out benchmarks/results-receipt-saves.json")


if __name__ == "__main__":
    main()
