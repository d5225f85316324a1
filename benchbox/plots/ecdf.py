"""``ecdf``: the latency distribution of each runner per case, p50 and p99 marked."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from benchbox.plots._common import (
    BASE_FONT,
    RECEIPT_LINESTYLES,
    LabelledReceipt,
    caption,
    cases_in_order,
    check_same_contract,
    new_figure,
    rows_of,
    runner_colour,
    set_value_axis,
    short_reason,
    time_unit,
    title,
    wide_spread,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def figure(receipts: Sequence[LabelledReceipt]) -> Figure:
    """One panel per case: the empirical CDF of the region's samples for every runner."""
    from matplotlib.lines import Line2D

    check_same_contract(receipts)
    rows = rows_of(receipts)
    multi = len(receipts) > 1
    cases = cases_in_order(rows)
    unit = time_unit(v for r in rows for v in r.samples_ns)
    ncols = min(3, len(cases))
    nrows = math.ceil(len(cases) / ncols)
    panel_w, panel_h = 4.6, 3.3
    top_in, bottom_in = 0.95, 0.75
    entries = max(sum(1 for r in rows if r.case == c) for c in cases)
    block_h = panel_h + 0.75 + 0.2 * entries + 0.25
    width = 0.7 + ncols * (panel_w + 0.35)
    height = top_in + nrows * block_h + bottom_in
    fig = new_figure(width, height)

    for i, case in enumerate(cases):
        col, line = i % ncols, i // ncols
        x0 = 0.7 + col * (panel_w + 0.35)
        y0 = height - top_in - line * block_h - panel_h - 0.3
        ax = fig.add_axes((x0 / width, y0 / height, panel_w / width, panel_h / height))
        here = [r for r in rows if r.case == case]
        vals = [unit(v) for r in here for v in r.samples_ns]
        log = wide_spread(vals, 10.0)
        lo_hi = (max(min(vals), 1e-12), max(max(vals), 1e-12)) if vals else (1.0, 1.0)  # all zero: no span
        set_value_axis(ax, log, dense=bool(vals) and math.log10(lo_hi[1] / lo_hi[0]) < 1.5)
        notes = []
        for r in here:
            colour = runner_colour(r.runner)
            ls = RECEIPT_LINESTYLES[r.receipt % len(RECEIPT_LINESTYLES)]
            name = r.name(multi)
            if not r.samples_ns:
                notes.append(f"{name}: {r.status}: {short_reason(r.reasons, 72 - len(name))}")
                continue
            x = np.sort(np.asarray(r.samples_ns, dtype=float)) / unit.scale
            y = np.arange(1, len(x) + 1) / len(x)
            label = f"{name} (n={len(x)})" + ("" if r.valid else f" [{r.status_note()}]")
            ax.step(x, y, where="post", color=colour, ls=ls, lw=1.7 if r.valid else 1.0,
                    alpha=1.0 if r.valid else 0.55, label=label, zorder=3)
            for key, q, marker in (("p50_ns", 0.5, "o"), ("p99_ns", 0.99, "^")):
                v = r.stat(key)
                if isinstance(v, (int, float)):
                    ax.plot([unit(v)], [q], marker=marker, ms=6, color=colour, mec="white", mew=0.8,
                            ls="", zorder=4, alpha=1.0 if r.valid else 0.55)
        for q in (0.5, 0.99):
            ax.axhline(q, color="#bbbbbb", lw=0.7, ls=":", zorder=1)
        ax.set_ylim(0, 1.02)
        ax.set_title(case, fontsize=BASE_FONT + 1, fontweight="bold", loc="left")
        ax.set_xlabel(f"latency ({unit.name})" + (", log scale" if log else ""), fontsize=BASE_FONT)
        if col == 0:
            ax.set_ylabel("fraction of samples ≤ x", fontsize=BASE_FONT)
        ax.grid(color="#ececec", lw=0.7, zorder=0)
        ax.tick_params(labelsize=BASE_FONT)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        handles: list[Any] = list(ax.get_legend_handles_labels()[0])
        for n in notes:
            handles.append(Line2D([], [], color="#9a9a9a", ls="", marker="x", label=n))
        if handles:
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(-0.02, -0.6 / panel_h),
                      fontsize=BASE_FONT - 1.5, frameon=False, borderaxespad=0.0)

    marks = [Line2D([], [], color="#444444", marker="o", ls="", label="p50"),
             Line2D([], [], color="#444444", marker="^", ls="", label="p99")]
    if multi:
        marks += [Line2D([], [], color="#444444", ls=RECEIPT_LINESTYLES[i % len(RECEIPT_LINESTYLES)],
                         label=rec.label) for i, rec in enumerate(receipts)]
    fig.legend(handles=marks, loc="lower center", bbox_to_anchor=(0.5, 0.3 / height),
               ncol=len(marks), fontsize=BASE_FONT, frameon=False)
    title(fig, "Latency distribution (empirical CDF of the timed region)", receipts, top_in)
    caption(fig, "Every sample of the contract's region; faded lines are invalid rows, rows without "
                 "samples (failed) are listed in the legend.")
    return fig
