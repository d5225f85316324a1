"""``quantiles``: p50 and p99 per case and runner, with intervals and ratios to the baseline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from benchbox.plots._common import (
    BASE_FONT,
    INVALID_COLOUR,
    LABEL_CHARS,
    LabelledReceipt,
    Row,
    baseline_of,
    caption,
    check_same_contract,
    drawn_rows,
    flag_handles,
    flag_marker,
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
    two_lines,
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


def _extent(ax: Any, lo: float, hi: float, log: bool) -> None:
    """Limits that fit the data: 8% of the span beyond each end (never below zero on a linear axis)."""
    if log:
        a, b = math.log10(lo), math.log10(hi)
        span = max(b - a, 0.3)
        ax.set_xlim(10 ** (a - 0.08 * span), 10 ** (b + 0.08 * span))
    else:
        span = max(hi - lo, 0.1 * hi)
        ax.set_xlim(max(0.0, lo - 0.08 * span), hi + 0.08 * span)


def _notes(row: Row, rows: Sequence[Row], baseline: str | None, key: str, resolved: bool) -> str:
    """What is written beside a point: unresolved interval, ratio to the baseline, status, flags."""
    notes = []
    if not resolved:
        notes.append("CI unresolved")
    ratio = _ratio_text(row, rows, baseline, key)
    if ratio:
        notes.append(ratio)
    if not row.valid:
        notes.append(row.status)
    notes += list(row.flags)
    return " · ".join(notes)


def _point(ax: Any, row: Row, y: float, key: str, cikey: str, unit: Any) -> bool:
    """One row's quantile with its interval, the marker by its flags; True when the interval exists."""
    v = unit(row.stat(key))
    ci = row.stat(cikey)
    colour = runner_colour(row.runner) if row.valid else INVALID_COLOUR
    marker = flag_marker(row)
    gid = f"{row.label}/{row.runner}/{row.case}/{key}"
    if ci is not None:  # (the p50 of an edited receipt may lie outside its own interval)
        err = [[max(0.0, v - unit(ci[0]))], [max(0.0, unit(ci[1]) - v)]]
        eb = ax.errorbar([v], [y], xerr=err, fmt=marker, color=colour, ms=6, capsize=3, lw=1.4, zorder=3)
        eb.lines[0].set_gid(gid)
        return True
    ax.plot([v], [y], marker, ms=7, mfc="white", mec=colour, mew=1.6, zorder=3, gid=gid)
    return False


def _panel(ax: Any, nax: Any, q: tuple[str, str, str], rows: Sequence[Row], slots: Sequence[Any],
           baselines: dict[int, str | None], unit: Any, multi: bool, first: bool) -> None:
    """One quantile's panel, and its notes column ``nax`` (ratios, flags) beside it."""
    qname, key, cikey = q
    pts = [v for r in rows if r.measured for v in [r.stat(key), *(r.stat(cikey) or [])] if v]
    pts_u = [unit(v) for v in pts] or [1.0]
    log = wide_spread(pts_u)
    set_value_axis(ax, log)
    for s in slots:
        r = s.row
        if r is None:
            continue
        if not r.valid:
            hatch_band(ax, s.y, r.status)
        if not r.measured:
            continue
        resolved = _point(ax, r, s.y, key, cikey, unit)
        text = _notes(r, rows, baselines[r.receipt], key, resolved)
        if text:
            nax.text(0.0, s.y, text, va="center", ha="left", fontsize=BASE_FONT - 1,
                     color="#222222" if r.valid else "#666666", style="normal" if resolved else "italic",
                     transform=nax.get_yaxis_transform())
    _extent(ax, min(pts_u), max(pts_u), log)
    ax.set_xlabel(f"{qname} latency ({unit.name}{', log scale' if log else ''}), 95% CI", fontsize=BASE_FONT)
    ax.set_title(qname, fontsize=BASE_FONT + 1, loc="left")
    ax.grid(axis="x", which="major", color="#e6e6e6", lw=0.8, zorder=0)
    ax.tick_params(labelsize=BASE_FONT)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    style_row_axis(ax, slots, multi, labels=first)


def _note_chars(rows: Sequence[Row], baselines: dict[int, str | None]) -> int:
    return max([len(_notes(r, rows, baselines[r.receipt], k, r.stat(ci) is not None))
                for r in rows if r.measured for _, k, ci in QUANTS] or [0])


def figure(receipts: Sequence[LabelledReceipt]) -> Figure:
    """Per case, p50 and p99 of every runner with 95% intervals; invalid, failed and flagged rows marked."""
    check_same_contract(receipts)
    rows, left_out = drawn_rows(rows_of(receipts))
    multi = len(receipts) > 1
    slots = grouped_slots(rows)
    baselines = {i: baseline_of(r.data) for i, r in enumerate(receipts)}
    bad = [r for r in rows if not r.valid]
    unit = time_unit(v for r in rows if r.measured for _, k, ci in QUANTS
                     for v in [r.stat(k), *(r.stat(ci) or [])] if v)

    label_chars = max(len(s.case) if s.row is None else
                      len(s.row.name(multi)) + (0 if s.row.valid else len(s.row.status) + 3)
                      for s in slots)
    left_in = 0.35 + 0.075 * min(label_chars, LABEL_CHARS)
    notes_w = 0.2 + 0.058 * _note_chars(rows, baselines)
    status_in = 3.3 if bad else 0.0
    panel_in = 3.6
    width = left_in + 2 * (panel_in + notes_w + 0.2) + status_in + 0.3
    plot_h = 0.27 * (max(s.y for s in slots) + 1.2)
    top_in, bottom_in = 0.95, 1.25 + 0.2 * (len(flag_handles(rows)) > 0)
    height = top_in + plot_h + bottom_in
    fig = new_figure(width, height)
    fb, fh = bottom_in / height, plot_h / height

    xs = [left_in + i * (panel_in + notes_w + 0.2) for i in range(len(QUANTS))]
    axes = [fig.add_axes((x / width, fb, panel_in / width, fh)) for x in xs]  # data panels first
    for i, (q, ax, x) in enumerate(zip(QUANTS, axes, xs)):
        nax = fig.add_axes(((x + panel_in + 0.05) / width, fb, notes_w / width, fh), sharey=ax)
        nax.set_axis_off()
        _panel(ax, nax, q, rows, slots, baselines, unit, multi, i == 0)
    first, x = axes[0], xs[-1] + panel_in + notes_w + 0.2
    if bad:
        _status_column(fig, first, slots, (x + 0.1) / width, fb, status_in / width, fh, status_in)
    _legend(fig, rows, height)
    title(fig, "p50 and p99 latency per case", receipts, top_in)
    base_note = ", ".join(sorted({b for b in baselines.values() if b}))
    caption(fig, "Points: sample quantiles of the contract's region; bars: exact 95% distribution-free "
                 f"intervals. Ratios are against each receipt's baseline runner ({base_note or 'none'}); "
                 "invalid and failed rows are never part of a ratio." + (f" {left_out}" if left_out else ""))
    return fig


def _status_column(fig: Any, ax: Any, slots: Sequence[Any], x: float, fb: float, w: float, fh: float,
                   width_in: float) -> None:
    nax = fig.add_axes((x, fb, w, fh), sharey=ax)
    nax.set_axis_off()
    nax.set_title("status", fontsize=BASE_FONT + 1, loc="left")
    limit = int(width_in / 0.058)
    for s in slots:
        if s.row is not None and not s.row.valid:
            text = f"{s.row.status}: {short_reason(s.row.reasons, 3 * limit)}"
            nax.text(0.0, s.y, two_lines(text, limit), va="center", ha="left",
                     fontsize=BASE_FONT - 1.5, linespacing=1.0, color="#444444",
                     transform=nax.get_yaxis_transform())


def _legend(fig: Any, rows: Sequence[Row], height: float) -> None:
    from matplotlib.lines import Line2D

    handles: list[Any] = [Line2D([], [], color=runner_colour(n), marker="o", lw=1.4, label=n)
                          for n in dict.fromkeys(r.runner for r in rows if r.measured)]
    if any(r.measured and any(r.stat(ci) is None for _, _, ci in QUANTS) for r in rows):
        handles.append(Line2D([], [], ls="", marker="o", mfc="white", mec="#333333", mew=1.6,
                              label="CI unresolved (too few samples)"))
    handles += flag_handles(rows)
    sh = status_handles()
    handles += [sh[s] for s in ("invalid", "failed") if any(r.status == s for r in rows)]
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.32 / height),
               ncol=min(len(handles), 4), fontsize=BASE_FONT, frameon=False)
