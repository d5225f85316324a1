"""torch-compile runner: real compiles on the CPU (inductor's C++ backend), real receipts.

Compiling is slow here, so the compiles are few: the graph-breaking vector task
(cold + warm), the decision task with layer_norm forced into ATen (cold only), the
vector task without its graph break, layer_norm forced, under an impossible gate (cold
only), and the matmul task under max-autotune three times (pinned fresh, pinned reused,
unpinned with a stability compile), where the CPU autotuner chooses between inductor's
C++ GEMM template and ATen's bmm at three call sites.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchbox.errors import UsageError
from benchbox.receipts.model import decode_receipt
from benchbox.render import fallback_summary, results_table
from benchbox.run import RunConfig, run
from tests.support import REPO, one_line_exit_2

TASK = "tests.compile_tasks:factory"
MATMUL = "tests.compile_tasks:matmul_factory"


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
    """Vector task whose forward calls .item(); torch-compile mode default, cold + warm, pinned fresh."""
    tmp = tmp_path_factory.mktemp("vec")
    return _receipt(tmp / "r.json", task=TASK, runners=("torch-eager", "torch-compile"),
                    runner_options={"torch-compile": {"mode": "default", "cache_dir": str(tmp / "cache")}})


@pytest.fixture(scope="module")
def forced_receipt(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Vector task without the graph break, layer_norm forced into ATen, under an impossible gate."""
    return _receipt(tmp_path_factory.mktemp("forced") / "r.json", task=TASK, cases=("v0",),
                    runners=("torch-compile",), task_options={"graph_break": False, "fail_gate": True},
                    runner_options={"torch-compile": {"mode": "default", "cold_warm": False,
                                                      "aten_fallbacks": ["layer_norm"]}})


@pytest.fixture(scope="module")
def matmul_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The matmul task under max-autotune, three runs on one cache directory:
    ``fresh`` (pinned, first), ``reused`` (pinned, second), ``unpinned`` (pin=false with
    autotune_stability: a throw-away fresh compile, then the measured fresh compile)."""
    tmp = tmp_path_factory.mktemp("mm")
    cache = str(tmp / "cache")
    out = {}
    for name, extra in (("fresh", {}), ("reused", {}),
                        ("unpinned", {"pin": False, "autotune_stability": True})):
        out[name] = _receipt(tmp / f"{name}.json", task=MATMUL, cases=("v0",), runners=("torch-compile",),
                             samples=3, runner_options={"torch-compile": {
                                 "cold_warm": False, "cache_dir": cache, **extra}})
    return out


def _report(receipt: dict) -> dict:
    return _compiled(receipt)[0]["runner_report"]


def _picks(receipt: dict) -> list[dict]:
    return _kind(_compiled(receipt)[0], "autotune_choice")


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
    pin = rep["compile"]["pin"]
    assert pin["status"] == "fresh" and pin["enabled"] is True
    # the first run under a key compiles cold into the key's directory, then warm from it
    assert rep["compile"]["cache_dir"] == str(Path(pin["dir"]) / "inductor")
    assert Path(pin["dir"]).name == pin["key"] and Path(pin["dir"]).parent.name == "cache"


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
    assert list(row["runner_report"]["prepare_s"]) == ["cache_key", "load", "cache_lock", "compile_cold"]
    assert "layer_norm forced" in results_table(decode_receipt(receipt, "receipt"))
    # the forcing was scoped to this runner's compiles
    assert aten.native_layer_norm.default in select_decomp_table()


def test_failing_configuration_is_invalid_excluded_and_keeps_options_and_fallbacks(
        forced_receipt: dict) -> None:
    receipt = forced_receipt
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


def test_every_mode_named_in_help_is_one_torch_takes() -> None:
    from torch._inductor import list_mode_options

    from benchbox.runners import COMPILE_MODES, ENTRIES

    assert set(COMPILE_MODES) <= set(list_mode_options())
    (mode,) = [a for a in ENTRIES["torch-compile"].aliases if a.option == "mode"]
    assert mode.default in COMPILE_MODES


def test_aten_fallback_names_resolve_to_overloads() -> None:
    from benchbox.runners.compile_options import resolve_aten_op

    assert "aten.native_layer_norm.default" in {str(op) for op in resolve_aten_op("layer_norm")}
    assert {str(op) for op in resolve_aten_op("aten.masked_scatter.default")} == \
        {"aten.masked_scatter.default"}


@pytest.mark.parametrize(("options", "message"), [
    ({"aten_fallbacks": ["no_such_op"]}, "no ATen operator aten.no_such_op"),
    ({"aten_fallbacks": ["layer norm"]}, "not an operator name"),
    ({"mode": "fastest"}, "mode 'fastest'"),
    ({"inductor_options": {"no_such_knob": 1}}, "inductor option 'no_such_knob'"),
    ({"cold_warm": "yes"}, "cold_warm must be true or false"),
    ({"pin": "off"}, "pin must be true or false"),
    ({"autotune_stability": 1}, "autotune_stability must be true or false"),
    ({"cache_dir": ""}, "cache_dir must be a directory path"),
    ({"cache_dir": __file__}, "cannot hold the cache"),
    ({"cache_dir": __file__ + "/below"}, "is not a directory"),
    ({"fullgraph": True}, "unknown option 'fullgraph'"),
])
def test_bad_options_are_one_line_usage_errors(options: dict, message: str) -> None:
    from benchbox.runners.torch_compile import TorchCompileRunner

    with pytest.raises(UsageError, match=None) as e:
        TorchCompileRunner(options=options)
    assert message in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UsageError, match=None) as e:  # the check a run makes before measuring anything
        TorchCompileRunner.check_options(options)
    assert message in str(e.value)


def test_a_bad_compile_option_is_refused_before_anything_is_measured(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    line = one_line_exit_2(["run", "--runner", "torch-eager", "--runner", "torch-compile",
                            "--compile-option", "no_such_option=1", "--out", str(out)])
    assert "no_such_option" in line and not out.exists()


def test_autotune_feedback_recorded_with_stand_in_triton_choices_as_triton_templates_need_a_gpu() -> None:
    """Inductor's real choice classes (built without __init__) fed to the observer's feedback saver.

    Triton templates and cuBLAS exist only on CUDA; the CPU autotuner's real picks (C++
    GEMM template against ATen) are checked on the matmul task below.
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


# -- pinned compilation, autotune stability, fallback identity (matmul task: the CPU autotuner chooses)

def _labels(entries: list[dict]) -> list[tuple[str, str, str]]:
    from benchbox.fallbacks import kernel_label

    return sorted((e["op"], json.dumps(e["input_shapes"]), kernel_label(e["chosen"])) for e in entries
                  for _ in range(e["count"]))


def _record(receipt: dict) -> dict:
    return json.loads(Path(_report(receipt)["compile"]["pin"]["record"]).read_text())


def test_cpu_autotuner_really_chooses_at_three_call_sites(matmul_runs: dict) -> None:
    fresh = _report(matmul_runs["fresh"])
    assert fresh["compile"]["phases"]["compile_cold"]["autotuned_ops"] == 3
    picks = _picks(matmul_runs["fresh"])
    assert sum(p["count"] for p in picks) == 3
    for p in picks:
        assert p["n_choices"] == 2 and p["op"] == "bmm"
        kinds = {a["kind"] for a in p["alternatives"]}
        assert kinds == {"cpp_template", "aten"}, p["alternatives"]  # the wrapped C++ template is named
        assert p["chosen_key"] and p["chosen_key"] in {a["key"] for a in p["alternatives"]}
    assert all(_compiled(r)[0]["status"] == "valid" for r in matmul_runs.values())


def test_second_pinned_run_reuses_the_compile_and_runs_the_same_kernels(matmul_runs: dict) -> None:
    fresh, reused = _report(matmul_runs["fresh"]), _report(matmul_runs["reused"])
    pf, pr = fresh["compile"]["pin"], reused["compile"]["pin"]
    assert (pf["status"], pr["status"]) == ("fresh", "reused")
    assert pf["key"] == pr["key"] and pf["key_parts"] == pr["key_parts"]
    assert pf["picks_vs_recorded"] is None and pf["picks_generation"] == 1
    # the reused run compiled once, from the pinned caches: every graph hit, nothing was autotuned
    assert "compile_cold" not in reused["prepare_s"] and reused["prepare_s"]["compile_warm"] > 0
    assert pr["graphs"]["fx_graph_cache_hits"] >= 1 and pr["graphs"]["fx_graph_cache_misses"] == 0
    assert pr["graphs"]["autotuned_call_sites"] == 0
    assert reused["compile"]["phases"]["compile_warm"]["autotuned_ops"] == 0
    assert pr["picks_generation"] == 1 and "generation 1" in pr["picks_from"]
    assert reused["compile"]["cache_dir"] == fresh["compile"]["cache_dir"]
    # identical picks, listed from the compile that benchmarked them
    assert _labels(_picks(matmul_runs["reused"])) == _labels(_picks(matmul_runs["fresh"]))
    assert _picks(matmul_runs["reused"]) == _picks(matmul_runs["fresh"])
    assert "reused the compile of generation 1" in pr["summary"]
    assert "compile: pinned, reused" in results_table(decode_receipt(matmul_runs["reused"], "r"))


def test_unpinned_run_records_its_picks_and_compares_them_with_the_last_recorded(matmul_runs: dict) -> None:
    rep = _report(matmul_runs["unpinned"])
    pin = rep["compile"]["pin"]
    assert pin["status"] == "off" and pin["enabled"] is False
    assert pin["key"] == _report(matmul_runs["fresh"])["compile"]["pin"]["key"]
    assert Path(rep["compile"]["cache_dir"]).name.startswith("benchbox-inductor-")  # a temporary directory
    assert rep["compile"]["phases"]["compile_cold"]["autotuned_ops"] == 3
    cmp = pin["picks_vs_recorded"]
    assert cmp["compared_with_generation"] == 1 and cmp["compared_with"] == "pinned compile"
    assert cmp["sites"] == 3 and cmp["unmatched_sites"] == 0
    same = _labels(_picks(matmul_runs["unpinned"])) == _labels(_picks(matmul_runs["fresh"]))
    assert cmp["same"] is same and (cmp["changed_sites"] == 0) is same
    record = _record(matmul_runs["unpinned"])
    assert [(h["generation"], h["compile"], h["pinned"]) for h in record["history"]] == [
        (1, "compile_cold", True), (2, "compile_stability_1", False), (3, "compile_cold", False)]
    assert record["pinned"]["generation"] == 1 and pin["picks_generation"] == 3
    assert all(len(h["sites"]) == 3 for h in record["history"])


def test_autotune_stability_compares_two_fresh_compiles_by_the_autotuners_timings(matmul_runs: dict) -> None:
    from benchbox.fallbacks import kernel_label

    rep = _report(matmul_runs["unpinned"])
    assert rep["prepare_s"]["compile_stability_1"] > 0
    assert rep["compile"]["phases"]["compile_stability_1"]["autotuned_ops"] == 3
    stab = rep["compile"]["autotune_stability"]
    assert stab["compared"] == ["this run's compile_stability_1", "this run's compile_cold"]
    history = {h["generation"]: h["sites"] for h in _record(matmul_runs["unpinned"])["history"]}
    first, second = history[2], history[3]  # compile_stability_1, then compile_cold
    changed = sum(kernel_label(a["chosen"]) != kernel_label(b["chosen"]) for a, b in zip(first, second))
    assert stab["sites"] == 3 and stab["changed_sites"] == changed
    assert stab["tuned_ms_first"] == pytest.approx(sum(s["chosen_ms"] for s in first))
    assert stab["timing_ratio_unchanged"]["n"] == 3 - changed
    assert "autotuner" in stab["estimate_source"] and stab["summary"].startswith("autotune stability:")
    assert f"torch-compile {stab['summary']}" in results_table(decode_receipt(matmul_runs["unpinned"], "r"))
    assert stab["kernel_configs"] == {"kernels": 0, "changed": 0, "changed_kernels": [], "only_in_one": 0}


def test_identity_ignores_the_measurements_of_two_fresh_compiles(matmul_runs: dict) -> None:
    from benchbox.fallbacks import identity, kernel_label, probable_causes

    a, b = _picks(matmul_runs["fresh"]), _picks(matmul_runs["unpinned"])
    assert [x["chosen_ms"] for x in a] != [x["chosen_ms"] for x in b]  # measured anew
    assert [x["chosen"] for x in a] != [x["chosen"] for x in b]  # kernel numbers of another process state
    for x, y in zip(sorted(a, key=_site), sorted(b, key=_site)):
        assert (identity(x) == identity(y)) is (kernel_label(x["chosen"]) == kernel_label(y["chosen"]))
    base = _compiled(matmul_runs["fresh"])[0]["runner_report"]["fallbacks"]
    head = _compiled(matmul_runs["unpinned"])[0]["runner_report"]["fallbacks"]
    if _labels(a) == _labels(b):
        assert probable_causes(base, head) == []


def _site(e: dict) -> tuple:
    return (e["op"], json.dumps(e["input_shapes"]))


def test_a_flip_to_the_recorded_runner_up_is_named_with_its_site_count_and_time(matmul_runs: dict) -> None:
    """The head takes, at one call site, the runner-up the real autotuner recorded there."""
    import copy

    from benchbox.fallbacks import compare_picks, kernel_family, probable_causes

    base = _compiled(matmul_runs["fresh"])[0]["runner_report"]["fallbacks"]
    head = copy.deepcopy(base)
    flipped = next(f for f in head if f["kind"] == "autotune_choice")
    runner_up = flipped["alternatives"][1]
    was = flipped["chosen"]
    flipped.update(chosen=runner_up["kernel"], chosen_kind=runner_up["kind"], chosen_ms=runner_up["ms"])
    lines = probable_causes(base, head)
    expect = f"{kernel_family(was)} → {kernel_family(runner_up['kernel'])} at 1 site"
    assert len(lines) == 1 and expect in lines[0] and lines[0].startswith("bmm"), lines

    every = copy.deepcopy(base)
    for f in every:
        if f["kind"] == "autotune_choice":
            up = f["alternatives"][1]
            f.update(chosen=up["kernel"], chosen_kind=up["kind"], chosen_ms=up["ms"])
    pairs = {(kernel_family(f["chosen"]), kernel_family(g["chosen"])) for f, g in zip(base, every)
             if f["kind"] == "autotune_choice"}
    lines = probable_causes(base, every)
    assert len(lines) == len(pairs)  # one line per (from, to), call sites of every shape counted together
    assert sum(int(ln.split(" at ")[1].split()[0]) for ln in lines) == 3, lines

    sites = _record(matmul_runs["fresh"])["pinned"]["sites"]
    moved = copy.deepcopy(sites)
    alt = moved[0]["alternatives"][1]
    moved[0].update(chosen=alt["kernel"], chosen_ms=alt["ms"])
    cmp = compare_picks(sites, moved)
    assert (cmp.sites, cmp.changed_sites, len(cmp.changes)) == (3, 1, 1)
    slower = sites[0]["alternatives"][1]["ms"] - sites[0]["chosen_ms"]
    assert cmp.changes[0].delta_ms_by_first == pytest.approx(slower) and slower > 0
    assert cmp.delta_ms == pytest.approx(slower)  # both sides hold the same timings here
    assert cmp.to_dict()["estimated_delta_pct"] == pytest.approx(100 * slower / cmp.tuned_ms_first)


def test_new_aten_fallback_and_gone_graph_break_named_between_two_real_compiles(
        vector_receipt: dict, forced_receipt: dict) -> None:
    from benchbox.fallbacks import probable_causes

    base = _compiled(vector_receipt)[0]["runner_report"]["fallbacks"]
    head = _compiled(forced_receipt)[0]["runner_report"]["fallbacks"]
    lines = probable_causes(base, head)
    assert "new ATen fallback: aten.native_layer_norm (forced)" in lines, lines
    assert any(ln.startswith("graph break gone: ") and "item()" in ln for ln in lines), lines
    back = probable_causes(head, base)
    assert "ATen fallback gone: aten.native_layer_norm (forced)" in back
    assert any(ln.startswith("new graph break: ") for ln in back)
    assert probable_causes(base, base) == [] and probable_causes(head, head) == []
    assert len(lines) == 2 and probable_causes(base, head, limit=2) == lines
    assert probable_causes(base, head, limit=1) == ["and 2 more"]


def test_identity_of_a_graph_break_ignores_where_the_file_lives_and_its_line(vector_receipt: dict) -> None:
    import copy

    from benchbox.fallbacks import identity

    brk = _kind(_compiled(vector_receipt)[0], "graph_break")[0]
    moved = copy.deepcopy(brk)
    moved["where"] = [w.replace("compile_tasks.py:", "compile_tasks.py:1").replace("/", "/elsewhere/", 1)
                      for w in brk["where"]]
    moved["phase"], moved["detail"] = "compile_cold", "other text"
    assert moved["where"] != brk["where"] and identity(moved) == identity(brk)
    other = dict(brk, reason="Data-dependent branching")
    assert identity(other) != identity(brk)


def test_two_runs_using_one_key_at_once_take_turns(tmp_path: Path) -> None:
    """Two processes start together on one cache directory: one compiles, the other waits and reuses."""
    import os
    import subprocess

    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "benchbox", "run", "--task", TASK, "--runner", "torch-compile",
           "--case", "v0", "--samples", "3", "--warmup", "0", "--compile-mode", "default",
           "--runner-option", "torch-compile:cold_warm=false",
           "--runner-option", f"torch-compile:cache_dir={cache}"]
    procs = [subprocess.Popen([*cmd, "--out", str(tmp_path / f"r{i}.json")], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    reports = [_report(json.loads((tmp_path / f"r{i}.json").read_text())) for i in range(2)]
    assert sorted(r["compile"]["pin"]["status"] for r in reports) == ["fresh", "reused"]
    waited = next(r for r in reports if r["compile"]["pin"]["status"] == "reused")
    assert "cache_lock" in waited["prepare_s"]
    record = json.loads((cache / reports[0]["compile"]["pin"]["key"] / "picks.json").read_text())
    assert record["generations"] == 1 and record["pinned"]["generation"] == 1
    assert not list(cache.rglob(".*.tmp"))


def test_key_lock_excludes_another_process_until_released(tmp_path: Path) -> None:
    import subprocess

    from benchbox.runners.compile_pin import key_lock

    lock = tmp_path / "k" / "lock"
    probe = ("import fcntl, sys\nf = open(sys.argv[1], 'a+b')\n"
             "try:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
             "except BlockingIOError:\n    sys.exit(3)\n")
    with key_lock(lock):
        assert subprocess.run([sys.executable, "-c", probe, str(lock)]).returncode == 3
    assert subprocess.run([sys.executable, "-c", probe, str(lock)]).returncode == 0


def test_key_changes_with_weights_structure_shapes_and_options_and_nothing_else() -> None:
    import numpy as np

    from benchbox.runners.compile_pin import key_of
    from benchbox.runners.torch_compile import TorchCompileRunner
    from tests.compile_tasks import MatmulTask, VectorTask

    task = MatmulTask(size="tiny", dtype="float32")
    example = task.preprocess(task.parse(task.cases()[0].request))
    runner = TorchCompileRunner(options={"mode": "default"})
    parts = runner.key_parts(task, task.build_model(), example)
    key = key_of(parts)
    assert key_of(runner.key_parts(task, task.build_model(), example)) == key  # deterministic
    assert key_of(TorchCompileRunner(options={"mode": "default", "pin": False, "cache_dir": "/x"})
                  .key_parts(task, task.build_model(), example)) == key  # where and whether: not what
    model = task.build_model()
    with __import__("torch").no_grad():
        model.w1[0, 0, 0] += 1.0
    changed = runner.key_parts(task, model, example)
    assert changed["model"]["weights_sha256"] != parts["model"]["weights_sha256"]
    assert changed["model"]["structure_sha256"] == parts["model"]["structure_sha256"]
    vec = VectorTask(size="tiny", dtype="float32")
    other = runner.key_parts(vec, vec.build_model(), vec.preprocess(vec.parse(vec.cases()[0].request)))
    assert other["model"]["structure_sha256"] != parts["model"]["structure_sha256"]
    wider = runner.key_parts(task, task.build_model(), (np.zeros((4, 16, 8), np.float64),))
    assert wider["inputs"] != parts["inputs"] and key_of(wider) != key
    tuned = TorchCompileRunner(options={"mode": "max-autotune"}).key_parts(task, task.build_model(), example)
    assert tuned["compile"]["options"]["max_autotune"] is True and key_of(tuned) != key
    forced = TorchCompileRunner(options={"mode": "default", "aten_fallbacks": ["layer_norm"]})
    assert key_of(forced.key_parts(task, task.build_model(), example)) != key
    assert parts["device"]["type"] == "cpu" and parts["device"]["threads"] >= 1
    assert parts["versions"]["torch"] == __import__("torch").__version__


def test_unreadable_picks_record_starts_anew_and_says_why(tmp_path: Path) -> None:
    from benchbox.runners.compile_pin import PinStore, add_fresh

    store = PinStore(tmp_path, "k" * 64, {"a": 1})
    store.dir.mkdir(parents=True)
    store.record_path.write_text('{"format": 1, "key": ')
    doc = store.load()
    assert doc["history"] == [] and doc["pinned"] is None and "JSONDecodeError" in store.unreadable
    store.inductor_dir.mkdir()
    add_fresh(doc, "compile_cold", [{"op": "bmm", "chosen": "bmm"}], {}, pinned=True)
    store.save(doc)
    again = PinStore(tmp_path, "k" * 64, {"a": 1})
    assert again.pinned(again.load())["generation"] == 1 and again.unreadable is None
    other_key = PinStore(tmp_path, "j" * 64, {})
    assert other_key.pinned(again.load()) is None  # that key's caches are absent


def test_triton_kernel_configs_read_and_compared_from_stand_in_best_config_files_as_triton_needs_a_gpu(
        tmp_path: Path) -> None:
    """``.best_config`` files laid out as inductor writes them on CUDA (no Triton kernels exist here)."""
    from benchbox.fallbacks import compare_kernel_configs
    from benchbox.runners.compile_pin import triton_best_configs

    def write(root: Path, name: str, warps: int, ms: float) -> None:
        (root / "ab").mkdir(parents=True, exist_ok=True)
        (root / "ab" / f"{name}.best_config").write_text(json.dumps(
            {"XBLOCK": 128, "num_warps": warps, "num_stages": 1, "configs_hash": "h",
             "found_by_coordesc": True, "time_taken_ms": ms, "triton_cache_hash": "t"}))

    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "k1", 4, 0.1), write(a, "k2", 8, 0.2), write(b, "k1", 4, 0.3), write(b, "k2", 4, 0.2)
    write(b, "k3", 2, 0.1)
    ca, cb = triton_best_configs(a), triton_best_configs(b)
    assert set(ca) == {"ab/k1.best_config", "ab/k2.best_config"}
    assert "time_taken_ms" not in ca["ab/k1.best_config"]
    assert compare_kernel_configs(ca, cb) == {"kernels": 2, "changed": 1,
                                              "changed_kernels": ["ab/k2.best_config"], "only_in_one": 1}
    assert triton_best_configs(tmp_path / "absent") == {}


def test_fallbacks_module_never_imports_torch() -> None:
    import subprocess

    code = "import sys, benchbox.fallbacks; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


def test_inductor_settings_outside_the_key_make_a_pinned_run_partly_reused_and_say_so(tmp_path: Path) -> None:
    """An inductor setting changed around the runner (not among its options) changes inductor's own
    cache key but not benchbox's: the pinned compile is found, its graph misses, the report says why."""
    from torch._inductor import config as inductor_config

    def once(name: str) -> dict:
        return _receipt(tmp_path / f"{name}.json", task=TASK, cases=("v0",), runners=("torch-compile",),
                        samples=3, task_options={"graph_break": False},
                        runner_options={"torch-compile": {"mode": "default", "cold_warm": False,
                                                          "cache_dir": str(tmp_path / "cache")}})

    first = once("first")
    with inductor_config.patch({"max_fusion_size": 7}):
        second = once("second")
    p1, p2 = _report(first)["compile"]["pin"], _report(second)["compile"]["pin"]
    assert p1["status"] == "fresh" and p2["status"] == "partly_reused" and p1["key"] == p2["key"]
    assert p2["graphs"]["fx_graph_cache_misses"] >= 1 and p2["graphs"]["fx_graph_cache_hits"] == 0
    assert "anew under the pinned key" in p2["note"] and "PARTLY reused" in p2["summary"]
    assert _compiled(second)[0]["status"] == "valid"


def test_unusable_cache_dir_refused_in_one_line_before_anything_is_measured(tmp_path: Path) -> None:
    import os
    import subprocess

    blocker = tmp_path / "file"
    blocker.write_text("")
    r = subprocess.run([sys.executable, "-m", "benchbox", "run", "--runner", "torch-eager", "--runner",
                        "torch-compile", "--runner-option", f"torch-compile:cache_dir={blocker}/cache",
                        "--out", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "cache_dir" in r.stderr and "is not a directory" in r.stderr
    assert not (tmp_path / "r.json").exists()
