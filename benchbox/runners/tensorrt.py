"""Native TensorRT: one runner, two flavours (TensorRT 10/11 and TensorRT for RTX).

Preparation happens outside every contract, each step a phase the harness times:
``export_key`` and ``export`` or ``export_cache_load`` (the ONNX export, cached on disk),
``parse``, ``build`` or ``engine_cache_load``, ``engine_load`` (deserialization and the
execution context), ``jit_warmup`` (TensorRT for RTX compiles its kernels at the first
inference; full TensorRT initializes lazily there too; every declared shape is run),
``runtime_cache_save`` (RTX), ``layer_profile`` (a diagnostic per-layer profile on its own
execution context) and ``graph_capture``.

The device stages are those of the PyTorch runners, with their transfer rule: ``h2d`` copies
the host arrays into static device memory bound to the engine's tensors (by default one
``packed`` copy into aligned views of one block), on the runner's stream; ``compute`` enqueues
``execute_async_v3`` on that stream (or replays a CUDA graph of it); ``d2h`` copies the outputs
back and synchronizes. So every contract means the same thing for this runner as for the others.

Choices TensorRT leaves open are made for comparability and recorded in the report:
TF32 is off unless asked for (the PyTorch runners compute true float32 matmuls), and CUDA
graphs follow the contract's ``cuda_graphs`` policy, on by default as torch.compile's
max-autotune mode replays CUDA graphs on CUDA.

The runner's parts live beside it: ``tensorrt_flavours`` (which TensorRT), ``tensorrt_options``,
``tensorrt_plans`` (graph plan, shapes, profiles, warm-up), ``tensorrt_build`` and
``tensorrt_cache`` (the build and the engine cache), ``tensorrt_inspect`` (what TensorRT reports),
``tensorrt_runtime`` (context, runtime cache, profile, capture) and ``tensorrt_io`` (the data path).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from benchbox.errors import Setting
from benchbox.runners import precision, transfer
from benchbox.runners import tensorrt_flavours as fl
from benchbox.runners import tensorrt_report as tr
from benchbox.runners.base import Phases
from benchbox.runners.onnx_export import missing_export_packages
from benchbox.runners.tensorrt_build import EngineBuilding
from benchbox.runners.tensorrt_io import EngineIO
from benchbox.runners.tensorrt_options import (
    OPTION_KEYS,
    check_current_target,
    check_flavour_options,
    gpu_of,
    normalize_options,
)
from benchbox.runners.tensorrt_plans import GraphPlan, graph_plan
from benchbox.runners.tensorrt_runtime import EngineRuntime
from benchbox.runners.torch_runner import TorchRunner, cuda_reason

CUDA = Setting("device", "cuda")
NEEDS_CUDA = f"TensorRT needs a CUDA device ({CUDA})"


class TensorRTRunner(EngineBuilding, EngineRuntime, EngineIO, TorchRunner):
    """A TensorRT engine built from the task's model exported to ONNX."""

    name = "tensorrt"
    OPTION_KEYS: tuple[str, ...] | None = OPTION_KEYS
    SUGGESTS = (CUDA,)
    TRANSFERS = transfer.TRANSFERS
    STATIC_INPUTS = True   # the engine reads the addresses bound to it
    SIDE_STREAM = True     # enqueueV3 on the legacy default stream adds synchronizations

    def __init__(self, device: str = "cpu", options: dict[str, Any] | None = None) -> None:
        opts = normalize_options(options)
        gpu = gpu_of(device)
        # the torch base creates a CUDA stream for a cuda device; on a machine without one the
        # runner is only used to gather build facts, so it is set up as a CPU runner
        super().__init__(device if gpu is not None or not device.startswith("cuda") else "cpu", opts)
        self.device = device
        self.choice = fl.resolve_flavour(opts["flavour"])
        self.flavour = self.choice.flavour
        self._gpu: dict[str, Any] | None = gpu
        self._usable_gpu = gpu is not None
        if gpu is not None and self.flavour == "tensorrt_rtx":
            self._usable_gpu = gpu["capability"] in fl.rtx_capabilities(fl.load_module(self.flavour))
        if self.flavour is not None:
            check_flavour_options(self.options, self.flavour)
            check_current_target(self.options, self.flavour, device)
        self._init_state()

    def _init_state(self) -> None:
        self._policy_allows_graphs = True
        self._trt: ModuleType | None = None
        self._log: Any = None
        self._runtime_log: Any = None
        self._runtime: Any = None
        self._engine: Any = None
        self._context: Any = None
        self._runtime_config: Any = None
        self._runtime_cache: Any = None
        self._runtime_cache_path: Path | None = None
        self._engine_key = ""
        self._addresses: dict[str, int] = {}
        self._outputs: list[torch.Tensor] = []
        self._graph: Any = None
        self._plan = GraphPlan("off", "not prepared")
        self._shapes: dict[str, Any] = {}
        self._dynamic: set[str] = set()
        self._bound: dict[str, tuple[int, ...]] = {}
        self._model_dtype = "float32"
        self._network_layers: list[dict[str, Any]] = []
        self._engine_layers: list[dict[str, Any]] | None = None
        self._engine_source: str | None = None
        self._parser_entries: list[dict[str, Any]] = []
        self._graph_entries: list[dict[str, Any]] = []

    # -- options and availability ------------------------------------------------------------
    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Keys and values (also those that depend on the flavour), before anything runs."""
        opts = normalize_options(options)
        transfer.parse_request(cls.name, opts, cls.TRANSFERS, cls.SIDE_STREAM)
        choice = fl.resolve_flavour(opts["flavour"])
        if choice.flavour is not None:
            check_flavour_options(opts, choice.flavour)

    @classmethod
    def check_options_for(cls, device: str, options: dict[str, Any]) -> None:
        """``check_options``, and ``compute_capabilities=current`` against the run's device."""
        cls.check_options(options)
        opts = normalize_options(options)
        choice = fl.resolve_flavour(opts["flavour"])
        if choice.flavour is not None:
            check_current_target(opts, choice.flavour, device)

    @classmethod
    def availability(cls, device: str) -> str | None:
        return cls.availability_for(device, {})

    @classmethod
    def availability_for(cls, device: str, options: dict[str, Any] | None) -> str | None:
        """None when ready; else not installed, no CUDA device, or an unsupported GPU."""
        choice = fl.resolve_flavour(normalize_options(options)["flavour"])
        if choice.flavour is None:
            return choice.missing_reason()
        missing = missing_export_packages()
        if missing:
            return (f"{' and '.join(missing)} (to export the model to ONNX) not installed: "
                    f"pip install 'benchbox-contracts[{fl.FLAVOURS[choice.flavour][1]}]'")
        if not device.startswith("cuda"):
            return NEEDS_CUDA
        reason = cuda_reason(device)
        if reason is not None:
            return reason
        if choice.flavour == "tensorrt_rtx":
            trt = fl.load_module(choice.flavour)
            major, minor = torch.cuda.get_device_capability(device)
            supported = fl.rtx_capabilities(trt)
            if f"{major}.{minor}" not in supported:
                return (f"TensorRT for RTX {trt.__version__} cannot run on "
                        f"{torch.cuda.get_device_name(device)} (compute capability {major}.{minor}); "
                        f"it supports {', '.join(supported)}")
        return None

    def apply_policy(self, policy: Any) -> None:
        """A contract with ``cuda_graphs = false`` turns every CUDA graph off (recorded)."""
        super().apply_policy(policy)
        self._policy_allows_graphs = bool(policy.cuda_graphs)
        if not policy.cuda_graphs:
            if self.options["cuda_graph"] is True:
                self.options["cuda_graph"] = False
                self.facts["policy_applied"]["changed"].append("cuda_graph=False")
            if self.options["cuda_graph_strategy"] == "whole_graph_capture":
                self.options["cuda_graph_strategy"] = "disabled"
                self.facts["policy_applied"]["changed"].append("cuda_graph_strategy=disabled")

    def graph_plan(self, dynamic: bool) -> GraphPlan:
        return graph_plan(str(self.flavour), self.options["cuda_graph"], self.options["cuda_graph_strategy"],
                          self._policy_allows_graphs, dynamic)

    # -- facts ---------------------------------------------------------------------------------
    def versions(self) -> dict[str, str]:
        v = super().versions()
        if self._trt is not None:
            v[fl.FLAVOURS[str(self.flavour)][0]] = str(self._trt.__version__)
            if hasattr(self._trt, "get_nv_onnx_parser_version"):
                v["onnx_parser"] = str(self._trt.get_nv_onnx_parser_version())
        return v

    def report(self) -> dict[str, Any]:
        """The base report; ``fallbacks`` composed from parser, build and capture findings: where
        the engine runs in another precision than the network declares, counted once. The
        float32 layers the model itself declares are ``declared_precision_islands``, apart."""
        self.fallbacks = [*self._parser_entries, *tr.fallback_entries(
            model_dtype=self._model_dtype, network_layers=self._network_layers,
            engine_layers=self._engine_layers, engine_source=self._engine_source), *self._graph_entries]
        if self._network_layers:
            self.facts["declared_precision_islands"] = tr.declared_islands(self._network_layers,
                                                                           self._model_dtype)
        if "build" in self.facts:
            self.facts["tf32"] = precision.tensorrt_tf32(self.facts["build"]["options"].get("tf32"),
                                                         self.device)
        rep = super().report()
        if "build" not in self.facts:
            rep.pop("tf32", None)  # no engine: torch's settings say nothing about it
        return rep

    # -- execution -------------------------------------------------------------------------------
    def prepare(self, task: Any, model: Any, example: tuple[np.ndarray, ...], phases: Phases) -> None:
        if not self._usable_gpu:
            raise RuntimeError(self.availability_for(self.device, self.options) or NEEDS_CUDA)
        with torch.cuda.device(self.device):
            engine_bytes = self.build(task, example, phases, model=model)
            trt = self._trt
            assert trt is not None
            with phases("engine_load"):
                self._load_engine(trt, engine_bytes)
                self._bind(task, self._engine, example)
            self._inspect(trt, self._engine)
            with phases("jit_warmup"):
                # TensorRT for RTX compiles its kernels at the first inference of a shape (and
                # captures its own graph then); full TensorRT initializes lazily. Neither may hide
                # in a timed call.
                self._warm_up(example)
            if self._runtime_cache is not None:
                with phases("runtime_cache_save"):
                    self._save_runtime_cache()
            if self.options["layer_profile"]:
                with phases("layer_profile"):
                    self._layer_profile(example)
            if self._plan.mode == "stream_capture":
                with phases("graph_capture"):
                    self._capture(example)
            else:
                self._graph_as_planned()
            self.facts["execution"] = {"executed": True}

    def compute(self, inputs: Any) -> Any:
        if self._graph is not None:
            with torch.cuda.stream(self._stream):
                self._graph.replay()
            return self._outputs
        if not self._context.execute_async_v3(self._stream.cuda_stream):
            raise RuntimeError("execute_async_v3 failed")
        return self._outputs
