"""What torch.compile did, read from the compiler's own structures.

Used by the torch-compile runner. During each compile phase a ``CompileObserver``
collects, without reading any clock and without scraping stderr:

- the deltas of ``torch._dynamo.utils.counters`` (graph breaks with their reasons,
  FX graph / AOT autograd cache hits and misses, CUDA-graph skips, extern calls);
- the frame records dynamo appends to its compilation metrics (recompile reasons,
  CUDA-graph skip messages);
- the structured-trace artifacts ``torch._logging`` emits (the generated output
  code, graph-break locations, recompile reasons);
- the autotuner's timings per tuned operator, through
  ``torch._inductor.select_algorithm.add_feedback_saver``.

``fallback_entries`` then turns one phase's record into the ``fallbacks`` list of
the runner report.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from benchbox.errors import first_line
from benchbox.fallbacks import kernel_label

#: A call to an ATen/extern operator in inductor's generated Python wrapper code.
_EXTERN_CALL = re.compile(r"\bextern_kernels\.(\w+)\(")
_OP_CALL = re.compile(r"\btorch\.ops\.(\w+)\.(\w+)\.(\w+)\(")
#: internal helper namespaces of inductor's wrapper, not operators of the model
_INTERNAL_NAMESPACES = frozenset({"inductor", "prims_internal"})
_MAX_TEXT = 1000


@dataclass
class PhaseRecord:
    """Everything observed during one compile phase."""

    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    frames: list[dict[str, Any]] = field(default_factory=list)
    output_code: list[str] = field(default_factory=list)
    graph_break_locations: list[str] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)
    cache_bypass: list[str] = field(default_factory=list)
    autotune: list[dict[str, Any]] = field(default_factory=list)

    def cache_counters(self) -> dict[str, dict[str, int]]:
        """The compiler's own cache counters for this phase (inductor and AOT autograd)."""
        return {k: dict(self.counters.get(k, {})) for k in ("inductor", "aot_autograd")}

    def summary(self) -> dict[str, Any]:
        """A compact, JSON-ready account of the phase for the receipt."""
        return {"counters": self.counters,
                "graphs_compiled": len(self.output_code),
                "frames": self.frames,
                "cache_bypass_reasons": sorted(set(self.cache_bypass)),
                "autotuned_ops": len(self.autotune)}


def counters_snapshot() -> dict[str, Counter[str]]:
    """A copy of dynamo's global counters."""
    from torch._dynamo.utils import counters

    return {k: Counter(v) for k, v in counters.items()}


def counters_delta(before: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
    """What each counter gained since ``before`` (only positive changes)."""
    now = counters_snapshot()
    out: dict[str, dict[str, int]] = {}
    for group, c in now.items():
        d = c - before.get(group, Counter())
        if d:
            out[group] = {str(k): int(v) for k, v in d.items()}
    return out


def metric_ids() -> set[int]:
    """Identities of the compilation-metric records dynamo holds now."""
    from torch._dynamo.utils import get_compilation_metrics

    return {id(m) for m in get_compilation_metrics()}


def new_frames(seen: set[int]) -> list[dict[str, Any]]:
    """The frame compilations dynamo recorded since ``seen`` was taken."""
    from torch._dynamo.utils import get_compilation_metrics

    out = []
    for m in get_compilation_metrics():
        if id(m) in seen:
            continue
        out.append({"co_name": m.co_name, "compile_id": m.compile_id,
                    "recompile_reason": m.recompile_reason,
                    "fail_reason": m.fail_reason,
                    "cudagraph_skip_reason": m.cudagraph_skip_reason,
                    "graph_op_count": m.graph_op_count,
                    "fx_local_cache_hits": m.inductor_fx_local_cache_hit_count,
                    "fx_local_cache_misses": m.inductor_fx_local_cache_miss_count,
                    "aotautograd_local_cache_hits": m.aotautograd_local_cache_hit_count,
                    "aotautograd_local_cache_misses": m.aotautograd_local_cache_miss_count})
    return out


def _unwrap(choice: Any) -> Any:
    """The choice inside inductor's pre/post-processing wrapper (CPU GEMM templates come wrapped)."""
    inner = getattr(choice, "__dict__", {}).get("_wrapped")
    return choice if inner is None else inner


def _choice_kind(choice: Any) -> str:
    """Which family an autotuning choice belongs to."""
    cls = type(_unwrap(choice)).__name__
    if cls.startswith("Extern"):
        return "aten"  # an ATen kernel: cuBLAS/cuDNN on CUDA, MKL/oneDNN on the CPU
    if "TritonTemplate" in cls:
        return "triton_template"
    if cls.startswith("Cpp"):
        return "cpp_template"
    if cls.startswith("CUTLASS"):
        return "cutlass_template"
    return cls


def _choice_key(choice: Any) -> str:
    """Inductor's own identity of a choice (what its autotune cache is keyed by); stable
    across compiles of the same code, unlike the numbered kernel name."""
    try:
        return str(choice.hash_key())
    except Exception:  # a choice type without one: the name is all there is
        return ""


def _choice_name(choice: Any) -> str:
    name = str(getattr(choice, "name", "") or type(choice).__name__)
    desc = str(getattr(choice, "description", "") or "")
    return f"{name} ({desc})" if desc and desc != name else name


class _TraceCapture(logging.Handler):
    """Receives torch's structured-trace records (the ``torch.__trace`` logger)."""

    def __init__(self, record: PhaseRecord) -> None:
        super().__init__(level=logging.DEBUG)
        self.record = record

    def emit(self, rec: logging.LogRecord) -> None:
        meta = getattr(rec, "metadata", None)
        payload = getattr(rec, "payload", None)
        if not isinstance(meta, dict) or not isinstance(payload, str):
            return
        if "inductor_output_code" in meta:
            self.record.output_code.append(payload)
            return
        art = meta.get("artifact")
        name = art.get("name") if isinstance(art, dict) else None
        if name == "dynamo_graph_break_reason":
            self.record.graph_break_locations.append(payload[:_MAX_TEXT])
        elif name == "recompile_reasons":
            self.record.recompile_reasons.append(payload[:_MAX_TEXT])
        elif name in ("fx_graph_cache_bypass", "aotautograd_cache_bypass"):
            self.record.cache_bypass.append(f"{name}: {payload[:300]}")


class CompileObserver:
    """Context manager: observe one compile phase and fill ``self.record``."""

    def __init__(self) -> None:
        self.record = PhaseRecord()
        self._before: dict[str, Counter[str]] = {}
        self._seen: set[int] = set()
        self._handler = _TraceCapture(self.record)

    def _feedback(self, timings: dict[Any, float], name: str, input_nodes: list[Any],
                  choices: list[Any], profiled: Any, precompile_times: Any = None) -> None:
        finite = {c: t for c, t in timings.items() if isinstance(t, float) and math.isfinite(t)}
        if not finite:
            return
        best = min(finite, key=finite.__getitem__)
        shapes = []
        for n in input_nodes:
            try:
                shapes.append([str(s) for s in n.get_size()])
            except Exception:  # a node without a static size: record what there is
                shapes.append([])
        ranked = sorted(finite.items(), key=lambda kv: kv[1])
        self.record.autotune.append({
            "op": name, "input_shapes": shapes,
            "chosen": _choice_name(best), "chosen_kind": _choice_kind(best),
            "chosen_key": _choice_key(best), "chosen_ms": finite[best],
            "alternatives": [{"kernel": _choice_name(c), "kind": _choice_kind(c), "key": _choice_key(c),
                              "ms": t} for c, t in ranked[:20]],
            "n_choices": len(choices)})

    def __enter__(self) -> CompileObserver:
        from torch._inductor.select_algorithm import get_algorithm_selector_cache
        from torch._logging._internal import trace_log

        self._before = counters_snapshot()
        self._seen = metric_ids()
        trace_log.addHandler(self._handler)
        get_algorithm_selector_cache().add_feedback_saver(self._feedback)
        return self

    def __exit__(self, *exc: object) -> None:
        from torch._inductor.select_algorithm import get_algorithm_selector_cache
        from torch._logging._internal import trace_log

        trace_log.removeHandler(self._handler)
        savers = get_algorithm_selector_cache().feedback_saver_fns
        if self._feedback in savers:
            savers.remove(self._feedback)
        self.record.counters = counters_delta(self._before)
        self.record.frames = new_frames(self._seen)


def generated_calls(code: str) -> Counter[str]:
    """ATen/extern operator calls in one generated wrapper module, by qualified name."""
    calls: Counter[str] = Counter()
    for line in code.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for m in _EXTERN_CALL.finditer(line):
            calls[f"extern_kernels.{m.group(1)}"] += 1
        for m in _OP_CALL.finditer(line):
            if m.group(1) not in _INTERNAL_NAMESPACES:
                calls[f"{m.group(1)}.{m.group(2)}.{m.group(3)}"] += 1
    return calls


def _graph_break_entries(record: PhaseRecord, phase: str) -> list[dict[str, Any]]:
    out = []
    for reason, count in record.counters.get("graph_break", {}).items():
        head = first_line(reason, _MAX_TEXT)
        where = [first_line(loc, _MAX_TEXT) for loc in record.graph_break_locations if head and head in loc]
        out.append({"kind": "graph_break", "reason": head, "count": count,
                    "detail": reason[:_MAX_TEXT], "where": sorted(set(where)), "phase": phase,
                    "source": "torch._dynamo.utils.counters['graph_break']"})
    return out


def _recompile_entries(frames: list[dict[str, Any]], phase: str) -> list[dict[str, Any]]:
    return [{"kind": "recompile", "reason": first_line(f["recompile_reason"], _MAX_TEXT),
             "detail": str(f["recompile_reason"])[:_MAX_TEXT], "function": f["co_name"],
             "phase": phase, "source": "torch._dynamo.utils.get_compilation_metrics()"}
            for f in frames if f.get("recompile_reason")]


def aten_entries(record: PhaseRecord, forced: dict[str, list[str]],
                 registry: set[str], phase: str) -> list[dict[str, Any]]:
    """Operators the generated code runs as ATen/extern kernels, and every forced one."""
    calls: Counter[str] = Counter()
    for code in record.output_code:
        calls.update(generated_calls(code))
    forced_by_op = {op: req for req, ops in forced.items() for op in ops}
    out = []
    for op, n in sorted(calls.items()):
        qual = op if not op.startswith("extern_kernels.") else None
        out.append({"kind": "aten_fallback", "op": op, "calls": n,
                    "origin": ("forced by the user" if qual in forced_by_op
                               else "inductor fallback registry" if qual in registry
                               else "extern kernel" if qual is None
                               else "no inductor lowering"),
                    "forced": qual in forced_by_op,
                    "requested": forced_by_op.get(qual or ""),
                    "in_fallback_registry": qual in registry,
                    "detail": f"{n} call(s) in the generated code", "phase": phase,
                    "source": "generated code (structured trace 'inductor_output_code')"})
    for op, req in forced_by_op.items():
        if op not in calls:
            out.append({"kind": "aten_fallback", "op": op, "calls": 0,
                        "origin": "forced by the user", "forced": True, "requested": req,
                        "in_fallback_registry": op in registry, "phase": phase,
                        "detail": "forced, but the generated code never calls it "
                                  "(the model may not use this operator)",
                        "source": "generated code (structured trace 'inductor_output_code')"})
    return out


def group_autotune(picks: list[dict[str, Any]], top: int = 5) -> list[dict[str, Any]]:
    """One entry per distinct decision: (op, input shapes, chosen kind, chosen config).

    Inductor tunes every call site, so a 24-layer model makes the same pick 24 times
    under different kernel numbers. An entry keeps the first site's pick and its ``top``
    fastest alternatives, and adds ``count`` (sites) and the chosen time's range.
    """
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for a in picks:
        key = (str(a["op"]), json.dumps(a.get("input_shapes")), str(a["chosen_kind"]),
               kernel_label(str(a["chosen"])))
        groups.setdefault(key, []).append(a)
    out = []
    for same in groups.values():
        first, times = same[0], sorted(float(a["chosen_ms"]) for a in same)
        out.append({"op": first["op"], "input_shapes": first.get("input_shapes"),
                    "chosen": first["chosen"], "chosen_kind": first["chosen_kind"],
                    "chosen_key": first.get("chosen_key", ""),
                    "chosen_ms": times[len(times) // 2], "chosen_ms_range": [times[0], times[-1]],
                    "count": sum(int(a.get("count", 1)) for a in same),
                    "alternatives": list(first.get("alternatives", []))[:top],
                    "n_choices": first.get("n_choices")})
    return out


def _autotune_entries(record: PhaseRecord, phase: str) -> list[dict[str, Any]]:
    return [{"kind": "autotune_choice", **a, "phase": phase,
             "detail": f"{a['op']}: {a['chosen']} [{a['chosen_kind']}] "
                       f"{a['chosen_ms']:.4f} ms of {a['n_choices']} choices"
                       + (f", picked at {a['count']} call sites" if a["count"] > 1 else ""),
             "source": "torch._inductor.select_algorithm feedback saver"}
            for a in group_autotune(record.autotune)]


def _cudagraph_entries(record: PhaseRecord, phase: str, device: str) -> list[dict[str, Any]]:
    skips = record.counters.get("inductor", {}).get("cudagraph_skips", 0)
    if not skips:
        return []
    reasons = sorted({f["cudagraph_skip_reason"] for f in record.frames
                      if f.get("cudagraph_skip_reason")})
    if not reasons:
        reasons = [f"no message from the compiler (graphs on {device}; CUDA graphs apply "
                   "only to CUDA graphs without disqualifying ops)"]
    return [{"kind": "cudagraph_skip", "reason": r, "count": skips, "detail": r, "phase": phase,
             "source": "counters['inductor']['cudagraph_skips'] and compilation metrics"}
            for r in reasons]


def fallback_entries(record: PhaseRecord, *, forced: dict[str, list[str]], registry: set[str],
                     device: str, phase: str, autotune_from: PhaseRecord | None = None,
                     autotune_phase: str | None = None) -> list[dict[str, Any]]:
    """The runner report's ``fallbacks`` for the compiled artifact of ``record``'s phase.

    Autotuning runs only when its cache misses, so its picks may come from another
    (the cold) phase: ``autotune_from``.
    """
    tuned = autotune_from if autotune_from is not None else record
    return (_graph_break_entries(record, phase) + _recompile_entries(record.frames, phase)
            + aten_entries(record, forced, registry, phase)
            + _autotune_entries(tuned, autotune_phase or phase)
            + _cudagraph_entries(record, phase, device))


def run_entries(before: dict[str, Counter[str]], seen: set[int]) -> list[dict[str, Any]]:
    """Graph breaks and recompiles that happened after preparation (while measuring)."""
    record = PhaseRecord(counters=counters_delta(before), frames=new_frames(seen))
    return _graph_break_entries(record, "run") + _recompile_entries(record.frames, "run")
