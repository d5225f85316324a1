"""Size, drawing time and licence of three chart libraries for the history site.

Run: python -m benchmarks.chart_libraries [--packages DIR] [--repeats 7] [--out FILE]

``--packages`` is a folder holding the npm tarballs (``npm pack uplot chart.js vega vega-lite``);
without it the script runs that ``npm pack`` in a temporary folder (the npm registry is needed
then). Measured for each library:

- size: the minified browser build the site would vendor, in bytes and gzip-compressed
  (uPlot: uPlot.iife.min.js + uPlot.min.css; Chart.js: chart.umd.min.js; Vega-Lite:
  vega.min.js + vega-lite.min.js, the runtime it compiles to);
- drawing time in headless Chromium (tests/browser.py, the site's browser test driver):
  a page of 8 charts like the site's, each a p50 line and a p99 line of 1,000 points with a
  p50 interval band (3 series of 1,000 points, plus the band's second edge), drawn
  ``--repeats`` times; the median of the wall time from the first constructor call to the
  last chart drawn (Vega: ``runAsync`` resolved), and the time to evaluate the library
  script once;
- licence: the ``license`` field of its package.json.

Times depend on the machine and its load: the result records ``/proc/loadavg`` beside them.

``--doc docs/chart-libraries.md`` rewrites the page's table and figures (between the
``<!-- benchmarks.chart_libraries -->`` markers) from this run; ``--check DOC`` runs nothing
and exits 1 when they are not the committed results' (tests/report/test_report.py checks it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.browser import Chromium, find_chromium

#: npm package → the files the site would vendor, inside the tarball
LIBRARIES: dict[str, dict[str, Any]] = {
    "uPlot": {"packages": ["uplot"],
              "files": ["package/dist/uPlot.iife.min.js", "package/dist/uPlot.min.css"]},
    "Chart.js": {"packages": ["chart.js"], "files": ["package/dist/chart.umd.min.js"]},
    "Vega-Lite": {"packages": ["vega", "vega-lite"],
                  "files": ["package/build/vega.min.js", "package/build/vega-lite.min.js"]},
}
POINTS = 1000
CHARTS = 8

#: one function per library: draw CHARTS charts into the divs #c0.. from window.DATA; returns a promise
DRAW = {
    "uPlot": """function draw() {
  for (let k = 0; k < %(charts)d; k++) {
    const el = document.getElementById('c' + k); el.textContent = '';
    new uPlot({width: 900, height: 260, legend: {show: false}, scales: {x: {time: false}},
      series: [{}, {stroke: 'blue', scale: 'p50'}, {stroke: 'transparent', scale: 'p50'},
               {stroke: 'transparent', scale: 'p50'}, {stroke: 'orange', scale: 'p99'}],
      bands: [{series: [3, 2], fill: 'rgba(0,0,255,.15)'}],
      axes: [{}, {scale: 'p50'}, {scale: 'p99', side: 1}]},
      [DATA.x, DATA.p50, DATA.lo, DATA.hi, DATA.p99], el);
  }
  return Promise.resolve();
}""",
    "Chart.js": """function draw() {
  for (let k = 0; k < %(charts)d; k++) {
    const el = document.getElementById('c' + k); el.textContent = '';
    const cv = document.createElement('canvas'); cv.width = 900; cv.height = 260; el.appendChild(cv);
    new Chart(cv, {type: 'line', options: {animation: false, responsive: false, parsing: false,
        normalized: true, plugins: {legend: {display: false}},
        scales: {x: {type: 'linear'}, p50: {position: 'left'}, p99: {position: 'right'}}},
      data: {datasets: [
        {data: DATA.xy.lo, yAxisID: 'p50', pointRadius: 0, borderWidth: 0},
        {data: DATA.xy.hi, yAxisID: 'p50', pointRadius: 0, borderWidth: 0, fill: '-1',
         backgroundColor: 'rgba(0,0,255,.15)'},
        {data: DATA.xy.p50, yAxisID: 'p50', borderColor: 'blue', pointRadius: 2},
        {data: DATA.xy.p99, yAxisID: 'p99', borderColor: 'orange', pointRadius: 2}]}});
  }
  return Promise.resolve();
}""",
    "Vega-Lite": """function draw() {
  const spec = {width: 840, height: 220, data: {values: DATA.rows},
    encoding: {x: {field: 'x', type: 'quantitative'}},
    layer: [{mark: {type: 'area', opacity: 0.15}, encoding: {y: {field: 'lo', type: 'quantitative'},
                                                                y2: {field: 'hi'}}},
            {mark: {type: 'line', point: true}, encoding: {y: {field: 'p50', type: 'quantitative'}}},
            {mark: {type: 'line', color: 'orange'}, encoding: {y: {field: 'p99', type: 'quantitative',
                                                                   axis: {orient: 'right'}}}}],
    resolve: {scale: {y: 'independent'}}};
  const runs = [];
  for (let k = 0; k < %(charts)d; k++) {
    const el = document.getElementById('c' + k); el.textContent = '';
    const view = new vega.View(vega.parse(vegaLite.compile(spec).spec), {renderer: 'canvas'});
    runs.push(view.initialize(el).runAsync());
  }
  return Promise.all(runs);
}""",
}


def _page(lib: str, files: list[str]) -> str:
    scripts = "".join(f'<script src="{Path(f).name}"></script>' for f in files if f.endswith(".js"))
    css = "".join(f'<link rel="stylesheet" href="{Path(f).name}">' for f in files if f.endswith(".css"))
    divs = "".join(f'<div id="c{k}"></div>' for k in range(CHARTS))
    return ("<!doctype html><html><head><meta charset='utf-8'>" + css
            + "<script>window.T0 = performance.now();</script>" + scripts
            + "<script>window.EVAL_MS = performance.now() - window.T0;</script></head><body>" + divs
            + "<script>" + DATA_JS + DRAW[lib] % {"charts": CHARTS} + "</script></body></html>")


DATA_JS = """
const N = NPOINTS;
const DATA = {x: [], p50: [], lo: [], hi: [], p99: [], rows: [], xy: {p50: [], lo: [], hi: [], p99: []}};
let s = 1; const rnd = () => (s = (s * 16807) % 2147483647) / 2147483647;
for (let i = 0; i < N; i++) {
  const m = 1.6e6 * (1 + 0.02 * (rnd() - 0.5)) * (i >= 600 ? 1.15 : 1);
  const r = {x: i, p50: m, lo: m * 0.98, hi: m * 1.02, p99: m * (1.6 + 0.4 * rnd())};
  DATA.rows.push(r);
  for (const k of ['p50', 'lo', 'hi', 'p99']) { DATA[k].push(r[k]); DATA.xy[k].push({x: i, y: r[k]}); }
  DATA.x.push(i);
}
""".replace("NPOINTS", str(POINTS))


def _unpack(packages: Path, work: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for lib, spec in LIBRARIES.items():
        folder = work / lib
        folder.mkdir()
        files, licences, versions = [], [], []
        for pkg in spec["packages"]:
            (tgz,) = sorted(packages.glob(f"{pkg}-[0-9]*.tgz"))
            with tarfile.open(tgz) as t:
                meta = json.load(t.extractfile("package/package.json"))  # type: ignore[arg-type]
                licences.append(meta.get("license"))
                versions.append(f"{pkg} {meta['version']}")
                for f in spec["files"]:
                    if f in t.getnames():
                        (folder / Path(f).name).write_bytes(t.extractfile(f).read())  # type: ignore[union-attr]
                        files.append(f)
        out[lib] = {"folder": folder, "files": files, "licence": " + ".join(sorted(set(licences))),
                    "versions": versions}
    return out


def _size(folder: Path, files: list[str]) -> dict[str, int]:
    raw = [(folder / Path(f).name).read_bytes() for f in files]
    return {"bytes": sum(len(b) for b in raw), "gzip_bytes": sum(len(gzip.compress(b, 9)) for b in raw)}


def _time(browser: Chromium, page: Path, repeats: int) -> dict[str, float]:
    browser.goto(page.as_uri())
    errors = browser.errors()
    if errors:
        raise SystemExit(f"{page.parent.name}: {errors}")
    times = browser.evaluate(f"""(async () => {{ const out = [];
        for (let r = 0; r < {repeats}; r++) {{
          const t = performance.now(); await draw();
          await new Promise(ok => requestAnimationFrame(() => ok()));
          out.push(performance.now() - t); }}
        return out; }})()""")
    times = sorted(times)
    return {"draw_8x1000_ms_median": times[len(times) // 2], "draw_ms_all": times,
            "script_eval_ms": browser.evaluate("window.EVAL_MS")}


def _npm_pack(work: Path) -> Path:
    folder = work / "npm"
    folder.mkdir()
    pkgs = sorted({p for spec in LIBRARIES.values() for p in spec["packages"]})
    subprocess.run(["npm", "pack", *pkgs], cwd=folder, check=True, capture_output=True)
    return folder


BEGIN, END = "<!-- benchmarks.chart_libraries -->", "<!-- /benchmarks.chart_libraries -->"
RESULTS = Path(__file__).with_name("results-chart-libraries.json")


def doc_text(result: dict[str, Any]) -> str:
    """The page's table and figures (what --doc writes and --check compares)."""
    r = result["results"]
    rows = ["| library | versions | minified | gzip | draw 8 charts × 1,000 points (median) "
            "| fastest – slowest draw | script evaluation | licence |", "|---|---|---|---|---|---|---|---|"]
    for lib, x in r.items():
        rows.append(f"| {lib} | {', '.join(x['versions'])} | {x['bytes'] / 1000:.1f} kB | "
                    f"{x['gzip_bytes'] / 1000:.1f} kB | {x['draw_8x1000_ms_median']:.0f} ms | "
                    f"{min(x['draw_ms_all']):.0f} – {max(x['draw_ms_all']):.0f} ms | "
                    f"{x['script_eval_ms']:.0f} ms | {x['licence']} |")
    u, c, v = r["uPlot"], r["Chart.js"], r["Vega-Lite"]
    med = "draw_8x1000_ms_median"
    ratio = (f"uPlot is {c['bytes'] / u['bytes']:.1f}× smaller than Chart.js and "
             f"{v['bytes'] / u['bytes']:.1f}× smaller than Vega-Lite, and draws the charts "
             f"{c[med] / u[med]:.1f}× and {v[med] / u[med]:.1f}× faster "
             f"(medians of {result['repeats']} draws).")
    where = (f"Measured on `{result['machine']}` ({result['cpu_count']} CPUs) at {result['when']}, "
             f"load average {', '.join(result['loadavg'])} while it ran.")
    return "\n".join(rows) + "\n\n" + ratio + " " + where


def check_doc(doc: Path, results: Path = RESULTS) -> str | None:
    """None when the page's block is the one ``results`` gives, else what differs."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        return f"{doc}: no {BEGIN} ... {END} block"
    found = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    want = doc_text(json.loads(results.read_text())).strip()
    return None if found == want else f"{doc}: the table disagrees with {results}:\n{found}\n---\n{want}"


def write_doc(doc: Path, result: dict[str, Any]) -> None:
    text = doc.read_text()
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    doc.write_text(f"{before}{BEGIN}\n{doc_text(result)}\n{END}{after}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packages", type=Path, default=None, help="folder of npm tarballs (default: npm pack)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--doc", type=Path, default=None, help="rewrite this page's table from this run")
    ap.add_argument("--check", type=Path, default=None, metavar="DOC",
                    help="run nothing: exit 1 when DOC's table disagrees with --results")
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args()
    if args.check:
        problem = check_doc(args.check, args.results)
        print(problem or f"{args.check}: the table agrees with {args.results}")
        raise SystemExit(1 if problem else 0)
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    work = Path(tempfile.mkdtemp(prefix="chartlibs."))
    try:
        libs = _unpack(args.packages or _npm_pack(work), work)
        results = {}
        with Chromium(chromium) as browser:
            for lib, info in libs.items():
                page = info["folder"] / "bench.html"
                page.write_text(_page(lib, info["files"]))
                results[lib] = {"versions": info["versions"], "licence": info["licence"],
                                **_size(info["folder"], info["files"]), **_time(browser, page, args.repeats)}
                print(f"{lib}: {results[lib]['bytes']} B ({results[lib]['gzip_bytes']} B gzip), "
                      f"{results[lib]['draw_8x1000_ms_median']:.1f} ms, {info['licence']}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": platform.node(),
              "cpu_count": os.cpu_count(), "loadavg": Path("/proc/loadavg").read_text().split()[:3],
              "points_per_series": POINTS, "charts": CHARTS, "repeats": args.repeats, "results": results}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")
    if args.doc:
        write_doc(args.doc, result)
        print(f"rewrote the table of {args.doc}")


if __name__ == "__main__":
    main()
