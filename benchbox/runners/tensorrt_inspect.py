"""What TensorRT says about a network and an engine: its loggers, the parsed network's layers,
the ONNX nodes it cannot parse, and the engine inspector's report.

The parsing of TensorRT's text and JSON lives in ``tensorrt_report`` (pure Python, tested on
recorded text); this module asks the bindings.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

from benchbox.runners import tensorrt_report as tr

STRONGLY_TYPED = "STRONGLY_TYPED"


def tactic_source_names(trt: ModuleType, mask: int) -> list[str]:
    return [n for n, m in trt.TacticSource.__members__.items() if int(mask) & (1 << int(m))]


def collecting_logger(trt: ModuleType) -> Any:
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


def dims(shape: Any) -> list[int]:
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
    io = [{"name": t.name, "mode": mode, "shape": dims(t.shape), "dtype": tr.precision_of(t.dtype.name)}
          for mode, count, get in (("INPUT", network.num_inputs, network.get_input),
                                   ("OUTPUT", network.num_outputs, network.get_output))
          for t in (get(k) for k in range(count))]
    return {"source": "network_definition", **tr.summarize_layers(layers), "io_tensors": io}


def unsupported_nodes(trt: ModuleType, model: bytes) -> list[dict[str, Any]]:
    """ONNX nodes outside every subgraph the parser supports (``supports_model_v2``)."""
    import onnx

    nodes = onnx.load_from_string(model).graph.node
    log = collecting_logger(trt)
    builder = trt.Builder(log)
    network = builder.create_network(1 << int(getattr(trt.NetworkDefinitionCreationFlag, STRONGLY_TYPED)))
    parser = trt.OnnxParser(network, log)
    parser.supports_model_v2(model)
    supported: set[int] = set()
    for i in range(parser.num_subgraphs):
        if parser.is_subgraph_supported(i):
            supported.update(int(n) for n in parser.get_subgraph_nodes(i))
    return [{"index": i, "name": n.name, "op": n.op_type, "domain": n.domain}
            for i, n in enumerate(nodes) if i not in supported][:200]


def engine_io(engine: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        out.append({"name": name, "mode": engine.get_tensor_mode(name).name,
                    "shape": dims(engine.get_tensor_shape(name)),
                    "dtype": tr.precision_of(engine.get_tensor_dtype(name).name)})
    return out


def inspector_report(trt: ModuleType, engine: Any) -> dict[str, Any]:
    """Layers and I/O of a deserialized engine, from the engine inspector."""
    info = json.loads(engine.create_engine_inspector().get_engine_information(
        trt.LayerInformationFormat.JSON))
    return {"source": "engine_inspector", **tr.summarize_layers(tr.inspector_layers(info)),
            "io_tensors": engine_io(engine)}


def engine_facts(trt: ModuleType, engine: Any) -> dict[str, Any]:
    """Device memory, profiles, layers, tactic sources and weights size of a deserialized engine."""
    facts: dict[str, Any] = {}
    for attr in ("device_memory_size_v2", "num_optimization_profiles", "num_layers"):
        if hasattr(engine, attr):
            facts[attr] = int(getattr(engine, attr))
    if hasattr(engine, "tactic_sources"):
        facts["tactic_sources"] = tactic_source_names(trt, engine.tactic_sources)
    if hasattr(trt, "EngineStat") and hasattr(engine, "get_engine_stat"):
        facts["total_weights_bytes"] = int(engine.get_engine_stat(trt.EngineStat.TOTAL_WEIGHTS_SIZE))
    return facts


def cuda_driver() -> str | None:
    """The CUDA driver library this machine loads, or None when it has none."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return name
    return None


def engine_validity(trt: ModuleType, engine: bytes, driver: str | None) -> dict[str, Any] | None:
    """TensorRT for RTX's answer whether the engine can run here, with its own logger's messages
    (kept apart from the builder's log); None where the flavour has no such query.

    Without a CUDA driver there is no verdict: TensorRT for RTX then answers INVALID for want of
    a driver, with no diagnostic, which says nothing about the engine.
    """
    if not hasattr(trt.Runtime, "get_engine_validity"):
        return None
    if driver is None:
        return {"validity": None, "checked": False,
                "why": "no CUDA driver on this machine: TensorRT cannot judge an engine without one, "
                       "so no verdict is recorded"}
    log = collecting_logger(trt)
    validity, diagnostics = trt.Runtime(log).get_engine_validity(engine)
    flags = int(diagnostics)
    members = getattr(trt, "EngineInvalidityDiagnostics", None)
    named = [n for n, m in members.__members__.items() if flags & int(m)] if members is not None else []
    out = {"validity": validity.name, "checked": True, "driver": driver, "diagnostics": named,
           "diagnostics_flags": flags, "messages": log.messages[:20]}
    if validity.name != "VALID" and not named and log.errors():
        out["why"] = log.errors()[0]
    return out
