"""Native TensorRT: one runner, two flavours (TensorRT 10/11 and TensorRT for RTX).

Preparation happens outside every contract, each step a phase the harness times:
``export_key`` and ``export`` or ``export_cache_load`` (the ONNX export, cached on disk),
``parse``, ``build`` or ``engine_cache_load``, ``engine_load`` (deserialization and the
execution context), ``jit_warmup`` (TensorRT for RTX compiles its kernels at the first
inference; full TensorRT initializes lazily there too), ``runtime_cache_save`` (RTX),
``layer_profile`` (a diagnostic per-layer profile on its own execution context) and
``graph_capture``.

The device stages are those of the PyTorch runners: ``h2d`` copies the host arrays
through pinned staging into static device buffers on the runner's stream, ``compute``
enqueues ``execute_async_v3`` on that stream (or replays a CUDA graph of it), ``d2h``
copies the outputs back and synchronizes. So every contract means the same thing for
this runner as for the others.

Choices TensorRT leaves open are made for comparability and recorded in the report:
TF32 is off unless asked for (the PyTorch runners compute true float32), and CUDA graphs
follow the contract's ``cuda_graphs`` policy, on by default as torch.compile's
max-autotune mode replays CUDA graphs on CUDA.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from benchbox.errors import MissingExtraError, UsageError
from benchbox.runners import tensorrt_report as tr
from benchbox.runners.base import Phases
from benchbox.runners.onnx_export import OnnxExport, load_or_export, missing_export_packages
from benchbox.runners.torch_runner import TorchRunner, cuda_reason

#: flavour → (Python module, benchbox extra)
FLAVOURS: dict[str, tuple[str, str]] = {
    "tensorrt": ("tensorrt", "tensorrt"),
    "tensorrt_rtx": ("tensorrt_rtx_bindings", "tensorrt-rtx"),
}
NOT_INSTALLED = ("neither tensorrt nor tensorrt_rtx_bindings is installed: "
                 "pip install 'benchbox[tensorrt]' or 'benchbox[tensorrt-rtx]'")
NEEDS_CUDA = "TensorRT needs a CUDA device (device=cuda)"
#: compute capability an RTX engine is built for when no option names one and no GPU the
#: flavour supports is usable (Ada Lovelace: RTX 40-series, L4, L40S)
DEFAULT_OFFLINE_CAPABILITY = "8.9"

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
}
#: options that decide the engine's bytes. ``cuda_graph=true`` with TensorRT for RTX does too:
#: benchbox's stream capture of an RTX engine needs the REQUIRE_USER_ALLOCATION builder flag, so
#: it builds another engine with another key (the key holds the options read back from the
#: builder config, ``require_user_allocation`` among them). The other options act at run time
#: only and stay out of the engine cache key (opset decides the ONNX bytes, hashed in the key).
BUILD_OPTION_KEYS = ("compute_capabilities", "tf32", "builder_optimization_level")
#: bump when the engine build changes in a way the hashed builder code does not show
BUILD_CODE_REVISION = 2

_TORCH_DTYPES = {"FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16,
                 "INT8": torch.int8, "INT32": torch.int32, "INT64": torch.int64,
                 "BOOL": torch.bool, "UINT8": torch.uint8}
_STRONGLY_TYPED = "STRONGLY_TYPED"


class TensorRTBuildError(RuntimeError):
    """The ONNX parse or the engine build failed; the runner's ``facts`` keep what was learnt."""


def _error_line(e: BaseException) -> str:
    from benchbox.errors import error_line

    return error_line(e)


# -- flavours -----------------------------------------------------------------------------

@dataclass(frozen=True)
class FlavourChoice:
    """The flavour a request resolved to, and why the others were passed over."""

    requested: str
    flavour: str | None
    skipped: tuple[tuple[str, str], ...] = ()

    def missing_reason(self) -> str:
        if self.requested == "auto":
            if all(why == "not installed" for _, why in self.skipped):
                return NOT_INSTALLED
            return "no usable TensorRT: " + "; ".join(f"{f}: {why}" for f, why in self.skipped)
        module, extra = FLAVOURS[self.requested]
        why = dict(self.skipped).get(self.requested, "not installed")
        if why == "not installed":
            return f"flavour {self.requested} needs {module}, which is not installed: " \
                   f"pip install 'benchbox[{extra}]'"
        return f"flavour {self.requested}: {why}"

    def to_dict(self) -> dict[str, Any]:
        return {"requested": self.requested, "chosen": self.flavour,
                "skipped": [{"flavour": f, "reason": why} for f, why in self.skipped]}


def installed(flavour: str) -> bool:
    """Whether the flavour's Python module can be found (checked without importing it)."""
    try:
        return importlib.util.find_spec(FLAVOURS[flavour][0]) is not None
    except (ImportError, ValueError):
        return False


def probe(flavour: str) -> str | None:
    """Why the flavour cannot be used (not installed, fails to import, no version), or None."""
    if not installed(flavour):
        return "not installed"
    module = FLAVOURS[flavour][0]
    try:
        mod = importlib.import_module(module)
    except Exception as e:  # a broken install can fail in any way (missing shared libraries, ...)
        return f"{module} is installed but does not import ({_error_line(e)})"
    version = getattr(mod, "__version__", None)
    if not isinstance(version, str) or not re.match(r"\d+\.\d+", version):
        return f"{module} imports but reports no version ({version!r})"
    if not hasattr(mod, "Builder") or not hasattr(mod, "OnnxParser"):
        return f"{module} {version} has no Builder/OnnxParser (not the TensorRT Python bindings)"
    return None


def resolve_flavour(requested: str | None) -> FlavourChoice:
    """The requested flavour, or under ``auto`` full TensorRT when it imports and reports a
    version, else TensorRT for RTX; ``flavour`` None when none is usable."""
    requested = requested or "auto"
    if requested != "auto" and requested not in FLAVOURS:
        raise UsageError(f"unknown TensorRT flavour '{requested}' (auto, {', '.join(FLAVOURS)})")
    skipped = []
    for f in (FLAVOURS if requested == "auto" else (requested,)):
        why = probe(f)
        if why is None:
            return FlavourChoice(requested, f, tuple(skipped))
        skipped.append((f, why))
    return FlavourChoice(requested, None, tuple(skipped))


def load_module(flavour: str) -> ModuleType:
    return importlib.import_module(FLAVOURS[flavour][0])


def rtx_capabilities(trt: ModuleType) -> dict[str, Any]:
    """The compute capabilities TensorRT for RTX can build for, as "major.minor" → enum member."""
    out: dict[str, Any] = {}
    for name, member in trt.ComputeCapability.__members__.items():
        m = re.fullmatch(r"SM(\d+)(\d)", name)
        if m:
            out[f"{m.group(1)}.{m.group(2)}"] = member
    return out


# -- options -------------------------------------------------------------------------------

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
    unknown = sorted(set(opts) - set(OPTION_DEFAULTS))
    if unknown:
        raise UsageError(f"unknown tensorrt option '{unknown[0]}' (options: {', '.join(OPTION_DEFAULTS)})")
    out = {**OPTION_DEFAULTS, **opts}
    if out["flavour"] not in ("auto", *FLAVOURS):
        raise UsageError(f"unknown TensorRT flavour '{out['flavour']}' (auto, {', '.join(FLAVOURS)})")
    for key in ("cache", "tf32", "runtime_cache", "layer_profile"):
        out[key] = _as_bool(out[key], key)
    graph = out["cuda_graph"]
    out["cuda_graph"] = "auto" if str(graph).lower() == "auto" else _as_bool(graph, "cuda_graph")
    strategy = str(out["cuda_graph_strategy"]).lower()
    if strategy not in ("auto", "disabled", "whole_graph_capture"):
        raise UsageError(f"tensorrt option cuda_graph_strategy: expected auto, disabled or "
                         f"whole_graph_capture, got {out['cuda_graph_strategy']!r}")
    out["cuda_graph_strategy"] = strategy
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
        trt = load_module(flavour)
        supported = rtx_capabilities(trt)
        for c in named:
            if c not in supported:
                raise UsageError(f"tensorrt option compute_capabilities: {c} is not one TensorRT for RTX "
                                 f"{trt.__version__} builds for ({', '.join(supported)})")


def default_cache_root() -> Path:
    root = os.environ.get("BENCHBOX_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "benchbox"


def target_capabilities(named: list[str] | None, supported: dict[str, Any], usable_gpu: str | None,
                        gpu: dict[str, Any] | None, version: str) -> tuple[list[str], str]:
    """The compute capabilities an RTX engine is built for, and why.

    ``usable_gpu`` is the capability of this run's GPU when TensorRT for RTX supports it;
    ``gpu`` describes the GPU torch sees (if any), for the reason.
    """
    if named is None:
        if usable_gpu is not None:
            return ["current"], f"default: the GPU of this run (compute capability {usable_gpu})"
        if gpu is not None:
            return [DEFAULT_OFFLINE_CAPABILITY], (
                f"default without a supported GPU: TensorRT for RTX {version} does not run on "
                f"{gpu.get('name')} (compute capability {gpu.get('capability')}), so the engine is "
                f"built for {DEFAULT_OFFLINE_CAPABILITY}")
        return [DEFAULT_OFFLINE_CAPABILITY], (f"default without a CUDA device: the engine is built for "
                                              f"{DEFAULT_OFFLINE_CAPABILITY}")
    if named == ["current"]:
        if usable_gpu is None:
            where = (f"{gpu.get('name')} (compute capability {gpu.get('capability')}) is not supported"
                     if gpu is not None else "no CUDA device is usable")
            raise UsageError(f"tensorrt option compute_capabilities=current: {where}; name one "
                             f"({', '.join(supported)})")
        return ["current"], f"option (the GPU of this run, compute capability {usable_gpu})"
    for c in named:
        if c not in supported:
            raise UsageError(f"tensorrt option compute_capabilities: {c} is not one TensorRT for RTX "
                             f"{version} builds for ({', '.join(supported)})")
    return list(named), "option"


# -- CUDA graphs ---------------------------------------------------------------------------

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


# -- the build -------------------------------------------------------------------------------

def checked_input_shapes(task: Any, example: tuple[np.ndarray, ...]) -> dict[str, Any]:
    """``task.input_shapes()`` checked against the inputs and the example (UsageError if not)."""
    try:
        shapes = task.input_shapes()
    except Exception as e:  # a task's own hook may fail in any way
        raise UsageError(f"task {task.name}: input_shapes() failed: {_error_line(e)}") from None
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


def tactic_source_names(trt: ModuleType, mask: int) -> list[str]:
    return [n for n, m in trt.TacticSource.__members__.items() if int(mask) & (1 << int(m))]


def configure_builder(trt: ModuleType, builder: Any, network: Any, config: Any, *, flavour: str,
                      capabilities: list[str] | None, tf32: bool, optimization_level: int | None,
                      require_user_allocation: bool, input_shapes: dict[str, Any]
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Set every builder choice explicitly; returns (build options as read back from the
    config, builder facts that do not change the engine: defaults seen, tactic sources)."""
    defaults = {"tf32": bool(config.get_flag(trt.BuilderFlag.TF32)),
                "builder_optimization_level": int(config.builder_optimization_level)}
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    if tf32:
        config.set_flag(trt.BuilderFlag.TF32)
    else:
        config.clear_flag(trt.BuilderFlag.TF32)
    if optimization_level is not None:
        config.builder_optimization_level = optimization_level
    opts: dict[str, Any] = {"strongly_typed": True, "profiling_verbosity": "DETAILED",
                            "tf32": bool(config.get_flag(trt.BuilderFlag.TF32)),
                            "builder_optimization_level": int(config.builder_optimization_level)}
    if flavour == "tensorrt_rtx":
        members = rtx_capabilities(trt)
        ccs = capabilities or [DEFAULT_OFFLINE_CAPABILITY]
        config.num_compute_capabilities = len(ccs)
        for i, c in enumerate(ccs):
            member = trt.ComputeCapability.CURRENT if c == "current" else members[c]
            if not config.set_compute_capability(member, i):
                raise TensorRTBuildError(f"TensorRT for RTX refused compute capability {c}")
        opts["compute_capabilities"] = ccs
    if require_user_allocation:
        flag = getattr(trt.BuilderFlag, "REQUIRE_USER_ALLOCATION", None)
        if flag is None:
            raise TensorRTBuildError(f"{flavour} has no REQUIRE_USER_ALLOCATION builder flag, which a "
                                     "stream capture of a TensorRT for RTX engine needs")
        config.set_flag(flag)
    opts["require_user_allocation"] = require_user_allocation
    opts["optimization_profiles"] = add_optimization_profiles(trt, builder, network, config, input_shapes)
    facts = {"builder_defaults": defaults,
             "tactic_sources_enabled": tactic_source_names(trt, config.get_tactic_sources())}
    return opts, facts


def build_code_version() -> str:
    """A hash of the code that configures the builder and of ``BUILD_CODE_REVISION``."""
    src = "".join(inspect.getsource(f) for f in (configure_builder, add_optimization_profiles))
    return hashlib.sha256(f"{BUILD_CODE_REVISION}\n{src}".encode()).hexdigest()[:16]


def engine_cache_key(*, onnx_sha256: str, flavour: str, version: str, build_options: dict[str, Any],
                     device: dict[str, Any], code_version: str) -> str:
    """sha256 of everything that decides the engine's bytes (and nothing that acts at run time)."""
    doc = {"onnx_sha256": onnx_sha256, "flavour": flavour, "version": version,
           "build_options": build_options, "device": device, "build_code_version": code_version}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _collecting_logger(trt: ModuleType) -> Any:
    """A TensorRT logger that keeps warnings and errors, the builder's memory and tactic-source
    messages, and its VERBOSE listing of the built engine's layers."""

    class Collector(trt.ILogger):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.messages: list[dict[str, str]] = []
            self.fact_lines: list[str] = []
            self.layer_listing: str | None = None

        def log(self, severity: Any, msg: str) -> None:
            text = str(msg)
            if severity <= trt.ILogger.Severity.WARNING:
                if len(self.messages) < 200:
                    self.messages.append({"severity": severity.name, "message": text[:500]})
            elif text.startswith("Layers:") and self.layer_listing is None:
                self.layer_listing = text
            elif tr.keep_log_line(text) and len(self.fact_lines) < 500:
                self.fact_lines.append(text)

        def errors(self) -> list[str]:
            return [m["message"] for m in self.messages if m["severity"] != "WARNING"]

    return Collector()


def _dims(shape: Any) -> list[int]:
    return [int(d) for d in shape]


def network_report(network: Any) -> dict[str, Any]:
    """Layers and I/O of a parsed network definition (no GPU needed).

    The network is strongly typed, so a layer's precision is the type of its (first
    floating) output: the precision the model declares for it.
    """
    layers = []
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        outs = [tr.precision_of(layer.get_output(j).dtype.name) for j in range(layer.num_outputs)]
        floating = [p for p in outs if p in tr.FLOATING]
        precision = floating[0] if floating else (outs[0] if outs else None)
        if getattr(layer, "precision_is_set", False):
            precision = tr.precision_of(layer.precision.name)
        layers.append({"name": layer.name, "type": layer.type.name, "precision": precision,
                       "output_types": outs})
    io = [{"name": t.name, "mode": mode, "shape": _dims(t.shape), "dtype": tr.precision_of(t.dtype.name)}
          for mode, count, get in (("INPUT", network.num_inputs, network.get_input),
                                   ("OUTPUT", network.num_outputs, network.get_output))
          for t in (get(k) for k in range(count))]
    return {"source": "network_definition", **tr.summarize_layers(layers), "io_tensors": io}


def unsupported_nodes(trt: ModuleType, model: bytes) -> list[dict[str, Any]]:
    """ONNX nodes outside every subgraph the parser supports (``supports_model_v2``)."""
    import onnx

    nodes = onnx.load_from_string(model).graph.node
    log = _collecting_logger(trt)
    builder = trt.Builder(log)
    network = builder.create_network(1 << int(getattr(trt.NetworkDefinitionCreationFlag, _STRONGLY_TYPED)))
    parser = trt.OnnxParser(network, log)
    parser.supports_model_v2(model)
    supported: set[int] = set()
    for i in range(parser.num_subgraphs):
        if parser.is_subgraph_supported(i):
            supported.update(int(n) for n in parser.get_subgraph_nodes(i))
    return [{"index": i, "name": n.name, "op": n.op_type, "domain": n.domain}
            for i, n in enumerate(nodes) if i not in supported][:200]


def _engine_io(engine: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        out.append({"name": name, "mode": engine.get_tensor_mode(name).name,
                    "shape": _dims(engine.get_tensor_shape(name)),
                    "dtype": tr.precision_of(engine.get_tensor_dtype(name).name)})
    return out


def inspector_report(trt: ModuleType, engine: Any) -> dict[str, Any]:
    """Layers and I/O of a deserialized engine, from the engine inspector."""
    info = json.loads(engine.create_engine_inspector().get_engine_information(
        trt.LayerInformationFormat.JSON))
    return {"source": "engine_inspector", **tr.summarize_layers(tr.inspector_layers(info)),
            "io_tensors": _engine_io(engine)}


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _view(t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The first ``prod(shape)`` elements of ``t`` as a tensor of ``shape`` (same storage)."""
    return t.reshape(-1)[: int(np.prod(shape, dtype=np.int64))].view(tuple(shape))


class _NotCapturable(RuntimeError):
    pass


class TensorRTRunner(TorchRunner):
    """A TensorRT engine built from the task's model exported to ONNX."""

    name = "tensorrt"
    OPTION_KEYS: tuple[str, ...] | None = tuple(OPTION_DEFAULTS)

    def __init__(self, device: str = "cpu", options: dict[str, Any] | None = None) -> None:
        opts = normalize_options(options)
        gpu = device.startswith("cuda") and torch.cuda.is_available()
        # the torch base creates a CUDA stream for a cuda device; on a machine without one the
        # runner is only used to gather build facts, so it is set up as a CPU runner
        super().__init__(device if gpu or not device.startswith("cuda") else "cpu", opts)
        self.device = device
        self.choice = resolve_flavour(opts["flavour"])
        self.flavour = self.choice.flavour
        self._gpu: dict[str, Any] | None = None
        if gpu:
            major, minor = torch.cuda.get_device_capability(device)
            self._gpu = {"name": torch.cuda.get_device_name(device), "capability": f"{major}.{minor}"}
        self._usable_gpu = gpu
        if gpu and self.flavour == "tensorrt_rtx":
            self._usable_gpu = self._gpu is not None and self._gpu["capability"] in rtx_capabilities(
                load_module(self.flavour))
        if self.flavour is not None:
            check_flavour_options(self.options, self.flavour)
            if self.flavour == "tensorrt_rtx" and self.options["compute_capabilities"] == ["current"]:
                self._rtx_targets(load_module(self.flavour))  # refuses 'current' without a supported GPU
        self._policy_allows_graphs = True
        self._trt: ModuleType | None = None
        self._log: Any = None
        self._runtime: Any = None
        self._engine: Any = None
        self._context: Any = None
        self._runtime_config: Any = None
        self._runtime_cache: Any = None
        self._runtime_cache_path: Path | None = None
        self._engine_key = ""
        self._buffers: dict[str, torch.Tensor] = {}
        self._outputs: list[torch.Tensor] = []
        self._graph: Any = None
        self._plan = GraphPlan("off", "not prepared")
        self._shapes: dict[str, Any] = {}
        self._dynamic: set[str] = set()
        self._bound: dict[str, tuple[int, ...]] = {}
        self._full_staging: list[torch.Tensor] = []
        self._input_order: tuple[str, ...] = ()
        self._model_dtype = "float32"
        self._network_layers: list[dict[str, Any]] = []
        self._engine_layers: list[dict[str, Any]] | None = None
        self._engine_source: str | None = None
        self._parser_entries: list[dict[str, Any]] = []
        self._graph_entries: list[dict[str, Any]] = []

    # -- options and availability ------------------------------------------------------------
    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Keys and values (also those that depend on the flavour), before anything runs."""
        opts = normalize_options(options)
        choice = resolve_flavour(opts["flavour"])
        if choice.flavour is not None:
            check_flavour_options(opts, choice.flavour)

    @classmethod
    def availability(cls, device: str) -> str | None:
        return cls.availability_for(device, {})

    @classmethod
    def availability_for(cls, device: str, options: dict[str, Any] | None) -> str | None:
        """None when ready; else not installed, no CUDA device, or an unsupported GPU."""
        choice = resolve_flavour(normalize_options(options)["flavour"])
        if choice.flavour is None:
            return choice.missing_reason()
        missing = missing_export_packages()
        if missing:
            return (f"{' and '.join(missing)} (to export the model to ONNX) not installed: "
                    f"pip install 'benchbox[{FLAVOURS[choice.flavour][1]}]'")
        if not device.startswith("cuda"):
            return NEEDS_CUDA
        reason = cuda_reason(device)
        if reason is not None:
            return reason
        if choice.flavour == "tensorrt_rtx":
            trt = load_module(choice.flavour)
            major, minor = torch.cuda.get_device_capability(device)
            supported = rtx_capabilities(trt)
            if f"{major}.{minor}" not in supported:
                return (f"TensorRT for RTX {trt.__version__} cannot run on "
                        f"{torch.cuda.get_device_name(device)} (compute capability {major}.{minor}); "
                        f"it supports {', '.join(supported)}")
        return None

    def apply_policy(self, policy: Any) -> None:
        """A contract with ``cuda_graphs = false`` turns every CUDA graph off (recorded)."""
        super().apply_policy(policy)
        self._policy_allows_graphs = bool(policy.cuda_graphs)
        if not policy.cuda_graphs:
            if self.options["cuda_graph"] is True:
                self.options["cuda_graph"] = False
                self.facts["policy_applied"]["changed"].append("cuda_graph=False")
            if self.options["cuda_graph_strategy"] == "whole_graph_capture":
                self.options["cuda_graph_strategy"] = "disabled"
                self.facts["policy_applied"]["changed"].append("cuda_graph_strategy=disabled")

    def graph_plan(self, dynamic: bool) -> GraphPlan:
        return graph_plan(str(self.flavour), self.options["cuda_graph"], self.options["cuda_graph_strategy"],
                          self._policy_allows_graphs, dynamic)

    # -- facts ---------------------------------------------------------------------------------
    def versions(self) -> dict[str, str]:
        v = super().versions()
        if self._trt is not None:
            v[FLAVOURS[str(self.flavour)][0]] = str(self._trt.__version__)
            if hasattr(self._trt, "get_nv_onnx_parser_version"):
                v["onnx_parser"] = str(self._trt.get_nv_onnx_parser_version())
        return v

    def _rtx_targets(self, trt: ModuleType) -> tuple[list[str], str]:
        usable = self._gpu["capability"] if self._usable_gpu and self._gpu else None
        return target_capabilities(self.options["compute_capabilities"], rtx_capabilities(trt), usable,
                                   self._gpu, str(trt.__version__))

    def _key_device(self, capabilities: list[str] | None) -> dict[str, Any]:
        """What of this run's GPU decides the engine: full TensorRT builds for the GPU it runs on;
        an RTX engine depends on the GPU only when built for ``current``."""
        if self.flavour == "tensorrt_rtx":
            return {"capability": self._gpu["capability"]} if capabilities == ["current"] and self._gpu \
                else {}
        return dict(self._gpu or {"name": None, "capability": None})

    def _cache_root(self) -> Path:
        return Path(self.options["cache_dir"]) if self.options["cache_dir"] else default_cache_root()

    def _set_engine_layers(self, layers: list[dict[str, Any]] | None, source: str | None) -> None:
        self._engine_layers, self._engine_source = layers, source

    def report(self) -> dict[str, Any]:
        """The base report; ``fallbacks`` composed from parser, build and capture findings."""
        self.fallbacks = [*self._parser_entries, *tr.fallback_entries(
            model_dtype=self._model_dtype, network_layers=self._network_layers,
            engine_layers=self._engine_layers, engine_source=self._engine_source), *self._graph_entries]
        return super().report()

    # -- build -----------------------------------------------------------------------------------
    def build(self, task: Any, example: tuple[np.ndarray, ...], phases: Phases,
              exported: OnnxExport | None = None, model: Any = None) -> bytes:
        """Export (or load the export), parse, build (or load the engine); fills ``facts``.

        ``model`` defaults to ``task.build_model()``; ``exported`` skips the export.
        Returns the serialized engine.
        """
        if self.flavour is None:
            raise TensorRTBuildError(self.choice.missing_reason())
        trt = self._begin_build(task, example)
        ccs, cc_why = self._rtx_targets(trt) if self.flavour == "tensorrt_rtx" else (None, None)
        root = self._cache_root()
        exported = self._export(task, example, phases, exported, model, root)
        log = self._log = _collecting_logger(trt)
        builder, network = self._parse(trt, log, exported, phases)
        net = network_report(network)
        self._network_layers = net["layers"]
        self.facts["network"] = {k: net[k] for k in ("num_layers", "layer_types", "precisions",
                                                     "plugin_layers", "io_tensors")}
        engine, listing = self._build_or_load(trt, builder, network, exported, ccs, cc_why, root, phases)
        layers = listing["layers"] if listing else None
        if layers:
            self._set_engine_layers(layers, "builder_log")
            report = {"source": "builder_log", **tr.summarize_layers(layers),
                      "io_tensors": listing["io_tensors"] or net["io_tensors"]}
        else:
            self._set_engine_layers(None, None)
            report = dict(net)
        self.facts["engine_report"] = {**report, "engine_bytes": len(engine),
                                       "engine_sha256": hashlib.sha256(engine).hexdigest()}
        self.facts["builder_log"] = log.messages
        return engine

    def _begin_build(self, task: Any, example: tuple[np.ndarray, ...]) -> ModuleType:
        """Load the flavour's module; record the flavour, the input shapes and the CUDA graph plan."""
        trt = self._trt = load_module(self.flavour)
        self._model_dtype = str(task.dtype)
        self.facts.update({"flavour": self.flavour, "flavour_requested": self.options["flavour"],
                           "flavour_version": str(trt.__version__),
                           "flavour_resolution": self.choice.to_dict()})
        shapes = self._shapes = checked_input_shapes(task, example)
        dynamic = any(s.dynamic_axes for s in shapes.values())
        self._plan = self.graph_plan(dynamic)
        self.facts["cuda_graphs"] = {**self._plan.to_dict(), "used": None, "warnings": []}
        return trt

    def _export(self, task: Any, example: tuple[np.ndarray, ...], phases: Phases,
                exported: OnnxExport | None, model: Any, root: Path) -> OnnxExport:
        """``exported``, or the model's export from the export cache or made now; facts recorded."""
        if exported is None:
            exported, export_cache = load_or_export(
                task, example, model=model if model is not None else task.build_model(),
                opset=self.options["opset"], cache_dir=root / "onnx" if self.options["cache"] else None,
                phases=phases, input_shapes=self._shapes)
            self.facts["export_cache"] = export_cache
        self.facts["onnx"] = exported.facts
        return exported

    def _parse(self, trt: ModuleType, log: Any, exported: OnnxExport, phases: Phases) -> tuple[Any, Any]:
        """(builder, network) parsed from the ONNX model; parser errors recorded, and raised as a
        TensorRTBuildError (with the nodes TensorRT does not support) when the parse failed."""
        with phases("parse"):
            builder = trt.Builder(log)
            flag = getattr(trt.NetworkDefinitionCreationFlag, _STRONGLY_TYPED)
            network = builder.create_network(1 << int(flag))
            parser = trt.OnnxParser(network, log)
            parsed = parser.parse(exported.model)
        errors = []
        for i in range(parser.num_errors):
            e = parser.get_error(i)
            errors.append({"node": int(e.node()), "node_name": str(e.node_name()),
                           "op": str(e.node_operator()), "code": str(e.code()).split(".")[-1],
                           "description": str(e.desc())})
        self.facts["parser"] = {"ok": bool(parsed), "num_errors": len(errors), "errors": errors,
                                "unsupported_nodes": []}
        self._parser_entries = [{"kind": "parser_error", **e, "phase": "parse"} for e in errors]
        if not parsed:
            try:
                nodes = unsupported_nodes(trt, exported.model)
            except Exception as e:  # the support query is a diagnosis; the parse error stands
                nodes = []
                self.facts["parser"]["unsupported_nodes_error"] = _error_line(e)
            self.facts["parser"]["unsupported_nodes"] = nodes
            self._parser_entries += tr.unsupported_entries(nodes)
            first = errors[0] if errors else {"op": "?", "node_name": "?", "description": "unknown"}
            raise TensorRTBuildError(f"the ONNX parser failed on {len(errors)} node(s); first: "
                                     f"{first['op']} node {first['node_name']!r}: {first['description']}")
        return builder, network

    def _build_or_load(self, trt: ModuleType, builder: Any, network: Any, exported: OnnxExport,
                       ccs: list[str] | None, cc_why: str | None, root: Path,
                       phases: Phases) -> tuple[bytes, dict[str, Any] | None]:
        """The engine from the engine cache or built now, and the builder's layer listing (None
        when it has none); ``facts["build"]`` recorded."""
        config = builder.create_builder_config()
        build_options, builder_facts = configure_builder(
            trt, builder, network, config, flavour=self.flavour, capabilities=ccs,
            tf32=self.options["tf32"], optimization_level=self.options["builder_optimization_level"],
            require_user_allocation=self.flavour == "tensorrt_rtx" and self._plan.mode == "stream_capture",
            input_shapes=self._shapes)
        device = self._key_device(ccs)
        code_version = build_code_version()
        key = self._engine_key = engine_cache_key(
            onnx_sha256=exported.sha256, flavour=self.flavour, version=str(trt.__version__),
            build_options=build_options, device=device, code_version=code_version)
        engines = root / "engines"
        path = engines / f"{key}.engine"
        engine, side, cache_note = self._cached_engine(path, phases)
        hit = side is not None
        if side is None:
            engine, side = self._build_engine(builder, network, config, path, phases)
        # the side file keeps the builder's own text; it is parsed here, by this code, on every load
        listing = tr.parse_layer_listing(side["layer_listing"]) if side["layer_listing"] else None
        log_facts = tr.build_log_facts(side["build_log_lines"])
        unused = list(log_facts.get("unused_tactic_sources", []))
        enabled = builder_facts["tactic_sources_enabled"]
        self.facts["build"] = {
            "options": build_options,
            "compute_capabilities_from": cc_why,
            "builder_defaults": builder_facts["builder_defaults"],
            "tactic_sources": {"enabled": enabled, "unused_disabled_by_builder": unused,
                               "used": [t for t in enabled if t not in unused]},
            "memory": log_facts.get("memory", {}),
            "messages": side.get("build_messages", []),
            "device": device, "code_version": code_version,
            "cache": {"enabled": bool(self.options["cache"]), "hit": hit, "key": key, "path": str(path),
                      **({"rebuilt": cache_note} if cache_note else {})}}
        return engine, listing

    def _cached_engine(self, path: Path, phases: Phases) -> tuple[bytes, dict[str, Any] | None, str | None]:
        """(engine, side facts, None) from the engine cache; (b"", None, why) when the entry is
        missing, disabled or unusable (then ``why`` says why an existing entry is rebuilt)."""
        side_path = path.with_suffix(".json")
        if not (self.options["cache"] and path.is_file() and side_path.is_file()):
            return b"", None, None
        with phases("engine_cache_load"):
            engine = path.read_bytes()
            try:
                side = json.loads(side_path.read_text())
            except (OSError, ValueError):
                side = None
        if not isinstance(side, dict) or side.get("engine_sha256") != hashlib.sha256(engine).hexdigest():
            return b"", None, "the cached engine and its side file do not match"
        if not (isinstance(side.get("layer_listing", 0), str | None)
                and isinstance(side.get("build_log_lines"), list)
                and side.get("log_filter") == tr.log_filter_version()):
            return b"", None, "the side file holds no builder text this code can parse (another format)"
        return engine, side, None

    def _build_engine(self, builder: Any, network: Any, config: Any, path: Path,
                      phases: Phases) -> tuple[bytes, dict[str, Any]]:
        """Build the engine; cache it with the builder's raw layer listing and log lines."""
        log = self._log
        with phases("build"):
            serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            errs = log.errors()
            raise TensorRTBuildError("the engine build failed: " + (errs[0] if errs else "no message"))
        engine = bytes(memoryview(serialized))
        side = {"engine_sha256": hashlib.sha256(engine).hexdigest(),
                "layer_listing": log.layer_listing, "build_log_lines": list(log.fact_lines),
                "log_filter": tr.log_filter_version(), "build_messages": log.messages[:50]}
        if self.options["cache"]:
            _write_atomic(path, engine)
            _write_atomic(path.with_suffix(".json"), json.dumps(side).encode())
        return engine, side

    def gather_facts(self, task: Any, example: tuple[np.ndarray, ...], phases: Phases) -> dict[str, Any]:
        """What can be learnt without running: export, parse, build, engine report; never timings."""
        if self.flavour is None:
            return {"flavour": None, "flavour_requested": self.options["flavour"],
                    "flavour_resolution": self.choice.to_dict()}
        try:
            engine = self.build(task, example, phases)
        except MissingExtraError as e:
            self.facts["build_error"] = str(e)
            return self.report()
        except UsageError:
            raise
        except Exception as e:  # export, parse or build: keep what was learnt before it
            self.facts["build_error"] = _error_line(e)
            return self.report()
        runtime = self._trt.Runtime(self._log)  # type: ignore[union-attr]
        if hasattr(runtime, "get_engine_validity"):
            validity, diagnostics = runtime.get_engine_validity(engine)
            flags = int(diagnostics)
            named = [n for n, m in self._trt.EngineInvalidityDiagnostics.__members__.items()
                     if flags & int(m)] if hasattr(self._trt, "EngineInvalidityDiagnostics") else []
            self.facts["engine_validity_here"] = {"validity": validity.name, "diagnostics": named,
                                                  "diagnostics_flags": flags}
        self.facts["execution"] = {"executed": False, "why": "no GPU this flavour runs on is usable here; "
                                                             "only build facts were gathered"}
        return self.report()

    # -- execution -------------------------------------------------------------------------------
    def prepare(self, task: Any, model: Any, example: tuple[np.ndarray, ...], phases: Phases) -> None:
        if not self._usable_gpu:
            raise RuntimeError(self.availability_for(self.device, self.options) or NEEDS_CUDA)
        with torch.cuda.device(self.device):
            engine_bytes = self.build(task, example, phases, model=model)
            trt = self._trt
            assert trt is not None
            with phases("engine_load"):
                runtime = trt.Runtime(self._log)
                engine = runtime.deserialize_cuda_engine(engine_bytes)
                if engine is None:
                    errs = self._log.errors()
                    raise RuntimeError("TensorRT could not deserialize the engine: "
                                       + (errs[0] if errs else "no message"))
                self._runtime, self._engine = runtime, engine
                self._context = self._create_context(trt, engine)
                self._bind(task, engine, example)
            self._inspect(trt, engine)
            with phases("jit_warmup"):
                # TensorRT for RTX compiles its kernels at the first inference (and captures its
                # own graph then); full TensorRT initializes lazily. Neither may hide in a timed call.
                for _ in range(self.options["jit_warmup_calls"]):
                    self.d2h(self.compute(self.h2d(example)))
            self.facts["jit_warmup"] = {"calls": self.options["jit_warmup_calls"],
                                        "why": "TensorRT for RTX compiles kernels at the first inference"
                                        if self.flavour == "tensorrt_rtx"
                                        else "first inferences initialize lazily"}
            if self._runtime_cache is not None:
                with phases("runtime_cache_save"):
                    self._save_runtime_cache()
            if self.options["layer_profile"]:
                with phases("layer_profile"):
                    self._layer_profile(example)
            if self._plan.mode == "stream_capture":
                with phases("graph_capture"):
                    self._capture(example)
            elif self._plan.mode == "rtx_whole_graph_capture" and not self._capturable():
                self._graph_fallback("TensorRT for RTX reports the execution context is not stream "
                                     "capturable, so its whole-graph capture cannot apply", "jit_warmup",
                                     "TensorRT for RTX cuda_graph_strategy=whole_graph_capture")
            else:
                self.facts["cuda_graphs"]["used"] = self._plan.mode
            self.facts["execution"] = {"executed": True}

    def _create_context(self, trt: ModuleType, engine: Any) -> Any:
        """The execution context; for RTX with its runtime config (graph strategy, runtime cache)."""
        runtime_facts: dict[str, Any] = {}
        if self.flavour == "tensorrt_rtx" and hasattr(engine, "create_runtime_config"):
            rc = self._runtime_config = engine.create_runtime_config()
            rc.cuda_graph_strategy = (trt.CudaGraphStrategy.WHOLE_GRAPH_CAPTURE
                                      if self._plan.mode == "rtx_whole_graph_capture"
                                      else trt.CudaGraphStrategy.DISABLED)
            runtime_facts["cuda_graph_strategy"] = rc.cuda_graph_strategy.name
            strategy = getattr(rc, "dynamic_shapes_kernel_specialization_strategy", None)
            runtime_facts["dynamic_shapes_kernel_specialization_strategy"] = getattr(strategy, "name", None)
            runtime_facts["runtime_cache"] = self._load_runtime_cache(rc)
            context = engine.create_execution_context(rc)
        else:
            context = engine.create_execution_context()
            runtime_facts["runtime_cache"] = {"enabled": False, "why": f"flavour {self.flavour} has none"}
        if context is None:
            raise RuntimeError("TensorRT could not create an execution context")
        self.facts["runtime"] = runtime_facts
        return context

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
        cache = self._runtime_cache = rc.create_runtime_cache()
        facts: dict[str, Any] = {"enabled": True, "path": str(path), "found": path.is_file(),
                                 "loaded": False, "loaded_bytes": 0}
        if path.is_file():
            blob = path.read_bytes()
            facts["loaded"] = bool(cache.deserialize(blob))
            facts["loaded_bytes"] = len(blob) if facts["loaded"] else 0
            if not facts["loaded"]:
                facts["why_not_loaded"] = "TensorRT for RTX rejected it (another version, GPU or driver)"
        if not rc.set_runtime_cache(cache):
            raise RuntimeError("TensorRT for RTX refused the runtime cache")
        return facts

    def _save_runtime_cache(self) -> None:
        assert self._runtime_cache is not None and self._runtime_cache_path is not None
        blob = bytes(memoryview(self._runtime_cache.serialize()))
        _write_atomic(self._runtime_cache_path, blob)
        self.facts["runtime"]["runtime_cache"]["saved_bytes"] = len(blob)

    def _inspect(self, trt: ModuleType, engine: Any) -> None:
        """The engine inspector's report replaces the build-time one (kept, with the reason, if it fails)."""
        built = self.facts["engine_report"]
        try:
            rep = inspector_report(trt, engine)
        except Exception as e:
            built["inspector_error"] = _error_line(e)
            return
        self.facts["engine_report"] = {**rep, "engine_bytes": built["engine_bytes"],
                                       "engine_sha256": built["engine_sha256"]}
        self._set_engine_layers(rep["layers"], "engine_inspector")
        facts: dict[str, Any] = {}
        for attr in ("device_memory_size_v2", "num_optimization_profiles", "num_layers"):
            if hasattr(engine, attr):
                facts[attr] = int(getattr(engine, attr))
        if hasattr(engine, "tactic_sources"):
            facts["tactic_sources"] = tactic_source_names(trt, engine.tactic_sources)
        if hasattr(trt, "EngineStat") and hasattr(engine, "get_engine_stat"):
            facts["total_weights_bytes"] = int(engine.get_engine_stat(trt.EngineStat.TOTAL_WEIGHTS_SIZE))
        self.facts["engine"] = facts

    def _bind(self, task: Any, engine: Any, example: tuple[np.ndarray, ...]) -> None:
        """Static device buffers (torch CUDA tensors) bound to every I/O tensor of the engine.

        Inputs with dynamic dimensions get buffers of their declared maximum shape; each
        call then binds views of its own shape (``_apply_shapes``).
        """
        trt = self._trt
        assert trt is not None
        ctx = self._context
        self.output_names = tuple(task.output_names)
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        if sorted(inputs) != sorted(task.input_names):
            raise RuntimeError(f"engine inputs {inputs} differ from the task's {list(task.input_names)}")
        self._input_order = tuple(task.input_names)
        self._dynamic = {n for n in inputs if -1 in _dims(engine.get_tensor_shape(n))}
        for n in self._dynamic:
            ctx.set_input_shape(n, tuple(self._shapes[n].max))
        buffers: dict[str, torch.Tensor] = {}
        for n in names:
            dtype = _TORCH_DTYPES.get(engine.get_tensor_dtype(n).name)
            if dtype is None:
                raise RuntimeError(f"tensor {n}: TensorRT dtype {engine.get_tensor_dtype(n).name} "
                                   "has no torch buffer type")
            buffers[n] = torch.empty(tuple(_dims(ctx.get_tensor_shape(n))), dtype=dtype, device=self.device)
            ctx.set_tensor_address(n, buffers[n].data_ptr())
        self._buffers = buffers
        self._full_staging = [torch.empty(tuple(buffers[n].shape), dtype=buffers[n].dtype).pin_memory()
                              for n in task.input_names]
        self._bound = {}
        self._apply_shapes(example, force=True)
        torch.cuda.synchronize(self.device)

    def _apply_shapes(self, host: tuple[np.ndarray, ...], force: bool = False) -> None:
        """Bind this call's shapes of the dynamic inputs; the buffers stay where they are."""
        changed = force
        for n, a in zip(self._input_order, host):
            if n in self._dynamic and self._bound.get(n) != tuple(a.shape):
                if not self._context.set_input_shape(n, tuple(a.shape)):
                    raise RuntimeError(f"TensorRT refused shape {list(a.shape)} for input {n}")
                self._bound[n] = tuple(a.shape)
                changed = True
        if not changed:
            return
        def bound(n: str) -> torch.Tensor:
            return _view(self._buffers[n], tuple(_dims(self._context.get_tensor_shape(n))))

        self._inputs = [bound(n) for n in self._input_order]
        self._staging = [_view(s, tuple(d.shape)) for s, d in zip(self._full_staging, self._inputs)]
        self._outputs = [bound(n) for n in self.output_names]

    def h2d(self, host: tuple[np.ndarray, ...]) -> Any:
        if self._dynamic:
            self._apply_shapes(host)
        return super().h2d(host)

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
                if self._runtime_cache is not None:
                    rc.set_runtime_cache(self._runtime_cache)
                ctx = self._engine.create_execution_context(rc)
            else:
                ctx = self._engine.create_execution_context()
            for n, buf in self._buffers.items():
                ctx.set_tensor_address(n, buf.data_ptr())
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
            self.facts["layer_profile"] = {"error": _error_line(e)}

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
        self.facts["cuda_graphs"]["used"] = "off"
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
            with torch.cuda.graph(graph, stream=self._stream):
                if not ctx.execute_async_v3(self._stream.cuda_stream):
                    raise RuntimeError("execute_async_v3 failed during CUDA graph capture")
            self._graph = graph
            self.d2h(self.compute(self.h2d(example)))  # one replay
            self.facts["cuda_graphs"]["used"] = "stream_capture"
        except Exception as e:
            self._graph_fallback(f"the capture failed: {_error_line(e)}", "graph_capture",
                                 "torch.cuda.graph stream capture of execute_async_v3")
            torch.cuda.synchronize(self.device)
            self.d2h(self.compute(self.h2d(example)))  # the context still runs without a graph

    def compute(self, inputs: Any) -> Any:
        if self._graph is not None:
            with torch.cuda.stream(self._stream):
                self._graph.replay()
            return self._outputs
        if not self._context.execute_async_v3(self._stream.cuda_stream):
            raise RuntimeError("execute_async_v3 failed")
        return self._outputs
