"""What torch.compile's report says about reuse and stability: the pinning facts of a warm
compile under a pinned key, two fresh compiles' picks compared, and their one-line summaries."""

from __future__ import annotations

from typing import Any

from benchbox.fallbacks import compare_kernel_configs, compare_picks
from benchbox.runners import compile_draws as cd
from benchbox.runners import compile_report as cr


def reuse_facts(facts: dict[str, Any], pinned: dict[str, Any], warm: cr.PhaseRecord) -> None:
    """What the warm compile under a pinned key reused: its graph-cache counters and status
    (and the pinned compile's ``selection``, kept with it)."""
    counters = warm.cache_counters()
    ind, aot = counters["inductor"], counters["aot_autograd"]
    hits, misses = ind.get("fxgraph_cache_hit", 0), ind.get("fxgraph_cache_miss", 0)
    bypass = ind.get("fxgraph_cache_bypass", 0)
    facts["graphs"] = {"fx_graph_cache_hits": hits, "fx_graph_cache_misses": misses,
                       "fx_graph_cache_bypasses": bypass,
                       "aot_autograd_cache_hits": aot.get("autograd_cache_hit", 0),
                       "autotuned_call_sites": len(warm.autotune)}
    # an AOTAutograd cache hit serves inductor's cached graph without an FX-cache lookup
    served = hits or aot.get("autograd_cache_hit", 0)
    facts["status"] = ("reused" if served and not misses and not bypass and not warm.autotune
                       else "partly_reused")
    facts["picks_generation"] = pinned.get("generation")
    facts["picks_from"] = (f"{pinned.get('compile') or 'compile_cold'} of the run that pinned this key "
                           f"(generation {pinned.get('generation')})")
    if pinned.get("selection"):  # kept with the compile: it travels on into a saved artifact
        facts["selection"] = pinned["selection"]
    if facts["status"] == "partly_reused":
        facts["note"] = "; ".join([
            f"inductor compiled {misses + bypass} of {hits + misses + bypass} graph(s) anew under "
            "the pinned key (its own cache key differs: code outside the model's classes, "
            "inductor settings or environment)", *warm.cache_bypass[:2]])
        if warm.autotune:
            facts["picks_vs_pinned"] = compare_picks(pinned["sites"], warm.autotune).to_dict()


def stability_facts(fresh: dict[str, tuple[cr.PhaseRecord, dict[str, Any]]],
                    pinned: dict[str, Any] | None) -> dict[str, Any]:
    """Two fresh compiles' picks compared: the first stability compile against this run's
    cold compile, else against the second stability compile, else against the pinned picks
    (another run's fresh compile, when the key was pinned between the plan and the lock)."""
    first_name = "compile_stability_1"
    second_name = next((n for n in ("compile_cold", "compile_stability_2") if n in fresh), None)
    first, first_configs = fresh[first_name]
    if second_name is not None:
        second_sites, second_configs = fresh[second_name][0].autotune, fresh[second_name][1]
        against = f"this run's {second_name}"
    else:
        second_sites = list((pinned or {}).get("sites") or [])
        second_configs = dict((pinned or {}).get("kernel_configs") or {})
        against = f"the pinned fresh compile (generation {(pinned or {}).get('generation')})"
    picks = compare_picks(first.autotune, second_sites)
    out = {"compared": [f"this run's {first_name}", against], **picks.to_dict(),
           "kernel_configs": compare_kernel_configs(first_configs, second_configs)}
    out["summary"] = stability_summary(out)
    return out


def _key_text(facts: dict[str, Any]) -> str:
    return f"key {str(facts.get('key') or '')[:12]}"


def _picks_text(cmp: dict[str, Any] | None, what: str) -> str:
    if cmp is None:
        return f"no earlier picks recorded for this key to compare with {what}"
    if cmp.get("same"):
        return f"same picks as the last recorded (generation {cmp.get('compared_with_generation')})"
    lines = "; ".join(cmp.get("lines") or [])
    return (f"picks DIFFER from the last recorded (generation {cmp.get('compared_with_generation')}) "
            f"at {cmp.get('changed_sites', 0) + cmp.get('unmatched_sites', 0)} of {cmp.get('sites')} "
            f"call sites: {lines}")


def pin_summary(facts: dict[str, Any]) -> str:
    """One line on what the compile reused (and how it was chosen), for the terminal."""
    text = _reuse_text(facts)
    sel = facts.get("selection")
    if isinstance(sel, dict) and sel.get("draws") and facts.get("status") != "fresh":
        text += f"; {cd.selection_text(sel)}"
    if facts.get("artifact_not_used"):
        text = f"{facts['artifact_not_used']}; compiled instead: {text}"
    return text


def _reuse_text(facts: dict[str, Any]) -> str:
    status = facts.get("status")
    g = facts.get("graphs") or {}
    if status == "fresh":
        sel = facts.get("selection")
        how = f"the {cd.selection_text(sel)}" if isinstance(sel, dict) else "fresh compile"
        head = f"pinned, {how} ({_key_text(facts)}); its picks are now pinned"
        return f"{head}; {_picks_text(facts.get('picks_vs_recorded'), 'them')}"
    if status == "reused":
        return (f"pinned, reused the compile of generation {facts.get('picks_generation')} "
                f"({_key_text(facts)}): {g.get('fx_graph_cache_hits')} graph(s) from the cache, "
                "no autotuning")
    if status == "partly_reused":
        return f"pinned, PARTLY reused ({_key_text(facts)}): {facts.get('note', '')}"
    sha = str(facts.get("artifact_sha256") or "")[:12]
    if status == "artifact":
        return (f"reused from artifact {sha} ({_key_text(facts)}): {g.get('fx_graph_cache_hits')} graph(s) "
                "from the artifact, no autotuning")
    if status == "artifact_partly_reused":
        return f"PARTLY reused from artifact {sha} ({_key_text(facts)}): {facts.get('note', '')}"
    if facts.get("key") is None:
        return f"not pinned; picks not recorded ({facts.get('note', '')})"
    head = f"not pinned ({_key_text(facts)})"
    if "picks_vs_recorded" in facts:
        return f"{head}; {_picks_text(facts.get('picks_vs_recorded'), 'this compile')}"
    return head


def stability_summary(facts: dict[str, Any]) -> str:
    """One line on how much two fresh compiles' picks differ."""
    sites, changed = facts.get("sites", 0), facts.get("changed_sites", 0) + facts.get("unmatched_sites", 0)
    kc = facts.get("kernel_configs") or {}
    kernels = (f"; Triton kernel configs differ for {kc['changed']} of {kc['kernels']} kernels"
               if kc.get("kernels") else "")
    if not sites and not facts.get("unmatched_sites"):
        return "autotune stability: no autotuned call sites" + kernels
    if not changed:
        return f"autotune stability: two fresh compiles picked the same kernels at all {sites} call sites" \
               + kernels
    delta, pct = facts.get("estimated_delta_ms"), facts.get("estimated_delta_pct")
    est = (f", ≈ {delta:+.4f} ms per call ({pct:+.1f}% of the tuned operators) by the autotuner's own timings"
           if isinstance(delta, float) and isinstance(pct, float) else "")
    return (f"autotune stability: two fresh compiles differ at {changed} of {sites} call sites "
            f"({'; '.join(facts.get('lines') or [])}){est}" + kernels)
