"""Saturated device-clock contracts (`device_throughput`): declaration, batching, accounting."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

import benchbox.harness.loop as loop_mod
from benchbox.contracts import STAGES, contract_from_dict, load_contract
from benchbox.errors import UsageError
from benchbox.harness import Harness, Measurement
from benchbox.harness.calibration import NullRunner, NullTask
from benchbox.harness.loop import clock_cross_check
from benchbox.harness.schedule import merge
from benchbox.run import RunConfig, run
from tests.support import REPO, loaded

SAT = {"name": "sat", "version": 1, "stages": ["compute"], "clock": "device",
       "policy": {"fresh_request": False, "saturated": True}}


@pytest.fixture(autouse=True)
def short_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_mod, "SATURATED_SETTLE_S", 0.05)


@pytest.mark.parametrize("change, needle", [
    ({"clock": "host"}, 'needs clock = "device" and stages = ["compute"]'),
    ({"stages": ["h2d", "compute"]}, 'needs clock = "device" and stages = ["compute"]'),
    ({"policy": {"saturated": True}}, "declare policy.fresh_request = false"),
    ({"policy": {"saturated": True, "fresh_request": False, "hold_stream": True}}, "hold_stream = false"),
    ({"policy": {"saturated": True, "fresh_request": False, "sync_at_close": "stream"}},
     "hold_stream = false"),
    ({"policy": {"saturated": True, "fresh_request": False, "saturated_typo": 1}}, "unknown policy field"),
    ({"policy": {"saturated": True, "fresh_request": False, "event_floor": "subtract"}},
     'declare event_floor = "keep"'),
])
def test_saturated_declarations_that_cannot_hold_are_refused_in_one_line(change: dict, needle: str) -> None:
    with pytest.raises(UsageError) as e:
        contract_from_dict({**SAT, **change})
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_the_new_policy_field_leaves_the_hashes_of_contracts_declared_before_it_unchanged() -> None:
    for name in ("public_task_call_wall", "model_io_wall", "device_compute", "device_span"):
        c = load_contract(name)
        assert "saturated" not in c.canonical()["policy"]
        blob = json.dumps(c.canonical(), sort_keys=True, separators=(",", ":"))
        assert c.hash == hashlib.sha256(blob.encode()).hexdigest()
        # the committed H200 receipts were written under the same declarations
        committed = json.loads((REPO / "receipts" / f"h200-tiny-fp32.{name}.json").read_text())
        assert committed["contract"]["hash"] == c.hash
    sat = load_contract("device_throughput")
    assert sat.canonical()["policy"]["saturated"] is True
    flipped = contract_from_dict({**sat.canonical(), "policy": {**sat.canonical()["policy"],
                                                                "saturated": False}})
    assert flipped.hash != sat.hash


class SlowRunner(NullRunner):
    """A CPU runner whose compute takes at least 0.4 ms, counting its calls."""

    def __init__(self) -> None:
        super().__init__("cpu")
        self.computes = 0
        self.d2h_calls = 0

    def compute(self, inputs: Any) -> Any:
        self.computes += 1
        end = time.perf_counter() + 0.0004
        while time.perf_counter() < end:
            pass
        return inputs

    def d2h(self, outputs: Any) -> dict[str, Any]:
        self.d2h_calls += 1
        return {"y": outputs[0]}


def test_saturated_sampling_on_a_cpu_runner_times_batches_with_the_host_clock() -> None:
    runner = SlowRunner()
    m = Harness(contract_from_dict(SAT)).measure(NullTask(), runner, b"{}", samples=25, warmup=3)
    assert m.clock_used == "host" and m.clock_note.startswith("saturated:")
    # a batch spans ≥ 2 ms, so with ≥ 0.4 ms per call it holds between 2 and 5 calls
    assert 2 <= m.batch <= 5, m.batch
    assert len(m.samples_ns) == 25 and all(s >= 400_000 for s in m.samples_ns)
    assert len(m.stages_ns["compute"]) == 25
    assert all(m.stages_ns[s] == [] for s in STAGES if s != "compute")
    # the rest of the call ran once, on one more compute's outputs
    assert runner.d2h_calls == 1
    assert runner.computes >= 3 + 10 + 25 * m.batch + 1
    assert m.host_span_ns >= sum(m.samples_ns) * m.batch


class MockEvents:
    """Mocks what cannot exist here, CUDA events: a mark is a host clock read taken when recorded.

    Calls are synchronous on the CPU, so the device timeline is the host's; the log shows
    where each mark falls between compute calls.
    """

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.waited: list[int] = []

    def mark(self) -> int:
        self.log.append("mark")
        return time.perf_counter_ns()

    def wait(self, mark: int) -> None:
        self.waited.append(mark)

    def elapsed_ns(self, a: int, b: int) -> int:
        return b - a


class StreamRunner(SlowRunner):
    stream = object()

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def compute(self, inputs: Any) -> Any:
        self.log.append("compute")
        return super().compute(inputs)


def test_saturated_sampling_reads_device_marks_between_equal_batches_with_mock_events(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    events = MockEvents(log)
    monkeypatch.setattr(loop_mod, "EventMarks", lambda stream: events)
    runner = StreamRunner(log)
    contract = contract_from_dict(SAT)
    m = Harness(contract).measure(NullTask(), runner, b"{}", samples=12, warmup=0)
    assert m.clock_used == "device" and "device events" in m.clock_note
    # after the probe and the settling load: a mark, then 12 × (batch computes, mark), then the final call
    tail = log[-(1 + 12 * (m.batch + 1) + 1):]
    assert tail[0] == "mark" and tail[-1] == "compute"
    assert tail[1:-1] == (["compute"] * m.batch + ["mark"]) * 12
    assert len(m.samples_ns) == 12
    cross = clock_cross_check(m, contract)
    assert cross is not None and cross["checked"] and cross["violations"] == 0
    # the check can fail: a host span shorter than the device time is flagged
    m.host_span_ns = sum(m.samples_ns) * m.batch // 2
    assert clock_cross_check(m, contract)["violations"] == 1


def test_an_adaptive_stop_keeps_exactly_the_samples_it_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    monkeypatch.setattr(loop_mod, "EventMarks", lambda stream: MockEvents(log))
    seen: list[tuple[int, int]] = []

    def stop(m: Measurement) -> str | None:
        seen.append((len(m.samples_ns), len(m.stages_ns["compute"])))
        return "precise enough" if len(m.samples_ns) == 7 else None

    m = Harness(contract_from_dict(SAT)).measure(NullTask(), StreamRunner(log), b"{}", samples=50,
                                                 warmup=0, should_stop=stop)
    assert m.stop_reason == "precise enough"
    assert len(m.samples_ns) == len(m.stages_ns["compute"]) == 7
    assert all(a == b for a, b in seen) and seen[-1] == (7, 7)
    # the rule sees every sample, the last one too, so a sample-count limit can fire
    seen.clear()
    m = Harness(contract_from_dict(SAT)).measure(NullTask(), StreamRunner(log), b"{}", samples=12,
                                                 warmup=0, should_stop=lambda m: seen.append(
                                                     len(m.samples_ns)) or None)
    assert seen == list(range(1, 13)) and m.stop_reason == "fixed sample count 12 reached"


def test_an_interrupt_during_saturated_sampling_leaves_a_consistent_measurement(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    events = MockEvents(log)
    monkeypatch.setattr(loop_mod, "EventMarks", lambda stream: events)
    box: list[Measurement] = []

    class Interrupt(BaseException):
        pass

    def stop(m: Measurement) -> str | None:
        box.append(m)
        if len(m.samples_ns) == 5:
            raise Interrupt
        return None

    with pytest.raises(Interrupt):
        Harness(contract_from_dict(SAT)).measure(NullTask(), StreamRunner(log), b"{}", samples=50,
                                                 warmup=0, should_stop=stop)
    m = box[-1]
    assert len(m.samples_ns) == len(m.stages_ns["compute"]) == 5
    assert m.clock_note.startswith("saturated:") and m.host_span_ns > 0
    assert events.waited[-1] == max(events.waited)  # the last batch in flight was waited for


def test_merging_a_saturated_pass_keeps_its_batch_and_host_span_for_the_cross_check() -> None:
    contract = contract_from_dict(SAT)
    part = Measurement(samples_ns=[1000] * 10, clock_used="device", batch=8, host_span_ns=100_000)
    merged = merge([part])
    assert (merged.batch, merged.host_span_ns) == (8, 100_000)
    assert clock_cross_check(merged, contract)["violations"] == 0


def test_device_throughput_runs_beside_a_per_call_contract_on_the_cpu(tmp_path: Path) -> None:
    outcome = run(RunConfig(contracts=("model_io_wall", "device_throughput"), runners=("torch-eager",),
                            cases=("invoice",), samples=20, warmup=2, out=tmp_path / "r.json"))
    io, sat = (loaded(o.path) for o in outcome.all)
    assert sat["contract"]["name"] == "device_throughput" and sat["complete"] is True
    row = sat["results"][0]
    assert row["status"] == "valid" and len(row["samples_ns"]) == 20
    assert row["clock_note"].startswith("saturated:") and row["clock_used"] == "host"
    assert len(row["stages_ns"]["compute"]) == 20 and row["stages_ns"]["parse"] == []
    assert len(io["results"][0]["stages_ns"]["parse"]) == 20
    # the calibration ran (a saturated contract's floor is taken per call, from the null task)
    assert "error" not in sat["calibration"], sat["calibration"]
    assert sat["calibration"]["floors"]["host"] > 0


def test_calibration_of_a_saturated_contract_measures_the_null_call_per_call() -> None:
    from benchbox.harness.calibration import calibrate

    cal = calibrate(load_contract("device_throughput"), "cpu")
    assert cal["floors"]["host"] > 0 and cal["floors"]["device"] is None
    assert cal["empty_call_samples"] == 2_000 and cal["call_p50_ns"] >= cal["region_p50_ns"]
