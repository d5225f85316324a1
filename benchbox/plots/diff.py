"""``diff``: HEAD/BASE ratios of p50 and p99 per matched row, coloured by verdict.

The rows, ratios, intervals and verdicts come from ``benchbox.receipts.diff`` (the
same library call as ``benchbox diff``), so the figure and the command agree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchbox.errors import UsageError
from benchbox.plots._common import (
    BASE_FONT,
    CAPTION_FONT,
    FLAG_LABELS,
    FLAG_MARKERS,
    LABEL_CHARS,
    LabelledReceipt,
    Measure,
    caption,
    context_line,
    ellipsize,
    new_figure,
    rows_of,
    runner_colour,
)
from benchbox.receipts.diff import DiffOptions

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from benchbox.receipts.diff import DiffResult, DiffRow

VERDICT_COLOURS: dict[str, str] = {
    "faster": "#1a9850",
    "slower": "#d73027",
    "unchanged": "#4d4d4d",
    "unresolved": "#8073ac",
    "unreliable": "#e08214",
}
NO_RATIO = ("invalid", "new", "removed", "not comparable")
#: an unreliable row's ratio is drawn (its numbers are kept) in grey: shown, not judged
NOT_JUDGED = "#a6a6a6"
#: tick sets for the ratio axis, from narrow to wide, and the widest log-span each suits
_TICKS = ((0.25, (0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2, 1.25)),
          (0.8, (0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)),
          (math.inf, (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)))


def _trim(text: str, limit: int) -> str:
    text = re.sub(r"(accuracy gate \S+ failed): value [^,]+, threshold [^\s;,)]+", r"\1", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flags(receipts: Sequence[LabelledReceipt]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(case, runner) → the noise flags of either side's row."""
    out: dict[tuple[str, str], set[str]] = {}
    for r in rows_of(receipts):
        out.setdefault((r.case, r.runner), set()).update(r.flags)
    return {k: tuple(f for f in ("noisy", "unsettled") if f in v) for k, v in out.items()}


def _handles(rows: Sequence[DiffRow], flags: dict[tuple[str, str], tuple[str, ...]],
             threshold: float) -> list[Any]:
    """The legend: verdict colours, the threshold band, the flag markers and hatch that occur."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [Line2D([], [], color=c, marker="o", lw=1.4, label=v)
                          for v, c in VERDICT_COLOURS.items()]
    handles.append(Patch(facecolor="#dfe8f2", label=f"±{threshold:.0%} threshold band"))
    handles += [Line2D([], [], ls="", marker=FLAG_MARKERS[f], color="#444444", ms=6,
                       label=f"{FLAG_LABELS[f]} (either side)") for f in FLAG_MARKERS
                if f and f in set(flags.values())]
    if any(r.verdict == "unreliable" and r.metrics for r in rows):
        handles.append(Line2D([], [], color=NOT_JUDGED, marker="o", mfc="white", lw=1.4,
                              label="unreliable: measured, not judged"))
    if any(r.verdict in NO_RATIO for r in rows):
        handles.append(Patch(facecolor="#f2f2f2", edgecolor="#b0b0b0", hatch="///",
                             label="no ratio (new, removed, invalid or not comparable)"))
    return handles


@dataclass(frozen=True)
class _Layout:
    """Where the parts of the figure go, in inches, and the text measured to size them."""

    width: float
    height: float
    left_in: float
    panel_in: float
    notes_in: float
    fb: float
    fh: float
    legend_at: float
    ncol: int
    text: str
    handles: list[Any]
    measure: Measure


def _compare(receipts: Sequence[LabelledReceipt], threshold: float,
             options: Any) -> tuple[DiffResult, Any]:
    """``benchbox diff``'s result for BASE, HEAD and the options it was judged under."""
    from benchbox.receipts.diff import DiffOptions, diff_receipts

    if len(receipts) != 2:
        raise UsageError(f"the diff plot takes exactly two receipts, BASE and HEAD (got {len(receipts)})")
    if not 0 < threshold < 1:
        raise UsageError(f"threshold: must be between 0% and 100%, got {threshold:.4g}")
    base, head = receipts
    opts = options if options is not None else DiffOptions(threshold=threshold)
    result = diff_receipts(base.data, head.data, opts, base_name=base.label, head_name=head.label)
    if not result.rows:
        raise UsageError("nothing to plot: neither receipt holds results")
    return result, opts


def _slots(rows: Sequence[DiffRow]) -> tuple[list[tuple[float, str, DiffRow | None]], float]:
    """Case headers and one line per matched row, each at its y; and the y below the last."""
    multi_task = len({r.task for r in rows}) > 1
    slots: list[tuple[float, str, DiffRow | None]] = []
    y = 0.0
    groups = list(dict.fromkeys((r.task, r.case) for r in rows))
    for task, case in groups:
        slots.append((y, f"{task} · {case}" if multi_task else case, None))
        y += 0.9
        for r in rows:
            if (r.task, r.case) == (task, case):
                slots.append((y, r.runner, r))
                y += 1.0
        y += 0.35
    return slots, y


def _layout(result: DiffResult, opts: Any, slots: Sequence[tuple[float, str, DiffRow | None]], y: float,
            flags: dict[tuple[str, str], tuple[str, ...]]) -> _Layout:
    """The figure's size: the bottom holds the axis labels, the legend and the caption, each as
    large as measured."""
    threshold = opts.threshold
    label_chars = max(len(t) + (len(r.verdict) + 3 if r else 0) for _, t, r in slots)
    left_in = 0.35 + 0.075 * min(label_chars, LABEL_CHARS)
    panel_in, notes_in = 3.6, 3.9
    width = left_in + 2 * panel_in + 0.3 + 0.35 + notes_in + 0.2
    plot_h = 0.27 * (y + 0.6)
    measure = Measure()
    handles = _handles(result.rows, flags, threshold)
    ncol, legend_in = measure.legend(handles, width - 0.3, fontsize=BASE_FONT)
    counts = ", ".join(f"{n} {v}" for v, n in result.counts().items())
    notes = "; ".join(result.notes)
    text = (f"Rows matched by (task, case, runner): {counts}. Ratio < 1 means HEAD is "
            "faster. Points are coloured by each quantile's own verdict; the row's verdict (left, "
            "right) combines them. Intervals and verdicts as in `benchbox diff --threshold "
            f"{threshold * 100:g} --metric {opts.metric}`." + (f" Notes: {notes}." if notes else ""))
    text = measure.wrap(text, width - 0.3, **CAPTION_FONT)
    caption_in = measure.text(text, **CAPTION_FONT)[1]
    legend_at = 0.08 + caption_in + 0.15
    top_in, bottom_in = 0.95, legend_at + legend_in + 0.1 + 0.55
    height = top_in + plot_h + bottom_in
    return _Layout(width=width, height=height, left_in=left_in, panel_in=panel_in, notes_in=notes_in,
                   fb=bottom_in / height, fh=plot_h / height, legend_at=legend_at, ncol=ncol,
                   text=text, handles=handles, measure=measure)


def _point(ax: Any, sy: float, r: DiffRow, metric: str,
           flags: dict[tuple[str, str], tuple[str, ...]]) -> None:
    """One row's ratio of ``metric`` with its interval, or a hatched band where it has none."""
    m = next((m for m in r.metrics if m.metric == metric), None)
    if m is None or m.ratio is None:
        ax.axhspan(sy - 0.42, sy + 0.42, facecolor="#f2f2f2", edgecolor="#b0b0b0",
                   hatch="///", lw=0, zorder=0)
        label = ("not judged (--metric)" if r.metrics else r.verdict) if m is None else "no ratio"
        ax.text(0.02, sy, label, va="center",
                fontsize=BASE_FONT - 1, style="italic", color="#555555",
                transform=ax.get_yaxis_transform(),
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.2})
        return
    judged = r.verdict != "unreliable"
    colour = VERDICT_COLOURS.get(m.verdict, "#4d4d4d") if judged else NOT_JUDGED
    marker = FLAG_MARKERS.get(flags.get((r.case, r.runner), ()), "o")
    gid = f"{r.runner}/{r.case}/{metric}"
    if m.ci is not None:
        lo, hi = m.ci
        eb = ax.errorbar([m.ratio], [sy], xerr=[[max(0.0, m.ratio - lo)], [max(0.0, hi - m.ratio)]],
                         fmt=marker, ms=6, color=colour, capsize=3, lw=1.4, zorder=3,
                         mfc=colour if judged else "white")
        eb.lines[0].set_gid(gid)
    else:
        ax.plot([m.ratio], [sy], marker, ms=7, mfc="white", mec=colour, mew=1.6, zorder=3, gid=gid)
    ax.annotate(f"{m.ratio:.2f}×" + ("" if m.ci else " (no CI)") + ("" if judged else " not judged"),
                (m.ratio, sy), xytext=(0, 6.5), textcoords="offset points", ha="center",
                va="bottom", fontsize=BASE_FONT - 1.5, color=colour)


def _ratio_axis(ax: Any, span: float, lim: tuple[float, float], threshold: float) -> None:
    """The log ratio axis with ticks that suit its span, the threshold band and the line at 1."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log")
    ax.set_xlim(*lim)
    ticks = next(t for width_, t in _TICKS if span * 1.15 <= width_)
    ax.xaxis.set_major_locator(FixedLocator([t for t in ticks if lim[0] <= t <= lim[1]]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.axvspan(1 - threshold, 1 + threshold, color="#dfe8f2", zorder=0, lw=0)
    ax.axvline(1.0, color="#7a7a7a", lw=0.9, zorder=1)


def _row_labels(ax: Any, slots: Sequence[tuple[float, str, DiffRow | None]], first: bool) -> None:
    """Row labels (with the row's verdict) on the first panel only; case headers in bold."""
    ax.set_yticks([s[0] for s in slots])
    if first:
        ax.set_yticklabels([ellipsize(t if r is None else f"{t} [{r.verdict}]", LABEL_CHARS)
                            for _, t, r in slots])
        for (_, _t, r), lab in zip(slots, ax.get_yticklabels()):
            if r is None:
                lab.set_fontweight("bold")
                lab.set_fontsize(BASE_FONT + 1)
            else:
                lab.set_color(runner_colour(r.runner))
    else:
        ax.tick_params(axis="y", labelleft=False)


def _panels(fig: Figure, lay: _Layout, rows: Sequence[DiffRow],
            slots: Sequence[tuple[float, str, DiffRow | None]], y: float,
            flags: dict[tuple[str, str], tuple[str, ...]], threshold: float) -> list[Any]:
    """One panel per quantile (p50, p99) of HEAD/BASE ratios; returns their axes."""
    ratios = [v for r in rows for m in r.metrics for v in (m.ratio, *(m.ci or ())) if v]
    span = max([abs(math.log(v)) for v in ratios] + [math.log(1 + threshold) * 2.5])
    lim = (math.exp(-span * 1.15), math.exp(span * 1.15))
    axes = []
    for i, metric in enumerate(("p50", "p99")):
        ax = fig.add_axes(((lay.left_in + i * (lay.panel_in + 0.3)) / lay.width, lay.fb,
                           lay.panel_in / lay.width, lay.fh))
        axes.append(ax)
        _ratio_axis(ax, span, lim, threshold)
        for sy, _text, r in slots:
            if r is not None:
                _point(ax, sy, r, metric, flags)
        _row_labels(ax, slots, first=i == 0)
        ax.tick_params(axis="y", length=0)
        ax.tick_params(labelsize=BASE_FONT)
        ax.set_ylim(y - 0.2, -0.6)
        ax.set_title(metric, fontsize=BASE_FONT + 1, loc="left")
        ax.set_xlabel(f"{metric} ratio HEAD / BASE (log scale), 95% CI", fontsize=BASE_FONT)
        ax.grid(axis="x", color="#e6e6e6", lw=0.8, zorder=0)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return axes


def _verdict_notes(fig: Figure, lay: _Layout, slots: Sequence[tuple[float, str, DiffRow | None]],
                   shared: Any) -> None:
    """The right-hand column: each row's verdict and its reason, wrapped to two lines."""
    notes_in = lay.notes_in
    nax = fig.add_axes(((lay.left_in + 2 * lay.panel_in + 0.65) / lay.width, lay.fb,
                        notes_in / lay.width, lay.fh), sharey=shared)
    nax.set_axis_off()
    nax.set_title("verdict", fontsize=BASE_FONT + 1, loc="left")
    note_font = {"fontsize": BASE_FONT - 1.5, "linespacing": 1.0}
    for sy, _t, r in slots:
        if r is None:
            continue
        note = _trim(r.verdict + (f": {r.reason}" if r.reason else ""), 3 * int(notes_in / 0.062))
        nax.text(0.0, sy, lay.measure.wrap(note, notes_in - 0.05, max_lines=2, **note_font), va="center",
                 ha="left", color=VERDICT_COLOURS.get(r.verdict, "#555555"),
                 transform=nax.get_yaxis_transform(), **note_font)


def figure(receipts: Sequence[LabelledReceipt], threshold: float = DiffOptions.threshold,
           options: Any = None) -> Figure:
    """Ratio HEAD/BASE of p50 and p99 with intervals; the ±threshold band shaded.

    The verdicts are ``benchbox diff``'s with the same options (``options``; by default
    those of ``benchbox diff --threshold``): a metric the diff does not judge (p99 under
    the default ``--metric p50``) is drawn as not judged.
    """
    result, opts = _compare(receipts, threshold, options)
    base, head = receipts
    threshold = opts.threshold
    rows = list(result.rows)
    flags = _flags(receipts)
    names = {"BASE": ellipsize(base.label, 32), "HEAD": ellipsize(head.label, 32)}
    slots, y = _slots(rows)
    lay = _layout(result, opts, slots, y, flags)
    fig = new_figure(lay.width, lay.height)
    axes = _panels(fig, lay, rows, slots, y, flags, threshold)
    _verdict_notes(fig, lay, slots, axes[0])
    height = lay.height
    fig.legend(handles=lay.handles, loc="lower center", bbox_to_anchor=(0.5, lay.legend_at / height),
               ncol=lay.ncol, fontsize=BASE_FONT, frameon=False)
    fig.text(0.5, 1 - 0.12 / height, f"HEAD {names['HEAD']} vs BASE {names['BASE']}: ratio of quantiles "
             "per matched row", ha="center", va="top", fontsize=BASE_FONT + 3, fontweight="bold")
    fig.text(0.5, 1 - 0.42 / height, context_line(receipts), ha="center", va="top", fontsize=BASE_FONT,
             color="#333333")
    caption(fig, lay.text)
    return fig
