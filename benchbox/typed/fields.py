"""The parts of a typed record's declaration: its fields' kinds (``spec``, ``required``,
``derived``) and the constraints an ``Annotated`` field may carry (``Range``, ``Pattern``,
``MaxLength``, ``MinItems``). Imported through :mod:`benchbox.typed`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


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
