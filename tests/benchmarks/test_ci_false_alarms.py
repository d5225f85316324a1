"""Smoke test of benchmarks/ci_false_alarms.py: two small repetitions of every scenario, JSON out.

It checks the script's plumbing (runs, load, injected slowdown, diff, counts), never the
rates: those need the full 20 repetitions on a machine at rest.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.ci_false_alarms import SCENARIOS, main


def test_two_small_repetitions_write_counts_per_scenario(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    rc = main(["--reps", "2", "--samples", "24", "--repeats", "2", "--warmup", "1", "--case", "invoice",
               "--out", str(out)])
    assert rc == 0
    r = json.loads(out.read_text())
    assert r["slowdown_us"] >= 1
    for name in SCENARIOS:
        s = r[name]
        assert s["reps"] == 2 and s["exit_0"] + s["exit_1"] + s["exit_3"] == 2
        assert all(run["exit_code"] in (0, 1, 3) for run in s["runs"])
        assert all(sum(run["verdicts"].values()) == 1 for run in s["runs"])


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    assert main(["--reps", "0", "--out", str(tmp_path / "x.json")]) == 2
