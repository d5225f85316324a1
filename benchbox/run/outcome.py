"""What a run returns: its receipts and where they were written."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchbox.receipts.model import Receipt
    from benchbox.run.output import Output


@dataclass
class RunOutcome:
    """The receipt and where it was written (the first contract's), and those of the others."""

    path: Path
    receipt: Receipt
    others: list[RunOutcome] = field(default_factory=list)
    #: a write failed: what happened and where the receipts went instead (None: written at ``path``)
    problem: str | None = None
    #: False when no write succeeded after the failure: the results exist only in ``receipt``
    saved: bool = True

    @property
    def all(self) -> list[RunOutcome]:
        return [self, *self.others]

    @property
    def ok(self) -> bool:
        return all(r.status == "valid" for o in self.all for r in o.receipt.results)

    @classmethod
    def of(cls, output: Output) -> RunOutcome:
        """The outcome of the receipts ``output`` holds, the first contract's first."""
        first, *others = [cls(p, r, problem=output.problem, saved=not output.in_memory)
                          for p, r in zip(output.paths, output.receipts)]
        first.others = others
        return first
