"""Plain-text rendering of receipts for the terminal."""

from __future__ import annotations

from typing import Any


def _ms(ns: Any) -> str:
    return f"{ns / 1e6:.3f}" if isinstance(ns, (int, float)) else "-"


def _ci(ci: Any) -> str:
    return f"[{_ms(ci[0])}, {_ms(ci[1])}]" if isinstance(ci, list) and len(ci) == 2 else "unresolved"


_FALLBACK_WORDS = {"graph_break": "graph break", "recompile": "recompile",
                   "autotune_choice": "autotune pick", "cudagraph_skip": "cudagraph skip"}


def fallback_summary(fallbacks: list[dict[str, Any]]) -> str:
    """One phrase per fallback kind: "1 graph break, 2 aten ops (layer_norm forced), 3 autotune picks"."""
    counts: dict[str, int] = {}
    for f in fallbacks:
        kind = str(f.get("kind", "other"))
        if kind == "aten_fallback" and not f.get("calls", 1):
            continue  # forced, but absent from the generated code
        n = int(f.get("count", 1)) if kind in ("graph_break", "cudagraph_skip", "autotune_choice") else 1
        counts[kind] = counts.get(kind, 0) + n
    forced = sorted({str(f["requested"]) for f in fallbacks
                     if f.get("kind") == "aten_fallback" and f.get("requested") and f.get("calls")})
    parts = []
    for kind, n in counts.items():
        word = "aten op" if kind == "aten_fallback" else _FALLBACK_WORDS.get(kind, kind.replace("_", " "))
        part = f"{n} {word}{'' if n == 1 else 's'}"
        if kind == "aten_fallback" and forced:
            part += f" ({', '.join(forced)} forced)"
        parts.append(part)
    return ", ".join(parts) or "none"


def compile_lines(results: list[dict[str, Any]]) -> list[str]:
    """What each compiling runner reused or found unstable (its report's one-line summaries)."""
    out, seen = [], set()
    for r in results:
        comp = (r.get("runner_report") or {}).get("compile")
        if not isinstance(comp, dict) or r.get("runner") in seen:
            continue
        seen.add(r.get("runner"))
        for part in ("pin", "autotune_stability"):
            text = (comp.get(part) or {}).get("summary") if isinstance(comp.get(part), dict) else None
            if isinstance(text, str) and text:
                out.append(f"{r['runner']} compile: {text}" if part == "pin" else f"{r['runner']} {text}")
    return out


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
    lines += compile_lines(receipt["results"])
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
