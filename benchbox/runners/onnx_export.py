"""ONNX export of a task's model, shared by every ONNX-based runner.

The export is a preparation phase: never inside any contract. It records what
the exporter did (exporter, opset, the ATen operators the graph was decomposed
into, the ONNX operators it produced, warnings) so a receipt can say how the
model reached the runner.

Inputs the task declares with a size range (``Task.input_shapes``) are exported
with dynamic dimensions. ``load_or_export`` keeps exports on disk, keyed by
everything that decides the ONNX bytes (model weights and code, input shapes,
export options, library versions), so a runner does not export the same model twice.
"""

from __future__ import annotations

import collections
import hashlib
import importlib.util
import inspect
import io
import json
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchbox.errors import MissingExtraError, UsageError
from benchbox.fileio import write_atomic
from benchbox.runners.base import Phases

#: bump when ``export_onnx`` changes what it writes for the same inputs (invalidates cached exports)
EXPORT_CODE_REVISION = 2


@dataclass(frozen=True)
class OnnxExport:
    """One exported model: the ONNX bytes, their hash and the export facts."""

    model: bytes
    sha256: str
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    facts: dict[str, Any] = field(default_factory=dict)


EXPORT_PACKAGES = ("onnx", "onnxscript")


def missing_export_packages() -> list[str]:
    """The packages the export needs that are not installed (checked without importing them)."""
    return [p for p in EXPORT_PACKAGES if importlib.util.find_spec(p) is None]


def example_inputs(task: Any, case_request: bytes | None = None) -> tuple[np.ndarray, ...]:
    """The host inputs of one request (the first case's by default), in ``input_names`` order."""
    request = case_request if case_request is not None else task.cases()[0].request
    return tuple(task.preprocess(task.parse(request)))


def _onnx_facts(model_bytes: bytes) -> dict[str, Any]:
    import onnx

    proto = onnx.load_from_string(model_bytes)
    ops = collections.Counter(n.op_type for n in proto.graph.node)

    def io(values: Any) -> list[dict[str, Any]]:
        out = []
        for v in values:
            t = v.type.tensor_type
            out.append({"name": v.name, "dtype": onnx.TensorProto.DataType.Name(t.elem_type).lower(),
                        "shape": [d.dim_value if d.HasField("dim_value") else d.dim_param
                                  for d in t.shape.dim]})
        return out

    return {
        "opset": {(o.domain or "ai.onnx"): int(o.version) for o in proto.opset_import},
        "ir_version": int(proto.ir_version),
        "nodes": len(proto.graph.node),
        "onnx_ops": dict(sorted(ops.items())),
        "inputs": io(proto.graph.input),
        "outputs": io(proto.graph.output),
        "onnx_version": onnx.__version__,
    }


def _aten_ops(program: Any) -> dict[str, int] | None:
    """The operators of the decomposed graph the dynamo exporter translated (None if unknown)."""
    ep = getattr(program, "exported_program", None)
    if ep is None:
        return None
    ops: collections.Counter[str] = collections.Counter()
    for node in ep.graph.nodes:
        if node.op == "call_function":
            ops[str(getattr(node.target, "__name__", node.target))] += 1
    return dict(sorted(ops.items()))


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}"[:500])


def dynamic_axes(input_shapes: dict[str, Any] | None, input_names: tuple[str, ...]) -> dict[str, list[int]]:
    """Input name → the axes whose size may vary (from ``InputShape``s); fixed inputs left out."""
    out: dict[str, list[int]] = {}
    for name in input_names:
        shape = (input_shapes or {}).get(name)
        if shape is not None and shape.dynamic_axes:
            out[name] = list(shape.dynamic_axes)
    return out


def _export_kwargs(input_names: tuple[str, ...], output_names: tuple[str, ...], opset: int | None,
                   dynamo: bool, dyn: dict[str, list[int]]) -> dict[str, Any]:
    """The keywords of ``torch.onnx.export``: names, opset and the dynamic dimensions."""
    import torch

    kwargs: dict[str, Any] = {"input_names": list(input_names), "output_names": list(output_names),
                              "verbose": False,
                              "dynamo": dynamo}
    if opset is not None:
        kwargs["opset_version"] = opset
    if dyn:
        if not dynamo:
            raise UsageError("dynamic input shapes need the dynamo exporter")
        kwargs["dynamic_shapes"] = tuple({a: torch.export.Dim.DYNAMIC for a in dyn[n]} if n in dyn else None
                                         for n in input_names)
    return kwargs


def _run_exporter(model: Any, args: tuple[Any, ...], dynamo: bool,
                  kwargs: dict[str, Any]) -> tuple[Any, bytes, list[str], list[str]]:
    """Run the exporter: its program (dynamo), the ONNX bytes, and the warnings and log lines
    (``torch.onnx``, ``torch.export``, ``onnxscript``) it emitted."""
    import torch

    handler = _Records()
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "onnxscript")]
    for lg in loggers:
        lg.addHandler(handler)
    buf = io.BytesIO()
    try:
        with warnings.catch_warnings(record=True) as caught, torch.inference_mode(False), \
                torch.no_grad():
            warnings.simplefilter("always")
            program = torch.onnx.export(model, args, None if dynamo else buf, **kwargs)
            if dynamo:
                program.save(buf)
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
    lines = [f"{w.category.__name__}: {w.message}"[:500] for w in caught]
    return program, buf.getvalue(), lines, handler.lines


def export_onnx(task: Any, example: tuple[np.ndarray, ...] | None = None, *, model: Any = None,
                opset: int | None = None, dynamo: bool = True,
                input_shapes: dict[str, Any] | None = None) -> OnnxExport:
    """Export ``task.build_model()`` (or ``model``) to ONNX with ``example`` as the inputs.

    Input and output names come from ``task.input_names``/``task.output_names``; the
    inputs are whatever ``task.preprocess`` returns, so any task exports the same way.
    Axes that ``input_shapes`` declares variable are exported as dynamic dimensions
    (their example size must not be 0 or 1, which the exporter specializes).
    """
    missing = missing_export_packages()
    if missing:
        raise MissingExtraError(" and ".join(missing), "onnx")
    import torch

    if example is None:
        example = example_inputs(task)
    if model is None:
        model = task.build_model()
    model = model.to("cpu").eval()
    args = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in example)
    input_names = tuple(task.input_names)
    output_names = tuple(task.output_names)
    if len(input_names) != len(args):
        raise ValueError(f"task {task.name}: {len(input_names)} input names but preprocess "
                         f"returned {len(args)} arrays")
    dyn = dynamic_axes(input_shapes, input_names)
    kwargs = _export_kwargs(input_names, output_names, opset, dynamo, dyn)
    program, data, caught, log_lines = _run_exporter(model, args, dynamo, kwargs)
    facts: dict[str, Any] = {
        "exporter": "dynamo" if dynamo else "torchscript",
        "torch_version": torch.__version__,
        "onnx_sha256": hashlib.sha256(data).hexdigest(),
        "onnx_bytes": len(data),
        "input_names": list(input_names),
        "output_names": list(output_names),
        "example_shapes": [list(a.shape) for a in example],
        "example_dtypes": [str(a.dtype) for a in example],
        "dynamic_axes": dyn,
        "warnings": caught,
        "log_warnings": log_lines,
    }
    if dynamo:
        facts["decomposed_aten_ops"] = _aten_ops(program)
    facts.update(_onnx_facts(data))
    try:
        import onnxscript

        facts["onnxscript_version"] = onnxscript.__version__
    except ImportError:
        pass
    return OnnxExport(data, facts["onnx_sha256"], input_names, output_names, facts)


def model_sha256(model: Any) -> str:
    """sha256 of a module's state: every tensor's name, dtype, shape and bytes."""
    import torch

    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{list(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _source_sha256(cls: type) -> str | None:
    """sha256 of the file that defines ``cls`` (None when there is no file, e.g. ``__main__``)."""
    try:
        path = inspect.getsourcefile(cls)
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except (OSError, TypeError):
        return None


def export_key(task: Any, model: Any, example: tuple[np.ndarray, ...], *, opset: int | None,
               dynamo: bool = True, input_shapes: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The cache key of one export and the document it hashes.

    Everything that decides the ONNX bytes: the task's facts (name, size, dtype, options),
    the source files of the task and model classes, the weights, the example's shapes and
    dtypes, the dynamic axes with their ranges, the export options and library versions.
    """
    import onnx
    import onnxscript
    import torch

    versions = {"torch": torch.__version__, "onnx": onnx.__version__, "onnxscript": onnxscript.__version__}
    dyn = dynamic_axes(input_shapes, tuple(task.input_names))
    doc = {
        "revision": EXPORT_CODE_REVISION,
        "task": task.info(),
        "task_class": f"{type(task).__module__}.{type(task).__qualname__}",
        "task_source_sha256": _source_sha256(type(task)),
        "model_class": f"{type(model).__module__}.{type(model).__qualname__}",
        "model_source_sha256": _source_sha256(type(model)),
        "model_sha256": model_sha256(model),
        "inputs": [[n, list(a.shape), str(a.dtype)] for n, a in zip(task.input_names, example)],
        "outputs": list(task.output_names),
        "dynamic": {n: [list(input_shapes[n].min), list(input_shapes[n].opt), list(input_shapes[n].max)]
                    for n in dyn} if input_shapes else {},
        "opset": opset, "exporter": "dynamo" if dynamo else "torchscript",
        "versions": versions,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest(), doc


def load_or_export(task: Any, example: tuple[np.ndarray, ...], *, model: Any, opset: int | None,
                   cache_dir: Path | None, phases: Phases,
                   input_shapes: dict[str, Any] | None = None) -> tuple[OnnxExport, dict[str, Any]]:
    """The export of ``model`` from ``cache_dir`` if it holds it, else a fresh one (then stored).

    Phases: ``export_key`` (hashing the model), then ``export_cache_load`` or ``export``.
    Returns the export and the cache facts (enabled, hit, key, path). A stored export whose
    bytes do not match its recorded hash is ignored and replaced.
    """
    if missing_export_packages():
        raise MissingExtraError(" and ".join(missing_export_packages()), "onnx")
    with phases("export_key"):
        key, doc = export_key(task, model, example, opset=opset, input_shapes=input_shapes)
    facts: dict[str, Any] = {"enabled": cache_dir is not None, "hit": False, "key": key,
                             "key_parts": sorted(doc)}
    if cache_dir is not None:
        onnx_path, meta_path = cache_dir / f"{key}.onnx", cache_dir / f"{key}.json"
        facts["path"] = str(onnx_path)
        if onnx_path.is_file() and meta_path.is_file():
            with phases("export_cache_load"):
                data = onnx_path.read_bytes()
                try:
                    meta = json.loads(meta_path.read_text())
                except (OSError, ValueError):
                    meta = {}
            if isinstance(meta, dict) and meta.get("onnx_sha256") == hashlib.sha256(data).hexdigest():
                facts["hit"] = True
                return (OnnxExport(data, meta["onnx_sha256"], tuple(task.input_names),
                                   tuple(task.output_names), meta), facts)
            facts["stale_entry_replaced"] = True
    with phases("export"):
        exported = export_onnx(task, example, model=model, opset=opset, input_shapes=input_shapes)
    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(cache_dir / f"{key}.onnx", exported.model)
        write_atomic(cache_dir / f"{key}.json", json.dumps(exported.facts, default=str).encode())
    return exported, facts
