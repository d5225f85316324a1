"""Peak memory of `benchbox export` on a large receipt: 200 rows × 10,000 samples.

Run: python -m benchmarks.export_memory [--label after] [--out benchmarks/results-export-memory.json]

The receipt is synthetic and seeded: the golden receipt's first row copied to 200 cases, each
with 10,000 log-normal samples and the same number per stage, its summary computed by
benchbox, written by the receipt writer (about 150 MB). Each measurement is one fresh process
(`python -m benchbox export RECEIPT --format F -o FILE`, and, for reference, one that only
loads the receipt); its peak resident set size is the kernel's (getrusage of the child,
ru_maxrss). Memory, unlike time, does not depend on the machine's load. With --out the
result is merged into the file under --label (and the measured commit), so the figures of
two revisions sit side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchbox import stats
from benchbox.receipts.io import write_receipt

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "receipt-v2.json"
ROWS, SAMPLES = 200, 10_000


def make_receipt(path: Path, rows: int = ROWS, samples: int = SAMPLES, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    doc = json.loads(GOLDEN.read_text())
    template = doc["results"][0]
    out = []
    for i in range(rows):
        row = json.loads(json.dumps({k: v for k, v in template.items()
                                     if k not in ("samples_ns", "stages_ns")}))
        region = rng.lognormal(13.8, 0.1, samples).astype(np.int64)
        row.update(case=f"case-{i:03d}", samples_ns=region.tolist(), round_sizes=[samples],
                   stages_ns={s: (region // 8).tolist() for s in template["stages_ns"]},
                   summary=stats.summarize(region.tolist()))
        row.pop("round_process", None)
        out.append(row)
    doc["results"] = out
    doc.pop("comparisons", None)
    doc.pop("processes", None)
    write_receipt(path, doc)


def peak_rss_mb(argv: list[str]) -> float:
    """The peak resident set size (MiB) of one run of ``argv`` (ru_maxrss of the child)."""
    proc = subprocess.Popen(argv, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[3:5]} failed: {err.strip()[-500:]}")
    return round(usage.ru_maxrss / 1024, 1)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="current")
    ap.add_argument("--formats", default="csv,parquet")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="benchbox-export-memory-") as tmp:
        receipt = Path(tmp) / "big.json"
        make_receipt(receipt)
        py = [sys.executable]
        got: dict[str, Any] = {
            "commit": _commit(), "receipt_mb": round(receipt.stat().st_size / 2**20, 1),
            "load_only_mb": peak_rss_mb([*py, "-c", "import sys; from benchbox.receipts import load_receipt; "
                                        "load_receipt(sys.argv[1])", str(receipt)]),
        }
        for fmt in args.formats.split(","):
            got[f"export_{fmt}_mb"] = peak_rss_mb([*py, "-m", "benchbox", "export", str(receipt), "--format",
                                                  fmt, "-o", str(Path(tmp) / f"out.{fmt}")])
    record(args.out, args.label, got, what=f"peak RSS (MiB) of benchbox export of a {ROWS} rows x "
                                          f"{SAMPLES:,} samples receipt",
           command="python -m benchmarks.export_memory --label LABEL "
                   "--out benchmarks/results-export-memory.json")


def record(out: Path | None, label: str, got: dict[str, Any], what: str, command: str) -> None:
    """Print ``got``; with ``out``, merge it into that file under ``label`` (with the machine and
    the time), beside the labels already there."""
    result: dict[str, Any] = json.loads(out.read_text()) if out and out.exists() else {}
    result.update({
        "what": what, "command": command,
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version()},
    })
    when = datetime.now(UTC).isoformat(timespec="seconds")
    result.setdefault("runs", {})[label] = {**got, "taken_at": when}
    if out:
        out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({label: got}, indent=1))

if __name__ == "__main__":
    main()
