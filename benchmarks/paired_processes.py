"""Do two processes that run at the same time share their slowness? (A paired design's premise.)

Between processes the p50 of one call on the 2-core machine spreads by sd 0.14–0.19 in log
(BENCHMARKS §4). If what makes a process slow were the machine's state of the moment, two
processes running at the same time — BASE pinned to CPU 0, HEAD to CPU 1 — would be slow
together, and their ratio would be far steadier than either (a paired design, one pair per
time slot). If it is the process's own draw (its memory layout), they would not.

Each of ``--pairs`` pairs is measured twice: ``concurrent`` (the two processes started
together, one per CPU) and ``sequential`` (one after the other, both on CPU 0). Per case it
prints and writes the sd of each side's log p50, their correlation, and the sd of the log ratio.

    nice -n -20 python -m benchmarks.paired_processes --pairs 14 \\
        --out benchmarks/results-paired-processes-cpu.json

Timings: run it alone on the machine; the load is recorded before and after.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def command(out: Path, cpu: int, a: argparse.Namespace) -> list[str]:
    """One ``benchbox run`` pinned to ``cpu`` (the CI recipe's per-process settings)."""
    args = ["taskset", "-c", str(cpu), sys.executable, "-m", "benchbox", "run", "--samples", str(a.samples),
            "--threads", "1", "--warmup", "10", "--runner", "torch-eager", "--contract",
            "public_task_call_wall", "--out", str(out), "--quiet", "--overwrite"]
    for c in a.case:
        args += ["--case", c]
    return args


def p50s(path: Path) -> dict[str, float]:
    """The p50 of every case of one receipt, from its samples."""
    doc = json.loads(path.read_text())
    return {r["case"]: float(np.median(r["samples_ns"])) for r in doc["results"]}


def _pair(folder: Path, i: int, a: argparse.Namespace, concurrent: bool) -> tuple[dict, dict]:
    base, head = folder / f"{i}-{'c' if concurrent else 's'}-base.json", \
        folder / f"{i}-{'c' if concurrent else 's'}-head.json"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": REPO}
    if concurrent:
        procs = [subprocess.Popen(command(p, cpu, a), **quiet) for p, cpu in ((base, 0), (head, 1))]
        for p in procs:
            p.wait()
    else:
        for p in (base, head):
            subprocess.run(command(p, 0, a), check=False, **quiet)
    return p50s(base), p50s(head)


def summary(pairs: list[tuple[dict, dict]]) -> dict[str, dict[str, float]]:
    """Per case: each side's sd of log p50, their correlation, the sd and mean of log(head/base)."""
    out = {}
    for case in pairs[0][0]:
        x = np.log([b[case] for b, _ in pairs])
        y = np.log([h[case] for _, h in pairs])
        out[case] = {"sd_base": float(x.std(ddof=1)), "sd_head": float(y.std(ddof=1)),
                     "correlation": float(np.corrcoef(x, y)[0, 1]),
                     "sd_log_ratio": float((y - x).std(ddof=1)),
                     "mean_ratio": math.exp(float((y - x).mean()))}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=14)
    ap.add_argument("--samples", type=int, default=80)
    ap.add_argument("--case", action="append", default=[], help="cases (default: invoice and image)")
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.pairs < 3 or (os.cpu_count() or 1) < 2:
        print("paired_processes: needs --pairs ≥ 3 and two CPUs", file=sys.stderr)
        return 2
    a.case = a.case or ["invoice", "image"]
    folder = a.keep or Path(tempfile.mkdtemp(prefix="paired-"))
    folder.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"command": ["python", "-m", "benchmarks.paired_processes",
                                          *(argv if argv is not None else sys.argv[1:])],
                              "loadavg_before": list(os.getloadavg())}
    runs: dict[str, list] = {"concurrent": [], "sequential": []}
    t0 = time.time()
    for i in range(a.pairs):
        runs["concurrent"].append(_pair(folder, i, a, True))
        runs["sequential"].append(_pair(folder, i, a, False))
        print(f"pair {i + 1}/{a.pairs} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    result.update({k: {"per_case": summary(v), "pairs": v} for k, v in runs.items()})
    result["loadavg_after"] = list(os.getloadavg())
    result["seconds"] = round(time.time() - t0, 1)
    for k in runs:
        for case, s in result[k]["per_case"].items():
            print(f"{k:10} {case:8} sd base {s['sd_base']:.3f} head {s['sd_head']:.3f}  correlation "
                  f"{s['correlation']:+.2f}  sd of log ratio {s['sd_log_ratio']:.3f}")
    if a.out:
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
