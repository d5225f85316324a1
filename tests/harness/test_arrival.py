"""Paced arrivals: the seeded schedule, the waits, and the declared overload bound."""

from __future__ import annotations

import numpy as np
import pytest

from benchbox.contracts import load_contract
from benchbox.errors import FieldError, UsageError
from benchbox.harness import Harness
from benchbox.harness.arrival import LoadBound, poisson_offsets, schedule_rate, wait_until
from tests.harness.test_accounting import LightTask, TracingClock, _prepared


def test_the_schedule_is_seeded_and_has_the_declared_rate() -> None:
    a, b = poisson_offsets(1000.0, 20_000, seed=0), poisson_offsets(1000.0, 20_000, seed=0)
    assert np.array_equal(a, b) and not np.array_equal(a, poisson_offsets(1000.0, 20_000, seed=1))
    gaps = np.diff(np.concatenate([[0], a]))
    assert (gaps >= 0).all()
    assert abs(gaps.mean() / 1e6 - 1.0) < 0.03  # mean inter-arrival 1 ms at 1000/s
    assert abs(np.std(gaps) / np.mean(gaps) - 1.0) < 0.05  # exponential: cv 1


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
@pytest.mark.parametrize("n", [20, 150, 300, 2000])
@pytest.mark.parametrize("rate", [37.5, 400.0, 25_000.0])
def test_the_schedule_offers_the_nominal_rate_whatever_the_seed_and_length(seed: int, n: int, rate: float
                                                                           ) -> None:
    """The offered rate a receipt states is the rate the requests arrive at: n / last arrival."""
    a = poisson_offsets(rate, n, seed)
    assert len(a) == n and (np.diff(a) >= 0).all() and a[0] > 0
    assert n * 1e9 / a[-1] == pytest.approx(rate, rel=0.01)
    assert schedule_rate(a) == pytest.approx(rate, rel=0.01)


def test_the_conditioned_schedule_keeps_uniform_arrivals_and_exponential_gaps() -> None:
    """Conditioned on the last arrival, the earlier ones are uniform on [0, T]: still Poisson."""
    a = poisson_offsets(1000.0, 20_000, seed=3).astype(np.float64)
    u = a[:-1] / a[-1]
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    gaps = np.diff(np.concatenate([[0.0], a]))
    assert abs(np.std(gaps) / np.mean(gaps) - 1.0) < 0.05


@pytest.mark.parametrize("idle", ["sleep", "busy"])
def test_wait_until_never_returns_early(idle: str) -> None:
    reads: list[int] = []

    def clock() -> int:
        reads.append(len(reads) * 10)
        return reads[-1]

    wait_until(clock, 95, idle)
    assert reads[-1] >= 95


def test_an_overloaded_point_stops_at_the_declared_bound_and_says_so() -> None:
    task = LightTask()
    runner = _prepared("torch-eager", task)
    log: list[tuple[str, int]] = []
    # one unit per clock read; arrivals every 2 units, while a call takes ≥ 9 reads
    contract = load_contract("public_task_call_poisson").with_arrival(rate_per_s=1e9 / 2)
    h = Harness(contract, clock=TracingClock(log), bound=LoadBound(max_backlog=10))
    m = h.measure(task, runner, task.cases()[0].request, samples=500, warmup=1)
    assert 0 < len(m.samples_ns) < 500
    assert m.overloaded and "overloaded" in m.stop_reason and "bound of 10" in m.stop_reason
    assert m.load["max_backlog"] > 10 and m.load["bound"]["max_backlog"] == 10
    q = m.stages_ns["queue"]
    assert q[-1] > q[0], "the queue grew"


def test_a_sustained_rate_is_not_overloaded() -> None:
    task = LightTask()
    runner = _prepared("torch-eager", task)
    contract = load_contract("public_task_call_poisson").with_arrival(rate_per_s=1e9 / 400)
    m = Harness(contract, clock=TracingClock([])).measure(task, runner, task.cases()[0].request,
                                                          samples=50, warmup=1)
    assert len(m.samples_ns) == 50 and not m.overloaded and m.load["utilisation"] < 1


def test_poisson_without_a_rate_and_bad_bounds_are_refused() -> None:
    task = LightTask()
    runner = _prepared("torch-eager", task)
    with pytest.raises(UsageError, match="need a rate"):
        Harness(load_contract("public_task_call_poisson")).measure(
            task, runner, task.cases()[0].request, samples=3, warmup=0)
    with pytest.raises(FieldError, match="must be an integer"):
        LoadBound(max_backlog=0)
    with pytest.raises(FieldError, match="positive number"):
        LoadBound(max_queue_ms=float("nan"))


def test_the_backlog_counts_arrivals_beyond_the_sampled_schedule() -> None:
    """20 samples, a backlog bound of 50: only arrivals past the 20 scheduled ones can pass it."""
    task = LightTask()
    runner = _prepared("torch-eager", task)
    contract = load_contract("public_task_call_poisson").with_arrival(rate_per_s=1e9 / 2)
    h = Harness(contract, clock=TracingClock([]), bound=LoadBound(max_backlog=50))
    m = h.measure(task, runner, task.cases()[0].request, samples=20, warmup=1)
    assert m.overloaded and "bound of 50" in m.stop_reason and len(m.samples_ns) < 20


def test_settle_makes_untimed_back_to_back_calls_for_the_declared_time(monkeypatch: pytest.MonkeyPatch
                                                                       ) -> None:
    import time

    from tests.harness.test_queueing import VirtualClock

    clock = VirtualClock()
    monkeypatch.setattr(time, "sleep", clock.sleep)  # the task's 2 ms sleep passes on the virtual clock
    task = LightTask(options={"sleep_ms": 2.0})
    runner = _prepared("torch-eager", task)
    h = Harness(load_contract("public_task_call_wall"), clock=clock)
    request = task.cases()[0].request
    calls = h.settle(task, runner, request, 0.1)
    assert 49 <= calls <= 51 and clock.now >= 100_000_000  # 0.1 s of 2 ms calls
    assert h.settle(task, runner, request, 0.1, stop=lambda: True) == 1  # a stop ends it after one call
