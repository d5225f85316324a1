"""benchbox.fallbacks on entries shaped as runners write them, for the cases no CPU compile produces.

The same functions run on real fallback lists from real CPU compiles in test_torch_compile.py;
here: Triton template picks (they need a GPU), TensorRT entries, unmatched call sites, limits.
"""

from __future__ import annotations

import pytest

from benchbox.fallbacks import (
    change_line,
    compare_picks,
    decisions,
    identity,
    kernel_family,
    kernel_label,
    probable_causes,
)


def _triton_site(n: int, block_m: int, warps: int, ms: dict[str, float], shapes: list[list[str]]) -> dict:
    chosen = f"triton_mm_{n} (BLOCK_M={block_m}, BLOCK_N=64, num_warps={warps})"
    alts = [{"kernel": k, "kind": "triton_template" if k.startswith("triton") else "aten", "ms": t}
            for k, t in sorted(ms.items(), key=lambda kv: kv[1])]
    return {"op": "mm", "input_shapes": shapes, "chosen": chosen, "chosen_kind": "triton_template",
            "chosen_ms": ms[kernel_label(chosen)] if kernel_label(chosen) in ms else ms[chosen],
            "alternatives": alts, "n_choices": len(ms)}


A64 = "triton_mm (BLOCK_M=64, BLOCK_N=64, num_warps=4)"
A128 = "triton_mm (BLOCK_M=128, BLOCK_N=64, num_warps=8)"


def test_kernel_labels_drop_the_process_counter_and_keep_the_configuration() -> None:
    assert kernel_label("triton_mm_17 (BLOCK_M=64, BLOCK_N=64, num_warps=4)") == A64
    assert kernel_label("cpp_CppMicroGemmFP32Vec_12") == "cpp_CppMicroGemmFP32Vec"
    assert kernel_label("bmm") == "bmm" and kernel_family(A128) == "triton_mm"
    assert change_line("mm", A64, A128, 3) == "mm: triton_mm BLOCK_M=64→128, num_warps=4→8 at 3 sites"
    assert change_line("mm", "mm", A64, 1) == "mm → triton_mm at 1 site"
    assert change_line("addmm", "bmm", A64, 2) == "addmm: bmm → triton_mm at 2 sites"


def test_stand_in_triton_picks_compared_per_site_with_both_compiles_timings_as_triton_needs_a_gpu() -> None:
    s1, s2 = [["64", "64"]], [["128", "64"]]
    first = [_triton_site(1, 64, 4, {A64: 0.010, A128: 0.012, "mm": 0.020}, s1),
             _triton_site(2, 64, 4, {A64: 0.011, A128: 0.013, "mm": 0.020}, s1),
             _triton_site(3, 64, 4, {A64: 0.030, A128: 0.031, "mm": 0.040}, s2)]
    second = [_triton_site(7, 128, 8, {A64: 0.012, A128: 0.011, "mm": 0.020}, s1),
              _triton_site(8, 64, 4, {A64: 0.010, A128: 0.013, "mm": 0.021}, s1),
              _triton_site(9, 128, 8, {A64: 0.033, A128: 0.029, "mm": 0.040}, s2)]
    cmp = compare_picks(first, second)
    assert (cmp.sites, cmp.changed_sites, cmp.unmatched_sites) == (3, 2, 0)
    (change,) = cmp.changes
    assert (change.before, change.after, change.sites) == (A64, A128, 2)
    assert abs(change.delta_ms_by_first - ((0.012 - 0.010) + (0.031 - 0.030))) < 1e-12
    assert abs(change.delta_ms_by_second - ((0.011 - 0.012) + (0.029 - 0.033))) < 1e-12
    assert abs(cmp.delta_ms - (change.delta_ms_by_first + change.delta_ms_by_second) / 2) < 1e-12
    assert cmp.tuned_ms_first == sum(s["chosen_ms"] for s in first)
    assert cmp.timing_ratio_unchanged["n"] == 1
    assert cmp.lines() == ["mm: triton_mm BLOCK_M=64→128, num_warps=4→8 at 2 sites"]
    # a timing the other compile never took leaves the estimate open instead of guessing
    second[0]["alternatives"] = [a for a in second[0]["alternatives"] if a["kernel"] != A64]
    assert compare_picks(first, second).changes[0].delta_ms_by_second is None
    # a site tuned in one compile only is counted apart
    uneven = compare_picks(first, second[:2])
    assert uneven.unmatched_sites == 1 and not uneven.same
    assert "1 call site(s) tuned in only one compile" in uneven.lines()


def test_identity_drops_measurements_and_keeps_decisions() -> None:
    a = {"kind": "autotune_choice", "op": "mm", "input_shapes": [["64", "64"]],
         "chosen": "triton_mm_3 (BLOCK_M=64)", "chosen_kind": "triton_template", "chosen_key": "abc",
         "chosen_ms": 0.01, "chosen_ms_range": [0.01, 0.02], "count": 2, "n_choices": 20,
         "alternatives": [{"kernel": "mm", "ms": 0.02}], "phase": "compile_cold", "detail": "0.0100 ms"}
    b = dict(a, chosen="triton_mm_41 (BLOCK_M=64)", chosen_key="def", chosen_ms=0.013, n_choices=19,
             alternatives=[], phase="compile_warm", detail="0.0130 ms", build_s=3.0)
    assert identity(a) == identity(b)
    assert identity(a) != identity(dict(a, chosen="triton_mm_3 (BLOCK_M=128)"))
    assert identity(a) != identity(dict(a, count=3))
    assert identity(a) != identity(dict(a, input_shapes=[["64", "128"]]))


def test_one_entry_for_many_sites_decides_what_an_entry_per_site_does() -> None:
    """Receipts that group a pick repeated at many call sites (count) against receipts that list
    each site: the same decisions, so a diff names no compiler change between them."""
    import json

    from benchbox.receipts.diff import compiler_causes
    from benchbox.receipts.model import ResultRow
    from tests.support import GOLDEN

    site = {"kind": "autotune_choice", "op": "mm", "input_shapes": [["64", "64"]],
            "chosen": "triton_mm_3 (BLOCK_M=64)", "chosen_ms": 0.01}
    grouped, listed = [dict(site, count=3)], [dict(site, chosen_ms=0.01 + i / 1e4) for i in range(3)]
    assert decisions(grouped) == decisions(listed)
    assert decisions(grouped) != decisions(listed[:2])
    assert decisions(grouped) != decisions([dict(site, count=3, chosen="triton_mm_9 (BLOCK_M=128)")])
    row = json.loads(GOLDEN.read_text())["results"][0]

    def with_fallbacks(entries: list[dict]) -> ResultRow:
        return ResultRow.of(dict(row, runner_report=dict(row["runner_report"], fallbacks=entries)))

    assert compiler_causes(with_fallbacks(grouped), with_fallbacks(listed)) == ()
    assert compiler_causes(with_fallbacks(grouped), with_fallbacks(listed[:2]))


def _trt_plugin(layer_type: str, precision: str, count: int, examples: list[str]) -> dict:
    """A plugin-layer entry as the TensorRT runner writes it (tensorrt_report.plugin_entries)."""
    return {"kind": "plugin_layer", "level": "engine", "layer_type": layer_type, "precision": precision,
            "count": count, "examples": examples, "detail": f"{count} {layer_type} layer(s) ({precision})",
            "phase": "engine_load", "source": "engine_inspector"}


def test_probable_causes_cover_other_runners_kinds_and_stay_bounded() -> None:
    base = [_trt_plugin("PluginV2", "FP16", 1, ["rope_0"]), _trt_plugin("PluginV3", "FP32", 2, ["a", "b"]),
            {"kind": "recompile", "reason": "tensor 'x' size mismatch at index 0", "function": "forward"}]
    head = [_trt_plugin("PluginV2", "FP16", 3, ["rope_0", "gelu_0", "gelu_1"]),
            {"kind": "cudagraph_skip", "reason": "mutated inputs", "count": 1},
            {"kind": "aten_fallback", "op": "aten.masked_scatter.default", "calls": 2}]
    lines = probable_causes(base, head, limit=10)
    assert lines == ["new ATen fallback: aten.masked_scatter",
                     "recompile gone: tensor 'x' size mismatch at index 0",
                     "new CUDA-graph skip: mutated inputs", "plugin layer PluginV2 FP16 (engine): 1 → 3",
                     "plugin layer gone: PluginV3 FP32 (engine)"]
    assert probable_causes(base, head, limit=3) == lines[:2] + ["and 3 more"]
    many = [{"kind": "graph_break", "reason": f"reason {i}", "count": 1} for i in range(30)]
    assert probable_causes([], many) == [f"new graph break: reason {i}" for i in range(5)] + ["and 25 more"]
    assert probable_causes(many, many) == [] and probable_causes([], []) == []


# -- draw_causes: how each side's compiled kernels were chosen ---------------------------------

def _compile(sha: str | None = None, draws: int | None = None, spread: float = 1.2,
             pin: dict | None = None) -> dict:
    out: dict = {"pin": pin or {"enabled": False, "status": "off"}}
    if sha:
        out["artifact"] = {"sha256": sha, "used": "loaded"}
    if draws:
        out["selection"] = {"draws": draws, "spread": spread}
    return out


def test_draw_causes_same_artifact_or_same_pinned_compile_says_nothing() -> None:
    from benchbox.fallbacks import draw_causes

    a = "a" * 64
    assert draw_causes(_compile(a, 3), _compile(a, 3, spread=1.5)) == []
    pin = {"enabled": True, "status": "fresh", "key": "k", "dir": "/c/k", "picks_generation": 4}
    assert draw_causes(_compile(None, 3, pin=pin), _compile(None, 3, pin={**pin, "status": "reused"})) == []
    # two stores at one path, each pinning its own generation 4: two compiles, not one
    assert draw_causes(_compile(None, 3, pin=pin), _compile(None, 3, pin=pin)) == [
        "both sides the fastest of 3 fresh compiles (draws spread ×1.200 base, ×1.200 head)"]
    # nothing on either side: the rows compare as they always did
    assert draw_causes(_compile(), _compile()) == [] and draw_causes(None, None) == []


def test_draw_causes_name_different_artifacts_and_draws_on_both_sides() -> None:
    from benchbox.fallbacks import draw_causes

    a, b = "a" * 64, "b" * 64
    assert draw_causes(_compile(a, 3, 1.25), _compile(b, 3, 1.05)) == [
        "compiled artifact aaaaaaaaaaaa → bbbbbbbbbbbb",
        "both sides the fastest of 3 fresh compiles (draws spread ×1.250 base, ×1.050 head)"]
    assert draw_causes(_compile(None, 3), _compile(b)) == [
        "compiled artifact bbbbbbbbbbbb on the head side only",
        "only the base side is the fastest of 3 fresh compiles (draws spread ×1.200)"]
    other_pin = {"enabled": True, "status": "reused", "key": "k", "dir": "/c/k", "picks_generation": 5}
    pin = {**other_pin, "status": "fresh", "picks_generation": 4}
    assert draw_causes(_compile(None, 2, pin=pin), _compile(None, 4, pin=other_pin)) == [
        "both sides the fastest of 2 | 4 fresh compiles (draws spread ×1.200 base, ×1.200 head)"]


# -- the records fallbacks reads ---------------------------------------------------------------

def test_records_read_as_the_dicts_a_runner_builds() -> None:
    from benchbox.receipts.model import Fallback

    s1, s2 = [["64", "64"]], [["128", "64"]]
    first = [_triton_site(1, 64, 4, {A64: 0.010, A128: 0.012, "mm": 0.020}, s1),
             _triton_site(3, 64, 4, {A64: 0.030, A128: 0.031, "mm": 0.040}, s2)]
    second = [_triton_site(7, 128, 8, {A64: 0.012, A128: 0.011, "mm": 0.020}, s1),
              _triton_site(9, 64, 4, {A64: 0.033, A128: 0.029, "mm": 0.040}, s2)]
    base = [*(dict(s, kind="autotune_choice", count=2) for s in first),
            _trt_plugin("PluginV2", "FP16", 1, ["rope_0"]),
            {"kind": "graph_break", "reason": "call_function print", "count": 2, "where": ["a/b.py:3"]},
            {"kind": "aten_fallback", "op": "aten.cumsum.default", "calls": 1, "forced": False},
            {"kind": "aten_fallback", "op": "aten.native_layer_norm.default", "calls": 0, "forced": True}]
    head = [*(dict(s, kind="autotune_choice", count=2) for s in second),
            _trt_plugin("PluginV2", "FP16", 2, ["rope_0", "x"]),
            {"kind": "aten_fallback", "op": "aten.cumsum.default", "calls": 3, "forced": False},
            {"kind": "parser_error", "node_name": "Cast_3", "op": "", "count": 1}]
    rb, rh = [Fallback.of(e) for e in base], [Fallback.of(e) for e in head]
    lines = probable_causes(base, head, limit=20)
    assert "ATen fallback aten.cumsum: 1 → 3 calls" in lines
    assert "new parser error: Cast_3" in lines and "graph break gone: call_function print" in lines
    assert probable_causes(rb, rh, limit=20) == lines
    assert [identity(e) for e in rb] == [identity(e) for e in base]
    assert compare_picks(rb[:2], rh[:2]).to_dict() == compare_picks(first, second).to_dict()


def test_a_fallback_entry_is_written_back_kind_and_count_first_then_in_the_runners_order() -> None:
    from benchbox.errors import UsageError
    from benchbox.receipts.model import Fallback

    doc = {"op": "mm", "input_shapes": [["2", "3"]], "chosen": "mm", "kind": "autotune_choice",
           "alternatives": [{"kernel": "mm", "kind": "aten", "key": "k", "ms": 0.5}], "count": 3,
           "level": None, "n_choices": 2}
    back = Fallback.of(doc).to_json()
    assert list(back) == ["kind", "count", "op", "input_shapes", "chosen", "alternatives", "level",
                          "n_choices"]
    assert back == doc and list(back["alternatives"][0]) == ["kernel", "kind", "key", "ms"]
    with pytest.raises(UsageError, match="calls"):
        Fallback.of({"kind": "aten_fallback", "calls": -1})


def test_a_compile_section_reads_as_its_record_and_one_that_does_not_fit_says_nothing() -> None:
    from benchbox.fallbacks import draw_causes
    from benchbox.fallbacks.records import CompileChoice

    a = "a" * 64
    choice = CompileChoice.read(_compile(a, 3, 1.25))
    assert choice is not None and choice.artifact is not None and choice.artifact.sha256 == a
    assert choice.selection is not None and (choice.selection.draws, choice.selection.spread) == (3, 1.25)
    assert draw_causes(choice, _compile(None, 3)) == draw_causes(_compile(a, 3, 1.25), _compile(None, 3))
    odd = {"artifact": {"sha256": 5}, "selection": {"draws": 3, "spread": 1.1}}
    assert CompileChoice.read(odd) is None and CompileChoice.read("compiled") is None
    assert draw_causes(odd, None) == [] and draw_causes(_compile(None, 2), None) == [
        "only the base side is the fastest of 2 fresh compiles (draws spread ×1.200)"]
