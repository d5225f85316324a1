"""Figures a reviewer can trust: scales said, ranges that fit the data, flags on their points,
one legend, nothing clipped at long names."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from benchbox.plots import figure
from benchbox.plots._common import FLAG_MARKERS, LABEL_CHARS, LabelledReceipt
from benchbox.receipts import load_receipt
from benchbox.receipts.model import Receipt
from tests.support import GOLDEN, REPO

NOISE = "noise: coefficient of variation 31.0% exceeds 20%"
UNSETTLED = "unsettled: second-half median +12.0% from the first half"


def _scaled(row: Any, k: float) -> Any:
    s = row.summary
    ci = tuple(int(v * k) for v in s.p50_ci_ns) if s.p50_ci_ns else None
    return dataclasses.replace(s, p50_ns=int(s.p50_ns * k), p50_ci_ns=ci)


def _receipt(flags: tuple[str, ...] = (NOISE,), spread: float = 1.0) -> Receipt:
    """The golden receipt with its first row flagged, its second clean and scaled by ``spread``."""
    r = load_receipt(GOLDEN)
    clean = tuple(x for x in r.results[1].reasons if not x.startswith(("noise:", "unsettled:")))
    first = dataclasses.replace(r.results[0], reasons=(*r.results[0].reasons, *flags)).derive()
    second = dataclasses.replace(r.results[1], reasons=clean, summary=_scaled(r.results[1], spread)).derive()
    return dataclasses.replace(r, results=(first, second, *r.results[2:]))


def _line(fig: Any, gid: str) -> Any:
    found = [a for ax in fig.axes for a in ax.get_lines() if a.get_gid() == gid]
    assert len(found) == 1, gid
    return found[0]


@pytest.mark.parametrize("flags", [(NOISE,), (UNSETTLED,), (NOISE, UNSETTLED)])
def test_a_flagged_rows_marker_differs(flags: tuple[str, ...]) -> None:
    r = _receipt(flags)
    fig = figure([LabelledReceipt("g", r)], "quantiles")
    a, b = r.results[0], r.results[1]
    flagged = _line(fig, f"g/{a.runner}/{a.case}/p50_ns").get_marker()
    clean = _line(fig, f"g/{b.runner}/{b.case}/p50_ns").get_marker()
    assert clean == "o" and flagged != clean and flagged in FLAG_MARKERS.values()
    texts = [t.get_text() for t in fig.findobj(lambda o: hasattr(o, "get_text")) if t.get_text()]
    assert any("noisy" in t or "unsettled" in t for t in texts)  # the legend says what the marker means
    ecdf = figure([LabelledReceipt("g", r)], "ecdf")
    assert _line(ecdf, f"g/{a.runner}/{a.case}/p50_ns").get_marker() == flagged
    assert _line(ecdf, f"g/{b.runner}/{b.case}/p50_ns").get_marker() == "o"


@pytest.mark.parametrize("spread", [1.0, 30.0])
def test_p50_axis_covers_the_data_within_2x_and_says_log(spread: float) -> None:
    r = _receipt(spread=spread)
    fig = figure([LabelledReceipt("g", r)], "quantiles")
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    values = [v / 1e6 for row in r.results for v in (row.summary.p50_ns, *(row.summary.p50_ci_ns or ()))]
    assert lo <= min(values) and hi >= max(values)  # every point and interval inside
    assert hi <= 2 * max(values)
    if ax.get_xscale() == "log":
        assert lo >= min(values) / 2
        assert "log scale" in ax.get_xlabel()
    else:
        assert "log" not in ax.get_xlabel()
    assert (ax.get_xscale() == "log") == (spread > 8)


def test_ecdf_draws_one_legend() -> None:
    r = load_receipt(GOLDEN)
    fig = figure([LabelledReceipt("g", r)], "ecdf")
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(labels) == len(set(labels))


def _inside(fig: Any) -> list[str]:
    """Texts drawn outside the figure (clipped): annotations, titles, legends and the ticks in view."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ticks = {id(t) for ax in fig.axes for t in (*ax.get_xticklabels(), *ax.get_yticklabels())}
    shown = []
    for ax in fig.axes:
        lo, hi = sorted(ax.get_xlim())
        shown += [t.label1 for t in ax.xaxis.get_major_ticks() if lo <= t.get_loc() <= hi]
        lo, hi = sorted(ax.get_ylim())
        shown += [t.label1 for t in ax.yaxis.get_major_ticks() if lo <= t.get_loc() <= hi]
    texts = [t for t in fig.findobj(Text) if id(t) not in ticks] + shown
    box = fig.bbox
    out = []
    for t in texts:
        if not t.get_text() or not t.get_visible():
            continue
        bb = t.get_window_extent(renderer)
        if bb.x0 < box.x0 - 1 or bb.x1 > box.x1 + 1 or bb.y0 < box.y0 - 1 or bb.y1 > box.y1 + 1:
            out.append(t.get_text())
    return out


@pytest.mark.parametrize("kind", ["quantiles", "stages", "ecdf", "diff"])
def test_long_receipt_names_are_shortened_and_nothing_is_clipped(kind: str) -> None:
    r = load_receipt(GOLDEN)
    long = "a-receipt-name-from-a-nightly-job-on-a-branch-with-a-long-name-" * 2
    pair = [LabelledReceipt(long + "base", r), LabelledReceipt(long + "head", r)]
    fig = figure(pair, kind)
    assert _inside(fig) == []
    ticks = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
    assert all(len(t) <= LABEL_CHARS for t in ticks)
    from matplotlib.text import Text

    named = [t.get_text() for t in fig.findobj(Text) if "a-receipt-name" in t.get_text()]
    assert named and all("…" in t for t in named), named  # shortened wherever a name is shown


def _mixed_pair() -> tuple[Receipt, Receipt]:
    """BASE and HEAD whose rows get every kind of verdict, some flagged (markers and legend)."""
    import numpy as np

    from tests.support import synthetic_receipt

    rng = np.random.default_rng(7)

    def rounds(scale: float, n: int = 3, spread: float = 0.01) -> list[Any]:
        return [rng.lognormal(np.log(1e6 * scale), spread, 40) for _ in range(n)]

    base = {("torch-eager", "invoice"): rounds(1.0), ("torch-eager", "outage"): rounds(1.0),
            ("torch-eager", "video"): rounds(1.0), ("torch-compile", "invoice"): rounds(1.0, spread=0.3),
            ("torch-compile", "outage"): rounds(1.0, 1, spread=0.5),
            ("torch-compile", "image"): rounds(1.0)}
    head = {("torch-eager", "invoice"): rounds(1.4), ("torch-eager", "outage"): rounds(0.6),
            ("torch-eager", "video"): rounds(1.0), ("torch-compile", "invoice"): rounds(1.05, spread=0.3),
            ("torch-compile", "outage"): rounds(1.0, 1, spread=0.5),
            ("torch-compile", "video"): rounds(1.0)}

    def flagged(r: Receipt) -> Receipt:
        marks = {("torch-eager", "invoice"): (NOISE,), ("torch-eager", "outage"): (UNSETTLED,),
                 ("torch-compile", "invoice"): (NOISE, UNSETTLED)}
        return dataclasses.replace(r, results=tuple(
            dataclasses.replace(x, reasons=(*x.reasons, *marks.get((x.runner, x.case), ()))).derive()
            for x in r.results))

    return flagged(synthetic_receipt(base, repeats=3)), flagged(synthetic_receipt(head, repeats=3))


def test_diff_of_mixed_flagged_rows_and_long_names_clips_nothing() -> None:
    from benchbox.receipts.diff import diff_receipts

    base, head = _mixed_pair()
    verdicts = {r.verdict for r in diff_receipts(base, head).rows}
    assert {"slower", "faster", "unchanged", "unresolved", "unreliable", "new", "removed"} <= verdicts
    long = "a-receipt-name-from-a-nightly-job-on-a-branch-with-a-long-name-" * 2
    fig = figure([LabelledReceipt(long + "base", base), LabelledReceipt(long + "head", head)], "diff")
    assert _inside(fig) == []
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert sum("noisy" in t or "unsettled" in t for t in labels) == 3  # every flag kind in the legend
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend_box = legend.get_window_extent(renderer)
    under = [t for t in fig.texts if t.get_window_extent(renderer).y1 <= legend_box.y0 + 1]
    assert under and all(t.get_window_extent(renderer).y1 <= legend_box.y0 + 1 for t in under)
    above = [ax.xaxis.label.get_window_extent(renderer) for ax in fig.axes if ax.get_xlabel()]
    assert above and all(b.y0 >= legend_box.y1 - 1 for b in above)  # no overlap with the axis labels


@pytest.mark.parametrize("path", sorted((REPO / "receipts").glob("*.json")), ids=lambda p: p.stem)
def test_stages_notes_of_the_committed_receipts_fit(path: Any) -> None:
    """Every note at a bar's end (timed p50, sum, region share, flags) lies inside the figure."""
    fig = figure([LabelledReceipt(path.stem, load_receipt(path))], "stages")
    notes = [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith(("timed p50", "sum "))]
    assert notes
    assert _inside(fig) == []


@pytest.mark.parametrize("decades", [1.2, 1.8, 2.5, 4.0])
def test_ecdf_log_panels_get_enough_labelled_ticks(decades: float) -> None:
    """A panel whose samples span many decades still reads: at least 4 labelled ticks in view."""
    import numpy as np

    from tests.support import synthetic_receipt

    samples = np.geomspace(1e5, 1e5 * 10 ** decades, 60)
    r = synthetic_receipt({("torch-eager", "invoice"): [samples]})
    fig = figure([LabelledReceipt("g", r)], "ecdf")
    fig.canvas.draw()
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    lo, hi = ax.get_xlim()
    labelled = [t.label1.get_text() for t in ax.xaxis.get_major_ticks()
                if lo <= t.get_loc() <= hi and t.label1.get_visible() and t.label1.get_text()]
    assert len(labelled) >= 4, labelled
    assert len(labelled) <= 12, labelled  # and not crowded


@pytest.mark.parametrize("flags", [(NOISE,), (UNSETTLED,), (NOISE, UNSETTLED)])
def test_stages_marks_a_flagged_row_at_its_bar(flags: tuple[str, ...]) -> None:
    r = _receipt(flags)
    fig = figure([LabelledReceipt("g", r)], "stages")
    a, b = r.results[0], r.results[1]
    kind = tuple(k for k, prefix in (("noisy", "noise:"), ("unsettled", "unsettled:"))
                 if any(x.startswith(prefix) for x in a.reasons))
    assert kind and b.reasons is not None
    assert _line(fig, f"g/{a.runner}/{a.case}/flag").get_marker() == FLAG_MARKERS[kind]
    assert not [x for ax in fig.axes for x in ax.get_lines() if x.get_gid() == f"g/{b.runner}/{b.case}/flag"]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.startswith(("noisy", "unsettled")) for t in labels), labels
    assert _inside(fig) == []


def test_stages_value_axis_stays_within_twice_the_longest_bar() -> None:
    """Long notes widen the panel rather than stretch the axis past 2× the longest bar."""
    r = _receipt((NOISE, UNSETTLED))
    fig = figure([LabelledReceipt("g", r)], "stages")
    ax = fig.axes[0]
    ends = [p.get_x() + p.get_width() for p in ax.patches if hasattr(p, "get_x") and p.get_width() > 0]
    assert ax.get_xlim()[1] <= 2 * max(ends)
    assert _inside(fig) == []


def test_stages_layout_widens_the_panel_past_twice_the_longest_bar() -> None:
    from benchbox.plots.stages import MAX_STRETCH, layout

    xmax, panel = layout([(10.0, 3.0), (4.0, 2.0)], top=10.0, panel_in=10.0)
    assert xmax <= MAX_STRETCH * 10.0 and panel == 10.0
    assert 10.0 / xmax * panel + 3.0 <= panel  # the longest bar's note fits
    xmax, panel = layout([(10.0, 7.0), (4.0, 2.0)], top=10.0, panel_in=10.0)  # a note too long to fit
    assert xmax == MAX_STRETCH * 10.0 and panel > 10.0
    assert 10.0 / xmax * panel + 7.0 <= panel and 4.0 / xmax * panel + 2.0 <= panel
