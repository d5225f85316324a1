"""Shared pieces of the figures: rows, labels, colours, titles, scales.

matplotlib is imported only inside the functions that draw, and only through
``matplotlib.figure.Figure`` with the Agg canvas, so figures render headless and
no global pyplot state is touched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from benchbox.contracts import TIMELINE
from benchbox.errors import MissingExtraError, UsageError
from benchbox.plots._axes import (  # noqa: F401 (the figures read them from here)
    LOG_MANTISSAS,
    TimeUnit,
    fmt_value,
    log_ticks,
    set_log_ticks,
    set_value_axis,
    time_unit,
    wide_spread,
)
from benchbox.receipts.model import Receipt, ResultRow, Summary

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Fixed colours for the built-in runners (Okabe-Ito, colour-blind safe), so a runner
#: has the same colour in every kind of figure.
RUNNER_COLOURS: dict[str, str] = {
    "torch-compile": "#E69F00",
    "torch-eager": "#0072B2",
    "tensorrt": "#009E73",
}
_EXTRA_COLOURS = ("#CC79A7", "#D55E00", "#56B4E9", "#8C564B", "#7F7F7F", "#BCBD22")
#: colours for series that are more than runners (runner · case), in the order they are handed out
SERIES_COLOURS = (*RUNNER_COLOURS.values(), *_EXTRA_COLOURS)
STAGE_COLOURS: dict[str, str] = {
    "parse": "#8dd3c7", "preprocess": "#80b1d3", "h2d": "#fdb462", "compute": "#fb8072",
    "d2h": "#bebada", "reduce": "#b3de69", "answer": "#fccde5", "serialize": "#bc80bd",
}
INVALID_COLOUR = "#9a9a9a"
RECEIPT_LINESTYLES = ("-", "--", ":", "-.")
BASE_FONT = 9
#: the resolution figures are written at (text is measured at it too)
SAVE_DPI = 150
#: the longest row label a figure shows (longer ones keep both ends around an ellipsis)
LABEL_CHARS = 40


def runner_colour(runner: str) -> str:
    """The runner's colour: fixed for built-ins, a stable hash-picked one otherwise."""
    if runner in RUNNER_COLOURS:
        return RUNNER_COLOURS[runner]
    idx = int(hashlib.sha256(runner.encode()).hexdigest(), 16) % len(_EXTRA_COLOURS)
    return _EXTRA_COLOURS[idx]


@dataclass(frozen=True)
class LabelledReceipt:
    """A loaded receipt and the short label that names it in a figure."""

    label: str
    data: Receipt


@dataclass(frozen=True)
class Row:
    """One (receipt label, runner, case) result, with what the figures need."""

    receipt: int
    label: str
    result: ResultRow = field(hash=False, compare=False)

    @property
    def runner(self) -> str:
        return self.result.runner

    @property
    def case(self) -> str:
        return self.result.case

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def reasons(self) -> tuple[str, ...]:
        return self.result.reasons

    @property
    def summary(self) -> Summary:
        return self.result.summary

    @property
    def samples_ns(self) -> tuple[int, ...]:
        return self.result.samples_ns

    @property
    def stages_ns(self) -> dict[str, tuple[int, ...]]:
        return self.result.stages_ns  # type: ignore[return-value]

    def stat(self, key: str) -> Any:
        """A summary value by its receipt key (``p50_ns``, ``p99_ci_ns``...)."""
        return getattr(self.result.summary, key)

    @property
    def valid(self) -> bool:
        return self.status == "valid"

    @property
    def measured(self) -> bool:
        return self.result.measured

    def name(self, with_label: bool) -> str:
        return f"{self.label} · {self.runner}" if with_label else self.runner

    @property
    def flags(self) -> tuple[str, ...]:
        """``noisy`` and/or ``unsettled`` (as the receipt store counts them)."""
        return self.result.flags


FLAG_MARKERS: dict[tuple[str, ...], str] = {(): "o", ("noisy",): "D", ("unsettled",): "s",
                                            ("noisy", "unsettled"): "X"}
FLAG_LABELS = {("noisy",): "noisy: CV > 20% or > 5% outliers",
               ("unsettled",): "unsettled: halves' medians differ",
               ("noisy", "unsettled"): "noisy and unsettled"}


def flag_marker(row: Row) -> str:
    return FLAG_MARKERS.get(row.flags, "o")


def flag_handles(rows: Iterable[Row]) -> list[Any]:
    """Legend handles for the flag markers that occur (nothing when no row is flagged)."""
    from matplotlib.lines import Line2D

    present = {r.flags for r in rows if r.measured and r.flags}
    return [Line2D([], [], ls="", marker=FLAG_MARKERS[f], color="#444444", ms=6, label=FLAG_LABELS[f])
            for f in FLAG_MARKERS if f in present]


def ellipsize(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis in the middle (keeps both ends)."""
    if len(text) <= limit:
        return text
    keep = max(limit - 1, 2)
    return text[: (keep + 1) // 2] + "…" + text[len(text) - keep // 2:]


def two_lines(text: str, width: int) -> str:
    """``text`` wrapped at ``width`` characters on at most two lines, the second ending in … if cut."""
    import textwrap

    lines = textwrap.wrap(text, width)
    if len(lines) > 2:
        lines = [lines[0], lines[1][: width - 1].rstrip() + "…"]
    return "\n".join(lines)


def short_reason(reasons: Sequence[str], limit: int = 70) -> str:
    """A compact form of a row's reasons for a label."""
    if not reasons:
        return "no reason recorded"
    gates = [r.split()[2] for r in reasons if r.startswith("accuracy gate ") and len(r.split()) > 2]
    if gates:
        text = ("accuracy gate " if len(gates) == 1 else "accuracy gates ") + ", ".join(gates)
    else:
        text = reasons[0] + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rows_of(receipts: Sequence[LabelledReceipt]) -> list[Row]:
    """Every result of every receipt, in receipt order, then case order, then runner order."""
    rows: list[Row] = []
    for i, rec in enumerate(receipts):
        case_order = list(rec.data.case_names)
        runner_order = list(rec.data.runners)

        def key(r: ResultRow, co: list[str] = case_order, ro: list[str] = runner_order) -> tuple:
            return (co.index(r.case) if r.case in co else len(co),
                    ro.index(r.runner) if r.runner in ro else len(ro))

        for r in sorted(rec.data.results, key=key):
            rows.append(Row(receipt=i, label=rec.label, result=r))
    if not rows:
        raise UsageError("nothing to plot: the receipts hold no results")
    return rows


def drawn_rows(rows: Sequence[Row]) -> tuple[list[Row], str]:
    """The rows a figure draws, and a note naming what it leaves out: a runner (of one receipt)
    that measured nothing in any case — every row failed before a sample, say a runtime not
    installed — is a note under the figure, not a panel of empty rows. Where nothing measured
    anything, every row is drawn (their statuses are all there is to show)."""
    measured = {(r.receipt, r.runner) for r in rows if r.measured}
    if not measured:
        return list(rows), ""
    left = [r for r in rows if (r.receipt, r.runner) not in measured]
    if not left:
        return list(rows), ""
    multi = len({r.receipt for r in rows}) > 1
    gone: dict[str, Row] = {}
    for r in left:
        gone.setdefault(r.name(multi), r)
    # an install hint recorded in the reason is for the run's reader, not the figure's
    parts = []
    for name, r in gone.items():
        why = short_reason([x.split(": pip install ")[0] for x in r.reasons], 90)
        parts.append(f"{name} ({r.status}: {why})")
    return ([r for r in rows if (r.receipt, r.runner) in measured],
            "Not drawn, as they measured nothing in any case: " + "; ".join(parts) + ".")


def cases_in_order(rows: Iterable[Row]) -> list[str]:
    out: list[str] = []
    for r in rows:
        if r.case not in out:
            out.append(r.case)
    return out


def check_same_contract(receipts: Sequence[LabelledReceipt]) -> None:
    """Refuse to put results measured under different contracts in one comparison."""
    first = receipts[0].data.contract
    for rec in receipts[1:]:
        c = rec.data.contract
        if c.hash != first.hash:
            raise UsageError(
                f"cannot compare receipts under different contracts: {receipts[0].label} is "
                f"{first.name} ({first.hash[:12]}), {rec.label} is {c.name} ({c.hash[:12]})")


def _unique(values: Iterable[str]) -> str:
    seen: list[str] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return " | ".join(seen)


def context_line(receipts: Sequence[LabelledReceipt]) -> str:
    """Contract, task and size, device: the line every figure carries."""
    c = receipts[0].data.contract
    contract = f"contract {c.name} ({c.first}..{c.last}, {c.clock} clock)"
    if len({r.data.contract.hash for r in receipts}) > 1:
        contract = "contracts " + _unique(r.data.contract.name for r in receipts)

    def task(r: Receipt) -> str:
        t = r.task
        dtype = f" {t.dtype}" if t.dtype else ""
        return f"{t.name}/{t.size}{dtype}"

    return (f"{contract} · task {_unique(task(r.data) for r in receipts)} · "
            f"device {_unique(r.data.device_label for r in receipts)}")


def new_figure(width: float, height: float) -> Figure:
    """A Figure on the Agg canvas (headless), without pyplot."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingExtraError("matplotlib", "analysis") from None
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def title(fig: Figure, headline: str, receipts: Sequence[LabelledReceipt], top: float) -> None:
    """Headline in bold, then the context line (contract, task, device)."""
    fig.text(0.5, 1 - 0.12 / fig.get_figheight(), headline, ha="center", va="top",
             fontsize=BASE_FONT + 3, fontweight="bold")
    fig.text(0.5, 1 - 0.42 / fig.get_figheight(), context_line(receipts), ha="center", va="top",
             fontsize=BASE_FONT, color="#333333")


def caption(fig: Figure, text: str) -> None:
    fig.text(0.01, 0.08 / fig.get_figheight(), text, ha="left", va="bottom",
             fontsize=BASE_FONT - 1, color="#444444", style="italic", wrap=True)


#: the caption's font: what :func:`caption` draws and :meth:`Measure.wrap` measures
CAPTION_FONT: dict[str, Any] = {"fontsize": BASE_FONT - 1, "style": "italic"}


class Measure:
    """Sizes of text and legends in inches, measured with the Agg renderer before a figure is laid
    out, so a figure can be made as large as what it will hold. Hinting makes text some 10% wider at
    :data:`SAVE_DPI` than on a 100-dpi canvas: each size is the larger of the two."""

    def __init__(self) -> None:
        self.figs = []
        for dpi in (100, SAVE_DPI):
            fig = new_figure(8.0, 4.0)
            fig.set_dpi(dpi)
            self.figs.append((fig, fig.canvas.get_renderer()))

    def text(self, text: str, **font: Any) -> tuple[float, float]:
        """(width, height) of ``text`` drawn with ``font`` (keywords of ``Figure.text``)."""
        sizes = []
        for fig, renderer in self.figs:
            t = fig.text(0, 0, text, **font)
            bb = t.get_window_extent(renderer)
            t.remove()
            sizes.append((bb.width / fig.dpi, bb.height / fig.dpi))
        return float(max(w for w, _ in sizes)), float(max(h for _, h in sizes))

    def wrap(self, text: str, width_in: float, max_lines: int | None = None, **font: Any) -> str:
        """``text`` wrapped so that every line is at most ``width_in`` wide; with ``max_lines``,
        the last line kept ends in … when text was cut."""
        import textwrap

        def lines(chars: int) -> list[str]:
            out = textwrap.wrap(text, max(chars, 4))
            if max_lines is not None and len(out) > max_lines:
                out = out[:max_lines - 1] + [out[max_lines - 1][: max(chars, 4) - 1].rstrip() + "…"]
            return out

        def fits(chars: int) -> bool:
            return all(self.text(line, **font)[0] <= width_in for line in lines(chars))

        lo, hi = 4, max(len(text), 4)
        while lo < hi:  # the most characters per line that fit
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
        return "\n".join(lines(lo))

    def legend(self, handles: Sequence[Any], width_in: float, max_cols: int = 6,
               **kw: Any) -> tuple[int, float]:
        """(columns, height in inches) of the widest legend of ``handles`` that fits ``width_in``."""
        for ncol in range(min(len(handles), max_cols), 0, -1):
            sizes = []
            for fig, renderer in self.figs:
                leg = fig.legend(handles=handles, ncol=ncol, frameon=False, **kw)
                bb = leg.get_window_extent(renderer)
                leg.remove()
                sizes.append((bb.width / fig.dpi, bb.height / fig.dpi))
            if max(w for w, _ in sizes) <= width_in or ncol == 1:
                return ncol, float(max(h for _, h in sizes))
        return 1, 0.0


def stage_order(rows: Iterable[Row]) -> list[str]:
    present = {s for r in rows for s in r.stages_ns}
    return [s for s in TIMELINE if s in present]


def baseline_of(receipt: Receipt) -> str | None:
    comp = receipt.comparisons
    base = comp.baseline if comp is not None else None
    return base or receipt.declared_baseline


@dataclass(frozen=True)
class Slot:
    """One horizontal line of a grouped figure: a case header or a result row."""

    y: float
    case: str
    row: Row | None


def grouped_slots(rows: Sequence[Row]) -> list[Slot]:
    """Rows grouped by case, each group under a header line, top to bottom (y grows down)."""
    slots: list[Slot] = []
    y = 0.0
    for case in cases_in_order(rows):
        slots.append(Slot(y, case, None))
        y += 0.9
        for r in rows:
            if r.case == case:
                slots.append(Slot(y, case, r))
                y += 1.0
        y += 0.35
    return slots


def style_row_axis(ax: Axes, slots: Sequence[Slot], with_label: bool, labels: bool = True) -> None:
    """Case headers in bold, runner names in their colour, status after the name."""
    ax.set_yticks([s.y for s in slots])
    if labels:
        texts = [ellipsize(s.case if s.row is None else s.row.name(with_label)
                           + ("" if s.row.valid else f" [{s.row.status}]"), LABEL_CHARS)
                 for s in slots]
        ax.set_yticklabels(texts)
        for s, t in zip(slots, ax.get_yticklabels()):
            if s.row is None:
                t.set_fontweight("bold")
                t.set_fontsize(BASE_FONT + 1)
            else:
                t.set_color(runner_colour(s.row.runner) if s.row.valid else "#555555")
    else:
        ax.tick_params(axis="y", labelleft=False)
    ax.tick_params(axis="y", length=0)
    lo = min(s.y for s in slots) - 0.6
    hi = max(s.y for s in slots) + 0.6
    ax.set_ylim(hi, lo)
    for s in slots:
        if s.row is None and s.y > 0:
            ax.axhline(s.y - 0.6, color="#dddddd", lw=0.8, zorder=0)


def hatch_band(ax: Axes, y: float, status: str) -> None:
    """The grey hatched placeholder that marks an invalid or failed row."""
    ax.axhspan(y - 0.42, y + 0.42, facecolor="#f2f2f2", edgecolor="#b0b0b0",
               hatch="///" if status == "invalid" else "xx", lw=0, zorder=0)


def status_handles() -> dict[str, Any]:
    """Legend handles for invalid and failed rows."""
    from matplotlib.patches import Patch

    return {
        "invalid": Patch(facecolor="#f2f2f2", edgecolor="#b0b0b0", hatch="///",
                         label="invalid: failed an accuracy gate (excluded from ratios)"),
        "failed": Patch(facecolor="#f2f2f2", edgecolor="#b0b0b0", hatch="xx",
                        label="failed: no measurement"),
    }


#: Longest name shown in a figure (runner, case, task, contract, device); longer ones are cut.
DISPLAY_LIMIT = 80


def display_text(text: Any) -> str:
    """A name from a receipt as a figure shows it: control characters made visible, cut to
    :data:`DISPLAY_LIMIT` characters (a megabyte of name would overflow the rasterizer)."""
    from benchbox.render.common import terminal

    s = terminal(str(text)[: DISPLAY_LIMIT * 2])
    return s if len(s) <= DISPLAY_LIMIT else s[: DISPLAY_LIMIT - 1] + "…"


def for_display(receipt: Receipt) -> Receipt:
    """The receipt with every name a figure draws passed through :func:`display_text`."""
    from dataclasses import replace

    t = receipt.task
    task = replace(t, name=display_text(t.name), size=display_text(t.size),
                   cases=tuple(replace(c, name=display_text(c.name)) for c in t.cases))
    env = receipt.environment
    env = replace(env, **{k: display_text(getattr(env, k)) for k in ("device", "cpu")
                          if getattr(env, k) is not None or k in env.nulls})
    if env.gpu is not None and env.gpu.name:
        env = replace(env, gpu=replace(env.gpu, name=display_text(env.gpu.name)))
    settings = receipt.settings
    if settings is not None and settings.runners is not None:
        settings = replace(settings, runners=tuple(display_text(r) if isinstance(r, str) else r
                                                   for r in settings.runners))
    if settings is not None and settings.baseline is not None:
        settings = replace(settings, baseline=display_text(settings.baseline))
    rows = tuple(replace(r, runner=display_text(r.runner), case=display_text(r.case),
                         reasons=tuple(display_text(x) for x in r.reasons)) for r in receipt.results)
    comp = receipt.comparisons
    if comp is not None and comp.baseline is not None:
        comp = replace(comp, baseline=display_text(comp.baseline))
    return replace(receipt, task=task, environment=env, settings=settings,
                   results=rows, comparisons=comp,
                   contract=replace(receipt.contract, name=display_text(receipt.contract.name)))


def plain_text() -> Any:
    """A context in which matplotlib draws text as given: no ``$...$`` mathtext parsing."""
    try:
        import matplotlib
    except ImportError:
        raise MissingExtraError("matplotlib", "analysis") from None
    return matplotlib.rc_context({"text.parse_math": False})
