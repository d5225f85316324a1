"""benchmarks/paired_processes.py: the per-case summary of pairs, and its refusals (no timing)."""

from __future__ import annotations

import math

from benchmarks.paired_processes import main, summary


def test_processes_slow_together_give_a_steady_ratio_and_a_high_correlation() -> None:
    slow = [1.0, 1.5, 0.8, 1.2, 2.0]  # each pair shares its slowness; HEAD is 10% slower
    pairs = [({"invoice": 1000 * s}, {"invoice": 1100 * s}) for s in slow]
    s = summary(pairs)["invoice"]
    assert s["correlation"] > 0.999 and s["sd_log_ratio"] < 1e-9
    assert math.isclose(s["mean_ratio"], 1.1) and s["sd_base"] > 0.3


def test_independent_processes_give_a_ratio_as_wide_as_both_sides() -> None:
    base = [1.0, 1.5, 0.8, 1.2, 2.0]
    head = [1.5, 0.8, 2.0, 1.0, 1.2]
    s = summary([({"image": 1000 * b}, {"image": 1000 * h}) for b, h in zip(base, head)])["image"]
    assert s["correlation"] < 0 and s["sd_log_ratio"] > max(s["sd_base"], s["sd_head"])


def test_too_few_pairs_is_refused_with_exit_2(tmp_path) -> None:
    assert main(["--pairs", "2", "--out", str(tmp_path / "x.json")]) == 2
