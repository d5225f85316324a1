"""Plain-text rendering of receipts for the terminal."""

from __future__ import annotations

from typing import Any


def _ms(ns: Any) -> str:
    return f"{ns / 1e6:.3f}" if isinstance(ns, (int, float)) else "-"


def _ci(ci: Any) -> str:
    return f"[{_ms(ci[0])}, {_ms(ci[1])}]" if isinstance(ci, list) and len(ci) == 2 else "unresolved"


_FALLBACK_WORDS = {"graph_break": "graph break", "recompile": "recompile",
                   "autotune_choice": "autotune pick", "cudagraph_skip": "cudagraph skip",
                   "precision_island": "precision-island layer", "reformat_layer": "reformat layer",
                   "plugin_layer": "plugin layer", "unsupported_node": "unsupported node",
                   "parser_error": "parser error"}


def _count(f: dict[str, Any]) -> int:
    n = f.get("count", 1)
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 1


def fallback_summary(fallbacks: list[dict[str, Any]]) -> str:
    """One phrase per fallback kind: "1 graph break, 2 aten ops (layer_norm forced), 3 autotune picks".

    Grouped entries count their ``count``; entries with a ``level`` (TensorRT's network
    definition or engine) are counted per level.
    """
    counts: dict[tuple[str, str], int] = {}
    for f in fallbacks:
        if not isinstance(f, dict):
            continue
        kind = str(f.get("kind", "other"))
        if kind == "aten_fallback" and not f.get("calls", 1):
            continue  # forced, but absent from the generated code
        n = _count(f) if kind != "aten_fallback" else 1
        key = (kind, str(f["level"]) if isinstance(f.get("level"), str) else "")
        counts[key] = counts.get(key, 0) + n
    forced = sorted({str(f["requested"]) for f in fallbacks if isinstance(f, dict)
                     and f.get("kind") == "aten_fallback" and f.get("requested") and f.get("calls")})
    parts = []
    for (kind, level), n in counts.items():
        word = "aten op" if kind == "aten_fallback" else _FALLBACK_WORDS.get(kind, kind.replace("_", " "))
        part = f"{n} {level + ' ' if level else ''}{word}{'' if n == 1 else 's'}"
        if kind == "aten_fallback" and forced:
            part += f" ({', '.join(forced)} forced)"
        parts.append(part)
    return ", ".join(parts) or "none"


def results_table(receipt: dict[str, Any]) -> str:
    """One line per (runner, case): status, p50/p99 in ms with intervals, samples."""
    c = receipt["contract"]
    env = receipt.get("environment", {})
    dev = env.get("gpu", {}).get("name") if isinstance(env.get("gpu"), dict) else None
    task = receipt["task"]
    lines = [f"contract {c['name']} ({c['first']}..{c['last']}, {c['clock']} clock, "
             f"hash {c['hash'][:12]})  task {task.get('name')}/{task.get('size')}  "
             f"device {dev or env.get('device', '?')}"]
    if not receipt.get("complete", True):
        lines.append("INCOMPLETE receipt: the run did not finish; rows below are those measured")
    head = f"{'runner':<16} {'case':<10} {'status':<8} {'n':>5} {'p50 ms':>9} {'p50 95% CI':>21} " \
           f"{'p99 ms':>9} {'p99 95% CI':>21}"
    lines += [head, "-" * len(head)]
    for r in receipt["results"]:
        s = r.get("summary") or {}
        lines.append(f"{r['runner']:<16} {r['case']:<10} {r['status']:<8} {s.get('n', 0):>5} "
                     f"{_ms(s.get('p50_ns')):>9} {_ci(s.get('p50_ci_ns')):>21} "
                     f"{_ms(s.get('p99_ns')):>9} {_ci(s.get('p99_ci_ns')):>21}")
        for reason in r.get("reasons", []):
            lines.append(f"{'':<16} ↳ {reason}")
    reported: dict[str, list[dict[str, Any]]] = {}
    for r in receipt["results"]:
        fb = (r.get("runner_report") or {}).get("fallbacks")
        if fb and r["runner"] not in reported:
            reported[r["runner"]] = fb
    lines += [f"{name} fallbacks: {fallback_summary(fb)}" for name, fb in reported.items()]
    comp = receipt.get("comparisons") or {}
    if comp.get("rows"):
        lines.append(f"p50 ratio against {comp['baseline']} (valid rows only):")
        for row in comp["rows"]:
            ci = row.get("p50_ratio_ci")
            ci_txt = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if isinstance(ci, list) and len(ci) == 2 else ""
            verdict = f"  {row['p50_verdict']}" if row.get("p50_verdict") else ""
            lines.append(f"  {row['runner']:<16} {row['case']:<10} {row['p50_ratio']:.3f}{ci_txt}{verdict}")
    for ex in comp.get("excluded", []):
        lines.append(f"  excluded from comparison: {ex['runner']} × {ex['case']} ({ex['status']})")
    return "\n".join(lines)
