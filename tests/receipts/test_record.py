"""A receipt field declared without a default is a fact: optional, and left out when None."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import ClassVar

import pytest

from benchbox.errors import UsageError
from benchbox.receipts.record import Base
from benchbox.typed import decode, required, spec


@dataclass(frozen=True, kw_only=True)
class _Probe(Base):
    name: str = required()
    note: str | None
    kept: str | None = spec()
    LIMIT: ClassVar[int] = 3
    OTHER: typing.ClassVar[int] = 4


def test_a_field_without_a_default_may_be_absent_and_is_left_out_when_none() -> None:
    absent = decode(_Probe, {"name": "a"}, "probe")
    assert absent.note is None
    assert absent.to_json() == {"name": "a", "kept": None}
    assert decode(_Probe, {"name": "a", "note": None}, "probe").to_json() == {"name": "a", "note": None,
                                                                              "kept": None}
    assert decode(_Probe, {"name": "a", "note": "x"}, "probe").to_json() == {"name": "a", "note": "x",
                                                                             "kept": None}


def test_a_declared_default_and_a_required_field_keep_their_own_rule() -> None:
    with pytest.raises(UsageError, match="name: is missing"):
        decode(_Probe, {}, "probe")
    with pytest.raises(UsageError, match="note: is integer, not a string"):
        decode(_Probe, {"name": "a", "note": 1}, "probe")


def test_class_variables_are_not_made_fields() -> None:
    assert (_Probe.LIMIT, _Probe.OTHER) == (3, 4)
    assert [f.name for f in dataclasses.fields(_Probe)] == ["extra", "nulls", "name", "note", "kept"]
