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
    caption,
    check_same_contract,
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
NOTE_FONT = BASE_FONT - 1


def _note(r: Any, unit: Any, total: float, region_share: float | None) -> str:
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


def _x_limit(ends: Sequence[tuple[float, float]], panel_in: float, top: float) -> float:
    """The axis end at which every (bar end, note width in inches) fits inside the panel."""
    need = top * 1.05
    for end, width_in in ends:
        room = max(panel_in - NOTE_GAP_PT / 72 - width_in - 0.05, 0.25 * panel_in)
        need = max(need, end * panel_in / room)
    return need


def figure(receipts: Sequence[LabelledReceipt]) -> Figure:
    """Stacked per-stage medians per (receipt, runner, case); the timed region outlined in black."""
    from matplotlib.patches import Patch, Rectangle

    check_same_contract(receipts)
    rows = rows_of(receipts)
    multi = len(receipts) > 1
    slots = grouped_slots(rows)
    contract = receipts[0].data.contract
    region = set(contract.stages)
    stages = stage_order(rows)
    medians = {id(r): {s: float(np.median(r.stages_ns[s])) for s in stages if r.stages_ns.get(s)}
               for r in rows}
    totals = [sum(m.values()) for m in medians.values() if m]
    unit = time_unit(totals)

    label_chars = max(len(s.case) if s.row is None else
                      len(s.row.name(multi)) + (0 if s.row.valid else len(s.row.status) + 3)
                      for s in slots)
    left_in = 0.35 + 0.075 * min(label_chars, LABEL_CHARS)
    panel_in = 10.0
    width = left_in + panel_in + 0.4
    plot_h = 0.3 * (max(s.y for s in slots) + 1.2)
    n_handles = len(stages) + 1 + len({r.status for r in rows} - {"valid"})
    ncol = max(1, min(n_handles, int(width / 2.6)))
    legend_rows = -(-n_handles // ncol)
    top_in, bottom_in = 0.95, 1.05 + 0.24 * legend_rows
    height = top_in + plot_h + bottom_in
    fig = new_figure(width, height)
    ax = fig.add_axes((left_in / width, bottom_in / height, panel_in / width, plot_h / height))
    set_value_axis(ax, log=False)
    top = max(totals) if totals else 1.0
    measure, ends = Measure(), []

    for s in slots:
        r = s.row
        if r is None:
            continue
        if not r.valid:
            hatch_band(ax, s.y, r.status)
        m = medians[id(r)]
        if not m:
            ax.text(0.01, s.y, f"{r.status}: {short_reason(r.reasons, 90)}" if not r.valid
                    else "no stage samples", transform=ax.get_yaxis_transform(), va="center",
                    fontsize=BASE_FONT - 1, color="#444444", style="italic",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.5})
            continue
        x = 0.0
        region_lo = region_hi = None
        for st in stages:
            w = m.get(st, 0.0)
            inside = st in region
            ax.barh(s.y, unit(w), left=unit(x), height=BAR_H, color=STAGE_COLOURS.get(st, "#cccccc"),
                    alpha=1.0 if inside else 0.45, edgecolor="white", lw=0.5, zorder=2,
                    hatch="///" if not r.valid else None)
            if inside:
                region_lo = x if region_lo is None else region_lo
                region_hi = x + w
            x += w
        if region_lo is not None and region_hi is not None:
            ax.add_patch(Rectangle((unit(region_lo), s.y - BAR_H / 2 - 0.09), unit(region_hi - region_lo),
                                   BAR_H + 0.18, fill=False, edgecolor="black", lw=1.5, zorder=4))
        share = ((region_hi - region_lo) / x if region_lo is not None and region_hi is not None
                 and len(region) < len(stages) and x > 0 else None)
        note = _note(r, unit, x, share)
        ends.append((unit(x), measure.text(note, fontsize=NOTE_FONT)[0]))
        ax.annotate(note, (unit(x), s.y), xytext=(NOTE_GAP_PT, 0), textcoords="offset points", va="center",
                    fontsize=NOTE_FONT, color="#333333" if r.valid else "#666666")

    ax.set_xlim(0, _x_limit(ends, panel_in, unit(top)))
    ax.set_xlabel(f"median time per stage ({unit.name}), stacked in pipeline order", fontsize=BASE_FONT)
    ax.grid(axis="x", color="#e6e6e6", lw=0.8, zorder=0)
    ax.tick_params(labelsize=BASE_FONT)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    style_row_axis(ax, slots, multi)

    handles: list[Any] = [Patch(facecolor=STAGE_COLOURS.get(st, "#cccccc"),
                                alpha=1.0 if st in region else 0.45,
                                label=st + ("" if st in region else " (outside)")) for st in stages]
    handles.append(Patch(fill=False, edgecolor="black", lw=1.5,
                         label=f"timed by {contract.name}: {contract.first}..{contract.last}"))
    sh = status_handles()
    handles += [sh[s] for s in ("invalid", "failed") if any(r.status == s for r in rows)]
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.4 / height),
               ncol=ncol, fontsize=BASE_FONT, frameon=False)
    title(fig, "Where the time goes: per-stage medians", receipts, top_in)
    caption(fig, "Each bar stacks the median of every stage in pipeline order; the black outline is the "
                 "region the contract times (faded stages are outside it). The timed p50 is the median of "
                 "the region's own samples, so it need not equal the sum of stage medians.")
    return fig
