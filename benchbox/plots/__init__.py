"""Figures from receipts: quantiles, stages, ecdf, diff and sweep (matplotlib, headless).

Importing this package is cheap; matplotlib is imported when a figure is drawn.
Nothing here imports torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbox.errors import UsageError
from benchbox.plots._common import SAVE_DPI, LabelledReceipt, display_text, for_display, plain_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["KINDS", "FORMATS", "LabelledReceipt", "figure", "label_receipts", "render"]

#: kind → module that draws it
KINDS: dict[str, str] = {
    "quantiles": "benchbox.plots.quantiles",
    "stages": "benchbox.plots.stages",
    "ecdf": "benchbox.plots.ecdf",
    "diff": "benchbox.plots.diff",
    "sweep": "benchbox.plots.sweep",
}
FORMATS = (".png", ".svg")


def label_receipts(paths: Sequence[Path], receipts: Sequence[dict[str, Any]]) -> list[LabelledReceipt]:
    """Short, unique labels for receipts: the file stem, widened only where stems collide."""
    labels = [Path(p).stem for p in paths]
    if len(set(labels)) < len(labels):
        labels = [f"{Path(p).parent.name}/{Path(p).stem}" for p in paths]
    if len(set(labels)) < len(labels):
        labels = [f"{lab}#{i + 1}" for i, lab in enumerate(labels)]
    return [LabelledReceipt(lab, r) for lab, r in zip(labels, receipts)]


def figure(receipts: Sequence[LabelledReceipt], kind: str = "quantiles",
           threshold: float | None = None, diff_options: Any = None) -> Figure:
    """Draw one kind of figure from labelled receipts and return the matplotlib Figure
    (``threshold`` None: the diff figure judges with ``DiffOptions``' default, as ``diff`` does)."""
    if kind not in KINDS:
        raise UsageError(f"unknown plot kind '{kind}' (kinds: {', '.join(KINDS)})")
    if not receipts:
        raise UsageError("no receipts to plot")
    mod = importlib.import_module(KINDS[kind])
    shown = [LabelledReceipt(display_text(r.label), for_display(r.data)) for r in receipts]
    with plain_text():
        judged = {} if threshold is None else {"threshold": threshold}
        fig = mod.figure(shown, options=diff_options, **judged) if kind == "diff" else mod.figure(shown)
    _plain_log_ticks(fig)
    return fig


def _plain_log_ticks(fig: Figure) -> None:
    """Log-axis tick labels as plain numbers (20, 100, 0.5): matplotlib's default ones are
    mathtext, which is off here (names from receipts are drawn as given)."""
    from matplotlib.ticker import FuncFormatter, LogFormatterMathtext, NullFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(axis.get_major_formatter(), LogFormatterMathtext):
                axis.set_major_formatter(plain)
                axis.set_minor_formatter(NullFormatter())


def check_output(out: Path) -> str:
    """The output format from the file's extension (png or svg); anything else is refused."""
    suffix = Path(out).suffix.lower()
    if suffix not in FORMATS:
        raise UsageError(f"{out}: cannot tell the image format from '{suffix or 'no extension'}' "
                         f"(use .png or .svg)")
    return suffix[1:]


def render(paths: Sequence[str | Path], out: str | Path, kind: str = "quantiles",
           threshold: float | None = None, diff_options: Any = None) -> Path:
    """Load receipts, draw the figure, save it as PNG or SVG by ``out``'s extension."""
    from benchbox.receipts import load_receipt

    out = Path(out)
    fmt = check_output(out)
    if kind not in KINDS:
        raise UsageError(f"unknown plot kind '{kind}' (kinds: {', '.join(KINDS)})")
    ps = [Path(p) for p in paths]
    if kind == "sweep":  # a sweep's index stands for its receipts
        from benchbox.sweep import expand_index

        ps = expand_index(ps)
    fig = figure(label_receipts(ps, [load_receipt(p) for p in ps]), kind, threshold, diff_options)
    save(fig, out, fmt)
    return out


def save(fig: Figure, out: Path, fmt: str) -> None:
    """Write the figure; a missing folder or unwritable path is one clear line."""
    if not out.parent.is_dir():
        raise UsageError(f"{out}: folder {out.parent} does not exist")
    try:
        with plain_text():
            fig.savefig(out, format=fmt, dpi=SAVE_DPI, metadata={"Software": "benchbox"}
                        if fmt == "png" else {"Creator": "benchbox"})
    except OSError as e:
        raise UsageError(f"{out}: cannot write: {e.strerror or e}") from None
