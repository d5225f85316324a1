"""benchbox report: series, Otava change points judged by the diff engine, and the static site's files."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox import render as cr
from benchbox.cli import main
from benchbox.receipts.diff import DiffOptions, diff_receipts
from benchbox.report import History, analyze, build_report
from benchbox.report.history import Series
from benchbox.store import Store
from tests.history_fixture import EVIL, EVIL_CASE, GPU, STEP, commit_sha, fill_store
from tests.support import cli_without_torch

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("otava", reason="apache-otava is not installed (pip install --no-deps apache-otava)")


@pytest.fixture(scope="module")
def step_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fill_store(tmp_path_factory.mktemp("step"))


@pytest.fixture(scope="module")
def step_history(step_store: Path) -> History:
    return analyze(Store(step_store))


@pytest.fixture(scope="module")
def flat_history(tmp_path_factory: pytest.TempPathFactory) -> History:
    return analyze(Store(fill_store(tmp_path_factory.mktemp("flat"), dataclasses.replace(STEP, step=0.0))))


@pytest.fixture(scope="module")
def site(step_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    build_report(step_store, out)
    return out


def _all_series(h: History) -> list[tuple[str, str, Series]]:
    return [(p.task, p.groups[s.group].device, s) for p in h.pages for s in p.series]


def _main_series(h: History, case: str, runner: str) -> Series:
    page = next(p for p in h.pages if p.task == "decision")
    return next(s for s in page.series if (s.case, s.runner) == (case, runner)
                and page.groups[s.group].device.startswith("cpu"))


# -- acceptance: the injected step is exactly one change point, no step is none --------------

def test_a_35_percent_step_is_exactly_one_change_point_at_its_commit(step_history: History) -> None:
    found = [(task, dev, s.case, s.runner, c.point.index) for task, dev, s in _all_series(step_history)
             for c in s.changes]
    assert len(found) == 1, found
    task, dev, case, runner, index = found[0]
    assert (task, case, runner, index) == ("decision", *STEP.step_series, STEP.step_at)
    change = _main_series(step_history, case, runner).changes[0]
    assert 0.28 < change.found.change < 0.42
    assert change.found.pvalue < 0.001


def test_a_change_point_is_judged_slower_on_ten_runs_either_side(step_history: History) -> None:
    """One receipt per commit is one process: a diff of two of them is unresolved. The change
    point's verdict combines up to 10 runs either side, so it has the processes a verdict needs."""
    s = _main_series(step_history, *STEP.step_series)
    (change,) = s.changes
    usable = [p.identity for p in s.points if p.usable]
    at = usable.index(change.point.identity)
    assert change.step.base == tuple(usable[at - 10:at]) and change.step.head == tuple(usable[at:at + 10])
    assert change.step.verdict == "slower", change.step.reason
    assert "10/10 processes" in change.step.reason
    assert change.step.ratio == pytest.approx(1 + change.found.change, rel=0.05)


def test_one_run_against_its_predecessor_is_unresolved_so_the_site_shows_no_step_verdict(
        step_history: History, step_store: Path, site: Path) -> None:
    s = _main_series(step_history, *STEP.step_series)
    store = Store(step_store)
    pred, at = s.points[STEP.step_at - 1], s.points[STEP.step_at]
    d = diff_receipts(store.load(pred.identity), store.load(at.identity), DiffOptions())
    (row,) = [r for r in d.rows if (r.case, r.runner) == STEP.step_series]
    assert row.verdict == "unresolved"  # a +35% step, and still no verdict from one run a side
    data = json.loads((site / "history.json").read_text())
    page = next(p for p in data["pages"] if p["task"] == "decision")
    assert all("step" not in p for s in page["series"] for p in s["points"])
    assert "always unresolved" in data["method"]["no_step_verdicts"]
    assert "Single commits carry no verdict" in (site / "index.html").read_text()


def test_the_same_history_without_the_step_has_no_change_point(flat_history: History) -> None:
    found = [(s.case, s.runner, c.point.index) for _, _, s in _all_series(flat_history) for c in s.changes]
    assert found == []
    assert flat_history.diffs == {}


# -- the same verdict engine as benchbox combine + benchbox diff ---------------------------------

def test_the_change_points_verdict_is_that_of_benchbox_combine_and_diff(step_history: History,
                                                                         step_store: Path,
                                                                         tmp_path: Path) -> None:
    (change,) = _main_series(step_history, *STEP.step_series).changes
    store = Store(step_store)
    sides = []
    for role, ids in (("base", change.step.base), ("head", change.step.head)):
        out = tmp_path / f"{role}.json"
        r = CliRunner().invoke(main, ["combine", *(str(store.receipt_path(i)) for i in ids), "-o", str(out)])
        assert r.exit_code == 0, r.output
        sides.append(str(out))
    r = CliRunner().invoke(main, ["diff", *sides, "--format", "json"])
    rows = {(row["case"], row["runner"]): row for row in json.loads(r.output)["rows"]}
    assert rows[STEP.step_series]["verdict"] == change.step.verdict == "slower"
    assert rows[STEP.step_series]["metrics"][0]["ratio"] == pytest.approx(change.step.ratio)


def test_invalid_and_failed_points_are_skipped_by_steps_and_change_points(step_history: History) -> None:
    inv = _main_series(step_history, "outage", "torch-eager")
    bad = inv.points[12]
    assert bad.status == "invalid" and not bad.usable
    failed = _main_series(step_history, "outage", "torch-compile").points[20]
    assert failed.status == "failed" and failed.p50_ns is None
    assert all(c.point.usable for _, _, s in _all_series(step_history) for c in s.changes)
    stepped = _main_series(step_history, *STEP.step_series)
    (change,) = stepped.changes
    assert set(change.step.base + change.step.head) <= {p.identity for p in stepped.points if p.usable}


def test_series_never_mix_devices_tasks_or_contract_hashes(step_history: History) -> None:
    pages = {(p.task, p.contract_hash) for p in step_history.pages}
    assert len(pages) == 2
    decision = next(p for p in step_history.pages if p.task == "decision")
    assert sorted(g.device.split(" ")[0] for g in decision.groups) == ["NVIDIA", "cpu"]
    gpu = next(g for g in decision.groups if g.device == "NVIDIA H200")
    assert len(gpu.receipts) == GPU.commits
    for s in decision.series:
        assert len(s.points) == len(decision.groups[s.group].receipts)


# -- the site ------------------------------------------------------------------------------------

def test_site_is_static_files_with_every_link_present(site: Path) -> None:
    assert (site / "index.html").exists() and (site / "assets" / "history.js").exists()
    pages = sorted(site.glob("*.html"))
    assert len(pages) == 3  # index + two task/contract pages
    for page in pages + sorted((site / "diffs").glob("*.html")):
        text = page.read_text()
        assert "http://" not in text and "https://" not in text, page  # nothing fetched from a network
        for href in re.findall(r'(?:href|src)="([^"#]+)"', text):
            if href.startswith("data:"):
                continue
            assert (page.parent / href).resolve().exists(), f"{page.name}: {href}"


def test_every_point_links_its_receipt_and_every_change_point_its_diff(site: Path) -> None:
    data = json.loads((site / "history.json").read_text())
    n = diffs = 0
    for page in data["pages"]:
        for s in page["series"]:
            for p in s["points"]:
                assert (site / p["receipt"]).exists()
                n += 1
            for c in s["changes"]:
                assert (site / c["step"]["diff"]).exists() and (site / c["step"]["md"]).exists()
                diffs += 1
    assert n == 50 * 4 + GPU.commits * 4 + EVIL.commits
    assert diffs == 1 and len(list((site / "diffs").glob("*.html"))) == 1


def test_pre_rendered_markdown_diff_is_the_diff_engines(site: Path, step_store: Path,
                                                        step_history: History) -> None:
    from benchbox.receipts.combine import combine

    step = _main_series(step_history, *STEP.step_series).changes[0].step
    store = Store(step_store)
    b = combine([store.load(i) for i in step.base], [f"receipts/{i}.json" for i in step.base])
    h = combine([store.load(i) for i in step.head], [f"receipts/{i}.json" for i in step.head])
    d = diff_receipts(b, h, DiffOptions(), "base.json", "head.json")
    (md,) = site.glob("diffs/*.md")
    assert md.read_text() == cr.diff_markdown(d)
    html = md.with_suffix(".html").read_text()
    row = re.search(r'<tr class="v-slower"><td>torch-compile</td><td>invoice</td>', html)
    assert row is not None
    # the page names the commands that reproduce it, from the site's directory
    assert f"benchbox combine receipts/{step.base[0]}.json" in html
    assert "benchbox diff base.json head.json" in html


def test_markup_from_receipts_is_escaped(site: Path) -> None:
    page = next(p for p in site.glob("x*.html"))
    text = page.read_text()
    assert "<script>alert(1)</script>" not in text
    assert "<img src=x" not in text
    assert "&lt;img src=x onerror=&quot;document.title=&#x27;pwned&#x27;&quot;&gt;" in text
    data = text.split('id="history-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and json.loads(data)["series"][0]["case"] == EVIL_CASE
    index = (site / "index.html").read_text()
    assert "<script>alert" not in index


def test_the_page_data_marks_the_regression(site: Path) -> None:
    data = json.loads((site / "history.json").read_text())
    page = next(p for p in data["pages"] if p["task"] == "decision")
    changes = [(s["case"], s["runner"], c["i"], c["step"]["verdict"]) for s in page["series"]
               for c in s["changes"]]
    assert changes == [(*STEP.step_series, STEP.step_at, "slower")]


def test_the_index_lists_the_regression_and_the_latest_value_of_every_series(site: Path) -> None:
    index = (site / "index.html").read_text()
    table = index.split('<table class="changes">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr class=\"v-[a-z-]+\">(.*?)</tr>", table)
    assert len(rows) == 1
    assert commit_sha(STEP, STEP.step_at)[:8] in rows[0] and "slower" in rows[0] and "+3" in rows[0]
    assert ">2026-03-03 16:00<" in rows[0]  # the step's commit time (one commit an hour)
    latest = index.split('<table class="latest">', 1)[1].split("</table>", 1)[0]
    assert latest.count("<tr>") == 1 + 4 + 4 + 1  # header, CPU and GPU series, the markup-named one
    assert commit_sha(STEP, STEP.commits - 1)[:8] in latest


def test_a_series_that_never_ran_is_folded_away_not_drawn(tmp_path: Path) -> None:
    from tests.history_fixture import HistorySpec, write_history

    spec = HistorySpec(commits=4, samples=40, cases=("invoice",), runners=("torch-eager", "torch-compile"),
                       failed=tuple((k, "invoice", "torch-compile") for k in range(4)))
    Store(tmp_path / "s").add(write_history(tmp_path / "h", spec))
    build_report(tmp_path / "s", tmp_path / "site")
    page = next((tmp_path / "site").glob("decision.*.html")).read_text()
    assert page.count('<article class="series"') == 1 and 'data-runner="torch-compile"' not in page
    folded = page.split('<details class="failed-only">', 1)[1].split("</details>", 1)[0]
    assert "invoice · torch-compile: 4 run(s), none valid" in folded and "compiled graph crashed" in folded
    index = (tmp_path / "site" / "index.html").read_text()
    assert "1 series never produced a valid result" in index


def test_commit_url_links_every_commit_and_a_bad_template_is_refused(step_store: Path,
                                                                     tmp_path: Path) -> None:
    url = "https://example.org/r/commit/{commit}"
    r = CliRunner().invoke(main, ["report", str(step_store), "-o", str(tmp_path / "s"), "--commit-url", url])
    assert r.exit_code == 0, r.output
    sha = commit_sha(STEP, STEP.step_at)
    index = (tmp_path / "s" / "index.html").read_text()
    assert f'<a class="commit" href="https://example.org/r/commit/{sha}">' in index
    data = json.loads((tmp_path / "s" / "history.json").read_text())
    page = next(p for p in data["pages"] if p["task"] == "decision")
    assert page["groups"][0]["receipts"][0]["commit_url"].startswith("https://example.org/r/commit/")
    r = CliRunner().invoke(main, ["report", str(step_store), "-o", str(tmp_path / "t"), "--commit-url",
                                  "https://example.org/{sha}"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "--commit-url: the template must contain {commit}" in r.output
    assert not (tmp_path / "t").exists()


def test_the_vendored_chart_library_ships_with_its_licence_as_package_data() -> None:
    import fnmatch
    import tomllib

    from benchbox.report.site import ASSET_FILES, ASSETS

    pyproject = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["*"]
    for name in ASSET_FILES:
        assert (ASSETS / name).stat().st_size > 0, name
        assert any(fnmatch.fnmatch(name, g) for g in globs), f"{name} is not package data"
    assert "MIT License" in (ASSETS / "uPlot.LICENSE").read_text()
    head = (ASSETS / "uPlot.iife.min.js").read_text()[:60]
    assert head.startswith("/*! https://github.com/leeoniya/uPlot (v1.6.")


def test_the_chart_library_comparison_is_the_committed_measurement_of_the_vendored_files() -> None:
    from benchbox.report.site import ASSETS
    from benchmarks.chart_libraries import RESULTS, check_doc

    assert check_doc(ROOT.parent / "docs" / "chart-libraries.md") is None
    measured = json.loads(RESULTS.read_text())["results"]["uPlot"]
    vendored = sum((ASSETS / n).stat().st_size for n in ("uPlot.iife.min.js", "uPlot.min.css"))
    assert measured["bytes"] == vendored  # the comparison measured the files the package ships
    readme = (ROOT.parent / "README.md").read_text()
    assert "(docs/figures/history-site.png)" in readme
    assert (ROOT.parent / "docs" / "figures" / "history-site.png").read_bytes()[:4] == b"\x89PNG"


# -- the command ---------------------------------------------------------------------------------

def test_cli_report_writes_the_site_and_names_the_change_point(step_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    r = CliRunner().invoke(main, ["report", str(step_store), "-o", str(out)])
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    assert "1 change point(s)" in lines[0]
    assert len(lines) == 2 and "invoice · torch-compile" in lines[1]
    assert "diff verdict slower (10 v 10 runs)" in lines[1]
    # a rewrite replaces the site it wrote before
    (out / "stale.html").write_text("old")
    r = CliRunner().invoke(main, ["report", str(step_store), "-o", str(out), "--threshold", "10%"])
    assert r.exit_code == 0, r.output
    assert not (out / "stale.html").exists()
    assert "±10.0%" in (out / "index.html").read_text()


@pytest.mark.parametrize("args, message", [
    (["report", "{tmp}/none", "-o", "{tmp}/site"], "no such receipt store"),
    (["report", "{store}", "-o", "{tmp}/busy"], "not empty and not a site benchbox wrote"),
    (["report", "{store}", "-o", "{tmp}/site", "--threshold", "five"], "--threshold expects a percentage"),
    (["report", "{store}", "-o", "{tmp}/site", "--max-pvalue", "2"], "--max-pvalue: must be between 0 and 1"),
    (["report", "{store}", "-o", "{tmp}/site", "--alpha", "2"], "--alpha: must be between 0 and 1"),
    (["report", "{tmp}/empty", "-o", "{tmp}/site"], "holds no receipts"),
])
def test_cli_report_refuses_bad_input_in_one_line(step_store: Path, tmp_path: Path, args: list[str],
                                                  message: str) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("keep me")
    Store(tmp_path / "empty")
    argv = [a.format(tmp=tmp_path, store=step_store) for a in args]
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.output
    assert (tmp_path / "busy" / "mine.txt").read_text() == "keep me"


def test_report_never_imports_torch(step_store: Path, tmp_path: Path) -> None:
    cli_without_torch(["report", str(step_store), "-o", str(tmp_path / "s")])


def test_an_incomplete_receipt_is_drawn_and_an_unreadable_time_sorts_first(tmp_path: Path) -> None:
    from benchbox.receipts import io
    from tests.history_fixture import HistorySpec, write_history

    paths = write_history(tmp_path / "h", HistorySpec(commits=3, samples=40, cases=("invoice",),
                                                      runners=("torch-eager",)))
    r = json.loads(paths[2].read_text())
    r.update(complete=False, interrupted=True, interrupt_reason="SIGINT after 1 result(s)")
    io.write_receipt(paths[2], r)
    r = json.loads(paths[1].read_text())
    r["created_at"] = "some day"
    io.write_receipt(paths[1], r)
    store = Store(tmp_path / "s")
    store.add(paths)
    (page,) = analyze(store).pages
    (series,) = page.series
    refs = page.groups[0].receipts
    assert refs[0].created_at == "some day"  # no readable time: first
    last = series.points[2]
    assert refs[2].complete is False
    assert last.usable  # an incomplete receipt's rows are still drawn


def test_a_report_of_one_real_run(eager_receipt_path: Path, tmp_path: Path) -> None:
    Store(tmp_path / "s").add([eager_receipt_path])
    r = build_report(tmp_path / "s", tmp_path / "site")
    assert r.receipts == 1 and r.diffs == 0 and r.changes == ()
    data = json.loads((tmp_path / "site" / "history.json").read_text())
    (page,) = data["pages"]
    assert page["task"] == "decision" and page["contract"]["name"] == "public_task_call_wall"
    assert {s["case"] for s in page["series"]} == {"invoice", "outage", "receipt", "image", "video"}
    assert all(len(s["points"]) == 1 and s["changes"] == [] for s in page["series"])


def test_a_change_point_whose_runs_cannot_be_combined_says_why(tmp_path: Path) -> None:
    from benchbox.receipts import io
    from tests.history_fixture import HistorySpec, write_history

    spec = HistorySpec(commits=30, step=0.35, step_at=15, samples=100, cases=("invoice",),
                       runners=("torch-compile",))
    paths = write_history(tmp_path / "h", spec)
    r = json.loads(paths[17].read_text())
    r["settings"]["warmup"] = 10  # another configuration among the runs after the step
    io.write_receipt(paths[17], r)
    Store(tmp_path / "s").add(paths)
    (page,) = analyze(Store(tmp_path / "s")).pages
    (series,) = page.series
    (change,) = series.changes
    assert change.point.index == 15
    assert change.step.verdict == "not compared"
    assert "is not a run of the configuration of" in change.step.reason and "warmup" in change.step.reason
    out = build_report(tmp_path / "s", tmp_path / "site")
    assert out.changes[0].verdict == "not compared"
    (page_html,) = (tmp_path / "site" / "diffs").glob("*.html")
    assert "Comparison refused" in page_html.read_text()
