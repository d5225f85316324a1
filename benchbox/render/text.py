"""Plain-text rendering of receipts for the terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchbox.receipts.model import Fallback, Receipt, ResultRow
from benchbox.render.common import ci_ms, contract_label, ms, ratio_ci
from benchbox.render.common import terminal as _t
from benchbox.render.table import table, wrapped

_FALLBACK_WORDS = {"graph_break": "graph break", "recompile": "recompile",
                   "autotune_choice": "autotune pick", "cudagraph_skip": "cudagraph skip",
                   "precision_island": "precision-island layer", "reformat_layer": "reformat layer",
                   "plugin_layer": "plugin layer", "unsupported_node": "unsupported node",
                   "parser_error": "parser error"}


def fallback_summary(entries: Sequence[Mapping[str, Any] | Fallback]) -> str:
    """One phrase per fallback kind: "1 graph break, 2 aten ops (layer_norm forced), 3 autotune picks".

    Grouped entries count their ``count``; entries with a ``level`` (TensorRT's network
    definition or engine) are counted per level.
    """
    fallbacks = [f if isinstance(f, Fallback) else Fallback.of(f) for f in entries
                 if isinstance(f, Mapping | Fallback)]
    counts: dict[tuple[str, str], int] = {}
    for f in fallbacks:
        kind = f.kind_name
        if kind == "aten_fallback" and not f.present:
            continue  # forced, but absent from the generated code
        n = f.times if kind != "aten_fallback" else 1
        level = f.level or ""
        counts[(kind, level)] = counts.get((kind, level), 0) + n
    forced = sorted({str(f.requested) for f in fallbacks
                     if f.kind == "aten_fallback" and f.requested and f.called})
    parts = []
    for (kind, level), n in counts.items():
        word = "aten op" if kind == "aten_fallback" else _FALLBACK_WORDS.get(kind, kind.replace("_", " "))
        part = f"{n} {level + ' ' if level else ''}{word}{'' if n == 1 else 's'}"
        if kind == "aten_fallback" and forced:
            part += f" ({', '.join(forced)} forced)"
        parts.append(part)
    return ", ".join(parts) or "none"


def compile_lines(results: Sequence[ResultRow]) -> list[str]:
    """What each compiling runner reused or found unstable (its report's one-line summaries)."""
    out, seen = [], set()
    for r in results:
        comp = r.runner_report.compile
        if comp is None or r.runner in seen:
            continue
        seen.add(r.runner)
        for part, note in (("pin", comp.pin), ("autotune_stability", comp.autotune_stability)):
            text = note.summary if note is not None else None
            if text:
                out.append(f"{r.runner} compile: {text}" if part == "pin" else f"{r.runner} {text}")
    return out


def runner_comparisons(receipt: Receipt) -> Any:
    """The runners against the baseline runner, judged now by the diff engine (the receipt's
    stored comparisons may come from an older benchbox with other words)."""
    from benchbox.receipts.diff import compare_runners

    stored = receipt.comparisons
    if not any(r.usable for r in receipt.results):
        return stored
    return compare_runners(receipt, stored.baseline if stored is not None else None)


def results_table(receipt: Receipt, width: int | None = None) -> str:
    """One line per (runner, case): status, p50/p99 in ms with intervals, samples; then the notes.

    ``width``: the terminal's by default, else the table's natural width (see ``render.table``).
    """
    task = receipt.task
    title = f"contract {contract_label(receipt)}  task {task.name}/{task.size}  device {receipt.device}"
    lines = [wrapped(title, width=width)]
    if not receipt.is_complete:
        lines.append("INCOMPLETE receipt: the run did not finish; rows below are those measured")
    rows = [(_t(r.runner), _t(r.case), r.status, r.summary.n, ms(r.summary.p50_ns),
             ci_ms(r.summary.p50_ci_ns),
             ms(r.summary.p99_ns), ci_ms(r.summary.p99_ci_ns)) for r in receipt.results]
    lines.append(table(["runner", "case", "status", "n", "p50 ms", "p50 95% CI", "p99 ms", "p99 95% CI"],
                       rows, right=("n", "p50 ms", "p50 95% CI", "p99 ms", "p99 95% CI"),
                       wrap=("runner", "case", "p50 95% CI", "p99 95% CI"), width=width))
    noted = [r for r in receipt.results if r.reasons]
    if noted:
        lines.append("notes:")
        for r in noted:
            lines += [wrapped(f"↳ {r.runner} × {r.case}: {reason}", 2, width) for reason in r.reasons]
    reported: dict[str, Sequence[Any]] = {}
    for r in receipt.results:
        if r.fallbacks and r.runner not in reported:
            reported[r.runner] = r.fallbacks
    lines += [wrapped(f"{name} fallbacks: {fallback_summary(fb)}", width=width)
              for name, fb in reported.items()]
    lines += [wrapped(x, width=width) for x in compile_lines(receipt.results)]
    lines += _comparison_lines(receipt, width)
    return "\n".join(lines)


def _comparison_lines(receipt: Receipt, width: int | None) -> list[str]:
    comp = runner_comparisons(receipt)
    if comp is None:
        return []
    lines = []
    if comp.rows:
        lines.append(f"p50 ratio against {comp.baseline} (valid rows only; verdicts as in benchbox diff):")
        rows = [(_t(row.runner), _t(row.case), f"{row.p50_ratio:.3f}", ratio_ci(row.p50_ratio_ci),
                 row.p50_verdict or "") for row in comp.rows]
        lines.append(_indent(table(["runner", "case", "p50 ratio", "95% CI", "verdict"], rows,
                                   right=("p50 ratio", "95% CI"), wrap=("runner", "case"), width=width)))
        lines += [wrapped(f"  ↳ {row.runner} × {row.case} unreliable: {row.reason}", width=width)
                  for row in comp.rows if row.p50_verdict == "unreliable" and row.reason]
    for ex in comp.excluded:
        lines.append(f"  excluded from comparison: {ex.runner} × {ex.case} ({ex.status})")
    return lines


def _indent(text: str, n: int = 2) -> str:
    return "\n".join(" " * n + line if line else line for line in text.splitlines())


def side_by_side(receipts: Sequence[Receipt], names: Sequence[str], width: int | None = None) -> str:
    """Several receipts' p50 (status) per (task, case, runner), one column per receipt; with two
    receipts under one contract, the diff engine's verdict of [2] against [1] per row."""
    first = receipts[0].contract
    lines = []
    for i, (r, n) in enumerate(zip(receipts, names)):
        c = r.contract
        warn = "" if c.hash == first.hash else "  (DIFFERENT contract: not comparable with [1])"
        lines.append(wrapped(f"[{i + 1}] {n}: contract {c.name} hash {c.hash[:12]}, task "
                             f"{r.task.name}/{r.task.size}, device {r.device}, {r.created_at}{warn}",
                             width=width))
    keys: list[tuple[str, str, str]] = []
    cells: dict[tuple[tuple[str, str, str], int], str] = {}
    for i, r in enumerate(receipts):
        for row in r.results:
            k = (_t(r.task.name), _t(row.case), _t(row.runner))
            if k not in keys:
                keys.append(k)
            p50 = ms(row.summary.p50_ns)
            cells[(k, i)] = p50 if row.status == "valid" else f"{p50} ({row.status})"
    heads = [f"[{i + 1}] p50 ms" for i in range(len(receipts))]
    verdicts = _pair_verdicts(receipts, names)
    rows = [(_t(k[0]), _t(k[2]), _t(k[1]), *(cells.get((k, i), "-") for i in range(len(receipts))),
             *((verdicts.get(k, "-"),) if verdicts else ())) for k in keys]
    lines.append(table(["task", "runner", "case", *heads, *(["[2] vs [1]"] if verdicts else [])], rows,
                       right=heads, wrap=("task", "runner", "case"), width=width))
    return "\n".join(lines)


def _pair_verdicts(receipts: Sequence[Receipt], names: Sequence[str]) -> dict[tuple[str, str, str], str]:
    """The verdict of ``benchbox diff [1] [2]`` per row (empty when not exactly two comparable receipts)."""
    from benchbox.receipts.diff import ComparisonRefused, diff_receipts

    if len(receipts) != 2:
        return {}
    try:
        d = diff_receipts(receipts[0], receipts[1], base_name=names[0], head_name=names[1])
    except ComparisonRefused:
        return {}
    return {r.key: r.verdict for r in d.rows}
