"""``sweep``: p50 and p99 with intervals against offered load (or the gap between calls), per runner.

The receipts of a sweep (``benchbox sweep``) are the same contract under different
arrivals. Poisson points go on a panel against the offered rate; gap points, and the
back-to-back reference at gap 0, on a panel against the gap. A point where the offered
rate exceeded what the runner sustains is drawn as a cross and labelled with how it was
found: *stopped at bound* (the backlog or one wait passed the declared bound, so sampling
stopped early) or *util ≥ 1* (it ran all its samples, and the measured utilisation, offered
rate × mean service time, was at least 1). Either way its latency grew with the run, so it
is no property of the runner at that load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchbox.errors import UsageError
from benchbox.plots._common import (
    BASE_FONT,
    FLAG_MARKERS,
    LabelledReceipt,
    caption,
    flag_handles,
    new_figure,
    reason_flags,
    runner_colour,
    set_value_axis,
    time_unit,
    title,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

QUANTS = (("p50", "p50_ns", "p50_ci_ns", "-"), ("p99", "p99_ns", "p99_ci_ns", "--"))
PANELS = (("rate", "offered load (requests/s)"), ("gap", "idle gap before each call (ms)"))


@dataclass(frozen=True)
class Point:
    """One (receipt, runner, case) row placed on a panel."""

    contract: str
    panel: str
    x: float
    series: str
    runner: str
    row: Any

    @property
    def overloaded(self) -> bool:
        return bool(self.row.load is not None and self.row.load.overloaded)

    @property
    def measured(self) -> bool:
        return bool(self.row.measured)

    @property
    def flags(self) -> tuple[str, ...]:
        """``noisy`` and/or ``unsettled``, from the row's reasons."""
        return reason_flags(self.row.reasons)

    @property
    def busy(self) -> bool:
        return self.series.endswith("(busy)")

    @property
    def stopped_at_bound(self) -> bool:
        """Overloaded by the declared bound (sampling stopped), not only by utilisation ≥ 1."""
        return self.overloaded and stopped_at_bound(self.row.load)


def stopped_at_bound(load: Any) -> bool:
    """Whether a load record's backlog or longest wait passed its declared bound (what stops sampling)."""
    bound = load.bound or {}
    backlog, wait_ms = bound.get("max_backlog"), bound.get("max_queue_ms")
    return bool((backlog is not None and (load.max_backlog or 0) > backlog)
                or (wait_ms is not None and (load.max_queue_ns or 0) > wait_ms * 1e6))


def overload_note(pts: Sequence[Point]) -> str:
    """What the crosses mean, as the receipts say: stopped at the declared bound, or utilisation ≥ 1."""
    over = [p for p in pts if p.overloaded]
    if not over:
        return "No point was overloaded."
    parts = []
    if any(p.stopped_at_bound for p in over):
        parts.append("'stopped at bound': the backlog or one wait passed the declared bound and "
                     "sampling stopped")
    if not all(p.stopped_at_bound for p in over):
        parts.append("'util ≥ 1': all samples ran and the measured utilisation (offered rate × mean "
                     "service time) was at least 1; the declared bound was not reached")
    return "× overloaded, the queue grew without bound: " + "; ".join(parts) + "."


def _points(receipts: Sequence[LabelledReceipt]) -> list[Point]:
    multi_case = len({r.case for rec in receipts for r in rec.data.results}) > 1
    out = []
    for rec in receipts:
        c = rec.data.contract
        kind = c.arrival_kind
        idle = c.arrival.idle if c.arrival is not None and c.arrival.idle else "sleep"
        for row in rec.data.results:
            if not row.measured:
                continue
            series = f"{row.runner}" + (f" · {row.case}" if multi_case else "")
            if kind == "poisson":
                x = row.load.offered_per_s if row.load is not None and row.load.offered_per_s else \
                    (c.arrival.rate_per_s if c.arrival is not None else None)
                if x:
                    out.append(Point(c.name, "rate", float(x), f"{series} ({idle})", row.runner, row))
            elif kind == "gap":
                assert c.arrival is not None
                out.append(Point(c.name, "gap", float(c.arrival.gap_ms or 0), f"{series} ({idle})",
                                 row.runner, row))
            else:  # the back-to-back reference: gap 0 of every idle mode's curve
                for mode in ("sleep", "busy"):
                    out.append(Point(c.name, "gap", 0.0, f"{series} ({mode})", row.runner, row))
    return out


def _draw(ax: Any, pts: list[Point], unit: Any, panel: str) -> None:
    series = list(dict.fromkeys(p.series for p in pts))
    drawn = {p.series for p in pts if panel != "gap" or p.x > 0}  # b2b alone makes no curve
    for s in series:
        if s not in drawn:
            continue
        sp = sorted((p for p in pts if p.series == s), key=lambda p: p.x)
        colour = runner_colour(sp[0].runner)
        for qname, key, cikey, style in QUANTS:
            xs = [p.x for p in sp]
            ys = [unit(getattr(p.row.summary, key) or 0) for p in sp]
            lo, hi = [], []
            for p, y in zip(sp, ys):
                ci = getattr(p.row.summary, cikey)
                lo.append(max(0.0, y - unit(ci[0])) if ci else 0.0)
                hi.append(max(0.0, unit(ci[1]) - y) if ci else 0.0)
            alpha = 1.0 if qname == "p50" else 0.7
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt=style, color=colour, capsize=2, lw=1.2, alpha=alpha,
                        label=f"{s} {qname}")
            for p, y in zip(sp, ys):  # shape: the row's flags; hollow: waits busy-waited
                ax.plot([p.x], [y], ls="", marker=FLAG_MARKERS.get(p.flags, "o"), ms=5, color=colour,
                        mfc="white" if p.busy else colour, mew=1.2, alpha=alpha, zorder=4)
            for p, y in zip(sp, ys):
                if p.overloaded:
                    ax.plot([p.x], [y], "x", color="#c0392b", ms=11, mew=2, zorder=5)
                    if qname == "p99":
                        note = "stopped at bound" if p.stopped_at_bound else "util ≥ 1"
                        ax.annotate(note, (p.x, y), textcoords="offset points", xytext=(4, 6),
                                    fontsize=BASE_FONT - 2, color="#c0392b")
    set_value_axis(ax, True, axis="y")
    ax.grid(True, which="both", alpha=0.25)
    if panel == "gap":  # gaps start at 0 (back to back): linear below 0.1 ms, log above
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_xlim(0, max(p.x for p in pts) * 1.6 or 1.0)
    elif len({p.x for p in pts}) > 1 and max(p.x for p in pts) / min(p.x for p in pts) > 8:
        ax.set_xscale("log")


def scale_note(ax: Any) -> str:
    """What an axis label should say about the axis's scale."""
    return {"log": ", log scale", "symlog": ", log scale above 0.1"}.get(ax.get_xscale(), "")


def figure(receipts: Sequence[LabelledReceipt]) -> Figure:
    """One row of panels per contract: latency against offered rate, and against the gap."""
    pts = _points(receipts)
    if not pts:
        raise UsageError("nothing to plot: no measured row of a paced or back-to-back receipt")
    contracts = list(dict.fromkeys(p.contract for p in pts))
    panels = [(k, label) for k, label in PANELS if any(p.panel == k for p in pts)]
    unit = time_unit([getattr(p.row.summary, k) or 0 for p in pts for _, k, _, _ in QUANTS])
    width, row_h = 6.8 * len(panels) + 3.0, 3.6
    height = 1.2 + row_h * len(contracts) + 0.9
    fig = new_figure(width, height)
    for i, name in enumerate(contracts):
        for j, (panel, xlabel) in enumerate(panels):
            left = (1.2 + j * 6.8) / width
            bottom = (0.9 + (len(contracts) - 1 - i) * row_h + 0.5) / height
            ax = fig.add_axes((left, bottom, 5.2 / width, (row_h - 0.9) / height))
            mine = [p for p in pts if p.contract == name and p.panel == panel]
            if mine:
                _draw(ax, mine, unit, panel)
            ax.set_xlabel(xlabel + scale_note(ax), fontsize=BASE_FONT)
            ax.set_ylabel(f"{name}\nlatency ({unit.name}, log scale)", fontsize=BASE_FONT)
            if i == 0 and j == len(panels) - 1 and mine:
                handles, _ = ax.get_legend_handles_labels()
                ax.legend(handles=handles + flag_handles(pts), fontsize=BASE_FONT - 2, loc="upper left",
                          bbox_to_anchor=(1.02, 1.0))
    title(fig, "Latency against load: p50 (solid) and p99 (dashed), 95% intervals", receipts, 1.0)
    caption(fig, "Poisson points at their offered rate; gap points at the idle gap before each call, "
                 "back to back at 0; filled markers: waits slept, hollow: busy-waited; circles: rows not "
                 "flagged, other shapes: noisy or unsettled rows (legend). " + overload_note(pts))
    return fig
