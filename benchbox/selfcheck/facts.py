"""The TensorRT runner's report as the self-check reads it: typed records of the common part of
what the runner writes under a row's ``runner_report`` (engine, build, TF32, runtime, CUDA
graphs, layer profile, network, JIT warm-up, policy).

A receipt keeps these as the runner's own part of its report (``RunnerReport.extra``); the
self-check decodes them into these records (:func:`tensorrt_facts`) and reads attributes. The
receipt's JSON is not changed: the records are read, never written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchbox.receipts.model import RunnerReport
from benchbox.receipts.record import Facts
from benchbox.typed import spec

#: A fact as the runner reported it: any JSON value (a check that needs a kind checks it).
Fact = Any


@dataclass(frozen=True, kw_only=True)
class EngineLayer(Facts):
    """One layer of the engine inspector's listing."""

    name: Fact = spec(omit_none=True)
    type: Fact = spec(omit_none=True)
    precision: Fact = spec(omit_none=True)
    output_types: Fact = spec(omit_none=True)
    unparsed_output_types: Fact = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class EngineReport(Facts):
    """What the built engine holds: its size, layers and their precisions, and where that was read."""

    source: Fact = spec(omit_none=True, description="engine_inspector or builder_log")
    inspector_error: Fact = spec(omit_none=True)
    engine_bytes: Fact = spec(omit_none=True)
    num_layers: Fact = spec(omit_none=True)
    precisions: Fact = spec(omit_none=True)
    layers: tuple[EngineLayer, ...] | None = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class OptimizationProfile(Facts):
    """One dynamic input's shape range."""

    input: Fact = spec(omit_none=True)
    min: Fact = spec(omit_none=True)
    max: Fact = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class BuildOptions(Facts):
    """The options the engine was built with."""

    compute_capabilities: Fact = spec(omit_none=True)
    tf32: Fact = spec(omit_none=True)
    optimization_profiles: tuple[OptimizationProfile, ...] | None = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class EngineCache(Facts):
    """Where the engine is cached."""

    path: Fact = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class BuildFacts(Facts):
    """The engine build: its options and its cache entry."""

    options: BuildOptions | None = spec(omit_none=True)
    cache: EngineCache | None = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class Tf32Facts(Facts):
    """Whether TF32 was on in float32 matmuls and convolutions, as read back."""

    matmul: Fact = spec(omit_none=True)
    conv: Fact = spec(omit_none=True)
    source: Fact = spec(omit_none=True)
    note: Fact = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class RuntimeCache(Facts):
    """TensorRT for RTX's runtime cache: whether it was on, found, loaded and saved."""

    enabled: Fact = spec(omit_none=True)
    found: Fact = spec(omit_none=True)
    loaded_bytes: Fact = spec(omit_none=True)
    saved_bytes: Fact = spec(omit_none=True)
    why: Fact = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class RuntimeFacts(Facts):
    """The runtime's settings: its cache and (RTX) its strategies."""

    runtime_cache: RuntimeCache | None = spec(omit_none=True)
    dynamic_shapes_kernel_specialization_strategy: Fact = spec(omit_none=True)
    cuda_graph_strategy: Fact = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class CudaGraphs(Facts):
    """The CUDA graph plan and what was used."""

    mode: Fact = spec(omit_none=True)
    used: Fact = spec(omit_none=True)
    why: Fact = spec(omit_none=True)
    used_how: Fact = spec(omit_none=True)
    warnings: Fact = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class ProfiledLayer(Facts):
    """One layer of the per-layer profile's slowest."""

    name: Fact = spec(omit_none=True)
    precision: Fact = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class LayerProfile(Facts):
    """TensorRT's own per-layer times (the diagnostic pass), or why there are none."""

    error: Fact = spec(omit_none=True)
    runs: Fact = spec(omit_none=True)
    layers_timed: Fact = spec(omit_none=True)
    total_ms_median: Fact = spec(omit_none=True)
    top_layers: tuple[ProfiledLayer, ...] | None = spec(omit_none=True)

    @property
    def top(self) -> ProfiledLayer:
        """The slowest layer (an empty record: none listed)."""
        return self.top_layers[0] if self.top_layers else ProfiledLayer()


@dataclass(frozen=True, kw_only=True)
class NetworkFacts(Facts):
    """The parsed network: its layer types and their counts."""

    layer_types: Fact = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class JitWarmup(Facts):
    """The JIT warm-up phase: its calls and the shapes it ran."""

    calls: Fact = spec(omit_none=True)
    shapes: Fact = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class PolicyApplied(Facts):
    """What the contract's policy changed in the runner."""

    cuda_graphs_allowed: Fact = spec(omit_none=True)
    changed: Fact = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class TensorRTFacts(Facts):
    """The common part of the TensorRT runner's report."""

    flavour: Fact = spec(omit_none=True)
    flavour_version: Fact = spec(omit_none=True)
    unavailable: Fact = spec(omit_none=True)
    build_error: Fact = spec(omit_none=True)
    facts_error: Fact = spec(omit_none=True)
    options: Fact = spec(omit_none=True)
    prepare_s: Fact = spec(omit_none=True)
    engine_report: EngineReport | None = spec(omit_none=True)
    build: BuildFacts | None = spec(omit_none=True)
    tf32: Tf32Facts | None = spec(omit_none=True)
    runtime: RuntimeFacts | None = spec(omit_none=True)
    cuda_graphs: CudaGraphs | None = spec(omit_none=True)
    layer_profile: LayerProfile | None = spec(omit_none=True)
    network: NetworkFacts | None = spec(omit_none=True)
    jit_warmup: JitWarmup | None = spec(omit_none=True)
    policy_applied: PolicyApplied | None = spec(omit_none=True)

    @property
    def asked_tf32(self) -> bool:
        """Whether the runner's options asked for TF32."""
        return isinstance(self.options, Mapping) and "tf32" in self.options and bool(self.options["tf32"])

    @property
    def engine(self) -> EngineReport:
        return self.engine_report or EngineReport()

    @property
    def graphs(self) -> CudaGraphs:
        return self.cuda_graphs or CudaGraphs()

    @property
    def profile(self) -> LayerProfile:
        return self.layer_profile or LayerProfile()

    @property
    def runtime_settings(self) -> RuntimeFacts:
        return self.runtime or RuntimeFacts()

    @property
    def runtime_cache(self) -> RuntimeCache:
        return self.runtime_settings.runtime_cache or RuntimeCache()

    @property
    def layer_types(self) -> Any:
        return (self.network.layer_types if self.network is not None else None) or {}

    @property
    def warmed_shapes(self) -> Any:
        return (self.jit_warmup.shapes if self.jit_warmup is not None else None) or []

    @property
    def engine_path(self) -> str:
        cache = self.build.cache if self.build is not None else None
        return str((cache.path if cache is not None else None) or "")

    @property
    def build_options(self) -> BuildOptions:
        return (self.build.options if self.build is not None else None) or BuildOptions()

    @property
    def profiles(self) -> tuple[OptimizationProfile, ...]:
        return self.build_options.optimization_profiles or ()


def tensorrt_facts(report: RunnerReport | None) -> TensorRTFacts:
    """The TensorRT part of a row's runner report (empty when there is none)."""
    return TensorRTFacts.of(report.to_json()) if report is not None else TensorRTFacts()
