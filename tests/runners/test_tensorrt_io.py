"""The TensorRT runner's data path on the CUDA stand-in (tests/mock_cuda.py).

No GPU here can run an engine, so the engine and its execution context are stand-ins (every
test name says so): the engine answers its I/O tensors' names, dtypes and shapes (-1 where a
dimension is dynamic), and the context's ``execute_async_v3`` queues, on the stream it is
handed, a kernel that reads the inputs at the addresses bound with ``set_tensor_address`` in
the shapes set with ``set_input_shape``, runs the task's model on them and writes the outputs
at their bound addresses. So wrong addresses, stale views, copies on another stream or a shape
the context was not told about give wrong numbers. The buffers, views, transfer strategies and
shape handling are the runner's own code; the TensorRT enums are the real bindings'.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

trt = pytest.importorskip(
    "tensorrt_rtx_bindings",
    reason="tensorrt_rtx_bindings is not installed: pip install 'benchbox-contracts[tensorrt-rtx]'")

import torch  # noqa: E402

from benchbox.contracts import load_contract  # noqa: E402
from benchbox.harness import Harness, PhaseTimer  # noqa: E402
from benchbox.runners import make_runner  # noqa: E402
from benchbox.runners import transfer as tr  # noqa: E402
from benchbox.runners.onnx_export import example_inputs  # noqa: E402
from benchbox.runners.tensorrt import TensorRTRunner  # noqa: E402
from benchbox.runners.tensorrt_plans import checked_input_shapes  # noqa: E402
from benchbox.tasks import Case, InputShape, Task  # noqa: E402
from benchbox.tasks.decision.task import DecisionTask  # noqa: E402
from tests.mock_cuda import MockCuda  # noqa: E402

_DTYPES = {np.dtype(np.int64): trt.DataType.INT64, np.dtype(np.float32): trt.DataType.FLOAT}


class PerToken(Task):
    """Scores per token, sequences of 1..64 tokens: inputs and output change shape together."""

    name = "per-token"
    input_names = ("ids", "mask")
    output_names = ("scores",)

    def parse(self, request: bytes) -> list[int]:
        return [int(t) for t in json.loads(request)["ids"]]

    def preprocess(self, request: list[int]) -> tuple[np.ndarray, ...]:
        ids = np.asarray([request], np.int64)
        return ids, np.linspace(0.5, 1.0, ids.shape[1], dtype=np.float32)[None]

    def reduce(self, outputs: dict[str, np.ndarray], request: Any) -> Any:
        return outputs["scores"][0]

    def answer(self, reduced: Any, request: Any) -> Any:
        return {"best": [int(i) for i in np.argmax(reduced, -1)]}

    def serialize(self, answer: Any) -> bytes:
        return json.dumps(answer).encode()

    def cases(self) -> list[Case]:
        return [Case("seven", b'{"ids": [3, 1, 4, 1, 5, 9, 2]}'), Case("three", b'{"ids": [2, 7, 1]}')]

    def input_shapes(self) -> dict[str, InputShape]:
        s = InputShape((1, 1), (1, 16), (1, 64))
        return {"ids": s, "mask": s}

    def build_model(self) -> Any:
        class Scores(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                g = torch.Generator().manual_seed(0)
                self.emb = torch.nn.Parameter(torch.randn(32, 8, generator=g))
                self.head = torch.nn.Parameter(torch.randn(8, 3, generator=g))

            def forward(self, ids: Any, mask: Any) -> tuple[Any]:
                return ((self.emb[ids] * mask.unsqueeze(-1)) @ self.head,)

        return Scores().eval()


class StandInEngine:
    """Plays a built engine: its I/O tensors as the task's example and declared shapes give them."""

    def __init__(self, task: Task, example: tuple[np.ndarray, ...], outputs: dict[str, Any]) -> None:
        shapes = task.input_shapes()
        self.io: dict[str, tuple[Any, Any, tuple[int, ...]]] = {}
        for n, a in zip(task.input_names, example):
            dims = tuple(-1 if lo != hi else lo for lo, hi in zip(shapes[n].min, shapes[n].max))
            self.io[n] = (trt.TensorIOMode.INPUT, _DTYPES[a.dtype], dims)
        for n, (dtype, shape) in outputs.items():
            self.io[n] = (trt.TensorIOMode.OUTPUT, dtype, shape)
        self.num_io_tensors = len(self.io)

    def get_tensor_name(self, i: int) -> str:
        return list(self.io)[i]

    def get_tensor_mode(self, name: str) -> Any:
        return self.io[name][0]

    def get_tensor_dtype(self, name: str) -> Any:
        return self.io[name][1]

    def get_tensor_shape(self, name: str) -> Any:
        return trt.Dims(list(self.io[name][2]))


class StandInContext:
    """Plays an execution context: shapes and addresses as set, and a kernel on the given stream
    that runs ``model`` on the bound memory (see the module docstring)."""

    def __init__(self, sim: MockCuda, engine: StandInEngine, model: Any, out_shape: Any,
                 profile: tuple[int, int] = (1, 64)) -> None:
        self.sim, self.engine, self.model = sim, engine, model
        self.out_shape, self.profile = out_shape, profile
        self.shapes = {n: io[2] for n, io in engine.io.items() if io[0] == trt.TensorIOMode.INPUT}
        self.addresses: dict[str, int] = {}
        self.shape_calls: list[tuple[str, tuple[int, ...]]] = []
        self.address_calls = 0
        self.executed: list[tuple[tuple[int, ...], ...]] = []

    def set_input_shape(self, name: str, shape: Any) -> bool:
        shape = tuple(shape)
        self.shape_calls.append((name, shape))
        if not all(self.profile[0] <= d <= self.profile[1] for d in shape[1:]):
            return False
        self.shapes[name] = shape
        return True

    def get_tensor_shape(self, name: str) -> Any:
        return trt.Dims(list(self.shapes[name] if name in self.shapes else self.out_shape(self.shapes)))

    def set_tensor_address(self, name: str, ptr: int) -> bool:
        self.address_calls += 1
        self.addresses[name] = ptr
        return True

    def execute_async_v3(self, stream: int) -> bool:
        shapes = dict(self.shapes)  # as set when the work is enqueued
        torch_type = {trt.DataType.INT64: torch.int64, trt.DataType.FLOAT: torch.float32}
        ins = [n for n in self.engine.io if n in shapes]
        outs = [n for n in self.engine.io if n not in shapes]
        self.executed.append(tuple(shapes[n] for n in ins))

        def kernel() -> None:
            args = [self.sim.memory(self.addresses[n], shapes[n], torch_type[self.engine.io[n][1]]).clone()
                    for n in ins]
            with torch.inference_mode():
                results = self.model(*args)
            for n, value in zip(outs, results):
                self.sim.memory(self.addresses[n], tuple(value.shape), value.dtype).copy_(value)

        self.sim.enqueue("execute", kernel, self.sim.stream_of(stream))
        return True


def simulate(monkeypatch: pytest.MonkeyPatch) -> MockCuda:
    """A stand-in RTX 4090 (compute capability 8.9) behind the stream simulator."""
    s = MockCuda()
    monkeypatch.setattr(tr, "cuda_ops", lambda device: s)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 9))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "stand-in RTX 4090")
    return s


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> MockCuda:
    return simulate(monkeypatch)


def bound(sim: MockCuda, task: Task, outputs: dict[str, Any], out_shape: Any,
          **options: Any) -> tuple[TensorRTRunner, StandInContext]:
    """A TensorRT runner on the stand-in GPU, its memory bound to a stand-in engine of ``task``."""
    runner = TensorRTRunner("cuda", {"compute_capabilities": "8.9", **options})
    example = example_inputs(task)
    engine = StandInEngine(task, example, outputs)
    ctx = StandInContext(sim, engine, task.build_model(), out_shape)
    runner._trt, runner._context = trt, ctx
    runner._shapes = checked_input_shapes(task, example)
    runner._bind(task, engine, example)
    return runner, ctx


def per_token(sim: MockCuda, **options: Any) -> tuple[TensorRTRunner, StandInContext, PerToken]:
    task = PerToken()
    runner, ctx = bound(sim, task, {"scores": (trt.DataType.FLOAT, (1, -1, 3))},
                        lambda shapes: (1, shapes["ids"][1], 3), **options)
    return runner, ctx, task


def _host(n: int) -> tuple[np.ndarray, ...]:
    ids = (np.arange(n, dtype=np.int64) * 7 % 32)[None]
    return ids, np.linspace(0.25, 1.0, n, dtype=np.float32)[None]


def _expected(task: PerToken, host: tuple[np.ndarray, ...]) -> np.ndarray:
    with torch.inference_mode():
        return task.build_model()(*[torch.from_numpy(a) for a in host])[0].numpy()


@pytest.mark.parametrize("transfer", ["auto", "staged", "direct"])
def test_h2d_compute_d2h_with_two_shapes_follows_each_shape_on_the_cuda_stand_in(
        sim: MockCuda, transfer: str) -> None:
    runner, ctx, task = per_token(sim, transfer=transfer)
    addresses = dict(ctx.addresses)
    assert ctx.address_calls == 3  # every I/O tensor bound once, at preparation
    seen = len(ctx.shape_calls)
    for n in (7, 3, 7, 64, 1):
        host = _host(n)
        start = len(sim.log)
        out = runner.d2h(runner.compute(runner.h2d(host)))
        np.testing.assert_allclose(out["scores"], _expected(task, host), rtol=1e-6)
        assert out["scores"].shape == (1, n, 3)
        log = sim.log[start:]
        work = [(k, s) for k, s in log if k not in ("enter", "leave")]
        assert work and {s for _, s in work} == {runner.stream.name}  # the runner's own stream
        copies = {"auto": 1, "staged": 2, "direct": 2}[transfer]
        assert [k for k, _ in work].count("h2d") == copies
        assert sim.current is sim.default
        assert ctx.executed[-1] == ((1, n), (1, n))
    # the context heard of each change of shape, once per dynamic input, and nothing else
    changes = ctx.shape_calls[seen:]
    assert [s for _, s in changes] == [(1, 3), (1, 3), (1, 7), (1, 7), (1, 64), (1, 64), (1, 1), (1, 1)]
    # views of the same memory: the engine's bindings never moved
    assert ctx.addresses == addresses and ctx.address_calls == 3
    rep = runner.report()["transfer"]
    assert rep["h2d"] == {"auto": "packed", "staged": "staged", "direct": "direct"}[transfer]
    assert "dynamic shapes: memory for the profile's maximum" in rep["h2d_reason"]


def test_a_shape_outside_the_profile_is_refused_in_one_line_on_the_cuda_stand_in(sim: MockCuda) -> None:
    runner, ctx, task = per_token(sim)
    with pytest.raises(tr.TransferShapeError) as e:
        runner.h2d(_host(65))
    assert str(e.value) == "TensorRT refused shape [1, 65] for input ids (declared [1, 1]..[1, 64])"
    assert sim.current is sim.default  # the caller's stream is given back
    host = _host(5)  # and the next call is right
    np.testing.assert_allclose(runner.d2h(runner.compute(runner.h2d(host)))["scores"], _expected(task, host),
                               rtol=1e-6)


def test_every_declared_shape_is_warmed_before_sampling_on_the_cuda_stand_in(sim: MockCuda) -> None:
    runner, ctx, task = per_token(sim, jit_warmup_calls=2)
    runner.flavour = "tensorrt_rtx"
    example = example_inputs(task)
    runner._warm_up(example)
    # min, opt, max of the profile, then the example's shape last (each twice)
    assert ctx.executed == [((1, s), (1, s)) for s in (1, 16, 64, 7) for _ in range(2)]
    facts = runner.facts["jit_warmup"]
    assert facts["calls"] == 2
    assert facts["shapes"] == [{"ids": [1, s], "mask": [1, s]} for s in (1, 16, 64, 7)]
    assert "every declared shape" in facts["why"]
    # the runner ends on the example's shapes: its views and the context agree
    assert [tuple(t.shape) for t in runner._inputs] == [(1, 7), (1, 7)]
    assert ctx.shapes == {"ids": (1, 7), "mask": (1, 7)}


def test_fixed_shapes_are_warmed_once_each_call_on_the_cuda_stand_in(sim: MockCuda) -> None:
    task = DecisionTask()
    runner, ctx = bound(sim, task, {"logits": (trt.DataType.FLOAT, (1, 8))}, lambda shapes: (1, 8),
                        jit_warmup_calls=3)
    runner._warm_up(example_inputs(task))
    assert len(ctx.executed) == 3 and "shapes" not in runner.facts["jit_warmup"]


def test_the_default_transfer_is_the_torch_runners_one_packed_copy_on_the_cuda_stand_in(
        sim: MockCuda) -> None:
    """Transfer parity: for the decision task TensorRT and eager PyTorch both pick ``packed`` (one
    copy of the nine inputs into aligned views), and TensorRT binds those views' addresses."""
    task = DecisionTask()
    runner, ctx = bound(sim, task, {"logits": (trt.DataType.FLOAT, (1, 8))}, lambda shapes: (1, 8))
    eager = make_runner("torch-eager", "cuda")
    example = example_inputs(task)
    eager.prepare(task, task.build_model(), example, PhaseTimer())
    eager.forward = sim.kernel(eager.forward)
    harness = Harness(load_contract("model_io_wall"))
    for case in task.cases():
        start = len(sim.log)
        got = harness.call(task, runner, case.request)
        copies = [k for k, _ in sim.log[start:]].count("h2d")
        want = harness.call(task, eager, case.request)
        np.testing.assert_allclose(got.outputs["logits"], want.outputs["logits"], rtol=1e-6, atol=1e-6)
        assert got.response == want.response and copies == 1
    mine, theirs = runner.report()["transfer"], eager.report()["transfer"]
    assert mine["h2d"] == theirs["h2d"] == "packed"
    assert mine["copies_per_call"] == theirs["copies_per_call"] == 1
    assert mine["stream"] == "side" and theirs["stream"] == "current"  # TensorRT keeps its own stream
    # every input is bound at its aligned offset in the one device block
    block = runner._dev_block.data_ptr()
    offsets = [ctx.addresses[n] - block for n in task.input_names]
    assert offsets == list(runner._h2d_plan.layout.offsets) and all(o % tr.ALIGN_BYTES == 0 for o in offsets)


def test_transfer_staged_stays_an_option_and_stream_current_is_refused(sim: MockCuda) -> None:
    task = DecisionTask()
    runner, _ = bound(sim, task, {"logits": (trt.DataType.FLOAT, (1, 8))}, lambda shapes: (1, 8),
                      transfer="staged")
    assert runner.report()["transfer"]["copies_per_call"] == 9
    from benchbox.errors import UsageError

    with pytest.raises(UsageError, match="tensorrt option stream=current: this runner needs a stream"):
        TensorRTRunner.check_options({"stream": "current"})


class StandInRuntimeConfig:
    def __init__(self) -> None:
        self.cuda_graph_strategy: Any = None
        lazy = trt.DynamicShapesKernelSpecializationStrategy.LAZY
        self.dynamic_shapes_kernel_specialization_strategy = lazy

    def create_runtime_cache(self) -> Any:
        raise AssertionError("the runtime cache is off in this test")


class ProfiledContext(StandInContext):
    """A stand-in context that also reports one stand-in layer time to a profiler."""

    profiler: Any = None
    enqueue_emits_profile = True

    def report_to_profiler(self) -> None:
        self.profiler.report_layer_time("stand-in layer", 0.5)


def test_prepare_then_calls_of_two_shapes_through_the_harness_on_the_cuda_stand_in(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The real export and RTX build of a dynamic-shape task (made before the stand-in GPU exists,
    then taken from the caches by ``prepare``), then a stand-in runtime: deserialize, bind, warm
    every shape, profile, and cases of two token lengths through the harness."""
    import contextlib

    from benchbox.runners import tensorrt_flavours as fl

    task = PerToken()
    options = {"compute_capabilities": "8.9", "cache_dir": str(tmp_path), "runtime_cache": False,
               "layer_profile_runs": 2}
    TensorRTRunner("cpu", options).build(task, example_inputs(task), PhaseTimer())
    sim = simulate(monkeypatch)
    contexts: list[ProfiledContext] = []

    class Engine(StandInEngine):
        def create_runtime_config(self) -> StandInRuntimeConfig:
            return StandInRuntimeConfig()

        def create_execution_context(self, rc: Any = None) -> ProfiledContext:
            ctx = ProfiledContext(sim, self, task.build_model(), lambda shapes: (1, shapes["ids"][1], 3))
            contexts.append(ctx)
            return ctx

        def create_engine_inspector(self) -> Any:
            raise RuntimeError("stand-in engine: no inspector")

    class Runtime:
        def __init__(self, log: Any) -> None:
            pass

        def deserialize_cuda_engine(self, blob: bytes) -> Engine:
            assert len(blob) > 0  # the engine the real builder built
            return Engine(task, example_inputs(task), {"scores": (trt.DataType.FLOAT, (1, -1, 3))})

    class Bindings:
        def __getattr__(self, name: str) -> Any:
            return Runtime if name == "Runtime" else getattr(trt, name)

    monkeypatch.setattr(fl, "load_module", lambda flavour: Bindings())
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    runner = TensorRTRunner("cuda", options)
    phases = PhaseTimer()
    runner.prepare(task, task.build_model(), example_inputs(task), phases)
    assert {"export_cache_load", "engine_cache_load", "engine_load", "jit_warmup",
            "layer_profile"} <= set(phases.seconds)
    main, profiled = contexts
    assert [s for s, _ in main.executed] == [(1, s) for s in (1, 16, 64, 7) for _ in range(2)]
    assert runner.facts["layer_profile"]["runs"] == 2 and len(profiled.executed) == 3
    assert profiled.addresses == main.addresses  # the profiling context reads the same memory
    assert runner.facts["runtime"]["dynamic_shapes_kernel_specialization_strategy"] == "EAGER"
    assert runner.facts["cuda_graphs"]["used"] == "rtx_whole_graph_capture"
    harness = Harness(load_contract("model_io_wall"))
    for case in (*task.cases(), task.cases()[0]):
        got = harness.call(task, runner, case.request)
        host = task.preprocess(task.parse(case.request))
        np.testing.assert_allclose(got.outputs["scores"], _expected(task, host), rtol=1e-6)
    assert [s for s, _ in main.executed[-3:]] == [(1, 7), (1, 3), (1, 7)]
