"""The self-check's runs, per TensorRT flavour, and its verdict.

Per flavour: the five back-to-back built-in contracts on the ``decision`` task at each dtype
(float32 and bfloat16 by default), a dynamic-shape run (the task's ``dynamic_tokens`` option:
the cases' token lengths differ, so the engine gets an optimization profile and changes shape
between cases) and a run under a contract with ``cuda_graphs = false``. Each run writes its
receipts; the checks read them. The verdict says, run by run, what executed and what did not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbox.errors import FieldError
from benchbox.selfcheck.checks import Check, check_run, runner_report

if TYPE_CHECKING:
    from benchbox.selfcheck.facts import TensorRTFacts

#: exit codes of ``benchbox selfcheck``
EXIT_PASSED = 0       # executed, every check passed (warnings allowed)
EXIT_FAILED = 1       # a check failed (also a build that fails without a GPU)
EXIT_NOT_EXECUTED = 3  # nothing could execute here; the verdict says why, nothing is claimed

RUNNERS = ("tensorrt",)
#: the contract of the ``cuda_graphs = false`` run: device_compute with graphs forbidden
NO_GRAPHS = "device_compute_no_graphs"
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
    #: the model dtypes of the fixed-shape runs; the dynamic and no-graph runs use the first
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    out_dir: Path | None = None


@dataclass(frozen=True)
class RunPlan:
    """One run of the self-check: its receipts' tag, what it is, its dtype and contracts."""

    tag: str
    label: str
    kind: str  # fixed | dynamic | no_graphs
    dtype: str
    contracts: tuple[str, ...]
    task_options: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class CheckedRun:
    """One run of one flavour: whether it executed (and why not), its receipts and checks."""

    plan: RunPlan
    executed: bool
    reason: str
    receipts: tuple[Path, ...]
    checks: tuple[Check, ...]


@dataclass(frozen=True)
class FlavourOutcome:
    """Every run of one flavour."""

    flavour: str
    version: str | None
    runs: tuple[CheckedRun, ...]

    @property
    def executed(self) -> bool:
        return any(r.executed for r in self.runs)

    @property
    def failed(self) -> bool:
        return any(c.status == "failed" for r in self.runs for c in r.checks)


def plan_runs(cfg: SelfCheckConfig, back_to_back: tuple[str, ...], no_graphs: str) -> list[RunPlan]:
    """The runs of one flavour: each dtype's fixed-shape run, then the dynamic-shape and the
    no-graph runs at the first dtype."""
    first = cfg.dtypes[0]
    out = [RunPlan(d, f"{d}, fixed shapes", "fixed", d, back_to_back) for d in cfg.dtypes]
    out.append(RunPlan(f"dynamic-{first}", f"{first}, dynamic shapes (task option dynamic_tokens=true)",
                       "dynamic", first, ("model_io_wall", "device_compute"), (("dynamic_tokens", True),)))
    out.append(RunPlan(f"nographs-{first}", f"{first}, contract {NO_GRAPHS} (cuda_graphs = false)",
                       "no_graphs", first, (no_graphs,)))
    return out


def write_no_graphs_contract(out_dir: Path) -> Path:
    """The built-in device_compute contract, renamed, with ``cuda_graphs = false``, as a file."""
    from importlib import resources

    from benchbox.contracts import load_contract

    text = (resources.files("benchbox.contracts") / "builtin" / "device_compute.toml").read_text()
    changed = text.replace('name = "device_compute"', f'name = "{NO_GRAPHS}"', 1)
    path = out_dir / f"{NO_GRAPHS}.toml"
    path.write_text(changed.replace("cuda_graphs = true", "cuda_graphs = false", 1))
    contract = load_contract(str(path))
    if contract.name != NO_GRAPHS or contract.policy.cuda_graphs:
        raise RuntimeError("the built-in device_compute contract changed shape; update the self-check")
    return path


@dataclass(frozen=True)
class SelfCheckResult:
    """The verdict: ``passed``, ``failed`` or ``not_executed``, per flavour and run."""

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
        head = {"passed": "PASSED: every check of the runs that executed passed",
                "failed": "FAILED: see the failed checks below",
                "not_executed": "NOT EXECUTED: nothing ran on a GPU here, so no GPU result is "
                                "measured or claimed"}[self.status]
        lines = [f"benchbox selfcheck: runner {c.runner}, task decision/{c.size} ({', '.join(c.dtypes)}), "
                 f"device {c.device}" + (f" ({self.gpu})" if self.gpu else ""),
                 f"verdict: {head}"]
        for o in self.outcomes:
            ran = sum(r.executed for r in o.runs)
            lines.append(f"  {o.flavour}" + (f" {o.version}" if o.version else "")
                         + f": {ran} of {len(o.runs)} runs executed")
            for r in o.runs:
                what = "executed" if r.executed else f"not executed: {r.reason}"
                contracts = ", ".join(Path(c).stem if c.endswith(".toml") else c for c in r.plan.contracts)
                lines.append(f"    {r.plan.label} [{contracts}]: {what}")
                lines += [f"      [{ch.status}] {ch.name}" + (f": {ch.detail}" if ch.detail else "")
                          for ch in r.checks]
        lines += [f"  note: {n}" for n in self.notes]
        receipts = [p for o in self.outcomes for r in o.runs for p in r.receipts]
        if receipts:
            lines.append("receipts: " + ", ".join(str(p) for p in receipts))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "exit_code": self.exit_code, "gpu": self.gpu,
                "flavours": [{"flavour": o.flavour, "version": o.version, "executed": o.executed,
                              "runs": [{"run": r.plan.tag, "label": r.plan.label, "executed": r.executed,
                                        "reason": r.reason, "receipts": [str(p) for p in r.receipts],
                                        "checks": [ch.to_dict() for ch in r.checks]} for r in o.runs]}
                             for o in self.outcomes]}


def _flavours(cfg: SelfCheckConfig) -> tuple[list[str], list[str]]:
    """The flavours to run, and notes on those left out."""
    from benchbox.runners import tensorrt_flavours as trt_flavours

    if cfg.flavours:
        unknown = [f for f in cfg.flavours if f not in trt_flavours.FLAVOURS]
        if unknown:
            raise FieldError("flavours", f"{unknown[0]!r} is not one of {', '.join(trt_flavours.FLAVOURS)}")
        return list(cfg.flavours), []
    chosen, notes = [], []
    for f in trt_flavours.FLAVOURS:
        why = trt_flavours.probe(f)
        if why is None:
            chosen.append(f)
        else:
            notes.append(f"flavour {f} left out: {why}")
    return chosen, notes


def _check_config(cfg: SelfCheckConfig) -> None:
    from benchbox.run.config import DTYPES, check_environment

    check_environment()

    if cfg.runner not in RUNNERS:
        raise FieldError("runner", f"{cfg.runner!r}: the self-check covers {', '.join(RUNNERS)}")
    if cfg.samples < 1:
        raise FieldError("samples", f"must be ≥ 1, got {cfg.samples}")
    if cfg.warmup < 0:
        raise FieldError("warmup", f"must be ≥ 0, got {cfg.warmup}")
    if not cfg.dtypes:
        raise FieldError("dtypes", "name at least one")
    bad = [d for d in cfg.dtypes if d not in DTYPES]
    if bad or len(set(cfg.dtypes)) != len(cfg.dtypes):
        raise FieldError("dtypes", f"{bad[0]!r} is not one of {', '.join(DTYPES)}" if bad else "a dtype is "
                                   "named twice")


def _one_run(cfg: SelfCheckConfig, flavour: str, plan: RunPlan, out_dir: Path,
             progress: Progress) -> tuple[CheckedRun, TensorRTFacts, str | None]:
    """Run ``plan`` for ``flavour``; check it (trtexec beside a fixed-shape run's throughput)."""
    from benchbox.run import RunConfig, run
    from benchbox.selfcheck import trtexec

    progress(f"selfcheck: {cfg.runner} flavour {flavour}: {plan.label}")
    outcome = run(RunConfig(
        contracts=plan.contracts, task="decision", size=cfg.size, dtype=plan.dtype,
        runners=(cfg.runner,), device=cfg.device, warmup=cfg.warmup, samples=cfg.samples,
        out=out_dir / f"selfcheck-{flavour}-{plan.tag}.json", task_options=dict(plan.task_options),
        runner_options={cfg.runner: {"flavour": flavour}},
        command=("benchbox", "selfcheck", "--flavour", flavour, "--dtype", plan.dtype)), progress=progress)
    receipts = {o.receipt.contract.name: o.receipt for o in outcome.all}
    executed, reason, checks = check_run(receipts, flavour, plan.kind, plan.dtype)
    report = runner_report(receipts)
    if executed and plan.kind == "fixed":
        checks.append(trtexec.compare(receipts, report, str(report.flavour or flavour), cfg.device,
                                      out_dir / f"trtexec-{flavour}-{plan.tag}.log"))
    gpu = outcome.all[0].receipt.environment.gpu_name if outcome.all else None
    return (CheckedRun(plan, executed, reason, tuple(o.path for o in outcome.all), tuple(checks)),
            report, gpu)


def run_selfcheck(cfg: SelfCheckConfig, progress: Progress = lambda s: None) -> SelfCheckResult:
    """Every run of every flavour, checked; the verdict written beside the receipts."""
    from benchbox.contracts import builtin_contracts
    from benchbox.receipts.io import now_iso

    _check_config(cfg)
    flavours, notes = _flavours(cfg)
    stamp = re.sub(r"[^0-9TZ]", "", now_iso().replace("+00:00", "Z"))
    out_dir = Path(cfg.out_dir) if cfg.out_dir is not None else Path("receipts") / f"selfcheck-{stamp}"
    out_dir.mkdir(parents=True, exist_ok=True)
    back_to_back = tuple(c.name for c in builtin_contracts() if not c.arrival.paced)
    plans = plan_runs(cfg, back_to_back, str(write_no_graphs_contract(out_dir)))
    outcomes, gpu = [], None
    for flavour in flavours or ["auto"]:
        runs, version, name = [], None, flavour
        for plan in plans:
            checked, report, seen = _one_run(cfg, flavour, plan, out_dir, progress)
            runs.append(checked)
            gpu = seen or gpu
            version = version or report.flavour_version
            name = str(report.flavour or name)
        outcomes.append(FlavourOutcome(name, version, tuple(runs)))
    verdict = out_dir / "verdict.txt"
    result = SelfCheckResult(cfg, tuple(outcomes), out_dir, verdict, gpu, tuple(notes))
    verdict.write_text(result.verdict_text() + "\n")
    return result
