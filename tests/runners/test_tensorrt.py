"""The TensorRT runner: real ONNX exports and real engine builds (TensorRT for RTX on the CPU).

Execution needs a GPU the installed flavour supports; it is not exercised here and
nothing below pretends to run an engine. Tests that stand in for what cannot exist on
this machine (a GPU, a full TensorRT install) say so in their names.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import types
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

import numpy as np
import pytest

trt = pytest.importorskip(
    "tensorrt_rtx_bindings",
    reason="tensorrt_rtx_bindings is not installed: pip install 'benchbox-contracts[tensorrt-rtx]'")

from benchbox.contracts import Policy  # noqa: E402
from benchbox.errors import UsageError  # noqa: E402
from benchbox.fallbacks import probable_causes  # noqa: E402
from benchbox.harness import PhaseTimer  # noqa: E402
from benchbox.runners import availability, runner_class  # noqa: E402
from benchbox.runners import tensorrt as trt_module  # noqa: E402
from benchbox.runners import tensorrt_build as tb  # noqa: E402
from benchbox.runners import tensorrt_flavours as fl  # noqa: E402
from benchbox.runners import tensorrt_inspect as ti  # noqa: E402
from benchbox.runners import tensorrt_options as topts  # noqa: E402
from benchbox.runners import tensorrt_plans as plans  # noqa: E402
from benchbox.runners import tensorrt_report as tr  # noqa: E402
from benchbox.runners.onnx_export import (  # noqa: E402
    OnnxExport,
    example_inputs,
    export_key,
    load_or_export,
)
from benchbox.runners.tensorrt import NEEDS_CUDA, TensorRTRunner  # noqa: E402
from benchbox.runners.tensorrt_flavours import NOT_INSTALLED  # noqa: E402
from benchbox.tasks import Case, InputShape, Task, load_task  # noqa: E402
from tests.support import loaded  # noqa: E402

# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def task() -> Any:
    return load_task("decision")


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def built(task: Any, cache_root: Path) -> dict[str, Any]:
    """One real export and engine build for compute capability 8.9 into a fresh cache."""
    runner = TensorRTRunner("cpu", {"cache_dir": str(cache_root), "compute_capabilities": "8.9"})
    phases = PhaseTimer()
    engine = runner.build(task, example_inputs(task), phases)
    return {"runner": runner, "engine": engine, "phases": phases, "cache": cache_root}


@pytest.fixture(scope="module")
def exported(task: Any, built: dict[str, Any]) -> OnnxExport:
    """The export the ``built`` runner made, from the export cache."""
    exp, facts = load_or_export(task, example_inputs(task), model=task.build_model(), opset=None,
                                cache_dir=built["cache"] / "onnx", phases=PhaseTimer())
    assert facts["hit"]
    return exp


@pytest.fixture(scope="module")
def bf16(cache_root: Path) -> dict[str, Any]:
    """A real bfloat16 build of the tiny task (default precision options: float32 layer norms,
    softmax and logits)."""
    task = load_task("decision", dtype="bfloat16")
    runner = TensorRTRunner("cpu", {"cache_dir": str(cache_root), "compute_capabilities": "8.9"})
    runner.build(task, example_inputs(task), PhaseTimer())
    return {"task": task, "runner": runner, "report": runner.report()}


class VarLenTask(Task):
    """Variable-length input: a mean of token embeddings, sequences of 1..64 tokens."""

    name = "varlen"
    input_names = ("ids", "mask")
    output_names = ("logits",)

    def parse(self, request: bytes) -> list[int]:
        return [int(t) for t in json.loads(request)["ids"]]

    def preprocess(self, request: list[int]) -> tuple[np.ndarray, ...]:
        ids = np.asarray([request], np.int64)
        return ids, np.ones(ids.shape, np.float32)

    def reduce(self, outputs: dict[str, np.ndarray], request: Any) -> Any:
        return outputs["logits"][0]

    def answer(self, reduced: Any, request: Any) -> Any:
        return {"label": int(np.argmax(reduced))}

    def serialize(self, answer: Any) -> bytes:
        return json.dumps(answer).encode()

    def cases(self) -> list[Case]:
        return [Case("seven", b'{"ids": [3, 1, 4, 1, 5, 9, 2]}'), Case("three", b'{"ids": [2, 7, 1]}')]

    def input_shapes(self) -> dict[str, InputShape]:
        s = InputShape((1, 1), (1, 16), (1, 64))
        return {"ids": s, "mask": s}

    def build_model(self) -> Any:
        import torch

        class Mean(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                g = torch.Generator().manual_seed(0)
                self.emb = torch.nn.Parameter(torch.randn(32, 8, generator=g))
                self.head = torch.nn.Parameter(torch.randn(8, 3, generator=g))

            def forward(self, ids: Any, mask: Any) -> tuple[Any]:
                h = self.emb[ids] * mask.unsqueeze(-1)
                h = h.sum(1) / mask.sum(1, keepdim=True)
                return (h @ self.head,)

        return Mean().eval()


# -- export and build -----------------------------------------------------------------------


def test_onnx_export_records_how_the_model_was_exported(task: Any, exported: OnnxExport) -> None:
    f = exported.facts
    assert exported.sha256 == hashlib.sha256(exported.model).hexdigest() == f["onnx_sha256"]
    assert f["exporter"] == "dynamo"
    assert f["opset"]["ai.onnx"] >= 17
    assert [i["name"] for i in f["inputs"]] == list(task.input_names)
    assert [o["name"] for o in f["outputs"]] == list(task.output_names)
    assert f["example_shapes"] == [list(a.shape) for a in example_inputs(task)]
    assert f["dynamic_axes"] == {}  # the built-in task has fixed shapes
    assert f["decomposed_aten_ops"] and sum(f["onnx_ops"].values()) == f["nodes"] > 0
    assert isinstance(f["warnings"], list)


def test_build_makes_a_real_engine_and_reports_it(task: Any, built: dict[str, Any]) -> None:
    runner, engine = built["runner"], built["engine"]
    rep = runner.report()
    assert rep["flavour"] == "tensorrt_rtx" and rep["flavour_requested"] == "auto"
    assert rep["flavour_version"] == trt.__version__
    assert rep["versions"]["tensorrt_rtx_bindings"] == trt.__version__
    assert rep["flavour_resolution"]["chosen"] == "tensorrt_rtx"
    assert rep["parser"] == {"ok": True, "num_errors": 0, "errors": [], "unsupported_nodes": []}
    build = rep["build"]
    opts = build["options"]
    assert opts["compute_capabilities"] == ["8.9"] and opts["profiling_verbosity"] == "DETAILED"
    assert opts["strongly_typed"] is True and opts["optimization_profiles"] == []
    # TF32 is on by the builder's default and cleared explicitly: true float32, like the torch runners
    assert build["builder_defaults"]["tf32"] is True and opts["tf32"] is False
    assert opts["builder_optimization_level"] == build["builder_defaults"]["builder_optimization_level"]
    assert set(build["tactic_sources"]["enabled"]) == set(trt.TacticSource.__members__)
    assert set(build["tactic_sources"]["used"]) <= set(build["tactic_sources"]["enabled"])
    mem = build["memory"]
    assert mem["weights_bytes"] > 0 and mem["activation_bytes"] > 0
    assert {"peak_cpu_mib", "peak_gpu_mib", "host_persistent_bytes"} <= set(mem)
    # the built engine's layers, from the listing the builder logs (no GPU needed)
    er = rep["engine_report"]
    assert er["source"] == "builder_log"
    assert er["engine_bytes"] == len(engine) > 100_000
    assert er["engine_sha256"] == hashlib.sha256(engine).hexdigest()
    assert er["num_layers"] == len(er["layers"]) > 5
    assert sum(er["layer_types"].values()) == sum(er["precisions"].values()) == er["num_layers"]
    assert all(layer["precision"] in tr.FLOATING for layer in er["layers"]), \
        [x for x in er["layers"] if x["precision"] not in tr.FLOATING][:2]
    assert "unparsed_output_types" not in json.dumps(er["layers"])
    assert er["plugin_layers"] == [] and er["reformat_layers"] == []
    # the parser's unsupported nodes live under "parser" alone: an engine that was built has none
    assert "unsupported_nodes" not in er
    io = {t["name"]: t for t in er["io_tensors"]}
    assert [n for n in io if io[n]["mode"] == "INPUT"] == list(task.input_names)
    assert [n for n in io if io[n]["mode"] == "OUTPUT"] == list(task.output_names)
    for name, arr in zip(task.input_names, example_inputs(task)):
        assert io[name]["shape"] == list(arr.shape)
    # the network definition, as the model declares it
    net = rep["network"]
    assert {"MATRIX_MULTIPLY", "SOFTMAX", "NORMALIZATION"} <= set(net["layer_types"])
    assert "FP32" in net["precisions"] and "BF16" not in net["precisions"]
    # a float32 model has no precision islands, reformat or plugin layers
    assert rep["fallbacks"] == [] and rep["declared_precision_islands"] == []
    # TF32: the builder flag read back, for matmuls and convolutions alike (recorded on every runner)
    assert rep["tf32"]["matmul"] == rep["tf32"]["conv"] == "ieee"
    assert rep["tf32"]["settings"] == {"BuilderFlag.TF32": False}
    assert set(rep["tf32"]["environment"]) == {"NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"}
    # the builder's log holds the build's messages only (the runtime has a logger of its own)
    assert rep["builder_log"] == rep["build"]["messages"][:len(rep["builder_log"])]
    # build time is the harness's, from the phase timer; nothing in the report reads a clock
    assert set(built["phases"].seconds) == {"export_key", "export", "parse", "build"}
    assert rep["export_cache"]["hit"] is False
    json.dumps(rep)  # the report goes into a JSON receipt as it is


def test_builder_flags_are_set_explicitly_on_the_real_config(task: Any, exported: OnnxExport) -> None:
    log = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(log)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    assert trt.OnnxParser(network, log).parse(exported.model)
    shapes = task.input_shapes()

    config = builder.create_builder_config()
    assert config.get_flag(trt.BuilderFlag.TF32) is True  # the default the runner must not inherit
    opts, facts = tb.configure_builder(
        trt, builder, network, config, flavour="tensorrt_rtx", capabilities=["8.6", "12.0"], tf32=False,
        optimization_level=2, require_user_allocation=False, input_shapes=shapes)
    assert config.get_flag(trt.BuilderFlag.TF32) is False and opts["tf32"] is False
    assert config.builder_optimization_level == 2 == opts["builder_optimization_level"]
    assert config.profiling_verbosity == trt.ProfilingVerbosity.DETAILED
    assert config.num_compute_capabilities == 2
    assert config.get_compute_capability(0) == trt.ComputeCapability.SM86
    assert config.get_compute_capability(1) == trt.ComputeCapability.SM120
    assert config.get_flag(trt.BuilderFlag.REQUIRE_USER_ALLOCATION) is False
    assert config.num_optimization_profiles == 0 and opts["optimization_profiles"] == []
    assert facts["builder_defaults"] == {"tf32": True, "builder_optimization_level": 3}

    config = builder.create_builder_config()
    opts, _ = tb.configure_builder(
        trt, builder, network, config, flavour="tensorrt_rtx", capabilities=["8.9"], tf32=True,
        optimization_level=None, require_user_allocation=True, input_shapes=shapes)
    assert config.get_flag(trt.BuilderFlag.TF32) is True and opts["tf32"] is True
    assert config.get_flag(trt.BuilderFlag.REQUIRE_USER_ALLOCATION) is True
    assert opts["require_user_allocation"] is True and opts["compute_capabilities"] == ["8.9"]


def test_second_build_hits_the_export_and_engine_caches(task: Any, built: dict[str, Any]) -> None:
    first = built["runner"].facts["build"]["cache"]
    assert first["hit"] is False and Path(first["path"]).read_bytes() == built["engine"]
    again = TensorRTRunner("cpu", {"cache_dir": str(built["cache"]), "compute_capabilities": "8.9"})
    phases = PhaseTimer()
    engine = again.build(task, example_inputs(task), phases)
    cache = again.facts["build"]["cache"]
    assert cache["hit"] is True and cache["key"] == first["key"]
    assert engine == built["engine"]
    assert again.facts["export_cache"]["hit"] is True
    assert again.facts["export_cache"]["key"] == built["runner"].facts["export_cache"]["key"]
    assert set(phases.seconds) == {"export_key", "export_cache_load", "parse", "engine_cache_load"}
    # the build facts come back from the cache entry, so a hit reports what the build reported
    a, b = again.report(), built["runner"].report()
    for key in ("engine_report", "network", "fallbacks"):
        assert a[key] == b[key], key
    assert a["build"]["memory"] == b["build"]["memory"]


def test_a_cached_build_reparses_the_builders_own_text(task: Any, exported: OnnxExport, built: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    side = json.loads(Path(built["runner"].facts["build"]["cache"]["path"]).with_suffix(".json").read_text())
    # the side file keeps what the builder logged, not what this code made of it
    assert side["layer_listing"].startswith("Layers:") and "I/O Tensors:" in side["layer_listing"]
    assert any(line.startswith("Total Weights Memory") for line in side["build_log_lines"])
    assert side["log_filter"] == tr.log_filter_version()
    # a changed parser (here: one that marks what it parsed) reaches an engine from the cache
    parse_listing, log_facts = tr.parse_layer_listing, tr.build_log_facts

    def marked_listing(text: str) -> dict[str, Any]:
        out = parse_listing(text)
        return {**out, "layers": [{**layer, "type": "MARKED"} for layer in out["layers"]]}

    def marked_log(lines: Any) -> dict[str, Any]:
        out = log_facts(lines)
        return {**out, "memory": {**out["memory"], "marked": True}}

    monkeypatch.setattr(tr, "parse_layer_listing", marked_listing)
    monkeypatch.setattr(tr, "build_log_facts", marked_log)
    again = TensorRTRunner("cpu", {"cache_dir": str(built["cache"]), "compute_capabilities": "8.9"})
    again.build(task, example_inputs(task), PhaseTimer(), exported=exported)
    assert again.facts["build"]["cache"]["hit"] is True
    er = again.facts["engine_report"]
    assert er["layer_types"] == {"MARKED": built["runner"].facts["engine_report"]["num_layers"]}
    assert again.facts["build"]["memory"]["marked"] is True


def test_an_engine_cache_entry_of_another_side_format_is_rebuilt(
        task: Any, exported: OnnxExport, built: dict[str, Any], tmp_path: Path) -> None:
    engines = tmp_path / "engines"
    engines.mkdir()
    first = Path(built["runner"].facts["build"]["cache"]["path"])
    (engines / first.name).write_bytes(first.read_bytes())
    old = json.loads(first.with_suffix(".json").read_text())
    # the earlier format: layers and log facts already parsed, no builder text
    stale = {"engine_sha256": old["engine_sha256"], "engine_layers": [], "engine_io": None,
             "build_log": {"memory": {}, "unused_tactic_sources": []}, "build_messages": []}
    (engines / first.with_suffix(".json").name).write_text(json.dumps(stale))
    runner = TensorRTRunner("cpu", {"cache_dir": str(tmp_path), "compute_capabilities": "8.9"})
    phases = PhaseTimer()
    runner.build(task, example_inputs(task), phases, exported=exported)
    cache = runner.facts["build"]["cache"]
    assert cache["hit"] is False and "another format" in cache["rebuilt"]
    assert {"engine_cache_load", "build"} <= set(phases.seconds)
    assert runner.facts["engine_report"]["source"] == "builder_log"
    assert "layer_listing" in json.loads((engines / first.with_suffix(".json").name).read_text())


def test_another_compute_capability_is_another_cache_entry(task: Any, exported: OnnxExport,
                                                           built: dict[str, Any]) -> None:
    other = TensorRTRunner("cpu", {"cache_dir": str(built["cache"]), "compute_capabilities": "8.6"})
    engine = other.build(task, example_inputs(task), PhaseTimer(), exported=exported)
    cache = other.facts["build"]["cache"]
    assert cache["hit"] is False and cache["key"] != built["runner"].facts["build"]["cache"]["key"]
    assert other.facts["build"]["options"]["compute_capabilities"] == ["8.6"]
    assert len(engine) > 0 and len(list((built["cache"] / "engines").glob("*.engine"))) >= 2


def test_engine_cache_key_holds_build_options_and_code_version_not_runtime_options(
        task: Any, exported: OnnxExport, built: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    base_key = built["runner"].facts["build"]["cache"]["key"]

    def key_of(options: dict[str, Any]) -> tuple[str, bool]:
        r = TensorRTRunner("cpu", {"cache_dir": str(built["cache"]), "compute_capabilities": "8.9",
                                   **options})
        r.build(task, example_inputs(task), PhaseTimer(), exported=exported)
        return r.facts["build"]["cache"]["key"], r.facts["build"]["cache"]["hit"]

    runtime_only = {"cuda_graph": False, "cuda_graph_strategy": "disabled", "runtime_cache": False,
                    "jit_warmup_calls": 5, "layer_profile": False, "layer_profile_runs": 3,
                    "shape_specialization": "lazy", "transfer": "staged", "d2h": "pinned", "stream": "side"}
    every = set(runtime_only) | set(topts.BUILD_OPTION_KEYS) | {"flavour", "opset", "cache", "cache_dir"}
    assert every == set(topts.OPTION_DEFAULTS)
    assert key_of(runtime_only) == (base_key, True)
    assert key_of({"tf32": True})[0] != base_key
    assert key_of({"builder_optimization_level": 1})[0] != base_key
    # the builder code's version is part of the key
    version = tb.build_code_version()
    monkeypatch.setattr(tb, "BUILD_CODE_REVISION", tb.BUILD_CODE_REVISION + 1)
    assert tb.build_code_version() != version
    key, hit = key_of({})
    assert key != base_key and hit is False
    # an RTX engine built for named capabilities does not depend on the building machine's GPU
    assert built["runner"].facts["build"]["device"] == {}


def test_export_key_follows_the_model_and_its_shapes(task: Any) -> None:
    example = example_inputs(task)
    model = task.build_model()
    key, doc = export_key(task, model, example, opset=None)
    assert export_key(task, task.build_model(), example, opset=None)[0] == key  # deterministic
    assert doc["model_source_sha256"] and doc["task_source_sha256"]
    careless = load_task("decision", options={"softmax_fp32": False})  # same weights, other graph
    assert export_key(careless, careless.build_model(), example, opset=None)[0] != key
    assert export_key(task, model, example, opset=18)[0] != key
    other_seed = load_task("decision", options={"seed": 7})
    assert export_key(other_seed, other_seed.build_model(), example, opset=None)[0] != key
    shapes = {n: InputShape.fixed(a.shape) for n, a in zip(task.input_names, example)}
    first = task.input_names[0]
    wide = (example[0].shape[0], example[0].shape[1] * 2)
    shapes[first] = InputShape(tuple(example[0].shape), tuple(example[0].shape), wide)
    assert export_key(task, model, example, opset=None, input_shapes=shapes)[0] != key


def test_a_corrupt_cached_export_is_replaced(task: Any, exported: OnnxExport, tmp_path: Path) -> None:
    model = task.build_model()
    key, _ = export_key(task, model, example_inputs(task), opset=None)
    (tmp_path / f"{key}.onnx").write_bytes(exported.model[:-10])  # truncated
    (tmp_path / f"{key}.json").write_text(json.dumps(exported.facts))
    phases = PhaseTimer()
    again, facts = load_or_export(task, example_inputs(task), model=model, opset=None, cache_dir=tmp_path,
                                  phases=phases)
    assert facts["hit"] is False and facts["stale_entry_replaced"] is True and "export" in phases.seconds
    assert (tmp_path / f"{key}.onnx").read_bytes() == again.model
    assert hashlib.sha256(again.model).hexdigest() == again.sha256


# -- precision islands, reformat and plugin layers ------------------------------------------


def test_bfloat16_build_records_its_declared_float32_apart_and_counts_no_fallback(
        bf16: dict[str, Any]) -> None:
    rep = bf16["report"]
    declared = rep["declared_precision_islands"]
    # every float32 layer the strongly typed network declares is counted once, grouped by layer type
    assert sum(f["count"] for f in declared) == rep["network"]["precisions"]["FP32"] > 50
    assert len(declared) == len({(f["precision"], f["layer_type"]) for f in declared}) < 20
    assert all(f["precision"] == "FP32" and f["model_dtype"] == "bfloat16" for f in declared)
    assert all(1 <= len(f["examples"]) <= min(tr.EXAMPLES, f["count"]) for f in declared)
    by_type = {f["layer_type"]: f for f in declared}
    # the task's precision options: layer norms and softmax in float32, the schema head too
    assert by_type["NORMALIZATION"]["count"] >= 5 and by_type["SOFTMAX"]["count"] >= 2
    assert by_type["MATRIX_MULTIPLY"]["count"] >= 1
    # the engine runs float32 kernels (the float32 logits head among them), each implementing layers
    # the network declares float32: no fallback, and none of them counted a second time
    engine_fp32 = [x for x in rep["engine_report"]["layers"] if x["precision"] == "FP32"]
    assert engine_fp32 and "gemm" in {x["type"] for x in engine_fp32}
    assert [f for f in rep["fallbacks"] if f["kind"] == "precision_island"] == []
    assert rep["network"]["precisions"]["BF16"] > 0 and rep["engine_report"]["precisions"]["BF16"] > 0
    json.dumps(rep)


def test_an_engine_layer_in_another_precision_than_declared_is_one_fallback(bf16: dict[str, Any]) -> None:
    """The engine listing of the real bfloat16 build, with one kernel changed to write FP32 where
    the network declares BF16 (what a builder that fell back would list)."""
    runner = bf16["runner"]
    layers = [dict(x) for x in runner._engine_layers]
    changed = next(i for i, x in enumerate(layers) if x["type"] == "gemm" and x["precision"] == "BF16")
    layers[changed].update(precision="FP32", output_types=["FP32"])
    fb = tr.fallback_entries(model_dtype="bfloat16", network_layers=runner._network_layers,
                             engine_layers=layers, engine_source="builder_log")
    (island,) = [f for f in fb if f["kind"] == "precision_island"]
    assert island["count"] == 1 and island["examples"] == [layers[changed]["name"]]
    assert (island["precision"], island["declared"], island["layer_type"]) == ("FP32", "BF16", "gemm")
    assert island["detail"] == "1 gemm layer(s) running in FP32 where the network declares BF16"
    # a kernel naming no network layer is held to the model's dtype
    layers[changed]["metadata"] = ""
    (island,) = [f for f in tr.fallback_entries(model_dtype="bfloat16", network_layers=runner._network_layers,
                                                engine_layers=layers, engine_source="builder_log")
                 if f["kind"] == "precision_island"]
    assert island["declared"] == "BF16" and island["count"] == 1


def test_careless_bfloat16_declares_fewer_float32_layers(bf16: dict[str, Any], cache_root: Path) -> None:
    careless = load_task("decision", dtype="bfloat16",
                         options={"softmax_fp32": False, "layernorm_fp32": False, "logits_fp32": False})
    runner = TensorRTRunner("cpu", {"cache_dir": str(cache_root), "compute_capabilities": "8.9"})
    runner.build(careless, example_inputs(careless), PhaseTimer())
    types_ = {f["layer_type"] for f in runner.report()["declared_precision_islands"]}
    assert "NORMALIZATION" not in types_ and "SOFTMAX" not in types_
    careful = {f["layer_type"] for f in bf16["report"]["declared_precision_islands"]}
    assert {"NORMALIZATION", "SOFTMAX"} <= careful


# -- optimization profiles ------------------------------------------------------------------


def test_variable_length_task_builds_with_an_optimization_profile(cache_root: Path) -> None:
    task = VarLenTask()
    example = example_inputs(task)
    runner = TensorRTRunner("cpu", {"cache_dir": str(cache_root), "compute_capabilities": "8.9"})
    engine = runner.build(task, example, PhaseTimer())
    rep = runner.report()
    assert rep["onnx"]["dynamic_axes"] == {"ids": [1], "mask": [1]}
    net_io = {t["name"]: t for t in rep["network"]["io_tensors"]}
    assert net_io["ids"]["shape"] == [1, -1] and net_io["mask"]["shape"] == [1, -1]
    profiles = rep["build"]["options"]["optimization_profiles"]
    assert profiles == [{"input": n, "min": [1, 1], "opt": [1, 16], "max": [1, 64]} for n in ("ids", "mask")]
    # the engine's own account of its I/O, from the builder's listing, holds the same profile
    eng_io = {t["name"]: t for t in rep["engine_report"]["io_tensors"]}
    assert eng_io["ids"]["profile"] == [{"min": [1, 1], "opt": [1, 16], "max": [1, 64]}]
    assert len(engine) > 0
    # one captured graph cannot follow shapes: full TensorRT leaves graphs off, RTX's own capture follows
    assert plans.graph_plan("tensorrt", "auto", "auto", True, dynamic=True).mode == "off"
    assert runner.facts["cuda_graphs"]["mode"] == "rtx_whole_graph_capture"


def test_input_shape_declarations_are_checked(task: Any) -> None:
    example = example_inputs(task)
    default = task.input_shapes()
    assert {n: s.min for n, s in default.items()} == {n: a.shape for n, a in zip(task.input_names, example)}
    assert all(s.min == s.opt == s.max and s.dynamic_axes == () for s in default.values())
    assert plans.checked_input_shapes(task, example) == default
    first = task.input_names[0]
    cases = [
        ({k: v for k, v in default.items() if k != first}, "must name every input"),
        ({**default, first: InputShape((1, 4), (1, 2), (1, 8))}, "min ≤ opt ≤ max"),
        ({**default, first: InputShape((1, 4), (1, 4, 1), (1, 8))}, "different ranks"),
        ({**default, first: InputShape((1, 1), (1, 2), (1, 3))}, "outside its declared range"),
    ]
    for shapes, message in cases:
        class Declared(type(task)):  # type: ignore[misc]
            def input_shapes(self, _s: Any = shapes) -> dict[str, InputShape]:
                return _s

        with pytest.raises(UsageError, match=message):
            plans.checked_input_shapes(Declared(), example)


# -- parser errors, options, availability -----------------------------------------------------


def test_parser_errors_are_reported_per_node_with_the_unsupported_nodes(task: Any, tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    node = helper.make_node("NoSuchOperator", ["x"], ["y"], name="the_bad_node", domain="example.domain")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("example.domain", 1)])
    data = model.SerializeToString()
    bad = OnnxExport(data, hashlib.sha256(data).hexdigest(), ("x",), ("y",), {"onnx_ops": {}})

    class One(type(task)):  # type: ignore[misc]
        input_names = ("x",)

        def input_shapes(self) -> dict[str, InputShape]:
            return {"x": InputShape.fixed((1, 4))}

    runner = TensorRTRunner("cpu", {"cache_dir": str(tmp_path), "compute_capabilities": "8.9"})
    with pytest.raises(fl.TensorRTBuildError, match="NoSuchOperator"):
        runner.build(One(), (np.zeros((1, 4), np.float32),), PhaseTimer(), exported=bad)
    parser = runner.facts["parser"]
    assert parser["ok"] is False and parser["num_errors"] >= 1
    assert parser["errors"][0]["node_name"] == "the_bad_node"
    assert parser["errors"][0]["op"] == "NoSuchOperator" and parser["errors"][0]["description"]
    assert parser["unsupported_nodes"] == [{"index": 0, "name": "the_bad_node", "op": "NoSuchOperator",
                                            "domain": "example.domain"}]
    kinds = [f["kind"] for f in runner.report()["fallbacks"]]
    assert kinds[0] == "parser_error" and "unsupported_node" in kinds
    unsupported = next(f for f in runner.report()["fallbacks"] if f["kind"] == "unsupported_node")
    assert unsupported["op"] == "NoSuchOperator" and unsupported["count"] == 1
    assert not (tmp_path / "engines").exists()


def test_availability_says_precisely_why() -> None:
    assert availability("tensorrt", "cpu") == NEEDS_CUDA
    assert runner_class("tensorrt").availability("cpu") == NEEDS_CUDA
    # this machine has no GPU: torch sees none
    assert TensorRTRunner.availability("cuda").startswith("no CUDA device is visible to torch")
    forced = availability("tensorrt", "cuda", {"flavour": "tensorrt"})
    if not fl.installed("tensorrt"):
        assert forced == ("flavour tensorrt needs tensorrt, which is not installed: "
                          "pip install 'benchbox-contracts[tensorrt]'")


def test_availability_with_simulated_missing_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trt_module, "missing_export_packages", lambda: ["onnxscript"])
    assert TensorRTRunner.availability("cuda") == ("onnxscript (to export the model to ONNX) not installed: "
                                                   "pip install 'benchbox-contracts[tensorrt-rtx]'")
    monkeypatch.setattr(fl, "installed", lambda flavour: False)
    assert TensorRTRunner.availability("cuda") == NOT_INSTALLED
    assert availability("tensorrt", "cpu") == NOT_INSTALLED
    assert TensorRTRunner("cpu").gather_facts(None, (), PhaseTimer())["flavour"] is None


def test_auto_flavour_passes_over_a_broken_full_tensorrt_on_a_mocked_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Full TensorRT cannot be installed here, so a stand-in module plays a broken install."""
    fake = types.ModuleType("tensorrt")
    fake.__spec__ = ModuleSpec("tensorrt", None)
    monkeypatch.setitem(sys.modules, "tensorrt", fake)  # importable, but no version, no Builder
    choice = fl.resolve_flavour("auto")
    assert choice.flavour == "tensorrt_rtx"
    assert choice.skipped == (("tensorrt", "tensorrt imports but reports no version (None)"),)
    assert choice.to_dict()["skipped"][0]["flavour"] == "tensorrt"
    fake.__version__ = "10.13.0.35"
    assert "has no Builder/OnnxParser" in fl.resolve_flavour("auto").skipped[0][1]
    fake.Builder = fake.OnnxParser = object
    assert fl.resolve_flavour("auto").flavour == "tensorrt"  # a usable one is taken first

    real_import = fl.importlib.import_module

    def failing(name: str, *a: Any) -> Any:
        if name == "tensorrt":
            raise OSError("libnvinfer.so.10: cannot open shared object file")
        return real_import(name, *a)

    monkeypatch.setattr(fl.importlib, "import_module", failing)
    choice = fl.resolve_flavour("auto")
    assert choice.flavour == "tensorrt_rtx"
    assert "does not import (OSError: libnvinfer.so.10" in choice.skipped[0][1]
    forced = fl.resolve_flavour("tensorrt")
    assert forced.flavour is None and forced.missing_reason().startswith("flavour tensorrt: tensorrt is "
                                                                         "installed but does not import")


@pytest.mark.parametrize(("options", "message"), [
    ({"flavor": "x"}, "tensorrt: unknown option 'flavor'"),
    ({"flavour": "onnxruntime"}, "unknown TensorRT flavour 'onnxruntime'"),
    ({"cuda_graph": "maybe"}, "cuda_graph: expected true or false"),
    ({"cuda_graph": True, "cuda_graph_strategy": "whole_graph_capture"}, "cannot both capture"),
    ({"cuda_graph_strategy": "sometimes"}, "expected auto, disabled or whole_graph_capture"),
    ({"opset": "new"}, "opset: expected an integer"),
    ({"tf32": "perhaps"}, "tf32: expected true or false"),
    ({"builder_optimization_level": 9}, "builder_optimization_level: expected 0..5"),
    ({"jit_warmup_calls": 0}, "jit_warmup_calls: expected 1.."),
    ({"compute_capabilities": "current,8.9"}, "'current' cannot be combined"),
    ({"compute_capabilities": "9.0"}, "9.0 is not one TensorRT for RTX"),
    ({"compute_capabilities": "current"}, "compute_capabilities=current: no CUDA device is usable"),
])
def test_bad_options_are_one_line_usage_errors_before_any_export(
        options: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_export(*a: Any, **k: Any) -> Any:
        raise AssertionError("exported before the options were checked")

    monkeypatch.setattr(tb, "load_or_export", no_export)
    with pytest.raises(UsageError, match=message) as e:
        TensorRTRunner("cpu", options)
    assert "\n" not in str(e.value)


def test_options_for_the_other_flavour_are_refused() -> None:
    opts = topts.normalize_options({"compute_capabilities": "8.9"})
    with pytest.raises(UsageError, match="applies to TensorRT for RTX"):
        topts.check_flavour_options(opts, "tensorrt")
    opts = topts.normalize_options({"cuda_graph_strategy": "whole_graph_capture"})
    with pytest.raises(UsageError, match="needs TensorRT for RTX"):
        topts.check_flavour_options(opts, "tensorrt")
    topts.check_flavour_options(opts, "tensorrt_rtx")


def test_cli_refuses_an_unsupported_capability_before_measuring(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchbox", "run", "--runner", "tensorrt", "--runner-option",
         "tensorrt:compute_capabilities=9.0", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "BENCHBOX_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "benchbox: error: tensorrt option compute_capabilities: 9.0 is not one TensorRT for RTX")
    assert not out.exists() and not (tmp_path / "cache").exists()


def test_cli_refuses_current_without_a_supported_gpu_before_calibrating(tmp_path: Path) -> None:
    """compute_capabilities=current builds for the run's GPU: refused before the calibration, the
    export or any receipt (this machine has no GPU: the pre-flight device check refuses
    ``--device cuda`` first; with a CUDA build of torch and no GPU, the option check would)."""
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchbox", "run", "--runner", "tensorrt", "--device", "cuda",
         "--runner-option", "tensorrt:compute_capabilities=current", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "BENCHBOX_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 2, proc.stderr[-2000:]
    from benchbox.run.preflight import gpu_unusable

    no_gpu = gpu_unusable("cuda")
    assert proc.stderr.strip().splitlines()[-1] == (
        f"benchbox: error: --device: cuda: {no_gpu}" if no_gpu else
        "benchbox: error: tensorrt option compute_capabilities=current: no CUDA device is usable; name one "
        f"({', '.join(fl.rtx_capabilities(trt))})")
    assert "calibrat" not in proc.stderr
    assert not out.exists() and not list(tmp_path.glob("r.*")) and not (tmp_path / "cache").exists()


def test_current_is_checked_against_the_runs_device_on_a_mocked_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from benchbox.run.factory import REGISTERED

    opts = {"compute_capabilities": "current"}
    TensorRTRunner.check_options(opts)  # the options alone are fine
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    with pytest.raises(UsageError, match=r"current: NVIDIA H200 \(compute capability 9.0\) is not supported"):
        REGISTERED.check_options("tensorrt", opts, "cuda")
    REGISTERED.check_options("tensorrt", opts)  # without the device, nothing to judge
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 9))
    REGISTERED.check_options("tensorrt", opts, "cuda")  # an Ada GPU: fine


def test_engine_validity_has_its_own_logger_and_no_verdict_without_a_driver(built: dict[str, Any]) -> None:
    engine = built["engine"]
    assert ti.cuda_driver() is None  # this machine has no CUDA driver
    none = ti.engine_validity(trt, engine, None)
    assert none is not None and none["validity"] is None and none["checked"] is False
    assert "no CUDA driver" in none["why"]
    # with a driver named (a stand-in name: there is none here) the real bindings are asked, and
    # what they log goes to the check's own logger and into the record
    asked = ti.engine_validity(trt, engine, "libcuda.so.1 (stand-in name)")
    assert asked is not None and asked["checked"] is True and asked["validity"] == "INVALID"
    assert asked["messages"] and "driver" in asked["why"].lower()
    assert not any(m in built["runner"].facts["builder_log"] for m in asked["messages"])


def test_offline_target_is_8_9_without_a_supported_gpu() -> None:
    supported = fl.rtx_capabilities(trt)
    h200 = {"name": "NVIDIA H200", "capability": "9.0"}
    ccs, why = fl.target_capabilities(None, supported, None, h200, trt.__version__)
    assert ccs == [fl.DEFAULT_OFFLINE_CAPABILITY] == ["8.9"]
    assert "does not run on NVIDIA H200 (compute capability 9.0)" in why
    ccs, why = fl.target_capabilities(None, supported, None, None, trt.__version__)
    assert ccs == ["8.9"] and "without a CUDA device" in why
    ada = {"name": "NVIDIA L4", "capability": "8.9"}
    assert fl.target_capabilities(None, supported, "8.9", ada, trt.__version__)[0] == ["current"]
    with pytest.raises(UsageError, match="NVIDIA H200 .compute capability 9.0. is not supported"):
        fl.target_capabilities(["current"], supported, None, h200, trt.__version__)
    assert fl.target_capabilities(["8.6", "12.0"], supported, None, h200,
                                          trt.__version__) == (["8.6", "12.0"], "option")


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


# -- CUDA graphs ----------------------------------------------------------------------------


@pytest.mark.parametrize(("flavour", "graph", "strategy", "allowed", "mode"), [
    ("tensorrt_rtx", "auto", "auto", True, "rtx_whole_graph_capture"),
    ("tensorrt", "auto", "auto", True, "stream_capture"),
    ("tensorrt_rtx", "auto", "auto", False, "off"),
    ("tensorrt", "auto", "auto", False, "off"),
    ("tensorrt", True, "auto", False, "off"),
    ("tensorrt_rtx", True, "auto", True, "stream_capture"),
    ("tensorrt_rtx", "auto", "disabled", True, "off"),
    ("tensorrt_rtx", False, "whole_graph_capture", True, "rtx_whole_graph_capture"),
    ("tensorrt", False, "auto", True, "off"),
])
def test_graph_plan_follows_the_contract_policy(flavour: str, graph: Any, strategy: str, allowed: bool,
                                                mode: str) -> None:
    plan = plans.graph_plan(flavour, graph, strategy, allowed, dynamic=False)
    assert plan.mode == mode and plan.why
    if not allowed:
        assert plan.why == "the contract's policy.cuda_graphs = false"


def test_policy_without_graphs_switches_them_off_and_records_it(task: Any, exported: OnnxExport,
                                                                cache_root: Path) -> None:
    r = TensorRTRunner("cpu", {"cuda_graph_strategy": "whole_graph_capture", "cache_dir": str(cache_root),
                               "compute_capabilities": "8.9"})
    r.apply_policy(Policy(cuda_graphs=False))
    assert r.facts["policy_applied"] == {"cuda_graphs_allowed": False,
                                         "changed": ["cuda_graph_strategy=disabled"]}
    r.build(task, example_inputs(task), PhaseTimer(), exported=exported)
    assert r.facts["cuda_graphs"]["mode"] == "off"
    manual = TensorRTRunner("cpu", {"cuda_graph": True, "cache_dir": str(cache_root),
                                    "compute_capabilities": "8.9"})
    manual.apply_policy(Policy())
    manual.build(task, example_inputs(task), PhaseTimer(), exported=exported)
    # a stream capture of an RTX engine needs user-allocated memory: a build option, another engine
    assert manual.facts["build"]["options"]["require_user_allocation"] is True
    assert manual.facts["build"]["cache"]["key"] != r.facts["build"]["cache"]["key"]


def test_failed_graph_capture_falls_back_with_a_warning_on_a_mocked_gpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU here: the context and the stream are stand-ins; the fallback logic is the runner's."""
    import torch

    calls: list[str] = []

    class Context:
        def is_stream_capturable(self, stream: int) -> bool:
            return False

    class Stream:
        cuda_stream = 1234

    r = TensorRTRunner("cpu")
    r._context, r._stream = Context(), Stream()
    r.facts["cuda_graphs"] = {"mode": "stream_capture", "why": "test", "used": None, "warnings": []}
    monkeypatch.setattr(r, "h2d", lambda host: calls.append("h2d"))
    monkeypatch.setattr(r, "compute", lambda inputs: calls.append("compute"))
    monkeypatch.setattr(r, "d2h", lambda outputs: calls.append("d2h"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append("sync"))
    r._capture(())
    assert r._graph is None and r.facts["cuda_graphs"]["used"] == "off"
    assert r.facts["cuda_graphs"]["warnings"] == [
        "CUDA graphs off, running execute_async_v3 without a graph: the capture failed: _NotCapturable: "
        "TensorRT reports the execution context is not stream capturable"]
    assert r.facts["cuda_graphs"]["stream_capturable"] is False
    entry = r.report()["fallbacks"][-1]
    assert entry["kind"] == "cudagraph_skip" and entry["count"] == 1 and entry["phase"] == "graph_capture"
    assert calls == ["sync", "h2d", "compute", "d2h"]  # one plain call proves the context still runs


# -- the engine inspector's strings --------------------------------------------------------------

#: ``Format/Datatype`` values as NVIDIA's TensorRT Engine Explorer maps them
#: (NVIDIA/TensorRT, tools/experimental/trt-engine-explorer/trex/activations.py, ``_regionFormatDict``),
#: including the short datatype names printed for kgen (Myelin) layers.
TREX_FORMATS = {
    "Row major linear FP32": "FP32",
    "Row major linear FP16 format": "FP16",
    "Channel major FP16 format where channel % 8 == 0": "FP16",
    "Channel major FP32 format where channel % 4 == 0": "FP32",
    "Thirty-two wide channel vectorized row major Int8 format": "INT8",
    "Row major linear BFloat16 format": "BF16",
    "Channel major BFloat16 format where channel % 8 == 0": "BF16",
    "Two wide channel vectorized row major BFloat16 format": "BF16",
    "Row major linear Int64 format": "INT64",
    "Row major linear Int32": "INT32",
    "Row major linear BOOL": "BOOL",
    "Row major linear UInt8 format": "UINT8",
    "Row major linear FP8 format": "FP8",
    "Float": "FP32", "Half": "FP16", "BFloat16": "BF16", "Int8": "INT8", "Int32": "INT32",
    "Int64": "INT64", "Bool": "BOOL", "UInt8": "UINT8", "FP8": "FP8", "Double": "FP64",
    "Unknown format": None, "None": None,
}

#: The first two layers of NVIDIA's example engine (NVIDIA/TensorRT,
#: tools/experimental/trt-engine-explorer/examples/pytorch/resnet/A100/fp16/resnet.onnx.engine.graph.json).
TREX_A100_FP16 = """{"Layers": [{
  "Name": "Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1",
  "LayerType": "Reformat",
  "Inputs": [
  {
    "Name": "input.1",
    "Location": "Device",
    "Dimensions": [32,3,224,224],
    "Format/Datatype": "Row major linear FP32"
  }],
  "Outputs": [
  {
    "Name": "Reformatted Input Tensor 0 to Conv_0 + Relu_1",
    "Location": "Device",
    "Dimensions": [32,3,224,224],
    "Format/Datatype": "Channel major FP16 format where channel % 4 == 0"
  }],
  "ParameterType": "Reformat",
  "Origin": "REFORMAT",
  "TacticValue": "0x0000000000000000"
},{
  "Name": "Conv_0 + Relu_1",
  "LayerType": "CaskConvolution",
  "Inputs": [
  {
    "Name": "Reformatted Input Tensor 0 to Conv_0 + Relu_1",
    "Location": "Device",
    "Dimensions": [32,3,224,224],
    "Format/Datatype": "Channel major FP16 format where channel % 4 == 0"
  }],
  "Outputs": [
  {
    "Name": "onnx::MaxPool_125",
    "Location": "Device",
    "Dimensions": [32,64,112,112],
    "Format/Datatype": "Channel major FP16 format where channel % 8 == 0"
  }],
  "ParameterType": "Convolution",
  "Kernel": [7,7],
  "TacticName": "trt_turing_cutlass_image_network_first_layer_hmma_fprop_f16f16f32_nhwc_nhwc_k64r7s7c4_stride2x2",
  "TacticValue": "0xe2222883a6602489"
}]}"""  # noqa: E501

#: A plugin layer as the engine inspector lists it. The type string is the one NVIDIA's TensorRT Engine
#: Explorer knows for plugin layers (NVIDIA/TensorRT, tools/experimental/trt-engine-explorer/trex/colors.py,
#: ``layer_colormap["PluginV2"]``; TREx reads a layer's type from ``ParameterType``, else ``LayerType``:
#: trex/layer.py). The other fields have the shape of NVIDIA's example engine above (same keys, tensors with
#: ``Format/Datatype``); no NVIDIA sample engine with a plugin layer was found, so the name, dimensions and
#: formats are illustrative (a GELU plugin of NVIDIA/TensorRT's plugin/geluPlugin between FP16 layers).
TREX_PLUGIN_LAYER = """{
  "Name": "gelu_0",
  "LayerType": "PluginV2",
  "Inputs": [
  {
    "Name": "onnx::Gelu_101",
    "Location": "Device",
    "Dimensions": [32,128,768],
    "Format/Datatype": "Row major linear FP16 format"
  }],
  "Outputs": [
  {
    "Name": "onnx::MatMul_102",
    "Location": "Device",
    "Dimensions": [32,128,768],
    "Format/Datatype": "Row major linear FP16 format"
  }],
  "ParameterType": "PluginV2",
  "TacticValue": "0x0000000000000000"
}"""

#: Recorded from the VERBOSE ``Layers:`` listing TensorRT for RTX 1.7.1.116 logged while building the
#: tiny bfloat16 task on this machine (newer releases print ``Datatype`` apart from ``Format``).
RTX_LISTING = """Layers:
Name: __myl_Cast_myl0_2, LayerType: kgen, Inputs: [ { Name: patches, Dimensions: [1,96,768], Strides: [73728,768,1], StrideOrder: [2,1,0], Datatype: Float, Format: (Linear) Row major linear format }], Constants: [], Outputs: [ { Name: __myln_k_arg__bb1_15_myl0, Dimensions: [1,96,768], Strides: [73728,768,1], StrideOrder: [2,1,0], Datatype: BFloat16, Format: (Linear) Row major linear format }], TacticName: __myl_Cast_0xe91b972a1157b877a91dd45de3e69c3f, StreamId: 0, Metadata: [ONNX Layer: node__to_copy_1]

I/O Tensors:
 Name: patches, IOMode: Input, DataType: Float, Dimensions: [1,96,768], Location: Device, IsShapeInferenceIO: false, ProfileInfo: [ { MinShape: [1,96,768], OptShape: [1,96,768], MaxShape: [1,96,768], Format: Row major linear FP32 format (kLINEAR) }]
 Name: logits, IOMode: Output, DataType: Float, Dimensions: [1,8], Location: Device, IsShapeInferenceIO: false, ProfileInfo: [ { Format: Row major linear FP32 format (kLINEAR) }]

Engine Metadata:
"""  # noqa: E501


def test_inspector_strings_from_nvidia_sources_are_understood() -> None:
    for text, precision in TREX_FORMATS.items():
        assert tr.precision_of(text) == precision, text
    # TensorRT Developer Guide, "Engine Inspector": the kDETAILED example prints this value (with its
    # full stop) for an INT8 convolution
    assert tr.precision_of("Thirty-two wide channel vectorized row major Int8 format.") == "INT8"
    # a format without a datatype, as TensorRT for RTX 1.7 prints it beside "Datatype"
    assert tr.precision_of("(Linear) Row major linear format") is None
    rtx_tensor = {"Datatype": "BFloat16", "Format": "(Linear) Row major linear format"}
    assert tr.tensor_precision(rtx_tensor) == "BF16"


def test_inspector_json_of_nvidias_example_engine() -> None:
    layers = tr.inspector_layers(json.loads(TREX_A100_FP16))
    assert [(x["type"], x["precision"], x["input_types"], x["output_types"]) for x in layers] == [
        ("Reformat", "FP16", ["FP32"], ["FP16"]), ("CaskConvolution", "FP16", ["FP16"], ["FP16"])]
    assert layers[0]["origin"] == "REFORMAT" and layers[1]["tactic"].startswith("trt_turing_cutlass")
    summary = tr.summarize_layers(layers)
    assert summary["reformat_layers"] == ["Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1"]
    assert summary["precisions"] == {"FP16": 2}
    fb = tr.fallback_entries(model_dtype="float16", network_layers=[], engine_layers=layers,
                             engine_source="engine_inspector")
    assert fb == [{"kind": "reformat_layer", "level": "engine", "precision": "FP32->FP16",
                   "layer_type": "Reformat", "count": 1,
                   "examples": ["Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1"],
                   "detail": "1 reformat layer(s) FP32->FP16", "phase": "engine_load",
                   "source": "engine_inspector"}]
    as_fp32 = tr.fallback_entries(model_dtype="float32", network_layers=[], engine_layers=layers,
                                  engine_source="engine_inspector")
    islands = [f for f in as_fp32 if f["kind"] == "precision_island"]
    # the reformat layer is a reformat_layer entry, not counted again as an island
    assert [(f["layer_type"], f["precision"], f["count"]) for f in islands] == [
        ("CaskConvolution", "FP16", 1)]
    # below DETAILED profiling verbosity the inspector lists names only
    names_only = tr.inspector_layers({"Layers": ["conv1 + relu1"], "Bindings": ["x", "y"]})
    assert names_only == [{"name": "conv1 + relu1", "type": None, "precision": None, "output_types": [],
                           "input_types": []}]
    unknown = tr.layer_record({"Name": "n", "LayerType": "kgen",
                               "Outputs": [{"Format/Datatype": "N/A due to dynamic shapes"}]})
    assert unknown["precision"] is None and unknown["unparsed_output_types"] == [
        "{'Format/Datatype': 'N/A due to dynamic shapes'}"]


def test_a_plugin_layer_of_the_inspector_is_a_plugin_fallback_in_the_torch_compile_shape() -> None:
    info = json.loads(TREX_A100_FP16)
    info["Layers"].append(json.loads(TREX_PLUGIN_LAYER))
    layers = tr.inspector_layers(info)
    assert layers[2]["type"] == "PluginV2" and layers[2]["precision"] == "FP16"
    assert tr.summarize_layers(layers)["plugin_layers"] == ["gelu_0"]
    fb = tr.fallback_entries(model_dtype="float16", network_layers=[], engine_layers=layers,
                             engine_source="engine_inspector")
    (plugin,) = [f for f in fb if f["kind"] == "plugin_layer"]
    assert plugin == {"kind": "plugin_layer", "level": "engine", "layer_type": "PluginV2",
                      "precision": "FP16", "count": 1, "examples": ["gelu_0"],
                      "detail": "1 PluginV2 layer(s) (FP16)", "phase": "engine_load",
                      "source": "engine_inspector"}
    # the keys of torch-compile's counted entries (compile_report.py: graph_break, cudagraph_skip)
    assert {"kind", "count", "detail", "phase", "source"} <= set(plugin)
    # the type TREx reads first (ParameterType) is enough to know a plugin layer
    by_parameter = tr.layer_record({**json.loads(TREX_PLUGIN_LAYER), "LayerType": "gelu_kernel"})
    assert tr.is_plugin(by_parameter)
    # and a diff of two runs names it in one readable line, counting the layers
    two = tr.fallback_entries(model_dtype="float16", network_layers=[], engine_layers=[*layers, layers[2]],
                              engine_source="engine_inspector")
    assert probable_causes([], fb) == ["new plugin layer: PluginV2 FP16 (engine)",
                                       "new reformat layer: Reformat FP32->FP16 (engine)"]
    assert probable_causes(fb, two) == ["plugin layer PluginV2 FP16 (engine): 1 → 2"]


def test_rtx_builder_listing_is_parsed() -> None:
    parsed = tr.parse_layer_listing(RTX_LISTING)
    (layer,) = parsed["layers"]
    assert layer == {"name": "__myl_Cast_myl0_2", "type": "kgen", "precision": "BF16",
                     "output_types": ["BF16"], "input_types": ["FP32"],
                     "tactic": "__myl_Cast_0xe91b972a1157b877a91dd45de3e69c3f",
                     "metadata": "[ONNX Layer: node__to_copy_1]"}
    assert parsed["io_tensors"] == [
        {"name": "patches", "mode": "INPUT", "dtype": "FP32", "shape": [1, 96, 768],
         "profile": [{"min": [1, 96, 768], "opt": [1, 96, 768], "max": [1, 96, 768]}]},
        {"name": "logits", "mode": "OUTPUT", "dtype": "FP32", "shape": [1, 8]}]


def test_inspector_report_reads_a_mocked_engine() -> None:
    """A deserialized engine needs a supported GPU, so the engine object here is a stand-in;
    its inspector returns NVIDIA's example JSON."""

    class Inspector:
        def get_engine_information(self, fmt: Any) -> str:
            assert fmt == trt.LayerInformationFormat.JSON
            return TREX_A100_FP16

    class Engine:
        num_io_tensors = 2

        def create_engine_inspector(self) -> Inspector:
            return Inspector()

        def get_tensor_name(self, i: int) -> str:
            return ["input.1", "onnx::MaxPool_125"][i]

        def get_tensor_mode(self, name: str) -> Any:
            return trt.TensorIOMode.INPUT if name == "input.1" else trt.TensorIOMode.OUTPUT

        def get_tensor_shape(self, name: str) -> Any:
            return trt.Dims([32, 3, 224, 224])

        def get_tensor_dtype(self, name: str) -> Any:
            return trt.DataType.FLOAT if name == "input.1" else trt.DataType.HALF

    rep = ti.inspector_report(trt, Engine())
    assert rep["source"] == "engine_inspector" and rep["num_layers"] == 2
    assert rep["layer_types"] == {"CaskConvolution": 1, "Reformat": 1}
    assert rep["precisions"] == {"FP16": 2} and rep["plugin_layers"] == []
    assert [t["dtype"] for t in rep["io_tensors"]] == ["FP32", "FP16"]


# -- builder log, per-layer profile ---------------------------------------------------------------

#: Recorded INFO/VERBOSE messages of a TensorRT for RTX 1.7.1.116 build of the tiny bfloat16 task.
RTX_BUILD_LINES = [
    "Total Host Persistent Memory: 80 bytes",
    "Total Device Persistent Memory: 0 bytes",
    "Max Scratch Memory: 8376320 bytes",
    "[BlockAssignment] Started assigning block shifts. This will take 1 steps to complete.",
    "Total Activation Memory: 8376320 bytes",
    "Total Weights Memory: 810624 bytes",
    "Disabling unused tactic source: EDGE_MASK_CONVOLUTIONS",
    "Disabling unused tactic source: JIT_CONVOLUTIONS",
    "[MemUsageStats] Peak memory usage of TRT CPU/GPU memory allocators: CPU 0 MiB, GPU 0 MiB",
]


def test_build_log_facts_from_recorded_builder_lines() -> None:
    kept = [line for line in RTX_BUILD_LINES if tr.keep_log_line(line)]
    assert len(kept) == len(RTX_BUILD_LINES) - 1  # the block assignment line is not a fact
    assert tr.build_log_facts(kept) == {
        "memory": {"host_persistent_bytes": 80, "device_persistent_bytes": 0,
                   "max_scratch_bytes": 8376320, "activation_bytes": 8376320, "weights_bytes": 810624,
                   "peak_cpu_mib": 0, "peak_gpu_mib": 0},
        "unused_tactic_sources": ["EDGE_MASK_CONVOLUTIONS", "JIT_CONVOLUTIONS"]}
    assert tr.build_log_facts(["Total Weights Memory: 3 MiB"])["memory"] == {"weights_bytes": 3 << 20}


def test_profiler_is_a_real_iprofiler_and_its_summary_on_recorded_times(built: dict[str, Any]) -> None:
    prof = tr.make_profiler(trt)
    assert isinstance(prof, trt.IProfiler)
    layers = built["runner"].facts["engine_report"]["layers"]
    a, b, c = (x["name"] for x in layers[:3])
    # what TensorRT calls back with after report_to_profiler(), one call per layer and run
    for times in ((0.30, 0.10, 0.05), (0.20, 0.12, 0.05), (0.25, 0.11, 0.07)):
        for name, ms in zip((a, b, c), times):
            prof.report_layer_time(name, ms)
        prof.end_run()
    prof.end_run()  # an empty run is not a run
    s = tr.summarize_layer_profile(prof.runs, layers, top=2)
    assert s["runs"] == 3 and s["layers_timed"] == 3
    assert [t["name"] for t in s["top_layers"]] == [a, b]
    assert s["top_layers"][0]["median_ms"] == pytest.approx(0.25)
    assert s["total_ms_median"] == pytest.approx(0.43)  # run totals 0.45, 0.37, 0.43
    assert sum(e["share"] for e in s["by_precision"].values()) == pytest.approx(1.0)
    assert s["top_layers"][0]["precision"] == layers[0]["precision"]
    assert tr.summarize_layer_profile([], layers)["runs"] == 0


# -- the command line on this machine -------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli-cache")


def test_cli_run_on_cpu_fails_tensorrt_rows_with_build_facts_and_keeps_eager_valid(
        tmp_path: Path, cli_cache: Path) -> None:
    out = tmp_path / "r.json"
    env = {**os.environ, "BENCHBOX_CACHE": str(cli_cache)}
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
        assert rep["build"]["options"]["compute_capabilities"] == [fl.DEFAULT_OFFLINE_CAPABILITY]
        assert rep["build"]["options"]["tf32"] is False
        assert rep["build"]["cache"]["hit"] is False
        assert Path(rep["build"]["cache"]["path"]).parent == cli_cache / "engines"
        assert Path(rep["export_cache"]["path"]).parent == cli_cache / "onnx"
        assert rep["engine_report"]["engine_bytes"] > 0 and rep["engine_report"]["num_layers"] > 0
        assert rep["engine_report"]["source"] == "builder_log"
        # no CUDA driver here: TensorRT cannot judge the engine, so no verdict is recorded
        assert rep["engine_validity_here"]["validity"] is None and not rep["engine_validity_here"]["checked"]
        assert rep["tf32"]["matmul"] == rep["tf32"]["conv"] == "ieee" and rep["tf32"]["true_float32"]
        assert rep["execution"]["executed"] is False
        assert rep["cuda_graphs"]["mode"] == "rtx_whole_graph_capture" and rep["cuda_graphs"]["used"] is None
        assert {"export", "parse", "build"} <= set(rep["prepare_s"])
        assert "jit_warmup" not in rep["prepare_s"]  # nothing ran
        assert e["status"] == "valid" and len(e["samples_ns"]) >= 15


def test_selfcheck_on_a_machine_without_a_gpu_says_it_did_not_execute(tmp_path: Path,
                                                                     cli_cache: Path) -> None:
    out = tmp_path / "sc"
    proc = subprocess.run([sys.executable, "-m", "benchbox", "selfcheck", "--dtype", "float32", "--out-dir",
                           str(out)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "BENCHBOX_CACHE": str(cli_cache)})
    assert proc.returncode == 3, proc.stderr[-2000:]
    verdict = (out / "verdict.txt").read_text()
    assert verdict.strip() in proc.stdout
    lines = verdict.splitlines()
    assert lines[0] == "benchbox selfcheck: runner tensorrt, task decision/tiny (float32), device cuda"
    assert lines[1] == ("verdict: NOT EXECUTED: nothing ran on a GPU here, so no GPU result is measured "
                        "or claimed")
    assert f"tensorrt_rtx {trt.__version__}: 0 of 3 runs executed" in verdict
    why = "not executed: no CUDA device is visible to torch"
    # each run says what it was and that it did not execute, and builds what needs no GPU
    assert ("float32, fixed shapes [device_compute, device_span, device_throughput, model_io_wall, "
            f"public_task_call_wall]: {why}") in verdict
    dynamic_run = "float32, dynamic shapes (task option dynamic_tokens=true) [model_io_wall, device_compute]"
    assert f"{dynamic_run}: {why}" in verdict
    no_graphs = "float32, contract device_compute_no_graphs (cuda_graphs = false) [device_compute_no_graphs]"
    assert f"{no_graphs}: {why}" in verdict
    built = "[passed] build (no GPU needed): engine built for compute capability 8.9"
    builds = [line for line in lines if built in line]
    assert len(builds) == 3 and builds[1].endswith("profile tokens [1, 1]..[1, 128], profile token_mask "
                                                   "[1, 1]..[1, 128]")
    assert "profile" not in builds[0] + builds[2]
    assert verdict.count("[not_run] execution checks") == 3 and "PASSED" not in verdict
    receipts = sorted(p.name for p in out.glob("selfcheck-tensorrt_rtx-*.json"))
    assert receipts == [
        "selfcheck-tensorrt_rtx-dynamic-float32.device_compute.json",
        "selfcheck-tensorrt_rtx-dynamic-float32.model_io_wall.json",
        *[f"selfcheck-tensorrt_rtx-float32.{c}.json" for c in ("device_compute", "device_span",
                                                               "device_throughput", "model_io_wall",
                                                               "public_task_call_wall")],
        "selfcheck-tensorrt_rtx-nographs-float32.json"]  # one contract: no contract in the name
    for name in receipts:
        r = loaded(out / name)
        assert r["results"] and all(row["status"] == "failed" and row["samples_ns"] == []
                                    for row in r["results"])
    dynamic = loaded(out / receipts[0])
    assert dynamic["task"]["options"] == {"dynamic_tokens": True}
