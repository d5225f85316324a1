"""The TensorRT runner on a GPU, apart from its data path: the execution context and RTX's
runtime config and runtime cache, the engine inspector's report, the diagnostic per-layer
profile, and benchbox's CUDA-graph capture of ``execute_async_v3``.

``EngineRuntime`` is that part of :class:`~benchbox.runners.tensorrt.TensorRTRunner`; it
reads and writes the runner's attributes.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from benchbox.runners import tensorrt_cache as cache
from benchbox.runners import tensorrt_inspect as ti
from benchbox.runners import tensorrt_plans as plans
from benchbox.runners import tensorrt_report as tr
from benchbox.runners.tensorrt_flavours import error_line


class _NotCapturable(RuntimeError):
    pass


class EngineRuntime:
    """Context, runtime cache, inspection, layer profile and graph capture of the runner."""

    options: dict[str, Any]
    facts: dict[str, Any]
    flavour: str | None
    device: str
    _gpu: dict[str, Any] | None
    _trt: ModuleType | None
    _plan: Any
    _engine: Any
    _context: Any
    _stream: Any
    _graph: Any
    _runtime_config: Any
    _runtime_cache: Any
    _runtime_cache_path: Path | None
    _engine_key: str
    _engine_layers: list[dict[str, Any]] | None
    _addresses: dict[str, int]
    _bound: dict[str, tuple[int, ...]]
    _dynamic: set[str]
    _shapes: dict[str, Any]
    input_names: tuple[str, ...]
    _graph_entries: list[dict[str, Any]]
    _runtime: Any
    _runtime_log: Any

    def _load_engine(self, trt: ModuleType, engine_bytes: bytes) -> None:
        """Deserialize the engine (with a logger of its own: runtime messages stay out of the
        builder's log) and make its execution context."""
        log = self._runtime_log = ti.collecting_logger(trt)
        self.facts["runtime_log"] = log.messages
        runtime = trt.Runtime(log)
        engine = runtime.deserialize_cuda_engine(engine_bytes)
        if engine is None:
            errs = log.errors()
            raise RuntimeError("TensorRT could not deserialize the engine: "
                               + (errs[0] if errs else "no message"))
        self._runtime, self._engine = runtime, engine
        self._context = self._create_context(trt, engine)

    def _create_context(self, trt: ModuleType, engine: Any) -> Any:
        """The execution context; for RTX with its runtime config (graph strategy, runtime cache)."""
        runtime_facts: dict[str, Any] = {}
        if self.flavour == "tensorrt_rtx" and hasattr(engine, "create_runtime_config"):
            rc = self._runtime_config = engine.create_runtime_config()
            rc.cuda_graph_strategy = (trt.CudaGraphStrategy.WHOLE_GRAPH_CAPTURE
                                      if self._plan.mode == "rtx_whole_graph_capture"
                                      else trt.CudaGraphStrategy.DISABLED)
            runtime_facts["cuda_graph_strategy"] = rc.cuda_graph_strategy.name
            runtime_facts.update(self._specialize(trt, rc))
            runtime_facts["runtime_cache"] = self._load_runtime_cache(rc)
            context = engine.create_execution_context(rc)
        else:
            context = engine.create_execution_context()
            runtime_facts["runtime_cache"] = {"enabled": False, "why": f"flavour {self.flavour} has none"}
        if context is None:
            raise RuntimeError("TensorRT could not create an execution context")
        self.facts["runtime"] = runtime_facts
        return context

    def _specialize(self, trt: ModuleType, rc: Any) -> dict[str, Any]:
        """Set RTX's dynamic-shape kernel specialization (option ``shape_specialization``) on a
        runtime config; the value read back, and why."""
        special = self.options["shape_specialization"]
        enum = getattr(trt, "DynamicShapesKernelSpecializationStrategy", None)
        if enum is not None and hasattr(rc, "dynamic_shapes_kernel_specialization_strategy"):
            rc.dynamic_shapes_kernel_specialization_strategy = enum.__members__[special.upper()]
        strategy = getattr(rc, "dynamic_shapes_kernel_specialization_strategy", None)
        return {"dynamic_shapes_kernel_specialization_strategy": getattr(strategy, "name", None),
                "shape_specialization_why": plans.SPECIALIZATION_WHY[special]}

    def _load_runtime_cache(self, rc: Any) -> dict[str, Any]:
        """Attach an RTX runtime cache, from disk when a compatible one is there."""
        off = [k for k in ("runtime_cache", "cache") if not self.options[k]]
        if off:
            return {"enabled": False, "why": f"option {off[0]}=false"}
        if not hasattr(rc, "create_runtime_cache"):
            return {"enabled": False, "why": "this TensorRT for RTX has no runtime cache"}
        gpu = self._gpu or {}
        tag = re.sub(r"[^A-Za-z0-9]+", "-", f"{gpu.get('name')}-{gpu.get('capability')}").strip("-")
        path = self._runtime_cache_path = self._cache_root() / "runtime" / f"{self._engine_key}.{tag}.bin"
        runtime_cache = self._runtime_cache = rc.create_runtime_cache()
        facts: dict[str, Any] = {"enabled": True, "path": str(path), "found": path.is_file(),
                                 "loaded": False, "loaded_bytes": 0}
        if path.is_file():
            blob = path.read_bytes()
            facts["loaded"] = bool(runtime_cache.deserialize(blob))
            facts["loaded_bytes"] = len(blob) if facts["loaded"] else 0
            if not facts["loaded"]:
                facts["why_not_loaded"] = "TensorRT for RTX rejected it (another version, GPU or driver)"
        if not rc.set_runtime_cache(runtime_cache):
            raise RuntimeError("TensorRT for RTX refused the runtime cache")
        return facts

    def _save_runtime_cache(self) -> None:
        assert self._runtime_cache is not None and self._runtime_cache_path is not None
        blob = bytes(memoryview(self._runtime_cache.serialize()))
        cache.write_atomic(self._runtime_cache_path, blob)
        self.facts["runtime"]["runtime_cache"]["saved_bytes"] = len(blob)

    def _inspect(self, trt: ModuleType, engine: Any) -> None:
        """The engine inspector's report replaces the build-time one (kept, with the reason, if it fails)."""
        built = self.facts["engine_report"]
        try:
            rep = ti.inspector_report(trt, engine)
        except Exception as e:
            built["inspector_error"] = error_line(e)
            return
        self.facts["engine_report"] = {**rep, "engine_bytes": built["engine_bytes"],
                                       "engine_sha256": built["engine_sha256"]}
        self._set_engine_layers(rep["layers"], "engine_inspector")
        self.facts["engine"] = ti.engine_facts(trt, engine)

    def _layer_profile(self, example: tuple[np.ndarray, ...]) -> None:
        """TensorRT's per-layer times over a few inferences on a second execution context.

        A diagnostic pass after preparation, never inside a contract; the times are
        TensorRT's own (IProfiler), summarised per layer and per precision. A failure is
        recorded and does not fail the runner.
        """
        trt = self._trt
        assert trt is not None
        runs = self.options["layer_profile_runs"]
        try:
            profiler = tr.make_profiler(trt)
            if self._runtime_config is not None:
                # its own runtime config: no RTX graph around profiled layers; the same kernel cache
                rc = self._engine.create_runtime_config()
                rc.cuda_graph_strategy = trt.CudaGraphStrategy.DISABLED
                self._specialize(trt, rc)
                if self._runtime_cache is not None:
                    rc.set_runtime_cache(self._runtime_cache)
                ctx = self._engine.create_execution_context(rc)
            else:
                ctx = self._engine.create_execution_context()
            for n, ptr in self._addresses.items():
                ctx.set_tensor_address(n, ptr)
            for n, shape in self._bound.items():
                ctx.set_input_shape(n, shape)
            self.h2d(example)
            if not ctx.execute_async_v3(self._stream.cuda_stream):  # this context's own first call
                raise RuntimeError("execute_async_v3 failed on the profiling context")
            self._stream.synchronize()
            ctx.profiler = profiler
            ctx.enqueue_emits_profile = False
            for _ in range(runs):
                self.h2d(example)
                if not ctx.execute_async_v3(self._stream.cuda_stream):
                    raise RuntimeError("execute_async_v3 failed on the profiling context")
                self._stream.synchronize()
                ctx.report_to_profiler()
                profiler.end_run()
            del ctx
            self.facts["layer_profile"] = {
                **tr.summarize_layer_profile(profiler.runs, self._engine_layers or []),
                "source": "TensorRT IProfiler on a separate execution context",
                "contract": "none: a diagnostic pass after preparation, never inside a contract"}
        except Exception as e:
            self.facts["layer_profile"] = {"error": error_line(e)}

    def _warm_up(self, example: tuple[np.ndarray, ...]) -> None:
        """``jit_warmup_calls`` inferences of every declared shape (the example's last), so that no
        kernel compiles or initializes in a timed call."""
        calls = self.options["jit_warmup_calls"]
        shaped = plans.warmup_inputs(self.input_names, example, self._shapes, self._dynamic)
        for host in shaped:
            for _ in range(calls):
                self.d2h(self.compute(self.h2d(host)))
        facts: dict[str, Any] = {"calls": calls, "why": "TensorRT for RTX compiles kernels at the first "
                                 "inference" if self.flavour == "tensorrt_rtx"
                                 else "first inferences initialize lazily"}
        if self._dynamic:
            dynamic = [i for i, n in enumerate(self.input_names) if n in self._dynamic]
            facts["shapes"] = [{self.input_names[i]: list(host[i].shape) for i in dynamic} for host in shaped]
            facts["why"] += ("; every declared shape (the profile's min, opt and max, then the example's) "
                             "is run, so a new shape's kernels are not compiled in a timed call")
        self.facts["jit_warmup"] = facts

    def _graph_as_planned(self) -> None:
        """Record the graph use of a plan benchbox does not capture itself: off, or RTX's own
        whole-graph capture, which TensorRT for RTX does not report (so: as requested)."""
        g = self.facts["cuda_graphs"]
        if self._plan.mode == "rtx_whole_graph_capture":
            strategy = self.facts.get("runtime", {}).get("cuda_graph_strategy")
            g.update(used=self._plan.mode, used_observed=False,
                     used_how=f"as requested: the runtime config reads back cuda_graph_strategy={strategy}; "
                              "TensorRT for RTX does not report whether it captured a graph")
        else:
            g.update(used="off", used_observed=True,
                     used_how="no graph: compute enqueues execute_async_v3 on the runner's stream")

    def _capturable(self) -> bool:
        """TensorRT's own answer whether the context's work can be captured on the runner's stream."""
        ctx = self._context
        if not hasattr(ctx, "is_stream_capturable"):
            return True  # releases without the query: the capture itself decides
        capturable = bool(ctx.is_stream_capturable(self._stream.cuda_stream))
        self.facts["cuda_graphs"]["stream_capturable"] = capturable
        return capturable

    def _graph_fallback(self, why: str, phase: str, source: str) -> None:
        """Run without a graph, and say so: a warning and a ``cudagraph_skip`` fallback."""
        self._graph = None
        warning = f"CUDA graphs off, running execute_async_v3 without a graph: {why}"
        self.facts["cuda_graphs"].update(used="off", used_observed=True,
                                         used_how="the capture did not succeed: compute enqueues "
                                                  "execute_async_v3 without a graph")
        self.facts["cuda_graphs"]["warnings"].append(warning)
        self._graph_entries = [{"kind": "cudagraph_skip", "reason": why, "count": 1, "detail": warning,
                                "phase": phase, "source": source}]

    def _capture(self, example: tuple[np.ndarray, ...]) -> None:
        """Capture ``execute_async_v3`` in a CUDA graph; on failure run without one, with a warning."""
        ctx = self._context
        try:
            if not self._capturable():
                raise _NotCapturable("TensorRT reports the execution context is not stream capturable")
            self.d2h(self.compute(self.h2d(example)))  # one call before capture
            graph = torch.cuda.CUDAGraph()
            # thread-local capture mode, as trtexec captures (cudaStreamCaptureModeThreadLocal): only
            # unsafe calls of this thread invalidate the capture
            self.facts["cuda_graphs"]["capture_mode"] = "thread_local"
            with torch.cuda.graph(graph, stream=self._stream, capture_error_mode="thread_local"):
                if not ctx.execute_async_v3(self._stream.cuda_stream):
                    raise RuntimeError("execute_async_v3 failed during CUDA graph capture")
            self._graph = graph
            self.d2h(self.compute(self.h2d(example)))  # one replay
            self.facts["cuda_graphs"].update(
                used="stream_capture", used_observed=True,
                used_how="captured here: execute_async_v3 recorded into a CUDA graph on the runner's "
                         "stream and replayed once; compute replays it")
        except Exception as e:
            self._graph_fallback(f"the capture failed: {error_line(e)}", "graph_capture",
                                 "torch.cuda.graph stream capture of execute_async_v3")
            torch.cuda.synchronize(self.device)
            self.d2h(self.compute(self.h2d(example)))  # the context still runs without a graph
