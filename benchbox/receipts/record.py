"""What every receipt record shares: the base record and the value types of its fields."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal

from benchbox.contracts import TIMELINE
from benchbox.typed import MaxLength, Pattern, Range, Record, spec

SCHEMA_VERSION = 2
#: Sample values are nanoseconds in a signed 64-bit integer.
MAX_NS = 2**63 - 1

#: The longest task, size, dtype, case, runner or contract name a receipt may carry (as a task's
#: names are checked when it runs: ``benchbox.tasks.MAX_NAME_LENGTH``): names are table cells.
MAX_NAME_LENGTH = 200

Ns = Annotated[int, Range(0, MAX_NS)]
Name = Annotated[str, MaxLength(MAX_NAME_LENGTH)]
Count = Annotated[int, Range(0)]
Sha256 = Annotated[str, Pattern("[0-9a-f]{64}")]
Status = Literal["valid", "invalid", "failed"]
StageName = Literal["queue", "parse", "preprocess", "h2d", "compute", "d2h", "reduce", "answer", "serialize"]
Clock = Literal["host", "device"]
Interval = tuple[Ns, Ns]
Fail = Callable[[str], None]

assert tuple(StageName.__args__) == TIMELINE  # type: ignore[attr-defined]

#: Rules the decoder enforces that a JSON Schema cannot state (the start of their messages).
BEYOND_SCHEMA = ("round_sizes add up to", "hash ", "first is", "last is", "arrival ", "round_process ",
                 "process_probe_ns ",
                 "summary ")

STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True, kw_only=True)
class Base(Record):
    """A receipt record: the keys it does not declare in ``extra``, explicit nulls in ``nulls``.

    A field declared without a default is a fact a writer may leave out: optional, and left out
    when None (``spec(omit_none=True)``); the others say what they are (``required()``, ``spec()``).
    """

    extra: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    nulls: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, annotation in inspect.get_annotations(cls).items():
            if name not in cls.__dict__ and str(annotation).split("[")[0].split(".")[-1] != "ClassVar":
                setattr(cls, name, spec(omit_none=True))

    def __post_init__(self) -> None:
        for name, tp in _record_fields(type(self)):
            value = getattr(self, name)
            if isinstance(value, Mapping):  # a plain dict given in code: checked into its record
                object.__setattr__(self, name, tp.of(value))

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Any:
        """A record from a dict built in code (records inside it written out first)."""
        return super().of(_unrecord(data))


def _unrecord(x: Any) -> Any:
    if isinstance(x, Record):
        return x.to_json()
    if isinstance(x, Mapping):
        return {k: _unrecord(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_unrecord(v) for v in x]
    return x


@cache
def _record_fields(cls: type) -> tuple[tuple[str, type[Record]], ...]:
    """The fields of ``cls`` that hold one record (or None): name and record type."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        options = typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else (tp,)
        out += [(f.name, a) for a in options if isinstance(a, type) and issubclass(a, Record)]
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class Facts(Base):
    """A record of facts a run collected (environment, settings, noise, ...): it keeps the key
    order of the document it came from, so it is written back byte for byte.

    ``get``, ``[]`` and ``keys`` read it by key as the dict it replaced was read; code reads the
    attributes, these serve only callers not yet changed to them.
    """

    order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def _declared(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self) if f.name not in ("extra", "nulls", "order"))

    def get(self, key: str, default: Any = None) -> Any:
        if key in self._declared():
            value = getattr(self, key)
            return default if value is None and key not in self.nulls else value
        return self.extra.get(key, default)

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return self.get(key)

    def keys(self) -> list[str]:
        return list(self.to_json())

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())
