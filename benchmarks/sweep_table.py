"""Markdown tables of sweeps: per contract, point and runner, p50/p99 and every stage's median.

Run:  python -m benchmarks.sweep_table SWEEP_DIR...   (each holding a sweep.json index)
Needs no GPU and no torch. Times in µs; ``util`` is offered rate × mean service time.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from benchbox.contracts import TIMELINE
from benchbox.receipts import load_receipt


def us(ns: float | None) -> str:
    return "–" if ns is None else f"{ns / 1e3:.1f}"


def table(folder: Path) -> str:
    index = json.loads((folder / "sweep.json").read_text())
    lines = [f"### {folder}", ""]
    thr = index.get("throughput_per_s") or {}
    if thr:
        lines += ["back-to-back throughput: " + ", ".join(f"{r} {t:,.0f}/s" for r, t in thr.items()), ""]
    for contract in index["contracts"]:
        rows = []
        for p in index["points"]:
            if p["contract"] != contract:
                continue
            path = folder / p["receipt"]
            if not path.exists():
                continue
            r = load_receipt(path)
            for row in r.results:
                if not row.samples_ns:
                    rows.append((p["point"], row.runner, row.status, None, None, None, None, {}))
                    continue
                load = row.load
                stages = {s: statistics.median(v) for s, v in row.stages_ns.items() if v}
                rows.append((p["point"], row.runner, row.status, row.summary.p50_ns, row.summary.p99_ns,
                             load.offered_per_s if load else None,
                             load.utilisation if load else None, stages))
        present = [s for s in TIMELINE if any(s in x[7] for x in rows)]
        lines.append(f"**{contract}** (µs; stage columns are medians)")
        lines.append("")
        head = ["point", "runner", "status", "p50", "p99", "offered/s", "util", *present]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|---" * (7 + len(present)) + "|")
        for point, runner, status, p50, p99, offered, util, stages in rows:
            cells = [point, runner, status, us(p50), us(p99), "–" if offered is None else f"{offered:,.0f}",
                     "–" if util is None else f"{util:.2f}", *(us(stages.get(s)) for s in present)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv if (Path(a) / "sweep.json").exists()]
    if not folders:
        print("usage: python -m benchmarks.sweep_table SWEEP_DIR... (folders with a sweep.json)",
              file=sys.stderr)
        return 2
    print("\n".join(table(f) for f in folders))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
