"""The comparisons a receipt holds: each runner against the run's baseline runner."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchbox.receipts.record import Base, Fail, Status
from benchbox.typed import required, spec

# -- comparisons between the runners of one run --------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ComparisonRow(Base):
    """One runner against the baseline runner, for one case."""

    case: str = required()
    runner: str = required()
    baseline: str | None
    p50_ratio: float = required()
    p99_ratio: float | None
    p50_ratio_ci: tuple[float, float] | None
    p99_ratio_ci: tuple[float, float] | None
    p50_verdict: str | None
    #: why the verdict (for ``unreliable``: the conditions; receipts may lack it)
    reason: str | None


@dataclass(frozen=True, kw_only=True)
class Excluded(Base):
    """A row left out of the comparisons, and why."""

    runner: str = required()
    case: str = required()
    status: Status = required()
    reasons: tuple[str, ...] | None


@dataclass(frozen=True, kw_only=True)
class Comparisons(Base):
    """Each runner against the run's baseline runner, per case (valid rows only)."""

    baseline: str | None = spec()
    rows: tuple[ComparisonRow, ...] = spec(default=())
    excluded: tuple[Excluded, ...] = spec(default=())

    def check(self, raw: Mapping[str, Any], fail: Fail) -> None:
        if self.rows and self.baseline is None:
            fail("baseline missing")


