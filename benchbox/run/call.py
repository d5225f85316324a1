"""A run from a :class:`~benchbox.run.config.RunConfig`, its fields given as keywords.

:func:`benchbox.api.run` and the callable ``benchbox.run`` package both call :func:`run`
here, so neither the package nor the API imports the other to be called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbox.errors import UsageError

if TYPE_CHECKING:
    from benchbox.run.config import RunConfig
    from benchbox.run.outcome import RunOutcome
    from benchbox.run.progress import Reporter


def run(config: RunConfig | None = None, /, *, reporter: Reporter | None = None,
        progress: Callable[[str], None] | None = None, **fields: Any) -> RunOutcome:
    """Measure runners × cases under one or more timing contracts; write and return the receipts.

    Pass a :class:`~benchbox.run.config.RunConfig`, or its fields as keywords (they
    override the config's when both are given)::

        outcome = benchbox.run(runners=("torch-eager",), cases=("invoice",), samples=50,
                               out="receipts/r.json")
        outcome.receipt.results[0].summary.p50_ns

    ``reporter`` receives the phases and progress (:class:`benchbox.run.progress.Reporter`);
    ``progress`` is a simpler callback that gets one line per step. A run prints nothing
    by itself. Returns a :class:`~benchbox.run.outcome.RunOutcome` (``path``, ``receipt``,
    ``all`` for several contracts, ``ok``).
    """
    from benchbox.run.config import RunConfig
    from benchbox.run.sequence import run as run_sequence

    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise UsageError(f"benchbox.run: unknown field {unknown[0]!r} (fields: {', '.join(sorted(known))})")
    if "out" in fields and fields["out"] is not None:
        fields["out"] = Path(fields["out"])
    for name in ("runners", "cases", "contracts"):
        if isinstance(fields.get(name), str):
            fields[name] = (fields[name],)
        elif fields.get(name) is not None:
            fields[name] = tuple(fields[name])
    cfg = dataclasses.replace(config, **fields) if config is not None else RunConfig(**fields)
    return run_sequence(cfg, progress or (lambda s: None), reporter=reporter)
