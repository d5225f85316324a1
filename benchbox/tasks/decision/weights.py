"""Reading and writing safetensors files (the format is small enough to do without a package).

Layout: an 8-byte little-endian header length N, N bytes of JSON mapping each tensor
name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (plus an optional
``__metadata__``), then the raw little-endian tensor bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}
_MAX_HEADER = 100_000_000


def _header(data: bytes, path: Path) -> tuple[dict[str, Any], int]:
    if len(data) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than 8 bytes)")
    n = int.from_bytes(data[:8], "little")
    if n > _MAX_HEADER or 8 + n > len(data):
        raise ValueError(f"{path}: not a safetensors file (header length {n})")
    try:
        header = json.loads(data[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"{path}: not a safetensors file (header is not JSON)") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: not a safetensors file (header is not an object)")
    header.pop("__metadata__", None)
    for name, entry in header.items():
        if (not isinstance(entry, dict) or entry.get("dtype") not in _DTYPES
                or not isinstance(entry.get("shape"), list)
                or not isinstance(entry.get("data_offsets"), list)):
            raise ValueError(f"{path}: tensor {name!r} has an unsupported or malformed entry")
    return header, 8 + n


def read_header(path: Path) -> dict[str, Any]:
    """Tensor name → {dtype, shape, data_offsets}; ValueError if the file is not safetensors."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else -1
            if not 0 <= n <= _MAX_HEADER:
                raise ValueError(f"{path}: not a safetensors file")
            data = head + f.read(n)
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror or e}") from None
    return _header(data, path)[0]


def load_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """All tensors of a safetensors file, on the CPU."""
    data = Path(path).read_bytes()
    header, start = _header(data, Path(path))
    out: dict[str, torch.Tensor] = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        dtype = _DTYPES[e["dtype"]]
        buf = bytearray(data[start + b:start + end])
        numel = 1
        for d in e["shape"]:
            numel *= int(d)
        if len(buf) != numel * torch.empty((), dtype=dtype).element_size():
            raise ValueError(f"{path}: tensor {name!r} has {len(buf)} bytes for shape {e['shape']}")
        t = torch.frombuffer(buf, dtype=dtype) if buf else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(e["shape"])
    return out


def save_safetensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """Write tensors (any device) as a safetensors file."""
    header: dict[str, Any] = {}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    Path(path).write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))
