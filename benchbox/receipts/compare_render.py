"""Rendering of diffs (terminal, markdown) and of several receipts side by side."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from benchbox.receipts.diff import DiffResult, DiffRow

_MARK = {"slower": "🔴", "faster": "🟢", "unchanged": "⚪", "unresolved": "🟡", "invalid": "❌",
         "new": "🆕", "removed": "➖", "not comparable": "⛔"}


def _ms(ns: Any) -> str:
    return f"{ns / 1e6:.3f}" if isinstance(ns, (int, float)) else "-"


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


def diff_table(d: DiffResult) -> str:
    """The terminal table of a diff."""
    lines = _header(d)
    head = f"{'runner':<16} {'case':<12} {'verdict':<15} detail"
    lines += [head, "-" * 100]
    for r in d.rows:
        detail = "  ".join(_metric_cells(r)) or r.reason
        lines.append(f"{r.runner:<16} {r.case:<12} {r.verdict:<15} {detail}")
        extra = ([r.reason] if r.metrics and r.reason else []) + _details(r)
        lines += [f"{'':<16} ↳ {x}" for x in extra]
    lines.append(_summary_line(d))
    return "\n".join(lines)


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


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


def side_by_side(receipts: Sequence[dict[str, Any]], names: Sequence[str]) -> str:
    """Several receipts' p50 (status) per (task, case, runner), one column per receipt."""
    first = receipts[0]["contract"]
    lines = []
    for i, (r, n) in enumerate(zip(receipts, names)):
        c = r["contract"]
        env = r.get("environment") or {}
        gpu = env.get("gpu")
        dev = gpu.get("name") if isinstance(gpu, dict) else None
        warn = "" if c["hash"] == first["hash"] else "  (DIFFERENT contract: not comparable with [1])"
        lines.append(f"[{i + 1}] {n}: contract {c['name']} hash {c['hash'][:12]}, task "
                     f"{r['task'].get('name')}/{r['task'].get('size')}, device "
                     f"{dev or env.get('device', '?')}, {r.get('created_at', '?')}{warn}")
    keys: list[tuple[str, str, str]] = []
    cells: dict[tuple[tuple[str, str, str], int], str] = {}
    for i, r in enumerate(receipts):
        for row in r["results"]:
            k = (str(r["task"].get("name")), row["case"], row["runner"])
            if k not in keys:
                keys.append(k)
            s = row.get("summary") or {}
            p50 = _ms(s.get("p50_ns"))
            cells[(k, i)] = p50 if row["status"] == "valid" else f"{p50} ({row['status']})"
    width = max(14, *(len(v) for v in cells.values())) if cells else 14
    head = f"{'task':<10} {'runner':<16} {'case':<12} " + " ".join(
        f"{f'[{i + 1}] p50 ms':>{width}}" for i in range(len(receipts)))
    lines += [head, "-" * len(head)]
    for k in keys:
        lines.append(f"{k[0]:<10} {k[2]:<16} {k[1]:<12} " + " ".join(
            f"{cells.get((k, i), '-'):>{width}}" for i in range(len(receipts))))
    return "\n".join(lines)
