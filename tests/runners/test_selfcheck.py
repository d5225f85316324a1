"""The self-check's verdict logic, on constructed receipts.

A real self-check needs a GPU the TensorRT runner supports, which this machine lacks
(``tests/runners/test_tensorrt.py`` runs the command here and checks it says so). The receipts
below are constructed in the shape ``benchbox run`` writes, to prove each check can fail.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from benchbox import selfcheck as sc
from benchbox.errors import UsageError


def _row(case: str, p50: int, **extra: Any) -> dict[str, Any]:
    return {"runner": "tensorrt", "case": case, "status": "valid", "reasons": [],
            "accuracy": {"passed": True, "gates": [{"name": "prob_max_abs", "value": 2e-5, "passed": True}]},
            "summary": {"n": 100, "p50_ns": p50}, "clock_used": "host",
            "runner_report": REPORT, **extra}


REPORT: dict[str, Any] = {
    "flavour": "tensorrt_rtx", "flavour_version": "1.7.1.116",
    "engine_report": {"source": "engine_inspector", "engine_bytes": 4_000_000, "num_layers": 2,
                      "precisions": {"FP32": 2},
                      "layers": [{"name": "a", "type": "kgen", "precision": "FP32"},
                                 {"name": "b", "type": "gemm", "precision": "FP32"}]},
    "build": {"options": {"compute_capabilities": ["current"], "tf32": False}},
    "prepare_s": {"build": 1.0, "engine_load": 0.1, "jit_warmup": 0.8},
    "runtime": {"runtime_cache": {"enabled": True, "found": False, "loaded_bytes": 0, "saved_bytes": 5000}},
    "cuda_graphs": {"mode": "rtx_whole_graph_capture", "used": "rtx_whole_graph_capture", "why": "default",
                    "warnings": []},
    "layer_profile": {"runs": 10, "layers_timed": 2, "total_ms_median": 0.2,
                      "top_layers": [{"name": "b", "precision": "FP32"}]},
}


def receipts() -> dict[str, dict[str, Any]]:
    device = {"clock_used": "device", "clock_cross_check": {"violations": 0, "samples": 100,
                                                            "host_span": "h2d..d2h"}}
    return {
        "public_task_call_wall": {"results": [_row("invoice", 900_000), _row("video", 2_000_000)]},
        "model_io_wall": {"results": [_row("invoice", 400_000), _row("video", 500_000)]},
        **{name: {"results": [_row("invoice", 100_000, **device), _row("video", 120_000, **device)]}
           for name in sc.DEVICE_CONTRACTS},
    }


def statuses(checks: list[sc.Check]) -> dict[str, str]:
    return {c.name: c.status for c in checks}


def test_a_good_run_passes_every_check() -> None:
    executed, reason, checks = sc.check_flavour(receipts(), "tensorrt_rtx")
    assert executed and reason == ""
    assert set(statuses(checks).values()) == {"passed"}, statuses(checks)
    assert len(checks) == 11


def test_each_check_fails_on_what_it_guards() -> None:
    r = receipts()
    r["model_io_wall"]["results"][1]["summary"]["p50_ns"] = 2_500_000
    assert "video: p50 2.500 ms ≥ 2.000 ms" in sc.check_region_order(r).detail
    assert sc.check_region_order(r).status == "failed"

    r = receipts()
    r["device_span"]["results"][0]["clock_cross_check"]["violations"] = 3
    assert sc.check_clock(r).status == "failed" and "3 of 100 samples" in sc.check_clock(r).detail
    r = receipts()
    r["device_compute"]["results"][0].update(clock_used="host", clock_note="no CUDA device")
    assert sc.check_clock(r).status == "failed" and "host clock" in sc.check_clock(r).detail

    r = receipts()
    r["model_io_wall"]["results"][0]["accuracy"] = {"passed": False, "gates": []}
    r["model_io_wall"]["results"][0]["reasons"] = ["accuracy gate prob_max_abs failed: value 0.01"]
    assert sc.check_accuracy(r).status == "failed"

    r = receipts()
    r["device_span"]["results"][1]["status"] = "failed"
    assert sc.check_executed(r).status == "failed"

    rep = copy.deepcopy(REPORT)
    rep["engine_report"]["layers"][1] = {"name": "b", "type": "gemm", "precision": None,
                                         "unparsed_output_types": ["{'Datatype': 'Float4E2M1'}"]}
    check = sc.check_inspector(rep)
    assert check.status == "failed" and "1 of 2 layers without a precision" in check.detail
    assert "Float4E2M1" in check.detail  # what the parser has to learn, for the bug report
    rep["engine_report"] = {"source": "builder_log", "inspector_error": "RuntimeError: no inspector"}
    assert sc.check_inspector(rep).detail == "RuntimeError: no inspector"

    rep = copy.deepcopy(REPORT)
    del rep["prepare_s"]["jit_warmup"]
    rep["runtime"]["runtime_cache"]["saved_bytes"] = 0
    rep["cuda_graphs"]["warnings"] = ["CUDA graph capture failed, running without a graph: ..."]
    rep["layer_profile"] = {"error": "RuntimeError: profiler"}
    got = statuses(sc.check_preparation(rep, "tensorrt_rtx"))
    assert got == {"TF32 off for float32": "passed",
                   "jit_warmup is a timed preparation phase": "failed", "RTX runtime cache": "failed",
                   "CUDA graphs": "warning", "per-layer profile (diagnostic)": "warning"}
    assert "RTX runtime cache" not in statuses(sc.check_preparation(rep, "tensorrt"))

    # TF32: float32 layers must compute true float32, as the torch runners do
    rep = copy.deepcopy(REPORT)
    assert statuses(sc.check_preparation(rep, "tensorrt_rtx"))["TF32 off for float32"] == "passed"
    rep["build"]["options"]["tf32"] = True
    tf32 = {c.name: c for c in sc.check_preparation(rep, "tensorrt_rtx")}["TF32 off for float32"]
    assert tf32.status == "failed" and "not asked for" in tf32.detail
    rep["options"] = {"tf32": True}  # asked for: recorded, not like for like with the torch runners
    assert statuses(sc.check_preparation(rep, "tensorrt_rtx"))["TF32 off for float32"] == "warning"
    del rep["build"]["options"]["tf32"]
    assert statuses(sc.check_preparation(rep, "tensorrt_rtx"))["TF32 off for float32"] == "failed"
    # a bfloat16 model has no float32 matmuls for TF32 to change: no check
    assert "TF32 off for float32" not in statuses(sc.check_preparation(rep, "tensorrt_rtx", "bfloat16"))


def test_an_unavailable_runner_is_not_executed_and_claims_nothing() -> None:
    report = {"flavour": "tensorrt_rtx", "unavailable": "no CUDA device is visible to torch",
              "engine_report": {"source": "builder_log", "engine_bytes": 4_366_452, "num_layers": 39},
              "build": {"options": {"compute_capabilities": ["8.9"], "tf32": False}}}
    rows = {"public_task_call_wall": {"results": [{"case": "invoice", "status": "failed",
                                                   "runner_report": report}]}}
    executed, reason, checks = sc.check_flavour(rows, "tensorrt_rtx")
    assert not executed and reason == "no CUDA device is visible to torch"
    assert statuses(checks) == {"build (no GPU needed)": "passed", "execution checks": "not_run"}
    broken = {**report, "build_error": "TensorRTBuildError: the engine build failed: out of memory"}
    rows["public_task_call_wall"]["results"][0]["runner_report"] = broken
    assert statuses(sc.check_flavour(rows, "tensorrt_rtx")[2])["build (no GPU needed)"] == "failed"


def _outcome(executed: bool, *states: str) -> sc.FlavourOutcome:
    return sc.FlavourOutcome("tensorrt_rtx", "1.7", executed, "" if executed else "no GPU", (),
                             tuple(sc.Check(f"c{i}", s) for i, s in enumerate(states)))


@pytest.mark.parametrize(("outcomes", "status", "code"), [
    ([_outcome(True, "passed", "warning")], "passed", 0),
    ([_outcome(True, "passed", "failed")], "failed", 1),
    ([_outcome(False, "passed", "not_run")], "not_executed", 3),
    ([_outcome(False, "failed", "not_run")], "failed", 1),
    ([_outcome(True, "passed"), _outcome(False, "passed", "not_run")], "passed", 0),
    ([], "not_executed", 3),
])
def test_verdict_status_and_exit_code(outcomes: list[sc.FlavourOutcome], status: str, code: int) -> None:
    result = sc.SelfCheckResult(sc.SelfCheckConfig(), tuple(outcomes), Path("."), Path("verdict.txt"))
    assert result.status == status and result.exit_code == code
    text = result.verdict_text()
    assert text.splitlines()[1].startswith(f"verdict: {status.upper().replace('_', ' ')}")


def test_bad_selfcheck_options_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="^flavours: 'onnx' is not one of"):
        sc.run_selfcheck(sc.SelfCheckConfig(flavours=("onnx",), out_dir=tmp_path))
    with pytest.raises(UsageError, match="covers tensorrt"):
        sc.run_selfcheck(sc.SelfCheckConfig(runner="torch-eager", out_dir=tmp_path))
    with pytest.raises(UsageError, match="^samples: must be ≥ 1"):
        sc.run_selfcheck(sc.SelfCheckConfig(samples=0, out_dir=tmp_path))
    with pytest.raises(UsageError, match="^warmup: must be ≥ 0"):
        sc.run_selfcheck(sc.SelfCheckConfig(warmup=-1, out_dir=tmp_path))
