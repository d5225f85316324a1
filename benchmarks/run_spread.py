"""How alike are the runs of one side? Reads the per-run receipts that
``benchmarks/ci_false_alarms.py --keep DIR`` keeps (NAME-REP-SIDE-I.json) and prints, for a
scenario: the correlation between cases of the per-run log p50 (a factor shared by the whole
run), and the sd of log(head/base) over adjacent (paired) runs against unpaired runs.

    python benchmarks/run_spread.py DIR [--scenario rest] [--reps 20] [--runs 5]
"""

from __future__ import annotations

import argparse
import math
import statistics as st
import sys
from pathlib import Path

import numpy as np


def per_run_p50(folder: Path, scenario: str, rep: int, side: str, runs: int) -> list[dict[str, float]]:
    from benchbox.receipts import load_receipt

    out = []
    for i in range(runs):
        r = load_receipt(folder / f"{scenario}-{rep}-{side}-{i}.json")
        out.append({row.case: math.log(row.summary.p50_ns) for row in r.results if row.summary.p50_ns})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--scenario", default="rest")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args(argv)
    rows, paired, unpaired = [], [], []
    for rep in range(a.reps):
        base = per_run_p50(a.folder, a.scenario, rep, "base", a.runs)
        head = per_run_p50(a.folder, a.scenario, rep, "head", a.runs)
        cases = sorted(base[0])
        rows += [[run[c] for c in cases] for run in base + head]
        for c in cases:
            paired.append(st.stdev([h[c] - b[c] for b, h in zip(base, head)]))
            unpaired.append(math.sqrt(st.variance([b[c] for b in base]) + st.variance([h[c] for h in head])))
    x = np.array(rows)
    corr = np.atleast_2d(np.corrcoef((x - x.mean(0)).T))
    off = corr[~np.eye(len(corr), dtype=bool)]
    print(f"{a.scenario}: {len(rows)} runs, {x.shape[1]} cases")
    if off.size:  # one case: no pair of cases to correlate
        print(f"correlation between cases of the per-run log p50: {off.min():.2f}–{off.max():.2f}")
    print(f"sd of log p50 per case across runs: {', '.join(f'{v:.3f}' for v in x.std(0, ddof=1))}")
    print(f"median sd of log(head/base): paired {st.median(paired):.3f}, unpaired {st.median(unpaired):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
