"""Smoke tests of benchmarks/ci_false_alarms.py: small repetitions of its scenarios, JSON out.

It checks the script's plumbing (runs, load, injected slowdown, diff, counts), never the
rates: those need the full 20 repetitions on a machine at rest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.ci_false_alarms import SCENARIOS, main


def test_small_repetitions_write_counts_per_scenario(tmp_path: Path) -> None:
    # two scenarios in one call (rest; load on HEAD with the calibrated slowdown): with
    # test_shared_load_slowdown_is_calibrated_under_load (load on both sides, slowed) and the
    # interleaved test below (rest, slowed) every ingredient of every scenario runs once
    scenarios = ("rest", "load+slow")
    assert set(scenarios) <= set(SCENARIOS)
    out = tmp_path / "r.json"
    argv = ["--reps", "1", "--samples", "24", "--repeats", "2", "--warmup", "1", "--case", "invoice",
            "--out", str(out)]
    rc = main(argv + [a for name in scenarios for a in ("--scenario", name)])
    assert rc == 0
    r = json.loads(out.read_text())
    assert r["slowdown_us"] >= 1
    assert set(SCENARIOS) & set(r) == set(scenarios)
    for name in scenarios:
        s = r[name]
        assert s["reps"] == 1 and s["exit_0"] + s["exit_1"] + s["exit_3"] == 1
        assert all(run["exit_code"] in (0, 1, 3) for run in s["runs"])
        assert all(sum(run["verdicts"].values()) == 1 for run in s["runs"])


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    assert main(["--reps", "0", "--out", str(tmp_path / "x.json")]) == 2


def test_the_interleaved_design_alternates_sides_and_joins_each_side_as_rounds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchbox.receipts import load_receipt

    keep = tmp_path / "keep"
    # HEAD 20 ms slower (×5): the first set finds it, so the recipe's recheck runs a second set
    # (--accept load: this checks the plumbing, and a busy machine must not turn it into exit 3)
    rc = main(["--reps", "1", "--samples", "90", "--repeats", "3", "--warmup", "1", "--case", "invoice",
               "--scenario", "rest+slow", "--threads", "1", "--slowdown-us", "20000", "--keep", str(keep),
               "--accept", "load", "--out", str(tmp_path / "r.json")])
    assert rc == 0
    (pair,) = json.loads((tmp_path / "r.json").read_text())["rest+slow"]["runs"]
    assert pair["first_exit_code"] == 1 and pair["recheck"]["exit_code"] == 1 and pair["exit_code"] == 1
    assert any("**confirmed**" in line for line in pair["recheck"]["lines"])
    assert sorted(f.name for f in keep.glob("rest+slow-0-recheck-*-[0-9].json")) == [
        f"rest+slow-0-recheck-{side}-{i}.json" for side in ("base", "head") for i in range(3)]
    runs = {f"{side}-{i}": load_receipt(keep / f"rest+slow-0-{side}-{i}.json")
            for side in ("base", "head") for i in range(3)}
    # the runs follow one another: the order their receipts were last written in is theirs
    # (created_at has one-second resolution, too coarse for runs this short)
    started = sorted(runs, key=lambda k: (keep / f"rest+slow-0-{k}.json").stat().st_mtime_ns)
    assert started == ["base-0", "head-0", "head-1", "base-1", "base-2", "head-2"]  # as examples/ci/bench.sh
    for side in ("base", "head"):
        joined = load_receipt(keep / f"rest+slow-0-{side}.json")
        assert [c["receipt"] for c in joined.settings["combined_from"]] == [f"rest+slow-0-{side}-{i}.json"
                                                                          for i in range(3)]
        assert [len(r.round_sizes or ()) for r in joined.results] == [3]
        assert all(n == 30 for n in joined.results[0].round_sizes)
    slow = json.loads((tmp_path / "r.json").read_text())["slowdown_us"]
    # the slowdown stands for a code change: a task fact of its own, not an option a diff declares
    assert all(runs[f"head-{i}"].task.to_json()["slowdown_us"] == slow for i in range(3))
    assert all("slowdown_us" not in runs[f"base-{i}"].task.to_json() for i in range(3))
    assert all(not runs[k].task.options for k in runs)
    # --threads reached every run
    assert {r.to_json()["environment"]["torch_threads"] for r in runs.values()} == {1}
    # --rediff joins the kept runs again (the joined files are not needed) and judges them, the
    # recheck's kept runs included: the same receipts, the same verdicts
    for side in ("base", "head"):
        (keep / f"rest+slow-0-{side}.json").unlink()
    again = tmp_path / "again.json"
    assert main(["--rediff", str(keep), "--reps", "1", "--scenario", "rest+slow", "--accept", "load",
                 "--out", str(again)]) == 0
    judged = json.loads(again.read_text())["rest+slow"]
    assert judged["reps"] == 1 and judged["rechecked"] == 1
    assert judged["runs"][0]["first_exit_code"] == 1 and judged["runs"][0]["exit_code"] == pair["exit_code"]
    assert judged["runs"][0]["recheck"]["lines"] == pair["recheck"]["lines"]
    # benchmarks/run_spread.py reads the same kept runs
    from benchmarks import run_spread

    capsys.readouterr()
    assert run_spread.main([str(keep), "--scenario", "rest+slow", "--reps", "1", "--runs", "3"]) == 0
    said = capsys.readouterr().out
    assert "6 runs, 1 cases" in said and "paired" in said and "unpaired" in said


def test_which_side_runs_under_the_busy_processes() -> None:
    from benchmarks.ci_false_alarms import _busy

    assert [_busy("load", s) for s in ("base", "head")] == [False, True]
    assert [_busy("load+slow", s) for s in ("base", "head")] == [False, True]
    for name in ("shared-load", "shared-load+slow"):
        assert [_busy(name, s) for s in ("base", "head")] == [True, True]
    for name in ("rest", "rest+slow"):
        assert [_busy(name, s) for s in ("base", "head")] == [False, False]


def test_shared_load_slowdown_is_calibrated_under_load(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["--reps", "1", "--samples", "24", "--repeats", "2", "--warmup", "1", "--case", "invoice",
                 "--scenario", "shared-load+slow", "--threads", "1", "--keep", str(tmp_path / "k"),
                 "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    from benchbox.receipts import load_receipt

    head = load_receipt(tmp_path / "k" / "shared-load+slow-0-head-0.json")
    assert head.task.to_json()["slowdown_us"] == r["slowdown_us_loaded"]
    assert (tmp_path / "k" / "calibration-loaded.json").exists()
    assert r["shared-load+slow"]["reps"] == 1


def test_the_named_count_is_the_median_of_each_unresolved_runs_largest() -> None:
    from benchmarks.ci_false_alarms import named_count

    run = lambda code, needed: {"exit_code": code, "needed": needed}  # noqa: E731
    assert named_count([run(0, [40, 90]), run(0, [120, 10]), run(0, [60])]) == 90
    assert named_count([run(1, [500]), run(0, [30, 20])]) == 30  # a detected run names nothing
    assert named_count([run(0, [40, None])]) is None  # one row needs more than is practical
    assert named_count([run(0, [138, 80]), run(0, [155, 85]), run(0, [None, 93])]) == 155
    assert named_count([run(1, []), run(0, [])]) is None


def test_a_confirmation_keeps_the_samples_of_each_process() -> None:
    import argparse

    from benchmarks.ci_false_alarms import with_processes

    args = argparse.Namespace(samples=400, repeats=5, warmup=10)
    sub = with_processes(args, 60)
    assert (sub.repeats, sub.samples, sub.warmup) == (60, 4800, 10)
    assert (args.repeats, args.samples) == (5, 400)


def test_the_head_copy_keeps_every_package_and_leaves_out_the_top_level_receipts() -> None:
    import argparse
    import shutil

    from benchmarks.ci_false_alarms import REPO, head_checkout

    copy = head_checkout(argparse.Namespace(copy_head=True, copy_head_dir=None))
    try:
        assert copy != REPO
        packages = {p.parent.relative_to(REPO) for p in (REPO / "benchbox").rglob("__init__.py")
                    if "__pycache__" not in p.parts}
        assert packages and all((copy / p / "__init__.py").is_file() for p in packages)
        assert not (copy / ".git").exists() and not (copy / "receipts").exists()
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
