"""``sweep``: p50 and p99 with intervals against offered load (or the gap between calls), per runner.

The receipts of a sweep (``benchbox sweep``) are the same contract under different
arrivals. Poisson points go on a panel against the offered rate; gap points, and the
back-to-back reference at gap 0, on a panel against the gap. A point where the offered
rate exceeded what the runner sustains gets a red mark that says how it was found: a ringed
cross (⊗) when it *stopped at the bound* (the backlog or one wait passed the declared bound, so
sampling stopped early), a plain cross (×) when *util ≥ 1* (it ran all its samples, and the
measured utilisation, offered rate × mean service time, was at least 1). Either way its latency
grew with the run, so it is no property of the runner at that load. The marks are explained once,
in the legend and the footer, so no per-point text can collide with another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchbox.errors import UsageError
from benchbox.plots._common import (
    BASE_FONT,
    CAPTION_FONT,
    FLAG_MARKERS,
    SERIES_COLOURS,
    LabelledReceipt,
    Measure,
    caption,
    flag_handles,
    new_figure,
    runner_colour,
    set_log_ticks,
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
        """``noisy`` and/or ``unsettled``: the row's flags."""
        return self.row.flags

    @property
    def busy(self) -> bool:
        return self.series.endswith("(busy)")

    @property
    def name(self) -> str:
        """The series without its idle mode: the runner, or runner · case when several cases are drawn."""
        return self.series.rsplit(" (", 1)[0]

    @property
    def stopped_at_bound(self) -> bool:
        """Overloaded by the declared bound (sampling stopped), not only by utilisation ≥ 1."""
        return self.overloaded and stopped_at_bound(self.row.load)


def stopped_at_bound(load: Any) -> bool:
    """Whether a load record's backlog or longest wait passed its declared bound (what stops sampling)."""
    bound = load.bound
    backlog, wait_ms = (bound.max_backlog, bound.max_queue_ms) if bound is not None else (None, None)
    return bool((backlog is not None and (load.max_backlog or 0) > backlog)
                or (wait_ms is not None and (load.max_queue_ns or 0) > wait_ms * 1e6))


def overload_note(pts: Sequence[Point]) -> str:
    """What the red marks mean, as the receipts say: stopped at the declared bound, or utilisation ≥ 1."""
    over = [p for p in pts if p.overloaded]
    if not over:
        return "No point was overloaded."
    parts = []
    if any(p.stopped_at_bound for p in over):
        parts.append("⊗ 'stopped at bound': the backlog or one wait passed the declared bound and "
                     "sampling stopped")
    if not all(p.stopped_at_bound for p in over):
        parts.append("× 'util ≥ 1': all samples ran and the measured utilisation (offered rate × mean "
                     "service time) was at least 1; the declared bound was not reached")
    return ("Red marks: overloaded, the queue grew without bound, so the latency is no property of the "
            "runner at that load: " + "; ".join(parts) + ".")


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


OVERLOAD_COLOUR = "#c0392b"
#: the red marks of an overloaded point, by how it was found: a cross, ringed when sampling stopped
OVERLOAD_LABELS = {"bound": "overloaded: stopped at the bound (⊗)",
                   "util": "overloaded: util ≥ 1, all samples ran (×)"}


def _overload_marks(ax: Any, x: float, y: float, bound: bool, zorder: float = 5) -> None:
    kind = "bound" if bound else "util"
    ax.plot([x], [y], "x", color=OVERLOAD_COLOUR, ms=10, mew=2, zorder=zorder, gid=f"overloaded:{kind}")
    if bound:
        ax.plot([x], [y], "o", ms=14, mfc="none", mec=OVERLOAD_COLOUR, mew=1.5, zorder=zorder,
                gid="overloaded:bound:ring")


def _draw(ax: Any, pts: list[Point], unit: Any, panel: str, colours: dict[str, str]) -> None:
    from matplotlib.ticker import FuncFormatter

    drawn = {p.series for p in pts if panel != "gap" or p.x > 0}  # b2b alone makes no curve
    for s in [s for s in dict.fromkeys(p.series for p in pts) if s in drawn]:
        sp = sorted((p for p in pts if p.series == s), key=lambda p: p.x)
        colour = colours[sp[0].name]
        for qname, key, cikey, style in QUANTS:
            xs = [p.x for p in sp]
            ys = [unit(getattr(p.row.summary, key) or 0) for p in sp]
            lo, hi = [], []
            for p, y in zip(sp, ys):
                ci = getattr(p.row.summary, cikey)
                lo.append(max(0.0, y - unit(ci[0])) if ci else 0.0)
                hi.append(max(0.0, unit(ci[1]) - y) if ci else 0.0)
            alpha = 1.0 if qname == "p50" else 0.7
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt=style, color=colour, capsize=2, lw=1.2, alpha=alpha)
            for p, y in zip(sp, ys):  # shape: the row's flags; hollow: waits busy-waited
                ax.plot([p.x], [y], ls="", marker=FLAG_MARKERS.get(p.flags, "o"), ms=5, color=colour,
                        mfc="white" if p.busy else colour, mew=1.2, alpha=alpha, zorder=4)
                if p.overloaded:
                    _overload_marks(ax, p.x, y, p.stopped_at_bound)
    ax.set_yscale("log")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.1)
    if panel == "gap":  # gaps start at 0 (back to back): linear below 0.1 ms, log above
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_xlim(0, max(p.x for p in pts) * 1.6 or 1.0)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    elif len({p.x for p in pts}) > 1 and max(p.x for p in pts) / min(p.x for p in pts) > 8:
        ax.set_xscale("log")
        set_log_ticks(ax, "x")
    set_log_ticks(ax, "y")


def scale_note(ax: Any) -> str:
    """What an axis label should say about the axis's scale."""
    return {"log": ", log scale", "symlog": ", log scale above 0.1"}.get(ax.get_xscale(), "")


def series_colours(pts: Sequence[Point]) -> dict[str, str]:
    """Each series name's colour: the runner's own when each runner is one series, else one colour
    per runner · case (a runner's cases would otherwise look alike)."""
    names = list(dict.fromkeys(p.name for p in pts))
    runner_of = {p.name: p.runner for p in pts}
    if len(names) == len(set(runner_of.values())):
        return {n: runner_colour(runner_of[n]) for n in names}
    return {n: SERIES_COLOURS[i % len(SERIES_COLOURS)] for i, n in enumerate(names)}


def legend_handles(pts: Sequence[Point]) -> list[Any]:
    """One legend for the figure: series (runners, or runner · case) by colour, quantiles by line,
    idle modes by fill, flags by shape, overload by the red marks (each only where it occurs)."""
    from matplotlib.lines import Line2D

    grey = "#444444"
    out: list[Any] = [Line2D([], [], color=c, lw=2, label=n) for n, c in series_colours(pts).items()]
    out += [Line2D([], [], color=grey, ls=style, lw=1.2, label=q) for q, _, _, style in QUANTS]
    modes = {p.busy for p in pts}
    out += [Line2D([], [], ls="", marker="o", ms=5, color=grey, mfc="white" if busy else grey, mew=1.2,
                   label="waits busy-waited" if busy else "waits slept")
            for busy in (False, True) if busy in modes]
    out += flag_handles(pts)
    over = {p.stopped_at_bound for p in pts if p.overloaded}
    cross = Line2D([], [], ls="", marker="x", color=OVERLOAD_COLOUR, ms=8, mew=2)
    ring = Line2D([], [], ls="", marker="o", ms=11, mfc="none", mec=OVERLOAD_COLOUR, mew=1.5)
    if True in over:
        out.append(((cross, ring), OVERLOAD_LABELS["bound"]))
    if False in over:
        out.append((cross, OVERLOAD_LABELS["util"]))
    return out


def _headline(panels: Sequence[str]) -> str:
    against = {("rate", "gap"): "offered load and idle gap", ("rate",): "offered load",
               ("gap",): "the idle gap between calls"}[tuple(panels)]
    return f"Latency against {against}: p50 (solid) and p99 (dashed), 95% intervals"


def _footer(pts: Sequence[Point], panels: Sequence[str]) -> str:
    where = []
    if "rate" in panels:
        where.append("Poisson points at their offered rate (latency from each scheduled arrival)")
    if "gap" in panels:
        where.append("gap points at the idle gap before each call, back to back at 0")
    text = "; ".join(where) + ("; filled markers: waits slept, hollow: busy-waited; circles: rows not "
                               "flagged, other shapes: noisy or unsettled rows (legend).")
    text = text[0].upper() + text[1:]
    return text + (" " + overload_note(pts) if "rate" in panels else "")


#: layout, in inches: left margin, panel width, space between panels, panel height, space between
#: rows, title block, room under the last row for its ticks and axis label
LEFT, PANEL_W, PANEL_GAP, PANEL_H, ROW_GAP, TOP, BELOW = 1.2, 5.2, 1.6, 2.7, 0.95, 0.8, 0.7


def figure(receipts: Sequence[LabelledReceipt]) -> Figure:
    """One row of panels per contract: latency against offered rate, and against the gap."""
    pts = _points(receipts)
    if not pts:
        raise UsageError("nothing to plot: no measured row of a paced or back-to-back receipt")
    if all(r.data.contract.arrival_kind not in ("poisson", "gap") for r in receipts):
        raise UsageError("a sweep figure draws latency against load, and these receipts are back to back "
                         "only: give a sweep's receipts or its sweep.json (or --kind quantiles)")
    contracts = list(dict.fromkeys(p.contract for p in pts))
    panels = [(k, label) for k, label in PANELS if any(p.panel == k for p in pts)]
    unit = time_unit([getattr(p.row.summary, k) or 0 for p in pts for _, k, _, _ in QUANTS])
    handles = legend_handles(pts)
    measure = Measure()
    legend_font = BASE_FONT - 2
    legend_w = max(measure.text(h[1] if isinstance(h, tuple) else h.get_label(), fontsize=legend_font)[0]
                   for h in handles) + 0.8
    width = LEFT + len(panels) * PANEL_W + (len(panels) - 1) * PANEL_GAP + 0.15 + legend_w + 0.15
    foot = measure.wrap(_footer(pts, [k for k, _ in panels]), width - 0.25, **CAPTION_FONT)
    foot_h = measure.text(foot, **CAPTION_FONT)[1] + 0.2
    n = len(contracts)
    height = TOP + n * PANEL_H + (n - 1) * ROW_GAP + BELOW + foot_h
    fig = new_figure(width, height)
    for i, name in enumerate(contracts):
        for j, (panel, xlabel) in enumerate(panels):
            bottom = foot_h + BELOW + (n - 1 - i) * (PANEL_H + ROW_GAP)
            ax = fig.add_axes(((LEFT + j * (PANEL_W + PANEL_GAP)) / width, bottom / height,
                               PANEL_W / width, PANEL_H / height))
            mine = [p for p in pts if p.contract == name and p.panel == panel]
            if mine:
                _draw(ax, mine, unit, panel, series_colours(pts))
            ax.set_xlabel(xlabel + scale_note(ax), fontsize=BASE_FONT)
            ax.set_ylabel(f"{name}\nlatency ({unit.name}, log scale)", fontsize=BASE_FONT)
            if i == 0 and j == len(panels) - 1:
                _legend(ax, handles, legend_font)
    title(fig, _headline([k for k, _ in panels]), receipts, 1.0)
    caption(fig, foot)
    return fig


def _legend(ax: Any, handles: list[Any], fontsize: float) -> None:
    from matplotlib.legend_handler import HandlerTuple

    plain = [h for h in handles if not isinstance(h, tuple)]
    marks = [h for h in handles if isinstance(h, tuple)]
    ax.legend(handles=plain + [h for h, _ in marks], labels=[h.get_label() for h in plain] +
              [label for _, label in marks], fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1.0),
              handler_map={tuple: HandlerTuple(ndivide=1)})
