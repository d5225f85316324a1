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
    Row,
    caption,
    cases_in_order,
    check_same_contract,
    ellipsize,
    flag_handles,
    flag_marker,
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


def _panel(ax: Any, here: Sequence[Row], unit: Any, multi: bool, first_col: bool, case: str) -> None:
    """One case: each row's ECDF, its p50 (marker by the row's flags) and p99 marked."""
    vals = [unit(v) for r in here for v in r.samples_ns]
    log = wide_spread(vals, 10.0)
    set_value_axis(ax, log)
    if not log:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
    for r in here:
        if not r.samples_ns:
            continue
        colour = runner_colour(r.runner)
        ls = RECEIPT_LINESTYLES[r.receipt % len(RECEIPT_LINESTYLES)]
        x = np.sort(np.asarray(r.samples_ns, dtype=float)) / unit.scale
        y = np.arange(1, len(x) + 1) / len(x)
        alpha = 1.0 if r.valid else 0.55
        ax.step(x, y, where="post", color=colour, ls=ls, lw=1.7 if r.valid else 1.0, alpha=alpha, zorder=3,
                gid=f"{r.label}/{r.runner}/{r.case}/ecdf")
        for key, q, marker in (("p50_ns", 0.5, flag_marker(r)), ("p99_ns", 0.99, "^")):
            v = r.stat(key)
            if isinstance(v, (int, float)):
                ax.plot([unit(v)], [q], marker=marker, ms=6 if marker == "o" else 7, color=colour,
                        mec="white", mew=0.8, ls="", zorder=4, alpha=alpha,
                        gid=f"{r.label}/{r.runner}/{r.case}/{key}")
    for q in (0.5, 0.99):
        ax.axhline(q, color="#bbbbbb", lw=0.7, ls=":", zorder=1)
    ax.set_ylim(0, 1.02)
    counts = sorted({len(r.samples_ns) for r in here if r.samples_ns})
    n = "" if not counts else f"n = {counts[0]}" if len(counts) == 1 else f"n = {counts[0]}–{counts[-1]}"
    ax.set_title(case, fontsize=BASE_FONT + 1, fontweight="bold", loc="left")
    ax.set_title(n, fontsize=BASE_FONT - 1, loc="right", color="#555555")
    ax.set_xlabel(f"latency ({unit.name})" + (", log scale" if log else ""), fontsize=BASE_FONT)
    if first_col:
        ax.set_ylabel("fraction of samples ≤ x", fontsize=BASE_FONT)
    ax.grid(color="#ececec", lw=0.7, zorder=0)
    ax.tick_params(labelsize=BASE_FONT)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _legend_handles(receipts: Sequence[LabelledReceipt], rows: Sequence[Row], multi: bool) -> list[Any]:
    """Once for the whole figure: runners, rows without samples, quantile and flag markers, receipts."""
    from matplotlib.lines import Line2D

    handles: list[Any] = [Line2D([], [], color=runner_colour(n), lw=1.7, label=n)
                          for n in dict.fromkeys(r.runner for r in rows if r.samples_ns)]
    cases = {x.case for x in rows}
    notvalid: dict[tuple[str, str, bool], list[Row]] = {}
    for r in rows:
        if not r.valid:
            notvalid.setdefault((r.name(multi), r.status, bool(r.samples_ns)), []).append(r)
    for (name, status, drawn), rs in notvalid.items():
        where = "every case" if len({x.case for x in rs}) == len(cases) else ", ".join(x.case for x in rs)
        text = f"{ellipsize(name, 30)} {status}: {short_reason(rs[0].reasons, 60)} ({where})"
        handles.append(Line2D([], [], color=runner_colour(rs[0].runner), lw=1.0, alpha=0.55, label=text)
                       if drawn else Line2D([], [], color="#9a9a9a", ls="", marker="x", label=text))
    handles += [Line2D([], [], color="#444444", marker="o", ls="", label="p50"),
                Line2D([], [], color="#444444", marker="^", ls="", label="p99")]
    handles += flag_handles(rows)
    if multi:
        handles += [Line2D([], [], color="#444444", ls=RECEIPT_LINESTYLES[i % len(RECEIPT_LINESTYLES)],
                           label=ellipsize(rec.label, 40)) for i, rec in enumerate(receipts)]
    return handles


def figure(receipts: Sequence[LabelledReceipt]) -> Figure:
    """One panel per case: the empirical CDF of the region's samples for every runner; one legend."""
    check_same_contract(receipts)
    rows = rows_of(receipts)
    multi = len(receipts) > 1
    cases = cases_in_order(rows)
    unit = time_unit(v for r in rows for v in r.samples_ns)
    ncols = min(3, len(cases))
    nrows = math.ceil(len(cases) / ncols)
    panel_w, panel_h = 4.6, 3.3
    handles = _legend_handles(receipts, rows, multi)
    legend_rows = math.ceil(len(handles) / 3)
    top_in, bottom_in = 0.95, 0.75 + 0.22 * legend_rows
    block_h = panel_h + 0.8
    width = 0.7 + ncols * (panel_w + 0.35)
    height = top_in + nrows * block_h + bottom_in
    fig = new_figure(width, height)
    for i, case in enumerate(cases):
        col, line = i % ncols, i // ncols
        x0 = 0.7 + col * (panel_w + 0.35)
        y0 = height - top_in - line * block_h - panel_h - 0.1
        ax = fig.add_axes((x0 / width, y0 / height, panel_w / width, panel_h / height))
        _panel(ax, [r for r in rows if r.case == case], unit, multi, col == 0, case)
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.3 / height),
               ncol=min(3, len(handles)), fontsize=BASE_FONT, frameon=False)
    title(fig, "Latency distribution (empirical CDF of the timed region)", receipts, top_in)
    caption(fig, "Every sample of the contract's region; faded lines are invalid rows, rows without "
                 "samples (failed) are listed in the legend.")
    return fig
