"""The sweep figure as a reviewer reads it, on the committed H200 sweeps: nothing clipped, no text on
other text, enough labelled ticks on every log axis, overloaded points marked once in the legend, and a
title and footer that say what is drawn."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from benchbox.plots import figure, label_receipts
from benchbox.receipts import load_receipt
from benchbox.sweep import expand_index
from tests.support import REPO

SWEEPS = sorted((REPO / "receipts" / "h200-sweep").glob("*/*/sweep.json"))


def _figure(index: Path) -> Any:
    paths = expand_index([index])
    return figure(label_receipts(paths, [load_receipt(p) for p in paths]), "sweep")


@pytest.fixture(scope="module", params=SWEEPS, ids=lambda p: f"{p.parent.parent.name}-{p.parent.name}")
def drawn(request: pytest.FixtureRequest) -> Any:
    fig = _figure(request.param)
    fig.canvas.draw()
    return fig


def test_the_committed_sweeps_are_four() -> None:
    assert len(SWEEPS) == 4, SWEEPS


def _in_view(axis: Any, lo: float, hi: float) -> list[Any]:
    lo, hi = sorted((lo, hi))
    return [t for t in axis.get_major_ticks() if lo <= t.get_loc() <= hi]


def _texts(fig: Any) -> list[Any]:
    """Every visible, non-empty text the figure draws: titles, footer, axis labels, tick labels in
    view, annotations, legend entries."""
    from matplotlib.text import Text

    ticks = {id(t) for ax in fig.axes for t in (*ax.get_xticklabels(), *ax.get_yticklabels())}
    out = [t for t in fig.findobj(Text) if id(t) not in ticks]
    for ax in fig.axes:
        out += [t.label1 for t in _in_view(ax.xaxis, *ax.get_xlim())]
        out += [t.label1 for t in _in_view(ax.yaxis, *ax.get_ylim())]
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def test_no_text_is_clipped_and_annotations_stay_inside_their_panel(drawn: Any) -> None:
    renderer = drawn.canvas.get_renderer()
    box = drawn.bbox
    clipped = []
    for t in _texts(drawn):
        bb = t.get_window_extent(renderer)
        if bb.x0 < box.x0 - 1 or bb.x1 > box.x1 + 1 or bb.y0 < box.y0 - 1 or bb.y1 > box.y1 + 1:
            clipped.append(t.get_text())
    assert clipped == []
    for ax in drawn.axes:
        frame = ax.get_window_extent(renderer)
        for t in ax.texts:
            bb = t.get_window_extent(renderer)
            assert frame.x0 - 1 <= bb.x0 and bb.x1 <= frame.x1 + 1, t.get_text()
            assert frame.y0 - 1 <= bb.y0 and bb.y1 <= frame.y1 + 1, t.get_text()


def test_no_two_texts_overlap(drawn: Any) -> None:
    renderer = drawn.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(drawn)]
    overlaps = []
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            if min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > 1 and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > 1:
                overlaps.append((a, b))
    assert overlaps == []


def _labelled(axis: Any, lo: float, hi: float) -> list[float]:
    return [t.get_loc() for t in _in_view(axis, lo, hi) if t.label1.get_visible() and t.label1.get_text()]


def test_every_log_axis_has_labelled_ticks_that_reach_the_data(drawn: Any) -> None:
    """At least 3 labelled ticks in view, and no stretch of more than 2× between an end of the axis and
    its nearest labelled tick (a p99 at 40 ms above a top label of 20 ms cannot be read)."""
    checked = 0
    for ax in drawn.axes:
        for axis, scale, lims in ((ax.xaxis, ax.get_xscale(), ax.get_xlim()),
                                  (ax.yaxis, ax.get_yscale(), ax.get_ylim())):
            if scale not in ("log", "symlog"):
                continue
            checked += 1
            ticks = _labelled(axis, *lims)
            assert len(ticks) >= 3, (ax.get_ylabel(), ticks)
            if scale == "log":
                lo, hi = sorted(lims)
                assert max(ticks) * 2 >= hi and min(ticks) / 2 <= lo, (ax.get_ylabel(), lims, ticks)
    assert checked >= len(drawn.axes)  # every panel's latency axis is log


def test_log_ticks_reach_enough_labels_across_spans() -> None:
    from benchbox.plots._common import log_ticks

    for lo, hi in ((0.8, 3.5), (4.5, 45.0), (20.0, 320.0), (0.009, 0.22), (1.0, 1000.0), (0.05, 20.0)):
        ticks = log_ticks(lo, hi)
        assert 4 <= len(ticks) <= 10, (lo, hi, ticks)
        assert all(lo <= t <= hi for t in ticks)
        assert max(ticks) * 2 >= hi and min(ticks) / 2 <= lo, (lo, hi, ticks)
        assert ticks == sorted(ticks) and all(math.isfinite(t) for t in ticks)


def _title(fig: Any) -> str:
    return max(fig.texts, key=lambda t: t.get_fontsize()).get_text()


def _footer(fig: Any) -> str:
    return min(fig.texts, key=lambda t: t.get_window_extent(fig.canvas.get_renderer()).y0).get_text()


def test_title_and_footer_say_what_is_drawn(drawn: Any) -> None:
    panels = {ax.get_xlabel().split(" (")[0] for ax in drawn.axes}
    title, footer = _title(drawn), _footer(drawn).replace("\n", " ")
    if "offered load" in panels:
        assert "offered load" in title and "Poisson" in footer
    else:
        assert "load" not in title.lower() and "poisson" not in title.lower()
        assert "poisson" not in footer.lower() and "offered" not in footer.lower()
        assert "gap" in title
    assert ("gap" in title) == any(p.startswith("idle gap") for p in panels)


def test_overloaded_points_are_marked_and_explained_once_in_the_legend(drawn: Any) -> None:
    overloaded = [ln for ax in drawn.axes for ln in ax.lines if (ln.get_gid() or "").startswith("overloaded")]
    assert all(not ax.texts for ax in drawn.axes)  # no per-point text to collide
    legends = [ax.get_legend() for ax in drawn.axes if ax.get_legend()] + list(drawn.legends)
    assert len(legends) == 1
    labels = [t.get_text() for t in legends[0].get_texts()]
    assert len(labels) == len(set(labels))
    kinds = {ln.get_gid() for ln in overloaded}
    for kind in ("overloaded:bound", "overloaded:util"):
        word = "stopped at" if kind.endswith("bound") else "util"
        assert (kind in kinds) == any(lab.startswith("overloaded") and word in lab for lab in labels), labels


def test_a_runners_cases_get_colours_of_their_own_when_several_cases_are_drawn() -> None:
    from benchbox.plots._common import runner_colour
    from benchbox.plots.sweep import Point, series_colours

    def pt(series: str, runner: str) -> Point:
        return Point("c", "gap", 1.0, series, runner, row=None)

    one_case = [pt("torch-eager (sleep)", "torch-eager"), pt("torch-eager (busy)", "torch-eager"),
                pt("torch-compile (sleep)", "torch-compile")]
    assert series_colours(one_case) == {"torch-eager": runner_colour("torch-eager"),
                                        "torch-compile": runner_colour("torch-compile")}
    cases = [pt("torch-eager · invoice (sleep)", "torch-eager"),
             pt("torch-eager · outage (sleep)", "torch-eager"),
             pt("torch-eager · outage (busy)", "torch-eager"),
             pt("torch-compile · invoice (sleep)", "torch-compile")]
    colours = series_colours(cases)
    assert list(colours) == ["torch-eager · invoice", "torch-eager · outage", "torch-compile · invoice"]
    assert len(set(colours.values())) == 3


def test_back_to_back_receipts_alone_are_refused_not_drawn_empty() -> None:
    """A sweep figure draws latency against load; receipts that hold no load (back to back only)
    give it nothing but gap 0, so it is refused in one line, not drawn as empty axes."""
    from benchbox.errors import UsageError

    paths = sorted((REPO / "receipts").glob("h200-tiny-fp32.*.json"))[:2]
    with pytest.raises(UsageError, match=r"^a sweep figure draws latency against load, and these receipts "
                                         r"are back to back only"):
        figure(label_receipts(paths, [load_receipt(p) for p in paths]), "sweep")
    index = SWEEPS[0]
    swept = expand_index([index])
    assert figure(label_receipts([*swept, paths[0]], [load_receipt(p) for p in [*swept, paths[0]]]), "sweep")
