"""A small typed-record layer: frozen dataclasses that decode, encode and describe JSON.

One declaration gives three things, so they cannot drift apart:

- ``decode(cls, data, where)``: strict checking of a parsed JSON document (types, required
  keys, ranges, patterns, enumerations, plus each record's own ``check``), with one-line
  :class:`~benchbox.errors.UsageError` messages naming the field's path;
- ``encode(record)``: the JSON-ready dict, in declaration order, unknown keys kept;
- ``json_schema(cls)``: a JSON Schema (draft 2020-12) with one ``$defs`` entry per record
  (:mod:`benchbox.typed.schema`).

Fields are annotated with plain types (``int``, ``str``, ``float``, ``bool``, ``Any``,
``X | None``, ``tuple[X, ...]``, ``tuple[X, X]``, ``dict[str, X]``, ``Literal[...]``,
another :class:`Record`) and may carry constraints through ``Annotated`` (see
:class:`Range`, :class:`Pattern`, :class:`MaxLength`). Keys a record does not declare are kept in its
``extra`` mapping and written back, so documents from newer writers survive a round trip;
a record that sets ``CLOSED`` refuses them instead (declarations a person writes: a typo is
an error, not an extra key).

Every declarative input is read through it: receipts (:mod:`benchbox.receipts.model`),
timing contracts (:mod:`benchbox.contracts.model`) and matrix plans
(:mod:`benchbox.matrix.plan`). It is not pydantic or msgspec because neither is in the GPU
image the runs use, and this module already gives the strict decoding, one-line errors and
JSON Schema those inputs need.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

from benchbox.errors import UsageError


@dataclass(frozen=True)
class Range:
    """Inclusive numeric bounds for an Annotated field."""

    minimum: float | None = None
    maximum: float | None = None


@dataclass(frozen=True)
class Pattern:
    """A regular expression a string must match in full."""

    regex: str


@dataclass(frozen=True)
class MaxLength:
    """The most characters a string may hold."""

    count: int


@dataclass(frozen=True)
class MinItems:
    """The fewest items a list may hold."""

    count: int


def spec(*, omit_none: bool = False, description: str = "", default: Any = None,
         default_factory: Any = dataclasses.MISSING) -> Any:
    """A field that may be absent from a document (then ``default``).

    ``omit_none``: a None value is left out when encoding (the key appears only when set, or
    when the record was decoded from, or built with, an explicit null: see ``nulls``);
    otherwise None is written as null.
    """
    meta = {"optional": True, "omit_none": omit_none, "description": description}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def required(*, description: str = "") -> Any:
    """A field every document must have."""
    return dataclasses.field(metadata={"optional": False, "description": description})


def derived(*, default: Any) -> Any:
    """A field the record holds but its document does not (never read, written or described):
    set by the code that builds the record, and by its ``derive`` when it is decoded."""
    return dataclasses.field(default=default, metadata={"derived": True})


class Record:
    """Base of the typed records. Subclasses are frozen dataclasses.

    ``extra`` holds the keys a document carries that the record does not declare; ``nulls``
    the optional keys it holds as null (so a null survives a round trip where an absent key
    would be left out).
    ``CLOSED`` refuses undeclared keys.
    ``SCHEMA_EXTRA`` adds JSON Schema keywords (e.g. ``if``/``then``) that ``check``
    enforces in code, so the schema and the decoder say the same.
    """

    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {}
    DESCRIPTION: ClassVar[str] = ""
    #: refuse keys the record does not declare (``unknown field 'x'``) instead of keeping them
    CLOSED: ClassVar[bool] = False

    def check(self, raw: Mapping[str, Any], fail: typing.Callable[[str], None]) -> None:
        """Rules across fields (``raw``: the object as written); ``fail(message)`` refuses it."""

    def derive(self) -> Any:
        """The record as decoded, its ``derived`` fields set from the document's (default: itself)."""
        return self

    def to_json(self) -> dict[str, Any]:
        return encode(self)

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Any:
        """A record from a dict built in code (values made JSON-plain first); UsageError if unfit."""
        return decode(cls, plain(dict(data)), cls.__name__, "record")


@dataclass(frozen=True, kw_only=True)
class Declared(Record):
    """A record of a declaration a person writes (a contract, a matrix plan): a key it does not
    declare is refused, a typo being an error rather than an extra key."""

    CLOSED: ClassVar[bool] = True
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    nulls: frozenset[str] = dataclasses.field(default=frozenset(), repr=False, compare=False)


#: fields every record has that are not part of the document (``order``: only records that declare
#: it keep the order of the document's keys, and write them back in that order)
_BOOKKEEPING = ("extra", "nulls", "order")


@cache
def _fields(cls: type) -> tuple[tuple[dataclasses.Field[Any], Any], ...]:
    hints = _hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls)
                 if f.name not in _BOOKKEEPING and not f.metadata.get("derived"))


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _is_optional(f: dataclasses.Field[Any]) -> bool:
    return bool(f.metadata.get("optional", f.default is not dataclasses.MISSING
                               or f.default_factory is not dataclasses.MISSING))


# -- decoding -------------------------------------------------------------------------------

class _Invalid(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)


#: JSON's name for each kind of parsed value, in the order tried (a Python bool is an int too)
_KINDS: tuple[tuple[type, str], ...] = (
    (type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
    (list, "array"), (dict, "object"))


def _kind(value: Any) -> str:
    return next((name for tp, name in _KINDS if isinstance(value, tp)), type(value).__name__)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _unwrap(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    if get_origin(tp) is Annotated:
        base, *meta = get_args(tp)
        return base, tuple(meta)
    return tp, ()


def _decode(tp: Any, value: Any, path: str) -> Any:
    tp, meta = _unwrap(tp)
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        return _decode_union(get_args(tp), value, path)
    if origin is Literal:
        return _decode_literal(get_args(tp), value, path)
    if isinstance(tp, type) and issubclass(tp, Record):
        return _decode_record(tp, value, path)
    if tp in (bool, int, float, str):
        return _decode_scalar(tp, meta, value, path)
    if origin is tuple:
        return _decode_tuple(get_args(tp), meta, value, path)
    if origin is dict:
        return _decode_dict(get_args(tp), value, path)
    if origin is list:
        (item,) = get_args(tp)
        if not isinstance(value, list):
            raise _Invalid(path, f"is {_kind(value)}, not an array")
        return [_decode(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    raise TypeError(f"typed: unsupported annotation {tp!r}")  # a declaration error, not input


def _decode_union(args: tuple[Any, ...], value: Any, path: str) -> Any:
    """The first alternative that accepts ``value`` (null only where None is one); else the
    first alternative's refusal."""
    if value is None:
        if type(None) in args:
            return None
        raise _Invalid(path, "is null")
    errors = []
    for a in (a for a in args if a is not type(None)):
        try:
            return _decode(a, value, path)
        except _Invalid as e:
            errors.append(e)
    raise errors[0]


def _decode_literal(args: tuple[Any, ...], value: Any, path: str) -> Any:
    if value not in args or isinstance(value, bool) != any(isinstance(a, bool) for a in args):
        raise _Invalid(path, f"{_short(value)} is not one of {', '.join(map(str, args))}")
    return args[args.index(value)]  # as declared: 1.0 is the literal 1


def _decode_scalar(tp: type, meta: tuple[Any, ...], value: Any, path: str) -> Any:
    """A boolean, integer (never a boolean), finite number or string, within its constraints."""
    if tp is bool:
        if not isinstance(value, bool):
            raise _Invalid(path, f"is {_kind(value)}, not a boolean")
        return value
    if tp is int:
        if isinstance(value, float) and value.is_integer():  # JSON Schema's integer: 12345.0 is one
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise _Invalid(path, f"is {_kind(value)}, not an integer")
    elif tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise _Invalid(path, f"is {_kind(value)}, not a number")
        if not math.isfinite(value):
            raise _Invalid(path, "is not a finite number")
    elif not isinstance(value, str):
        raise _Invalid(path, f"is {_kind(value)}, not a string")
    _check_meta(value, meta, path)
    return value


def _decode_tuple(args: tuple[Any, ...], meta: tuple[Any, ...], value: Any, path: str) -> tuple[Any, ...]:
    """``tuple[X, ...]`` (any length) or ``tuple[X, Y]`` (exactly those items) from an array."""
    if not isinstance(value, list):
        raise _Invalid(path, f"is {_kind(value)}, not an array")
    _check_meta(value, meta, path)
    if len(args) == 2 and args[1] is Ellipsis:
        item = args[0]
        if _unwrap(item)[0] is int:  # sample lists: a fast path for the common case
            return _int_items(value, _unwrap(item)[1], path)
        return tuple(_decode(item, v, f"{path}[{i}]") for i, v in enumerate(value))
    if len(value) != len(args):
        raise _Invalid(path, f"has {len(value)} items, not {len(args)}")
    return tuple(_decode(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value)))


def _decode_dict(args: tuple[Any, ...], value: Any, path: str) -> dict[str, Any]:
    key_tp, val_tp = args
    if not isinstance(value, dict):
        raise _Invalid(path, f"is {_kind(value)}, not an object")
    out = {}
    for k, v in value.items():
        _decode(key_tp, k, f"{path} key")
        out[k] = _decode(val_tp, v, f"{path}.{str(k)[:40]}")
    return out


_INT = frozenset({int})


def _int_items(value: list[Any], meta: tuple[Any, ...], path: str) -> tuple[int, ...]:
    lo = hi = None
    for m in meta:
        if isinstance(m, Range):
            lo, hi = m.minimum, m.maximum
    if not value or (_INT.issuperset(map(type, value)) and (lo is None or min(value) >= lo)
                     and (hi is None or max(value) <= hi)):
        return tuple(value)  # every item an integer in range, checked in C
    odd = [i for i, v in enumerate(value)
           if type(v) is not int or (lo is not None and v < lo) or (hi is not None and v > hi)]
    if not odd:
        return tuple(value)
    items = list(value)
    for i in odd:  # refused, or an integral float (12345.0) read as the integer it is
        items[i] = _decode(Annotated[int, *meta] if meta else int, items[i], f"{path}[{i}]")
    return tuple(items)


def _check_meta(value: Any, meta: tuple[Any, ...], path: str) -> None:
    import re

    for m in meta:
        if isinstance(m, Range):
            if m.minimum is not None and value < m.minimum:
                raise _Invalid(path, f"{_short(value)} is below {m.minimum:g}")
            if m.maximum is not None and value > m.maximum:
                raise _Invalid(path, f"{_short(value)} is above {m.maximum:g}")
        elif isinstance(m, MaxLength):
            if len(value) > m.count:
                raise _Invalid(path, f"is {len(value):,} characters long, over the limit of {m.count} "
                                     f"({value[:40]!r}...)")
        elif isinstance(m, Pattern):
            if not re.fullmatch(m.regex, value):
                raise _Invalid(path, f"{_short(value)} does not match {m.regex}")
        elif isinstance(m, MinItems):
            if len(value) < m.count:
                raise _Invalid(path, f"has {len(value)} items, fewer than {m.count}")


def _decode_record(cls: type[Record], value: Any, path: str) -> Record:
    if not isinstance(value, dict):
        raise _Invalid(path, f"is {_kind(value)}, not an object")
    kw: dict[str, Any] = {}
    for f, tp in _fields(cls):
        where = f"{path}.{f.name}" if path else f.name
        if f.name not in value:
            if not _is_optional(f):
                raise _Invalid(where, "is missing")
            continue
        kw[f.name] = _decode(tp, value[f.name], where)
    known = {f.name for f, _ in _fields(cls)}
    extra = {k: v for k, v in value.items() if k not in known}
    if extra and cls.CLOSED:
        unknown = sorted(str(k) for k in extra)[0]
        raise _Invalid("", f"unknown {path + ' ' if path else ''}field {_short(unknown)} "
                           f"(fields: {', '.join(sorted(known))})")
    nulls = frozenset(k for k in known if k in value and value[k] is None)
    kept = {"order": tuple(value)} if _keeps_order(cls) else {}
    record = cls(**kw, extra=extra, nulls=nulls, **kept)  # type: ignore[call-arg]

    def fail(message: str) -> None:
        raise _Invalid(path, message)

    record.check(value, fail)
    return record.derive()


@cache
def _keeps_order(cls: type) -> bool:
    return any(f.name == "order" for f in dataclasses.fields(cls))


def decode(cls: type[Record], data: Any, where: str, what: str = "receipt") -> Any:
    """Check ``data`` against ``cls`` and build the record; one-line UsageError on any problem."""
    try:
        return _decode_record(cls, data, "")
    except _Invalid as e:
        raise UsageError(f"{where}: invalid {what}: {e}") from None


def plain(x: Any) -> Any:
    """A JSON-ready copy: numpy values become Python ones, NaN/±inf become null."""
    if isinstance(x, Mapping):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    if hasattr(x, "tolist"):  # numpy scalars and arrays
        return plain(x.tolist())
    return str(x)


# -- encoding -------------------------------------------------------------------------------

#: values written as they are (a sequence of only these is copied as a list, item by item in C)
_PLAIN = frozenset({int, float, str, bool, type(None)})


def _encode(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is tuple or kind is list:
        if _PLAIN.issuperset(map(type, value)):  # sample lists: 10,000s of numbers
            return list(value)
        return [_encode(v) for v in value]
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _encode(v) for k, v in value.items()}
    return value


def encode(record: Record) -> dict[str, Any]:
    """The record as a JSON-ready dict: declared fields in order, then the extra keys."""
    out: dict[str, Any] = {}
    nulls = getattr(record, "nulls", frozenset())
    for f, _ in _fields(type(record)):
        v = getattr(record, f.name)
        if v is None and f.metadata.get("omit_none") and f.name not in nulls:
            continue
        out[f.name] = _encode(v)
    for k, v in getattr(record, "extra", {}).items():
        if k not in out:
            out[k] = _encode(v)
    order = getattr(record, "order", ())
    if order:  # the document's own key order, then keys set since
        out = {**{k: out[k] for k in order if k in out}, **out}
    return out
