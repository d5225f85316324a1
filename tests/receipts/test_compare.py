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
    """k processes of n/k lognormal samples around 1 ms × scale, each drifted by lognormal(drift)."""
    return [MS * scale * np.exp(rng.normal(0, drift) + rng.normal(0, sigma, n // k)) for _ in range(k)]


# -- the defects, reproduced --------------------------------------------------------------------

def test_missing_floor_does_not_crash_a_row_beyond_the_threshold() -> None:
    """Calibration failed (no floor): the diff used to raise TypeError formatting the floor."""
    rng = np.random.default_rng(0)
    no_floor = {"error": "calibration failed: no device"}
    base = synthetic_receipt({("torch-eager", "invoice"): _rounds(rng, 3, 1200)}, calibration=no_floor,
                             repeats=3)
    head = synthetic_receipt({("torch-eager", "invoice"): _rounds(rng, 3, 1200, scale=2.0)},
                             calibration=no_floor, repeats=3)
    d = diff_receipts(base, head)
    assert [r.verdict for r in d.rows] == ["slower"]
    assert any("no harness floor" in n for n in d.notes)
    assert d.exit_code == 1


def _six_rows(rng: np.random.Generator, doubled: str | None, k: int = 3) -> dict:
    rows = {}
    for i in range(6):
        procs = _rounds(rng, k, 400 * k)
        if f"c{i}" == doubled:  # p99 doubles, the body (and the median) stays: 5% of calls slow,
            procs = [np.where(rng.random(400) < 0.05,  # so that p99 lies in the slow mode beyond doubt
                              2.0 * np.quantile(x, 0.99) * np.exp(rng.normal(0, 0.02, 400)), x)
                     for x in procs]
        rows[("torch-eager", f"c{i}")] = procs
    return rows


def test_a_p99_only_doubling_is_flagged_in_a_six_row_diff_with_both_metrics() -> None:
    """Three processes a side of 400 samples: the p99 family finds the doubled row, the p50 family
    finds nothing, and no other row is flagged."""
    rng = np.random.default_rng(1)
    base = synthetic_receipt(_six_rows(rng, None), repeats=3)
    head = synthetic_receipt(_six_rows(np.random.default_rng(2), "c3"), repeats=3)
    d = diff_receipts(base, head, DiffOptions(metric="both"))
    row = next(r for r in d.rows if r.case == "c3")
    p99 = next(m for m in row.metrics if m.metric == "p99")
    assert 1.8 < p99.ratio < 2.2 and p99.processes == (3, 3)
    assert p99.verdict == "slower" and row.verdict == "slower", row.reason
    assert d.exit_code == 1
    assert all(r.verdict != "slower" for r in d.rows if r.case != "c3")


def test_a_p99_from_too_few_samples_per_process_is_advisory_and_never_decides() -> None:
    """80 samples a process: p99 is shown, marked advisory, and the row's verdict is p50's."""
    rng = np.random.default_rng(21)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 5, 400)}, repeats=5)
    head = synthetic_receipt({key: _rounds(rng, 5, 400)}, repeats=5)
    row = diff_receipts(base, head, DiffOptions(metric="both")).rows[0]
    p50, p99 = row.metrics
    assert p99.advisory and p99.ci is None and p99.ratio is not None and "advisory" in p99.reason
    assert not p50.advisory and row.verdict == p50.verdict == "unchanged", row.reason


def _pick(chosen: str, ms: float, sites: int = 1) -> dict:
    return {"kind": "autotune_choice", "op": "bmm", "input_shapes": [["4", "64", "64"]] * 2,
            "chosen": chosen, "chosen_kind": "triton_template" if "triton" in chosen else "aten",
            "chosen_ms": ms, "alternatives": [{"kernel": "bmm", "ms": ms * 1.3}], "count": sites}


def test_autotune_entries_with_other_measured_times_stay_comparable() -> None:
    """Fallback entries carry kernel timings (11.99 ms in one run, 0.095 ms in the next)."""
    rng = np.random.default_rng(3)
    key = ("torch-compile", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 3, 600)}, repeats=3,
                             fallbacks={key: [_pick("triton_bmm_3", 11.99)]})
    head = synthetic_receipt({key: _rounds(rng, 3, 600)}, repeats=3,
                             fallbacks={key: [_pick("triton_bmm_7", 0.095)]})
    row = diff_receipts(base, head).rows[0]
    assert row.verdict in ("unchanged", "unresolved") and row.causes == ()
    head = synthetic_receipt({key: _rounds(rng, 3, 600, scale=2.0)}, repeats=3,
                             fallbacks={key: [_pick("bmm", 0.2, sites=3)]})
    base = synthetic_receipt({key: _rounds(rng, 3, 600)}, repeats=3,
                             fallbacks={key: [_pick("triton_bmm_3", 0.1, 3)]})
    row = diff_receipts(base, head).rows[0]
    assert row.verdict == "slower"
    assert row.causes and "triton_bmm → bmm" in row.causes[0] and "3 sites" in row.causes[0], row.causes


def test_a_receipt_edited_to_another_cpu_is_unreliable_never_slower() -> None:
    rng = np.random.default_rng(4)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 3, 1200)}, repeats=3)
    head = synthetic_receipt({key: _rounds(rng, 3, 1200, scale=2.0)}, repeats=3,
                             environment={"cpu": "Intel Xeon Platinum 8480", "cpu_count": 112})
    d = diff_receipts(base, head)
    row = d.rows[0]
    assert row.verdict == "unreliable" and row.conditions == ("cpu",)
    # a condition of the whole receipts: named in the row, stated (with how to judge anyway) once
    assert row.reason == "cpu (see the notes)"
    assert sum("accept=cpu" in n for n in d.notes) == 1
    env = base.environment
    was = f"cpu {env['cpu']} → Intel Xeon Platinum 8480, cpu_count {env['cpu_count']} → 112"
    assert any(was in n for n in d.notes), d.notes
    assert row.metrics[0].ratio and 1.8 < row.metrics[0].ratio < 2.2  # the numbers are kept, not judged
    assert d.exit_code == 3
    d = diff_receipts(base, head, DiffOptions(accept=frozenset({"cpu"})))
    assert d.rows[0].verdict == "slower" and d.exit_code == 1


def _process(busy: float, clock: float | None = None, reasons: tuple[str, ...] = (),
             control: float | None = None) -> dict:
    out: dict = {"load": {"busy_fraction": busy}}
    if clock is not None:
        out["gpu"] = {"readings": 5, "idle_readings": 0, "sm_clock_mhz": clock,
                      "throttle_reasons": list(reasons)}
    if control is not None:
        out["control"] = {"name": "json-sort-v1", "n": 200, "p50_ns": control, "se_log": 0.003}
    return out


def test_load_gpu_while_working_power_limit_and_versions_are_conditions() -> None:
    rng = np.random.default_rng(5)
    key = ("torch-eager", "invoice")
    rows = {key: _rounds(rng, 2, 800)}
    idle_env = {"gpu": {"name": "NVIDIA H200", "driver": "570.1", "power_limit_w": "700.00"},
                "torch": "2.9.0"}
    busy_env = {"gpu": {"name": "NVIDIA H200", "driver": "575.2", "power_limit_w": "500.00"},
                "torch": "2.10.0"}
    base = synthetic_receipt(rows, repeats=2, environment=idle_env,
                             processes=[_process(0.05, 1980), _process(0.02, 1975)])
    head = synthetic_receipt(rows, repeats=2, environment=busy_env,
                             processes=[_process(0.97, 1400, ("sw_power_cap",)), _process(0.1, 1410)])
    d = diff_receipts(base, head)
    notes = " ".join(d.notes)
    assert d.rows[0].verdict == "unreliable" and set(d.rows[0].conditions) == {"load", "gpu", "versions"}
    for needle in ("BASE busy at start in 0 of 2 processes, HEAD busy at start in 1 of 2 processes",
                   "driver 570.1 → 575.2", "power limit 700.00 → 500.00",
                   "sm clock while working 1977.5 → 1405 MHz", "throttle while working none → sw_power_cap",
                   "torch 2.9.0 → 2.10.0"):
        assert needle in notes, needle
    d = diff_receipts(base, head, DiffOptions(accept=frozenset({"load", "gpu", "versions"})))
    assert d.rows[0].verdict in ("unchanged", "unresolved") and len(d.rows[0].accepted) == 3


def test_a_gpu_fact_recorded_by_one_side_only_is_named_not_compared() -> None:
    """A receipt written before benchbox read the power limit (the committed H200 baseline) against
    a run that reads it: unknown is not a difference, so no row turns unreliable for it, and the
    notes name the fact and the side that recorded it. A driver that differs still counts."""
    rng = np.random.default_rng(7)
    key = ("torch-eager", "invoice")
    rows = {key: _rounds(rng, 2, 800)}
    old = {"gpu": {"name": "NVIDIA H200", "driver": "580.1"}}
    new = {"gpu": {"name": "NVIDIA H200", "driver": "580.1", "power_limit_w": "700.00"}}
    procs = [_process(0.0, 1980), _process(0.0, 1980)]
    base = synthetic_receipt(rows, repeats=2, environment=old, processes=procs)
    head = synthetic_receipt(rows, repeats=2, environment=new, processes=procs)
    d = diff_receipts(base, head, base_name="old.json", head_name="new.json")
    assert d.rows[0].verdict != "unreliable" and "gpu" not in d.rows[0].conditions
    assert [n for n in d.notes if "power limit" in n] == [
        "not compared: power limit recorded by new.json only (700.00)"]
    d = diff_receipts(head, base)
    assert "not compared: power limit recorded by BASE only (700.00)" in d.notes
    moved = synthetic_receipt(rows, repeats=2, processes=procs,
                              environment={"gpu": {**new["gpu"], "driver": "575.2"}})
    d = diff_receipts(base, moved)
    assert d.rows[0].verdict == "unreliable" and d.rows[0].conditions == ("gpu",)
    gpu_notes = [n for n in d.notes if "gpu differs" in n]
    assert gpu_notes[0].startswith("unreliable: gpu differs (driver 580.1 → 575.2);")


def test_a_clock_read_while_the_gpu_idled_is_never_a_condition() -> None:
    """An idle card's clock at start (840 vs 345 MHz, throttle gpu_idle) says nothing about the
    work; readings while working that agree leave the comparison alone."""
    rng = np.random.default_rng(9)
    key = ("torch-eager", "invoice")
    rows = {key: _rounds(rng, 2, 800)}
    gpu = {"name": "NVIDIA H200", "driver": "580.1"}
    base = synthetic_receipt(rows, repeats=2, environment={
        "gpu": gpu, "gpu_state_before": {"sm_clock_mhz": 840, "throttle_reasons": ["gpu_idle"]}},
        processes=[_process(0.0, 1980, ("gpu_idle",)), _process(0.0, 1980)])
    head = synthetic_receipt(rows, repeats=2, environment={
        "gpu": gpu, "gpu_state_before": {"sm_clock_mhz": 345, "throttle_reasons": ["gpu_idle"]}},
        processes=[_process(0.0, 1965), _process(0.0, 1980)])
    d = diff_receipts(base, head)
    assert not any("gpu" in n for n in d.notes) and d.rows[0].verdict != "unreliable"


def test_the_control_workload_tells_a_machine_change_from_a_code_change() -> None:
    """The control (fixed host work) ran 20% slower in every HEAD process: the machine moved,
    so the row is unreliable (machine); a control that held leaves the row to its statistics."""
    rng = np.random.default_rng(10)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 3, 1200)}, repeats=3,
                             processes=[_process(0.0, control=300_000 + i * 500) for i in range(3)])
    slow_machine = synthetic_receipt({key: _rounds(rng, 3, 1200, scale=1.2)}, repeats=3,
                                     processes=[_process(0.0, control=360_000 + i * 500) for i in range(3)])
    d = diff_receipts(base, slow_machine)
    assert d.rows[0].verdict == "unreliable" and d.rows[0].conditions == ("machine",)
    assert any("control workload" in n and "×1.200" in n for n in d.notes)
    same_machine = synthetic_receipt({key: _rounds(rng, 3, 1200, scale=1.2)}, repeats=3,
                                     processes=[_process(0.0, control=300_200 + i * 500) for i in range(3)])
    assert diff_receipts(base, same_machine).rows[0].verdict == "slower"


def test_time_between_regions_that_moved_is_a_pacing_condition() -> None:
    """model_io_wall-like region (parse is outside it here): the time outside the region grew
    from 1 ms to 6 ms per call while the region stayed; the diff says pacing, never slower."""
    from dataclasses import replace

    rng = np.random.default_rng(11)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 3, 1200)}, repeats=3)
    head = synthetic_receipt({key: _rounds(rng, 3, 1200, scale=1.3)}, repeats=3)
    region = replace(base.contract, stages=("serialize",))  # parse (every stage here) lies outside it

    def outside(r, ms: float):
        rows = tuple(replace(row, stages_ns={"parse": tuple([int(ms * MS)] * len(row.samples_ns))})
                     for row in r.results)
        return replace(r, results=rows, contract=region)

    d = diff_receipts(outside(base, 1.0), outside(head, 6.0))
    assert d.rows[0].verdict == "unreliable" and d.rows[0].conditions == ("pacing",)
    assert "time between regions moved 1000.0 → 6000.0 µs" in d.rows[0].reason
    assert diff_receipts(outside(base, 1.0), outside(head, 1.02)).rows[0].verdict == "slower"


def test_a_machine_busy_on_both_sides_is_a_load_condition_too() -> None:
    """Identical code on a machine whose every core was busy with other work, base and head
    alike, diffed as a regression (BENCHMARKS.md §4): a busy start on either side is a condition."""
    rng = np.random.default_rng(8)
    key = ("torch-eager", "invoice")
    busy = [_process(1.0) for _ in range(5)]
    base = synthetic_receipt({key: _rounds(rng, 5, 2000)}, repeats=5, processes=busy)
    head = synthetic_receipt({key: _rounds(rng, 5, 2000, scale=1.5)}, repeats=5, processes=busy)
    d = diff_receipts(base, head)
    assert d.rows[0].verdict == "unreliable" and d.exit_code == 3
    assert any("both sides shared the CPU" in n for n in d.notes) and d.rows[0].reason.startswith("load")
    assert diff_receipts(base, head, DiffOptions(accept=frozenset({"load"}))).rows[0].verdict == "slower"
    idle = [_process(0.1) for _ in range(5)]
    quiet = diff_receipts(
        synthetic_receipt({key: _rounds(rng, 5, 2000)}, repeats=5, processes=idle),
        synthetic_receipt({key: _rounds(rng, 5, 2000, scale=1.5)}, repeats=5, processes=idle))
    assert quiet.rows[0].verdict == "slower"


def test_a_busy_side_is_a_load_condition_when_the_other_read_no_load() -> None:
    """A receipt written before benchbox read the load says nothing about it; a side that started
    busy still shared the CPU, and that alone moves timings."""
    rng = np.random.default_rng(12)
    key = ("torch-eager", "invoice")
    unread = synthetic_receipt({key: _rounds(rng, 2, 2000)}, repeats=2, processes=[{}, {}],
                               environment={"load": None})
    busy = synthetic_receipt({key: _rounds(rng, 2, 2000)}, repeats=2,
                             processes=[_process(0.95), _process(0.1)])
    idle = synthetic_receipt({key: _rounds(rng, 2, 2000)}, repeats=2,
                             processes=[_process(0.05), _process(0.1)])
    d = diff_receipts(unread, busy)
    assert d.rows[0].verdict == "unreliable" and d.rows[0].conditions == ("load",)
    assert any(n.startswith("unreliable: load differs (BASE read no load at start, HEAD busy at start in 1 "
                            "of 2 processes)") for n in d.notes), d.notes
    assert "load" not in diff_receipts(unread, idle).rows[0].conditions
    assert "load" not in diff_receipts(idle, unread).rows[0].conditions


def test_torch_threads_that_differ_are_a_cpu_condition_where_both_sides_read_them() -> None:
    """--threads 1 on one side only (the CI recipe uses it) moves timings as a code change would not."""
    rng = np.random.default_rng(13)
    key = ("torch-eager", "invoice")
    procs = [_process(0.0), _process(0.0)]

    def side(threads: int | None):
        return synthetic_receipt({key: _rounds(rng, 2, 2000)}, repeats=2, processes=procs,
                                 environment={"torch_threads": threads})

    d = diff_receipts(side(16), side(1))
    assert d.rows[0].conditions == ("cpu",)
    assert any(n.startswith("unreliable: cpu differs (torch threads 16 → 1)") for n in d.notes), d.notes
    assert diff_receipts(side(None), side(1)).rows[0].conditions == ()
    assert diff_receipts(side(2), side(2)).rows[0].conditions == ()


def test_a_noisy_row_of_one_process_is_unreliable_unless_accepted() -> None:
    rng = np.random.default_rng(6)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 1, 400)})
    head = synthetic_receipt({key: _rounds(rng, 1, 400, scale=4.0, sigma=0.6)})
    d = diff_receipts(base, head)
    assert d.rows[0].verdict == "unreliable" and d.rows[0].reason.startswith("noisy: HEAD robust coefficient")
    assert diff_receipts(base, head, DiffOptions(accept=frozenset({"noisy"}))).rows[0].verdict == "slower"


def test_with_processes_measured_a_noisy_row_is_judged_by_its_interval() -> None:
    """Five processes a side: the spread is measured, so the noise flag no longer blocks the
    verdict; the same samples as one process stay unreliable."""
    rng = np.random.default_rng(7)
    key = ("torch-eager", "invoice")
    base_r = _rounds(rng, 5, 2000, sigma=0.6)
    head_r = _rounds(rng, 5, 2000, scale=2.0, sigma=0.6)
    d = diff_receipts(synthetic_receipt({key: base_r}, repeats=5),
                      synthetic_receipt({key: head_r}, repeats=5))
    assert d.rows[0].verdict == "slower", d.rows[0].reason
    one = diff_receipts(synthetic_receipt({key: base_r}, repeats=5, in_process=True),
                        synthetic_receipt({key: head_r}, repeats=5, in_process=True))
    assert one.rows[0].verdict == "unreliable" and "noisy" in one.rows[0].reason


def test_noise_is_read_within_processes_never_from_the_drift_between_them() -> None:
    """Quiet processes (robust CV 5%) that drift 30% apart: not noisy; the drift is what the
    processes measure."""
    from benchbox.receipts.conditions import row_flags

    rng = np.random.default_rng(17)
    key = ("torch-eager", "invoice")
    r = synthetic_receipt({key: [MS * f * np.exp(rng.normal(0, 0.05, 300)) for f in (0.7, 1.0, 1.4)]},
                          repeats=3)
    assert "noisy" not in row_flags(r, r.results[0])


# -- processes: simulations (seeded); benchmarks/diff_calibration.py runs the full grid -------------

def _slower_rate(effect: float, reps: int, seed: int, k: int = 5, drift: float = 0.05) -> float:
    rng = np.random.default_rng(seed)
    key = ("torch-eager", "invoice")
    slower = 0
    for _ in range(reps):
        base = synthetic_receipt({key: _rounds(rng, k, 80 * k, drift=drift)}, repeats=k)
        head = synthetic_receipt({key: _rounds(rng, k, 80 * k, drift=drift, scale=effect)}, repeats=k)
        slower += diff_receipts(base, head).rows[0].verdict == "slower"
    return slower / reps


def test_five_processes_with_5_percent_drift_unchanged_rarely_reads_slower() -> None:
    assert _slower_rate(1.0, 300, seed=10) <= 0.05


def test_five_processes_with_2_percent_drift_detect_a_10_percent_slowdown() -> None:
    assert _slower_rate(1.10, 200, seed=11, drift=0.02) >= 0.85


def test_two_processes_a_side_keep_their_false_alarm_rate_at_20_percent_drift() -> None:
    """The hierarchical bootstrap this replaced alarmed in 15–17% of such diffs."""
    assert _slower_rate(1.0, 300, seed=18, k=2, drift=0.20) <= 0.05


def test_rounds_of_one_process_are_one_replication() -> None:
    """The same samples as five processes give a wide interval, as five rounds of one process the
    interval of a single process (and its run-to-run spread is not measured)."""
    rng = np.random.default_rng(12)
    key = ("torch-eager", "invoice")
    a, b = _rounds(rng, 5, 1000, drift=0.08), _rounds(rng, 5, 1000, drift=0.08)
    five = diff_receipts(synthetic_receipt({key: a}, repeats=5), synthetic_receipt({key: b}, repeats=5))
    one = diff_receipts(synthetic_receipt({key: a}, repeats=5, in_process=True),
                        synthetic_receipt({key: b}, repeats=5, in_process=True),
                        DiffOptions(accept=frozenset({"unsettled"})))
    assert five.rows[0].metrics[0].processes == (5, 5) and one.rows[0].metrics[0].processes == (1, 1)
    assert five.rows[0].metrics[0].spread == ("measured", "measured")
    assert one.rows[0].metrics[0].spread == ("assumed", "assumed")


def test_a_given_drift_replaces_the_assumed_one_for_a_single_process() -> None:
    rng = np.random.default_rng(19)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 1, 400)})
    head = synthetic_receipt({key: _rounds(rng, 1, 400, scale=1.3)})
    assumed = diff_receipts(base, head).rows[0]
    given = diff_receipts(base, head, DiffOptions(drift=0.02)).rows[0]
    assert assumed.verdict == "unresolved" and given.verdict == "slower"
    assert given.metrics[0].spread == ("prior", "prior")
    assert given.detectable < 0.1 < assumed.detectable


def test_one_process_against_several_takes_their_spread() -> None:
    """A committed baseline of one run against five: the five's spread stands for both sides."""
    rng = np.random.default_rng(20)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 1, 400, drift=0.02)})
    head = synthetic_receipt({key: _rounds(rng, 5, 2000, drift=0.02, scale=1.3)}, repeats=5)
    m = diff_receipts(base, head).rows[0].metrics[0]
    assert m.spread == ("pooled", "measured") and m.df == 4 and m.verdict == "slower"


def test_every_judged_row_says_what_it_could_detect_and_how_many_processes_would_resolve_it() -> None:
    rng = np.random.default_rng(22)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 3, 600, drift=0.1)}, repeats=3)
    head = synthetic_receipt({key: _rounds(rng, 3, 600, drift=0.1)}, repeats=3)
    d = diff_receipts(base, head)
    row = d.rows[0]
    assert row.detectable is not None and row.detectable > 0.05 and row.needed and row.needed > 3
    assert f"{row.needed} processes a side would resolve ±5%" in row.reason
    res = d.resolution()
    assert res["rows_over_threshold"] == 1 and res["needed"] == row.needed
    more = diff_receipts(synthetic_receipt({key: _rounds(rng, row.needed, 200 * row.needed, drift=0.1)},
                                           repeats=row.needed),
                         synthetic_receipt({key: _rounds(rng, row.needed, 200 * row.needed, drift=0.1)},
                                           repeats=row.needed))
    assert more.rows[0].detectable < row.detectable


def test_p_values_of_unchanged_rows_are_calibrated_for_both_families() -> None:
    """Welch's t over three processes of 400 samples: P(p < 0.05) stays near 0.05 for both metrics."""
    rng = np.random.default_rng(13)
    key = ("torch-eager", "invoice")
    hits = {"p50": 0, "p99": 0}
    reps = 150
    for _ in range(reps):
        base = synthetic_receipt({key: _rounds(rng, 3, 1200, drift=0.03)}, repeats=3)
        head = synthetic_receipt({key: _rounds(rng, 3, 1200, drift=0.03)}, repeats=3)
        for m in diff_receipts(base, head, DiffOptions(metric="both")).rows[0].metrics:
            hits[m.metric] += m.p_value < 0.05
    assert hits["p50"] / reps <= 0.09 and hits["p99"] / reps <= 0.09, hits


def test_twenty_unchanged_rows_with_both_metrics_raise_no_alarm_and_are_deterministic() -> None:
    rng = np.random.default_rng(14)
    rows_b = {("torch-eager", f"c{i}"): _rounds(rng, 5, 2000, drift=0.03) for i in range(20)}
    rows_h = {("torch-eager", f"c{i}"): _rounds(rng, 5, 2000, drift=0.03) for i in range(20)}
    base, head = synthetic_receipt(rows_b, repeats=5), synthetic_receipt(rows_h, repeats=5)
    d = diff_receipts(base, head, DiffOptions(metric="both"))
    assert d.exit_code == 0 and not any(r.verdict in ("slower", "faster") for r in d.rows)
    again = diff_receipts(base, head, DiffOptions(metric="both"))
    assert [r.metrics for r in again.rows] == [r.metrics for r in d.rows]


@pytest.mark.parametrize("metric", ["p50", "both"])
def test_exit_codes(metric: str) -> None:
    rng = np.random.default_rng(15)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 1, 400)})
    same = synthetic_receipt({key: _rounds(rng, 1, 400)})
    d = diff_receipts(base, same, DiffOptions(metric=metric))
    assert d.exit_code == 0 and d.rows[0].verdict == "unresolved"  # judged: nothing beyond plausible drift


def test_a_diff_that_could_judge_no_row_exits_3() -> None:
    """Every row not comparable (another device): nothing was judged, so CI cannot stay green."""
    rng = np.random.default_rng(23)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: _rounds(rng, 1, 400)})
    head = synthetic_receipt({key: _rounds(rng, 1, 400)}, environment={"device": "cuda"})
    d = diff_receipts(base, head)
    assert d.rows[0].verdict == "not comparable" and d.exit_code == 3


def test_markdown_of_a_huge_diff_fits_one_comment() -> None:
    """600 rows with long names and many compiler changes: the report stays ≤ 60,000 characters."""
    from benchbox.render.diff import MARKDOWN_LIMIT, diff_markdown

    rng = np.random.default_rng(16)
    long = "x" * 185  # case names near the 200-character limit a receipt may carry
    keys = [(f"torch-compile-{i % 3}", f"case-{i}-{long}") for i in range(600)]
    picks = {k: [dict(_pick(f"triton_bmm_{j}", 0.1), op=f"op{j}") for j in range(40)] for k in keys}
    other = {k: [dict(_pick("bmm", 0.1), op=f"op{j}") for j in range(40)] for k in keys}
    base = synthetic_receipt({k: [rng.lognormal(13.8, 0.05, 40)] for k in keys}, fallbacks=picks)
    head = synthetic_receipt({k: [rng.lognormal(15.5, 0.05, 40)] for k in keys}, fallbacks=other)
    d = diff_receipts(base, head)
    text = diff_markdown(d)
    assert len(text) <= MARKDOWN_LIMIT
    assert "<details>" in text and "more rows" in text
    assert sum(r.verdict == "slower" for r in d.rows) >= 550  # a few iid rows read unsettled by chance
    assert all(len(r.causes) <= 6 for r in d.rows)
