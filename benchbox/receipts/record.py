"""What every receipt record shares: the base record and the value types of its fields."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from benchbox.contracts import TIMELINE
from benchbox.receipts.typed import MaxLength, Pattern, Range, Record

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
                 "summary ")

STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True, kw_only=True)
class Base(Record):
    """A receipt record: the keys it does not declare in ``extra``, explicit nulls in ``nulls``."""

    extra: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    nulls: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

