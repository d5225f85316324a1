"""Native TensorRT: one runner, two flavours (TensorRT 10/11 and TensorRT for RTX).

Preparation (ONNX export, parse, engine build or cache load, deserialization)
happens outside every contract and is timed by the harness's phase timer.
The device stages are those of the PyTorch runners: ``h2d`` copies the host
arrays through pinned staging into static device buffers on the runner's
stream, ``compute`` enqueues ``execute_async_v3`` on that stream (or replays a
CUDA graph of it), ``d2h`` copies the outputs back and synchronizes. So every
contract means the same thing for this runner as for the others.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from benchbox.errors import MissingExtraError, UsageError
from benchbox.runners.base import Phases
from benchbox.runners.onnx_export import OnnxExport, export_onnx, missing_export_packages
from benchbox.runners.torch_runner import TorchRunner, cuda_reason

#: flavour → (Python module, benchbox extra)
FLAVOURS: dict[str, tuple[str, str]] = {
    "tensorrt": ("tensorrt", "tensorrt"),
    "tensorrt_rtx": ("tensorrt_rtx_bindings", "tensorrt-rtx"),
}
NOT_INSTALLED = ("neither tensorrt nor tensorrt_rtx_bindings is installed: "
                 "pip install 'benchbox[tensorrt]' or 'benchbox[tensorrt-rtx]'")
NEEDS_CUDA = "TensorRT needs a CUDA device (--device cuda)"
#: compute capability an RTX engine is built for when no option names one and no GPU is usable
DEFAULT_OFFLINE_CAPABILITY = "8.9"

OPTION_DEFAULTS: dict[str, Any] = {
    "flavour": "auto",
    "compute_capabilities": None,   # RTX: "current", "8.9", "8.6,12.0"; default current / 8.9 offline
    "cuda_graph": False,            # capture execute_async_v3 in a torch.cuda.CUDAGraph
    "cuda_graph_strategy": "disabled",  # RTX runtime: disabled | whole_graph_capture
    "builder_optimization_level": None,
    "opset": None,
    "cache": True,
    "cache_dir": None,              # default $BENCHBOX_CACHE/engines or ~/.cache/benchbox/engines
}

_TORCH_DTYPES = {"FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16,
                 "INT8": torch.int8, "INT32": torch.int32, "INT64": torch.int64,
                 "BOOL": torch.bool, "UINT8": torch.uint8}
_PRECISION = re.compile(r"\b(FP32|FP16|BF16|FP8|FP4|INT8|INT4|INT32|INT64|Bool|UInt8)\b", re.I)


class TensorRTBuildError(RuntimeError):
    """The ONNX parse or the engine build failed; ``facts`` keeps what was learnt."""


def installed(flavour: str) -> bool:
    """Whether the flavour's Python module can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec(FLAVOURS[flavour][0]) is not None
    except (ImportError, ValueError):
        return False


def resolve_flavour(requested: str | None) -> str | None:
    """The flavour to use: the requested one, or under ``auto`` full TensorRT first; None if none."""
    requested = requested or "auto"
    if requested == "auto":
        return next((f for f in FLAVOURS if installed(f)), None)
    if requested not in FLAVOURS:
        raise UsageError(f"unknown TensorRT flavour '{requested}' (auto, {', '.join(FLAVOURS)})")
    return requested if installed(requested) else None


def missing_reason(requested: str | None) -> str:
    requested = requested or "auto"
    if requested == "auto":
        return NOT_INSTALLED
    module, extra = FLAVOURS[requested]
    return f"flavour {requested} needs {module}, which is not installed: pip install 'benchbox[{extra}]'"


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


def _as_bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    low = str(value).lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise UsageError(f"tensorrt option {key}: expected true or false, got {value!r}")


def normalize_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """Defaults filled in and values checked; a bad option is a one-line UsageError."""
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(OPTION_DEFAULTS))
    if unknown:
        raise UsageError(f"unknown tensorrt option '{unknown[0]}' (options: {', '.join(OPTION_DEFAULTS)})")
    out = {**OPTION_DEFAULTS, **opts}
    if out["flavour"] not in ("auto", *FLAVOURS):
        raise UsageError(f"unknown TensorRT flavour '{out['flavour']}' (auto, {', '.join(FLAVOURS)})")
    out["cuda_graph"] = _as_bool(out["cuda_graph"], "cuda_graph")
    out["cache"] = _as_bool(out["cache"], "cache")
    strategy = str(out["cuda_graph_strategy"]).lower()
    if strategy not in ("disabled", "whole_graph_capture"):
        raise UsageError(f"tensorrt option cuda_graph_strategy: expected disabled or whole_graph_capture, "
                         f"got {out['cuda_graph_strategy']!r}")
    out["cuda_graph_strategy"] = strategy
    if out["cuda_graph"] and strategy != "disabled":
        raise UsageError("tensorrt options cuda_graph and cuda_graph_strategy cannot both capture graphs")
    cc = out["compute_capabilities"]
    if cc is not None:
        items = cc if isinstance(cc, list | tuple) else str(cc).split(",")
        out["compute_capabilities"] = [str(c).strip().lower() for c in items if str(c).strip()]
    for key in ("builder_optimization_level", "opset"):
        if out[key] is not None:
            try:
                out[key] = int(out[key])
            except (TypeError, ValueError):
                raise UsageError(f"tensorrt option {key}: expected an integer, got {out[key]!r}") from None
    return out


def default_cache_dir() -> Path:
    root = os.environ.get("BENCHBOX_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "benchbox") / "engines"


def cache_key(onnx_sha256: str, flavour: str, version: str, build_options: dict[str, Any],
              device: dict[str, Any]) -> str:
    """sha256 of everything that decides the engine's bytes."""
    doc = {"onnx_sha256": onnx_sha256, "flavour": flavour, "version": version,
           "build_options": build_options, "device": device}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _collecting_logger(trt: ModuleType) -> Any:
    """A TensorRT logger that keeps warnings and errors for the report."""

    class Collector(trt.ILogger):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.messages: list[dict[str, str]] = []

        def log(self, severity: Any, msg: str) -> None:
            if severity <= trt.ILogger.Severity.WARNING and len(self.messages) < 200:
                self.messages.append({"severity": severity.name, "message": str(msg)[:500]})

        def errors(self) -> list[str]:
            return [m["message"] for m in self.messages if m["severity"] != "WARNING"]

    return Collector()


def _dims(shape: Any) -> list[int]:
    return [int(d) for d in shape]


def _precision_of(fmt: str) -> str | None:
    m = _PRECISION.search(fmt or "")
    return m.group(1).upper() if m else None


def _summarize_layers(layers: list[dict[str, Any]]) -> dict[str, Any]:
    types: dict[str, int] = {}
    precisions: dict[str, int] = {}
    for layer in layers:
        types[layer["type"]] = types.get(layer["type"], 0) + 1
        p = str(layer.get("precision"))
        precisions[p] = precisions.get(p, 0) + 1
    plugins = [layer["name"] for layer in layers if "PLUGIN" in str(layer["type"]).upper()]
    return {"num_layers": len(layers), "layer_types": dict(sorted(types.items())),
            "precisions": dict(sorted(precisions.items())), "plugin_layers": plugins, "layers": layers}


def network_report(network: Any) -> dict[str, Any]:
    """Layers and I/O of a parsed network definition (no GPU needed).

    The network is strongly typed, so a layer's precision is the type of its output.
    """
    layers = []
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        outs = [layer.get_output(j).dtype.name for j in range(layer.num_outputs)]
        precision = outs[0] if outs else None
        if getattr(layer, "precision_is_set", False):
            precision = layer.precision.name
        layers.append({"name": layer.name, "type": layer.type.name, "precision": precision,
                       "output_types": outs})
    io = [{"name": t.name, "mode": mode, "shape": _dims(t.shape), "dtype": t.dtype.name}
          for mode, count, get in (("INPUT", network.num_inputs, network.get_input),
                                   ("OUTPUT", network.num_outputs, network.get_output))
          for t in (get(k) for k in range(count))]
    return {"source": "network_definition", **_summarize_layers(layers), "io_tensors": io}


def inspector_report(trt: ModuleType, engine: Any) -> dict[str, Any]:
    """Layers and I/O of a deserialized engine, from the engine inspector."""
    info = json.loads(engine.create_engine_inspector().get_engine_information(
        trt.LayerInformationFormat.JSON))
    layers = []
    for entry in info.get("Layers", []):
        if isinstance(entry, str):  # profiling verbosity below DETAILED gives names only
            layers.append({"name": entry, "type": None, "precision": None, "output_types": []})
            continue
        outs = [o.get("Format/Datatype", "") for o in entry.get("Outputs", [])]
        layers.append({"name": entry.get("Name"), "type": entry.get("LayerType"),
                       "precision": _precision_of(outs[0]) if outs else None, "output_types": outs,
                       "tactic": entry.get("TacticName", entry.get("TacticValue"))})
    io = []
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        io.append({"name": name, "mode": engine.get_tensor_mode(name).name,
                   "shape": _dims(engine.get_tensor_shape(name)),
                   "dtype": engine.get_tensor_dtype(name).name})
    return {"source": "engine_inspector", **_summarize_layers(layers), "io_tensors": io}


class TensorRTRunner(TorchRunner):
    """A TensorRT engine built from the task's model exported to ONNX."""

    name = "tensorrt"
    OPTION_KEYS: tuple[str, ...] | None = tuple(OPTION_DEFAULTS)

    def __init__(self, device: str = "cpu", options: dict[str, Any] | None = None) -> None:
        opts = normalize_options(options)
        usable = device.startswith("cuda") and torch.cuda.is_available()
        # the torch base creates a CUDA stream for a cuda device; on a machine without one the
        # runner is only used to gather build facts, so it is set up as a CPU runner
        super().__init__(device if usable or not device.startswith("cuda") else "cpu", opts)
        self.device = device
        self._usable_gpu = usable
        self.flavour = resolve_flavour(opts["flavour"])
        self._trt: ModuleType | None = None
        self._engine: Any = None
        self._context: Any = None
        self._outputs: list[torch.Tensor] = []
        self._graph: Any = None
        self._log: Any = None
        self._runtime: Any = None

    # -- availability ------------------------------------------------------------
    @classmethod
    def availability(cls, device: str) -> str | None:
        return cls.availability_for(device, {})

    @classmethod
    def availability_for(cls, device: str, options: dict[str, Any] | None) -> str | None:
        """None when ready; else not installed, no CUDA device, or an unsupported GPU."""
        requested = normalize_options(options)["flavour"]
        flavour = resolve_flavour(requested)
        if flavour is None:
            return missing_reason(requested)
        missing = missing_export_packages()
        if missing:
            return (f"{' and '.join(missing)} (to export the model to ONNX) not installed: "
                    f"pip install 'benchbox[{FLAVOURS[flavour][1]}]'")
        if not device.startswith("cuda"):
            return NEEDS_CUDA
        reason = cuda_reason(device)
        if reason is not None:
            return reason
        if flavour == "tensorrt_rtx":
            trt = load_module(flavour)
            major, minor = torch.cuda.get_device_capability(device)
            supported = rtx_capabilities(trt)
            if f"{major}.{minor}" not in supported:
                return (f"TensorRT for RTX {trt.__version__} cannot run on "
                        f"{torch.cuda.get_device_name(device)} (compute capability {major}.{minor}); "
                        f"it supports {', '.join(supported)}")
        return None

    # -- facts ----------------------------------------------------------------------
    def versions(self) -> dict[str, str]:
        v = super().versions()
        if self._trt is not None:
            v[FLAVOURS[str(self.flavour)][0]] = str(self._trt.__version__)
            if hasattr(self._trt, "get_nv_onnx_parser_version"):
                v["onnx_parser"] = str(self._trt.get_nv_onnx_parser_version())
        return v

    def _device_facts(self) -> dict[str, Any]:
        if not self._usable_gpu:
            return {"name": None, "capability": None}
        major, minor = torch.cuda.get_device_capability(self.device)
        return {"name": torch.cuda.get_device_name(self.device), "capability": f"{major}.{minor}"}

    def _target_capabilities(self, trt: ModuleType) -> tuple[list[str], str]:
        supported = rtx_capabilities(trt)
        named = self.options["compute_capabilities"]
        if named is None:
            if self._usable_gpu:
                return ["current"], "default: the GPU of this run"
            return [DEFAULT_OFFLINE_CAPABILITY], "default when no CUDA device is usable"
        if "current" in named:
            if len(named) > 1:
                raise UsageError("tensorrt option compute_capabilities: 'current' cannot be combined")
            if not self._usable_gpu:
                raise UsageError("tensorrt option compute_capabilities=current needs a usable CUDA device; "
                                 f"name one ({', '.join(supported)})")
            return ["current"], "option"
        for c in named:
            if c not in supported:
                raise UsageError(f"tensorrt option compute_capabilities: {c} is not one TensorRT for RTX "
                                 f"{trt.__version__} builds for ({', '.join(supported)})")
        return list(named), "option"

    # -- build ----------------------------------------------------------------------
    def build(self, task: Any, example: tuple[np.ndarray, ...], phases: Phases,
              exported: OnnxExport | None = None, model: Any = None) -> bytes:
        """Export, parse, build (or load from the cache); fills ``facts``; returns the engine bytes.

        ``model`` defaults to ``task.build_model()``; ``exported`` skips the export.
        """
        if self.flavour is None:
            raise TensorRTBuildError(missing_reason(self.options["flavour"]))
        trt = self._trt = load_module(self.flavour)
        self.facts.update({"flavour": self.flavour, "flavour_requested": self.options["flavour"],
                           "flavour_version": str(trt.__version__)})
        if exported is None:
            with phases("export"):
                exported = export_onnx(task, example, model=model, opset=self.options["opset"])
        self.facts["onnx"] = exported.facts

        log = _collecting_logger(trt)
        self._log = log
        with phases("parse"):
            builder = trt.Builder(log)
            network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
            parser = trt.OnnxParser(network, log)
            parsed = parser.parse(exported.model)
        errors = []
        for i in range(parser.num_errors):
            e = parser.get_error(i)
            errors.append({"node": int(e.node()), "node_name": str(e.node_name()),
                           "op": str(e.node_operator()), "code": str(e.code()).split(".")[-1],
                           "description": str(e.desc())})
        self.facts["parser"] = {"ok": bool(parsed), "num_errors": len(errors), "errors": errors}
        self.fallbacks.extend({"kind": "parser_error", **e} for e in errors)
        if not parsed:
            first = errors[0] if errors else {"op": "?", "node_name": "?", "description": "unknown"}
            raise TensorRTBuildError(f"the ONNX parser failed on {len(errors)} node(s); first: "
                                     f"{first['op']} node {first['node_name']!r}: {first['description']}")
        net = network_report(network)
        self.facts["network"] = {"num_layers": net["num_layers"], "layer_types": net["layer_types"]}

        config = builder.create_builder_config()
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
        build_options: dict[str, Any] = {"strongly_typed": True, "profiling_verbosity": "DETAILED"}
        if self.flavour == "tensorrt_rtx":
            ccs, why = self._target_capabilities(trt)
            members = rtx_capabilities(trt)
            config.num_compute_capabilities = len(ccs)
            for i, c in enumerate(ccs):
                member = trt.ComputeCapability.CURRENT if c == "current" else members[c]
                if not config.set_compute_capability(member, i):
                    raise TensorRTBuildError(f"TensorRT for RTX refused compute capability {c}")
            build_options["compute_capabilities"] = ccs
            build_options["compute_capabilities_from"] = why
        if self.options["builder_optimization_level"] is not None:
            config.builder_optimization_level = self.options["builder_optimization_level"]
            build_options["builder_optimization_level"] = self.options["builder_optimization_level"]
        build_options["cuda_graph_strategy"] = (self.options["cuda_graph_strategy"]
                                                if hasattr(trt, "CudaGraphStrategy") else "not available")
        build_options["cuda_graph_capture"] = self.options["cuda_graph"]

        device = self._device_facts()
        key = cache_key(exported.sha256, self.flavour, str(trt.__version__),
                        {k: v for k, v in build_options.items() if k != "cuda_graph_capture"}, device)
        cache_dir = Path(self.options["cache_dir"]) if self.options["cache_dir"] else default_cache_dir()
        path = cache_dir / f"{key}.engine"
        hit = bool(self.options["cache"]) and path.is_file()
        self.facts["build"] = {"options": build_options, "device": device,
                               "cache": {"enabled": bool(self.options["cache"]), "hit": hit, "key": key,
                                         "path": str(path)}}
        if hit:
            with phases("engine_cache_load"):
                engine = path.read_bytes()
        else:
            with phases("build"):
                serialized = builder.build_serialized_network(network, config)
            if serialized is None:
                errs = log.errors()
                raise TensorRTBuildError("the engine build failed: " + (errs[0] if errs else "no message"))
            engine = bytes(memoryview(serialized))
            if self.options["cache"]:
                cache_dir.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".tmp{os.getpid()}")
                tmp.write_bytes(engine)
                os.replace(tmp, path)
        self.facts["engine_report"] = {**net, "engine_bytes": len(engine),
                                       "engine_sha256": hashlib.sha256(engine).hexdigest(),
                                       "unsupported_nodes": [e["node_name"] for e in errors]}
        self.fallbacks.extend({"kind": "plugin_layer", "name": n} for n in net["plugin_layers"])
        self.facts["builder_log"] = log.messages
        return engine

    def gather_facts(self, task: Any, example: tuple[np.ndarray, ...], phases: Phases) -> dict[str, Any]:
        """What can be learnt without running: export, parse, build, engine report; never timings."""
        if self.flavour is None:
            return {"flavour": None, "flavour_requested": self.options["flavour"]}
        try:
            engine = self.build(task, example, phases)
        except MissingExtraError as e:
            self.facts["build_error"] = str(e)
            return self.report()
        except UsageError:
            raise
        except Exception as e:  # export, parse or build: keep what was learnt before it
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            self.facts["build_error"] = f"{type(e).__name__}: {first}"[:500]
            return self.report()
        runtime = self._trt.Runtime(self._log)  # type: ignore[union-attr]
        if hasattr(runtime, "get_engine_validity"):
            validity, diagnostics = runtime.get_engine_validity(engine)
            flags = int(diagnostics)
            named = [n for n, m in self._trt.EngineInvalidityDiagnostics.__members__.items()
                     if flags & int(m)] if hasattr(self._trt, "EngineInvalidityDiagnostics") else []
            self.facts["engine_validity_here"] = {"validity": validity.name, "diagnostics": named,
                                                  "diagnostics_flags": flags}
        return self.report()

    # -- execution -------------------------------------------------------------------
    def apply_policy(self, policy: Any) -> None:
        """A contract with ``cuda_graphs = false`` turns CUDA graph capture off."""
        super().apply_policy(policy)
        if not policy.cuda_graphs:
            if self.options["cuda_graph"]:
                self.options["cuda_graph"] = False
                self.facts["policy_applied"]["changed"].append("cuda_graph=False")
            if self.options["cuda_graph_strategy"] != "disabled":
                self.options["cuda_graph_strategy"] = "disabled"
                self.facts["policy_applied"]["changed"].append("cuda_graph_strategy=disabled")

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
            built = self.facts["engine_report"]
            try:
                self.facts["engine_report"] = {
                    **inspector_report(trt, engine), "engine_bytes": built["engine_bytes"],
                    "engine_sha256": built["engine_sha256"], "unsupported_nodes": built["unsupported_nodes"]}
            except Exception as e:  # keep the network-definition report, and say why
                built["inspector_error"] = f"{type(e).__name__}: {e}"[:500]
            self.output_names = tuple(task.output_names)
            self.facts["execution"] = {"cuda_graph": self.options["cuda_graph"],
                                       "cuda_graph_strategy": self.options["cuda_graph_strategy"]}
            if self.options["cuda_graph"]:
                with phases("graph_capture"):
                    self.d2h(self.compute(self.h2d(example)))  # one call before capture
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph, stream=self._stream):
                        if not self._context.execute_async_v3(self._stream.cuda_stream):
                            raise RuntimeError("execute_async_v3 failed during CUDA graph capture")
                    self._graph = graph

    def _create_context(self, trt: ModuleType, engine: Any) -> Any:
        if self.options["cuda_graph_strategy"] != "disabled":
            if not hasattr(engine, "create_runtime_config") or not hasattr(trt, "CudaGraphStrategy"):
                raise UsageError(f"tensorrt option cuda_graph_strategy needs TensorRT for RTX; "
                                 f"flavour {self.flavour} has no runtime CUDA graph strategy")
            rc = engine.create_runtime_config()
            rc.cuda_graph_strategy = trt.CudaGraphStrategy.WHOLE_GRAPH_CAPTURE
            context = engine.create_execution_context(rc)
        else:
            context = engine.create_execution_context()
        if context is None:
            raise RuntimeError("TensorRT could not create an execution context")
        return context

    def _bind(self, task: Any, engine: Any, example: tuple[np.ndarray, ...]) -> None:
        """Static device buffers (torch CUDA tensors) bound to every I/O tensor of the engine."""
        trt = self._trt
        assert trt is not None
        host = dict(zip(task.input_names, example))
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        if sorted(inputs) != sorted(task.input_names):
            raise RuntimeError(f"engine inputs {inputs} differ from the task's {list(task.input_names)}")
        for n in inputs:
            if -1 in _dims(engine.get_tensor_shape(n)):
                self._context.set_input_shape(n, tuple(host[n].shape))
        buffers: dict[str, torch.Tensor] = {}
        for n in names:
            dtype = _TORCH_DTYPES.get(engine.get_tensor_dtype(n).name)
            if dtype is None:
                raise RuntimeError(f"tensor {n}: TensorRT dtype {engine.get_tensor_dtype(n).name} "
                                   "has no torch buffer type")
            buffers[n] = torch.empty(tuple(_dims(self._context.get_tensor_shape(n))), dtype=dtype,
                                     device=self.device)
            self._context.set_tensor_address(n, buffers[n].data_ptr())
        self._buffers = buffers
        self._inputs = [buffers[n] for n in task.input_names]
        self._staging = [torch.empty(tuple(buffers[n].shape), dtype=buffers[n].dtype).pin_memory()
                         for n in task.input_names]
        self._outputs = [buffers[n] for n in task.output_names]
        torch.cuda.synchronize(self.device)

    def compute(self, inputs: Any) -> Any:
        if self._graph is not None:
            with torch.cuda.stream(self._stream):
                self._graph.replay()
            return self._outputs
        if not self._context.execute_async_v3(self._stream.cuda_stream):
            raise RuntimeError("execute_async_v3 failed")
        return self._outputs
