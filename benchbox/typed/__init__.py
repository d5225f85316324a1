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
import functools
import itertools
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

from benchbox.errors import UsageError
from benchbox.typed.fields import MaxLength, MinItems, Pattern, Range, derived, required, spec

__all__ = ["Declared", "MaxLength", "MinItems", "Pattern", "Range", "Record", "decode", "derived", "encode",
           "plain", "required", "spec"]


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
#
# Each annotation is turned once into a decoder, a function of the value alone (``_decoder``), so
# that decoding a document walks its values, not its annotations. A refusal's path is built as
# the refusal rises through the containers (``_Invalid.at``): a document that decodes builds none.

Decoder = Callable[[Any], Any]


class _Invalid(Exception):
    """A refusal: ``message``, at the path its containers add as it rises (innermost first).
    With ``lead``, the path stands inside the message, after ``lead``, instead of before it."""

    def __init__(self, message: str, lead: str | None = None) -> None:
        super().__init__(message)
        self.message, self.lead = message, lead
        self.parts: list[str] = []

    def at(self, part: str) -> _Invalid:
        self.parts.append(part)
        return self

    def __str__(self) -> str:
        path = "".join(reversed(self.parts)).removeprefix(".")
        if self.lead is not None:
            return f"{self.lead}{path + ' ' if path else ''}{self.message}"
        return f"{path}: {self.message}" if path else self.message


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


#: decoders by annotation and its text: ``int | float == float | int``, but they try their
#: alternatives in another order
_DECODERS: dict[tuple[Any, str], Decoder] = {}


def _decoder(tp: Any) -> Decoder:
    """The decoder of annotation ``tp``, built on first use."""
    key = (tp, repr(tp))
    try:
        return _DECODERS[key]
    except KeyError:
        made = _DECODERS[key] = _build(tp)
        return made
    except TypeError:  # an annotation that cannot be a key (unhashable metadata)
        return _build(tp)


def _build(tp: Any) -> Decoder:
    tp, meta = _unwrap(tp)
    origin = get_origin(tp)
    if tp is Any:
        return _as_is
    if origin in (Union, types.UnionType):
        return _union(get_args(tp))
    if origin is Literal:
        return functools.partial(_decode_literal, get_args(tp))
    if isinstance(tp, type) and issubclass(tp, Record):
        return functools.partial(_decode_record, tp)
    if tp in (bool, int, float, str):
        return _scalar(tp, meta)
    if origin is tuple:
        return _tuple(get_args(tp), meta)
    if origin is dict:
        return _dict(*get_args(tp))
    if origin is list:
        return _list(*get_args(tp))
    raise TypeError(f"typed: unsupported annotation {tp!r}")  # a declaration error, not input


def _as_is(value: Any) -> Any:
    return value


def _union(args: tuple[Any, ...]) -> Decoder:
    """The first alternative that accepts the value (null only where None is one); else the
    first alternative's refusal."""
    nullable = type(None) in args
    alternatives = tuple(_decoder(a) for a in args if a is not type(None))

    def decode_union(value: Any) -> Any:
        if value is None:
            if nullable:
                return None
            raise _Invalid("is null")
        errors = []
        for alternative in alternatives:
            try:
                return alternative(value)
            except _Invalid as e:
                errors.append(e)
        raise errors[0]

    return decode_union


def _decode_literal(args: tuple[Any, ...], value: Any) -> Any:
    if value not in args or isinstance(value, bool) != any(isinstance(a, bool) for a in args):
        raise _Invalid(f"{_short(value)} is not one of {', '.join(map(str, args))}")
    return args[args.index(value)]  # as declared: 1.0 is the literal 1


def _scalar(tp: type, meta: tuple[Any, ...]) -> Decoder:
    """A scalar's decoder: with no constraints, a value of exactly the type passes at once."""
    full = functools.partial(_decode_scalar, tp, meta)
    if meta:
        return full
    if tp is float:
        return lambda value: value if type(value) is float and math.isfinite(value) else full(value)
    return lambda value: value if type(value) is tp else full(value)


def _decode_scalar(tp: type, meta: tuple[Any, ...], value: Any) -> Any:
    """A boolean, integer (never a boolean), finite number or string, within its constraints."""
    if tp is bool:
        if not isinstance(value, bool):
            raise _Invalid(f"is {_kind(value)}, not a boolean")
        return value
    if tp is int:
        if isinstance(value, float) and value.is_integer():  # JSON Schema's integer: 12345.0 is one
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise _Invalid(f"is {_kind(value)}, not an integer")
    elif tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise _Invalid(f"is {_kind(value)}, not a number")
        if not math.isfinite(value):
            raise _Invalid("is not a finite number")
    elif not isinstance(value, str):
        raise _Invalid(f"is {_kind(value)}, not a string")
    _check_meta(value, meta)
    return value


def _array(value: Any, meta: tuple[Any, ...]) -> list[Any]:
    if not isinstance(value, list):
        raise _Invalid(f"is {_kind(value)}, not an array")
    if meta:
        _check_meta(value, meta)
    return value


def _items(decoders: Iterable[Decoder], value: list[Any]) -> list[Any]:
    """Each item decoded by its decoder (``repeat(one)`` for every item alike)."""
    out: list[Any] = []
    for decode_item, v in zip(decoders, value):
        try:
            out.append(decode_item(v))
        except _Invalid as e:
            raise e.at(f"[{len(out)}]") from None
    return out


def _tuple(args: tuple[Any, ...], meta: tuple[Any, ...]) -> Decoder:
    """``tuple[X, ...]`` (any length) or ``tuple[X, Y]`` (exactly those items) from an array."""
    if len(args) == 2 and args[1] is Ellipsis:
        base, item_meta = _unwrap(args[0])
        if base is int:  # sample lists: a fast path for the common case
            return lambda value: _int_items(_array(value, meta), item_meta)
        item = _decoder(args[0])
        return lambda value: tuple(_items(itertools.repeat(item), _array(value, meta)))
    items = tuple(_decoder(a) for a in args)

    def decode_fixed(value: Any) -> tuple[Any, ...]:
        value = _array(value, meta)
        if len(value) != len(items):
            raise _Invalid(f"has {len(value)} items, not {len(items)}")
        return tuple(_items(items, value))

    return decode_fixed


def _list(item_tp: Any) -> Decoder:
    item = _decoder(item_tp)
    return lambda value: _items(itertools.repeat(item), _array(value, ()))


def _dict(key_tp: Any, value_tp: Any) -> Decoder:
    key, item = _decoder(key_tp), _decoder(value_tp)

    def decode_dict(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _Invalid(f"is {_kind(value)}, not an object")
        out = {}
        for k, v in value.items():
            try:
                key(k)
            except _Invalid as e:
                raise e.at(" key") from None
            try:
                out[k] = item(v)
            except _Invalid as e:
                raise e.at(f".{str(k)[:40]}") from None
        return out

    return decode_dict


_INT = frozenset({int})


def _int_items(value: list[Any], meta: tuple[Any, ...]) -> tuple[int, ...]:
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
    one = _decoder(Annotated[int, *meta] if meta else int)
    for i in odd:  # refused, or an integral float (12345.0) read as the integer it is
        try:
            items[i] = one(items[i])
        except _Invalid as e:
            raise e.at(f"[{i}]") from None
    return tuple(items)


def _check_meta(value: Any, meta: tuple[Any, ...]) -> None:
    import re

    for m in meta:
        if isinstance(m, Range):
            if m.minimum is not None and value < m.minimum:
                raise _Invalid(f"{_short(value)} is below {m.minimum:g}")
            if m.maximum is not None and value > m.maximum:
                raise _Invalid(f"{_short(value)} is above {m.maximum:g}")
        elif isinstance(m, MaxLength):
            if len(value) > m.count:
                raise _Invalid(f"is {len(value):,} characters long, over the limit of {m.count} "
                               f"({value[:40]!r}...)")
        elif isinstance(m, Pattern):
            if not re.fullmatch(m.regex, value):
                raise _Invalid(f"{_short(value)} does not match {m.regex}")
        elif isinstance(m, MinItems):
            if len(value) < m.count:
                raise _Invalid(f"has {len(value)} items, fewer than {m.count}")


@cache
def _plan(cls: type[Record]) -> tuple[tuple[tuple[str, Decoder, bool], ...], frozenset[str], bool]:
    """A record's fields (name, decoder, optional), their names, and whether it keeps key order."""
    fields = tuple((f.name, _decoder(tp), _is_optional(f)) for f, tp in _fields(cls))
    return fields, frozenset(name for name, _, _ in fields), _keeps_order(cls)


def _fail(message: str) -> None:
    raise _Invalid(message)


def _decode_record(cls: type[Record], value: Any) -> Record:
    if not isinstance(value, dict):
        raise _Invalid(f"is {_kind(value)}, not an object")
    fields, known, keeps_order = _plan(cls)
    kw: dict[str, Any] = {}
    name = ""
    try:
        for name, decode_field, optional in fields:
            if name in value:
                kw[name] = decode_field(value[name])
            elif not optional:
                raise _Invalid("is missing")
    except _Invalid as e:
        raise e.at(f".{name}") from None
    extra = {k: v for k, v in value.items() if k not in known} if len(value) > len(kw) else {}
    if extra and cls.CLOSED:
        unknown = sorted(str(k) for k in extra)[0]
        raise _Invalid(f"field {_short(unknown)} (fields: {', '.join(sorted(known))})", lead="unknown ")
    nulls = frozenset(k for k, v in value.items() if v is None and k in known)
    kept = {"order": tuple(value)} if keeps_order else {}
    record = cls(**kw, extra=extra, nulls=nulls, **kept)  # type: ignore[call-arg]
    record.check(value, _fail)
    return record.derive()


@cache
def _keeps_order(cls: type) -> bool:
    return any(f.name == "order" for f in dataclasses.fields(cls))


def decode(cls: type[Record], data: Any, where: str, what: str = "receipt") -> Any:
    """Check ``data`` against ``cls`` and build the record; one-line UsageError on any problem."""
    try:
        return _decode_record(cls, data)
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
