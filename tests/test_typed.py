"""benchbox.typed: a declared (closed) record refuses keys it does not declare; an open one keeps them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from benchbox.errors import UsageError
from benchbox.typed import Declared, Record, decode, derived, encode, required, spec
from benchbox.typed.schema import json_schema


@dataclass(frozen=True, kw_only=True)
class Inner(Declared):
    size: int = spec(default=1)


@dataclass(frozen=True, kw_only=True)
class Outer(Declared):
    name: str = required()
    inner: Inner = spec(default_factory=Inner)


@dataclass(frozen=True, kw_only=True)
class Open(Record):
    name: str = required()
    extra: Mapping[str, Any] = field(default_factory=dict)
    nulls: frozenset[str] = frozenset()


def test_a_declared_record_refuses_an_unknown_key_naming_the_table_and_its_fields() -> None:
    with pytest.raises(UsageError) as e:
        decode(Outer, {"name": "x", "nmae": 1}, "f.toml", "plan")
    assert str(e.value) == "f.toml: invalid plan: unknown field 'nmae' (fields: inner, name)"
    with pytest.raises(UsageError) as e:
        decode(Outer, {"name": "x", "inner": {"sise": 2}}, "f.toml", "plan")
    assert str(e.value) == "f.toml: invalid plan: unknown inner field 'sise' (fields: size)"
    assert decode(Outer, {"name": "x", "inner": {"size": 2}}, "f.toml").inner.size == 2


def test_an_open_record_keeps_unknown_keys_and_writes_them_back() -> None:
    r = decode(Open, {"name": "x", "later": [1]}, "r.json")
    assert r.extra == {"later": [1]} and encode(r) == {"name": "x", "later": [1]}


def test_the_schema_of_a_declared_record_is_closed_and_an_open_one_is_not() -> None:
    schema = json_schema(Outer)
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Inner"]["additionalProperties"] is False
    assert "additionalProperties" not in json_schema(Open)


@dataclass(frozen=True, kw_only=True)
class Counted(Open):
    """A record with a field its document does not hold: derived, on decoding, from one it does."""

    length: int = derived(default=0)

    def derive(self) -> Counted:
        return Counted(name=self.name, extra=self.extra, nulls=self.nulls, length=len(self.name))


def test_a_derived_field_is_set_on_decoding_but_never_read_written_or_described() -> None:
    got = decode(Counted, {"name": "abc", "length": 99}, "f.json")
    assert got.length == 3 and got.extra == {"length": 99}  # a key of that name is the document's own
    assert encode(Counted(name="ab", length=5)) == {"name": "ab"}
    assert encode(got) == {"name": "abc", "length": 99}
    assert set(json_schema(Counted)["properties"]) == {"name"}


@dataclass(frozen=True, kw_only=True)
class IntFirst(Declared):
    x: int | float = required()


@dataclass(frozen=True, kw_only=True)
class FloatFirst(Declared):
    x: float | int = required()


def test_a_union_is_tried_in_its_declared_order_though_python_counts_both_orders_equal() -> None:
    # int | float == float | int, so a decoder kept by annotation must not be shared between them
    assert type(decode(IntFirst, {"x": 3.0}, "f").x) is int  # 3.0 is the integer 3 to the first
    assert type(decode(FloatFirst, {"x": 3.0}, "f").x) is float
    with pytest.raises(UsageError, match="x: is string, not an integer"):
        decode(IntFirst, {"x": "a"}, "f")  # the first alternative's refusal
    with pytest.raises(UsageError, match="x: is string, not a number"):
        decode(FloatFirst, {"x": "a"}, "f")
