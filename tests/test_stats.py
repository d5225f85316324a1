"""Quantile intervals, noise signals, steady state, floors, the clock cross-check, comparisons."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, stats

from benchbox.contracts import load_contract
from benchbox.harness.calibration import calibrate
from benchbox.harness.loop import CROSS_CHECK_TOLERANCE_NS, Measurement, clock_cross_check
from benchbox.receipts.diff import VERDICTS, compare_runners
from benchbox.receipts.model import Calibration, Receipt, ResultRow
from benchbox.stats import (
    FLOOR_MULTIPLE,
    caveats,
    ci_ranks,
    floor_resolvable,
    min_n_for_ci,
    quantile_ci,
    quantile_upper_bound,
    steady_state,
    summarize,
)

REPS = 2000


def _bimodal_ppf(q: float) -> float:
    cdf = lambda t: 0.7 * stats.norm.cdf(t, 1.0, 0.05) + 0.3 * stats.norm.cdf(t, 2.0, 0.1)  # noqa: E731
    return optimize.brentq(lambda t: cdf(t) - q, 0.0, 5.0, xtol=1e-12)


def _draw(kind: str, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    if kind == "normal":
        return rng.normal(10.0, 2.0, shape)
    if kind == "lognormal":
        return rng.lognormal(0.0, 0.8, shape)
    pick = rng.random(shape) < 0.7
    return np.where(pick, rng.normal(1.0, 0.05, shape), rng.normal(2.0, 0.1, shape))


TRUE_P99 = {
    "normal": float(stats.norm.ppf(0.99, 10.0, 2.0)),
    "lognormal": float(np.exp(0.8 * stats.norm.ppf(0.99))),
    "bimodal": _bimodal_ppf(0.99),
}


@pytest.mark.parametrize("kind", ["normal", "lognormal", "bimodal"])
def test_p99_interval_covers_true_p99_in_simulation(kind: str) -> None:
    rng = np.random.default_rng(hash(kind) % 2**32)
    n = 400
    x = np.sort(_draw(kind, rng, (REPS, n)), axis=1)
    lo, hi = ci_ranks(n, 0.99)
    assert lo is not None and hi is not None
    # quantile_ci on one row is exactly the order statistics used here
    assert quantile_ci(x[0], 0.99) == (x[0, lo], x[0, hi])
    truth = TRUE_P99[kind]
    coverage = float(np.mean((x[:, lo] <= truth) & (truth <= x[:, hi])))
    print(f"{kind}: 95% p99 interval coverage {coverage:.3f} over {REPS} repetitions at n={n}")
    assert coverage >= 0.94, f"{kind}: coverage {coverage:.3f} < 0.94 at n={n}"
    # below the resolvable n the interval is unresolved, never made up
    small = x[0, :367]
    assert quantile_ci(np.sort(small), 0.99) is None
    s = summarize((small * 1e6).astype(np.int64))
    assert s["p99_ci_ns"] is None
    assert any("p99 needs ≥ 368" in u for u in s["unresolved"])


def test_intervals_match_scipy_quantile_test() -> None:
    rng = np.random.default_rng(7)
    for n in [*range(1, 80), 298, 299, 367, 368, 1000]:
        x = np.sort(rng.lognormal(size=n))
        for q in (0.5, 0.9, 0.99):
            ci = stats.quantile_test(x, q=1.0, p=q).confidence_interval()
            want = None if np.isnan(ci.low) or np.isnan(ci.high) else (ci.low, ci.high)
            assert quantile_ci(x, q) == want, (n, q)
            up = stats.quantile_test(x, q=1.0, p=q, alternative="less").confidence_interval().high
            assert quantile_upper_bound(x, q) == (None if np.isnan(up) else up), (n, q)


def test_minimum_sample_counts_follow_the_exact_rule() -> None:
    assert min_n_for_ci(0.99) == 368
    assert min_n_for_ci(0.99, alternative="less") == 299
    assert min_n_for_ci(0.90) == 36
    for q in (0.5, 0.9, 0.99):
        n = min_n_for_ci(q)
        assert None not in ci_ranks(n, q) and None in ci_ranks(n - 1, q)


def test_summary_reports_one_sided_p99_bound_between_299_and_367() -> None:
    s = summarize(list(range(1000, 1330)))  # n = 330
    assert s["p99_ci_ns"] is None and s["p90_ci_ns"] is not None
    assert s["p99_upper_ns"] == 1329  # the largest sample is the 95% upper bound at n = 330
    assert not any("one-sided" in u for u in s["unresolved"])
    s = summarize(list(range(1000, 1200)))  # n = 200: neither
    assert s["p99_upper_ns"] is None
    assert any("≥ 299 for a one-sided upper bound (have 200)" in u for u in s["unresolved"])
    assert len(s["unresolved"]) == 1
    s = summarize(list(range(1000, 1400)))  # n = 400: two-sided, no one-sided field needed
    assert s["p99_ci_ns"] is not None and "p99_upper_ns" not in s and "unresolved" not in s


def test_noise_signals_and_caveats() -> None:
    rng = np.random.default_rng(3)
    quiet = 1_000_000 + rng.integers(-10_000, 10_000, 400)  # uniform: no Tukey outliers
    s = summarize(quiet)
    assert s["noise"]["cv"] == pytest.approx(20_000 / np.sqrt(12) / 1e6, rel=0.15)
    assert s["noise"]["outliers"]["low"] == s["noise"]["outliers"]["high"] == 0
    assert caveats(s) == []
    noisy = quiet.copy()
    noisy[::10] *= 10  # 40 samples ten times slower
    s = summarize(noisy)
    assert s["noise"]["outliers"]["high"] == 40 and s["noise"]["outliers"]["far_high"] == 40
    assert s["noise"]["outliers"]["low"] == 0
    reasons = caveats(s)
    assert any("coefficient of variation" in r for r in reasons)
    assert any("Tukey outliers" in r for r in reasons)


def test_steady_state_flags_drift_not_noise() -> None:
    rng = np.random.default_rng(4)
    iid = rng.lognormal(13.8, 0.1, 400).astype(np.int64)
    st = steady_state(iid)
    assert st["checked"] and st["settled"] is True
    drift = np.concatenate([iid[:200] * 13 // 10, iid[200:]])  # first half 30% slower
    st = steady_state(drift)
    assert st["settled"] is False and st["shift"] < -0.2
    assert any(r.startswith("unsettled") for r in caveats(summarize(drift), st))
    assert steady_state([5, 6, 7])["checked"] is False


def test_floor_resolvable_rule() -> None:
    assert floor_resolvable(3000, 1000) and floor_resolvable(-3000, 1000)
    assert not floor_resolvable(2999, 1000)
    assert floor_resolvable(2000, 1000, multiple=2.0)
    assert not floor_resolvable(10**9, None)
    cal = Calibration.of({"floors": {"host": 900, "device": None}})
    assert cal.floor("host") == 900 and cal.floor("device") is None
    assert Calibration().floor("host") is None


def test_calibration_on_cpu_holds_floors() -> None:
    cal = calibrate(load_contract("public_task_call_wall"), "cpu")
    assert cal["clock_read_ns"] > 0 and cal["region_p50_ns"] >= cal["clock_read_ns"]
    assert cal["floors"]["host"] == cal["region_p50_ns"] and cal["floors"]["device"] is None
    assert cal["floor_multiple"] == FLOOR_MULTIPLE and "unresolvable" in cal["floor_rule"]
    assert "event_pair_ns" not in cal  # no CUDA here
    dev = calibrate(load_contract("device_compute"), "cpu")  # host fallback floor: compute only
    assert 0 < dev["floors"]["host"]


def _device_measurement(dev: list[int], compute: list[int], d2h: list[int]) -> Measurement:
    m = Measurement(clock_used="device")
    n = len(dev)
    for s in m.stages_ns:
        m.stages_ns[s] = [100] * n
    m.stages_ns["compute"], m.stages_ns["d2h"] = compute, d2h
    m.samples_ns = dev
    return m


def test_clock_cross_check_counts_violations_synthetic_device_samples() -> None:
    # no GPU here: device timestamps are synthetic; the check's arithmetic is real
    c = load_contract("device_compute")  # compute, device clock, no closing sync: bounded by d2h's sync
    m = _device_measurement(dev=[5000, 9000, 9000 + CROSS_CHECK_TOLERANCE_NS + 1],
                            compute=[1000, 1000, 1000], d2h=[6000, 8000, 8000])
    cc = clock_cross_check(m, c)
    assert cc["checked"] and cc["violations"] == 1 and cc["samples"] == 3
    assert cc["host_span"].startswith("compute..d2h")
    assert cc["host_region_shorter"] == 3  # async enqueue is shorter than device time: expected
    assert clock_cross_check(Measurement(clock_used="host", samples_ns=[1]), c) is None


def _comparison_receipt(rows: list[ResultRow], processes: int) -> Receipt:
    from tests.support import GOLDEN

    doc = json.loads(GOLDEN.read_text())
    cal = Calibration.of({"floors": {"host": 1000, "device": None}})
    return Receipt.of({**doc, "results": [r.to_json() for r in rows], "calibration": cal.to_json(),
                       "settings": {"baseline": "base"}, "processes": [{"pid": i} for i in range(processes)]})


def _row(runner: str, x: np.ndarray, k: int, clock: str = "host") -> ResultRow:
    n = len(x) // k
    return ResultRow.of({"runner": runner, "case": "c", "status": "valid", "reasons": [],
                         "runner_report": {}, "accuracy": {"passed": True}, "samples_ns": x.tolist(),
                         "round_sizes": [n] * k, "round_process": list(range(k)),
                         "stages_ns": {}, "summary": summarize(x), "clock_used": clock})


def test_runner_comparisons_use_the_diff_engine_and_its_words() -> None:
    """Three processes: each runner against the baseline, paired per process (what moved a whole
    process cancels), in the diff's words."""
    rng = np.random.default_rng(5)
    drift = np.repeat(np.exp(rng.normal(0, 0.1, 3)), 400)  # each process 10% up or down, all runners
    base = (rng.lognormal(14.0, 0.05, 1200) * drift).astype(np.int64)
    rows = [_row("base", base, 3), _row("fast", base * 7 // 10, 3), _row("same", base + 500, 3),
            _row("slow", base * 12 // 10, 3, clock="device")]
    out = compare_runners(_comparison_receipt(rows, 3)).to_json()
    by = {r["runner"]: r for r in out["rows"]}
    lo, hi = by["fast"]["p50_ratio_ci"]
    assert lo <= by["fast"]["p50_ratio"] <= hi < 1.0 and by["fast"]["p50_verdict"] == "faster"
    assert hi / lo < 1.05  # paired: the 10% process drift cancels
    assert by["same"]["p50_verdict"] == "unchanged"  # +500 ns on ~1.2 ms
    assert by["slow"]["p50_verdict"] == "not comparable"
    assert {r["p50_verdict"] for r in out["rows"]} <= set(VERDICTS)


def test_runner_comparisons_of_one_process_judge_only_what_no_plausible_drift_explains() -> None:
    """One process: ×0.7 could be drift between processes (unresolved), ×0.3 could not (faster)."""
    rng = np.random.default_rng(6)
    base = rng.lognormal(14.0, 0.05, 400).astype(np.int64)
    rows = [_row("base", base, 1), _row("fast", base * 7 // 10, 1), _row("much", base * 3 // 10, 1)]
    by = {r["runner"]: r for r in compare_runners(_comparison_receipt(rows, 1)).to_json()["rows"]}
    assert by["fast"]["p50_verdict"] == "unresolved" and "assumed" in by["fast"]["reason"]
    assert by["much"]["p50_verdict"] == "faster"


def test_an_unreliable_runner_comparison_keeps_its_numbers_and_says_why() -> None:
    """One process, one row noisy: unreliable, as benchbox diff calls it, with its ratio, interval
    and reason; the run's table names the reason under the comparison."""
    from benchbox.render.text import results_table

    rng = np.random.default_rng(8)
    base = rng.lognormal(14.0, 0.05, 400).astype(np.int64)
    noisy = (rng.lognormal(14.0, 0.6, 400)).astype(np.int64)
    receipt = _comparison_receipt([_row("base", base, 1), _row("noisy", noisy, 1)], 1)
    (row,) = compare_runners(receipt).to_json()["rows"]
    assert row["p50_verdict"] == "unreliable" and row["reason"].startswith("noisy: noisy robust coefficient")
    lo, hi = row["p50_ratio_ci"]
    assert lo < row["p50_ratio"] < hi
    shown = results_table(dataclasses.replace(receipt, comparisons=None), width=300)  # judged now
    assert "↳ noisy × c unreliable: noisy: noisy robust coefficient of variation" in shown


def test_every_receipt_has_floors_and_quantile_intervals(eager_receipt_path: Path) -> None:
    r = json.loads(eager_receipt_path.read_text())
    cal = r["calibration"]
    assert cal["clock_read_ns"] > 0 and cal["floors"]["host"] > 0 and "floor_multiple" in cal
    assert r["settings"]["sampling"]["mode"] == "fixed"
    assert "system" in r["environment"]
    assert r["results"]
    for row in r["results"]:
        s = row["summary"]
        assert "p50_ci_ns" in s and "p99_ci_ns" in s
        assert row["stop_reason"] and "steady_state" in row and "noise" in s
        if row["status"] == "valid" and s["n"] < 368:
            assert s["p99_ci_ns"] is None
            assert any("p99 needs ≥ 368" in x for x in row["reasons"])  # a caveat, status still valid


def test_system_metadata_degrades_without_pyperf(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchbox import environment

    assert "pyperf" in environment.system_metadata()
    monkeypatch.setitem(sys.modules, "pyperf._collect_metadata", None)  # import now fails
    md = environment.system_metadata()
    assert "pyperf" not in md and "benchbox-contracts[analysis]" in md["note"]


def test_gpu_state_without_gpu_is_a_note() -> None:
    from benchbox.environment import gpu_state, throttle_names

    assert "note" in gpu_state("cpu")
    assert "note" in gpu_state("cuda:0")  # no CUDA device here
    assert throttle_names(0x1 | 0x40 | 0x1000) == ["gpu_idle", "hw_thermal_slowdown", "0x1000"]


@pytest.mark.parametrize("level", [0.95, 0.99, 0.9])
def test_order_statistic_ranks_are_scipys_binomial_quantiles(level: float) -> None:
    """ci_ranks computes the binomial tails itself (scipy.stats costs a second of every run's
    start): its ranks are scipy's binomial ppf/isf ones for every n from 2 to 1,200 and three large
    ones, where only a window around the mean is summed, at quantiles down to 1e-5 and up to
    0.9999 (skewed, narrow distributions)."""
    from scipy.stats import binom

    ns = np.array([*range(2, 1201), 10_000, 100_000, 10_000_000])
    for q in (0.5, 0.9, 0.95, 0.99, 0.999, 0.9999, 0.1, 0.01, 1e-5):
        for alternative in ("two-sided", "less", "greater"):
            tail = (1.0 - level) / 2 if alternative == "two-sided" else 1.0 - level
            lows = binom.ppf(tail, ns, q).astype(int) - 1
            highs = binom.isf(tail, ns, q).astype(int)
            for n, lo, hi in zip(ns.tolist(), lows.tolist(), highs.tolist()):
                want = (lo if lo >= 0 and alternative != "less" else None,
                        hi if hi < n and alternative != "greater" else None)
                assert ci_ranks(n, q, level, alternative) == want, (n, q, alternative)


def test_ranks_of_a_single_sample_and_refused_quantiles() -> None:
    assert ci_ranks(0, 0.5) == (None, None)
    assert ci_ranks(1, 0.5) == (None, None)
    assert ci_ranks(1, 0.99, alternative="less") == (None, None)
    for q in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            ci_ranks(10, q)


def test_a_run_does_not_import_scipy_stats() -> None:
    """What a run computes (intervals, sample counts, the control's spread) needs no scipy, and the
    comparison of its runners at its end takes Student's t from scipy.special alone: scipy.stats'
    import is 1.2-1.5 s of every run on a 2-core machine (scipy.special's about 0.3 s)."""
    import subprocess
    import sys

    from tests.support import REPO

    two_runners = REPO / "receipts" / "h200-tiny-fp32.public_task_call_wall.json"
    code = ("import sys, numpy as np; from benchbox.stats import summarize, min_n_for_ci, log_quantile_se; "
            "summarize(list(range(1000, 1500))); min_n_for_ci(0.99); "
            "log_quantile_se(np.arange(1.0, 50.0), 0.5); "
            "import benchbox.harness.sampling, benchbox.harness.control, benchbox.run.sequence; "
            "print(sorted(m for m in sys.modules if m.startswith('scipy')))\n"
            "from benchbox.receipts import load_receipt; "
            "from benchbox.receipts.baseline import compare_runners; "
            f"r = load_receipt({str(two_runners)!r}); assert compare_runners(r).rows; "
            "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "[]"]


def test_students_t_from_scipy_special_is_scipy_stats_t() -> None:
    """The comparison's t quantiles and tails (scipy.special's stdtrit/stdtr, which scipy.stats.t
    itself calls) are scipy.stats.t's to the bit, at the probabilities the diff uses."""
    from benchbox.stats import LogRatio, _interval, _t_sum

    rng = np.random.default_rng(3)
    for df in [*rng.uniform(1.0, 300.0, 200), 1.0, 2.0, 4.5, 1e6, math.inf]:
        for alpha, power in ((0.05, 0.8), (0.01, 0.9), (0.0125, 0.8)):
            assert _t_sum(df, alpha, power) == float(stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df))
        d, se = float(rng.normal(0, 0.1)), float(rng.uniform(0.001, 0.2))
        r = _interval(d, se, df, 0.95, ("", ""))
        assert isinstance(r, LogRatio)
        assert r.p == float(min(1.0, 2.0 * stats.t.sf(abs(d) / se, df)))
        crit = float(stats.t.ppf(0.975, df))
        assert r.ci == (math.exp(d - crit * se), math.exp(d + crit * se))
