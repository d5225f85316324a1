"""The process probe: timed at each process's start, before the code under test first runs,
carried by every row of the process, and adjusted for by diff.

A machine whose speed for memory-bound work moves between processes moves a row's processes
and the probe timed in them together; the diff's covariance adjustment removes that shared
part, so a change the processes' spread hides is resolved, and identical code stays unflagged.
Timed before the code under test runs, the probe cannot move with the change under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import benchbox
from benchbox import stats
from benchbox.harness import control
from benchbox.receipts import adjust
from benchbox.receipts.combine import combine
from benchbox.receipts.replication import ADJUSTED_PROBES, process_probes
from tests.support import synthetic_receipt

KEY = ("torch-eager", "invoice")


def _side(rng: np.random.Generator, k: int, scale: float, machine_sd: float = 0.25,
          n: int = 60) -> tuple[list[np.ndarray], list[int]]:
    """k processes: each on a machine state m ~ N(0, machine_sd) that moves both the row's
    samples (×e^m) and the probe timed in the process (×e^m, with 2% noise of its own)."""
    rounds, probes = [], []
    for _ in range(k):
        m = rng.normal(0.0, machine_sd)
        rounds.append(1e6 * scale * math.exp(m) * np.exp(rng.normal(0.0, 0.02, n)))
        probes.append(int(8e5 * math.exp(m + rng.normal(0.0, 0.02))))
    return rounds, probes


def _pair(seed: int, slow: float, with_probes: bool = True, k: int = 5):
    rng = np.random.default_rng(seed)
    (ra, pa), (rb, pb) = _side(rng, k, 1.0), _side(rng, k, 1.0 + slow)
    base = synthetic_receipt({KEY: ra}, repeats=k, probes={KEY: pa} if with_probes else None)
    head = synthetic_receipt({KEY: rb}, repeats=k, probes={KEY: pb} if with_probes else None)
    return base, head


def test_a_run_times_the_probe_once_per_process_and_names_it(tmp_path) -> None:
    out = benchbox.run(runners=("torch-eager",), cases=("invoice", "outage"), samples=30, warmup=1,
                       out=tmp_path / "r.json")
    r = out.receipt
    assert [p.control["row_probe"] for p in r.processes] == [control.PROBE]
    for row in r.results:
        assert row.process_probe_ns is not None and len(row.process_probe_ns) == 1
        assert row.process_probe_ns[0] > 0
    assert process_probes([r, r], [r.results[0], r.results[1]]) is not None


@pytest.mark.parametrize("repeats", [1, 2])
def test_the_probe_is_timed_before_the_task_is_loaded_and_every_row_carries_it(monkeypatch, tmp_path,
                                                                                repeats: int) -> None:
    """A covariate the change under test can move is not one: the probe comes first, once, before
    the task's constructor, cases, parse and calls; each row records its median."""
    from benchbox.run import sequence
    from benchbox.tasks.decision.task import DecisionTask

    events: list[str] = []
    real = {name: getattr(DecisionTask, name) for name in ("__post_init__", "cases", "parse", "serialize")}

    def watched(name):
        def method(self, *a, **k):
            events.append(name)
            return real[name](self, *a, **k)
        return method

    def probed(*a, **k):
        events.append("probe")
        return [1000, 3000, 2000]  # known durations: the rows must carry their median

    monkeypatch.setattr(sequence, "probe", probed)
    for name in real:
        monkeypatch.setattr(DecisionTask, name, watched(name))
    out = benchbox.run(runners=("torch-eager",), cases=("invoice", "outage"), samples=5, warmup=1,
                       repeats=repeats, fresh_processes=False, out=tmp_path / "r.json")
    assert events[0] == "probe" and events.count("probe") == 1, events[:5]
    assert {"__post_init__", "cases", "parse"} <= set(events)
    assert events.count("serialize") >= 2 * 5 * repeats
    assert [p.control["row_probe"] for p in out.receipt.processes] == [control.PROBE]
    assert [row.process_probe_ns for row in out.receipt.results] == [(2000,), (2000,)]


@pytest.mark.parametrize("names", [("sort-200k-v1", "sort-200k-v1"), ("sort-200k-start-v2", control.PROBE)])
def test_only_one_probe_timed_before_the_code_runs_is_adjusted_for(names: tuple[str, str]) -> None:
    """v1 was timed beside each row's samples, where the code under test moved it: receipts that
    carry it are compared unadjusted; so are sides whose probes are not the same version."""
    assert control.PROBE in ADJUSTED_PROBES and "sort-200k-v1" not in ADJUSTED_PROBES
    rng = np.random.default_rng(5)
    (ra, pa), (rb, pb) = _side(rng, 5, 1.0), _side(rng, 5, 1.1)
    def procs(name: str) -> list[dict]:
        return [{"pid": 100 + i, "control": {"name": "json-sort-v1", "row_probe": name}} for i in range(5)]

    base = synthetic_receipt({KEY: ra}, repeats=5, probes={KEY: pa}, processes=procs(names[0]))
    head = synthetic_receipt({KEY: rb}, repeats=5, probes={KEY: pb}, processes=procs(names[1]))
    assert _pair(5, 0.10)[0].processes[0].control.row_probe == control.PROBE
    got = benchbox.diff(base, head, threshold=0.05).rows[0]
    assert "adjusted" not in got.reason
    assert process_probes([base, head], [base.results[0], head.results[0]]) is None


def test_the_probe_is_timed_calls_of_fixed_work() -> None:
    calls = control.probe(calls=5)
    assert len(calls) == 5 and min(calls) > 0


def test_a_hidden_ten_percent_is_resolved_with_the_probe_and_not_without() -> None:
    slower_with = slower_without = 0
    for seed in range(10):
        with_p = benchbox.diff(*_pair(seed, 0.10), threshold=0.05)
        without = benchbox.diff(*_pair(seed, 0.10, with_probes=False), threshold=0.05)
        slower_with += with_p.rows[0].verdict == "slower"
        slower_without += without.rows[0].verdict == "slower"
        assert "adjusted for the process probe" in with_p.rows[0].reason
        assert "adjusted" not in without.rows[0].reason
    assert slower_with >= 8
    assert slower_without <= 2


def test_identical_code_is_not_flagged_with_the_probe() -> None:
    flagged = sum(benchbox.diff(*_pair(100 + seed, 0.0), threshold=0.05).rows[0].verdict
                  in ("slower", "faster") for seed in range(40))
    assert flagged <= 4  # 5% false alarms expected at most: 2 on average in 40


def test_a_probe_missing_on_one_side_falls_back_to_the_unadjusted_rule() -> None:
    base, head = _pair(3, 0.10)
    bare = _pair(3, 0.10, with_probes=False)[1]
    got = benchbox.diff(base, bare, threshold=0.05).rows[0]
    assert "adjusted" not in got.reason


def test_combine_keeps_each_process_probe_in_process_order() -> None:
    rng = np.random.default_rng(7)
    parts = []
    for _ in range(3):
        rounds, probes = _side(rng, 1, 1.0)
        parts.append(synthetic_receipt({KEY: rounds}, probes={KEY: probes}))
    joined = combine(parts, [f"r{i}.json" for i in range(3)])
    row = joined.results[0]
    assert list(row.process_probe_ns) == [p.results[0].process_probe_ns[0] for p in parts]
    assert len(process_probes([joined], [row])[0]) == 3


@pytest.mark.parametrize("k", [3, 5])
def test_the_adjusted_interval_holds_its_level_on_identical_sides(k: int) -> None:
    rng = np.random.default_rng(k)
    covered = 0
    reps = 600
    for _ in range(reps):
        m = rng.normal(0.0, 0.2, 2 * k)
        y = m + rng.normal(0.0, 0.03, 2 * k)
        c = m + rng.normal(0.0, 0.03, 2 * k)
        base, head = stats.Replicates(tuple(y[:k]), 0.0), stats.Replicates(tuple(y[k:]), 0.0)
        got = adjust.adjusted_log_ratio(base, head, c[:k], c[k:])
        covered += got.ci[0] <= 1.0 <= got.ci[1]
    assert 0.92 <= covered / reps <= 0.98


def test_no_adjustment_without_two_processes_a_side_or_with_a_constant_probe() -> None:
    one = stats.Replicates((0.0,), 0.0)
    two = stats.Replicates((0.0, 0.1), 0.0)
    three = stats.Replicates((0.0, 0.1, 0.2), 0.0)
    assert adjust.adjusted_log_ratio(one, three, [1.0], [1.0, 2.0, 3.0]) is None
    assert adjust.adjusted_log_ratio(two, two, [1.0, 2.0], [1.0, 2.0]) is None  # n = 4 < 5
    assert adjust.adjusted_log_ratio(three, three, [1.0] * 3, [1.0] * 3) is None


def test_a_moved_machine_is_stated_and_adjusted_for_not_a_refusal() -> None:
    """Every HEAD process ran on a machine 20% slower (the control workload and the probe say so);
    the code did not change. Without the probe the row is unreliable (machine); with it the row is
    judged on what the machine's state does not explain, and the move is stated as accepted."""
    rng = np.random.default_rng(11)

    def side(k: int, machine: float, probe_name: str | None):
        rounds, probes, procs = [], [], []
        for i in range(k):
            m = machine + rng.normal(0.0, 0.15)
            rounds.append(1e6 * math.exp(m) * np.exp(rng.normal(0.0, 0.02, 60)))
            probes.append(int(8e5 * math.exp(m + rng.normal(0.0, 0.01))))
            control = {"name": "json-sort-v1", "p50_ns": int(3e5 * math.exp(machine) * (1 + i / 1000)),
                       "se_log": 0.001}
            procs.append({"pid": 100 + i, "control": {**control, "row_probe": probe_name} if probe_name
                          else control})
        return synthetic_receipt({KEY: rounds}, repeats=k, processes=procs,
                                 probes={KEY: probes} if probe_name else None)

    bare = benchbox.diff(side(5, 0.0, None), side(5, math.log(1.2), None), threshold=0.05).rows[0]
    assert bare.verdict == "unreliable" and "machine" in bare.conditions
    got = benchbox.diff(side(5, 0.0, control.PROBE), side(5, math.log(1.2), control.PROBE),
                        threshold=0.05).rows[0]
    assert got.verdict not in ("unreliable", "slower"), got.reason
    assert any(a.startswith("machine:") for a in got.accepted)
    assert "adjusted for the process probe" in got.reason


def test_a_moved_control_with_one_process_a_side_is_a_condition_not_an_adjustment() -> None:
    """The probe adjusts a row only with ≥ 2 processes a side and ≥ 5 in all; with one process a
    side the row is not adjusted, so a machine that moved (the control workload) still makes it
    unreliable, and nothing says it was adjusted."""
    rng = np.random.default_rng(4)

    def side(scale: float, control_ns: float, k: int = 1):
        rounds, probes = _side(rng, k, scale, machine_sd=0.0)
        named = [{"pid": 1000 + i, "control": {"name": "json-sort-v1", "row_probe": control.PROBE, "n": 200,
                                               "p50_ns": control_ns, "se_log": 0.003}} for i in range(k)]
        return synthetic_receipt({KEY: rounds}, repeats=k, probes={KEY: probes}, processes=named)

    got = benchbox.diff(side(1.0, 1e6), side(1.5, 1.3e6), threshold=0.05)
    row = got.rows[0]
    assert row.verdict == "unreliable" and "machine" in row.conditions, row
    assert not any("adjusted" in a for a in row.accepted) and got.exit_code != 1
    more = benchbox.diff(side(1.0, 1e6, k=3), side(1.5, 1.3e6, k=3), threshold=0.05).rows[0]
    assert "machine" not in more.conditions
    assert any("adjusted for the process probe" in a for a in more.accepted)
