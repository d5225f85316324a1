"""Rendering of diffs: terminal table, markdown (PR comment, step summary), JSON."""

from __future__ import annotations

from benchbox.receipts.diff import DiffResult, DiffRow
from benchbox.render.common import json_text
from benchbox.render.common import md as _md
from benchbox.render.common import ms as _ms
from benchbox.render.common import terminal as _t
from benchbox.render.table import table, wrapped

_MARK = {"slower": "🔴", "faster": "🟢", "unchanged": "⚪", "unresolved": "🟡", "invalid": "❌",
         "new": "🆕", "removed": "➖", "not comparable": "⛔", "unreliable": "🌪️"}


def _metric_cells(r: DiffRow) -> list[str]:
    cells = []
    for m in r.metrics:
        ratio = f"{m.ratio:.3f}" if m.ratio is not None else "-"
        ci = f"[{m.ci[0]:.3f}, {m.ci[1]:.3f}]" if m.ci else "-"
        tag = " (advisory)" if m.advisory else " (not judged)" if r.verdict == "unreliable" else ""
        cells.append(f"{m.metric} {_ms(m.base_ns)}→{_ms(m.head_ns)} ms ×{ratio} {ci}{tag}")
    return cells


def method_text(d: DiffResult) -> str:
    """How the rows were judged, in one sentence."""
    o = d.options
    kb, kh = d.processes
    drift = f", run-to-run spread given as {o.drift:.1%}" if o.drift is not None else ""
    return (f"metric {o.metric}, threshold ±{o.threshold:.1%}, {o.level:.0%} interval from Welch's t on "
            f"the processes' log-quantiles ({kb} BASE / {kh} HEAD processes{drift}), Holm at alpha "
            f"{o.alpha} per metric family, floor {o.floor_multiple:g}× harness floor"
            + (f" ({d.floor_ns:.0f} ns)" if d.floor_ns is not None else "")
            + (f", accepting differences in {', '.join(sorted(o.accept))}" if o.accept else ""))


def resolution_text(d: DiffResult) -> str | None:
    """What the diff could resolve: the smallest change its rows could detect, and how many
    processes a side would resolve the threshold where they could not."""
    res = d.resolution()
    if res is None:
        return None
    th = d.options.threshold
    text = (f"could detect changes of {res['median']:.1%} (median over {res['rows']} judged rows; "
            f"largest {res['largest']:.1%}, at {d.options.power:.0%} power)")
    if res["rows_over_threshold"]:
        need = res["needed"]
        text += (f"; {res['rows_over_threshold']} row(s) cannot resolve ±{th:.0%}: "
                 + (f"{need} processes a side would resolve it" if need else
                    "resolving them all would take more processes than is practical "
                    "(or the spread is unknown)"))
    else:
        text += f"; every judged row resolves ±{th:.0%}"
    return text


def _header(d: DiffResult) -> list[str]:
    c = d.contract
    lines = [f"benchbox diff {_t(d.base)} → {_t(d.head)}",
             _t(f"contract {c['name']} ({c['first']}..{c['last']}, {c['clock']} clock, "
                f"hash {str(c['hash'])[:12]})"),
             method_text(d)]
    res = resolution_text(d)
    if res:
        lines.append(f"resolution: {res}")
    lines += [f"note: {_t(n)}" for n in d.notes]
    return lines


def _summary_line(d: DiffResult) -> str:
    counts = ", ".join(f"{n} {v}" for v, n in d.counts().items())
    if d.exit_code == 1:
        verdict = "REGRESSION"
    elif d.exit_code == 3 and any(r.verdict == "unreliable" for r in d.rows):
        verdict = "no regression found, some rows unreliable"
    elif d.exit_code == 3:
        verdict = "nothing could be judged"
    else:
        verdict = "no regression"
    return f"{verdict}: {counts or 'no rows'}"


def _details(r: DiffRow) -> list[str]:
    out = []
    if r.explanation:
        out.append(f"stages moved: {r.explain()}")
    if r.causes:
        out.append("probable causes: " + "; ".join(r.causes))
    if r.accepted:
        out.append("accepted differences: " + "; ".join(r.accepted))
    return out


def why_lines(r: DiffRow) -> list[str]:
    """A row's reason, then what moved, its probable causes and accepted differences: the "why"
    column of the markdown table and the report's HTML table."""
    return ([r.reason] if r.reason else []) + _details(r)


def diff_table(d: DiffResult, width: int | None = None) -> str:
    """The terminal table of a diff: one row per (runner, case), then each row's details."""
    lines = [wrapped(x, width=width) for x in _header(d)]
    rows = [(_t(r.runner), _t(r.case), r.verdict, "\n".join(_metric_cells(r)) or _t(r.reason))
            for r in d.rows]
    lines.append(table(["runner", "case", "verdict", "detail"], rows, wrap=("runner", "case", "detail"),
                       width=width))
    lines += _details_lines(d, width)
    lines.append(_summary_line(d))
    return "\n".join(lines)


def _details_lines(d: DiffResult, width: int | None) -> list[str]:
    """Each row's details under the table; a line that several rows share (a condition of the
    whole receipts, say) once, naming the rows."""
    rows_of: dict[str, list[DiffRow]] = {}
    for r in d.rows:
        for x in ([r.reason] if r.metrics and r.reason else []) + _details(r):
            rows_of.setdefault(x, []).append(r)
    lines = ["details:"] if rows_of else []
    for x, rows in rows_of.items():
        who = (f"{rows[0].runner} × {rows[0].case}" if len(rows) == 1 else
               f"{len(rows)} rows ({', '.join(f'{r.runner} × {r.case}' for r in rows[:6])}"
               + (", …)" if len(rows) > 6 else ")"))
        lines.append(wrapped(f"↳ {_t(who)}: {x}", 2, width))
    return lines


#: The most characters a markdown report may have (a GitHub comment takes 65,536).
MARKDOWN_LIMIT = 60_000
#: Rows shown in the table before the rest are collapsed under a details block.
MARKDOWN_ROWS = 40
_CELL = 600


def _clip(text: str, limit: int = _CELL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def diff_markdown(d: DiffResult, limit: int = MARKDOWN_LIMIT) -> str:
    """A markdown report for a pull-request comment or a GitHub step summary, ≤ ``limit`` characters.

    Rows that need attention come first; after ``MARKDOWN_ROWS`` rows (or when the text
    would pass the limit) the rest go into a collapsed details block, and whatever still
    does not fit is counted ("and N more rows").
    """
    lines = _markdown_head(d)
    order = sorted(d.rows, key=lambda r: _ATTENTION.get(r.verdict, 9))
    rows = [_markdown_row(r) for r in order]
    table = ["| runner | case | verdict | base → head | ratio (CI) | why |", "|---|---|---|---|---|---|"]
    shown = rows[:MARKDOWN_ROWS]
    rest = rows[MARKDOWN_ROWS:]
    body = lines + table
    size = sum(len(x) + 1 for x in body) + 200
    out = list(body)
    left = []
    for i, row in enumerate(shown + rest):
        if i >= MARKDOWN_ROWS or size + len(row) + 1 > limit:
            left = (shown + rest)[i:]
            break
        out.append(row)
        size += len(row) + 1
    if left:
        more = ["", f"<details><summary>{len(left)} more rows</summary>", ""] + table
        size += sum(len(x) + 1 for x in more) + 40
        kept = 0
        for row in left:
            if size + len(row) + 1 > limit:
                break
            more.append(row)
            size += len(row) + 1
            kept += 1
        if kept < len(left):
            more += ["", f"and {len(left) - kept} more rows (see `benchbox diff --format json`)"]
        out += more + ["", "</details>"]
    return "\n".join(out) + "\n"


_ATTENTION = {"slower": 0, "invalid": 1, "unreliable": 2, "not comparable": 3, "faster": 4, "unresolved": 5,
              "new": 6, "removed": 7, "unchanged": 8}


def _markdown_head(d: DiffResult) -> list[str]:
    unreliable = any(r.verdict == "unreliable" for r in d.rows)
    title = {1: "❌ benchbox: performance regression",
             3: "⚠️ benchbox: no regression found, some rows could not be judged" if unreliable
             else "⚠️ benchbox: nothing could be judged"}.get(d.exit_code, "✅ benchbox: no regression")
    c = d.contract
    lines = [f"### {title}", "", f"**{_summary_line(d)}**", ""]
    res = resolution_text(d)
    if res:
        lines += [f"**Resolution:** {_md(res)}", ""]
    lines += [f"{_md(d.base)} → {_md(d.head)} · contract **{_md(c['name'])}** ({_md(c['first'])}.."
              f"{_md(c['last'])}, {_md(c['clock'])} clock, {_md(str(c['hash'])[:12])}) · "
              f"{_md(method_text(d))}", ""]
    lines += [f"> {_md(_clip(n))}" for n in d.notes[:20]]
    if len(d.notes) > 20:
        lines.append(f"> and {len(d.notes) - 20} more notes")
    if d.notes:
        lines.append("")
    return lines


def _markdown_row(r: DiffRow) -> str:
    if r.metrics:
        grey = r.verdict == "unreliable"  # numbers kept, in italics: shown, not judged
        bh = "<br>".join(_it(f"{m.metric} {_ms(m.base_ns)} → {_ms(m.head_ns)} ms", grey) for m in r.metrics)
        rc = "<br>".join(_it((f"×{m.ratio:.3f}" if m.ratio is not None else "-")
                             + (f" [{m.ci[0]:.3f}, {m.ci[1]:.3f}]" if m.ci else "")
                             + (" advisory" if m.advisory else ""), grey) for m in r.metrics)
    else:
        bh = rc = "-"
    why = why_lines(r)
    return (f"| {_md(_clip(r.runner, 120))} | {_md(_clip(r.case, 120))} | {_MARK.get(r.verdict, '')} "
            f"**{r.verdict}** | {bh} | {rc} | {'<br>'.join(_md(_clip(w, 400)) for w in why)} |")


def _it(text: str, on: bool) -> str:
    return f"*{text}*" if on else text


def diff_json(d: DiffResult) -> str:
    """The diff for tools: printed as is (never through terminal escaping), control characters
    escaped as ``\\uXXXX`` so it always parses."""
    return json_text(d.to_dict(), indent=1)


def refused_markdown(reason: str) -> str:
    """The step summary of a comparison benchbox refused."""
    return f"### ⛔ benchbox diff refused\n\n{_md(reason)}\n"
