"""``quantiles``: p50 and p99 per case and runner, with intervals and ratios to the baseline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from benchbox.plots._common import (
    BASE_FONT,
    INVALID_COLOUR,
    LabelledReceipt,
    Row,
    baseline_of,
    caption,
    check_same_contract,
    grouped_slots,
    hatch_band,
    new_figure,
    rows_of,
    runner_colour,
    set_value_axis,
    short_reason,
    status_handles,
    style_row_axis,
    time_unit,
    title,
    wide_spread,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

QUANTS = (("p50", "p50_ns", "p50_ci_ns"), ("p99", "p99_ns", "p99_ci_ns"))


def _ratio_text(row: Row, rows: Sequence[Row], baseline: str | None, key: str) -> str:
    """'0.52× torch-compile', 'baseline', or why there is no ratio."""
    if baseline is None or not row.valid:
        return ""
    if row.runner == baseline:
        return "baseline"
    base = [r for r in rows if r.receipt == row.receipt and r.case == row.case and r.runner == baseline]
    if not base:
        return ""
    if not base[0].valid:
        return f"no ratio: {baseline} {base[0].status}"
    b, v = base[0].stat(key), row.stat(key)
    if not b or v is None:
        return ""
    return f"{v / b:.2f}× {baseline}"


def _extent(ax: Any, lo: float, hi: float, log: bool, note_frac: float) -> None:
    """Limits that leave ``note_frac`` of the axis width on the right for the per-point notes."""
    pad = note_frac / max(1.0 - note_frac - 0.05, 0.2)
    if log:
        a, b = math.log10(lo), math.log10(hi)
        span = max(b - a, 0.3)
        ax.set_xlim(10 ** (a - 0.05 * span), 10 ** (b + pad * span))
    else:
        span = max(hi - lo, 0.1 * hi)
        ax.set_xlim(max(0.0, lo - 0.05 * span), hi + pad * span)


def figure(receipts: Sequence[LabelledReceipt]) -> Figure:
    """Per case, p50 and p99 of every runner with 95% intervals; invalid and failed rows marked."""
    from matplotlib.lines import Line2D

    check_same_contract(receipts)
    rows = rows_of(receipts)
    multi = len(receipts) > 1
    slots = grouped_slots(rows)
    baselines = {i: baseline_of(r.data) for i, r in enumerate(receipts)}
    bad = [r for r in rows if not r.valid]

    values = [v for r in rows if r.measured for _, k, ci in QUANTS
              for v in [r.stat(k), *(r.stat(ci) or [])] if v]
    unit = time_unit(values)

    label_chars = max(len(s.case) if s.row is None else
                      len(s.row.name(multi)) + (0 if s.row.valid else len(s.row.status) + 3)
                      for s in slots)
    left_in = 0.35 + 0.068 * label_chars
    notes_in = 3.3 if bad else 0.0
    panel_in = 4.1
    width = left_in + 2 * panel_in + 0.45 + notes_in + 0.3
    plot_h = 0.27 * (max(s.y for s in slots) + 1.2)
    top_in, bottom_in = 0.95, 1.25
    height = top_in + plot_h + bottom_in
    fig = new_figure(width, height)
    fb, fh = bottom_in / height, plot_h / height

    axes = []
    x = left_in
    for _ in QUANTS:
        axes.append(fig.add_axes((x / width, fb, panel_in / width, fh)))
        x += panel_in + 0.3
    for (qname, key, cikey), ax in zip(QUANTS, axes):
        pts = [v for r in rows if r.measured
               for v in [r.stat(key), *(r.stat(cikey) or [])] if v]
        pts_u = [unit(v) for v in pts] or [1.0]
        log = wide_spread(pts_u)
        set_value_axis(ax, log, dense=math.log10(max(pts_u) / min(pts_u)) < 1.5)
        note_chars = 0
        for s in slots:
            r = s.row
            if r is None:
                continue
            if not r.valid:
                hatch_band(ax, s.y, r.status)
            if not r.measured:
                continue
            v = unit(r.stat(key))
            ci = r.stat(cikey)
            colour = runner_colour(r.runner) if r.valid else INVALID_COLOUR
            if ci is not None:
                err = [[max(0.0, v - unit(ci[0]))], [max(0.0, unit(ci[1]) - v)]]  # p50 may lie outside
                ax.errorbar([v], [s.y], xerr=err, fmt="o",
                            color=colour, ms=6, capsize=3, lw=1.4, zorder=3)
                right = unit(ci[1])
            else:
                ax.plot([v], [s.y], "o", ms=7, mfc="white", mec=colour, mew=1.6, zorder=3)
                right = v
            notes = []
            if ci is None:
                notes.append("CI unresolved")
            ratio = _ratio_text(r, rows, baselines[r.receipt], key)
            if ratio:
                notes.append(ratio)
            if not r.valid:
                notes.append(r.status)
            if notes:
                note_chars = max(note_chars, len("  ·  ".join(notes)))
                ax.annotate("  ·  ".join(notes), (right, s.y), xytext=(5, 0), textcoords="offset points",
                            va="center", ha="left", fontsize=BASE_FONT - 1,
                            color="#222222" if r.valid else "#666666",
                            style="normal" if ci is not None else "italic")
        _extent(ax, min(pts_u), max(pts_u), log, min(0.6, (0.058 * note_chars + 0.15) / panel_in))
        ax.set_xlabel(f"{qname} latency ({unit.name}), 95% CI", fontsize=BASE_FONT)
        ax.set_title(qname, fontsize=BASE_FONT + 1, loc="left")
        ax.grid(axis="x", which="major", color="#e6e6e6", lw=0.8, zorder=0)
        ax.tick_params(labelsize=BASE_FONT)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        style_row_axis(ax, slots, multi, labels=ax is axes[0])

    if bad:
        nx = left_in + 2 * panel_in + 0.6
        nax = fig.add_axes((nx / width, fb, notes_in / width, fh), sharey=axes[0])
        nax.set_axis_off()
        nax.set_title("status", fontsize=BASE_FONT + 1, loc="left")
        limit = int(notes_in / 0.058)
        for s in slots:
            if s.row is not None and not s.row.valid:
                text = f"{s.row.status}: {short_reason(s.row.reasons, limit - len(s.row.status) - 2)}"
                nax.text(0.0, s.y, text, va="center", ha="left", fontsize=BASE_FONT - 1,
                         color="#444444", transform=nax.get_yaxis_transform())

    handles: list[Any] = [Line2D([], [], color=runner_colour(n), marker="o", lw=1.4, label=n)
                          for n in dict.fromkeys(r.runner for r in rows)]
    if any(r.measured and any(r.stat(ci) is None for _, _, ci in QUANTS) for r in rows):
        handles.append(Line2D([], [], ls="", marker="o", mfc="white", mec="#333333", mew=1.6,
                              label="CI unresolved (too few samples)"))
    sh = status_handles()
    handles += [sh[s] for s in ("invalid", "failed") if any(r.status == s for r in rows)]
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.32 / height),
               ncol=min(len(handles), 4), fontsize=BASE_FONT, frameon=False)
    title(fig, "p50 and p99 latency per case", receipts, top_in)
    base_note = ", ".join(sorted({b for b in baselines.values() if b}))
    caption(fig, "Points: sample quantiles of the contract's region; bars: exact 95% distribution-free "
                 f"intervals. Ratios are against each receipt's baseline runner ({base_note or 'none'}); "
                 "invalid and failed rows are never part of a ratio.")
    return fig
