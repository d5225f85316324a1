"""``benchbox report``: a static site of a receipt store's history.

An index of change points (regressions first) and the latest value of every series, and
one page per (task, contract): for every (case, runner) a uPlot chart of p50 and p99 with
their intervals over commits, change points found by Apache Otava, each judged by the diff
engine on the runs either side of it. Imports polars (through the store) but never torch.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from benchbox.errors import UsageError
from benchbox.receipts.diff import DiffOptions
from benchbox.report.changepoints import Detector
from benchbox.report.history import History, analyze
from benchbox.report.site import SITE_MARKER, ReportResult, write_site
from benchbox.store import Store

__all__ = ["Detector", "History", "ReportResult", "analyze", "build_report", "check_output_place"]


def check_output_place(out: Path) -> None:
    """Refuse (UsageError), before any analysis, a place the site could not be written to: a
    file, a directory benchbox did not write, or a folder where nothing can be created."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / SITE_MARKER).exists():
        raise UsageError(f"{out}: not empty and not a site benchbox wrote; name a new or empty directory")
    parent = out.absolute().parent
    above = next((p for p in (parent, *parent.parents) if p.exists()), None)
    if above is not None and not above.is_dir():
        raise UsageError(f"{out}: cannot create the site: {above} is not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=f".{out.name}.probe.", dir=parent))
    except OSError as e:
        raise UsageError(f"{out}: cannot create the site: {e.strerror or e}") from None


def build_report(store_root: Path, out: Path, options: DiffOptions | None = None,
                 detector: Detector | None = None, commit_url: str | None = None) -> ReportResult:
    """Analyse the store at ``store_root`` and write its site into ``out``.

    ``commit_url``: a template with ``{commit}`` that links every commit shown. The template and
    the output place are checked first, and every stored receipt re-hashed (one edited since it
    was stored is refused, naming it), before the history is computed."""
    from benchbox.report.site import check_commit_url

    check_commit_url(commit_url)  # before the analysis: a bad template is refused at once
    root = Path(store_root)
    if not root.is_dir():
        raise UsageError(f"{root}: no such receipt store")
    check_output_place(Path(out))
    store = Store(root)
    store.verify()
    history = analyze(store, options, detector)
    if not history.pages:
        raise UsageError(f"{root}: the store holds no receipts (benchbox store add RECEIPT...)")
    return write_site(history, store, Path(out), commit_url)
