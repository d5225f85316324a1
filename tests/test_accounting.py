"""The accounting proof: for every runner × every built-in contract, the timed region holds
exactly the contract's stages, and a slow stage lands only in the contracts that include it."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from benchbox.contracts import STAGES, builtin_contracts, load_contract
from benchbox.harness import Harness, PhaseTimer
from benchbox.runners import RUNNERS, availability, make_runner
from benchbox.tasks.decision.task import DecisionTask

TASK_STAGES = ("parse", "preprocess", "reduce", "answer", "serialize")
RUNNER_STAGES = ("h2d", "compute", "d2h")


class TracingClock:
    """A clock that logs each read into the shared event log and returns the log position."""

    def __init__(self, log: list[tuple[str, int]]) -> None:
        self.log = log

    def __call__(self) -> int:
        pos = len(self.log)
        self.log.append(("clock", pos))
        return pos


def _trace(obj: Any, names: tuple[str, ...], log: list[tuple[str, int]]) -> None:
    for name in names:
        fn = getattr(obj, name)

        def traced(*a: Any, _fn: Any = fn, _name: str = name) -> Any:
            log.append((_name, len(log)))
            return _fn(*a)

        setattr(obj, name, traced)


class SlowSerialize(DecisionTask):
    """The built-in task whose serialize stage sleeps 20 ms."""

    def serialize(self, answer: Any) -> bytes:
        time.sleep(0.020)
        return super().serialize(answer)


def _prepared(name: str, task: DecisionTask) -> Any:
    reason = availability(name, "cpu")
    if reason is not None:
        pytest.skip(f"{name} cannot run on this machine: {reason}")
    runner = make_runner(name, "cpu", {"mode": "default"} if name == "torch-compile" else None)
    example = task.preprocess(task.parse(task.cases()[0].request))
    runner.prepare(task, task.build_model(), example, PhaseTimer())
    return runner


@pytest.fixture(scope="module")
def runners() -> dict[str, Any]:
    task = DecisionTask()
    out = {}
    for name in RUNNERS:
        try:
            out[name] = _prepared(name, task)
        except pytest.skip.Exception:
            continue
    return out


@pytest.mark.parametrize("runner_name", list(RUNNERS))
@pytest.mark.parametrize("contract", builtin_contracts(), ids=lambda c: c.name)
def test_region_holds_exactly_the_declared_stages(runners: dict[str, Any], runner_name: str,
                                                  contract: Any) -> None:
    if runner_name not in runners:
        pytest.skip(f"{runner_name} cannot run on this machine: {availability(runner_name, 'cpu')}")
    runner = runners[runner_name]
    task = DecisionTask()
    log: list[tuple[str, int]] = []
    _trace(task, TASK_STAGES, log)
    _trace(runner, RUNNER_STAGES, log)
    try:
        warmup, samples = 2, 3
        m = Harness(contract, clock=TracingClock(log)).measure(
            task, runner, task.cases()[0].request, samples=samples, warmup=warmup)
    finally:
        for name in RUNNER_STAGES:
            del runner.__dict__[name]
    reads = [i for i, (kind, _) in enumerate(log) if kind == "clock"]
    assert len(reads) == 9 * (warmup + samples), "the harness reads the clock 9 times per call"
    a, b = contract.first_index, contract.last_index + 1
    for k in range(samples):
        g = reads[9 * (warmup + k): 9 * (warmup + k + 1)]
        inside = [name for name, _ in log[g[a] + 1: g[b]] if name != "clock"]
        assert inside == list(contract.stages)
        # on the CPU a device-clock contract falls back to the host clock over the same region
        assert m.samples_ns[k] == g[b] - g[a]
        for i, stage in enumerate(STAGES):
            between = [name for name, _ in log[g[i] + 1: g[i + 1]] if name != "clock"]
            assert between == [stage]
            assert m.stages_ns[stage][k] == g[i + 1] - g[i]
    if contract.clock == "device":
        assert m.clock_used == "host" and "host clock" in m.clock_note


@pytest.mark.parametrize("runner_name", list(RUNNERS))
def test_slow_serialize_lands_only_in_contracts_that_time_it(runners: dict[str, Any],
                                                             runner_name: str) -> None:
    if runner_name not in runners:
        pytest.skip(f"{runner_name} cannot run on this machine: {availability(runner_name, 'cpu')}")
    runner = runners[runner_name]
    fast, slow = DecisionTask(), SlowSerialize()
    request = fast.cases()[1].request
    p50 = {}
    for contract_name in ("public_task_call_wall", "model_io_wall"):
        h = Harness(load_contract(contract_name))
        for label, task in (("fast", fast), ("slow", slow)):
            m = h.measure(task, runner, request, samples=15, warmup=2)
            p50[contract_name, label] = float(np.median(m.samples_ns))
    assert p50["public_task_call_wall", "slow"] - p50["public_task_call_wall", "fast"] >= 20e6
    assert abs(p50["model_io_wall", "slow"] - p50["model_io_wall", "fast"]) < 1e6
