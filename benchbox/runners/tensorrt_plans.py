"""How a TensorRT engine is built and run for the task's shapes: the CUDA-graph plan under the
contract's policy, the declared input shapes, and the optimization profile made from them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from benchbox.errors import UsageError
from benchbox.runners.tensorrt_flavours import TensorRTBuildError, error_line

GRAPH_MODES = ("off", "stream_capture", "rtx_whole_graph_capture")
_GRAPH_DEFAULT_WHY = ("default: the contract allows CUDA graphs and torch-compile's max-autotune mode "
                      "replays CUDA graphs on CUDA, so TensorRT does too")


@dataclass(frozen=True)
class GraphPlan:
    """How ``compute`` runs: without a graph, replaying benchbox's stream capture of
    ``execute_async_v3``, or with TensorRT for RTX's own whole-graph capture."""

    mode: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "why": self.why}


def graph_plan(flavour: str, cuda_graph: Any, strategy: str, policy_allows: bool,
               dynamic: bool) -> GraphPlan:
    """Resolve the ``cuda_graph`` and ``cuda_graph_strategy`` options under the contract's policy.

    ``auto`` (both options' default) follows the policy: RTX uses its built-in whole-graph
    capture (manual stream capture of an RTX engine needs user-allocated memory), full
    TensorRT a stream capture of ``execute_async_v3`` (as ``trtexec --useCudaGraph``), except
    with dynamic input shapes, which one captured graph cannot follow.
    """
    if not policy_allows:
        return GraphPlan("off", "the contract's policy.cuda_graphs = false")
    if strategy == "whole_graph_capture":
        return GraphPlan("rtx_whole_graph_capture", "option cuda_graph_strategy=whole_graph_capture")
    if cuda_graph is False:
        return GraphPlan("off", "option cuda_graph=false")
    if cuda_graph is True:
        if dynamic:
            return GraphPlan("off", "option cuda_graph=true, but inputs have dynamic shapes and one "
                                    "captured graph holds one shape")
        return GraphPlan("stream_capture", "option cuda_graph=true")
    if flavour == "tensorrt_rtx":
        if strategy == "disabled":
            return GraphPlan("off", "option cuda_graph_strategy=disabled")
        return GraphPlan("rtx_whole_graph_capture", _GRAPH_DEFAULT_WHY + " (TensorRT for RTX's built-in "
                                                    "whole-graph capture, which follows shape changes)")
    if dynamic:
        return GraphPlan("off", "default, but inputs have dynamic shapes and one captured graph holds "
                                "one shape")
    return GraphPlan("stream_capture", _GRAPH_DEFAULT_WHY + " (a stream capture of execute_async_v3)")


def checked_input_shapes(task: Any, example: tuple[np.ndarray, ...]) -> dict[str, Any]:
    """``task.input_shapes()`` checked against the inputs and the example (UsageError if not)."""
    try:
        shapes = task.input_shapes()
    except Exception as e:  # a task's own hook may fail in any way
        raise UsageError(f"task {task.name}: input_shapes() failed: {error_line(e)}") from None
    if not isinstance(shapes, dict) or sorted(shapes) != sorted(task.input_names):
        raise UsageError(f"task {task.name}: input_shapes() must name every input "
                         f"({', '.join(task.input_names)})")
    for name, arr in zip(task.input_names, example):
        s = shapes[name]
        problem = s.problem() if hasattr(s, "problem") else "not an InputShape"
        if problem:
            raise UsageError(f"task {task.name}: input_shapes()[{name!r}]: {problem}")
        if not s.admits(tuple(arr.shape)):
            raise UsageError(f"task {task.name}: input {name!r} of shape {list(arr.shape)} lies outside "
                             f"its declared range {list(s.min)}..{list(s.max)}")
    return shapes


def add_optimization_profiles(trt: ModuleType, builder: Any, network: Any, config: Any,
                              input_shapes: dict[str, Any]) -> list[dict[str, Any]]:
    """One optimization profile from the task's declared shapes, when an input is dynamic.

    A network of fixed shapes gets none (the builder's implicit profile, as before).
    """
    inputs = [network.get_input(i) for i in range(network.num_inputs)]
    if not any(-1 in tuple(t.shape) for t in inputs):
        return []
    profile = builder.create_optimization_profile()
    out = []
    for t in inputs:
        s = input_shapes.get(t.name)
        dims = tuple(t.shape)
        if s is None or len(s.min) != len(dims) or any(
                d != -1 and not (lo == hi == d) for d, lo, hi in zip(dims, s.min, s.max)):
            declared = f"{list(s.min)}..{list(s.max)}" if s is not None else "nothing"
            raise TensorRTBuildError(f"input {t.name}: the network has dimensions {list(dims)}, the task "
                                     f"declares {declared}")
        profile.set_shape(t.name, tuple(s.min), tuple(s.opt), tuple(s.max))
        out.append({"input": t.name, "min": list(s.min), "opt": list(s.opt), "max": list(s.max)})
    if config.add_optimization_profile(profile) < 0:
        raise TensorRTBuildError("TensorRT refused the optimization profile " + json.dumps(out))
    return out


#: why each ``shape_specialization`` (TensorRT for RTX's DynamicShapesKernelSpecializationStrategy)
SPECIALIZATION_WHY = {
    "eager": "option shape_specialization=eager (the default for timed runs): a new shape's kernels "
             "compile at its first inference, blocking, never in the background while samples run; "
             "every declared shape is warmed in jit_warmup and every case's shape in its untimed "
             "validation calls",
    "lazy": "option shape_specialization=lazy (TensorRT for RTX's own default): a new shape runs "
            "fallback kernels while its specialized kernels compile in the background, so a timed "
            "call may run either",
    "none": "option shape_specialization=none: fallback kernels only, never shape-specialized ones",
}


def warmup_inputs(names: tuple[str, ...], example: tuple[np.ndarray, ...], shapes: dict[str, Any],
                  dynamic: set[str]) -> list[tuple[np.ndarray, ...]]:
    """The inputs ``jit_warmup`` runs: for dynamic inputs each declared shape (min, opt, max, with
    the example's values repeated to fill it), then the example itself, so that the runner ends on
    the example's shapes. Fixed-shape inputs are the example's throughout."""
    if not dynamic:
        return [example]
    out: list[tuple[np.ndarray, ...]] = []
    seen = {tuple(a.shape for a in example)}
    for which in ("min", "opt", "max"):
        host = tuple(np.resize(a, tuple(getattr(shapes[n], which))) if n in dynamic else a
                     for n, a in zip(names, example))
        key = tuple(a.shape for a in host)
        if key not in seen:
            seen.add(key)
            out.append(host)
    return [*out, example]
