"""``stages``: where the time goes, per runner and case, with the contract's region outlined."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from benchbox.plots._common import (
    BASE_FONT,
    LABEL_CHARS,
    STAGE_COLOURS,
    LabelledReceipt,
    Measure,
    Row,
    caption,
    check_same_contract,
    drawn_rows,
    flag_handles,
    flag_marker,
    fmt_value,
    grouped_slots,
    hatch_band,
    new_figure,
    rows_of,
    set_value_axis,
    short_reason,
    stage_order,
    status_handles,
    style_row_axis,
    time_unit,
    title,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

BAR_H = 0.62
#: the gap between a bar's end and its note, in points
NOTE_GAP_PT = 6.0
#: a flagged row's marker sits this far right of its bar's end; its note starts after it (points)
MARK_AT_PT, MARK_ROOM_PT = 9.0, 14.0
NOTE_FONT = BASE_FONT - 1
#: the value axis ends at most this many times the longest bar; longer notes widen the panel
MAX_STRETCH = 2.0
PANEL_IN = 10.0


def _extent(m: dict[str, float], stages: Sequence[str], region: set[str]) -> tuple[float, float | None]:
    """A bar's total (the sum of its stage medians) and the region's share of it (None: all of it)."""
    total = sum(m.get(st, 0.0) for st in stages)
    inside = sum(m.get(st, 0.0) for st in stages if st in region)
    share = inside / total if total > 0 and len(region) < len(stages) and any(st in region for st in stages) \
        else None
    return total, share


def _note(r: Row, unit: Any, total: float, region_share: float | None) -> str:
    """What a bar's end says: the timed p50, the sum of stage medians, the region's share, flags."""
    note = f"sum {fmt_value(unit(total))} {unit.name}"
    p50 = r.stat("p50_ns")
    if isinstance(p50, (int, float)):
        note = f"timed p50 {fmt_value(unit(p50))} {unit.name} · " + note
    if region_share is not None:
        note += f" · region {100 * region_share:.0f}% of it"
    if not r.valid:
        note += f" · {r.status}"
    if r.flags:
        note += " · " + " & ".join(r.flags)
    return note


def _note_offset(r: Row) -> float:
    return NOTE_GAP_PT + (MARK_ROOM_PT if r.flags else 0.0)


def layout(ends: Sequence[tuple[float, float]], top: float,
           panel_in: float = PANEL_IN) -> tuple[float, float]:
    """(axis end, panel width in inches) at which every (bar end, inches right of it: note and
    marker) fits inside the panel: the axis stretches up to :data:`MAX_STRETCH` × ``top``, then
    the panel widens."""
    need = top * 1.05
    for end, right_in in ends:
        room = panel_in - right_in - 0.05
        need = max(need, end * panel_in / room if room > 0 else float("inf"))
    if need <= MAX_STRETCH * top:
        return need, panel_in
    xmax = MAX_STRETCH * top
    wide = max([panel_in] + [(right_in + 0.05) / (1 - end / xmax) for end, right_in in ends])
    return xmax, wide


def _bar(ax: Any, r: Row, y: float, m: dict[str, float], stages: Sequence[str], region: set[str],
         unit: Any) -> None:
    """One row's stacked bar, the region's outline, the flag marker and the note at its end."""
    from matplotlib.patches import Rectangle
    from matplotlib.transforms import offset_copy

    x, lo, hi = 0.0, None, None
    for st in stages:
        w = m.get(st, 0.0)
        inside = st in region
        ax.barh(y, unit(w), left=unit(x), height=BAR_H, color=STAGE_COLOURS.get(st, "#cccccc"),
                alpha=1.0 if inside else 0.45, edgecolor="white", lw=0.5, zorder=2,
                hatch="///" if not r.valid else None)
        if inside:
            lo = x if lo is None else lo
            hi = x + w
        x += w
    if lo is not None and hi is not None:
        ax.add_patch(Rectangle((unit(lo), y - BAR_H / 2 - 0.09), unit(hi - lo),
                               BAR_H + 0.18, fill=False, edgecolor="black", lw=1.5, zorder=4))
    if r.flags:
        at = offset_copy(ax.transData, fig=ax.figure, x=MARK_AT_PT, y=0, units="points")
        ax.plot([unit(x)], [y], flag_marker(r), ms=6.5, color="#444444", ls="", zorder=5, transform=at,
                gid=f"{r.label}/{r.runner}/{r.case}/flag")
    ax.annotate(_note(r, unit, x, _extent(m, stages, region)[1]), (unit(x), y),
                xytext=(_note_offset(r), 0), textcoords="offset points", va="center",
                fontsize=NOTE_FONT, color="#333333" if r.valid else "#666666")


def _empty(ax: Any, r: Row, y: float) -> None:
    ax.text(0.01, y, f"{r.status}: {short_reason(r.reasons, 90)}" if not r.valid else "no stage samples",
            transform=ax.get_yaxis_transform(), va="center", fontsize=BASE_FONT - 1, color="#444444",
            style="italic", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.5})


def _handles(rows: Sequence[Row], stages: Sequence[str], region: set[str], contract: Any) -> list[Any]:
    from matplotlib.patches import Patch

    handles: list[Any] = [Patch(facecolor=STAGE_COLOURS.get(st, "#cccccc"),
                                alpha=1.0 if st in region else 0.45,
                                label=st + ("" if st in region else " (outside)")) for st in stages]
    handles.append(Patch(fill=False, edgecolor="black", lw=1.5,
                         label=f"timed by {contract.name}: {contract.first}..{contract.last}"))
    sh = status_handles()
    handles += [sh[s] for s in ("invalid", "failed") if any(r.status == s for r in rows)]
    return handles + flag_handles(rows)


def figure(receipts: Sequence[LabelledReceipt]) -> Figure:
    """Stacked per-stage medians per (receipt, runner, case); the timed region outlined in black;
    a flagged row (noisy, unsettled) marked at its bar's end as in the other figures."""
    check_same_contract(receipts)
    rows, left_out = drawn_rows(rows_of(receipts))
    multi = len(receipts) > 1
    slots = grouped_slots(rows)
    contract = receipts[0].data.contract
    region = set(contract.stages)
    stages = stage_order(rows)
    medians = {id(r): {s: float(np.median(r.stages_ns[s])) for s in stages if r.stages_ns.get(s)}
               for r in rows}
    totals = [sum(m.values()) for m in medians.values() if m]
    unit = time_unit(totals)
    top = unit(max(totals)) if totals else 1.0
    measure = Measure()
    ends = []
    for r in rows:
        if medians[id(r)]:
            total, share = _extent(medians[id(r)], stages, region)
            width = measure.text(_note(r, unit, total, share), fontsize=NOTE_FONT)[0]
            ends.append((unit(total), width + _note_offset(r) / 72))
    xmax, panel_in = layout(ends, top)

    label_chars = max(len(s.case) if s.row is None else
                      len(s.row.name(multi)) + (0 if s.row.valid else len(s.row.status) + 3)
                      for s in slots)
    left_in = 0.35 + 0.075 * min(label_chars, LABEL_CHARS)
    width = left_in + panel_in + 0.4
    plot_h = 0.3 * (max(s.y for s in slots) + 1.2)
    handles = _handles(rows, stages, region, contract)
    ncol, legend_in = measure.legend(handles, width - 0.3, max_cols=max(1, int(width / 2.6)),
                                     fontsize=BASE_FONT)
    top_in, bottom_in = 0.95, 0.4 + legend_in + 0.65
    height = top_in + plot_h + bottom_in
    fig = new_figure(width, height)
    ax = fig.add_axes((left_in / width, bottom_in / height, panel_in / width, plot_h / height))
    set_value_axis(ax, log=False)
    for s in slots:
        if s.row is None:
            continue
        if not s.row.valid:
            hatch_band(ax, s.y, s.row.status)
        m = medians[id(s.row)]
        _bar(ax, s.row, s.y, m, stages, region, unit) if m else _empty(ax, s.row, s.y)
    ax.set_xlim(0, xmax)
    ax.set_xlabel(f"median time per stage ({unit.name}), stacked in pipeline order", fontsize=BASE_FONT)
    ax.grid(axis="x", color="#e6e6e6", lw=0.8, zorder=0)
    ax.tick_params(labelsize=BASE_FONT)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    style_row_axis(ax, slots, multi)
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.4 / height),
               ncol=ncol, fontsize=BASE_FONT, frameon=False)
    title(fig, "Where the time goes: per-stage medians", receipts, top_in)
    caption(fig, "Each bar stacks the median of every stage in pipeline order; the black outline is the "
                 "region the contract times (faded stages are outside it). The timed p50 is the median of "
                 "the region's own samples, so it need not equal the sum of stage medians."
            + (f" {left_out}" if left_out else ""))
    return fig
