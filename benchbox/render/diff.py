"""Rendering of diffs: terminal table, markdown (PR comment, step summary), JSON."""

from __future__ import annotations

import json
import os

from benchbox.receipts.diff import DiffResult, DiffRow
from benchbox.render.common import md as _md
from benchbox.render.common import ms as _ms
from benchbox.render.table import table, wrapped

_MARK = {"slower": "🔴", "faster": "🟢", "unchanged": "⚪", "unresolved": "🟡", "invalid": "❌",
         "new": "🆕", "removed": "➖", "not comparable": "⛔"}


def _metric_cells(r: DiffRow) -> list[str]:
    cells = []
    for m in r.metrics:
        ratio = f"{m.ratio:.3f}" if m.ratio is not None else "-"
        ci = f"[{m.ci[0]:.3f}, {m.ci[1]:.3f}]" if m.ci else "-"
        cells.append(f"{m.metric} {_ms(m.base_ns)}→{_ms(m.head_ns)} ms ×{ratio} {ci}")
    return cells


def _header(d: DiffResult) -> list[str]:
    o = d.options
    c = d.contract
    lines = [f"benchbox diff {d.base} → {d.head}",
             f"contract {c['name']} ({c['first']}..{c['last']}, {c['clock']} clock, "
             f"hash {str(c['hash'])[:12]})",
             f"metric {o.metric}, threshold ±{o.threshold:.1%}, {o.level:.0%} BCa interval "
             f"({o.n_resamples} resamples, seed {o.seed}), Brunner-Munzel/tail test with Holm at "
             f"alpha {o.alpha}, floor {o.floor_multiple:g}× harness floor"
             + (f" ({d.floor_ns:.0f} ns)" if d.floor_ns is not None else "")
             + (f", accepting differences in {', '.join(sorted(o.accept))}" if o.accept else "")]
    lines += [f"note: {n}" for n in d.notes]
    return lines


def _summary_line(d: DiffResult) -> str:
    counts = ", ".join(f"{n} {v}" for v, n in d.counts().items())
    verdict = "REGRESSION" if d.exit_code else "no regression"
    return f"{verdict}: {counts or 'no rows'}"


def _details(r: DiffRow) -> list[str]:
    out = []
    if r.explanation:
        out.append(f"stages moved: {r.explain()}")
    if r.fallbacks_added:
        out.append("new fallbacks: " + "; ".join(r.fallbacks_added))
    if r.fallbacks_removed:
        out.append("removed fallbacks: " + "; ".join(r.fallbacks_removed))
    if r.accepted:
        out.append("accepted differences: " + "; ".join(r.accepted))
    return out


def diff_table(d: DiffResult, width: int | None = None) -> str:
    """The terminal table of a diff: one row per (runner, case), then each row's details."""
    lines = [wrapped(x, width=width) for x in _header(d)]
    rows = [(r.runner, r.case, r.verdict, "\n".join(_metric_cells(r)) or r.reason) for r in d.rows]
    lines.append(table(["runner", "case", "verdict", "detail"], rows, wrap=("runner", "case", "detail"),
                       width=width))
    details = [(r, ([r.reason] if r.metrics and r.reason else []) + _details(r)) for r in d.rows]
    if any(extra for _, extra in details):
        lines.append("details:")
    for r, extra in details:
        lines += [wrapped(f"↳ {r.runner} × {r.case}: {x}", 2, width) for x in extra]
    lines.append(_summary_line(d))
    return "\n".join(lines)


def diff_markdown(d: DiffResult) -> str:
    """A markdown report for a pull-request comment or a GitHub step summary."""
    title = "❌ benchbox: performance regression" if d.exit_code else "✅ benchbox: no regression"
    o = d.options
    c = d.contract
    lines = [f"### {title}", "",
             f"`{d.base}` → `{d.head}` · contract **{c['name']}** ({c['first']}..{c['last']}, "
             f"{c['clock']} clock, `{str(c['hash'])[:12]}`) · metric {o.metric} · threshold "
             f"±{o.threshold:.1%} · {o.level:.0%} BCa interval, Holm at alpha {o.alpha}"
             + (f" · accepted: {', '.join(sorted(o.accept))}" if o.accept else ""), "",
             f"**{_summary_line(d)}**", ""]
    lines += [f"> {_md(n)}" for n in d.notes]
    if d.notes:
        lines.append("")
    lines += ["| runner | case | verdict | base → head | ratio (CI) | why |",
              "|---|---|---|---|---|---|"]
    for r in d.rows:
        if r.metrics:
            bh = "<br>".join(f"{m.metric} {_ms(m.base_ns)} → {_ms(m.head_ns)} ms" for m in r.metrics)
            rc = "<br>".join((f"×{m.ratio:.3f}" if m.ratio is not None else "-")
                             + (f" [{m.ci[0]:.3f}, {m.ci[1]:.3f}]" if m.ci else "") for m in r.metrics)
        else:
            bh = rc = "-"
        why = [r.reason] if r.reason else []
        why += _details(r)
        lines.append(f"| {_md(r.runner)} | {_md(r.case)} | {_MARK.get(r.verdict, '')} **{r.verdict}** "
                     f"| {bh} | {rc} | {_md('<br>'.join(why))} |")
    return "\n".join(lines) + "\n"


def diff_json(d: DiffResult) -> str:
    return json.dumps(d.to_dict(), indent=1, ensure_ascii=False)


def write_step_summary(text: str) -> None:
    """Append markdown to the GitHub step summary, when ``GITHUB_STEP_SUMMARY`` names one."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)


def refused_markdown(reason: str) -> str:
    """The step summary of a comparison benchbox refused."""
    return f"### ⛔ benchbox diff refused\n\n{_md(reason)}\n"
