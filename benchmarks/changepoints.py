"""False alarms and misses of the history site's judges: Otava change points, each judged by
benchbox diff on up to 10 runs either side (combined), against single-run per-step diffs.

Run: python -m benchmarks.changepoints [--histories 100] [--out benchmarks/results-changepoints.json]
     [--readme README.md]
Check: python -m benchmarks.changepoints --check README.md [--results benchmarks/results-changepoints.json]

``--readme`` rewrites the README's paragraph between the ``<!-- benchmarks.changepoints -->``
markers from this run's counts; ``--check`` runs nothing and exits 1 when that paragraph is
not the one the committed results give (tests/report/test_changepoints_claim.py does both
that and a rerun of the first history).

Each history is the test fixture's (tests/history_fixture.py): 50 commits, 2 runners × 2
cases, 400 samples a run, 2% run-to-run machine noise plus 1% per row, noisy and unsettled
runs, written through the receipt writer and added to a store. For every seed the same
history is analysed twice, without a step and with a +15% step in one series at a random
commit (5..45), exactly as `benchbox report` analyses a store. Counted:

- change points: histories with any change point when there is no step (false alarms);
  histories where the step is found at exactly its commit and nowhere else, found within
  one commit, or missed;
- the change point's verdict: benchbox diff on up to 10 runs either side of it, each side
  combined (what the site shows), at the step, and at any change point found without a step;
- single-run steps: every commit's receipt diffed against its predecessor's (what a per-push
  diff of one run a side would say), counted by verdict without a step and read at the step.
  The diff judges the spread between processes, so one run a side is always `unresolved`:
  the site shows no per-step verdicts, and this count checks that reason;
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
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchbox.receipts.diff import diff_receipts
from benchbox.report import analyze
from benchbox.report.site import write_site
from benchbox.store import Store
from tests.history_fixture import HistorySpec, write_history


def single_run_steps(store: Store, series: list[Any], step_series: tuple[str, str],
                     step_at: int) -> tuple[Counter[str], str]:
    """Every point's receipt diffed against its predecessor's: the verdicts, and the one at the step."""
    verdicts: Counter[str] = Counter()
    at_step = "none"
    diffs: dict[tuple[str, str], Any] = {}
    for s in series:
        for prev, p in zip(s.points, s.points[1:]):
            if (prev.identity, p.identity) not in diffs:
                diffs[(prev.identity, p.identity)] = diff_receipts(store.load(prev.identity),
                                                                   store.load(p.identity))
            d = diffs[(prev.identity, p.identity)]
            row = next(r for r in d.rows if (r.case, r.runner) == (s.case, s.runner))
            verdicts[row.verdict] += 1
            if (s.case, s.runner) == step_series and p.index == step_at:
                at_step = row.verdict
    return verdicts, at_step


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
        verdicts, at_step = single_run_steps(store, series, spec.step_series, step_at)
        out[label] = {
            "changes": [(s.case, s.runner, c.point.index, c.step.verdict) for s in series for c in s.changes],
            "single_run_steps": dict(verdicts),
            "single_run_verdict_at_step": at_step,
            "add_s": t1 - t0, "report_s": t2 - t1,
        }
        shutil.rmtree(folder)
    return out


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(runs)
    target = HistorySpec().step_series

    def at_step(r: dict[str, Any], within: int) -> list[str]:
        """The verdicts of change points of the stepped series within ``within`` commits of the step."""
        return [v for c, ru, i, v in r["step"]["changes"]
                if (c, ru) == target and abs(i - r["step_at"]) <= within]

    flat_changes = [v for r in runs for *_, v in r["flat"]["changes"]]
    steps: Counter[str] = Counter()
    for r in runs:
        steps.update(r["flat"]["single_run_steps"])
    return {
        "histories": n,
        "no_step_histories_with_a_change_point": sum(bool(r["flat"]["changes"]) for r in runs) / n,
        "no_step_change_points_judged_slower_or_faster": sum(v in ("slower", "faster") for v in flat_changes),
        "no_step_change_points": len(flat_changes),
        "step_found_exactly_and_alone": sum(
            [(c, ru, i) for c, ru, i, _ in r["step"]["changes"]] == [(*target, r["step_at"])]
            for r in runs) / n,
        "step_found_at_its_commit": sum(bool(at_step(r, 0)) for r in runs) / n,
        "step_found_within_one_commit": sum(bool(at_step(r, 1)) for r in runs) / n,
        "step_histories_with_another_change_point": sum(
            any((c, ru) != target or abs(i - r["step_at"]) > 1 for c, ru, i, _ in r["step"]["changes"])
            for r in runs) / n,
        "change_point_at_the_step_judged_slower": sum(at_step(r, 1)[:1] == ["slower"] for r in runs) / n,
        "single_run_step_verdicts_without_a_step": dict(steps),
        "single_run_step_alarms_without_a_step": (steps["slower"] + steps["faster"]) / sum(steps.values()),
        "single_run_diff_says_slower_at_the_step": sum(
            r["step"]["single_run_verdict_at_step"] == "slower" for r in runs) / n,
    }


BEGIN, END = "<!-- benchmarks.changepoints -->", "<!-- /benchmarks.changepoints -->"
RESULTS = Path(__file__).with_name("results-changepoints.json")


def readme_text(result: dict[str, Any]) -> str:
    """The README's paragraph on these counts (what --readme writes and --check compares)."""
    s = summarize(result["runs"])
    n = s["histories"]

    def of(key: str) -> str:
        return f"{round(s[key] * n)} of {n}"

    verdicts = s["single_run_step_verdicts_without_a_step"]
    steps = sum(verdicts.values())
    listed = ", ".join(f"{v} {k}" for k, v in sorted(verdicts.items(), key=lambda kv: -kv[1]))
    return (f"Over {n} seeded fixture histories (`python -m benchmarks.changepoints --out "
            f"benchmarks/results-changepoints.json --readme README.md`; the counts are seeded, so any "
            f"machine gives the same; `--check README.md` compares this paragraph with the committed "
            f"results): a +15% step at a random commit was found as a change point at exactly its commit "
            f"in {of('step_found_at_its_commit')} histories (and nowhere else in "
            f"{of('step_found_exactly_and_alone')}), within one commit in "
            f"{of('step_found_within_one_commit')}, and benchbox diff on up to 10 runs either side judged "
            f"it `slower` in {of('change_point_at_the_step_judged_slower')}. "
            f"{of('no_step_histories_with_a_change_point')} histories without a step had a change point "
            f"({s['no_step_change_points']} in all, {s['no_step_change_points_judged_slower_or_faster']} "
            f"of them judged slower or faster by the diff on the runs either side{_at_end(result)}). "
            f"A diff of each commit's "
            f"single-run receipt against its predecessor's said `slower` at the step in "
            f"{of('single_run_diff_says_slower_at_the_step')}, and without a step gave, of {steps} steps: "
            f"{listed} — one run a side is one process, and the diff needs processes to judge, so the "
            f"site shows no per-commit verdicts.")


def _at_end(result: dict[str, Any]) -> str:
    """Where the judged change points without a step sit: at a series' last point, one run after it."""
    last = HistorySpec().commits - 1
    judged = [i for r in result["runs"] for *_, i, v in r["flat"]["changes"] if v in ("slower", "faster")]
    at_end = sum(i == last for i in judged)
    return f", {at_end} of those at a series' last point, with one run after it" if judged else ""


def check_readme(readme: Path, results: Path) -> str | None:
    """None when the README's paragraph is the one ``results`` gives, else what differs."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        return f"{readme}: no {BEGIN} ... {END} paragraph"
    found = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    want = readme_text(json.loads(results.read_text()))
    return None if " ".join(found.split()) == " ".join(want.split()) else (
        f"{readme}: the changepoints paragraph disagrees with {results}:\n  README: {found}\n"
        f"  results: {want}")


def write_readme(readme: Path, result: dict[str, Any]) -> None:
    import textwrap

    text = readme.read_text()
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    body = textwrap.fill(readme_text(result), width=90, break_long_words=False, break_on_hyphens=False)
    readme.write_text(f"{before}{BEGIN}\n{body}\n{END}{after}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--histories", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--readme", type=Path, default=None, help="rewrite this README's paragraph from this run")
    ap.add_argument("--check", type=Path, default=None, metavar="README",
                    help="run nothing: exit 1 when the README's paragraph disagrees with --results")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--timings", action="store_true",
                    help="also report the median store-add and report times (take them on an idle machine)")
    args = ap.parse_args()
    if args.check:
        problem = check_readme(args.check, args.results)
        print(problem or f"{args.check}: the changepoints paragraph agrees with {args.results}")
        raise SystemExit(1 if problem else 0)
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
    summary = summarize(runs)
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
    if args.readme:
        write_readme(args.readme, result)
        print(f"rewrote the changepoints paragraph of {args.readme}")


if __name__ == "__main__":
    main()
