"""torch-compile runner: real compiles on the CPU (inductor's C++ backend), real receipts.

Compiling is slow here, so the compiles are few: the graph-breaking vector task
(cold + warm), the decision task with layer_norm forced into ATen (cold only),
and the vector task under an impossible gate (cold only).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchbox.errors import UsageError
from benchbox.receipts.model import decode_receipt
from benchbox.render import fallback_summary, results_table
from benchbox.run import RunConfig, run

TASK = "tests.compile_tasks:factory"


def _receipt(out: Path, **kw: object) -> dict:
    cfg = {"samples": 5, "warmup": 1, "out": out, **kw}
    outcome = run(RunConfig(**cfg))
    return json.loads(Path(outcome.path).read_text())


def _compiled(receipt: dict) -> list[dict]:
    rows = [r for r in receipt["results"] if r["runner"] == "torch-compile"]
    assert rows, receipt["results"]
    return rows


def _kind(row: dict, kind: str) -> list[dict]:
    return [f for f in row["runner_report"]["fallbacks"] if f["kind"] == kind]


@pytest.fixture(scope="module")
def vector_receipt(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Vector task whose forward calls .item(); torch-compile mode default, cold + warm."""
    return _receipt(tmp_path_factory.mktemp("vec") / "r.json", task=TASK,
                    runners=("torch-eager", "torch-compile"),
                    runner_options={"torch-compile": {"mode": "default"}})


def test_graph_break_listed_with_reason_and_location(vector_receipt: dict) -> None:
    for row in _compiled(vector_receipt):
        assert row["status"] == "valid", row["reasons"]
        breaks = _kind(row, "graph_break")
        assert breaks and sum(b["count"] for b in breaks) >= 1
        assert any("item()" in b["reason"] for b in breaks), breaks
        assert any("compile_tasks.py" in w for b in breaks for w in b["where"]), breaks
        # the measured artifact is the warm one; no further graph break while measuring
        assert {b["phase"] for b in breaks} == {"compile_warm"}


def test_cold_and_warm_compile_seconds_and_the_compilers_cache_counters(vector_receipt: dict) -> None:
    rep = _compiled(vector_receipt)[0]["runner_report"]
    assert rep["prepare_s"]["compile_cold"] > 0 and rep["prepare_s"]["compile_warm"] > 0
    phases = rep["compile"]["phases"]
    cold = phases["compile_cold"]["cache_counters"]["inductor"]
    warm = phases["compile_warm"]["cache_counters"]["inductor"]
    # two graphs (the break splits forward): the cold compile missed for each, the warm hit each
    assert cold.get("fxgraph_cache_miss", 0) >= 2 and cold.get("fxgraph_cache_hit", 0) == 0
    assert warm.get("fxgraph_cache_hit", 0) >= 2 and warm.get("fxgraph_cache_miss", 0) == 0
    assert phases["compile_cold"]["graphs_compiled"] == phases["compile_warm"]["graphs_compiled"] >= 2
    assert all(f["fx_local_cache_misses"] for f in phases["compile_cold"]["frames"])
    assert rep["compile"]["measured_artifact"] == "compile_warm"
    assert Path(rep["compile"]["cache_dir"]).name.startswith("benchbox-inductor-")


def test_unforced_layer_norm_is_compiled_not_an_aten_call(vector_receipt: dict) -> None:
    row = _compiled(vector_receipt)[0]
    ops = {f["op"] for f in _kind(row, "aten_fallback")}
    assert "aten.native_layer_norm.default" not in ops
    assert any(op.startswith("extern_kernels.") for op in ops)  # the linears run as ATen GEMMs


def test_show_summarises_fallbacks_per_runner(vector_receipt: dict) -> None:
    text = results_table(decode_receipt(vector_receipt, 'receipt'))
    line = next(ln for ln in text.splitlines() if ln.startswith("torch-compile fallbacks:"))
    assert "1 graph break" in line and "aten op" in line


def test_fallback_summary_counts_kinds() -> None:
    fb = [{"kind": "graph_break", "count": 2}, {"kind": "recompile"},
          {"kind": "aten_fallback", "op": "aten.native_layer_norm.default", "calls": 3,
           "requested": "layer_norm"},
          {"kind": "aten_fallback", "op": "aten.layer_norm.default", "calls": 0, "requested": "layer_norm"},
          {"kind": "autotune_choice"}, {"kind": "autotune_choice"}]
    assert fallback_summary(fb) == ("2 graph breaks, 1 recompile, 1 aten op (layer_norm forced), "
                                    "2 autotune picks")
    assert fallback_summary([]) == "none"


def test_aten_fallback_layer_norm_runs_in_aten_and_passes_the_gates(tmp_path: Path) -> None:
    from torch._inductor.decomposition import select_decomp_table
    from torch.ops import aten

    receipt = _receipt(tmp_path / "r.json", task="decision", size="tiny", cases=("invoice",),
                       runners=("torch-compile",), samples=3,
                       runner_options={"torch-compile": {
                           "mode": "default", "cold_warm": False, "aten_fallbacks": ["layer_norm"],
                           "inductor_options": {"emulate_precision_casts": True}}})
    row = _compiled(receipt)[0]
    assert row["status"] == "valid" and row["accuracy"]["passed"], row["reasons"]
    forced = [f for f in _kind(row, "aten_fallback") if f["forced"] and f["calls"] > 0]
    assert [f["op"] for f in forced] == ["aten.native_layer_norm.default"]
    assert forced[0]["requested"] == "layer_norm" and forced[0]["origin"] == "forced by the user"
    applied = row["runner_report"]["applied_options"]
    assert applied["aten_fallbacks"][0]["requested"] == "layer_norm"
    assert applied["aten_fallbacks"][0]["in_generated_code"] is True
    assert "aten.native_layer_norm.default" in applied["aten_fallback_patch"]["decomposition_removed"]
    assert applied["inductor_options"] == {"emulate_precision_casts": True}
    assert applied["torch_compile_options"] == {"emulate_precision_casts": True}
    assert list(row["runner_report"]["prepare_s"]) == ["load", "compile_cold"]
    assert "layer_norm forced" in results_table(decode_receipt(receipt, 'receipt'))
    # the forcing was scoped to this runner's compiles
    assert aten.native_layer_norm.default in select_decomp_table()


def test_failing_configuration_is_invalid_excluded_and_keeps_options_and_fallbacks(tmp_path: Path) -> None:
    receipt = _receipt(tmp_path / "r.json", task=TASK, cases=("v0",), runners=("torch-compile",),
                       task_options={"graph_break": False}, gates={"prob_max_abs": -1.0},
                       runner_options={"torch-compile": {"mode": "default", "cold_warm": False}})
    row = _compiled(receipt)[0]
    assert row["status"] == "invalid"
    assert any("prob_max_abs" in r for r in row["reasons"])
    rep = row["runner_report"]
    assert rep["options"]["mode"] == "default" and rep["applied_options"]["mode"] == "default"
    assert _kind(row, "aten_fallback") and not _kind(row, "graph_break")
    excluded = receipt["comparisons"]["excluded"]
    assert [(e["runner"], e["case"], e["status"]) for e in excluded] == [("torch-compile", "v0", "invalid")]
    assert any("prob_max_abs" in r for r in excluded[0]["reasons"])


def test_mode_options_and_user_options_resolved_without_compiling() -> None:
    from benchbox.runners.torch_compile import TorchCompileRunner

    r = TorchCompileRunner(options={"inductor_options": {"emulate_precision_casts": True}})
    assert r.options["mode"] == "max-autotune"
    assert r.applied_config == {"max_autotune": True, "triton.cudagraphs": True,
                                "coordinate_descent_tuning": True, "emulate_precision_casts": True}
    assert TorchCompileRunner(options={"mode": "default"}).applied_config == {}


def test_aten_fallback_names_resolve_to_overloads() -> None:
    from benchbox.runners.torch_compile import resolve_aten_op

    assert "aten.native_layer_norm.default" in {str(op) for op in resolve_aten_op("layer_norm")}
    assert {str(op) for op in resolve_aten_op("aten.masked_scatter.default")} == \
        {"aten.masked_scatter.default"}


@pytest.mark.parametrize(("options", "message"), [
    ({"aten_fallbacks": ["no_such_op"]}, "no ATen operator aten.no_such_op"),
    ({"aten_fallbacks": ["layer norm"]}, "not an operator name"),
    ({"mode": "fastest"}, "--compile-mode 'fastest'"),
    ({"inductor_options": {"no_such_knob": 1}}, "--compile-option no_such_knob"),
    ({"cold_warm": "yes"}, "cold_warm must be true or false"),
    ({"fullgraph": True}, "unknown option 'fullgraph'"),
])
def test_bad_options_are_one_line_usage_errors(options: dict, message: str) -> None:
    from benchbox.runners.torch_compile import TorchCompileRunner

    with pytest.raises(UsageError, match=None) as e:
        TorchCompileRunner(options=options)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_autotune_feedback_recorded_with_stand_in_choices_as_no_gemm_autotuning_runs_on_this_cpu() -> None:
    """Inductor's real choice classes (built without __init__) fed to the observer's feedback saver.

    This CPU offers no CPP GEMM template, so no operator has two candidates and the
    autotuner never benchmarks here; on CUDA it calls the same saver.
    """
    from torch._inductor.select_algorithm import (
        ExternKernelCaller,
        TritonTemplateCaller,
        get_algorithm_selector_cache,
    )

    from benchbox.runners.compile_report import CompileObserver, fallback_entries

    aten_mm, triton_mm = object.__new__(ExternKernelCaller), object.__new__(TritonTemplateCaller)
    aten_mm.name, aten_mm.description = "mm", "cublas"
    triton_mm.name, triton_mm.description = "triton_mm_3", "BLOCK_M=64"
    observer = CompileObserver()
    with observer:
        assert observer._feedback in get_algorithm_selector_cache().feedback_saver_fns
        for fn in get_algorithm_selector_cache().feedback_saver_fns:
            fn({aten_mm: 0.020, triton_mm: 0.012}, "mm", [], [aten_mm, triton_mm], dict, {})
    assert observer._feedback not in get_algorithm_selector_cache().feedback_saver_fns
    picks = [f for f in fallback_entries(observer.record, forced={}, registry=set(), device="cuda",
                                         phase="compile_cold") if f["kind"] == "autotune_choice"]
    assert len(picks) == 1
    assert picks[0]["chosen"] == "triton_mm_3 (BLOCK_M=64)" and picks[0]["chosen_kind"] == "triton_template"
    assert [a["kind"] for a in picks[0]["alternatives"]] == ["triton_template", "aten"]
    assert fallback_summary(picks) == "1 autotune pick"


def test_autotune_picks_repeated_at_every_call_site_are_grouped_with_their_count() -> None:
    from benchbox.runners.compile_report import group_autotune

    def pick(n: int, config: str, ms: float, shapes: list[list[str]]) -> dict:
        return {"op": "addmm", "input_shapes": shapes, "chosen": f"triton_mm_{n} ({config})",
                "chosen_kind": "triton_template", "chosen_ms": ms, "n_choices": 20,
                "alternatives": [{"kernel": f"k{i}", "kind": "aten", "ms": ms + i} for i in range(20)]}

    a, b = [["64", "64"]], [["128", "64"]]
    picks = [pick(3, "BLOCK_M=64", 0.03, a), pick(9, "BLOCK_M=64", 0.01, a), pick(15, "BLOCK_M=64", 0.02, a),
             pick(21, "BLOCK_M=128", 0.02, a), pick(27, "BLOCK_M=64", 0.05, b)]
    groups = group_autotune(picks)
    assert [(g["chosen"], g["count"]) for g in groups] == [
        ("triton_mm_3 (BLOCK_M=64)", 3), ("triton_mm_21 (BLOCK_M=128)", 1), ("triton_mm_27 (BLOCK_M=64)", 1)]
    assert groups[0]["chosen_ms"] == 0.02 and groups[0]["chosen_ms_range"] == [0.01, 0.03]
    assert len(groups[0]["alternatives"]) == 5
    entries = [{"kind": "autotune_choice", **g} for g in groups]
    assert fallback_summary(entries) == "5 autotune picks"
