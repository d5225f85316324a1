"""``TensorRTRunner.prepare()`` end to end on a stand-in GPU.

What cannot exist on this CPU-only machine is mocked, and every test name says so: the
TensorRT runtime side (``Runtime``, the deserialized engine, its runtime config, runtime
cache and execution contexts), the CUDA calls around them (``torch.cuda.device``, stream,
graph) and the device buffers (``_bind``, tested on its own in test_tensorrt.py). The
export, parse and engine build are real (TensorRT for RTX bindings, an engine built for
compute capability 8.9 into a cache shared by this module). What is checked is the
runner's own logic: the order of the preparation phases, the ``jit_warmup`` inferences
inside their phase, RTX's runtime cache loaded and saved only where the options allow,
and the dispatch of the CUDA-graph plan.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

trt = pytest.importorskip(
    "tensorrt_rtx_bindings",
    reason="tensorrt_rtx_bindings is not installed: pip install 'benchbox-contracts[tensorrt-rtx]'")

import torch  # noqa: E402

from benchbox.contracts import Policy  # noqa: E402
from benchbox.harness import PhaseTimer  # noqa: E402
from benchbox.runners import tensorrt_flavours as fl  # noqa: E402
from benchbox.runners.onnx_export import example_inputs  # noqa: E402
from benchbox.runners.tensorrt import TensorRTRunner  # noqa: E402
from benchbox.tasks import load_task  # noqa: E402

KERNELS = b"stand-in JIT kernels " * 8


class World:
    """What the stand-ins saw, with the preparation phase that was open at the time."""

    def __init__(self, capturable: bool = True) -> None:
        self.capturable = capturable
        self.phase: str | None = None
        self.events: list[tuple[str, str | None]] = []
        self.loaded: list[bytes] = []

    def log(self, what: str) -> None:
        self.events.append((what, self.phase))

    def phases(self) -> Any:
        timer = PhaseTimer()
        world = self

        @contextlib.contextmanager
        def phase(name: str) -> Iterator[None]:
            outer, world.phase = world.phase, name
            world.log("enter")
            try:
                with timer(name):
                    yield
            finally:
                world.phase = outer

        phase.seconds = timer.seconds  # type: ignore[attr-defined]
        return phase

    def entered(self) -> list[str | None]:
        return [p for what, p in self.events if what == "enter"]

    def seen(self, what: str) -> list[str | None]:
        return [p for w, p in self.events if w == what]


# -- stand-ins for the TensorRT runtime side (they need a GPU) -----------------------------

class StandInCache:
    def __init__(self, world: World) -> None:
        self.world = world

    def deserialize(self, blob: bytes) -> bool:
        self.world.loaded.append(bytes(blob))
        return True

    def serialize(self) -> bytes:
        self.world.log("runtime_cache.serialize")
        return KERNELS


class StandInRuntimeConfig:
    def __init__(self, world: World) -> None:
        self.world = world
        self.cuda_graph_strategy: Any = None
        # TensorRT for RTX's own default
        lazy = trt.DynamicShapesKernelSpecializationStrategy.LAZY
        self.dynamic_shapes_kernel_specialization_strategy = lazy

    def create_runtime_cache(self) -> StandInCache:
        return StandInCache(self.world)

    def set_runtime_cache(self, cache: StandInCache) -> bool:
        self.world.log("runtime_cache.attach")
        return True


class StandInContext:
    def __init__(self, world: World, rc: StandInRuntimeConfig | None) -> None:
        self.world, self.rc = world, rc
        self.profiler: Any = None
        self.enqueue_emits_profile = True

    def execute_async_v3(self, stream: int) -> bool:
        self.world.log("execute" if self.profiler is None else "execute.profiled")
        return True

    def is_stream_capturable(self, stream: int) -> bool:
        return self.world.capturable

    def set_tensor_address(self, name: str, ptr: int) -> None:
        pass

    def set_input_shape(self, name: str, shape: Any) -> bool:
        return True

    def report_to_profiler(self) -> None:
        self.profiler.report_layer_time("stand-in layer", 0.25)


class StandInEngine:
    def __init__(self, world: World) -> None:
        self.world = world

    def create_runtime_config(self) -> StandInRuntimeConfig:
        return StandInRuntimeConfig(self.world)

    def create_execution_context(self, rc: StandInRuntimeConfig | None = None) -> StandInContext:
        self.world.log("context")
        return StandInContext(self.world, rc)

    def create_engine_inspector(self) -> Any:
        raise RuntimeError("stand-in engine: no inspector")


class StandInTrt:
    """The real bindings (builder, parser, enums, IProfiler) with a stand-in ``Runtime``."""

    def __init__(self, world: World) -> None:
        world_ = world

        class Runtime:
            def __init__(self, log: Any) -> None:
                pass

            def deserialize_cuda_engine(self, blob: bytes) -> StandInEngine:
                world_.log("deserialize")
                return StandInEngine(world_)

        self.Runtime = Runtime

    def __getattr__(self, name: str) -> Any:
        return getattr(trt, name)


class StandInGraph:
    def __init__(self, world: World) -> None:
        self.world = world

    def replay(self) -> None:
        self.world.log("graph.replay")


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def task() -> Any:
    return load_task("decision")


def prepared(monkeypatch: pytest.MonkeyPatch, task: Any, world: World, options: dict[str, Any],
             policy: Policy | None = None) -> tuple[TensorRTRunner, Any]:
    """A runner prepared with the stand-ins above on a stand-in RTX 4090 (capability 8.9)."""
    monkeypatch.setattr(fl, "load_module", lambda flavour: StandInTrt(world))
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: world.log("sync"))
    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: StandInGraph(world))

    @contextlib.contextmanager
    def capture(graph: Any, stream: Any = None, capture_error_mode: str = "global") -> Iterator[None]:
        world.log(f"graph.capture_begin.{capture_error_mode}")
        yield
        world.log("graph.capture_end")

    monkeypatch.setattr(torch.cuda, "graph", capture)
    r = TensorRTRunner("cpu", {"compute_capabilities": "8.9", "layer_profile_runs": 2, **options})
    r._usable_gpu, r._gpu = True, {"name": "stand-in RTX 4090", "capability": "8.9"}

    class Stream:
        cuda_stream = 7

        def synchronize(self) -> None:
            world.log("stream.sync")

    r._stream = Stream()

    def bind(task: Any, engine: Any, example: Any) -> None:  # device buffers need a GPU
        world.log("bind")
        r.output_names = tuple(task.output_names)

    monkeypatch.setattr(r, "_bind", bind)
    r.apply_policy(policy or Policy())
    phases = world.phases()
    r.prepare(task, task.build_model(), example_inputs(task), phases)
    return r, phases


def test_phases_in_order_with_the_warmup_inferences_inside_jit_warmup_on_a_mocked_gpu(
        monkeypatch: pytest.MonkeyPatch, task: Any, cache_root: Path) -> None:
    world = World()
    r, phases = prepared(monkeypatch, task, world, {"cache_dir": str(cache_root), "cuda_graph": True,
                                                    "jit_warmup_calls": 3})
    assert [p for p in world.entered() if p not in ("export_key", "export", "export_cache_load")] == [
        "parse", "build", "engine_load", "jit_warmup", "runtime_cache_save", "layer_profile", "graph_capture"]
    assert list(phases.seconds)[-7:] == ["parse", "build", "engine_load", "jit_warmup", "runtime_cache_save",
                                         "layer_profile", "graph_capture"]
    # the engine is loaded and bound in engine_load; the first inferences are all in jit_warmup
    assert world.seen("deserialize") == world.seen("bind") == ["engine_load"]
    executes = world.seen("execute")
    assert executes[:3] == ["jit_warmup"] * 3
    assert "jit_warmup" not in executes[3:] and None not in executes
    assert r.facts["jit_warmup"]["calls"] == 3
    assert "compiles kernels at the first inference" in r.facts["jit_warmup"]["why"]
    # the profile runs on its own context after the warm-up and never inside a contract
    assert set(world.seen("execute.profiled")) == {"layer_profile"}
    assert r.facts["layer_profile"]["runs"] == 2 and "error" not in r.facts["layer_profile"]
    assert r.facts["execution"] == {"executed": True}
    # RTX's dynamic-shape kernel specialization is set to eager for timed runs, as read back
    runtime = r.facts["runtime"]
    assert runtime["dynamic_shapes_kernel_specialization_strategy"] == "EAGER"
    assert runtime["shape_specialization_why"].startswith("option shape_specialization=eager")
    # the runtime's messages have a logger of their own: the builder's log is the build's alone
    assert r.facts["runtime_log"] == [] and r.facts["builder_log"] is not r.facts["runtime_log"]


def test_lazy_specialization_is_an_option_recorded_with_why_on_a_mocked_gpu(
        monkeypatch: pytest.MonkeyPatch, task: Any, cache_root: Path) -> None:
    r, _ = prepared(monkeypatch, task, World(), {"cache_dir": str(cache_root), "layer_profile": False,
                                                 "shape_specialization": "lazy"})
    assert r.facts["runtime"]["dynamic_shapes_kernel_specialization_strategy"] == "LAZY"
    assert "a timed call may run either" in r.facts["runtime"]["shape_specialization_why"]


def test_runtime_cache_is_saved_then_loaded_and_honours_the_cache_options_on_a_mocked_gpu(
        monkeypatch: pytest.MonkeyPatch, task: Any, cache_root: Path) -> None:
    opts = {"cache_dir": str(cache_root), "layer_profile": False}
    first_world = World()
    first, _ = prepared(monkeypatch, task, first_world, opts)
    rc = first.facts["runtime"]["runtime_cache"]
    path = Path(rc["path"])
    assert rc["enabled"] is True and path.read_bytes() == KERNELS and rc["saved_bytes"] == len(KERNELS)
    assert path.parent == cache_root / "runtime" and first.facts["build"]["cache"]["key"] in path.name
    assert first_world.seen("runtime_cache.serialize") == ["runtime_cache_save"]
    # the next preparation of the same engine on the same GPU starts from the saved kernels
    again_world = World()
    again, _ = prepared(monkeypatch, task, again_world, opts)
    rc = again.facts["runtime"]["runtime_cache"]
    assert rc["found"] is True and rc["loaded"] is True and rc["loaded_bytes"] == len(KERNELS)
    assert again_world.loaded == [KERNELS]
    assert again_world.seen("runtime_cache.attach")[0] == "engine_load"
    # runtime_cache=false: no cache attached, nothing read or written, no save phase
    path.unlink()
    off_world = World()
    off, phases = prepared(monkeypatch, task, off_world, {**opts, "runtime_cache": False})
    assert off.facts["runtime"]["runtime_cache"] == {"enabled": False, "why": "option runtime_cache=false"}
    assert "runtime_cache_save" not in phases.seconds and not path.exists()
    assert off_world.seen("runtime_cache.attach") == [] and off_world.loaded == []


def test_cache_false_writes_no_runtime_cache_on_a_mocked_gpu(monkeypatch: pytest.MonkeyPatch, task: Any,
                                                              tmp_path: Path) -> None:
    world = World()
    r, phases = prepared(monkeypatch, task, world, {"cache_dir": str(tmp_path), "cache": False,
                                                    "layer_profile": False})
    assert r.facts["runtime"]["runtime_cache"] == {"enabled": False, "why": "option cache=false"}
    assert "runtime_cache_save" not in phases.seconds and "build" in phases.seconds
    assert world.loaded == [] and not any(tmp_path.iterdir())  # no export, engine or runtime cache


@pytest.mark.parametrize(("options", "policy", "capturable", "used", "strategy"), [
    ({}, Policy(), True, "rtx_whole_graph_capture", "WHOLE_GRAPH_CAPTURE"),
    # RTX's own capture is recorded as requested: a stream-capturability query (a question about
    # benchbox's capture, on a context built without REQUIRE_USER_ALLOCATION) does not decide it
    ({}, Policy(), False, "rtx_whole_graph_capture", "WHOLE_GRAPH_CAPTURE"),
    ({"cuda_graph": True}, Policy(), True, "stream_capture", "DISABLED"),
    ({"cuda_graph": True}, Policy(), False, "off", "DISABLED"),
    ({"cuda_graph_strategy": "disabled"}, Policy(), True, "off", "DISABLED"),
    ({"cuda_graph": True}, Policy(cuda_graphs=False), True, "off", "DISABLED"),
])
def test_graph_plan_dispatch_on_a_mocked_gpu(monkeypatch: pytest.MonkeyPatch, task: Any, cache_root: Path,
                                             options: dict[str, Any], policy: Policy, capturable: bool,
                                             used: str, strategy: str) -> None:
    world = World(capturable=capturable)
    r, phases = prepared(monkeypatch, task, world, {"cache_dir": str(cache_root), "layer_profile": False,
                                                    **options}, policy)
    g = r.facts["cuda_graphs"]
    assert g["used"] == used
    assert r.facts["runtime"]["cuda_graph_strategy"] == strategy
    captured = world.seen("graph.capture_begin.thread_local")
    if used == "stream_capture":
        # benchbox's own capture, in its phase, after one plain call, in thread-local capture mode
        # (as trtexec captures); compute then replays the graph
        assert captured == ["graph_capture"] and r._graph is not None
        assert world.seen("graph.capture_begin.global") == []
        assert g["capture_mode"] == "thread_local"
        assert r.facts["build"]["options"]["require_user_allocation"] is True
        r.compute(None)
        assert world.events[-1] == ("graph.replay", None)
    else:
        assert captured == [] and r._graph is None
    # observed where benchbox ran it itself (its capture, or no graph); RTX's own capture as requested
    assert g["used_observed"] is (used != "rtx_whole_graph_capture") and g["used_how"]
    if used == "rtx_whole_graph_capture":
        assert g["used_how"].startswith("as requested: the runtime config reads back "
                                        "cuda_graph_strategy=WHOLE_GRAPH_CAPTURE")
        assert "stream_capturable" not in g
    # benchbox's capture is tried (in its phase) exactly when the plan is a stream capture
    assert ("graph_capture" in phases.seconds) == (g["mode"] == "stream_capture")
    skips = [f for f in r.report()["fallbacks"] if f["kind"] == "cudagraph_skip"]
    if g["mode"] != "off" and used == "off":  # a plan the context could not follow: a warning
        assert len(skips) == 1 and g["warnings"] and "not stream capturable" in g["warnings"][0]
    else:
        assert skips == [] and g["warnings"] == []
