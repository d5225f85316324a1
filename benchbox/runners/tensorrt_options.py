"""The TensorRT runner's options: defaults, checks, and which ones decide the engine's bytes.

Every value is checked here, before anything is exported; a bad one is a one-line
``UsageError``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from benchbox.errors import UsageError
from benchbox.runners import tensorrt_flavours as fl
from benchbox.runners.base import refuse_unknown_options

OPTION_DEFAULTS: dict[str, Any] = {
    "flavour": "auto",
    "compute_capabilities": None,   # RTX: "current", "8.9", "8.6,12.0"; default current / 8.9 offline
    "tf32": False,                  # builder flag TF32, set or cleared explicitly
    "builder_optimization_level": None,  # None: the builder's default (recorded)
    "opset": None,
    "cuda_graph": "auto",           # auto | true | false: benchbox's stream capture of execute_async_v3
    "cuda_graph_strategy": "auto",  # RTX runtime: auto | disabled | whole_graph_capture
    "runtime_cache": True,          # RTX: keep JIT-compiled kernels on disk between runs
    "jit_warmup_calls": 2,          # inferences in the jit_warmup preparation phase
    "layer_profile": True,          # diagnostic per-layer profile (IProfiler) after preparation
    "layer_profile_runs": 10,
    "cache": True,
    "cache_dir": None,              # default $BENCHBOX_CACHE or ~/.cache/benchbox
    "shape_specialization": "eager",  # RTX, dynamic shapes: eager | lazy | none (kernels per shape)
    "transfer": "auto",             # the PyTorch runners' transfer options (benchbox.runners.transfer)
    "d2h": "auto",
    "stream": "auto",
}
#: the keys the runner takes (``ENTRIES['tensorrt'].option_keys`` names this)
OPTION_KEYS = tuple(OPTION_DEFAULTS)
#: values of ``shape_specialization``: TensorRT for RTX's DynamicShapesKernelSpecializationStrategy
SHAPE_SPECIALIZATIONS = ("eager", "lazy", "none")
#: options that decide the engine's bytes. ``cuda_graph=true`` with TensorRT for RTX does too:
#: benchbox's stream capture of an RTX engine needs the REQUIRE_USER_ALLOCATION builder flag, so
#: it builds another engine with another key (the key holds the options read back from the
#: builder config, ``require_user_allocation`` among them). The other options act at run time
#: only and stay out of the engine cache key (opset decides the ONNX bytes, hashed in the key).
BUILD_OPTION_KEYS = ("compute_capabilities", "tf32", "builder_optimization_level")


def _as_bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    low = str(value).lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise UsageError(f"tensorrt option {key}: expected true or false, got {value!r}")


def _as_int(value: Any, key: str, lo: int, hi: int | None = None) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        out = int(value)
    except (TypeError, ValueError):
        raise UsageError(f"tensorrt option {key}: expected an integer, got {value!r}") from None
    if out < lo or (hi is not None and out > hi):
        raise UsageError(f"tensorrt option {key}: expected {lo}..{hi if hi is not None else ''}, got {out}")
    return out


def normalize_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """Defaults filled in and values checked; a bad option is a one-line UsageError."""
    opts = dict(options or {})
    refuse_unknown_options("tensorrt", OPTION_KEYS, opts)
    out = {**OPTION_DEFAULTS, **opts}
    if out["flavour"] not in ("auto", *fl.FLAVOURS):
        raise UsageError(f"unknown TensorRT flavour '{out['flavour']}' (auto, {', '.join(fl.FLAVOURS)})")
    for key in ("cache", "tf32", "runtime_cache", "layer_profile"):
        out[key] = _as_bool(out[key], key)
    graph = out["cuda_graph"]
    out["cuda_graph"] = "auto" if str(graph).lower() == "auto" else _as_bool(graph, "cuda_graph")
    strategy = str(out["cuda_graph_strategy"]).lower()
    if strategy not in ("auto", "disabled", "whole_graph_capture"):
        raise UsageError(f"tensorrt option cuda_graph_strategy: expected auto, disabled or "
                         f"whole_graph_capture, got {out['cuda_graph_strategy']!r}")
    out["cuda_graph_strategy"] = strategy
    special = str(out["shape_specialization"]).lower()
    if special not in SHAPE_SPECIALIZATIONS:
        raise UsageError(f"tensorrt option shape_specialization: expected "
                         f"{', '.join(SHAPE_SPECIALIZATIONS)}, got {out['shape_specialization']!r}")
    out["shape_specialization"] = special
    if out["cuda_graph"] is True and strategy == "whole_graph_capture":
        raise UsageError("tensorrt options cuda_graph and cuda_graph_strategy cannot both capture graphs")
    cc = out["compute_capabilities"]
    if cc is not None:
        items = cc if isinstance(cc, list | tuple) else str(cc).split(",")
        out["compute_capabilities"] = [str(c).strip().lower() for c in items if str(c).strip()]
        if not out["compute_capabilities"]:
            raise UsageError("tensorrt option compute_capabilities: empty")
        if "current" in out["compute_capabilities"] and len(out["compute_capabilities"]) > 1:
            raise UsageError("tensorrt option compute_capabilities: 'current' cannot be combined")
    if out["builder_optimization_level"] is not None:
        out["builder_optimization_level"] = _as_int(out["builder_optimization_level"],
                                                    "builder_optimization_level", 0, 5)
    if out["opset"] is not None:
        out["opset"] = _as_int(out["opset"], "opset", 1)
    out["jit_warmup_calls"] = _as_int(out["jit_warmup_calls"], "jit_warmup_calls", 1)
    out["layer_profile_runs"] = _as_int(out["layer_profile_runs"], "layer_profile_runs", 1)
    return out


def check_flavour_options(opts: dict[str, Any], flavour: str) -> None:
    """Values that only one flavour accepts, checked before anything is exported."""
    named = opts["compute_capabilities"]
    if flavour != "tensorrt_rtx":
        if named is not None:
            raise UsageError(f"tensorrt option compute_capabilities applies to TensorRT for RTX; "
                             f"flavour {flavour} builds for the GPU of the run")
        if opts["cuda_graph_strategy"] == "whole_graph_capture":
            raise UsageError(f"tensorrt option cuda_graph_strategy=whole_graph_capture needs TensorRT "
                             f"for RTX; flavour {flavour} has no runtime CUDA graph strategy")
        return
    if named is not None and named != ["current"]:
        trt = fl.load_module(flavour)
        supported = fl.rtx_capabilities(trt)
        for c in named:
            if c not in supported:
                raise UsageError(f"tensorrt option compute_capabilities: {c} is not one TensorRT for RTX "
                                 f"{trt.__version__} builds for ({', '.join(supported)})")


def default_cache_root() -> Path:
    root = os.environ.get("BENCHBOX_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "benchbox"


def gpu_of(device: str) -> dict[str, Any] | None:
    """The name and compute capability of ``device``'s GPU, or None without a visible CUDA device."""
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(device)
    return {"name": torch.cuda.get_device_name(device), "capability": f"{major}.{minor}"}


def check_current_target(opts: dict[str, Any], flavour: str, device: str) -> None:
    """``compute_capabilities=current`` builds for the run's GPU: refused at once (before any
    calibration or export) unless ``device`` is a GPU TensorRT for RTX supports."""
    if flavour != "tensorrt_rtx" or opts["compute_capabilities"] != ["current"]:
        return
    trt = fl.load_module(flavour)
    supported = fl.rtx_capabilities(trt)
    gpu = gpu_of(device)
    usable = gpu["capability"] if gpu is not None and gpu["capability"] in supported else None
    fl.target_capabilities(["current"], supported, usable, gpu, str(trt.__version__))
