"""Transfer strategies of the PyTorch-family runners: the rules that pick them, and, on a
simulated CUDA stream (tests/mock_cuda.py), that every strategy moves the right data in the
right order on the runner's stream and leaves the caller's stream as it found it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import benchbox.harness.loop as loop_mod
from benchbox.contracts import contract_from_dict, load_contract
from benchbox.errors import UsageError
from benchbox.harness import Harness, PhaseTimer
from benchbox.runners import make_runner
from benchbox.runners import transfer as tr
from benchbox.runners.torch_eager import TorchEagerRunner
from benchbox.runners.torch_runner import TorchRunner
from benchbox.tasks import Task
from benchbox.tasks.decision.task import DecisionTask
from tests.mock_cuda import MockCuda, MockDeviceEvents, MockEventMarks

# -- the rules ---------------------------------------------------------------------------


def _decision_example() -> tuple[np.ndarray, ...]:
    task = DecisionTask()
    return task.preprocess(task.parse(task.cases()[0].request))


def test_pack_layout_aligns_every_input_and_covers_each_byte_once_in_bounded_copies() -> None:
    example = (np.zeros((1, 3), np.float32), np.zeros((700_000,), np.uint8), np.zeros((2, 5), np.int64),
               np.zeros((0,), np.float32), np.zeros((1,), np.float64))
    lay = tr.pack_layout(example, align=256, chunk=256 * 1024)
    assert all(off % 256 == 0 for off in lay.offsets)
    covered: list[tuple[int, int]] = []
    for c in lay.chunks:
        assert 0 < c.end - c.start <= 256 * 1024 or c.end == c.start
        for i in c.whole:
            covered.append((lay.offsets[i], lay.offsets[i] + lay.nbytes[i]))
            assert c.start <= lay.offsets[i] and lay.offsets[i] + lay.nbytes[i] <= c.end
        for i, lo, hi in c.pieces:
            covered.append((lay.offsets[i] + lo, lay.offsets[i] + hi))
            assert (c.start, c.end) == (lay.offsets[i] + lo, lay.offsets[i] + hi)
    covered.sort()
    assert all(a[1] <= b[0] for a, b in zip(covered, covered[1:])), "inputs overlap in the block"
    assert sum(hi - lo for lo, hi in covered) == sum(a.nbytes for a in example)
    # the 700 kB input is split into 3 pieces; the rest share chunks
    assert [len(c.pieces) for c in lay.chunks].count(1) == 3
    assert lay.total >= lay.offsets[-1] + lay.nbytes[-1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5000), st.sampled_from(["f4", "i8", "u1", "f2", "?"])),
                min_size=1, max_size=12),
       st.sampled_from([64, 256]), st.integers(1, 8))
def test_pack_layout_property(sizes: list[tuple[int, str]], align: int, chunk_units: int) -> None:
    example = tuple(np.zeros((n,), np.dtype(d)) for n, d in sizes)
    chunk = chunk_units * 1024
    lay = tr.pack_layout(example, align=align, chunk=chunk)
    spans = []
    for c in lay.chunks:
        assert c.end - c.start <= chunk
        spans += [(lay.offsets[i], lay.offsets[i] + lay.nbytes[i]) for i in c.whole]
        spans += [(lay.offsets[i] + lo, lay.offsets[i] + hi) for i, lo, hi in c.pieces]
    assert all(o % align == 0 for o in lay.offsets)
    assert sorted(i for c in lay.chunks for i in c.whole) == sorted(
        i for i, a in enumerate(example) if a.nbytes <= chunk)
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert sum(b - a for a, b in spans) == sum(a.nbytes for a in example)
    assert lay.total >= max(o + n for o, n in zip(lay.offsets, lay.nbytes))


def test_auto_packs_several_inputs_and_copies_a_single_input_directly() -> None:
    req = tr.TransferRequest()
    several = tr.plan_h2d(req, _decision_example(), tr.TRANSFERS, static_inputs=False)
    assert several.strategy == "packed" and several.copies == 1 and several.inputs == 9
    assert "fewest copies" in several.reason and "direct 9" in several.reason
    one = tr.plan_h2d(req, (np.zeros((1, 512), np.float32),), tr.TRANSFERS, static_inputs=False)
    assert one.strategy == "direct" and not one.static and one.device_inputs.startswith("fresh")
    big = tr.plan_h2d(req, (np.zeros((3 << 20,), np.uint8),), tr.TRANSFERS, static_inputs=False)
    assert big.strategy == "direct" and tr.copies_per_call("packed", (np.zeros((3 << 20,), np.uint8),)) == 6
    # a runner that needs fixed addresses gets static buffers even for direct copies
    assert tr.plan_h2d(req, (np.zeros((1, 512), np.float32),), tr.TRANSFERS, static_inputs=True).static
    only_staged = tr.plan_h2d(req, _decision_example(), ("staged",), static_inputs=True)
    assert only_staged.strategy == "staged" and only_staged.copies == 9
    forced = tr.plan_h2d(tr.TransferRequest(transfer="staged"), _decision_example(), tr.TRANSFERS, False)
    assert forced.strategy == "staged" and forced.reason.startswith("option transfer=staged")


def test_d2h_rule_waits_with_one_small_blocking_copy_else_pinned_copies_and_one_sync() -> None:
    auto = tr.TransferRequest()
    assert tr.plan_d2h(auto, [4 * 8], True)[0] == "blocking"
    assert tr.plan_d2h(auto, [tr.D2H_BLOCKING_MAX_BYTES + 1], True)[0] == "pinned"
    assert tr.plan_d2h(auto, [32, 32], True)[0] == "pinned"
    assert tr.plan_d2h(auto, [32], False)[0] == "pinned"
    assert tr.plan_d2h(tr.TransferRequest(d2h="pinned"), [32], True) == ("pinned", "option d2h=pinned for "
                                                                          "1 output(s), 0.0 KiB")


def test_stream_rule() -> None:
    assert tr.plan_stream(tr.TransferRequest(), side_required=False)[0] == "current"
    assert tr.plan_stream(tr.TransferRequest(), side_required=True)[0] == "side"
    assert tr.plan_stream(tr.TransferRequest(stream="side"), side_required=False)[0] == "side"


@pytest.mark.parametrize(("options", "allowed", "side", "needle"), [
    ({"transfer": "pinned"}, tr.TRANSFERS, False, "option transfer: expected auto, direct, packed, staged"),
    ({"d2h": "async"}, tr.TRANSFERS, False, "option d2h: expected auto, blocking, pinned"),
    ({"stream": 1}, tr.TRANSFERS, False, "option stream: expected auto, current, side, got '1'"),
    ({"transfer": "direct"}, ("staged",), True, "transfer=direct: this runner supports staged"),
    ({"stream": "current"}, ("staged",), True, "stream=current: this runner needs a stream of its own"),
])
def test_bad_transfer_options_are_refused_in_one_line(options: dict[str, Any], allowed: tuple[str, ...],
                                                      side: bool, needle: str) -> None:
    with pytest.raises(UsageError) as e:
        tr.parse_request("r", options, allowed, side)
    assert needle in str(e.value) and "\n" not in str(e.value)
    # the runner classes refuse them before anything runs (the run checks options first)
    if allowed == tr.TRANSFERS:
        with pytest.raises(UsageError, match="torch-eager option"):
            TorchEagerRunner.check_options(options)
    assert tr.parse_request("r", {"transfer": "Packed "}, tr.TRANSFERS, False).transfer == "packed"


# -- the CPU device --------------------------------------------------------------------


def test_cpu_runner_records_that_no_transfer_happens_and_that_cuda_options_do_not_apply() -> None:
    task = DecisionTask()
    example = _decision_example()
    runner = make_runner("torch-eager", "cpu", {"transfer": "packed"})
    assert runner.report().get("transfer") is None  # nothing moved yet
    runner.prepare(task, task.build_model(), example, PhaseTimer())
    out = Harness(load_contract("public_task_call_wall")).call(task, runner, task.cases()[0].request)
    rep = runner.report()["transfer"]
    assert rep["h2d"] == "none" and "transfer=packed does not apply" in rep["reason"]
    assert runner.stream is None
    import torch

    with torch.inference_mode():
        expect = runner.forward(*[torch.from_numpy(a) for a in example])[0].numpy()
    np.testing.assert_array_equal(out.outputs["logits"], expect)


# -- a simulated CUDA device -----------------------------------------------------------


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> MockCuda:
    s = MockCuda()
    monkeypatch.setattr(tr, "cuda_ops", lambda device: s)
    monkeypatch.setattr(loop_mod, "DeviceEvents", MockDeviceEvents)
    monkeypatch.setattr(loop_mod, "EventMarks", MockEventMarks)
    return s


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    """CPU outputs of the tiny decision model for every case (the numbers the simulated GPU must give)."""
    task = DecisionTask()
    runner = make_runner("torch-eager", "cpu")
    runner.prepare(task, task.build_model(), _decision_example(), PhaseTimer())
    h = Harness(load_contract("public_task_call_wall"))
    return {c.name: h.call(task, runner, c.request) for c in task.cases()}


def _sim_runner(sim: MockCuda, task: Task, cls: type[TorchRunner] = TorchEagerRunner,
                **options: str) -> TorchRunner:
    runner = cls(device="cuda", options=options)
    example = task.preprocess(task.parse(task.cases()[0].request))
    runner.prepare(task, task.build_model(), example, PhaseTimer())
    runner.forward = sim.kernel(runner.forward)
    return runner


def _call_log(sim: MockCuda, fn: Any) -> list[tuple[str, str]]:
    start = len(sim.log)
    fn()
    return sim.log[start:]


@pytest.mark.parametrize("stream", ["current", "side"])
@pytest.mark.parametrize("d2h", ["blocking", "pinned"])
@pytest.mark.parametrize("transfer", ["direct", "packed", "staged"])
def test_every_strategy_gives_the_cpu_numbers_on_the_runner_stream_mock_cuda(
        sim: MockCuda, reference: dict[str, Any], transfer: str, d2h: str, stream: str) -> None:
    task = DecisionTask()
    runner = _sim_runner(sim, task, transfer=transfer, d2h=d2h, stream=stream)
    name = runner.stream.name
    assert (name == "default") == (stream == "current")
    h = Harness(load_contract("public_task_call_wall"))
    cases = task.cases()
    first = None
    for case in (*cases, cases[0]):
        log = _call_log(sim, lambda c=case: setattr(sim, "_last", h.call(task, runner, c.request)))
        trace = sim._last  # type: ignore[attr-defined]
        np.testing.assert_allclose(trace.outputs["logits"], reference[case.name].outputs["logits"],
                                   rtol=1e-6, atol=1e-6)
        assert trace.response == reference[case.name].response
        # every copy, the kernel and the wait went to the runner's stream, and the caller's
        # stream is current again afterwards
        work = [(k, s) for k, s in log if k not in ("enter", "leave")]
        assert work and all(s == name for _, s in work), log
        assert sim.current is sim.default
        assert [k for k, _ in log].count("kernel") == 1
        if first is None:
            first = (case.name, trace.outputs["logits"].copy(), trace.outputs)
    # the first call's outputs are the caller's: later calls did not overwrite them
    np.testing.assert_array_equal(first[2]["logits"], first[1])
    rep = runner.report()["transfer"]
    assert (rep["h2d"], rep["d2h"], rep["stream"]) == (transfer, d2h, stream)
    assert rep["calls_that_switched_stream"] == (0 if stream == "current" else len(cases) + 1)
    assert rep["copies_per_call"] == {"direct": 9, "staged": 9, "packed": 1}[transfer]


def test_auto_on_decision_packs_waits_with_one_blocking_copy_on_the_current_stream_mock_cuda(
        sim: MockCuda, reference: dict[str, Any]) -> None:
    task = DecisionTask()
    runner = _sim_runner(sim, task)
    case = task.cases()[1]
    log = _call_log(sim, lambda: setattr(sim, "_last", Harness(load_contract("model_io_wall")).call(
        task, runner, case.request)))
    np.testing.assert_allclose(sim._last.outputs["logits"],  # type: ignore[attr-defined]
                               reference[case.name].outputs["logits"], rtol=1e-6, atol=1e-6)
    assert log == [("h2d", "default"), ("kernel", "default"), ("d2h_blocking", "default")]
    rep = runner.report()["transfer"]
    assert (rep["h2d"], rep["d2h"], rep["stream"]) == ("packed", "blocking", "current")
    assert rep["pack"]["block_bytes"] >= rep["input_bytes"]
    assert "auto" in rep["h2d_reason"] and "auto" in rep["d2h_reason"] and "auto" in rep["stream_reason"]


def test_inputs_larger_than_a_chunk_are_split_and_reassembled_mock_cuda(
        sim: MockCuda, reference: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tr, "PACK_CHUNK_BYTES", 8192)  # the 295 kB patches input becomes 37 pieces
    task = DecisionTask()
    runner = _sim_runner(sim, task, transfer="packed", d2h="pinned", stream="side")
    for case in task.cases():
        log = _call_log(sim, lambda c=case: setattr(sim, "_last", Harness(load_contract(
            "model_io_wall")).call(task, runner, c.request)))
        np.testing.assert_allclose(sim._last.outputs["logits"],  # type: ignore[attr-defined]
                                   reference[case.name].outputs["logits"], rtol=1e-6, atol=1e-6)
        copies = [k for k, _ in log].count("h2d")
        assert copies == runner.report()["transfer"]["copies_per_call"] > 37


def test_device_clock_events_bracket_exactly_the_region_on_the_runner_stream_mock_cuda(sim: MockCuda) -> None:
    task = DecisionTask()
    runner = _sim_runner(sim, task, stream="side", d2h="pinned")
    contract = contract_from_dict({"name": "io_device", "version": 1, "stages": ["h2d", "compute", "d2h"],
                                   "clock": "device"})
    start = len(sim.log)
    m = Harness(contract).measure(task, runner, task.cases()[0].request, samples=3, warmup=1)
    assert m.clock_used == "device" and len(m.samples_ns) == 3
    log = sim.log[start:]
    opens = [i for i, (k, _) in enumerate(log) if k == "event_start"]
    closes = [i for i, (k, _) in enumerate(log) if k == "event_end"]
    assert len(opens) == len(closes) == 3
    for a, b in zip(opens, closes):
        inside = log[a:b + 1]
        assert all(s == runner.stream.name for k, s in inside if k not in ("enter", "leave")), inside
        kinds = [k for k, _ in inside]
        # the start event precedes the copies, the end event follows the wait for the outputs
        assert kinds[1:3] == ["enter", "h2d"] and kinds[-3:] == ["sync", "leave", "event_end"], kinds
        assert kinds.count("kernel") == 1


def test_sync_at_close_waits_on_the_runner_stream_before_the_closing_stamp_mock_cuda(sim: MockCuda) -> None:
    task = DecisionTask()
    runner = _sim_runner(sim, task, stream="side")
    contract = contract_from_dict({"name": "enqueue_synced", "version": 1, "stages": ["h2d", "compute"],
                                   "clock": "host", "policy": {"sync_at_close": "stream"}})
    stamps: list[int] = []

    def clock() -> int:
        stamps.append(len(sim.log))
        return len(stamps)

    Harness(contract, clock=clock).measure(task, runner, task.cases()[0].request, samples=2, warmup=0)
    for k in range(2):
        g = stamps[9 * k: 9 * (k + 1)]
        region = [kind for kind, _ in sim.log[g[2]:g[4]]]
        # inside the region: the copies, the kernel, then the wait on the runner's stream
        assert region[-1] == "sync" and "kernel" in region, region
        assert sim.log[g[4] - 1] == ("sync", runner.stream.name)


def test_saturated_sampling_keeps_the_runner_stream_current_across_batches_mock_cuda(sim: MockCuda) -> None:
    task = DecisionTask()
    runner = _sim_runner(sim, task, stream="side")
    monkey = pytest.MonkeyPatch()
    monkey.setattr(loop_mod, "SATURATED_SETTLE_S", 0.01)
    try:
        m = Harness(load_contract("device_throughput")).measure(task, runner, task.cases()[0].request,
                                                                samples=3, warmup=1)
    finally:
        monkey.undo()
    assert m.clock_used == "device" and len(m.samples_ns) == 3
    name = runner.stream.name
    assert all(s == name for k, s in sim.log if k in ("kernel", "mark", "h2d", "d2h_blocking"))
    # one h2d enters the runner's stream; it stays current through every batch until the one d2h
    kinds = [k for k, _ in sim.log]
    assert kinds.count("enter") == kinds.count("leave") == 1
    assert kinds.index("enter") < kinds.index("kernel") and kinds.index("leave") > len(kinds) - 3
    assert sim.current is sim.default


def test_a_raising_stage_gives_the_caller_its_stream_back_and_the_next_call_is_right_mock_cuda(
        sim: MockCuda, reference: dict[str, Any]) -> None:
    task = DecisionTask()
    runner = _sim_runner(sim, task, stream="side", transfer="packed")
    good = runner.forward

    def broken(*inputs: Any) -> Any:
        raise RuntimeError("out of memory")

    runner.forward = broken
    h = Harness(load_contract("public_task_call_wall"))
    with pytest.raises(RuntimeError, match="out of memory"):
        h.call(task, runner, task.cases()[0].request)
    assert sim.current is sim.default
    runner.forward = good
    trace = h.call(task, runner, task.cases()[2].request)
    np.testing.assert_allclose(trace.outputs["logits"], reference[task.cases()[2].name].outputs["logits"],
                               rtol=1e-6, atol=1e-6)
    assert sim.current is sim.default


def test_a_second_h2d_before_d2h_waits_for_the_first_copies_mock_cuda(sim: MockCuda) -> None:
    task = DecisionTask()
    runner = _sim_runner(sim, task, transfer="packed", stream="side")
    host = _decision_example()
    log = _call_log(sim, lambda: (runner.h2d(host), runner.h2d(host)))
    assert [k for k, _ in log] == ["enter", "h2d", "sync", "h2d"]
    runner.d2h(runner.compute(runner._inputs))
    assert sim.current is sim.default


def test_inputs_of_another_shape_are_refused_in_one_line_with_fixed_buffers_mock_cuda(sim: MockCuda) -> None:
    task = DecisionTask()
    host = list(_decision_example())
    host[2] = host[2][:, :-1]
    for transfer in ("packed", "staged"):
        runner = _sim_runner(sim, task, transfer=transfer)
        with pytest.raises(tr.TransferShapeError) as e:
            runner.h2d(tuple(host))
        assert "input patches is float32[1, 95, 768], prepared as float32[1, 96, 768]" in str(e.value)
        assert "\n" not in str(e.value)
        assert sim.current is sim.default
    runner = _sim_runner(sim, task, transfer="direct")
    assert runner.h2d(tuple(host))[2].shape == (1, 95, 768)  # fresh tensors take any shape


class BindsItsOwnBuffers(TorchRunner):
    """Like the TensorRT runner: default class attributes, fills _inputs/_staging itself, and its
    compute reads the bound buffers, not its argument."""

    name = "binds-own"
    OPTION_KEYS: tuple[str, ...] | None = tr.OPTION_KEYS

    def prepare(self, task: Any, model: Any, example: tuple[np.ndarray, ...], phases: Any) -> None:
        ops = self._ops
        self._inputs = [ops.device_like(a) for a in example]
        self._staging = [ops.pinned_like(a) for a in example]
        self.output_names = task.output_names
        self.forward = model

    def compute(self, inputs: Any) -> Any:
        return self.forward(*self._inputs)


def test_a_subclass_that_binds_its_own_buffers_gets_staged_copies_on_its_own_stream_mock_cuda(
        sim: MockCuda, reference: dict[str, Any]) -> None:
    task = DecisionTask()
    runner = _sim_runner(sim, task, cls=BindsItsOwnBuffers)
    assert runner.stream is not sim.default  # its own stream without being asked
    for case in task.cases():
        trace = Harness(load_contract("public_task_call_wall")).call(task, runner, case.request)
        np.testing.assert_allclose(trace.outputs["logits"], reference[case.name].outputs["logits"],
                                   rtol=1e-6, atol=1e-6)
        assert sim.current is sim.default
    rep = runner.report()["transfer"]
    assert rep["h2d"] == "staged" and rep["stream"] == "side" and "its own static" in rep["h2d_reason"]
    with pytest.raises(UsageError, match="transfer=packed: this runner supports staged"):
        BindsItsOwnBuffers(device="cuda", options={"transfer": "packed"})


# -- a single small input (the two-linear-layer shape) ------------------------


def test_a_single_small_input_is_copied_directly_into_a_fresh_tensor_mock_cuda(sim: MockCuda) -> None:
    import torch

    from benchmarks.linear_task import LinearTask

    task = LinearTask()
    model = task.build_model()
    x = task.preprocess(task.parse(task.cases()[0].request))[0]
    with torch.inference_mode():
        expect = model(torch.from_numpy(x))[0].numpy()
    runner = _sim_runner(sim, task)
    log = _call_log(sim, lambda: setattr(sim, "_last", Harness(load_contract("model_io_wall")).call(
        task, runner, task.cases()[0].request)))
    assert log == [("h2d", "default"), ("kernel", "default"), ("d2h_blocking", "default")]
    np.testing.assert_allclose(sim._last.outputs["y"], expect, rtol=1e-6)  # type: ignore[attr-defined]
    rep = runner.report()["transfer"]
    assert rep["h2d"] == "direct" and rep["device_inputs"] == "fresh device tensors each call"


def test_the_report_names_transfer_options_as_understood_and_leaves_out_their_default() -> None:
    """`transfer=AUTO` asks what no option asks: the receipt says the same, so a diff of the two
    runs declares no option change; a strategy is named in lower case, as it is applied."""
    def options(given: dict[str, Any]) -> dict[str, Any]:
        return TorchEagerRunner("cpu", given).report()["options"]

    assert options({}) == options({"transfer": "AUTO", "d2h": "auto", "stream": " Auto "}) == {}
    assert options({"transfer": "Packed", "d2h": "auto"}) == {"transfer": "packed"}
    assert options({"d2h": "PINNED"}) == {"d2h": "pinned"}
