"""The JSON Schema (draft 2020-12) of a typed record: the same declaration the decoder reads."""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

from benchbox.typed import MaxLength, MinItems, Pattern, Range, Record, _fields, _is_optional, _unwrap


def _schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    tp, meta = _unwrap(tp)
    origin = get_origin(tp)
    out: dict[str, Any]
    if tp is Any:
        out = {}
    elif origin in (Union, types.UnionType):
        args = get_args(tp)
        parts = [_schema(a, defs) for a in args if a is not type(None)]
        if type(None) in args:
            parts.append({"type": "null"})
        out = parts[0] if len(parts) == 1 else {"anyOf": parts}
    elif origin is Literal:
        out = {"enum": list(get_args(tp))}
    elif isinstance(tp, type) and issubclass(tp, Record):
        _record_schema(tp, defs)
        out = {"$ref": f"#/$defs/{tp.__name__}"}
    elif tp is bool:
        out = {"type": "boolean"}
    elif tp is int:
        out = {"type": "integer"}
    elif tp is float:
        out = {"type": "number"}
    elif tp is str:
        out = {"type": "string"}
    elif origin is tuple:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            out = {"type": "array", "items": _schema(args[0], defs)}
        else:
            out = {"type": "array", "prefixItems": [_schema(a, defs) for a in args],
                   "minItems": len(args), "maxItems": len(args)}
    elif origin is list:
        out = {"type": "array", "items": _schema(get_args(tp)[0], defs)}
    elif origin is dict:
        key_tp, val_tp = get_args(tp)
        out = {"type": "object", "additionalProperties": _schema(val_tp, defs)}
        key_schema = _schema(key_tp, defs)
        if key_schema != {"type": "string"}:
            out["propertyNames"] = key_schema
    else:
        raise TypeError(f"typed: unsupported annotation {tp!r}")
    for m in meta:
        if isinstance(m, Range):
            if m.minimum is not None:
                out["minimum"] = m.minimum
            if m.maximum is not None:
                out["maximum"] = m.maximum
        elif isinstance(m, Pattern):
            out["pattern"] = f"^(?:{m.regex})$"
        elif isinstance(m, MaxLength):
            out["maxLength"] = m.count
        elif isinstance(m, MinItems):
            out["minItems"] = m.count
    return out


def _record_schema(cls: type[Record], defs: dict[str, Any]) -> dict[str, Any]:
    name = cls.__name__
    if name in defs:
        return defs[name]
    defs[name] = {}  # placeholder against recursion
    props: dict[str, Any] = {}
    req: list[str] = []
    for f, tp in _fields(cls):
        s = _schema(tp, defs)
        if f.metadata.get("description"):
            s = {**s, "description": f.metadata["description"]}
        props[f.name] = s
        if not _is_optional(f):
            req.append(f.name)
    out: dict[str, Any] = {"type": "object"}
    if cls.DESCRIPTION or cls.__doc__:
        out["description"] = cls.DESCRIPTION or " ".join((cls.__doc__ or "").split())
    out["properties"] = props
    if req:
        out["required"] = req
    if cls.CLOSED:
        out["additionalProperties"] = False
    out.update(cls.SCHEMA_EXTRA)
    defs[name] = out
    return out


def json_schema(root: type[Record], **top: Any) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``root`` and every record it uses."""
    defs: dict[str, Any] = {}
    body = _record_schema(root, defs)
    defs.pop(root.__name__)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **top, **body,
            "$defs": dict(sorted(defs.items()))}
