"""``benchbox selfcheck``: the TensorRT runner checked end to end on the tiny task.

For the first user with a GPU the runner supports: one run per TensorRT flavour present,
of every back-to-back built-in contract, on the tiny ``decision`` task, then checks of
what only execution shows — the accuracy gates, the engine inspector's report (every
layer's precision understood), the device clock against the host span that contains it,
``model_io_wall`` below ``public_task_call_wall``, the JIT warm-up phase, RTX's runtime
cache, CUDA graphs, the per-layer profile and TF32 off for float32 — and a short verdict
to attach to a bug report next to the receipts. The paced built-ins time the same stages
with requests arriving on a schedule: no check here reads them, so they would add run
time only (``benchbox sweep`` measures served traffic).

Where the runner cannot execute (no GPU, one the flavour does not support, no package)
the verdict says so and why; it reports the build facts that need no GPU and never a
measured result.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbox.errors import FieldError

#: exit codes of ``benchbox selfcheck``
EXIT_PASSED = 0       # executed, every check passed (warnings allowed)
EXIT_FAILED = 1       # a check failed (also a build that fails without a GPU)
EXIT_NOT_EXECUTED = 3  # nothing could execute here; the verdict says why, nothing is claimed

DEVICE_CONTRACTS = ("device_compute", "device_span", "device_throughput")
EXECUTION_CHECKS = ("accuracy gates", "engine inspector report", "device clock cross-check",
                    "model_io_wall < public_task_call_wall", "jit_warmup phase", "RTX runtime cache",
                    "CUDA graphs", "per-layer profile")
RUNNERS = ("tensorrt",)
Progress = Callable[[str], None]


@dataclass(frozen=True)
class SelfCheckConfig:
    """What the self-check runs."""

    runner: str = "tensorrt"
    device: str = "cuda"
    #: flavours to check; empty: each one that imports and reports a version
    flavours: tuple[str, ...] = ()
    samples: int = 100
    warmup: int = 5
    size: str = "tiny"
    dtype: str = "float32"
    out_dir: Path | None = None


@dataclass(frozen=True)
class Check:
    """One check of one flavour: ``passed``, ``failed``, ``warning`` or ``not_run``."""

    name: str
    status: str
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


@dataclass(frozen=True)
class FlavourOutcome:
    """The run of one flavour: whether it executed (and why not), its receipts and checks."""

    flavour: str
    version: str | None
    executed: bool
    reason: str
    receipts: tuple[Path, ...]
    checks: tuple[Check, ...]

    @property
    def failed(self) -> bool:
        return any(c.status == "failed" for c in self.checks)


@dataclass(frozen=True)
class SelfCheckResult:
    """The verdict: ``passed``, ``failed`` or ``not_executed``, per flavour with its checks."""

    config: SelfCheckConfig
    outcomes: tuple[FlavourOutcome, ...]
    out_dir: Path
    verdict_path: Path
    gpu: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def status(self) -> str:
        if any(o.failed for o in self.outcomes):
            return "failed"
        if any(o.executed for o in self.outcomes):
            return "passed"
        return "not_executed"

    @property
    def exit_code(self) -> int:
        return {"passed": EXIT_PASSED, "failed": EXIT_FAILED}.get(self.status, EXIT_NOT_EXECUTED)

    def verdict_text(self) -> str:
        c = self.config
        head = {"passed": "PASSED: every check of the flavours that executed passed",
                "failed": "FAILED: see the failed checks below",
                "not_executed": "NOT EXECUTED: nothing ran on a GPU here, so no GPU result is "
                                "measured or claimed"}[self.status]
        lines = [f"benchbox selfcheck: runner {c.runner}, task decision/{c.size} {c.dtype}, device "
                 f"{c.device}" + (f" ({self.gpu})" if self.gpu else ""),
                 f"verdict: {head}"]
        for o in self.outcomes:
            label = o.flavour + (f" {o.version}" if o.version else "")
            lines.append(f"  {label}: " + ("executed" if o.executed else f"not executed: {o.reason}"))
            for ch in o.checks:
                lines.append(f"    [{ch.status}] {ch.name}" + (f": {ch.detail}" if ch.detail else ""))
        lines += [f"  note: {n}" for n in self.notes]
        receipts = [p for o in self.outcomes for p in o.receipts]
        if receipts:
            lines.append("receipts: " + ", ".join(str(p) for p in receipts))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "exit_code": self.exit_code, "gpu": self.gpu,
                "flavours": [{"flavour": o.flavour, "version": o.version, "executed": o.executed,
                              "reason": o.reason, "receipts": [str(p) for p in o.receipts],
                              "checks": [ch.to_dict() for ch in o.checks]} for o in self.outcomes]}


def _rows(receipts: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(name, row) for name, r in receipts.items() for row in r.get("results", [])]


def _report(receipts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    for _, row in _rows(receipts):
        rep = row.get("runner_report")
        if isinstance(rep, dict) and rep:
            return rep
    return {}


def check_build(report: dict[str, Any]) -> Check:
    """The export, parse and engine build: what needs no GPU."""
    if report.get("flavour") is None:
        return Check("build (no GPU needed)", "not_run", "no TensorRT flavour to build with")
    error = report.get("build_error") or report.get("facts_error")
    if error:
        return Check("build (no GPU needed)", "failed", str(error))
    er = report.get("engine_report") or {}
    opts = (report.get("build") or {}).get("options") or {}
    if not er.get("engine_bytes"):
        return Check("build (no GPU needed)", "failed", "no engine in the report")
    target = f" for compute capability {', '.join(opts['compute_capabilities'])}" \
        if opts.get("compute_capabilities") else ""
    return Check("build (no GPU needed)", "passed",
                 f"engine built{target}: {er['engine_bytes']:,} bytes, {er.get('num_layers')} layers "
                 f"({er.get('source')}), tf32 {opts.get('tf32')}")


def check_executed(receipts: dict[str, dict[str, Any]]) -> Check:
    bad = [(c, r) for c, r in _rows(receipts) if r.get("status") == "failed"]
    if not bad:
        return Check("runner executed every contract and case", "passed",
                     f"{len(_rows(receipts))} results")
    c, r = bad[0]
    reasons = "; ".join(r.get("reasons", []))
    return Check("runner executed every contract and case", "failed",
                 f"{len(bad)} failed result(s); first {r.get('case')} [{c}]: {reasons}")


def check_accuracy(receipts: dict[str, dict[str, Any]]) -> Check:
    rows = [(c, r) for c, r in _rows(receipts) if r.get("accuracy")]
    if not rows:
        return Check("accuracy gates", "not_run", "no validated result")
    failed = [(c, r) for c, r in rows if not r["accuracy"].get("passed")]
    worst: dict[str, float] = {}
    for _, r in rows:
        for g in r["accuracy"].get("gates", []):
            if isinstance(g.get("value"), float):
                worst[g["name"]] = max(worst.get(g["name"], 0.0), g["value"])
    detail = ", ".join(f"worst {k} {v:.3g}" for k, v in sorted(worst.items()))
    if failed:
        c, r = failed[0]
        return Check("accuracy gates", "failed", f"{len(failed)} result(s) invalid; first {r.get('case')} "
                     f"[{c}]: {'; '.join(r.get('reasons', []))}")
    return Check("accuracy gates", "passed", detail)


def check_inspector(report: dict[str, Any]) -> Check:
    """The engine inspector's report, with every layer's precision understood."""
    er = report.get("engine_report") or {}
    if er.get("source") != "engine_inspector":
        why = er.get("inspector_error") or f"the report comes from {er.get('source')}"
        return Check("engine inspector report", "failed", why)
    layers = er.get("layers") or []
    if not layers:
        return Check("engine inspector report", "failed", "the inspector listed no layers")
    unknown = [x for x in layers if not x.get("precision")]
    if unknown:
        ex = unknown[0]
        return Check("engine inspector report", "failed",
                     f"{len(unknown)} of {len(layers)} layers without a precision; e.g. {ex.get('name')!r} "
                     f"({ex.get('type')}): {ex.get('unparsed_output_types') or ex.get('output_types')}")
    return Check("engine inspector report", "passed",
                 f"{len(layers)} layers, precisions {er.get('precisions')}")


def check_clock(receipts: dict[str, dict[str, Any]]) -> Check:
    rows = [(c, r) for c, r in _rows(receipts) if c in DEVICE_CONTRACTS and r.get("status") != "failed"]
    if not rows:
        return Check("device clock cross-check", "not_run", "no device-clock result")
    host = [(c, r) for c, r in rows if r.get("clock_used") != "device"]
    if host:
        c, r = host[0]
        return Check("device clock cross-check", "failed",
                     f"{r.get('case')} [{c}] used the {r.get('clock_used')} clock: {r.get('clock_note')}")
    bad = [(c, r) for c, r in rows if (r.get("clock_cross_check") or {}).get("violations")]
    if bad:
        c, r = bad[0]
        x = r["clock_cross_check"]
        return Check("device clock cross-check", "failed",
                     f"{r.get('case')} [{c}]: {x['violations']} of {x.get('samples')} samples exceed the "
                     f"host span {x.get('host_span')}")
    return Check("device clock cross-check", "passed", f"{len(rows)} results, no violation")


def check_region_order(receipts: dict[str, dict[str, Any]]) -> Check:
    """model_io_wall (h2d..d2h) must be shorter than the public call that contains it."""
    def p50s(name: str) -> dict[str, int]:
        return {r["case"]: r["summary"]["p50_ns"] for r in receipts.get(name, {}).get("results", [])
                if r.get("status") != "failed" and r.get("summary", {}).get("p50_ns") is not None}

    inner, outer = p50s("model_io_wall"), p50s("public_task_call_wall")
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


def check_tf32(report: dict[str, Any]) -> Check:
    """TF32 off in a float32 build (read back from the builder config), so float32 layers
    compute true float32 as the torch runners do; on only where the option asked for it."""
    name = "TF32 off for float32"
    opts = (report.get("build") or {}).get("options") or {}
    if "tf32" not in opts:
        return Check(name, "failed", "the build options do not say whether TF32 was on")
    if not opts["tf32"]:
        return Check(name, "passed", "off: true float32, like the torch runners")
    if (report.get("options") or {}).get("tf32"):
        return Check(name, "warning", "on, as option tf32=true asked: float32 results are not like for "
                                      "like with the torch runners")
    return Check(name, "failed", "on, not asked for: the builder's default was not cleared")


def check_preparation(report: dict[str, Any], flavour: str, dtype: str = "float32") -> list[Check]:
    """jit_warmup timed as a phase, RTX's runtime cache, CUDA graphs, the layer profile, and
    TF32 off for a float32 model."""
    out = [check_tf32(report)] if dtype == "float32" else []
    prep = report.get("prepare_s") or {}
    out.append(Check("jit_warmup is a timed preparation phase",
                     "passed" if "jit_warmup" in prep else "failed",
                     f"{prep['jit_warmup']:.3f} s" if "jit_warmup" in prep else "no jit_warmup phase"))
    if flavour == "tensorrt_rtx":
        rc = (report.get("runtime") or {}).get("runtime_cache") or {}
        ok = rc.get("enabled") and rc.get("saved_bytes", 0) > 0
        out.append(Check("RTX runtime cache", "passed" if ok else "failed",
                         f"loaded {rc.get('loaded_bytes', 0)} bytes (found: {rc.get('found')}), saved "
                         f"{rc.get('saved_bytes')} bytes" if rc.get("enabled") else str(rc.get("why"))))
    g = report.get("cuda_graphs") or {}
    if g.get("warnings"):
        out.append(Check("CUDA graphs", "warning", "; ".join(g["warnings"])))
    else:
        out.append(Check("CUDA graphs", "passed", f"{g.get('used')} ({g.get('why')})"))
    lp = report.get("layer_profile") or {}
    if lp.get("error") or not lp.get("runs"):
        out.append(Check("per-layer profile (diagnostic)", "warning", str(lp.get("error") or "no profile")))
    else:
        top = (lp.get("top_layers") or [{}])[0]
        out.append(Check("per-layer profile (diagnostic)", "passed",
                         f"{lp['layers_timed']} layers over {lp['runs']} runs, median total "
                         f"{lp['total_ms_median']:.3f} ms; top {top.get('name')} ({top.get('precision')})"))
    return out


def check_flavour(receipts: dict[str, dict[str, Any]], flavour: str,
                  dtype: str = "float32") -> tuple[bool, str, list[Check]]:
    """(executed, why not, checks) of one flavour's receipts of a ``dtype`` model."""
    report = _report(receipts)
    checks = [check_build(report)]
    unavailable = report.get("unavailable")
    if unavailable:
        checks.append(Check("execution checks", "not_run", ", ".join(EXECUTION_CHECKS)
                            + " (they need the engine to run)"))
        return False, str(unavailable), checks
    checks += [check_executed(receipts), check_accuracy(receipts), check_inspector(report),
               check_clock(receipts), check_region_order(receipts),
               *check_preparation(report, flavour, dtype)]
    return True, "", checks


def _flavours(cfg: SelfCheckConfig) -> tuple[list[str], list[str]]:
    """The flavours to run, and notes on those left out."""
    from benchbox.runners import tensorrt_flavours as trt_runner

    if cfg.flavours:
        unknown = [f for f in cfg.flavours if f not in trt_runner.FLAVOURS]
        if unknown:
            raise FieldError("flavours", f"{unknown[0]!r} is not one of {', '.join(trt_runner.FLAVOURS)}")
        return list(cfg.flavours), []
    chosen, notes = [], []
    for f in trt_runner.FLAVOURS:
        why = trt_runner.probe(f)
        if why is None:
            chosen.append(f)
        else:
            notes.append(f"flavour {f} left out: {why}")
    return chosen, notes


def run_selfcheck(cfg: SelfCheckConfig, progress: Progress = lambda s: None) -> SelfCheckResult:
    """Run the back-to-back built-in contracts on the tiny task per flavour; check; write the verdict."""
    from benchbox.contracts import builtin_contracts
    from benchbox.receipts.io import now_iso
    from benchbox.run import RunConfig, run

    if cfg.runner not in RUNNERS:
        raise FieldError("runner", f"{cfg.runner!r}: the self-check covers {', '.join(RUNNERS)}")
    if cfg.samples < 1:
        raise FieldError("samples", f"must be ≥ 1, got {cfg.samples}")
    if cfg.warmup < 0:
        raise FieldError("warmup", f"must be ≥ 0, got {cfg.warmup}")
    flavours, notes = _flavours(cfg)
    stamp = re.sub(r"[^0-9TZ]", "", now_iso().replace("+00:00", "Z"))
    out_dir = Path(cfg.out_dir) if cfg.out_dir is not None else Path("receipts") / f"selfcheck-{stamp}"
    out_dir.mkdir(parents=True, exist_ok=True)
    outcomes, gpu = [], None
    back_to_back = tuple(c.name for c in builtin_contracts() if not c.arrival.paced)
    for flavour in flavours or ["auto"]:
        progress(f"selfcheck: {cfg.runner} flavour {flavour}")
        outcome = run(RunConfig(
            contracts=back_to_back, task="decision", size=cfg.size, dtype=cfg.dtype,
            runners=(cfg.runner,), device=cfg.device, warmup=cfg.warmup, samples=cfg.samples,
            out=out_dir / f"selfcheck-{flavour}.json",
            runner_options={cfg.runner: {"flavour": flavour}},
            command=("benchbox", "selfcheck", "--flavour", flavour)), progress=progress)
        receipts = {o.receipt.contract.name: o.receipt.to_json() for o in outcome.all}
        executed, reason, checks = check_flavour(receipts, flavour, cfg.dtype)
        report = _report(receipts)
        env_gpu = next(iter(receipts.values())).get("environment", {}).get("gpu")
        if isinstance(env_gpu, dict) and env_gpu.get("name"):
            gpu = str(env_gpu["name"])
        outcomes.append(FlavourOutcome(str(report.get("flavour") or flavour), report.get("flavour_version"),
                                       executed, reason, tuple(o.path for o in outcome.all), tuple(checks)))
    verdict = out_dir / "verdict.txt"
    result = SelfCheckResult(cfg, tuple(outcomes), out_dir, verdict, gpu, tuple(notes))
    verdict.write_text(result.verdict_text() + "\n")
    return result
