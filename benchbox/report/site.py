"""Write a :class:`~benchbox.report.history.History` as a static site.

The site is plain files: it opens from ``file://`` and from any static host, needs no
network (its script and style sheet are copied from the package) and embeds each
page's data as JSON inside the page. Everything taken from a receipt is escaped: HTML
text and attributes by :func:`html.escape`, the embedded JSON so that it cannot close
its ``<script>`` element, and the script builds the charts with DOM calls only.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchbox import __version__
from benchbox import render as cr
from benchbox.errors import UsageError
from benchbox.receipts.diff import DiffResult, DiffRow
from benchbox.report.history import History, Page, Point, ReceiptRef, Series, Step
from benchbox.store import Store

ASSETS = Path(__file__).with_name("assets")
ASSET_FILES = ("history.js", "history.css")
#: Marks a directory as a site this module wrote, so a rewrite may replace it.
SITE_MARKER = ".benchbox-site"
_VERDICT_CLASS = re.compile(r"[^a-z]+")


@dataclass(frozen=True)
class SiteChange:
    """A change point as listed on the site."""

    page: str
    case: str
    runner: str
    group: str
    commit: str | None
    change: float
    verdict: str


@dataclass(frozen=True)
class ReportResult:
    """What ``benchbox report`` wrote."""

    out: Path
    pages: tuple[str, ...]
    series: int
    points: int
    receipts: int
    diffs: int
    changes: tuple[SiteChange, ...]


def esc(x: Any) -> str:
    """HTML-escape anything (text and attribute values alike)."""
    return html.escape("" if x is None else str(x), quote=True)


def script_json(data: Any) -> str:
    """JSON that is safe inside a ``<script type="application/json">`` element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")
    return s[:60] or "x"


def page_file(page: Page) -> str:
    return f"{slug(page.task)}.{slug(str(page.contract.get('name')))}-{page.contract_hash[:12]}.html"


def diff_file(base: str, head: str, ext: str = "html") -> str:
    return f"diffs/{base[:16]}-{head[:16]}.{ext}"


def receipt_file(identity: str) -> str:
    return f"receipts/{identity}.json"


def verdict_class(verdict: str) -> str:
    return "v-" + _VERDICT_CLASS.sub("-", verdict.lower()).strip("-")


def _ms(ns: float | None) -> str:
    if ns is None:
        return "–"
    a = abs(ns)
    if a >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def _group_label(page: Page, gi: int) -> str:
    g = page.groups[gi]
    return f"{g.size or '?'} · {g.dtype or '?'} · {g.device}"


# -- the document frame ----------------------------------------------------------------

def _doc(title: str, body: str, depth: int = 0, data: Any = None) -> str:
    up = "../" * depth
    data_el = (f'<script type="application/json" id="history-data">{script_json(data)}</script>\n'
               f'<script src="{up}assets/history.js"></script>\n') if data is not None else ""
    return ("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n"
            f"<link rel=\"icon\" href=\"data:,\">\n"
            f"<link rel=\"stylesheet\" href=\"{up}assets/history.css\">\n</head>\n<body>\n"
            f"{body}\n<footer>benchbox {esc(__version__)} · static files, no server needed</footer>\n"
            f"{data_el}</body>\n</html>\n")


# -- diff pages ------------------------------------------------------------------------

def _details(r: DiffRow) -> list[str]:
    out = [r.reason] if r.reason else []
    if r.explanation:
        out.append(f"stages moved: {r.explain()}")
    if r.causes:
        out.append("probable causes: " + "; ".join(r.causes))
    if r.accepted:
        out.append("accepted differences: " + "; ".join(r.accepted))
    return out


def _ref_line(role: str, ref: ReceiptRef | None, identity: str) -> str:
    when = f" · {esc(ref.created_at)}" if ref and ref.created_at else ""
    commit = esc(ref.commit) if ref and ref.commit else "no commit recorded"
    return (f'<li>{role}: commit <code>{commit}</code>{when} · '
            f'<a href="../{receipt_file(identity)}">receipt</a></li>')


def diff_html(d: DiffResult | str, base: str, head: str, refs: dict[str, ReceiptRef]) -> str:
    """One diff as a page: the rows and verdicts of ``benchbox diff BASE HEAD``."""
    md = Path(diff_file(base, head, "md")).name
    head_lines = ['<nav><a href="../index.html">benchbox history</a></nav>', "<h1>benchbox diff</h1>",
                  "<ul class=\"refs\">",
                  _ref_line("BASE", refs.get(base), base), _ref_line("HEAD", refs.get(head), head),
                  "</ul>",
                  f'<p class="cmd"><code>benchbox diff {esc(receipt_file(base))} '
                  f'{esc(receipt_file(head))}</code> · <a href="{esc(md)}">'
                  "markdown</a></p>"]
    if isinstance(d, str):
        body = "\n".join(head_lines) + f'\n<p class="refused">Comparison refused: {esc(d)}</p>'
        return _doc("benchbox diff (refused)", body, depth=1)
    from benchbox.render.diff import method_text

    c = d.contract
    head_lines.append(
        f"<p>contract <b>{esc(c['name'])}</b> ({esc(c['first'])}..{esc(c['last'])}, {esc(c['clock'])} clock, "
        f"<code>{esc(str(c['hash'])[:12])}</code>) · {esc(method_text(d))}</p>")
    head_lines += [f'<p class="note">{esc(n)}</p>' for n in d.notes]
    counts = ", ".join(f"{n} {v}" for v, n in d.counts().items())
    regression = d.exit_code == 1
    head_lines.append(f'<p class="summary {"regression" if regression else "ok"}">'
                      f'{"REGRESSION" if regression else "no regression"}: {esc(counts or "no rows")}</p>')
    rows = ["<table class=\"diff\"><thead><tr><th>runner</th><th>case</th><th>verdict</th>"
            "<th>base → head</th><th>ratio [CI]</th><th>why</th></tr></thead><tbody>"]
    for r in d.rows:
        bh = "<br>".join(f"{esc(m.metric)} {_ms(m.base_ns)} → {_ms(m.head_ns)}" for m in r.metrics) or "–"
        rc = "<br>".join((f"×{m.ratio:.3f}" if m.ratio is not None else "–")
                         + (f" [{m.ci[0]:.3f}, {m.ci[1]:.3f}]" if m.ci else "") for m in r.metrics) or "–"
        why = "<br>".join(esc(x) for x in _details(r))
        rows.append(f'<tr class="{verdict_class(r.verdict)}"><td>{esc(r.runner)}</td><td>{esc(r.case)}</td>'
                    f'<td><span class="verdict {verdict_class(r.verdict)}">{esc(r.verdict)}</span></td>'
                    f"<td>{bh}</td><td>{rc}</td><td>{why}</td></tr>")
    rows.append("</tbody></table>")
    return _doc("benchbox diff", "\n".join(head_lines + rows), depth=1)


def diff_md(d: DiffResult | str) -> str:
    if isinstance(d, str):
        return cr.refused_markdown(d)
    return cr.diff_markdown(d)


# -- history pages ---------------------------------------------------------------------

def _step_json(s: Step | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"verdict": s.verdict, "why": s.reason, "ratio": s.ratio, "ci": list(s.ci) if s.ci else None,
            "explain": s.explain, "pred": s.base, "diff": diff_file(s.base, s.head),
            "md": diff_file(s.base, s.head, "md")}


def _point_json(p: Point) -> dict[str, Any]:
    flags = [f for f, on in (("noisy", p.noisy), ("unsettled", p.unsettled)) if on]
    return {"i": p.index, "id": p.identity, "status": p.status, "n": p.n,
            "p50": p.p50_ns, "p50_ci": list(p.p50_ci_ns) if p.p50_ci_ns else None,
            "p99": p.p99_ns, "p99_ci": list(p.p99_ci_ns) if p.p99_ci_ns else None,
            "flags": flags, "caveats": list(p.caveats),
            "reasons": [r for r in p.reasons if r not in p.caveats],
            "receipt": receipt_file(p.identity), "step": _step_json(p.step)}


def page_data(page: Page, history: History) -> dict[str, Any]:
    """What a page's script draws (embedded in the page as JSON)."""
    groups = [{"size": g.size, "dtype": g.dtype, "device": g.device,
               "receipts": [{"id": r.identity, "commit": r.commit, "short": r.short,
                             "created_at": r.created_at, "complete": r.complete, "labels": r.labels}
                            for r in g.receipts]} for g in page.groups]
    series = []
    for s in page.series:
        series.append({
            "group": s.group, "case": s.case, "runner": s.runner,
            "points": [_point_json(p) for p in s.points],
            "changes": [{"i": c.point.index, "id": c.point.identity, "change": c.found.change,
                         "before": c.found.mean_before, "after": c.found.mean_after,
                         "pvalue": c.found.pvalue, "step": _step_json(c.point.step)} for c in s.changes],
        })
    return {"task": page.task, "contract": {k: page.contract.get(k) for k in
                                            ("name", "version", "first", "last", "clock", "hash")},
            "groups": groups, "series": series,
            "method": {"diff": _method_diff(history), "changes": history.detector.describe()}}


def _method_diff(history: History) -> str:
    o = history.options
    return (f"each point against its predecessor in the series (the latest earlier valid point) with the "
            f"rules of benchbox diff: metric {o.metric}, threshold ±{o.threshold:.1%}, {o.level:.0%} BCa "
            f"interval, Holm at alpha {o.alpha:g}, floor {o.floor_multiple:g}× the harness floor")


def _series_table(page: Page, s: Series) -> str:
    refs = page.groups[s.group].receipts
    out = ["<details class=\"points\"><summary>points, receipts and diffs</summary>",
           "<table><thead><tr><th>#</th><th>commit</th><th>time</th><th>status</th><th>p50 [95% CI]</th>"
           "<th>p99 [95% CI]</th><th>flags</th><th>step</th><th>links</th></tr></thead><tbody>"]
    for p in s.points:
        ref = refs[p.index]
        p50 = _ms(p.p50_ns) + (f" [{_ms(p.p50_ci_ns[0])}, {_ms(p.p50_ci_ns[1])}]" if p.p50_ci_ns else "")
        p99 = _ms(p.p99_ns) + (f" [{_ms(p.p99_ci_ns[0])}, {_ms(p.p99_ci_ns[1])}]" if p.p99_ci_ns else "")
        flags = ", ".join(f for f, on in (("noisy", p.noisy), ("unsettled", p.unsettled)) if on)
        step = (f'<span class="verdict {verdict_class(p.step.verdict)}">{esc(p.step.verdict)}</span>'
                if p.step else "first")
        links = f'<a href="{receipt_file(p.identity)}">receipt</a>'
        if p.step:
            links += (f' · <a href="{diff_file(p.step.base, p.step.head)}">diff</a>'
                      f' (<a href="{diff_file(p.step.base, p.step.head, "md")}">md</a>)')
        out.append(f"<tr><td>{p.index}</td><td><code>{esc(ref.short)}</code></td><td>{esc(ref.created_at)}</td>"
                   f"<td>{esc(p.status)}</td><td>{p50}</td><td>{p99}</td><td>{esc(flags)}</td>"
                   f"<td>{step}</td><td>{links}</td></tr>")
    out.append("</tbody></table></details>")
    return "\n".join(out)


def _changes_list(page: Page, s: Series) -> str:
    if not s.changes:
        return '<p class="no-changes">No change point.</p>'
    refs = page.groups[s.group].receipts
    items = []
    for c in s.changes:
        ref = refs[c.point.index]
        step = c.point.step
        verdict = (f'diff verdict <span class="verdict {verdict_class(step.verdict)}">'
                   f'{esc(step.verdict)}</span> (<a href="{diff_file(step.base, step.head)}">diff</a>)'
                   if step else "first point")
        items.append(f'<li class="change">change point at <code>{esc(ref.short)}</code> '
                     f'({esc(ref.created_at)}): {c.found.change:+.1%}, mean p50 {_ms(c.found.mean_before)} → '
                     f'{_ms(c.found.mean_after)}, p = {c.found.pvalue:.2g}; {verdict}</li>')
    return '<ul class="changes">' + "".join(items) + "</ul>"


def page_html(page: Page, history: History) -> str:
    c = page.contract
    stages = ", ".join(str(x) for x in c.get("stages") or [])
    parts = [
        '<nav><a href="index.html">benchbox history</a></nav>',
        f"<h1>{esc(page.task)} · {esc(c.get('name'))}</h1>",
        f'<p class="contract">contract <b>{esc(c.get("name"))}</b> v{esc(c.get("version"))}: '
        f'{esc(c.get("first"))}..{esc(c.get("last"))} ({esc(stages)}), {esc(c.get("clock"))} clock, '
        f'hash <code>{esc(page.contract_hash[:16])}</code>. {esc(c.get("description"))}</p>',
        '<div class="method"><p><b>Steps</b>: ' + esc(_method_diff(history)) + ".</p>"
        "<p><b>Change points</b>: " + esc(history.detector.describe()) + ".</p></div>",
        '<div id="filters" class="filters" aria-label="filters"></div>',
        '<div id="legend" class="legend"></div>',
        '<div id="tooltip" class="tooltip" role="status" hidden></div>',
    ]
    for gi in range(len(page.groups)):
        members = [(k, s) for k, s in enumerate(page.series) if s.group == gi]
        g = page.groups[gi]
        parts.append(f'<section class="group" data-group="{gi}"><h2>{esc(_group_label(page, gi))}</h2>'
                     f'<p class="meta">{len(g.receipts)} receipts</p>')
        for k, s in members:
            parts.append(
                f'<article class="series" data-series="{k}" data-runner="{esc(s.runner)}" '
                f'data-case="{esc(s.case)}" data-device="{esc(g.device)}" data-size="{esc(g.size)}" '
                f'data-dtype="{esc(g.dtype)}"><h3>{esc(s.case)} · {esc(s.runner)}</h3>'
                f'<div class="chart" data-series="{k}"></div><div class="pinned" hidden></div>'
                f"{_changes_list(page, s)}{_series_table(page, s)}</article>")
        parts.append("</section>")
    title = f"{page.task} · {c.get('name')} — benchbox history"
    return _doc(title, "\n".join(parts), data=page_data(page, history))


def index_html(history: History, files: dict[int, str]) -> str:
    parts = ["<h1>benchbox history</h1>",
             f"<p>{history.receipts} receipts in {len(history.pages)} task/contract pages. "
             f"<b>Steps</b>: {esc(_method_diff(history))}. <b>Change points</b>: "
             f"{esc(history.detector.describe())}.</p>",
             "<table class=\"pages\"><thead><tr><th>task</th><th>contract</th><th>hash</th><th>series</th>"
             "<th>receipts</th><th>change points</th><th>slower steps</th></tr></thead><tbody>"]
    changes = []
    for k, page in enumerate(history.pages):
        n_changes = sum(len(s.changes) for s in page.series)
        slower = sum(1 for s in page.series for p in s.points if p.step and p.step.verdict == "slower")
        receipts = sum(len(g.receipts) for g in page.groups)
        parts.append(f'<tr><td><a href="{esc(files[k])}">{esc(page.task)}</a></td>'
                     f"<td>{esc(page.contract.get('name'))}</td><td><code>{esc(page.contract_hash[:12])}</code></td>"
                     f"<td>{len(page.series)}</td><td>{receipts}</td><td>{n_changes}</td><td>{slower}</td></tr>")
        for s in page.series:
            for c in s.changes:
                changes.append((page, k, s, c))
    parts.append("</tbody></table>")
    parts.append("<h2>Change points</h2>")
    if not changes:
        parts.append('<p class="no-changes">No change point in any series.</p>')
    else:
        parts.append("<table class=\"changes\"><thead><tr><th>time</th><th>commit</th>"
                     "<th>task · contract</th><th>series</th><th>change</th><th>p</th><th>diff verdict</th>"
                     "</tr></thead><tbody>")
        changes.sort(key=lambda x: str(x[0].groups[x[2].group].receipts[x[3].point.index].created_at or ""),
                     reverse=True)
        for page, k, s, c in changes:
            ref = page.groups[s.group].receipts[c.point.index]
            step = c.point.step
            verdict = (f'<a href="{diff_file(step.base, step.head)}"><span class="verdict '
                       f'{verdict_class(step.verdict)}">{esc(step.verdict)}</span></a>' if step else "–")
            parts.append(f"<tr><td>{esc(ref.created_at)}</td><td><code>{esc(ref.short)}</code></td>"
                         f'<td><a href="{esc(files[k])}">{esc(page.task)} · '
                         f'{esc(page.contract.get("name"))}</a></td>'
                         f"<td>{esc(s.case)} · {esc(s.runner)} ({esc(_group_label(page, s.group))})</td>"
                         f"<td>{c.found.change:+.1%}</td><td>{c.found.pvalue:.2g}</td><td>{verdict}</td></tr>")
        parts.append("</tbody></table>")
    return _doc("benchbox history", "\n".join(parts))


# -- writing ---------------------------------------------------------------------------

def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / SITE_MARKER).exists():
        raise UsageError(f"{out}: not empty and not a site benchbox wrote; name a new or empty directory")


def write_site(history: History, store: Store, out: Path) -> ReportResult:
    """Write the site into ``out`` (built aside, then swapped in, so ``out`` is never half written)."""
    out = Path(out)
    _check_out(out)
    parent = out.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    except OSError as e:
        raise UsageError(f"{out}: cannot create the site: {e.strerror or e}") from None
    try:
        result = _write(history, store, tmp, out)
        os.chmod(tmp, 0o755)
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=parent))
            os.replace(out, old / "site")
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return result
    except OSError as e:
        raise UsageError(f"{out}: cannot write the site: {e.strerror or e}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _write(history: History, store: Store, root: Path, out: Path) -> ReportResult:
    (root / "assets").mkdir()
    (root / "receipts").mkdir()
    (root / "diffs").mkdir()
    (root / SITE_MARKER).write_text("written by benchbox report\n")
    for name in ASSET_FILES:
        shutil.copyfile(ASSETS / name, root / "assets" / name)
    refs: dict[str, ReceiptRef] = {}
    for page in history.pages:
        for g in page.groups:
            for r in g.receipts:
                refs[r.identity] = r
    for ident in refs:
        shutil.copyfile(store.receipt_path(ident), root / receipt_file(ident))
    for (base, head), d in history.diffs.items():
        (root / diff_file(base, head)).write_text(diff_html(d, base, head, refs), encoding="utf-8")
        (root / diff_file(base, head, "md")).write_text(diff_md(d), encoding="utf-8")
    files: dict[int, str] = {}
    used: set[str] = set()
    for k, page in enumerate(history.pages):
        name = page_file(page)
        while name in used:
            name = name.replace(".html", f"-{k}.html")
        used.add(name)
        files[k] = name
        (root / name).write_text(page_html(page, history), encoding="utf-8")
    (root / "index.html").write_text(index_html(history, files), encoding="utf-8")
    (root / "history.json").write_text(json.dumps(
        {"benchbox_version": __version__, "method": {"diff": _method_diff(history),
                                                      "changes": history.detector.describe()},
         "pages": [{"file": files[k], **page_data(p, history)} for k, p in enumerate(history.pages)]},
        indent=1, ensure_ascii=False), encoding="utf-8")
    changes = tuple(
        SiteChange(files[k], s.case, s.runner, _group_label(p, s.group),
                   p.groups[s.group].receipts[c.point.index].commit, c.found.change,
                   c.point.step.verdict if c.point.step else "first point")
        for k, p in enumerate(history.pages) for s in p.series for c in s.changes)
    return ReportResult(out=out, pages=tuple(files[k] for k in sorted(files)),
                        series=sum(len(p.series) for p in history.pages),
                        points=sum(len(s.points) for p in history.pages for s in p.series),
                        receipts=len(refs), diffs=len(history.diffs), changes=changes)
