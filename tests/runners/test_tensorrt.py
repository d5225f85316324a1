"""The TensorRT runner: real ONNX export and real engine builds (TensorRT for RTX on the CPU).

Execution needs a GPU the installed flavour supports; it is not exercised here and
nothing below pretends to run an engine.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

trt = pytest.importorskip(
    "tensorrt_rtx_bindings",
    reason="tensorrt_rtx_bindings is not installed: pip install 'benchbox[tensorrt-rtx]'")

from benchbox.errors import UsageError  # noqa: E402
from benchbox.harness import PhaseTimer  # noqa: E402
from benchbox.runners import availability, runner_class  # noqa: E402
from benchbox.runners import tensorrt as trt_runner  # noqa: E402
from benchbox.runners.onnx_export import OnnxExport, example_inputs, export_onnx  # noqa: E402
from benchbox.runners.tensorrt import NEEDS_CUDA, NOT_INSTALLED, TensorRTRunner  # noqa: E402
from benchbox.tasks import load_task  # noqa: E402
from tests.support import loaded  # noqa: E402


@pytest.fixture(scope="module")
def task() -> Any:
    return load_task("decision")


@pytest.fixture(scope="module")
def exported(task: Any) -> OnnxExport:
    return export_onnx(task, example_inputs(task))


@pytest.fixture(scope="module")
def built(task: Any, exported: OnnxExport, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real engine build for compute capability 8.9 into a fresh cache."""
    cache = tmp_path_factory.mktemp("engines")
    runner = TensorRTRunner("cpu", {"cache_dir": str(cache), "compute_capabilities": "8.9"})
    phases = PhaseTimer()
    engine = runner.build(task, example_inputs(task), phases, exported=exported)
    return {"runner": runner, "engine": engine, "phases": phases, "cache": cache}


def test_onnx_export_records_how_the_model_was_exported(task: Any, exported: OnnxExport) -> None:
    f = exported.facts
    assert exported.sha256 == hashlib.sha256(exported.model).hexdigest() == f["onnx_sha256"]
    assert f["exporter"] == "dynamo"
    assert f["opset"]["ai.onnx"] >= 17
    assert [i["name"] for i in f["inputs"]] == list(task.input_names)
    assert [o["name"] for o in f["outputs"]] == list(task.output_names)
    assert f["example_shapes"] == [list(a.shape) for a in example_inputs(task)]
    assert f["decomposed_aten_ops"] and sum(f["onnx_ops"].values()) == f["nodes"] > 0
    assert isinstance(f["warnings"], list)


def test_build_makes_a_real_engine_and_reports_it(task: Any, built: dict[str, Any]) -> None:
    runner, engine = built["runner"], built["engine"]
    rep = runner.report()
    assert rep["flavour"] == "tensorrt_rtx" and rep["flavour_requested"] == "auto"
    assert rep["flavour_version"] == trt.__version__
    assert rep["versions"]["tensorrt_rtx_bindings"] == trt.__version__
    assert rep["parser"] == {"ok": True, "num_errors": 0, "errors": []}
    opts = rep["build"]["options"]
    assert opts["compute_capabilities"] == ["8.9"] and opts["profiling_verbosity"] == "DETAILED"
    assert opts["strongly_typed"] is True and opts["cuda_graph_strategy"] == "disabled"
    er = rep["engine_report"]
    assert er["source"] == "network_definition"
    assert er["engine_bytes"] == len(engine) > 100_000
    assert er["engine_sha256"] == hashlib.sha256(engine).hexdigest()
    assert er["num_layers"] == len(er["layers"]) > 10
    assert sum(er["layer_types"].values()) == er["num_layers"]
    assert sum(er["precisions"].values()) == er["num_layers"]
    assert {"MATRIX_MULTIPLY", "SOFTMAX", "NORMALIZATION"} <= set(er["layer_types"])
    assert all(layer["type"] and layer["precision"] for layer in er["layers"])
    assert "FLOAT" in er["precisions"]
    assert er["plugin_layers"] == [] and er["unsupported_nodes"] == []
    io = {t["name"]: t for t in er["io_tensors"]}
    assert [n for n in io if io[n]["mode"] == "INPUT"] == list(task.input_names)
    assert [n for n in io if io[n]["mode"] == "OUTPUT"] == list(task.output_names)
    for name, arr in zip(task.input_names, example_inputs(task)):
        assert io[name]["shape"] == list(arr.shape)
    # build time is the harness's, from the phase timer; nothing in the report reads a clock
    assert set(built["phases"].seconds) == {"parse", "build"}
    json.dumps(rep)  # the report goes into a JSON receipt as it is


def test_second_build_hits_the_engine_cache(task: Any, exported: OnnxExport, built: dict[str, Any]) -> None:
    first = built["runner"].facts["build"]["cache"]
    assert first["hit"] is False and Path(first["path"]).read_bytes() == built["engine"]
    again = TensorRTRunner("cpu", {"cache_dir": str(built["cache"]), "compute_capabilities": "8.9"})
    phases = PhaseTimer()
    engine = again.build(task, example_inputs(task), phases, exported=exported)
    cache = again.facts["build"]["cache"]
    assert cache["hit"] is True and cache["key"] == first["key"]
    assert engine == built["engine"]
    assert "build" not in phases.seconds and "engine_cache_load" in phases.seconds
    assert again.facts["engine_report"]["num_layers"] == built["runner"].facts["engine_report"]["num_layers"]


def test_another_compute_capability_is_another_cache_entry(task: Any, exported: OnnxExport,
                                                           built: dict[str, Any]) -> None:
    other = TensorRTRunner("cpu", {"cache_dir": str(built["cache"]), "compute_capabilities": "8.6"})
    engine = other.build(task, example_inputs(task), PhaseTimer(), exported=exported)
    cache = other.facts["build"]["cache"]
    assert cache["hit"] is False and cache["key"] != built["runner"].facts["build"]["cache"]["key"]
    assert other.facts["build"]["options"]["compute_capabilities"] == ["8.6"]
    assert len(engine) > 0 and len(list(built["cache"].glob("*.engine"))) == 2


def test_parser_errors_are_reported_per_node(task: Any, tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("NoSuchOperator", ["x"], ["y"], name="the_bad_node", domain="example.domain")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("example.domain", 1)])
    data = model.SerializeToString()
    bad = OnnxExport(data, hashlib.sha256(data).hexdigest(), ("x",), ("y",), {"onnx_ops": {}})
    runner = TensorRTRunner("cpu", {"cache_dir": str(tmp_path), "compute_capabilities": "8.9"})
    with pytest.raises(trt_runner.TensorRTBuildError, match="NoSuchOperator"):
        runner.build(task, (np.zeros((1, 4), np.float32),), PhaseTimer(), exported=bad)
    parser = runner.facts["parser"]
    assert parser["ok"] is False and parser["num_errors"] >= 1
    assert parser["errors"][0]["node_name"] == "the_bad_node"
    assert parser["errors"][0]["op"] == "NoSuchOperator" and parser["errors"][0]["description"]
    assert runner.fallbacks[0]["kind"] == "parser_error"
    assert list(tmp_path.iterdir()) == [] and onnx.__version__


def test_availability_says_precisely_why() -> None:
    assert availability("tensorrt", "cpu") == NEEDS_CUDA
    assert runner_class("tensorrt").availability("cpu") == NEEDS_CUDA
    # this machine has no GPU: torch sees none
    assert TensorRTRunner.availability("cuda") == "no CUDA device is visible to torch"
    forced = availability("tensorrt", "cuda", {"flavour": "tensorrt"})
    if not trt_runner.installed("tensorrt"):
        assert forced == ("flavour tensorrt needs tensorrt, which is not installed: "
                          "pip install 'benchbox[tensorrt]'")


def test_availability_with_simulated_missing_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trt_runner, "missing_export_packages", lambda: ["onnxscript"])
    assert TensorRTRunner.availability("cuda") == ("onnxscript (to export the model to ONNX) not installed: "
                                                   "pip install 'benchbox[tensorrt-rtx]'")
    monkeypatch.setattr(trt_runner, "installed", lambda flavour: False)
    assert TensorRTRunner.availability("cuda") == NOT_INSTALLED
    assert availability("tensorrt", "cpu") == NOT_INSTALLED
    assert TensorRTRunner("cpu").gather_facts(None, (), PhaseTimer())["flavour"] is None


def test_availability_refuses_an_h200_capability_on_a_mocked_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    reason = TensorRTRunner.availability_for("cuda", {"flavour": "tensorrt_rtx"})
    assert reason is not None
    assert reason.startswith(f"TensorRT for RTX {trt.__version__} cannot run on NVIDIA H200 "
                             "(compute capability 9.0); it supports")
    assert "8.9" in reason and "12.0" in reason and "9.0," not in reason
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 9))
    assert TensorRTRunner.availability_for("cuda", {"flavour": "tensorrt_rtx"}) is None


@pytest.mark.parametrize(("options", "message"), [
    ({"flavor": "x"}, "unknown tensorrt option 'flavor'"),
    ({"flavour": "onnxruntime"}, "unknown TensorRT flavour 'onnxruntime'"),
    ({"cuda_graph": "maybe"}, "cuda_graph: expected true or false"),
    ({"cuda_graph": True, "cuda_graph_strategy": "whole_graph_capture"}, "cannot both capture"),
    ({"cuda_graph_strategy": "sometimes"}, "expected disabled or whole_graph_capture"),
    ({"opset": "new"}, "opset: expected an integer"),
])
def test_bad_options_are_one_line_usage_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        TensorRTRunner("cpu", options)


def test_unknown_or_offline_current_compute_capability_is_refused(task: Any, exported: OnnxExport,
                                                                   tmp_path: Path) -> None:
    for cc, message in (("9.0", "9.0 is not one TensorRT for RTX"), ("current", "needs a usable CUDA")):
        runner = TensorRTRunner("cpu", {"cache_dir": str(tmp_path), "compute_capabilities": cc})
        with pytest.raises(UsageError, match=message):
            runner.build(task, example_inputs(task), PhaseTimer(), exported=exported)


def test_cli_run_on_cpu_fails_tensorrt_rows_with_build_facts_and_keeps_eager_valid(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    env = {**os.environ, "BENCHBOX_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "benchbox", "run", "--runner", "tensorrt", "--runner", "torch-eager",
         "--case", "invoice", "--samples", "15", "--warmup", "1", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert NEEDS_CUDA in proc.stderr
    receipt = loaded(out)  # the receipt, failed rows and build facts included, is well formed
    rows = {(r["runner"], r["case"]): r for r in receipt["results"]}
    cases = [c["name"] for c in receipt["task"]["cases"]]
    assert len(rows) == 2 * len(cases)
    for case in cases:
        t, e = rows[("tensorrt", case)], rows[("torch-eager", case)]
        assert t["status"] == "failed" and t["reasons"] == [NEEDS_CUDA]
        assert t["samples_ns"] == [] and t["stages_ns"] == {} and t["summary"] == {"n": 0}
        rep = t["runner_report"]
        assert rep["unavailable"] == NEEDS_CUDA and rep["flavour"] == "tensorrt_rtx"
        assert rep["flavour_version"] == trt.__version__
        assert rep["build"]["options"]["compute_capabilities"] == [trt_runner.DEFAULT_OFFLINE_CAPABILITY]
        assert rep["build"]["cache"]["hit"] is False
        assert Path(rep["build"]["cache"]["path"]).parent == tmp_path / "cache" / "engines"
        assert rep["engine_report"]["engine_bytes"] > 0 and rep["engine_report"]["num_layers"] > 0
        assert rep["engine_report"]["source"] == "network_definition"
        assert rep["engine_validity_here"]["validity"] == "INVALID"
        assert {"export", "parse", "build"} <= set(rep["prepare_s"])
        assert e["status"] == "valid" and len(e["samples_ns"]) >= 15


def test_inspector_report_reads_detailed_layer_json_from_a_mocked_engine() -> None:
    """A deserialized engine needs a supported GPU, so the engine object here is a stand-in."""
    info = {"Layers": [
        {"Name": "gemm_1", "LayerType": "MatrixMultiply", "TacticName": "sm89_xmma",
         "Outputs": [{"Name": "y", "Format/Datatype": "Row major linear FP16 format"}]},
        {"Name": "custom", "LayerType": "PluginV3",
         "Outputs": [{"Format/Datatype": "Row major linear FP32"}]},
    ], "Bindings": ["x", "y"]}

    class Inspector:
        def get_engine_information(self, fmt: Any) -> str:
            assert fmt == trt.LayerInformationFormat.JSON
            return json.dumps(info)

    class Engine:
        num_io_tensors = 2

        def create_engine_inspector(self) -> Inspector:
            return Inspector()

        def get_tensor_name(self, i: int) -> str:
            return ["x", "y"][i]

        def get_tensor_mode(self, name: str) -> Any:
            return trt.TensorIOMode.INPUT if name == "x" else trt.TensorIOMode.OUTPUT

        def get_tensor_shape(self, name: str) -> Any:
            return trt.Dims([1, 4])

        def get_tensor_dtype(self, name: str) -> Any:
            return trt.DataType.HALF

    rep = trt_runner.inspector_report(trt, Engine())
    assert rep["source"] == "engine_inspector" and rep["num_layers"] == 2
    assert rep["layer_types"] == {"MatrixMultiply": 1, "PluginV3": 1}
    assert rep["precisions"] == {"FP16": 1, "FP32": 1} and rep["plugin_layers"] == ["custom"]
    assert rep["layers"][0]["tactic"] == "sm89_xmma"
    assert rep["io_tensors"] == [{"name": "x", "mode": "INPUT", "shape": [1, 4], "dtype": "HALF"},
                                 {"name": "y", "mode": "OUTPUT", "shape": [1, 4], "dtype": "HALF"}]
