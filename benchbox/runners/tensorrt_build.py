"""The engine build: export (or the export cache), parse, builder configuration, build (or the
engine cache), and the facts each step records. Nothing here needs a GPU.

``EngineBuilding`` is the part of :class:`~benchbox.runners.tensorrt.TensorRTRunner` that
builds; it reads the runner's ``options``, ``flavour``, ``choice`` and GPU facts and writes
its ``facts``.
"""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from benchbox.errors import MissingExtraError, UsageError
from benchbox.runners import tensorrt_cache as cache
from benchbox.runners import tensorrt_flavours as fl
from benchbox.runners import tensorrt_inspect as ti
from benchbox.runners import tensorrt_report as tr
from benchbox.runners.base import Phases
from benchbox.runners.onnx_export import OnnxExport, load_or_export
from benchbox.runners.tensorrt_flavours import (
    DEFAULT_OFFLINE_CAPABILITY,
    TensorRTBuildError,
    error_line,
    rtx_capabilities,
)
from benchbox.runners.tensorrt_inspect import tactic_source_names
from benchbox.runners.tensorrt_options import default_cache_root
from benchbox.runners.tensorrt_plans import add_optimization_profiles, checked_input_shapes

#: bump when the engine build changes in a way the hashed builder code does not show
BUILD_CODE_REVISION = 2


def configure_builder(trt: ModuleType, builder: Any, network: Any, config: Any, *, flavour: str,
                      capabilities: list[str] | None, tf32: bool, optimization_level: int | None,
                      require_user_allocation: bool, input_shapes: dict[str, Any]
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Set every builder choice explicitly; returns (build options as read back from the
    config, builder facts that do not change the engine: defaults seen, tactic sources)."""
    defaults = {"tf32": bool(config.get_flag(trt.BuilderFlag.TF32)),
                "builder_optimization_level": int(config.builder_optimization_level)}
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    if tf32:
        config.set_flag(trt.BuilderFlag.TF32)
    else:
        config.clear_flag(trt.BuilderFlag.TF32)
    if optimization_level is not None:
        config.builder_optimization_level = optimization_level
    opts: dict[str, Any] = {"strongly_typed": True, "profiling_verbosity": "DETAILED",
                            "tf32": bool(config.get_flag(trt.BuilderFlag.TF32)),
                            "builder_optimization_level": int(config.builder_optimization_level)}
    if flavour == "tensorrt_rtx":
        members = rtx_capabilities(trt)
        ccs = capabilities or [DEFAULT_OFFLINE_CAPABILITY]
        config.num_compute_capabilities = len(ccs)
        for i, c in enumerate(ccs):
            member = trt.ComputeCapability.CURRENT if c == "current" else members[c]
            if not config.set_compute_capability(member, i):
                raise TensorRTBuildError(f"TensorRT for RTX refused compute capability {c}")
        opts["compute_capabilities"] = ccs
    if require_user_allocation:
        flag = getattr(trt.BuilderFlag, "REQUIRE_USER_ALLOCATION", None)
        if flag is None:
            raise TensorRTBuildError(f"{flavour} has no REQUIRE_USER_ALLOCATION builder flag, which a "
                                     "stream capture of a TensorRT for RTX engine needs")
        config.set_flag(flag)
    opts["require_user_allocation"] = require_user_allocation
    opts["optimization_profiles"] = add_optimization_profiles(trt, builder, network, config, input_shapes)
    facts = {"builder_defaults": defaults,
             "tactic_sources_enabled": tactic_source_names(trt, config.get_tactic_sources())}
    return opts, facts


def build_code_version() -> str:
    """A hash of the code that configures the builder and of ``BUILD_CODE_REVISION``."""
    src = "".join(inspect.getsource(f) for f in (configure_builder, add_optimization_profiles))
    return hashlib.sha256(f"{BUILD_CODE_REVISION}\n{src}".encode()).hexdigest()[:16]


class EngineBuilding:
    """Export, parse and build, for the TensorRT runner (which provides the attributes below)."""

    options: dict[str, Any]
    facts: dict[str, Any]
    flavour: str | None
    choice: fl.FlavourChoice
    _gpu: dict[str, Any] | None
    _usable_gpu: bool
    _trt: ModuleType | None
    _log: Any
    _plan: Any
    _shapes: dict[str, Any]
    _engine_key: str
    _model_dtype: str
    _network_layers: list[dict[str, Any]]
    _engine_layers: list[dict[str, Any]] | None
    _engine_source: str | None
    _parser_entries: list[dict[str, Any]]

    def _rtx_targets(self, trt: ModuleType) -> tuple[list[str], str]:
        usable = self._gpu["capability"] if self._usable_gpu and self._gpu else None
        return fl.target_capabilities(self.options["compute_capabilities"], rtx_capabilities(trt), usable,
                                      self._gpu, str(trt.__version__))

    def _key_device(self, capabilities: list[str] | None) -> dict[str, Any]:
        """What of this run's GPU decides the engine: full TensorRT builds for the GPU it runs on;
        an RTX engine depends on the GPU only when built for ``current``."""
        if self.flavour == "tensorrt_rtx":
            return {"capability": self._gpu["capability"]} if capabilities == ["current"] and self._gpu \
                else {}
        return dict(self._gpu or {"name": None, "capability": None})

    def _cache_root(self) -> Path:
        return Path(self.options["cache_dir"]) if self.options["cache_dir"] else default_cache_root()

    def _set_engine_layers(self, layers: list[dict[str, Any]] | None, source: str | None) -> None:
        self._engine_layers, self._engine_source = layers, source

    def build(self, task: Any, example: tuple[np.ndarray, ...], phases: Phases,
              exported: OnnxExport | None = None, model: Any = None) -> bytes:
        """Export (or load the export), parse, build (or load the engine); fills ``facts``.

        ``model`` defaults to ``task.build_model()``; ``exported`` skips the export.
        Returns the serialized engine.
        """
        if self.flavour is None:
            raise TensorRTBuildError(self.choice.missing_reason())
        trt = self._begin_build(task, example)
        ccs, cc_why = self._rtx_targets(trt) if self.flavour == "tensorrt_rtx" else (None, None)
        root = self._cache_root()
        exported = self._export(task, example, phases, exported, model, root)
        log = self._log = ti.collecting_logger(trt)
        builder, network = self._parse(trt, log, exported, phases)
        net = ti.network_report(network)
        self._network_layers = net["layers"]
        self.facts["network"] = {k: net[k] for k in ("num_layers", "layer_types", "precisions",
                                                     "plugin_layers", "io_tensors")}
        engine, listing = self._build_or_load(trt, builder, network, exported, ccs, cc_why, root, phases)
        layers = listing["layers"] if listing else None
        if layers:
            self._set_engine_layers(layers, "builder_log")
            report = {"source": "builder_log", **tr.summarize_layers(layers),
                      "io_tensors": listing["io_tensors"] or net["io_tensors"]}
        else:
            self._set_engine_layers(None, None)
            report = dict(net)
        self.facts["engine_report"] = {**report, "engine_bytes": len(engine),
                                       "engine_sha256": hashlib.sha256(engine).hexdigest()}
        self.facts["builder_log"] = list(log.messages)  # the build's own; runtime messages are apart
        return engine

    def _begin_build(self, task: Any, example: tuple[np.ndarray, ...]) -> ModuleType:
        """Load the flavour's module; record the flavour, the input shapes and the CUDA graph plan."""
        trt = self._trt = fl.load_module(str(self.flavour))
        self._model_dtype = str(task.dtype)
        self.facts.update({"flavour": self.flavour, "flavour_requested": self.options["flavour"],
                           "flavour_version": str(trt.__version__),
                           "flavour_resolution": self.choice.to_dict()})
        shapes = self._shapes = checked_input_shapes(task, example)
        dynamic = any(s.dynamic_axes for s in shapes.values())
        self._plan = self.graph_plan(dynamic)
        self.facts["cuda_graphs"] = {**self._plan.to_dict(), "used": None, "warnings": []}
        return trt

    def _export(self, task: Any, example: tuple[np.ndarray, ...], phases: Phases,
                exported: OnnxExport | None, model: Any, root: Path) -> OnnxExport:
        """``exported``, or the model's export from the export cache or made now; facts recorded."""
        if exported is None:
            exported, export_cache = load_or_export(
                task, example, model=model if model is not None else task.build_model(),
                opset=self.options["opset"], cache_dir=root / "onnx" if self.options["cache"] else None,
                phases=phases, input_shapes=self._shapes)
            self.facts["export_cache"] = export_cache
        self.facts["onnx"] = exported.facts
        return exported

    def _parse(self, trt: ModuleType, log: Any, exported: OnnxExport, phases: Phases) -> tuple[Any, Any]:
        """(builder, network) parsed from the ONNX model; parser errors recorded, and raised as a
        TensorRTBuildError (with the nodes TensorRT does not support) when the parse failed."""
        with phases("parse"):
            builder = trt.Builder(log)
            flag = getattr(trt.NetworkDefinitionCreationFlag, ti.STRONGLY_TYPED)
            network = builder.create_network(1 << int(flag))
            parser = trt.OnnxParser(network, log)
            parsed = parser.parse(exported.model)
        errors = []
        for i in range(parser.num_errors):
            e = parser.get_error(i)
            errors.append({"node": int(e.node()), "node_name": str(e.node_name()),
                           "op": str(e.node_operator()), "code": str(e.code()).split(".")[-1],
                           "description": str(e.desc())})
        self.facts["parser"] = {"ok": bool(parsed), "num_errors": len(errors), "errors": errors,
                                "unsupported_nodes": []}
        self._parser_entries = [{"kind": "parser_error", **e, "phase": "parse"} for e in errors]
        if not parsed:
            try:
                nodes = ti.unsupported_nodes(trt, exported.model)
            except Exception as e:  # the support query is a diagnosis; the parse error stands
                nodes = []
                self.facts["parser"]["unsupported_nodes_error"] = error_line(e)
            self.facts["parser"]["unsupported_nodes"] = nodes
            self._parser_entries += tr.unsupported_entries(nodes)
            first = errors[0] if errors else {"op": "?", "node_name": "?", "description": "unknown"}
            raise TensorRTBuildError(f"the ONNX parser failed on {len(errors)} node(s); first: "
                                     f"{first['op']} node {first['node_name']!r}: {first['description']}")
        return builder, network

    def _build_or_load(self, trt: ModuleType, builder: Any, network: Any, exported: OnnxExport,
                       ccs: list[str] | None, cc_why: str | None, root: Path,
                       phases: Phases) -> tuple[bytes, dict[str, Any] | None]:
        """The engine from the engine cache or built now, and the builder's layer listing (None
        when it has none); ``facts["build"]`` recorded."""
        config = builder.create_builder_config()
        build_options, builder_facts = configure_builder(
            trt, builder, network, config, flavour=str(self.flavour), capabilities=ccs,
            tf32=self.options["tf32"], optimization_level=self.options["builder_optimization_level"],
            require_user_allocation=self.flavour == "tensorrt_rtx" and self._plan.mode == "stream_capture",
            input_shapes=self._shapes)
        device = self._key_device(ccs)
        code_version = build_code_version()
        key = self._engine_key = cache.engine_cache_key(
            onnx_sha256=exported.sha256, flavour=str(self.flavour), version=str(trt.__version__),
            build_options=build_options, device=device, code_version=code_version)
        path = root / "engines" / f"{key}.engine"
        engine, side, cache_note = cache.load_entry(path, bool(self.options["cache"]), phases)
        hit = side is not None
        if side is None:
            engine, side = self._build_engine(builder, network, config, path, phases)
        # the side file keeps the builder's own text; it is parsed here, by this code, on every load
        listing = tr.parse_layer_listing(side["layer_listing"]) if side["layer_listing"] else None
        log_facts = tr.build_log_facts(side["build_log_lines"])
        unused = list(log_facts.get("unused_tactic_sources", []))
        enabled = builder_facts["tactic_sources_enabled"]
        self.facts["build"] = {
            "options": build_options,
            "compute_capabilities_from": cc_why,
            "builder_defaults": builder_facts["builder_defaults"],
            "tactic_sources": {"enabled": enabled, "unused_disabled_by_builder": unused,
                               "used": [t for t in enabled if t not in unused]},
            "memory": log_facts.get("memory", {}),
            "messages": side.get("build_messages", []),
            "device": device, "code_version": code_version,
            "cache": {"enabled": bool(self.options["cache"]), "hit": hit, "key": key, "path": str(path),
                      **({"rebuilt": cache_note} if cache_note else {})}}
        return engine, listing

    def _build_engine(self, builder: Any, network: Any, config: Any, path: Path,
                      phases: Phases) -> tuple[bytes, dict[str, Any]]:
        """Build the engine; cache it with the builder's raw layer listing and log lines."""
        log = self._log
        with phases("build"):
            serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            errs = log.errors()
            raise TensorRTBuildError("the engine build failed: " + (errs[0] if errs else "no message"))
        engine = bytes(memoryview(serialized))
        side = cache.side_facts(engine, log)
        if self.options["cache"]:
            cache.store_entry(path, engine, side)
        return engine, side

    def gather_facts(self, task: Any, example: tuple[np.ndarray, ...], phases: Phases) -> dict[str, Any]:
        """What can be learnt without running: export, parse, build, engine report; never timings."""
        if self.flavour is None:
            return {"flavour": None, "flavour_requested": self.options["flavour"],
                    "flavour_resolution": self.choice.to_dict()}
        try:
            engine = self.build(task, example, phases)
        except MissingExtraError as e:
            self.facts["build_error"] = str(e)
            return self.report()
        except UsageError:
            raise
        except Exception as e:  # export, parse or build: keep what was learnt before it
            self.facts["build_error"] = error_line(e)
            return self.report()
        validity = ti.engine_validity(self._trt, engine, ti.cuda_driver())  # type: ignore[arg-type]
        if validity is not None:
            self.facts["engine_validity_here"] = validity
        self.facts["execution"] = {"executed": False, "why": "no GPU this flavour runs on is usable here; "
                                                             "only build facts were gathered"}
        return self.report()
