"""The comparison engine on synthetic receipts: the defects it fixes, rounds, families, conditions.

Receipts here are built from the golden receipt's header with drawn samples
(``tests.support.synthetic_receipt``): the statistics are the point, not a machine.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchbox.receipts.diff import DiffOptions, diff_receipts
from tests.support import synthetic_receipt

MS = 1e6


def _rounds(rng: np.random.Generator, k: int, n: int, drift: float = 0.0, scale: float = 1.0,
            sigma: float = 0.1) -> list[np.ndarray]:
    """k rounds of n/k lognormal samples around 1 ms × scale, each round drifted by lognormal(drift)."""
    return [MS * scale * np.exp(rng.normal(0, drift) + rng.normal(0, sigma, n // k)) for _ in range(k)]


def _pair(rows_base: dict, rows_head: dict, repeats: int = 1, **kw):
    return (synthetic_receipt(rows_base, repeats=repeats, **kw.get("base", {})),
            synthetic_receipt(rows_head, repeats=repeats, **kw.get("head", {})))


# -- the defects, reproduced --------------------------------------------------------------------

def test_missing_floor_does_not_crash_a_row_beyond_the_threshold() -> None:
    """Calibration failed (no floor): the diff used to raise TypeError formatting the floor."""
    rng = np.random.default_rng(0)
    no_floor = {"error": "calibration failed: no device"}
    base = synthetic_receipt({("torch-eager", "invoice"): _rounds(rng, 1, 400)}, calibration=no_floor)
    head = synthetic_receipt({("torch-eager", "invoice"): _rounds(rng, 1, 400, scale=2.0)},
                             calibration=no_floor)
    d = diff_receipts(base, head)
    assert [r.verdict for r in d.rows] == ["slower"]
    assert any("no harness floor" in n for n in d.notes)
    assert d.exit_code == 1


def _six_rows(rng: np.random.Generator, doubled: str | None) -> dict:
    rows = {}
    for i in range(6):
        x = _rounds(rng, 1, 400)[0]
        if f"c{i}" == doubled:  # p99 doubles, the body (and the median) stays: 5% of calls slow,
            tail = rng.random(400) < 0.05  # so that p99 lies in the slow mode beyond doubt
            x = np.where(tail, 2.0 * np.quantile(x, 0.99) * np.exp(rng.normal(0, 0.02, 400)), x)
        rows[("torch-eager", f"c{i}")] = [x]
    return rows


def test_a_p99_only_doubling_is_flagged_in_a_six_row_diff_with_both_metrics() -> None:
    """At n = 400 the old tail test's smallest p-value (0.0075) times Holm's factor never reached 0.05."""
    rng = np.random.default_rng(1)
    base = synthetic_receipt(_six_rows(rng, None))
    head = synthetic_receipt(_six_rows(np.random.default_rng(2), "c3"))
    d = diff_receipts(base, head, DiffOptions(metric="both"))
    row = next(r for r in d.rows if r.case == "c3")
    p99 = next(m for m in row.metrics if m.metric == "p99")
    assert 1.8 < p99.ratio < 2.2
    assert p99.verdict == "slower" and row.verdict == "slower", row.reason
    assert d.exit_code == 1
    assert all(r.verdict != "slower" for r in d.rows if r.case != "c3")


def _pick(chosen: str, ms: float, sites: int = 1) -> dict:
    return {"kind": "autotune_choice", "op": "bmm", "input_shapes": [["4", "64", "64"]] * 2,
            "chosen": chosen, "chosen_kind": "triton_template" if "triton" in chosen else "aten",
            "chosen_ms": ms, "alternatives": [{"kernel": "bmm", "ms": ms * 1.3}], "count": sites}


def test_autotune_entries_with_other_measured_times_stay_comparable() -> None:
    """Fallback entries carry kernel timings (11.99 ms in one run, 0.095 ms in the next)."""
    rng = np.random.default_rng(3)
    key = ("torch-compile", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 1, 200)}, fallbacks={key: [_pick("triton_bmm_3", 11.99)]})
    head = synthetic_receipt({key: _rounds(rng, 1, 200)}, fallbacks={key: [_pick("triton_bmm_7", 0.095)]})
    row = diff_receipts(base, head).rows[0]
    assert row.verdict in ("unchanged", "unresolved") and row.causes == ()
    head = synthetic_receipt({key: _rounds(rng, 1, 200, scale=2.0)},
                             fallbacks={key: [_pick("bmm", 0.2, sites=3)]})
    base = synthetic_receipt({key: _rounds(rng, 1, 200)}, fallbacks={key: [_pick("triton_bmm_3", 0.1, 3)]})
    row = diff_receipts(base, head).rows[0]
    assert row.verdict == "slower"
    assert row.causes and "triton_bmm → bmm" in row.causes[0] and "3 sites" in row.causes[0], row.causes


def test_a_receipt_edited_to_another_cpu_is_unreliable_never_slower() -> None:
    rng = np.random.default_rng(4)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 1, 400)})
    head = synthetic_receipt({key: _rounds(rng, 1, 400, scale=2.0)},
                             environment={"cpu": "Intel Xeon Platinum 8480", "cpu_count": 112})
    d = diff_receipts(base, head)
    assert d.rows[0].verdict == "unreliable"
    assert "cpu: cpu AMD EPYC → Intel Xeon Platinum 8480, cpu_count 2 → 112" in d.rows[0].reason
    assert "accept=cpu" in d.rows[0].reason and "--" not in d.rows[0].reason
    assert d.exit_code == 3
    d = diff_receipts(base, head, DiffOptions(accept=frozenset({"cpu"})))
    assert d.rows[0].verdict == "slower" and d.exit_code == 1


def test_load_at_start_gpu_state_and_versions_are_conditions() -> None:
    rng = np.random.default_rng(5)
    key = ("torch-eager", "invoice")
    rows = {key: _rounds(rng, 1, 400)}
    idle = {"load": {"busy_fraction": 0.05}, "gpu": {"name": "NVIDIA H200", "driver": "570.1"},
            "gpu_state_before": {"sm_clock_mhz": 1980, "throttle_reasons": []}, "torch": "2.9.0"}
    busy = {"load": {"busy_fraction": 0.97}, "gpu": {"name": "NVIDIA H200", "driver": "575.2"},
            "gpu_state_before": {"sm_clock_mhz": 1200, "throttle_reasons": ["sw_thermal_slowdown"]},
            "torch": "2.10.0"}
    d = diff_receipts(synthetic_receipt(rows, environment=idle), synthetic_receipt(rows, environment=busy))
    reason = d.rows[0].reason
    assert d.rows[0].verdict == "unreliable"
    for needle in ("load: BASE idle", "HEAD busy (97% of CPU busy at start)", "driver 570.1 → 575.2",
                   "sm clock at start 1980 → 1200 MHz", "throttle at start none → sw_thermal_slowdown",
                   "torch 2.9.0 → 2.10.0"):
        assert needle in reason
    d = diff_receipts(synthetic_receipt(rows, environment=idle), synthetic_receipt(rows, environment=busy),
                      DiffOptions(accept=frozenset({"load", "gpu", "versions"})))
    assert d.rows[0].verdict in ("unchanged", "unresolved") and len(d.rows[0].accepted) == 3


def test_a_machine_busy_on_both_sides_is_a_load_condition_too() -> None:
    """Identical code on a machine whose every core was busy with other work, base and head
    alike, diffed as a regression (BENCHMARKS.md §4): a busy start on either side is a condition."""
    rng = np.random.default_rng(8)
    key = ("torch-eager", "invoice")
    busy = {"load": {"busy_fraction": 1.0}}
    base = synthetic_receipt({key: _rounds(rng, 5, 400)}, repeats=5, environment=busy)
    head = synthetic_receipt({key: _rounds(rng, 5, 400, scale=1.5)}, repeats=5, environment=busy)
    d = diff_receipts(base, head)
    assert d.rows[0].verdict == "unreliable" and d.exit_code == 3
    assert "both sides shared the CPU" in d.rows[0].reason and d.rows[0].reason.startswith("load:")
    assert diff_receipts(base, head, DiffOptions(accept=frozenset({"load"}))).rows[0].verdict == "slower"
    idle = {"load": {"busy_fraction": 0.1}}
    quiet = diff_receipts(
        synthetic_receipt({key: _rounds(rng, 5, 400)}, repeats=5, environment=idle),
        synthetic_receipt({key: _rounds(rng, 5, 400, scale=1.5)}, repeats=5, environment=idle))
    assert quiet.rows[0].verdict == "slower"


def test_a_noisy_row_is_unreliable_unless_accepted() -> None:
    rng = np.random.default_rng(6)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 1, 400)})
    head = synthetic_receipt({key: _rounds(rng, 1, 400, scale=2.0, sigma=0.6)})
    d = diff_receipts(base, head)
    assert d.rows[0].verdict == "unreliable" and d.rows[0].reason.startswith("noisy: HEAD robust coefficient")
    assert diff_receipts(base, head, DiffOptions(accept=frozenset({"noisy"}))).rows[0].verdict == "slower"


def test_with_rounds_measured_a_noisy_row_is_judged_by_its_interval() -> None:
    """Five rounds a side: the spread is in the hierarchical interval, so the noise flag no longer
    blocks the verdict; the same samples as one round stay unreliable."""
    rng = np.random.default_rng(7)
    key = ("torch-eager", "invoice")
    base_r = _rounds(rng, 5, 400, sigma=0.6)
    head_r = _rounds(rng, 5, 400, scale=2.0, sigma=0.6)
    d = diff_receipts(synthetic_receipt({key: base_r}, repeats=5),
                      synthetic_receipt({key: head_r}, repeats=5))
    assert d.rows[0].verdict == "slower", d.rows[0].reason
    one = diff_receipts(synthetic_receipt({key: [np.concatenate(base_r)]}),
                        synthetic_receipt({key: [np.concatenate(head_r)]}))
    assert one.rows[0].verdict == "unreliable" and "noisy" in one.rows[0].reason


# -- rounds: simulations (seeded) ----------------------------------------------------------------

def _slower_rate(effect: float, reps: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    key = ("torch-eager", "invoice")
    slower = 0
    for i in range(reps):
        base = synthetic_receipt({key: _rounds(rng, 5, 400, drift=0.05)}, repeats=5)
        head = synthetic_receipt({key: _rounds(rng, 5, 400, drift=0.05, scale=effect)}, repeats=5)
        d = diff_receipts(base, head, DiffOptions(n_resamples=500, seed=i))
        slower += d.rows[0].verdict == "slower"
    return slower / reps


def test_five_rounds_with_5_percent_drift_unchanged_rarely_reads_slower() -> None:
    assert _slower_rate(1.0, 500, seed=10) <= 0.05


def test_five_rounds_with_5_percent_drift_detect_a_10_percent_slowdown() -> None:
    assert _slower_rate(1.10, 500, seed=11) >= 0.8


def test_drift_between_rounds_widens_the_interval_instead_of_manufacturing_significance() -> None:
    """The same samples read as one round give a narrow interval; as five rounds a wide one."""
    rng = np.random.default_rng(12)
    key = ("torch-eager", "invoice")
    a, b = _rounds(rng, 5, 1000, drift=0.08), _rounds(rng, 5, 1000, drift=0.08)
    read_as_one = DiffOptions(accept=frozenset({"unsettled"}))  # one pass with drift reads unsettled
    one = diff_receipts(synthetic_receipt({key: a}, repeats=1), synthetic_receipt({key: b}, repeats=1),
                        read_as_one)
    five = diff_receipts(synthetic_receipt({key: a}, repeats=5), synthetic_receipt({key: b}, repeats=5))
    w1 = np.log(one.rows[0].metrics[0].ci[1] / one.rows[0].metrics[0].ci[0])
    w5 = np.log(five.rows[0].metrics[0].ci[1] / five.rows[0].metrics[0].ci[0])
    assert w5 > 3 * w1
    assert five.rows[0].metrics[0].rounds == (5, 5)


def test_p_values_of_unchanged_rows_are_calibrated_for_both_families() -> None:
    """Holm (p50) and Holm (p99), each at alpha/2, keep the family-wise rate over rows ≤ alpha
    when each test's p-value is valid: check that P(p < 0.05) stays near 0.05 for both metrics."""
    rng = np.random.default_rng(13)
    key = ("torch-eager", "invoice")
    hits = {"p50": 0, "p99": 0}
    reps = 150
    for i in range(reps):
        base = synthetic_receipt({key: _rounds(rng, 1, 400)})
        head = synthetic_receipt({key: _rounds(rng, 1, 400)})
        opts = DiffOptions(metric="both", n_resamples=500, seed=i)
        for m in diff_receipts(base, head, opts).rows[0].metrics:
            hits[m.metric] += m.p_value < 0.05
    assert hits["p50"] / reps <= 0.09 and hits["p99"] / reps <= 0.09, hits


def test_twenty_unchanged_rows_with_both_metrics_raise_no_alarm_and_are_deterministic() -> None:
    rng = np.random.default_rng(14)
    rows_b = {("torch-eager", f"c{i}"): _rounds(rng, 5, 400, drift=0.03) for i in range(20)}
    rows_h = {("torch-eager", f"c{i}"): _rounds(rng, 5, 400, drift=0.03) for i in range(20)}
    base, head = synthetic_receipt(rows_b, repeats=5), synthetic_receipt(rows_h, repeats=5)
    d = diff_receipts(base, head, DiffOptions(metric="both", n_resamples=500))
    assert d.exit_code == 0 and not any(r.verdict in ("slower", "faster") for r in d.rows)
    again = diff_receipts(base, head, DiffOptions(metric="both", n_resamples=500))
    assert [r.metrics for r in again.rows] == [r.metrics for r in d.rows]


@pytest.mark.parametrize("metric", ["p50", "both"])
def test_exit_codes(metric: str) -> None:
    rng = np.random.default_rng(15)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 1, 400)})
    same = synthetic_receipt({key: _rounds(rng, 1, 400)})
    assert diff_receipts(base, same, DiffOptions(metric=metric)).exit_code == 0


def test_markdown_of_a_huge_diff_fits_one_comment() -> None:
    """600 rows with long names and many compiler changes: the report stays ≤ 60,000 characters."""
    from benchbox.render.diff import MARKDOWN_LIMIT, diff_markdown

    rng = np.random.default_rng(16)
    long = "x" * 300
    keys = [(f"torch-compile-{i % 3}", f"case-{i}-{long}") for i in range(600)]
    picks = {k: [dict(_pick(f"triton_bmm_{j}", 0.1), op=f"op{j}") for j in range(40)] for k in keys}
    other = {k: [dict(_pick("bmm", 0.1), op=f"op{j}") for j in range(40)] for k in keys}
    base = synthetic_receipt({k: [rng.lognormal(13.8, 0.05, 40)] for k in keys}, fallbacks=picks)
    head = synthetic_receipt({k: [rng.lognormal(14.3, 0.05, 40)] for k in keys}, fallbacks=other)
    d = diff_receipts(base, head, DiffOptions(n_resamples=200))
    text = diff_markdown(d)
    assert len(text) <= MARKDOWN_LIMIT
    assert "<details>" in text and "more rows" in text
    assert sum(r.verdict == "slower" for r in d.rows) >= 550  # a few iid rows read unsettled by chance
    assert all(len(r.causes) <= 6 for r in d.rows)
