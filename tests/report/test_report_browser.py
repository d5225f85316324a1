"""The history site in a real browser: headless Chromium from the system packages, over CDP.

Loads the pages from file://, fails on any console error, uncaught exception or failed
load, and checks that the index lists the injected regression, that uPlot drew every
chart, that the regression is marked as a change point judged slower, that hovering shows
a point's values, that clicking pins its links, that dragging zooms, that the filters work
and that markup from receipts stays text. The index test writes the screenshot the README
shows (docs/figures/history-site.png) when BENCHBOX_SCREENSHOT names a file.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchbox.report import build_report
from tests.browser import Chromium, find_chromium
from tests.history_fixture import EVIL_CASE, GPU, STEP, commit_sha, fill_store

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                "(apt-get install --no-install-recommends chromium): the site is not "
                                "checked in a browser")
pytest.importorskip("websocket", reason="websocket-client is not installed (the dev extra has it)")
pytest.importorskip("otava", reason="apache-otava is not installed (pip install --no-deps apache-otava)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("browser")
    out = tmp / "site"
    build_report(fill_store(tmp), out)
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    assert CHROMIUM is not None
    with Chromium(CHROMIUM) as b:
        yield b


def _open(browser: Chromium, path: Path) -> None:
    before = len(browser.errors())
    browser.goto(path.resolve().as_uri())
    errors = browser.errors()[before:]
    assert errors == [], f"{path.name}: {errors}"


def _decision_page(site: Path) -> Path:
    return next(site.glob("decision.public_task_call_wall-*.html"))


def _js(browser: Chromium, expr: str) -> object:
    return browser.evaluate(f"(function () {{ {expr} }})()")


def test_index_loads_without_errors_and_lists_the_change_point(browser: Chromium, site: Path) -> None:
    _open(browser, site / "index.html")
    rows = _js(browser, """return Array.from(document.querySelectorAll('table.changes tbody tr'))
                           .map(tr => tr.textContent);""")
    assert isinstance(rows, list) and len(rows) == 1
    assert commit_sha(STEP, STEP.step_at)[:8] in rows[0] and "slower" in rows[0]
    assert "invoice · torch-compile" in rows[0] and "10 v 10 runs" in rows[0]
    latest = _js(browser, "return document.querySelectorAll('table.latest tbody tr').length;")
    assert latest == 4 + 4 + 1
    # the screenshot the README shows: the regression on the index, then its series' chart
    shot = os.environ.get("BENCHBOX_SCREENSHOT")
    if shot:
        _open(browser, _decision_page(site))
        _js(browser, """const g = document.querySelector("section.group[data-group='1']");
                     window.scrollTo(0, g.getBoundingClientRect().top + window.scrollY - 8);""")
        png = browser.send("Page.captureScreenshot", format="png")["data"]
        Path(shot).write_bytes(base64.b64decode(png))


def _charts(browser: Chromium) -> list[dict]:
    got = _js(browser, """
      return Array.from(document.querySelectorAll('article.series')).map(a => {
        const host = a.querySelector('div.chart');
        const c = window.benchboxCharts.find(c => c.host === host);
        const u = c.plot;
        return {case: a.dataset.case, runner: a.dataset.runner, device: a.dataset.device,
                drawn: host.dataset.drawn, canvases: host.querySelectorAll('canvas').length,
                n: u.data[0].length, p50: u.data[1].filter(v => v !== null).length,
                p99: u.data[4].filter(v => v !== null).length,
                bands: [u.data[2], u.data[5]].map(col => col.filter(v => v !== null).length),
                width: u.width, marks: JSON.parse(host.dataset.marks)};
      });""")
    assert isinstance(got, list)
    return got  # type: ignore[return-value]


def test_charts_drew_and_the_regression_is_marked(browser: Chromium, site: Path) -> None:
    _open(browser, _decision_page(site))
    assert _js(browser, "return document.body.dataset.drawn;") == "true"
    charts = _charts(browser)
    assert len(charts) == 8  # 4 series on the CPU, 4 on the GPU
    for c in charts:
        n = 50 if c["device"].startswith("cpu") else GPU.commits
        assert c["drawn"] == "true" and c["canvases"] == 1 and c["width"] > 300, c
        assert c["n"] == n and c["p50"] + len(c["marks"]["crossed"]) == n, c
        assert c["p99"] == c["p50"] and c["bands"][0] == c["p50"], c
        # a p99 interval needs 368 samples: the GPU history's 60 per run give no p99 band
        assert c["bands"][1] == (c["p50"] if c["device"].startswith("cpu") else 0), c
    marked = [c for c in charts if c["marks"]["changes"]]
    assert len(marked) == 1
    reg = marked[0]
    assert (reg["case"], reg["runner"]) == STEP.step_series and reg["device"].startswith("cpu")
    assert reg["marks"]["changes"] == [[STEP.step_at, commit_sha(STEP, STEP.step_at), "slower"]]
    broken = {(c["case"], c["runner"]): c["marks"]["crossed"] for c in charts
              if c["device"].startswith("cpu")}
    assert broken[("outage", "torch-eager")] == [12] and broken[("outage", "torch-compile")] == [20]


STEP_ARTICLE = (f"article.series[data-case='{STEP.step_series[0]}'][data-runner='{STEP.step_series[1]}']"
                "[data-device^='cpu']")


def _step_point(browser: Chromium) -> list[float]:
    """The step's point on screen: uPlot's own scale turns its index and p50 into pixels."""
    box = _js(browser, f"""const a = document.querySelector("{STEP_ARTICLE}");
        a.scrollIntoView({{block: 'center'}});
        const u = window.benchboxCharts.find(c => c.host === a.querySelector('div.chart')).plot;
        const r = u.over.getBoundingClientRect();
        return [r.left + u.valToPos({STEP.step_at}, 'x'),
                r.top + u.valToPos(u.data[1][{STEP.step_at}], 'p50')];""")
    assert isinstance(box, list)
    return box


def test_hover_shows_the_values_and_click_pins_the_links(browser: Chromium, site: Path) -> None:
    _open(browser, _decision_page(site))
    box = _step_point(browser)
    browser.mouse("mouseMoved", box[0], box[1])
    tip = _js(browser, "const t = document.getElementById('tooltip'); return [t.hidden, t.textContent];")
    assert tip[0] is False
    text = tip[1]
    assert commit_sha(STEP, STEP.step_at)[:12] in text
    assert "p50 " in text and "ms [" in text and "change point +" in text
    assert "diff on 10 v 10 runs: slower" in text
    browser.mouse("mousePressed", box[0], box[1])
    browser.mouse("mouseReleased", box[0], box[1])
    links = _js(browser, f"""const a = document.querySelector("{STEP_ARTICLE}");
        return Array.from(a.querySelectorAll('.pinned a')).map(x => x.getAttribute('href'));""")
    assert isinstance(links, list) and len(links) == 3
    assert links[0].startswith("receipts/") and links[1].startswith("diffs/") and links[2].endswith(".md")
    for href in links:
        assert (site / href).exists()
    _open(browser, site / links[1])
    row = _js(browser, """return Array.from(document.querySelectorAll('table.diff tr'))
        .map(tr => tr.textContent).filter(t => t.includes('torch-compile') && t.includes('invoice'));""")
    assert isinstance(row, list) and len(row) == 1 and "slower" in row[0]


def test_dragging_across_a_chart_zooms_into_commits_and_a_double_click_zooms_out(browser: Chromium,
                                                                              site: Path) -> None:
    _open(browser, _decision_page(site))
    x, y = _step_point(browser)
    scale = ("return (u => [u.scales.x.min, u.scales.x.max])(window.benchboxCharts.find(c => c.host === "
             f"document.querySelector(\"{STEP_ARTICLE} div.chart\")).plot);")
    before = _js(browser, scale)
    browser.mouse("mousePressed", x - 120, y)
    browser.mouse("mouseMoved", x - 60, y)
    browser.mouse("mouseMoved", x + 120, y)
    browser.mouse("mouseReleased", x + 120, y)
    zoomed = _js(browser, scale)
    assert isinstance(before, list) and isinstance(zoomed, list)
    assert before == [-0.5, 49.5]
    assert before[0] < zoomed[0] < STEP.step_at < zoomed[1] < before[1], zoomed
    _js(browser, f"document.querySelector(\"{STEP_ARTICLE} .u-over\")"
                 ".dispatchEvent(new MouseEvent('dblclick', {bubbles: true}));")
    assert _js(browser, scale) == before
    assert browser.errors() == []


def test_filters_hide_what_does_not_match(browser: Chromium, site: Path) -> None:
    _open(browser, _decision_page(site))

    def choose(key: str, value: str) -> dict:
        return _js(browser, f"""const s = document.querySelector('select[data-filter="{key}"]');
            s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change'));
            const shown = Array.from(document.querySelectorAll('article.series')).filter(a => !a.hidden);
            return {{shown: shown.map(a => [a.dataset.runner, a.dataset.device]), hash: location.hash,
                    groups: Array.from(document.querySelectorAll('section.group'))
                                 .filter(g => !g.hidden).length}};
        """)  # type: ignore[return-value]

    got = choose("runner", "torch-eager")
    assert len(got["shown"]) == 4 and {r for r, _ in got["shown"]} == {"torch-eager"}
    assert "runner=torch-eager" in got["hash"]
    got = choose("device", "NVIDIA H200")
    assert got["shown"] == [["torch-eager", "NVIDIA H200"]] * 2 and got["groups"] == 1
    got = choose("runner", "")
    assert len(got["shown"]) == 4 and {d for _, d in got["shown"]} == {"NVIDIA H200"}
    assert browser.errors() == []


def test_markup_in_receipt_names_stays_text(browser: Chromium, site: Path) -> None:
    page = next(site.glob("x*.html"))
    _open(browser, page)
    got = _js(browser, """return {title: document.title, imgs: document.querySelectorAll('img').length,
        scripts: document.querySelectorAll('script').length,
        h3: document.querySelector('article.series h3').textContent,
        points: window.benchboxCharts[0].plot.data[1].filter(v => v !== null).length};""")
    assert isinstance(got, dict)
    assert got["title"] != "pwned" and got["imgs"] == 0 and got["scripts"] == 3  # uPlot, data, history.js
    assert got["h3"].startswith(EVIL_CASE)
    assert got["points"] == 4


def test_a_site_of_one_real_run_draws_single_points(browser: Chromium, eager_receipt_path: Path,
                                                     tmp_path: Path) -> None:
    from benchbox.store import Store

    Store(tmp_path / "s").add([eager_receipt_path])
    build_report(tmp_path / "s", tmp_path / "site")
    _open(browser, next((tmp_path / "site").glob("decision.*.html")))
    got = _js(browser, """return window.benchboxCharts.map(c => [c.plot.data[0].length,
        c.plot.data[1].filter(v => v !== null).length + JSON.parse(c.host.dataset.marks).crossed.length]);""")
    assert isinstance(got, list) and len(got) == 5 and {tuple(x) for x in got} == {(1, 1)}
