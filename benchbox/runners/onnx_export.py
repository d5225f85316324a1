"""ONNX export of a task's model, shared by every ONNX-based runner.

The export is a preparation phase: never inside any contract. It records what
the exporter did (exporter, opset, the ATen operators the graph was decomposed
into, the ONNX operators it produced, warnings) so a receipt can say how the
model reached the runner.
"""

from __future__ import annotations

import collections
import hashlib
import importlib.util
import io
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchbox.errors import MissingExtraError


@dataclass(frozen=True)
class OnnxExport:
    """One exported model: the ONNX bytes, their hash and the export facts."""

    model: bytes
    sha256: str
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    facts: dict[str, Any] = field(default_factory=dict)

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.model)
        return path


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


def export_onnx(task: Any, example: tuple[np.ndarray, ...] | None = None, *, model: Any = None,
                opset: int | None = None, dynamo: bool = True) -> OnnxExport:
    """Export ``task.build_model()`` (or ``model``) to ONNX with ``example`` as the inputs.

    Input and output names come from ``task.input_names``/``task.output_names``; the
    inputs are whatever ``task.preprocess`` returns, so any task exports the same way.
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
    kwargs: dict[str, Any] = {"input_names": list(input_names), "output_names": list(output_names),
                              "verbose": False,
                              "dynamo": dynamo}
    if opset is not None:
        kwargs["opset_version"] = opset
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
    data = buf.getvalue()
    facts: dict[str, Any] = {
        "exporter": "dynamo" if dynamo else "torchscript",
        "torch_version": torch.__version__,
        "onnx_sha256": hashlib.sha256(data).hexdigest(),
        "onnx_bytes": len(data),
        "input_names": list(input_names),
        "output_names": list(output_names),
        "example_shapes": [list(a.shape) for a in example],
        "example_dtypes": [str(a.dtype) for a in example],
        "warnings": [f"{w.category.__name__}: {w.message}"[:500] for w in caught],
        "log_warnings": handler.lines,
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
