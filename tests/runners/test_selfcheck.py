"""The self-check's verdict logic, on constructed receipts and stand-ins.

A real self-check needs a GPU the TensorRT runner supports, which this machine lacks
(``tests/runners/test_tensorrt.py`` runs the command here and checks it says so). The receipts
below are constructed in the shape ``benchbox run`` writes, to prove each check can fail; the
timings in them are recorded-format stand-ins, never measurements. The null-work engine is
built for real (TensorRT for RTX, where installed); only its timings are stand-ins. trtexec is
not installed here: a stand-in script on PATH prints output in trtexec's format.
"""

from __future__ import annotations

import copy
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchbox import selfcheck as sc
from benchbox import stats
from benchbox.errors import UsageError
from benchbox.receipts.model import Receipt, decode_receipt
from benchbox.selfcheck import trtexec
from benchbox.selfcheck.facts import TensorRTFacts
from benchbox.tasks import Case, Task
from tests.support import GOLDEN

GOLDEN_DOC = json.loads(GOLDEN.read_text())

#: the device clock's floor and multiple, as a calibration records them
CALIBRATION = {"floors": {"host": 30_000, "device": 4_000}, "floor_multiple": 3.0}


def _row(case: str, p50: int, **extra: Any) -> dict[str, Any]:
    return {"runner": "tensorrt", "case": case, "status": "valid", "reasons": [],
            "accuracy": {"passed": True, "gates": [{"name": "prob_max_abs", "value": 2e-5, "passed": True}]},
            "summary": {"n": 100, "p50_ns": p50}, "clock_used": "host",
            "runner_report": REPORT, **extra}


REPORT: dict[str, Any] = {
    "flavour": "tensorrt_rtx", "flavour_version": "1.7.1.116",
    "network": {"layer_types": {"CONSTANT": 4, "MATRIX_MULTIPLY": 2, "SOFTMAX": 1}},
    "engine_report": {"source": "engine_inspector", "engine_bytes": 4_000_000, "num_layers": 2,
                      "precisions": {"FP32": 2},
                      "layers": [{"name": "a", "type": "kgen", "precision": "FP32"},
                                 {"name": "b", "type": "gemm", "precision": "FP32"}]},
    "build": {"options": {"compute_capabilities": ["current"], "tf32": False}},
    "tf32": {"matmul": "ieee", "conv": "ieee", "source": "the TF32 builder flag, read back"},
    "prepare_s": {"build": 1.0, "engine_load": 0.1, "jit_warmup": 0.8},
    "runtime": {"runtime_cache": {"enabled": True, "found": False, "loaded_bytes": 0, "saved_bytes": 5000}},
    "cuda_graphs": {"mode": "rtx_whole_graph_capture", "used": "rtx_whole_graph_capture", "why": "default",
                    "warnings": []},
    "layer_profile": {"runs": 10, "layers_timed": 2, "total_ms_median": 0.2,
                      "top_layers": [{"name": "b", "precision": "FP32"}]},
}


def _typed_row(row: dict[str, Any]) -> dict[str, Any]:
    """A whole result row around the given fields: samples all at the given p50, stats from them."""
    out = {k: v for k, v in copy.deepcopy(GOLDEN_DOC["results"][0]).items()
           if k not in ("load", "stop_reason", "steady_state", "clock_cross_check", "process_probe_ns")}
    out.update({"runner": "tensorrt", "reasons": [], "accuracy": None, "clock_used": "host",
                **copy.deepcopy(row)})
    summary = row.get("summary") or {"n": 0}
    samples = [summary["p50_ns"]] * summary["n"] if summary.get("p50_ns") is not None else []
    out.update(samples_ns=samples, round_sizes=[len(samples)], round_process=[0], stages_ns={},
               summary=stats.summarize(samples) if samples else {"n": 0})
    return out


def typed(docs: dict[str, dict[str, Any]]) -> dict[str, Receipt]:
    """The constructed receipts as a run leaves them: whole, through the decoder."""
    out = {}
    for name, doc in docs.items():
        whole = {**copy.deepcopy(GOLDEN_DOC), "results": [_typed_row(r) for r in doc["results"]]}
        if "calibration" in doc:
            whole["calibration"] = copy.deepcopy(doc["calibration"])
        out[name] = decode_receipt(whole, name)
    return out


def facts(report: dict[str, Any]) -> TensorRTFacts:
    """A runner report's TensorRT part, decoded as the self-check reads it."""
    return TensorRTFacts.of(report)


def receipts(report: dict[str, Any] | None = None) -> dict[str, Receipt]:
    return typed(docs(report))


def docs(report: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    rep = report or REPORT
    device = {"clock_used": "device", "clock_cross_check": {"violations": 0, "samples": 100,
                                                            "host_span": "h2d..d2h"}}
    return {
        "public_task_call_wall": {"results": [_row("invoice", 900_000, runner_report=rep),
                                              _row("video", 2_000_000, runner_report=rep)]},
        "model_io_wall": {"results": [_row("invoice", 400_000, runner_report=rep),
                                      _row("video", 500_000, runner_report=rep)]},
        **{name: {"calibration": CALIBRATION,
                  "results": [_row("invoice", 180_000, runner_report=rep, **device),
                              _row("video", 190_000, runner_report=rep, **device)]}
           for name in sc.DEVICE_CONTRACTS},
    }


def statuses(checks: list[sc.Check]) -> dict[str, str]:
    return {c.name: c.status for c in checks}


def test_a_good_run_passes_every_check() -> None:
    executed, reason, checks = sc.check_run(receipts(), "tensorrt_rtx")
    assert executed and reason == ""
    assert set(statuses(checks).values()) == {"passed"}, statuses(checks)
    assert len(checks) == 12


def test_each_check_fails_on_what_it_guards() -> None:
    r = docs()
    r["model_io_wall"]["results"][1]["summary"]["p50_ns"] = 2_500_000
    assert "video: p50 2.500 ms ≥ 2.000 ms" in sc.check_region_order(typed(r)).detail
    assert sc.check_region_order(typed(r)).status == "failed"

    r = docs()
    r["device_span"]["results"][0]["clock_cross_check"]["violations"] = 3
    check = sc.check_clock(typed(r))
    assert check.status == "failed" and "3 of 100 samples" in check.detail
    r = docs()
    r["device_compute"]["results"][0].update(clock_used="host", clock_note="no CUDA device")
    assert sc.check_clock(typed(r)).status == "failed" and "host clock" in sc.check_clock(typed(r)).detail

    r = docs()
    r["model_io_wall"]["results"][0]["accuracy"] = {"passed": False, "gates": []}
    r["model_io_wall"]["results"][0]["status"] = "invalid"
    r["model_io_wall"]["results"][0]["reasons"] = ["accuracy gate prob_max_abs failed: value 0.01"]
    assert sc.check_accuracy(typed(r)).status == "failed"

    r = docs()
    r["device_span"]["results"][1]["status"] = "failed"
    assert sc.check_executed(typed(r)).status == "failed"

    rep = copy.deepcopy(REPORT)
    rep["engine_report"]["layers"][1] = {"name": "b", "type": "gemm", "precision": None,
                                         "unparsed_output_types": ["{'Datatype': 'Float4E2M1'}"]}
    check = sc.check_inspector(facts(rep))
    assert check.status == "failed" and "1 of 2 layers without a precision" in check.detail
    assert "Float4E2M1" in check.detail  # what the parser has to learn, for the bug report
    rep["engine_report"] = {"source": "builder_log", "inspector_error": "RuntimeError: no inspector"}
    assert sc.check_inspector(facts(rep)).detail == "RuntimeError: no inspector"

    rep = copy.deepcopy(REPORT)
    del rep["prepare_s"]["jit_warmup"]
    rep["runtime"]["runtime_cache"]["saved_bytes"] = 0
    rep["cuda_graphs"]["warnings"] = ["CUDA graph capture failed, running without a graph: ..."]
    rep["layer_profile"] = {"error": "RuntimeError: profiler"}
    got = statuses(sc.check_preparation(facts(rep), "tensorrt_rtx"))
    assert got == {"TF32 off for float32": "passed",
                   "jit_warmup is a timed preparation phase": "failed", "RTX runtime cache": "failed",
                   "CUDA graphs": "warning", "per-layer profile (diagnostic)": "warning"}
    assert "RTX runtime cache" not in statuses(sc.check_preparation(facts(rep), "tensorrt"))


def test_tf32_must_be_off_in_matmuls_and_convolutions_for_float32() -> None:
    name = "TF32 off for float32"
    rep = copy.deepcopy(REPORT)
    assert statuses(sc.check_preparation(facts(rep), "tensorrt_rtx"))[name] == "passed"
    rep["tf32"]["conv"] = "tf32"
    tf32 = {c.name: c for c in sc.check_preparation(facts(rep), "tensorrt_rtx")}[name]
    assert tf32.status == "failed" and tf32.detail.startswith("on in conv, not asked for")
    rep["options"] = {"tf32": True}  # asked for: recorded, not like for like with true-float32 runners
    assert statuses(sc.check_preparation(facts(rep), "tensorrt_rtx"))[name] == "warning"
    del rep["tf32"]
    assert statuses(sc.check_preparation(facts(rep), "tensorrt_rtx"))[name] == "failed"
    # a bfloat16 model has no float32 matmuls for TF32 to change: no check
    assert name not in statuses(sc.check_preparation(facts(rep), "tensorrt_rtx", "bfloat16"))


# -- the timing sanity check ---------------------------------------------------------------------


def test_timing_sanity_passes_when_the_device_clock_matches_tensorrts_layer_times_on_recorded_numbers(
        ) -> None:
    check = sc.check_timing(receipts(), facts(REPORT))
    assert check.status == "passed"
    assert check.detail == ("invoice: device_compute p50 180.0 µs is 0.90× TensorRT's per-layer total "
                            "200.0 µs (expected 0.5×..1.5×)")


@pytest.mark.parametrize(("p50", "verdict"), [(5_000, "failed"), (99_000, "failed"),
                                              (100_000, "passed"), (300_000, "passed"), (301_000, "failed")])
def test_timing_sanity_fails_a_region_that_brackets_no_work_on_recorded_numbers(p50: int,
                                                                               verdict: str) -> None:
    r = docs()
    r["device_compute"]["results"][0]["summary"]["p50_ns"] = p50
    check = sc.check_timing(typed(r), facts(REPORT))
    assert check.status == verdict, check.detail
    if verdict == "failed":
        assert check.detail.endswith("the device-clock region does not bracket the engine's work")


def test_timing_sanity_needs_a_profile_and_resolvable_work_on_recorded_numbers() -> None:
    rep = copy.deepcopy(REPORT)
    rep["layer_profile"] = {"error": "RuntimeError: profiler"}
    assert sc.check_timing(receipts(rep), facts(rep)).status == "failed"
    rep["layer_profile"] = {"runs": 10, "layers_timed": 2, "total_ms_median": 0.010}  # 10 µs < 3 × 4 µs
    check = sc.check_timing(receipts(rep), facts(rep))
    assert check.status == "failed" and "under 3× the device clock's floor (4.0 µs)" in check.detail
    assert sc.check_timing({}, facts(rep)).status == "not_run"


class NullWork(Task):
    """A task whose model returns its input: the network computes nothing."""

    name = "null-work"
    input_names = ("x",)
    output_names = ("y",)

    def parse(self, request: bytes) -> bytes:
        return request

    def preprocess(self, request: bytes) -> tuple[np.ndarray, ...]:
        return (np.zeros((1, 256), np.float32),)

    def reduce(self, outputs: dict[str, np.ndarray], request: Any) -> Any:
        return outputs["y"]

    def answer(self, reduced: Any, request: Any) -> Any:
        return {}

    def serialize(self, answer: Any) -> bytes:
        return b"{}"

    def cases(self) -> list[Case]:
        return [Case("zeros", b"{}")]

    def build_model(self) -> Any:
        import torch

        class Identity(torch.nn.Module):
            def forward(self, x: Any) -> tuple[Any]:
                return (x,)

        return Identity().eval()


def test_a_null_work_engine_fails_the_timing_sanity_check_built_for_real_with_stand_in_timings(
        tmp_path: Path) -> None:
    pytest.importorskip("tensorrt_rtx_bindings", reason="the null-work engine is built with TensorRT for RTX")
    from benchbox.harness import PhaseTimer
    from benchbox.runners.tensorrt import TensorRTRunner

    runner = TensorRTRunner("cpu", {"cache_dir": str(tmp_path), "compute_capabilities": "8.9"})
    task = NullWork()
    report = runner.gather_facts(task, task.preprocess(b"{}"), PhaseTimer())
    assert report["engine_report"]["engine_bytes"] > 0  # a real engine, built here
    assert report["network"]["layer_types"] == {"IDENTITY": 1}
    # stand-in timings that agree with each other: agreement alone must not pass an engine that
    # does no work
    report = {**report, "layer_profile": {"runs": 10, "layers_timed": 1, "total_ms_median": 0.2}}
    check = sc.check_timing(receipts(report), facts(report))
    assert check.status == "failed"
    assert check.detail.startswith("the network computes nothing (layer types: IDENTITY): a null-work engine")


# -- dynamic shapes, graphs off -------------------------------------------------------------------


def test_dynamic_and_no_graph_checks() -> None:
    rep = copy.deepcopy(REPORT)
    rep["build"]["options"]["optimization_profiles"] = [{"input": "tokens", "min": [1, 1], "max": [1, 128]}]
    rep["jit_warmup"] = {"calls": 2, "shapes": [{"tokens": [1, 1]}, {"tokens": [1, 128]}]}
    rep["runtime"]["dynamic_shapes_kernel_specialization_strategy"] = "EAGER"
    assert sc.check_dynamic(facts(rep), "tensorrt_rtx").status == "passed"
    rep["runtime"]["dynamic_shapes_kernel_specialization_strategy"] = "LAZY"
    assert "not EAGER" in sc.check_dynamic(facts(rep), "tensorrt_rtx").detail
    assert sc.check_dynamic(facts(rep), "tensorrt").status == "passed"  # full TensorRT has no such strategy
    rep["jit_warmup"]["shapes"] = [{"tokens": [1, 128]}]
    assert sc.check_dynamic(facts(rep), "tensorrt").status == "failed"
    rep["build"]["options"]["optimization_profiles"] = []
    assert "no optimization profile" in sc.check_dynamic(facts(rep), "tensorrt").detail

    rep = copy.deepcopy(REPORT)
    rep["policy_applied"] = {"cuda_graphs_allowed": False, "changed": []}
    rep["cuda_graphs"] = {"mode": "off", "used": "off", "why": "the contract's policy.cuda_graphs = false"}
    assert sc.check_no_graphs(facts(rep)).status == "passed"
    rep["cuda_graphs"]["used"] = "rtx_whole_graph_capture"
    assert sc.check_no_graphs(facts(rep)).status == "failed"
    executed, _, checks = sc.check_run(receipts(rep), "tensorrt_rtx", "no_graphs")
    assert executed and statuses(checks)["CUDA graphs off under cuda_graphs = false"] == "failed"


def test_an_unavailable_runner_is_not_executed_and_claims_nothing() -> None:
    report = {"flavour": "tensorrt_rtx", "unavailable": "no CUDA device is visible to torch",
              "engine_report": {"source": "builder_log", "engine_bytes": 4_366_452, "num_layers": 39},
              "build": {"options": {"compute_capabilities": ["8.9"], "tf32": False}}}
    rows = {"public_task_call_wall": {"results": [{"case": "invoice", "status": "failed",
                                                   "runner_report": report}]}}
    for kind in ("fixed", "dynamic", "no_graphs"):
        executed, reason, checks = sc.check_run(typed(rows), "tensorrt_rtx", kind)
        assert not executed and reason == "no CUDA device is visible to torch"
        assert statuses(checks) == {"build (no GPU needed)": "passed", "execution checks": "not_run"}
    broken = {**report, "build_error": "TensorRTBuildError: the engine build failed: out of memory"}
    rows["public_task_call_wall"]["results"][0]["runner_report"] = broken
    assert statuses(sc.check_run(typed(rows), "tensorrt_rtx")[2])["build (no GPU needed)"] == "failed"


# -- trtexec ----------------------------------------------------------------------------------------

#: the summary lines trtexec prints (format of TensorRT 10's trtexec; the numbers are made up)
TRTEXEC_OUTPUT = """&&&& RUNNING TensorRT.trtexec [TensorRT v100300] # trtexec --loadEngine=x.engine
[I] TensorRT version: 10.3.0
[I] === Performance summary ===
[I] Throughput: 5012.3 qps
[I] Latency: min = 0.19 ms, max = 0.31 ms, mean = 0.2 ms, median = 0.199 ms, percentile(90%) = 0.21 ms
[I] Enqueue Time: min = 0.002 ms, max = 0.02 ms, mean = 0.003 ms, median = 0.003 ms
[I] GPU Compute Time: min = 0.18 ms, max = 0.3 ms, mean = 0.19 ms, median = {median} ms, \
percentile(90%) = 0.2 ms, percentile(95%) = 0.21 ms, percentile(99%) = 0.25 ms
&&&& PASSED TensorRT.trtexec [TensorRT v100300]
"""


def test_trtexec_output_is_parsed() -> None:
    parsed = trtexec.parse_output(TRTEXEC_OUTPUT.format(median="0.185"))
    assert parsed == {"gpu_compute_ms": {"min": 0.18, "max": 0.3, "mean": 0.19, "median": 0.185},
                      "version": "10.3.0"}
    assert trtexec.parse_output("[E] Error[1]: no engine") is None


def _stand_in_trtexec(bin_dir: Path, median: str, exit_code: int = 0) -> None:
    """A stand-in ``trtexec`` on PATH: prints trtexec-format output and records its arguments."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "trtexec"
    script.write_text(f"#!{sys.executable}\nimport sys\n"
                      f"open({str(bin_dir / 'args')!r}, 'w').write(' '.join(sys.argv[1:]))\n"
                      f"print({TRTEXEC_OUTPUT.format(median=median)!r})\nsys.exit({exit_code})\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize(("median", "status"), [("0.185", "passed"), ("0.1", "warning"), ("0.3", "warning")])
def test_trtexec_median_beside_device_throughput_on_a_stand_in_trtexec_script(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, median: str, status: str) -> None:
    bin_dir = tmp_path / "bin"
    _stand_in_trtexec(bin_dir, median)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    engine = tmp_path / "e.engine"
    engine.write_bytes(b"stand-in engine bytes")
    report = {**REPORT, "flavour": "tensorrt", "build": {"cache": {"path": str(engine)}}}
    check = trtexec.compare(receipts(report), facts(report), "tensorrt", "cuda:1", tmp_path / "trtexec.log")
    assert check.status == status, check.detail
    assert (bin_dir / "args").read_text() == (f"--loadEngine={engine} --useCudaGraph --noDataTransfers "
                                              "--useSpinWait --warmUp=500 --duration=3 --device=1")
    ratio = 180_000 / (float(median) * 1e6)
    assert f"trtexec 10.3.0 GPU compute median {float(median) * 1e3:.1f} µs: {ratio:.2f}×" in check.detail
    assert check.detail.startswith("FLAGGED: " if status == "warning" else "invoice: device_throughput")
    assert "GPU Compute Time" in (tmp_path / "trtexec.log").read_text()


def test_trtexec_is_not_run_where_it_cannot_be_on_a_stand_in_trtexec_script(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = tmp_path / "e.engine"
    engine.write_bytes(b"x")
    report = {**REPORT, "build": {"cache": {"path": str(engine)}}}
    log = tmp_path / "t.log"
    none = trtexec.compare(receipts(report), facts(report), "tensorrt", "cuda", log, which=lambda name: None)
    assert (none.status, none.detail) == ("not_run", "trtexec is not on PATH")
    bin_dir = tmp_path / "bin"
    _stand_in_trtexec(bin_dir, "0.2", exit_code=1)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    rtx = trtexec.compare(receipts(report), facts(report), "tensorrt_rtx", "cuda", log)
    assert rtx.status == "not_run" and "full TensorRT engines" in rtx.detail
    failed = trtexec.compare(receipts(report), facts(report), "tensorrt", "cuda", log)
    assert failed.status == "warning" and failed.detail.startswith("trtexec exited 1")


# -- the runs and the verdict -----------------------------------------------------------------------


def test_runs_by_default_fixed_float32_and_bfloat16_a_dynamic_shape_run_and_one_without_graphs(
        tmp_path: Path) -> None:
    from benchbox.contracts import load_contract

    path = sc.write_no_graphs_contract(tmp_path)
    contract = load_contract(str(path))
    assert contract.name == sc.NO_GRAPHS and contract.policy.cuda_graphs is False
    assert contract.stages == load_contract("device_compute").stages
    plans = sc.plan_runs(sc.SelfCheckConfig(), ("public_task_call_wall", "device_compute"), str(path))
    assert [(p.kind, p.dtype) for p in plans] == [("fixed", "float32"), ("fixed", "bfloat16"),
                                                   ("dynamic", "float32"), ("no_graphs", "float32")]
    assert plans[2].task_options == (("dynamic_tokens", True),) and plans[3].contracts == (str(path),)


def _outcome(executed: bool, *states: str) -> sc.FlavourOutcome:
    plan = sc.RunPlan("float32", "float32, fixed shapes", "fixed", "float32", ("device_compute",))
    run = sc.CheckedRun(plan, executed, "" if executed else "no GPU", (),
                        tuple(sc.Check(f"c{i}", s) for i, s in enumerate(states)))
    return sc.FlavourOutcome("tensorrt_rtx", "1.7", (run,))


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
    for o in outcomes:  # each run says plainly whether it executed
        assert "float32, fixed shapes [device_compute]: " + ("executed" if o.executed else
                                                             "not executed: no GPU") in text


def test_bad_selfcheck_options_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="^flavours: 'onnx' is not one of"):
        sc.run_selfcheck(sc.SelfCheckConfig(flavours=("onnx",), out_dir=tmp_path))
    with pytest.raises(UsageError, match="covers tensorrt"):
        sc.run_selfcheck(sc.SelfCheckConfig(runner="torch-eager", out_dir=tmp_path))
    with pytest.raises(UsageError, match="^samples: must be ≥ 1"):
        sc.run_selfcheck(sc.SelfCheckConfig(samples=0, out_dir=tmp_path))
    with pytest.raises(UsageError, match="^warmup: must be ≥ 0"):
        sc.run_selfcheck(sc.SelfCheckConfig(warmup=-1, out_dir=tmp_path))
    with pytest.raises(UsageError, match="^dtypes: 'float64' is not one of"):
        sc.run_selfcheck(sc.SelfCheckConfig(dtypes=("float64",), out_dir=tmp_path))
    with pytest.raises(UsageError, match="^dtypes: a dtype is named twice"):
        sc.run_selfcheck(sc.SelfCheckConfig(dtypes=("float32", "float32"), out_dir=tmp_path))
    assert not any(tmp_path.iterdir())  # refused before anything was written
