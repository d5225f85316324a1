"""False alarms and misses of the history's two judges: per-step diffs and Otava change points.

Run: python -m benchmarks.changepoints [--histories 100] [--out benchmarks/results-changepoints.json]

Each history is the test fixture's (tests/history_fixture.py): 50 commits, 2 runners × 2
cases, 400 samples a run, 2% run-to-run machine noise plus 1% per row, noisy and unsettled
runs, written through the receipt writer and added to a store. For every seed the same
history is analysed twice, without a step and with a +15% step in one series at a random
commit (5..45), exactly as `benchbox report` analyses a store. Counted:

- change points: histories with any change point when there is no step (false alarms);
  histories where the step is found at exactly its commit and nowhere else, found within
  one commit, or missed;
- steps: the share of per-step diffs judged slower or faster when nothing changed (what
  a per-push diff alone would raise), and whether the diff at the step's commit says slower;
- time (with --timings): `store add` of 50 receipts, and analysis plus site writing
  (`benchbox report`). Timings depend on the machine and its load: take them on an idle one.

The counts do not depend on the machine: every history is seeded.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchbox.report import analyze
from benchbox.report.site import write_site
from benchbox.store import Store
from tests.history_fixture import HistorySpec, write_history


def one(seed: int, step_at: int, work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"seed": seed, "step_at": step_at}
    for label, step in (("flat", 0.0), ("step", 0.15)):
        spec = HistorySpec(seed=seed, step=step, step_at=step_at)
        folder = work / f"{seed}-{label}"
        paths = write_history(folder / "in", spec)
        t0 = time.perf_counter()
        store = Store(folder / "store")
        store.add(paths)
        t1 = time.perf_counter()
        history = analyze(store)
        write_site(history, store, folder / "site")
        t2 = time.perf_counter()
        series = [s for p in history.pages for s in p.series]
        changes = [(s.case, s.runner, c.point.index) for s in series for c in s.changes]
        verdicts = [p.step.verdict for s in series for p in s.points if p.step]
        stepped = next(s for s in series if (s.case, s.runner) == spec.step_series)
        out[label] = {
            "changes": changes,
            "alarms": sum(v in ("slower", "faster") for v in verdicts),
            "steps": len(verdicts),
            "verdict_at_step": stepped.points[step_at].step.verdict,  # type: ignore[union-attr]
            "add_s": t1 - t0, "report_s": t2 - t1,
        }
        shutil.rmtree(folder)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--histories", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--timings", action="store_true",
                    help="also report the median store-add and report times (take them on an idle machine)")
    args = ap.parse_args()
    rng = np.random.default_rng(12345)
    work = Path(tempfile.mkdtemp(prefix="changepoints."))
    runs = []
    try:
        for seed in range(args.histories):
            runs.append(one(seed, int(rng.integers(5, 46)), work))
            r = runs[-1]
            print(f"seed {seed}: step at {r['step_at']}: found {r['step']['changes']}; "
                  f"no step: {r['flat']['changes']}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = len(runs)
    target = HistorySpec().step_series

    def exact(r: dict[str, Any]) -> bool:
        return r["step"]["changes"] == [(*target, r["step_at"])]

    def near(r: dict[str, Any]) -> bool:
        return any((c, ru) == target and abs(i - r["step_at"]) <= 1 for c, ru, i in r["step"]["changes"])

    summary = {
        "histories": n,
        "no_step_histories_with_a_change_point": sum(bool(r["flat"]["changes"]) for r in runs) / n,
        "step_found_exactly_and_alone": sum(exact(r) for r in runs) / n,
        "step_found_within_one_commit": sum(near(r) for r in runs) / n,
        "step_histories_with_another_change_point": sum(
            any((c, ru) != target or abs(i - r["step_at"]) > 1 for c, ru, i in r["step"]["changes"])
            for r in runs) / n,
        "per_step_diff_alarms_without_a_step": sum(r["flat"]["alarms"] for r in runs)
        / sum(r["flat"]["steps"] for r in runs),
        "diff_says_slower_at_the_step": sum(r["step"]["verdict_at_step"] == "slower" for r in runs) / n,
    }
    if args.timings:
        for key, name in (("add_s", "store_add_50_receipts_s_median"), ("report_s", "report_s_median")):
            summary[name] = float(np.median([r[k][key] for r in runs for k in ("flat", "step")]))
    else:
        for r in runs:
            for k in ("flat", "step"):
                del r[k]["add_s"], r[k]["report_s"]
    result = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": platform.node(),
              "cpu_count": os.cpu_count(), "python": platform.python_version(),
              "method": HistorySpec.__doc__, "spec": {k: str(v) for k, v in
                                                       dataclasses.asdict(HistorySpec()).items()},
              "summary": summary, "runs": runs}
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
