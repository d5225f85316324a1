"""The self-check's checks: each reads the typed receipts of a run (and the TensorRT part of their
runner report, :mod:`benchbox.selfcheck.facts`) and returns one :class:`Check`; none measures
anything.

Every check can fail on what it guards (``tests/runners/test_selfcheck.py`` shows each one
failing). The timing sanity check compares two clocks that share nothing: the harness's
device events around ``compute`` (``device_compute``) and TensorRT's own per-layer times
(``IProfiler``, in the diagnostic ``layer_profile`` pass). A region that brackets no work, or
an engine that does none, fails it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the records are imported where they are read: importing the package stays cheap
    from benchbox.receipts.model import Receipt, ResultRow
    from benchbox.selfcheck.facts import TensorRTFacts

DEVICE_CONTRACTS = ("device_compute", "device_span", "device_throughput")
#: what only execution shows, per kind of run
EXECUTION_CHECKS: dict[str, tuple[str, ...]] = {
    "fixed": ("accuracy gates", "engine inspector report", "device clock cross-check",
              "model_io_wall < public_task_call_wall", "jit_warmup phase", "RTX runtime cache",
              "CUDA graphs", "per-layer profile", "timing sanity", "trtexec"),
    "dynamic": ("accuracy gates on cases of several token lengths", "device clock cross-check",
                "every declared shape warmed", "RTX shape specialization eager"),
    "no_graphs": ("accuracy gates", "device clock cross-check", "CUDA graphs off"),
}
#: the device-clock time of the engine must be this share of TensorRT's own layer times
TIMING_RANGE = (0.5, 1.5)
#: network layer types that move or reinterpret data and compute nothing
DATA_MOVEMENT = frozenset({"IDENTITY", "SHUFFLE", "CONSTANT", "CAST", "SLICE", "CONCATENATION", "GATHER",
                           "SCATTER", "PADDING", "SQUEEZE", "UNSQUEEZE", "SHAPE", "ASSERTION", "FILL"})


@dataclass(frozen=True)
class Check:
    """One check of one run: ``passed``, ``failed``, ``warning`` or ``not_run``."""

    name: str
    status: str
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


Receipts = Mapping[str, "Receipt"]


def rows(receipts: Receipts) -> list[tuple[str, ResultRow]]:
    return [(name, row) for name, r in receipts.items() for row in r.results]


def runner_report(receipts: Receipts) -> TensorRTFacts:
    """The TensorRT part of the first runner report that says anything (empty: none does)."""
    from benchbox.selfcheck.facts import TensorRTFacts, tensorrt_facts

    for _, row in rows(receipts):
        if row.runner_report.to_json():
            return tensorrt_facts(row.runner_report)
    return TensorRTFacts()


def check_build(report: TensorRTFacts) -> Check:
    """The export, parse and engine build: what needs no GPU."""
    if report.flavour is None:
        return Check("build (no GPU needed)", "not_run", "no TensorRT flavour to build with")
    error = report.build_error or report.facts_error
    if error:
        return Check("build (no GPU needed)", "failed", str(error))
    er = report.engine
    opts = report.build_options
    if not er.engine_bytes:
        return Check("build (no GPU needed)", "failed", "no engine in the report")
    target = f" for compute capability {', '.join(opts.compute_capabilities)}" \
        if opts.compute_capabilities else ""
    profiles = "".join(f", profile {p.input} {p.min}..{p.max}" for p in report.profiles if p.min != p.max)
    return Check("build (no GPU needed)", "passed",
                 f"engine built{target}: {er.engine_bytes:,} bytes, {er.num_layers} layers "
                 f"({er.source}), tf32 {opts.tf32}{profiles}")


def check_executed(receipts: Receipts) -> Check:
    bad = [(c, r) for c, r in rows(receipts) if r.status == "failed"]
    if not bad:
        return Check("runner executed every contract and case", "passed", f"{len(rows(receipts))} results")
    c, r = bad[0]
    reasons = "; ".join(r.reasons)
    return Check("runner executed every contract and case", "failed",
                 f"{len(bad)} failed result(s); first {r.case} [{c}]: {reasons}")


def check_accuracy(receipts: Receipts) -> Check:
    found = [(c, r, r.accuracy) for c, r in rows(receipts) if r.accuracy is not None]
    if not found:
        return Check("accuracy gates", "not_run", "no validated result")
    failed = [(c, r) for c, r, acc in found if not acc.passed]
    worst: dict[str, float] = {}
    for _, _, acc in found:
        for g in acc.gates or ():
            if isinstance(g.value, float):
                worst[g.name] = max(worst.get(g.name, 0.0), g.value)
    detail = ", ".join(f"worst {k} {v:.3g}" for k, v in sorted(worst.items()))
    if failed:
        c, r = failed[0]
        return Check("accuracy gates", "failed", f"{len(failed)} result(s) invalid; first {r.case} "
                     f"[{c}]: {'; '.join(r.reasons)}")
    return Check("accuracy gates", "passed", detail)


def check_inspector(report: TensorRTFacts) -> Check:
    """The engine inspector's report, with every layer's precision understood."""
    er = report.engine
    if er.source != "engine_inspector":
        why = er.inspector_error or f"the report comes from {er.source}"
        return Check("engine inspector report", "failed", why)
    layers = er.layers or ()
    if not layers:
        return Check("engine inspector report", "failed", "the inspector listed no layers")
    unknown = [x for x in layers if not x.precision]
    if unknown:
        ex = unknown[0]
        return Check("engine inspector report", "failed",
                     f"{len(unknown)} of {len(layers)} layers without a precision; e.g. {ex.name!r} "
                     f"({ex.type}): {ex.unparsed_output_types or ex.output_types}")
    return Check("engine inspector report", "passed",
                 f"{len(layers)} layers, precisions {er.precisions}")


def check_clock(receipts: Receipts) -> Check:
    found = [(c, r) for c, r in rows(receipts)
             if c.startswith(DEVICE_CONTRACTS) and r.status != "failed"]
    if not found:
        return Check("device clock cross-check", "not_run", "no device-clock result")
    host = [(c, r) for c, r in found if r.clock_used != "device"]
    if host:
        c, r = host[0]
        return Check("device clock cross-check", "failed",
                     f"{r.case} [{c}] used the {r.clock_used} clock: {r.clock_note}")
    bad = [(c, r, r.clock_cross_check) for c, r in found
           if r.clock_cross_check is not None and r.clock_cross_check.violations]
    if bad:
        c, r, x = bad[0]
        return Check("device clock cross-check", "failed",
                     f"{r.case} [{c}]: {x.violations} of {x.samples} samples exceed the "
                     f"host span {x.host_span}")
    return Check("device clock cross-check", "passed", f"{len(found)} results, no violation")


def p50s(receipts: Receipts, contract: str) -> dict[str, int]:
    """Case → p50 (ns) of the contract's results that did not fail."""
    results = receipts[contract].results if contract in receipts else ()
    return {r.case: r.summary.p50_ns for r in results
            if r.status != "failed" and r.summary.p50_ns is not None}


def check_region_order(receipts: Receipts) -> Check:
    """model_io_wall (h2d..d2h) must be shorter than the public call that contains it."""
    inner, outer = p50s(receipts, "model_io_wall"), p50s(receipts, "public_task_call_wall")
    cases = sorted(set(inner) & set(outer))
    if not cases:
        return Check("model_io_wall < public_task_call_wall", "not_run", "no pair of results")
    bad = [c for c in cases if not inner[c] < outer[c]]
    if bad:
        c = bad[0]
        return Check("model_io_wall < public_task_call_wall", "failed",
                     f"{len(bad)} case(s); {c}: p50 {inner[c] / 1e6:.3f} ms ≥ {outer[c] / 1e6:.3f} ms")
    return Check("model_io_wall < public_task_call_wall", "passed",
                 ", ".join(f"{c} {inner[c] / 1e6:.3f} < {outer[c] / 1e6:.3f} ms" for c in cases))


def check_tf32(report: TensorRTFacts) -> Check:
    """TF32 off in the float32 matmuls and convolutions of a float32 build (the builder flag, read
    back); on only where the option asked for it."""
    name = "TF32 off for float32"
    rec = report.tf32
    if rec is None or rec.matmul is None or rec.conv is None:
        return Check(name, "failed", "the report does not say whether TF32 was on in matmuls and "
                                     "convolutions")
    on = [what for what, value in (("matmul", rec.matmul), ("conv", rec.conv)) if value == "tf32"]
    if not on:
        return Check(name, "passed", f"off in matmuls and convolutions ({rec.source}): true float32")
    if report.asked_tf32:
        return Check(name, "warning", f"on in {', '.join(on)}, as option tf32=true asked: float32 results "
                                      "are not like for like with true-float32 runners")
    return Check(name, "failed", f"on in {', '.join(on)}, not asked for: {rec.note}")


def _runtime_cache(report: TensorRTFacts) -> Check:
    rc = report.runtime_cache
    ok = rc.enabled and (rc.saved_bytes or 0) > 0
    loaded = rc.loaded_bytes if rc.loaded_bytes is not None or "loaded_bytes" in rc.nulls else 0
    return Check("RTX runtime cache", "passed" if ok else "failed",
                 f"loaded {loaded} bytes (found: {rc.found}), saved "
                 f"{rc.saved_bytes} bytes" if rc.enabled else str(rc.why))


def check_preparation(report: TensorRTFacts, flavour: str, dtype: str = "float32") -> list[Check]:
    """jit_warmup timed as a phase, RTX's runtime cache, CUDA graphs, the layer profile, and
    TF32 off for a float32 model."""
    out = [check_tf32(report)] if dtype == "float32" else []
    prep = report.prepare_s if isinstance(report.prepare_s, Mapping) else {}
    out.append(Check("jit_warmup is a timed preparation phase",
                     "passed" if "jit_warmup" in prep else "failed",
                     f"{prep['jit_warmup']:.3f} s" if "jit_warmup" in prep else "no jit_warmup phase"))
    if flavour == "tensorrt_rtx":
        out.append(_runtime_cache(report))
    g = report.graphs
    if g.warnings:
        out.append(Check("CUDA graphs", "warning", "; ".join(g.warnings)))
    else:
        how = f"; {g.used_how}" if g.used_how else ""
        out.append(Check("CUDA graphs", "passed", f"{g.used} ({g.why}){how}"))
    lp = report.profile
    if lp.error or not lp.runs:
        out.append(Check("per-layer profile (diagnostic)", "warning", str(lp.error or "no profile")))
    else:
        top = lp.top
        out.append(Check("per-layer profile (diagnostic)", "passed",
                         f"{lp.layers_timed} layers over {lp.runs} runs, median total "
                         f"{lp.total_ms_median:.3f} ms; top {top.name} ({top.precision})"))
    return out


def check_timing(receipts: Receipts, report: TensorRTFacts) -> Check:
    """``device_compute`` p50 within TIMING_RANGE of TensorRT's own per-layer total, for an engine
    that computes something the device clock can resolve: a region that brackets no work, or an
    engine that does none, fails."""
    name = "timing sanity: device_compute vs TensorRT's per-layer total"
    compute = p50s(receipts, "device_compute")
    if not compute:
        return Check(name, "not_run", "no device_compute result")
    layer_types = report.layer_types
    arithmetic = sorted(set(layer_types) - DATA_MOVEMENT)
    if not arithmetic:
        types = ", ".join(layer_types) or "none"
        return Check(name, "failed", f"the network computes nothing (layer types: {types}): a null-work "
                                     "engine, whose times say nothing about the runner")
    lp = report.profile
    total = lp.total_ms_median
    if lp.error or not lp.layers_timed or not isinstance(total, int | float):
        return Check(name, "failed", "no per-layer profile to hold the device clock against: "
                                     f"{lp.error or 'TensorRT timed no layer'}")
    total_ns = total * 1e6
    cal = receipts["device_compute"].calibration
    floor = cal.floor("device")
    multiple = cal.floor_multiple or 3.0
    if isinstance(floor, int | float) and total_ns < multiple * floor:
        return Check(name, "failed", f"TensorRT's layers total {total_ns / 1e3:.1f} µs, under {multiple:g}× "
                                     f"the device clock's floor ({floor / 1e3:.1f} µs): too little work to "
                                     "check (or none)")
    case = next(iter(compute))  # the first case: the example the profile ran
    ratio = compute[case] / total_ns
    lo, hi = TIMING_RANGE
    detail = (f"{case}: device_compute p50 {compute[case] / 1e3:.1f} µs is {ratio:.2f}× TensorRT's per-layer "
              f"total {total_ns / 1e3:.1f} µs (expected {lo:g}×..{hi:g}×)")
    if not lo <= ratio <= hi:
        return Check(name, "failed", detail + ": the device-clock region does not bracket the engine's work")
    return Check(name, "passed", detail)


def check_dynamic(report: TensorRTFacts, flavour: str) -> Check:
    """A dynamic-shape engine: its profile, every declared shape warmed before sampling, and for
    RTX shape-specialized kernels compiled eagerly (never in the background during samples)."""
    name = "dynamic shapes"
    profiles = report.profiles
    if not profiles:
        return Check(name, "failed", "the engine has no optimization profile: the shapes were fixed")
    shapes = report.warmed_shapes
    if len(shapes) < 2:
        return Check(name, "failed", f"jit_warmup ran {len(shapes)} shape(s); every declared shape must be")
    detail = f"{len(profiles)} dynamic input(s), {len(shapes)} shapes warmed"
    if flavour == "tensorrt_rtx":
        strategy = report.runtime_settings.dynamic_shapes_kernel_specialization_strategy
        if strategy != "EAGER":
            return Check(name, "failed", f"shape specialization {strategy}, not EAGER: kernels may compile "
                                         "in the background while samples run")
        detail += ", shape specialization EAGER"
    return Check(name, "passed", detail)


def check_no_graphs(report: TensorRTFacts) -> Check:
    """A contract with ``cuda_graphs = false``: no CUDA graph of either kind, recorded."""
    name = "CUDA graphs off under cuda_graphs = false"
    g = report.graphs
    allowed = report.policy_applied.cuda_graphs_allowed if report.policy_applied is not None else None
    if allowed is not False or g.mode != "off" or g.used != "off":
        return Check(name, "failed", f"policy allowed {allowed}, plan {g.mode}, used {g.used}")
    strategy = report.runtime_settings.cuda_graph_strategy
    return Check(name, "passed", f"plan off ({g.why})"
                 + (f", RTX cuda_graph_strategy {strategy}" if strategy else ""))


def check_run(receipts: Receipts, flavour: str, kind: str = "fixed",
              dtype: str = "float32") -> tuple[bool, str, list[Check]]:
    """(executed, why not, checks) of one run's receipts (``kind``: fixed, dynamic, no_graphs)."""
    report = runner_report(receipts)
    checks = [check_build(report)]
    unavailable = report.unavailable
    if unavailable:
        checks.append(Check("execution checks", "not_run", ", ".join(EXECUTION_CHECKS[kind])
                            + " (they need the engine to run)"))
        return False, str(unavailable), checks
    checks += [check_executed(receipts), check_accuracy(receipts), check_clock(receipts)]
    if kind == "fixed":
        checks += [check_inspector(report), check_region_order(receipts),
                   *check_preparation(report, flavour, dtype), check_timing(receipts, report)]
    elif kind == "dynamic":
        checks.append(check_dynamic(report, flavour))
    else:
        checks.append(check_no_graphs(report))
    return True, "", checks
