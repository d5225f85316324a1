"""The Python API: run, load, compare, draw and export, as the command line does.

Every function here is what a ``benchbox`` command calls; the command line only parses
options, renders the result and picks the exit code. Import it as ``import benchbox``
and call ``benchbox.run(...)``, ``benchbox.load_receipt(...)``, ``benchbox.diff(...)``,
``benchbox.plot(...)``, ``benchbox.export(...)``. Errors that a user can fix are
:class:`benchbox.errors.UsageError` (one line, naming the field or file).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbox.errors import UsageError

if TYPE_CHECKING:
    from benchbox.receipts.diff import DiffResult
    from benchbox.receipts.model import Receipt
    from benchbox.run.config import RunConfig
    from benchbox.run.outcome import RunOutcome
    from benchbox.run.progress import Reporter

PathLike = str | Path


def run(config: RunConfig | None = None, /, *, reporter: Reporter | None = None,
        progress: Callable[[str], None] | None = None, **fields: Any) -> RunOutcome:
    """Measure runners × cases under one or more timing contracts; write and return the receipts.

    The run itself: :func:`benchbox.run.call.run` (what ``help(benchbox.run)`` shows), with
    the same arguments: a :class:`~benchbox.run.config.RunConfig` or its fields as keywords,
    ``reporter`` or ``progress``. Returns a :class:`~benchbox.run.outcome.RunOutcome`.
    """
    from benchbox.run.call import run as run_fields

    return run_fields(config, reporter=reporter, progress=progress, **fields)


def load_receipt(path: PathLike) -> Receipt:
    """A receipt from its JSON file: checked, and migrated from older schema versions."""
    from benchbox import receipts

    return receipts.load_receipt(path)


def diff(base: PathLike | Receipt, head: PathLike | Receipt, *, threshold: float | None = None,
         metric: str | None = None, alpha: float | None = None, accept: Sequence[str] = (),
         drift: float | None = None) -> DiffResult:
    """Compare two receipts (paths or loaded) row by row, as ``benchbox diff`` does.

    ``threshold`` is a fraction (0.05 = 5%); ``metric`` is ``p50``, ``p99`` or ``both``;
    ``threshold``, ``metric`` and ``alpha`` left out (None) take
    :class:`~benchbox.receipts.diff.DiffOptions`' defaults;
    ``accept`` names kinds of difference to compare across (device, model, options,
    incomplete, noisy, unsettled, cpu, load, gpu, versions, machine, layout, pacing); ``drift`` is the
    run-to-run spread (sd of a process's log-quantile, 0.05 ≈ 5%) to take for a side of one
    process. The result's ``rows`` carry the verdicts; ``exit_code`` is 1 on a regression, 3
    when no regression was found but some rows were unreliable or none could be judged.
    Receipts under different contracts raise
    :class:`~benchbox.receipts.diff.ComparisonRefused`.
    """
    from benchbox.receipts.diff import DiffOptions, accept_kinds, diff_receipts

    opts = DiffOptions(**_given(threshold=threshold, metric=metric, alpha=alpha, drift=drift),
                       accept=accept_kinds(accept))
    names = [str(x) if isinstance(x, (str, Path)) else label for x, label in ((base, "BASE"), (head, "HEAD"))]
    return diff_receipts(_loaded(base), _loaded(head), opts, *names)


def plot(receipts: PathLike | Sequence[PathLike], output: PathLike, kind: str = "quantiles",
         threshold: float | None = None, *, metric: str | None = None, accept: Sequence[str] = ()) -> Path:
    """Draw a figure from receipt files and save it (``.png`` or ``.svg``); return its path.

    ``kind``: ``quantiles`` (p50/p99 per case), ``stages`` (per-stage medians with the
    contract's region), ``ecdf`` (distributions), ``diff`` (two receipts: BASE, HEAD; judged
    as :func:`diff` judges them, with ``threshold``, ``metric`` and ``accept``, by default
    :class:`~benchbox.receipts.diff.DiffOptions`') or ``sweep``
    (a sweep's index or its receipts: latency against load).
    """
    from benchbox.plots import render
    from benchbox.receipts.diff import DiffOptions, accept_kinds

    paths = [receipts] if isinstance(receipts, (str, Path)) else list(receipts)
    opts = None
    if kind == "diff":
        opts = DiffOptions(**_given(threshold=threshold, metric=metric), accept=accept_kinds(accept))
    return render(paths, output, kind, diff_options=opts)


def export(receipt: PathLike | Receipt, fmt: str, output: PathLike | None = None) -> Path:
    """Write a receipt's raw samples as ``pyperf``, ``csv`` or ``parquet``; return the path.

    Without ``output`` the file goes next to the receipt (``run.pyperf.json``, ``run.csv``...).
    """
    from benchbox.receipts.export import default_output, export_receipt

    if output is None:
        if not isinstance(receipt, (str, Path)):
            raise UsageError("benchbox.export: give an output path for a loaded receipt")
        output = default_output(receipt, fmt) if fmt in ("pyperf", "csv", "parquet") else Path("-")
    return export_receipt(_loaded(receipt), fmt, output)


def _given(**values: Any) -> dict[str, Any]:
    """The values a caller gave (None: the declared default)."""
    return {k: v for k, v in values.items() if v is not None}


def _loaded(r: PathLike | Receipt) -> Receipt:
    return load_receipt(r) if isinstance(r, (str, Path)) else r
