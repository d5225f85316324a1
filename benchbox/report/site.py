"""Write a :class:`~benchbox.report.history.History` as a static site.

The site is plain files: it opens from ``file://`` and from any static host, needs no
network (its scripts and style sheets are copied from the package: uPlot, MIT-licensed,
draws the charts) and embeds each page's data as JSON inside the page. Everything taken
from a receipt is escaped: HTML text and attributes by :func:`html.escape`, the embedded
JSON so that it cannot close its ``<script>`` element, and the script puts receipt values
into the page through ``textContent`` and ``setAttribute`` only.

The index opens on what a team looks at daily: the regressions (every change point, its
size and the diff engine's verdict on the runs either side), then the latest value of
every series; series that never produced a valid result are folded away.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchbox import __version__
from benchbox import render as cr
from benchbox.errors import UsageError
from benchbox.fileio import replace_dir
from benchbox.receipts.diff import DiffResult
from benchbox.render.diff import why_lines
from benchbox.report.history import SIDE, History, Page, Point, ReceiptRef, Series, SeriesChange, Step
from benchbox.report.html import (
    check_commit_url,
    commit_href,
    commit_html,
    diff_file,
    doc,
    esc,
    ms,
    page_file,
    receipt_file,
    verdict_class,
    when,
)
from benchbox.store import Store

ASSETS = Path(__file__).with_name("assets")
#: copied into every site's assets/ (uPlot's licence travels with it)
ASSET_FILES = ("uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE", "history.js", "history.css")
#: Marks a directory as a site this module wrote, so a rewrite may replace it.
SITE_MARKER = ".benchbox-site"
#: why no point carries a verdict of its own (said on every page)
NO_STEP_VERDICTS = (
    "Single commits carry no verdict: a receipt of one run is one process, and benchbox diff judges "
    "the spread between processes (Welch's t over processes), so one run against the run before it "
    f"is always unresolved. Each change point is judged instead on up to {SIDE} runs either side of "
    "it, each side joined by benchbox combine (never across a neighbouring change point).")


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
    runs: tuple[int, int]


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


def _group_label(page: Page, gi: int) -> str:
    g = page.groups[gi]
    return f"{g.size or '?'} · {g.dtype or '?'} · {g.device}"


def _method_changes(history: History) -> str:
    o = history.options
    return (f"{history.detector.describe()}; each judged by benchbox diff (metric {o.metric}, threshold "
            f"±{o.threshold:.1%}, alpha {o.alpha:g}) on up to {SIDE} runs either side, combined")


# -- diff pages ------------------------------------------------------------------------

def _side_html(role: str, ids: tuple[str, ...], refs: dict[str, ReceiptRef], template: str | None) -> str:
    items = []
    for i in ids:
        ref = refs.get(i)
        commit = commit_html(template, ref) if ref else "<code>?</code>"
        at = f" · {esc(ref.created_at)}" if ref and ref.created_at else ""
        items.append(f'<li>{commit}{at} · <a href="../{receipt_file(i)}">receipt</a></li>')
    what = "1 run" if len(ids) == 1 else f"{len(ids)} runs, combined as the rounds of one receipt"
    return f"<li>{role}: {what}<ol>{''.join(items)}</ol></li>"


def _command(base: tuple[str, ...], head: tuple[str, ...]) -> str:
    parts, names = [], []
    for role, ids in (("base", base), ("head", head)):
        if len(ids) == 1:
            names.append(receipt_file(ids[0]))
            continue
        parts.append(f"benchbox combine {' '.join(receipt_file(i) for i in ids)} -o {role}.json")
        names.append(f"{role}.json")
    parts.append(f"benchbox diff {names[0]} {names[1]}")
    return " && ".join(parts)


def diff_html(d: DiffResult | str, base: tuple[str, ...], head: tuple[str, ...], refs: dict[str, ReceiptRef],
              template: str | None = None) -> str:
    """A change point's diff as a page: the rows and verdicts of ``benchbox diff`` on its two sides."""
    md = Path(diff_file(base, head, "md")).name
    head_lines = ['<nav><a href="../index.html">benchbox history</a></nav>',
                  "<h1>benchbox diff at a change point</h1>", "<ul class=\"refs\">",
                  _side_html("BASE (before the change point)", base, refs, template),
                  _side_html("HEAD (from the change point on)", head, refs, template), "</ul>",
                  f'<p class="cmd">Run from the site\'s directory: <code>{esc(_command(base, head))}</code>'
                  f' · <a href="{esc(md)}">markdown</a></p>']
    if isinstance(d, str):
        body = "\n".join(head_lines) + f'\n<p class="refused">Comparison refused: {esc(d)}</p>'
        return doc("benchbox diff (refused)", body, depth=1)
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
        bh = "<br>".join(f"{esc(m.metric)} {ms(m.base_ns)} → {ms(m.head_ns)}" for m in r.metrics) or "–"
        rc = "<br>".join((f"×{m.ratio:.3f}" if m.ratio is not None else "–")
                         + (f" [{m.ci[0]:.3f}, {m.ci[1]:.3f}]" if m.ci else "") for m in r.metrics) or "–"
        why = "<br>".join(esc(x) for x in why_lines(r))
        rows.append(f'<tr class="{verdict_class(r.verdict)}"><td>{esc(r.runner)}</td><td>{esc(r.case)}</td>'
                    f'<td><span class="verdict {verdict_class(r.verdict)}">{esc(r.verdict)}</span></td>'
                    f"<td>{bh}</td><td>{rc}</td><td>{why}</td></tr>")
    rows.append("</tbody></table>")
    return doc("benchbox diff", "\n".join(head_lines + rows), depth=1)


def diff_md(d: DiffResult | str) -> str:
    if isinstance(d, str):
        return cr.refused_markdown(d)
    return cr.diff_markdown(d)


# -- history pages ---------------------------------------------------------------------

def _step_json(s: Step) -> dict[str, Any]:
    return {"verdict": s.verdict, "why": s.reason, "ratio": s.ratio, "ci": list(s.ci) if s.ci else None,
            "explain": s.explain, "runs": [len(s.base), len(s.head)], "diff": diff_file(s.base, s.head),
            "md": diff_file(s.base, s.head, "md")}


def _point_json(p: Point) -> dict[str, Any]:
    flags = [f for f, on in (("noisy", p.noisy), ("unsettled", p.unsettled)) if on]
    return {"i": p.index, "id": p.identity, "status": p.status, "n": p.n,
            "p50": p.p50_ns, "p50_ci": list(p.p50_ci_ns) if p.p50_ci_ns else None,
            "p99": p.p99_ns, "p99_ci": list(p.p99_ci_ns) if p.p99_ci_ns else None,
            "flags": flags, "caveats": list(p.caveats),
            "reasons": [r for r in p.reasons if r not in p.caveats],
            "receipt": receipt_file(p.identity)}


def _change_json(c: SeriesChange) -> dict[str, Any]:
    return {"i": c.point.index, "id": c.point.identity, "change": c.found.change,
            "before": c.found.mean_before, "after": c.found.mean_after, "pvalue": c.found.pvalue,
            "step": _step_json(c.step)}


def page_data(page: Page, history: History, template: str | None = None) -> dict[str, Any]:
    """What a page's script draws (embedded in the page as JSON)."""
    groups = [{"size": g.size, "dtype": g.dtype, "device": g.device,
               "receipts": [{"id": r.identity, "commit": r.commit, "short": r.short,
                             "commit_url": commit_href(template, r.commit),
                             "created_at": r.created_at, "complete": r.complete, "labels": r.labels}
                            for r in g.receipts]} for g in page.groups]
    series = [{"group": s.group, "case": s.case, "runner": s.runner,
               "points": [_point_json(p) for p in s.points],
               "changes": [_change_json(c) for c in s.changes]} for s in page.series]
    return {"task": page.task, "contract": {k: getattr(page.contract, k) for k in
                                            ("name", "version", "first", "last", "clock", "hash")},
            "groups": groups, "series": series,
            "method": {"changes": _method_changes(history), "no_step_verdicts": NO_STEP_VERDICTS}}


def failed_only(s: Series) -> bool:
    """A series without one valid measured point: folded away, never an empty chart."""
    return not any(p.usable for p in s.points)


def _series_table(page: Page, s: Series, template: str | None) -> str:
    refs = page.groups[s.group].receipts
    out = ["<details class=\"points\"><summary>points and receipts</summary>",
           "<table><thead><tr><th>#</th><th>commit</th><th>time</th><th>status</th><th>p50 [95% CI]</th>"
           "<th>p99 [95% CI]</th><th>flags</th><th>receipt</th></tr></thead><tbody>"]
    for p in s.points:
        ref = refs[p.index]
        p50 = ms(p.p50_ns) + (f" [{ms(p.p50_ci_ns[0])}, {ms(p.p50_ci_ns[1])}]" if p.p50_ci_ns else "")
        p99 = ms(p.p99_ns) + (f" [{ms(p.p99_ci_ns[0])}, {ms(p.p99_ci_ns[1])}]" if p.p99_ci_ns else "")
        flags = ", ".join(f for f, on in (("noisy", p.noisy), ("unsettled", p.unsettled)) if on)
        out.append(f"<tr><td>{p.index}</td><td>{commit_html(template, ref)}</td>"
                   f"<td>{esc(ref.created_at)}</td><td>{esc(p.status)}</td><td>{p50}</td><td>{p99}</td><td>{esc(flags)}</td>"
                   f'<td><a href="{receipt_file(p.identity)}">receipt</a></td></tr>')
    out.append("</tbody></table></details>")
    return "\n".join(out)


def _verdict_html(step: Step, depth: str = "") -> str:
    runs = f"{len(step.base)} v {len(step.head)} runs"
    return (f'<a href="{depth}{diff_file(step.base, step.head)}"><span class="verdict '
            f'{verdict_class(step.verdict)}">{esc(step.verdict)}</span></a> '
            f'<span class="runs">({runs})</span>')


def _changes_list(page: Page, s: Series, template: str | None) -> str:
    if not s.changes:
        return '<p class="no-changes">No change point.</p>'
    refs = page.groups[s.group].receipts
    items = []
    for c in s.changes:
        ref = refs[c.point.index]
        items.append(f'<li class="change" data-i="{c.point.index}" data-commit="{esc(ref.commit)}" '
                     f'data-verdict="{esc(c.step.verdict)}">change point at {commit_html(template, ref)} '
                     f'({esc(ref.created_at)}): {c.found.change:+.1%}, mean p50 '
                     f'{ms(c.found.mean_before)} → {ms(c.found.mean_after)}, p = {c.found.pvalue:.2g}; '
                     f'diff {_verdict_html(c.step)}</li>')
    return '<ul class="changes">' + "".join(items) + "</ul>"


def _failed_block(page: Page, failed: list[Series]) -> str:
    items = []
    for s in failed:
        last = s.points[-1]
        why = last.reasons[0] if last.reasons else "no reason recorded"
        items.append(f"<li>{esc(s.case)} · {esc(s.runner)}: {len(s.points)} run(s), none valid; last: "
                     f"{esc(last.status)} ({esc(why)})</li>")
    return (f'<details class="failed-only"><summary>{len(failed)} series never produced a valid result '
            f"(no chart)</summary><ul>{''.join(items)}</ul></details>")


def _group_html(page: Page, gi: int, template: str | None) -> str:
    g = page.groups[gi]
    members = [(k, s) for k, s in enumerate(page.series) if s.group == gi]
    drawn = [(k, s) for k, s in members if not failed_only(s)]
    failed = [s for _, s in members if failed_only(s)]
    parts = [f'<section class="group" data-group="{gi}"><h2>{esc(_group_label(page, gi))}</h2>'
             f'<p class="meta">{len(g.receipts)} receipts</p>']
    for k, s in drawn:
        parts.append(
            f'<article class="series" data-series="{k}" data-runner="{esc(s.runner)}" '
            f'data-case="{esc(s.case)}" data-device="{esc(g.device)}" data-size="{esc(g.size)}" '
            f'data-dtype="{esc(g.dtype)}"><h3>{esc(s.case)} · {esc(s.runner)}</h3>'
            f'<div class="chart" data-series="{k}"></div><div class="pinned" hidden></div>'
            f"{_changes_list(page, s, template)}{_series_table(page, s, template)}</article>")
    if failed:
        parts.append(_failed_block(page, failed))
    parts.append("</section>")
    return "\n".join(parts)


def page_html(page: Page, history: History, template: str | None = None) -> str:
    c = page.contract
    stages = ", ".join(str(x) for x in c.stages)
    parts = [
        '<nav><a href="index.html">benchbox history</a></nav>',
        f"<h1>{esc(page.task)} · {esc(c.name)}</h1>",
        f'<p class="contract">contract <b>{esc(c.name)}</b> v{esc(c.version)}: '
        f'{esc(c.first)}..{esc(c.last)} ({esc(stages)}), {esc(c.clock)} clock, '
        f'hash <code>{esc(page.contract_hash[:16])}</code>. {esc(c.description)}</p>',
        '<div class="method"><p><b>Change points</b>: ' + esc(_method_changes(history)) + ".</p>"
        f"<p>{esc(NO_STEP_VERDICTS)}</p>"
        "<p>Drag across a chart to zoom into commits, double-click to zoom out; hover a point for its "
        "values, click it to pin its links.</p></div>",
        '<div id="filters" class="filters" aria-label="filters"></div>',
        '<div id="legend" class="legend"></div>',
        '<div id="tooltip" class="tooltip" role="status" hidden></div>',
    ]
    parts += [_group_html(page, gi, template) for gi in range(len(page.groups))]
    title = f"{page.task} · {c.name} — benchbox history"
    return doc(title, "\n".join(parts), data=page_data(page, history, template))


# -- the index -------------------------------------------------------------------------

def _regressions(history: History, files: dict[int, str], template: str | None) -> list[str]:
    changes = [(page, k, s, c) for k, page in enumerate(history.pages)
               for s in page.series for c in s.changes]
    out = [f'<h2 id="regressions">Change points ({len(changes)})</h2>',
           '<p class="meta">Newest first. A change is the shift of the series\' mean p50 at that commit; the '
           f"verdict is benchbox diff's on up to {SIDE} runs either side.</p>"]
    if not changes:
        return [*out, '<p class="no-changes">No change point in any series.</p>']
    out.append("<table class=\"changes\"><thead><tr><th>date</th><th>commit</th><th>size</th><th>verdict</th>"
               "<th>series</th><th>task · contract</th><th>p</th></tr></thead><tbody>")
    changes.sort(key=lambda x: str(x[0].groups[x[2].group].receipts[x[3].point.index].created_at or ""),
                 reverse=True)
    for page, k, s, c in changes:
        ref = page.groups[s.group].receipts[c.point.index]
        cls = verdict_class(c.step.verdict)
        out.append(f'<tr class="{cls}"><td>{when(ref.created_at)}</td><td>{commit_html(template, ref)}</td>'
                   f"<td>{c.found.change:+.1%} ({ms(c.found.mean_before)} → {ms(c.found.mean_after)})</td>"
                   f"<td>{_verdict_html(c.step)}</td>"
                   f"<td>{esc(s.case)} · {esc(s.runner)} ({esc(_group_label(page, s.group))})</td>"
                   f'<td><a href="{esc(files[k])}">{esc(page.task)} · '
                   f'{esc(page.contract.name)}</a></td>'
                   f"<td>{c.found.pvalue:.2g}</td></tr>")
    out.append("</tbody></table>")
    return out


def _latest(history: History, files: dict[int, str], template: str | None) -> list[str]:
    out = ['<h2 id="latest">Latest value of every series</h2>',
           "<table class=\"latest\"><thead><tr><th>task · contract</th><th>size · dtype · device</th>"
           "<th>series</th><th>latest p50 [95% CI]</th><th>commit</th><th>date</th><th>runs</th>"
           "<th>change points</th></tr></thead><tbody>"]
    failed: list[str] = []
    for k, page in enumerate(history.pages):
        where = f'<a href="{esc(files[k])}">{esc(page.task)} · {esc(page.contract.name)}</a>'
        for s in page.series:
            label = f"{esc(s.case)} · {esc(s.runner)}"
            if failed_only(s):
                failed.append(f"<li>{where}: {label} ({esc(_group_label(page, s.group))}), "
                              f"{len(s.points)} run(s), none valid</li>")
                continue
            p = [q for q in s.points if q.usable][-1]
            ref = page.groups[s.group].receipts[p.index]
            ci = f" [{ms(p.p50_ci_ns[0])}, {ms(p.p50_ci_ns[1])}]" if p.p50_ci_ns else ""
            out.append(f"<tr><td>{where}</td><td>{esc(_group_label(page, s.group))}</td><td>{label}</td>"
                       f"<td>{ms(p.p50_ns)}{ci}</td><td>{commit_html(template, ref)}</td>"
                       f"<td>{when(ref.created_at)}</td><td>{len(s.points)}</td><td>{len(s.changes)}</td></tr>")
    out.append("</tbody></table>")
    if failed:
        out.append(f'<details class="failed-only"><summary>{len(failed)} series never produced a valid '
                   f"result</summary><ul>{''.join(failed)}</ul></details>")
    return out


def index_html(history: History, files: dict[int, str], template: str | None = None) -> str:
    parts = ["<h1>benchbox history</h1>",
             f"<p>{history.receipts} receipts in {len(history.pages)} task/contract pages. "
             f"<b>Change points</b>: {esc(_method_changes(history))}. {esc(NO_STEP_VERDICTS)}</p>"]
    parts += _regressions(history, files, template)
    parts += _latest(history, files, template)
    parts.append("<h2>Pages</h2><table class=\"pages\"><thead><tr><th>task</th><th>contract</th><th>hash</th>"
                 "<th>series</th><th>receipts</th><th>change points</th></tr></thead><tbody>")
    for k, page in enumerate(history.pages):
        parts.append(f'<tr><td><a href="{esc(files[k])}">{esc(page.task)}</a></td>'
                     f"<td>{esc(page.contract.name)}</td><td><code>{esc(page.contract_hash[:12])}</code>"
                     f"</td><td>{len(page.series)}</td><td>{sum(len(g.receipts) for g in page.groups)}</td>"
                     f"<td>{sum(len(s.changes) for s in page.series)}</td></tr>")
    parts.append("</tbody></table>")
    return doc("benchbox history", "\n".join(parts))


# -- writing ---------------------------------------------------------------------------

def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / SITE_MARKER).exists():
        raise UsageError(f"{out}: not empty and not a site benchbox wrote; name a new or empty directory")


def write_site(history: History, store: Store, out: Path, commit_url: str | None = None) -> ReportResult:
    """Write the site into ``out`` (built aside, then swapped in, so ``out`` is never half written).

    ``commit_url``: a template such as ``https://github.com/ORG/REPO/commit/{commit}`` that links
    every commit shown.
    """
    out = Path(out)
    template = check_commit_url(commit_url)
    _check_out(out)
    parent = out.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    except OSError as e:
        raise UsageError(f"{out}: cannot create the site: {e.strerror or e}") from None
    try:
        result = _write(history, store, tmp, out, template)
        os.chmod(tmp, 0o755)
        replace_dir(tmp, out)
        return result
    except OSError as e:
        raise UsageError(f"{out}: cannot write the site: {e.strerror or e}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _page_files(history: History) -> dict[int, str]:
    files: dict[int, str] = {}
    used: set[str] = set()
    for k, page in enumerate(history.pages):
        name = page_file(page)
        while name in used:
            name = name.replace(".html", f"-{k}.html")
        used.add(name)
        files[k] = name
    return files


def _write(history: History, store: Store, root: Path, out: Path, template: str | None) -> ReportResult:
    for sub in ("assets", "receipts", "diffs"):
        (root / sub).mkdir()
    (root / SITE_MARKER).write_text("written by benchbox report\n")
    for name in ASSET_FILES:
        shutil.copyfile(ASSETS / name, root / "assets" / name)
    refs = {r.identity: r for page in history.pages for g in page.groups for r in g.receipts}
    for ident in refs:
        shutil.copyfile(store.receipt_path(ident), root / receipt_file(ident))
    for (base, head), d in history.diffs.items():
        (root / diff_file(base, head)).write_text(diff_html(d, base, head, refs, template), encoding="utf-8")
        (root / diff_file(base, head, "md")).write_text(diff_md(d), encoding="utf-8")
    files = _page_files(history)
    for k, page in enumerate(history.pages):
        (root / files[k]).write_text(page_html(page, history, template), encoding="utf-8")
    (root / "index.html").write_text(index_html(history, files, template), encoding="utf-8")
    (root / "history.json").write_text(json.dumps(
        {"benchbox_version": __version__,
         "method": {"changes": _method_changes(history), "no_step_verdicts": NO_STEP_VERDICTS},
         "pages": [{"file": files[k], **page_data(p, history, template)}
                   for k, p in enumerate(history.pages)]},
        indent=1, ensure_ascii=False), encoding="utf-8")
    changes = tuple(
        SiteChange(files[k], s.case, s.runner, _group_label(p, s.group),
                   p.groups[s.group].receipts[c.point.index].commit, c.found.change, c.step.verdict,
                   (len(c.step.base), len(c.step.head)))
        for k, p in enumerate(history.pages) for s in p.series for c in s.changes)
    return ReportResult(out=out, pages=tuple(files[k] for k in sorted(files)),
                        series=sum(len(p.series) for p in history.pages),
                        points=sum(len(s.points) for p in history.pages for s in p.series),
                        receipts=len(refs), diffs=len(history.diffs), changes=changes)
