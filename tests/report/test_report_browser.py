"""The history site in a real browser: headless Chromium from the system packages, over CDP.

Loads the pages from file://, fails on any console error, uncaught exception or failed
load, and checks that the charts drew, that the injected regression is marked as a change
point and a slower step, that hovering shows a point's values, that clicking pins its
links, that the filters work and that markup from receipts stays text.
"""

from __future__ import annotations

import json
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
    assert "invoice · torch-compile" in rows[0]


def test_charts_drew_and_the_regression_is_marked(browser: Chromium, site: Path) -> None:
    _open(browser, _decision_page(site))
    got = _js(browser, """
      const arts = Array.from(document.querySelectorAll('article.series'));
      return {drawn: document.body.dataset.drawn,
              charts: arts.map(a => ({case: a.dataset.case, runner: a.dataset.runner,
                device: a.dataset.device,
                svgs: a.querySelectorAll('svg.trend').length,
                p50: a.querySelectorAll('circle.pt.p50').length,
                p99: a.querySelectorAll('circle.pt.p99').length,
                invalid: a.querySelectorAll('.pt.invalid, .pt.failed').length,
                lines: a.querySelectorAll('path.line.p50, path.line.p99').length,
                bands: a.querySelectorAll('path.band').length,
                cps: Array.from(a.querySelectorAll('g.cp')).map(g => [Number(g.dataset.i), g.dataset.commit,
                                                                     g.dataset.verdict]),
                slower: Array.from(a.querySelectorAll('path.step.slower')).map(p => Number(p.dataset.i))}))};
    """)
    assert isinstance(got, dict) and got["drawn"] == "true"
    charts = got["charts"]
    assert len(charts) == 8  # 4 series on the CPU, 4 on the GPU
    for c in charts:
        n = 50 if c["device"].startswith("cpu") else GPU.commits
        # a p99 interval needs 368 samples: the GPU history's 60 per run give a p99 band-less chart
        bands = 2 if c["device"].startswith("cpu") else 1
        assert c["svgs"] == 1 and c["lines"] == 2 and c["bands"] == bands, c
        assert c["p50"] + c["invalid"] == n, c
        assert c["p99"] == c["p50"], c
    marked = [c for c in charts if c["cps"]]
    assert len(marked) == 1
    reg = marked[0]
    assert (reg["case"], reg["runner"]) == STEP.step_series and reg["device"].startswith("cpu")
    assert reg["cps"] == [[STEP.step_at, commit_sha(STEP, STEP.step_at), "slower"]]
    assert STEP.step_at in reg["slower"]
    broken = {(c["case"], c["runner"]): c["invalid"] for c in charts if c["device"].startswith("cpu")}
    assert broken[("outage", "torch-eager")] == 1 and broken[("outage", "torch-compile")] == 1


def test_hover_shows_the_values_and_click_pins_the_links(browser: Chromium, site: Path) -> None:
    _open(browser, _decision_page(site))
    sel = (f"article.series[data-case='{STEP.step_series[0]}'][data-runner='{STEP.step_series[1]}']"
           f"[data-device^='cpu'] circle.pt.p50[data-i='{STEP.step_at}']")
    box = _js(browser, f"""const e = document.querySelector("{sel}");
        e.scrollIntoView({{block: 'center'}});
        const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2];""")
    assert isinstance(box, list)
    browser.mouse("mouseMoved", box[0], box[1])
    tip = _js(browser, "const t = document.getElementById('tooltip'); return [t.hidden, t.textContent];")
    assert tip[0] is False
    text = tip[1]
    assert commit_sha(STEP, STEP.step_at)[:12] in text
    assert "p50 " in text and "ms [" in text and "slower" in text and "change point +" in text
    browser.mouse("mousePressed", box[0], box[1])
    browser.mouse("mouseReleased", box[0], box[1])
    links = _js(browser, f"""const a = document.querySelector("{sel}").closest('article');
        return Array.from(a.querySelectorAll('.pinned a')).map(x => x.getAttribute('href'));""")
    assert isinstance(links, list) and len(links) == 3
    assert links[0].startswith("receipts/") and links[1].startswith("diffs/") and links[2].endswith(".md")
    for href in links:
        assert (site / href).exists()
    _open(browser, site / links[1])
    row = _js(browser, """return Array.from(document.querySelectorAll('table.diff tr'))
        .map(tr => tr.textContent).filter(t => t.includes('torch-compile') && t.includes('invoice'));""")
    assert isinstance(row, list) and len(row) == 1 and "slower" in row[0]


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
        points: document.querySelectorAll('article circle.pt.p50').length};""")
    assert isinstance(got, dict)
    assert got["title"] != "pwned" and got["imgs"] == 0 and got["scripts"] == 2
    assert got["h3"].startswith(EVIL_CASE)
    assert got["points"] == 4


def test_a_site_of_one_real_run_draws_single_points(browser: Chromium, eager_receipt_path: Path,
                                                     tmp_path: Path) -> None:
    from benchbox.store import Store

    Store(tmp_path / "s").add([eager_receipt_path])
    build_report(tmp_path / "s", tmp_path / "site")
    _open(browser, next((tmp_path / "site").glob("decision.*.html")))
    got = _js(browser, """return Array.from(document.querySelectorAll('article.series'))
        .map(a => a.querySelectorAll('circle.pt.p50, .pt.invalid, .pt.failed').length);""")
    assert isinstance(got, list) and len(got) == 5 and set(got) == {1}
