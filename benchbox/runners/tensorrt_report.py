"""What a TensorRT engine is made of, read from TensorRT's own reports.

Used by the TensorRT runner; pure Python on TensorRT's outputs, so every parser here
is tested on recorded text:

- the engine inspector's JSON (``IEngineInspector.get_engine_information``, needs a
  deserialized engine, so a GPU) and the same layer listing in its one-line text form,
  which the builder logs at VERBOSE severity when profiling verbosity is DETAILED (so it
  is there on a machine without a GPU too);
- the builder's memory and tactic-source messages;
- per-layer times from an ``IProfiler`` in a diagnostic pass outside every contract.

``fallback_entries`` turns layers into the runner report's ``fallbacks``, in the shape
the torch-compile runner uses (dicts with ``kind``, and ``count`` where grouped).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from typing import Any

#: tokens of TensorRT's datatype and format strings → one precision name
_PRECISION_TOKENS: dict[str, str] = {
    "fp32": "FP32", "float": "FP32", "float32": "FP32",
    "fp16": "FP16", "half": "FP16", "float16": "FP16",
    "bf16": "BF16", "bfloat16": "BF16",
    "fp8": "FP8", "e4m3": "FP8", "fp4": "FP4", "e2m1": "FP4", "e8m0": "E8M0",
    "double": "FP64", "fp64": "FP64",
    "int8": "INT8", "int4": "INT4", "int16": "INT16", "int32": "INT32", "int64": "INT64",
    "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
    "bool": "BOOL",
}
#: precisions that carry real numbers (a layer in one of these can be a precision island)
FLOATING = frozenset({"FP32", "FP16", "BF16", "FP8", "FP4", "FP64"})
#: the model dtypes benchbox knows → TensorRT precision names
MODEL_PRECISION = {"float32": "FP32", "float16": "FP16", "bfloat16": "BF16"}
#: example layer names kept per grouped fallback entry
EXAMPLES = 3
_MAX_TEXT = 300


def precision_of(text: Any) -> str | None:
    """The precision named in a TensorRT datatype or ``Format/Datatype`` string, or None.

    ``"Row major linear FP32"`` and ``"Float"`` → FP32, ``"Channel major FP16 format where
    channel % 8 == 0"`` and ``"Half"`` → FP16, ``"BFloat16"`` → BF16; a format without a
    datatype (``"(Linear) Row major linear format"``, ``"N/A due to dynamic shapes"``) → None.
    """
    if not isinstance(text, str):
        return None
    for token in re.findall(r"[A-Za-z0-9]+", text):
        p = _PRECISION_TOKENS.get(token.lower())
        if p is not None:
            return p
    return None


def tensor_precision(tensor: Any) -> str | None:
    """A tensor entry's precision: its ``Datatype`` (newer releases print it apart from the
    format), else its ``Format/Datatype`` (one string), else a bare string entry."""
    if isinstance(tensor, str):
        return precision_of(tensor)
    if not isinstance(tensor, dict):
        return None
    for key in ("Datatype", "DataType", "Format/Datatype", "Format"):
        p = precision_of(tensor.get(key))
        if p is not None:
            return p
    return None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def layer_record(entry: dict[str, Any]) -> dict[str, Any]:
    """One layer of the engine inspector's listing, compacted for the receipt.

    ``precision`` is that of the first floating output (else the first output with a
    known type, else the first input's): what the layer writes.
    """
    outs = [tensor_precision(t) for t in _as_list(entry.get("Outputs"))]
    ins = [tensor_precision(t) for t in _as_list(entry.get("Inputs"))]
    floating = [p for p in outs if p in FLOATING]
    known = floating or [p for p in outs if p] or [p for p in ins if p]
    meta = entry.get("Metadata")
    rec = {"name": str(entry.get("Name", "")), "type": entry.get("LayerType"),
           "precision": known[0] if known else None, "output_types": outs, "input_types": ins}
    tactic = entry.get("TacticName", entry.get("TacticValue"))
    if tactic is not None:
        rec["tactic"] = str(tactic)[:_MAX_TEXT]
    if entry.get("Origin") is not None:
        rec["origin"] = str(entry["Origin"])
    ptype = entry.get("ParameterType")
    if ptype is not None and ptype != entry.get("LayerType"):
        rec["parameter_type"] = str(ptype)  # NVIDIA's TREx reads a layer's type from here first
    if meta:
        rec["metadata"] = str(meta).replace("\x1f", " ")[:_MAX_TEXT]
    unparsed = [_raw_type(t) for t, p in zip(_as_list(entry.get("Outputs")), outs) if p is None]
    if unparsed:
        rec["unparsed_output_types"] = unparsed[:4]  # what a parser that misses them must learn
    return rec


def _raw_type(tensor: Any) -> str:
    if isinstance(tensor, dict):
        return str({k: tensor[k] for k in ("Datatype", "DataType", "Format/Datatype", "Format")
                    if k in tensor})[:_MAX_TEXT]
    return str(tensor)[:_MAX_TEXT]


def inspector_layers(info: dict[str, Any]) -> list[dict[str, Any]]:
    """Layers of ``get_engine_information(LayerInformationFormat.JSON)``, parsed.

    Below DETAILED profiling verbosity the listing holds names only: those layers get
    no type and no precision.
    """
    out = []
    for entry in _as_list(info.get("Layers")):
        if isinstance(entry, str):
            out.append({"name": entry, "type": None, "precision": None, "output_types": [],
                        "input_types": []})
        elif isinstance(entry, dict):
            out.append(layer_record(entry))
    return out


# -- the one-line text form (the builder's VERBOSE "Layers:" message) ----------------------

_FIELD = re.compile(r"([A-Z][A-Za-z/]*): ")


def split_fields(text: str) -> dict[str, str]:
    """``"Name: a, LayerType: b, Inputs: [ {...} ]"`` → {"Name": "a", ...}, brackets respected."""
    m = _FIELD.match(text)
    if not m:
        return {}
    fields: dict[str, str] = {}
    key, start, depth, i = m.group(1), m.end(), 0, m.end()
    while i < len(text):
        c = text[i]
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith(", ", i):
            nxt = _FIELD.match(text, i + 2)
            if nxt:
                fields[key] = text[start:i].strip()
                key, start = nxt.group(1), nxt.end()
                i = nxt.end()
                continue
        i += 1
    fields[key] = text[start:].strip()
    return fields


def _tensor_list(text: str) -> list[dict[str, str]]:
    """``"[ { Name: x, Datatype: Float }, { ... }]"`` → one dict of fields per tensor."""
    out, depth, start = [], 0, None
    for i, c in enumerate(text):
        if c == "{":
            depth += 1
            if depth == 1:
                start = i + 1
        elif c == "}":
            depth -= 1
            if depth == 0 and start is not None:
                out.append(split_fields(text[start:i].strip()))
                start = None
    return out


def parse_layer_listing(text: str) -> dict[str, Any]:
    """The engine inspector's one-line listing (``Layers:`` ... ``I/O Tensors:`` ...) parsed.

    Returns ``{"layers": [...], "io_tensors": [...]}`` with layers as ``layer_record`` makes
    them and I/O tensors with their optimization-profile shapes where printed.
    """
    layers: list[dict[str, Any]] = []
    io: list[dict[str, Any]] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if line in ("Layers:", "I/O Tensors:") or line.startswith("Engine Metadata:"):
            section = line.rstrip(":").split(":")[0]
            continue
        if not line.startswith("Name: "):
            continue
        f = split_fields(line)
        if section == "Layers":
            entry: dict[str, Any] = {"Name": f.get("Name", ""), "LayerType": f.get("LayerType"),
                                     "Inputs": _tensor_list(f.get("Inputs", "")),
                                     "Outputs": _tensor_list(f.get("Outputs", ""))}
            for k in ("TacticName", "TacticValue", "Metadata", "Origin", "ParameterType"):
                if k in f:
                    entry[k] = f[k]
            layers.append(layer_record(entry))
        elif section == "I/O Tensors":
            t: dict[str, Any] = {"name": f.get("Name"), "mode": (f.get("IOMode") or "").upper() or None,
                                 "dtype": precision_of(f.get("DataType")) or f.get("DataType"),
                                 "shape": _ints(f.get("Dimensions"))}
            prof = _tensor_list(f.get("ProfileInfo", ""))
            if prof and "MinShape" in prof[0]:
                t["profile"] = [{"min": _ints(p.get("MinShape")), "opt": _ints(p.get("OptShape")),
                                 "max": _ints(p.get("MaxShape"))} for p in prof]
            io.append(t)
    return {"layers": layers, "io_tensors": io}


def _ints(text: str | None) -> list[int] | None:
    if not text:
        return None
    return [int(x) for x in re.findall(r"-?\d+", text)]


# -- the builder's log ----------------------------------------------------------------------

_BYTES = {"bytes": 1, "": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_TOTALS = {
    "Total Host Persistent Memory": "host_persistent_bytes",
    "Total Device Persistent Memory": "device_persistent_bytes",
    "Max Scratch Memory": "max_scratch_bytes",
    "Total Activation Memory": "activation_bytes",
    "Total Weights Memory": "weights_bytes",
}
_TOTAL = re.compile(r"^(" + "|".join(map(re.escape, _TOTALS)) + r"): (\d+)\s*(bytes|KiB|MiB|GiB)?")
_PEAK = re.compile(r"\[MemUsageStats\] Peak memory usage of TRT CPU/GPU memory allocators: "
                   r"CPU (\d+) MiB, GPU (\d+) MiB")
_UNUSED_TACTIC = re.compile(r"Disabling unused tactic source: (\w+)")


def keep_log_line(msg: str) -> bool:
    """Whether the builder's INFO/VERBOSE message ``msg`` feeds ``build_log_facts``."""
    return msg.startswith(("[MemUsage", "Disabling unused tactic source")) or bool(_TOTAL.match(msg))


def log_filter_version() -> str:
    """A hash of what ``keep_log_line`` keeps: builder log lines kept under another filter
    (an engine cache entry written by other code) cannot be parsed as this one's."""
    import hashlib
    import inspect

    text = inspect.getsource(keep_log_line) + _TOTAL.pattern
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_log_facts(lines: Iterable[str]) -> dict[str, Any]:
    """Build memory and tactic sources as the builder logged them (its own accounting).

    ``memory``: TensorRT's allocator peaks during the build (``peak_cpu_mib``,
    ``peak_gpu_mib``), the engine's persistent, scratch, activation and weights memory, and
    every ``[MemUsageChange]`` line. ``unused_tactic_sources``: the sources the builder
    disabled because no layer used them.
    """
    memory: dict[str, Any] = {}
    changes: list[str] = []
    unused: list[str] = []
    for msg in lines:
        m = _PEAK.search(msg)
        if m:
            memory["peak_cpu_mib"], memory["peak_gpu_mib"] = int(m.group(1)), int(m.group(2))
            continue
        m = _TOTAL.match(msg)
        if m:
            memory[_TOTALS[m.group(1)]] = int(m.group(2)) * _BYTES[m.group(3) or ""]
            continue
        if msg.startswith("[MemUsageChange]") and len(changes) < 20:
            changes.append(msg[:_MAX_TEXT])
            continue
        m = _UNUSED_TACTIC.search(msg)
        if m and m.group(1) not in unused:
            unused.append(m.group(1))
    if changes:
        memory["changes"] = changes
    return {"memory": memory, "unused_tactic_sources": unused}


# -- fallbacks ----------------------------------------------------------------------------

def _group(entries: list[tuple[tuple[Any, ...], str]]) -> list[tuple[tuple[Any, ...], int, list[str]]]:
    """(key, name) pairs → (key, count, first names) in first-seen order."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for key, name in entries:
        groups.setdefault(key, []).append(name)
    return [(k, len(v), v[:EXAMPLES]) for k, v in groups.items()]


def _phase(level: str, source: str) -> str:
    """The preparation phase a finding comes from (as the torch-compile runner names its phase)."""
    if level == "network":
        return "parse"
    return "engine_load" if source == "engine_inspector" else "build"


_ONNX_LAYER = re.compile(r"\[ONNX Layer: ([^\]]+)\]")


def declared_islands(network_layers: list[dict[str, Any]], model_dtype: str) -> list[dict[str, Any]]:
    """The layers the model itself declares in another floating precision than its dtype (its
    float32 layer norms in a bfloat16 model, say), one entry per (precision, layer type). The
    strongly typed network computes them as declared, as eager torch does: not fallbacks."""
    model = MODEL_PRECISION.get(model_dtype)
    picked = [((str(x.get("precision")), str(x.get("type"))), str(x.get("name"))) for x in network_layers
              if model is not None and x.get("precision") in FLOATING and x["precision"] != model]
    return [{"precision": p, "layer_type": t, "model_dtype": model_dtype, "count": n, "examples": ex,
             "detail": f"{n} {t} layer(s) declared in {p} in a {model_dtype} model",
             "source": "network definition (strongly typed)"} for (p, t), n, ex in _group(picked)]


def precision_islands(engine_layers: list[dict[str, Any]], network_layers: list[dict[str, Any]],
                      model_dtype: str, source: str) -> list[dict[str, Any]]:
    """Engine layers that write another floating precision than the network declares for the
    layers they implement (the ONNX layers their metadata names), one entry per (precision,
    layer type, declared). A layer naming no known network layer is held to the model's dtype;
    reformat layers are ``reformat_layer`` entries, not counted here again."""
    declared: dict[str, set[str]] = {}
    for x in network_layers:
        declared.setdefault(str(x.get("name")), set()).update(
            p for p in x.get("output_types") or [x.get("precision")] if p in FLOATING)
    model = MODEL_PRECISION.get(model_dtype)
    picked = []
    for layer in engine_layers:
        outs = {p for p in layer.get("output_types") or [layer.get("precision")] if p in FLOATING}
        if is_reformat(layer) or not outs:
            continue
        known = [n for n in _ONNX_LAYER.findall(str(layer.get("metadata") or "")) if n in declared]
        expected = set().union(*(declared[n] for n in known)) if known else {model} - {None}
        extra = sorted(outs - expected)
        if extra and expected:
            picked.append(((extra[0], str(layer.get("type")), "/".join(sorted(expected))),
                           str(layer.get("name"))))
    return [{"kind": "precision_island", "level": "engine", "precision": p, "layer_type": t,
             "declared": d, "model_dtype": model_dtype, "count": n, "examples": ex,
             "detail": f"{n} {t} layer(s) running in {p} where the network declares {d}",
             "phase": _phase("engine", source), "source": source}
            for (p, t, d), n, ex in _group(picked)]


def is_reformat(layer: dict[str, Any]) -> bool:
    """A layer that runs a reformatting kernel (a ``NoOp`` copy node runs none)."""
    typ = str(layer.get("type") or "")
    if typ.lower() == "noop":
        return False
    return typ.lower() == "reformat" or str(layer.get("origin") or "").upper() == "REFORMAT"


def is_plugin(layer: dict[str, Any]) -> bool:
    """A plugin layer (``PluginV2``, ``PluginV3``, or the network's ``PLUGIN_V2``/``PLUGIN_V3``),
    by its layer type or its parameter type."""
    return any("plugin" in str(layer.get(k) or "").lower() for k in ("type", "parameter_type"))


def _transition(layer: dict[str, Any]) -> str:
    ins = next((p for p in layer.get("input_types", []) if p), "?")
    outs = next((p for p in layer.get("output_types", []) if p), "?")
    return f"{ins}->{outs}"


def reformat_entries(layers: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    picked = [((_transition(layer),), str(layer.get("name"))) for layer in layers if is_reformat(layer)]
    return [{"kind": "reformat_layer", "level": "engine", "precision": t, "layer_type": "Reformat",
             "count": n, "examples": ex, "detail": f"{n} reformat layer(s) {t}",
             "phase": _phase("engine", source), "source": source}
            for (t,), n, ex in _group(picked)]


def plugin_entries(layers: list[dict[str, Any]], *, level: str, source: str) -> list[dict[str, Any]]:
    picked = [((str(layer.get("type")), str(layer.get("precision"))), str(layer.get("name")))
              for layer in layers if is_plugin(layer)]
    return [{"kind": "plugin_layer", "level": level, "layer_type": t, "precision": p, "count": n,
             "examples": ex, "detail": f"{n} {t} layer(s) ({p})", "phase": _phase(level, source),
             "source": source}
            for (t, p), n, ex in _group(picked)]


def unsupported_entries(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ONNX nodes the parser cannot translate, one entry per operator."""
    picked = [((str(n.get("op")),), str(n.get("name"))) for n in nodes]
    return [{"kind": "unsupported_node", "op": op, "count": n, "examples": ex,
             "detail": f"{n} ONNX {op} node(s) TensorRT cannot parse", "phase": "parse",
             "source": "OnnxParser.supports_model_v2 subgraphs"}
            for (op,), n, ex in _group(picked)]


def fallback_entries(*, model_dtype: str, network_layers: list[dict[str, Any]],
                     engine_layers: list[dict[str, Any]] | None, engine_source: str | None
                     ) -> list[dict[str, Any]]:
    """What the built engine does other than the network declares, each layer counted once:
    precision islands (another precision than declared), reformat and plugin layers. Without
    the engine's layer listing, the network's plugin layers. The precisions the model declares
    are ``declared_islands``, not fallbacks.
    """
    if engine_layers is None or not engine_source:
        return plugin_entries(network_layers, level="network", source="network definition")
    return [*precision_islands(engine_layers, network_layers, model_dtype, engine_source),
            *reformat_entries(engine_layers, engine_source),
            *plugin_entries(engine_layers, level="engine", source=engine_source)]


def summarize_layers(layers: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts by layer type and precision, plugin and reformat layer names, the layers."""
    types: dict[str, int] = {}
    precisions: dict[str, int] = {}
    for layer in layers:
        types[str(layer["type"])] = types.get(str(layer["type"]), 0) + 1
        p = str(layer.get("precision"))
        precisions[p] = precisions.get(p, 0) + 1
    return {"num_layers": len(layers), "layer_types": dict(sorted(types.items())),
            "precisions": dict(sorted(precisions.items())),
            "plugin_layers": [str(x["name"]) for x in layers if is_plugin(x)],
            "reformat_layers": [str(x["name"]) for x in layers if is_reformat(x)],
            "layers": layers}


# -- the per-layer profile (diagnostic) -----------------------------------------------------

def make_profiler(trt: Any) -> Any:
    """An ``IProfiler`` that keeps the per-layer times TensorRT reports, one list per run.

    The times are TensorRT's own (measured by TensorRT around each layer); benchbox reads
    no clock here. ``end_run()`` closes one inference's record.
    """

    class LayerTimes(trt.IProfiler):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            trt.IProfiler.__init__(self)
            self.runs: list[list[tuple[str, float]]] = []
            self._current: list[tuple[str, float]] = []

        def report_layer_time(self, layer_name: str, ms: float) -> None:
            self._current.append((str(layer_name), float(ms)))

        def end_run(self) -> None:
            if self._current:
                self.runs.append(self._current)
            self._current = []

    return LayerTimes()


def summarize_layer_profile(runs: list[list[tuple[str, float]]], layers: list[dict[str, Any]],
                            top: int = 10) -> dict[str, Any]:
    """Median time per layer over ``runs``; the ``top`` layers and the time per precision.

    ``layers`` (the engine's listing) gives each layer's type and precision; a layer the
    listing does not name gets precision None.
    """
    if not runs:
        return {"runs": 0, "layers_timed": 0, "total_ms_median": None, "top_layers": [],
                "by_precision": {}}
    per: dict[str, list[float]] = {}
    order: list[str] = []
    for run in runs:
        seen: dict[str, float] = {}
        for name, ms in run:
            seen[name] = seen.get(name, 0.0) + ms  # a layer reported twice in one run: summed
        for name, ms in seen.items():
            if name not in per:
                per[name] = []
                order.append(name)
            per[name].append(ms)
    med = {n: statistics.median(v) for n, v in per.items()}
    total = sum(med.values())
    info = {str(x.get("name")): x for x in layers}
    ranked = sorted(order, key=lambda n: -med[n])
    by_prec: dict[str, dict[str, Any]] = {}
    for n in order:
        p = str(info.get(n, {}).get("precision"))
        e = by_prec.setdefault(p, {"ms": 0.0, "layers": 0})
        e["ms"] += med[n]
        e["layers"] += 1
    for e in by_prec.values():
        e["share"] = e["ms"] / total if total > 0 else None
    totals = sorted(sum(ms for _, ms in run) for run in runs)
    return {
        "runs": len(runs), "layers_timed": len(order),
        "total_ms_median": statistics.median(totals),
        "top_layers": [{"name": n, "type": info.get(n, {}).get("type"),
                        "precision": info.get(n, {}).get("precision"), "median_ms": med[n],
                        "share": med[n] / total if total > 0 else None} for n in ranked[:top]],
        "by_precision": dict(sorted(by_prec.items(), key=lambda kv: -kv[1]["ms"])),
    }
