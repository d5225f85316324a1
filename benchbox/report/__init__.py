"""``benchbox report``: a static site of a receipt store's history.

An index of change points (regressions first) and the latest value of every series, and
one page per (task, contract): for every (case, runner) a uPlot chart of p50 and p99 with
their intervals over commits, change points found by Apache Otava, each judged by the diff
engine on the runs either side of it. Imports polars (through the store) but never torch.
"""

from __future__ import annotations

from pathlib import Path

from benchbox.receipts.diff import DiffOptions
from benchbox.report.changepoints import Detector
from benchbox.report.history import History, analyze
from benchbox.report.site import ReportResult, write_site
from benchbox.store import Store

__all__ = ["Detector", "History", "ReportResult", "analyze", "build_report"]


def build_report(store_root: Path, out: Path, options: DiffOptions | None = None,
                 detector: Detector | None = None, commit_url: str | None = None) -> ReportResult:
    """Analyse the store at ``store_root`` and write its site into ``out``.

    ``commit_url``: a template with ``{commit}`` that links every commit shown.
    """
    from benchbox.report.site import check_commit_url

    check_commit_url(commit_url)  # before the analysis: a bad template is refused at once
    root = Path(store_root)
    if not root.is_dir():
        from benchbox.errors import UsageError

        raise UsageError(f"{root}: no such receipt store")
    store = Store(root)
    history = analyze(store, options, detector)
    if not history.pages:
        from benchbox.errors import UsageError

        raise UsageError(f"{root}: the store holds no receipts (benchbox store add RECEIPT...)")
    return write_site(history, store, Path(out), commit_url)
