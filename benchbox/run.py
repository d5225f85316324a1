"""``benchbox run`` as a library call: measure runners × cases under one or more contracts.

Each runner is prepared (built, compiled) once and each case validated once; every
contract then gets its own samples and its own receipt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbox import __version__
from benchbox.contracts import STAGES, Contract, load_contract
from benchbox.errors import BenchboxError, UsageError
from benchbox.harness import Harness, Measurement, PhaseTimer
from benchbox.harness.loop import clock_cross_check
from benchbox.harness.sampling import DEFAULT_SAMPLES, SamplingPolicy
from benchbox.receipts.io import SCHEMA_VERSION, now_iso, write_receipt
from benchbox.runners import RUNNERS, availability, make_runner, runner_class
from benchbox.stats import (
    FLOOR_MULTIPLE,
    caveats,
    floor_for,
    floor_resolvable,
    ratio_ci,
    steady_state,
    summarize,
)
from benchbox.tasks import CallTrace, Case, Task, load_task

DEFAULT_RUNNERS = ("torch-eager", "torch-compile")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunConfig:
    """Everything that decides what a run measures."""

    contract: str = "public_task_call_wall"
    #: several contracts in one run (prepared once, one receipt each); overrides ``contract``
    contracts: tuple[str, ...] = ()
    task: str = "decision"
    size: str = "tiny"
    dtype: str = "float32"
    runners: tuple[str, ...] = DEFAULT_RUNNERS
    cases: tuple[str, ...] = ()
    device: str = "cpu"
    #: torch intra-op threads for the run (None: torch's default); recorded in the environment
    threads: int | None = None
    warmup: int = 5
    samples: int = DEFAULT_SAMPLES
    #: adaptive sampling: stop when the p50 interval's relative half-width is below this (None: fixed)
    target_ci: float | None = None
    max_samples: int = 10_000
    max_time_s: float = 60.0
    out: Path | None = None
    baseline: str | None = None
    runner_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    task_options: dict[str, Any] = field(default_factory=dict)
    gates: dict[str, float] = field(default_factory=dict)
    command: tuple[str, ...] = ()


@dataclass
class RunOutcome:
    """The receipt and where it was written (the first contract's), and those of the others."""

    path: Path
    receipt: dict[str, Any]
    others: list[RunOutcome] = field(default_factory=list)

    @property
    def all(self) -> list[RunOutcome]:
        return [self, *self.others]

    @property
    def ok(self) -> bool:
        return all(r["status"] == "valid" for o in self.all for r in o.receipt["results"])


def out_paths(out: Path | None, names: list[str]) -> list[Path]:
    """One receipt path per contract: ``out`` itself for one, ``stem.CONTRACT.json`` for several."""
    base = Path(out) if out is not None else default_out()
    if len(names) == 1:
        return [base]
    return [base.with_name(f"{base.stem}.{n}{base.suffix or '.json'}") for n in names]


def default_out() -> Path:
    stamp = now_iso().replace(":", "").replace("+0000", "Z").replace("-", "")
    return Path("receipts") / f"run-{stamp}.json"


def model_facts(model: Any) -> dict[str, Any]:
    """Parameter count and a hash of the weights."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().float().cpu().contiguous().numpy().tobytes())
    n = sum(p.numel() for p in model.parameters())
    return {"parameters": int(n), "model_sha256": h.hexdigest()}


def _validate_config(cfg: RunConfig) -> None:
    for r in cfg.runners:
        if r not in RUNNERS:
            raise UsageError(f"unknown runner '{r}' (runners: {', '.join(RUNNERS)})")
    if len(set(cfg.runners)) != len(cfg.runners):
        raise UsageError("a runner is named twice")
    for r in cfg.runners:  # option keys, before anything is measured
        runner_class(r).check_options(cfg.runner_options.get(r, {}))
    if cfg.threads is not None and cfg.threads < 1:
        raise UsageError("--threads must be ≥ 1")
    if cfg.samples < 1 or cfg.warmup < 0:
        raise UsageError("--samples must be ≥ 1 and --warmup ≥ 0")
    sampling_policy(cfg)
    if cfg.dtype not in ("float32", "float16", "bfloat16"):
        raise UsageError(f"unknown dtype '{cfg.dtype}' (float32, float16, bfloat16)")
    if not re.fullmatch(r"cpu|cuda(:\d+)?", cfg.device):
        raise UsageError(f"unknown device '{cfg.device}' (cpu, cuda, cuda:N)")


def _row(runner: str, case: Any, status: str, reasons: list[str], **extra: Any) -> dict[str, Any]:
    row = {"runner": runner, "case": case.name, "request_sha256": case.sha256, "status": status,
           "reasons": reasons, "runner_report": {}, "accuracy": None, "samples_ns": [],
           "stages_ns": {}, "summary": {"n": 0}}
    row.update(extra)
    return row


def _error_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}"[:500]


def sampling_policy(cfg: RunConfig) -> SamplingPolicy:
    """The sampling policy a run config asks for (UsageError on bad values)."""
    return SamplingPolicy(samples=cfg.samples, warmup=cfg.warmup, target_ci_pct=cfg.target_ci,
                          max_samples=cfg.max_samples, max_time_s=cfg.max_time_s)


def _ratio_entry(r: dict[str, Any], base: dict[str, Any], calibration: dict[str, Any] | None
                 ) -> dict[str, Any]:
    """BCa intervals of the p50 (and, when both are resolvable, p99) ratios, and the floor verdict."""
    out: dict[str, Any] = {}
    for key, q in (("p50", 0.5), ("p99", 0.99)):
        if key == "p99" and (r["summary"].get("p99_ci_ns") is None
                             or base["summary"].get("p99_ci_ns") is None):
            out["p99_ratio_ci"] = None
            continue
        ci = ratio_ci(base["samples_ns"], r["samples_ns"], q)
        out[f"{key}_ratio_ci"] = list(ci) if ci is not None else None
    out["ratio_ci_method"] = "BCa bootstrap (benchbox.stats.ratio_ci), 95%"
    clock, base_clock = r.get("clock_used", "host"), base.get("clock_used", "host")
    delta = r["summary"]["p50_ns"] - base["summary"]["p50_ns"]
    floor = floor_for(calibration, clock)
    out.update(p50_delta_ns=delta, floor_ns=floor, floor_multiple=FLOOR_MULTIPLE)
    ci = out["p50_ratio_ci"]
    if clock != base_clock:
        out["p50_verdict"] = f"not comparable: timed with the {clock} clock vs the {base_clock} clock"
    elif not floor_resolvable(delta, floor):
        out["p50_verdict"] = (f"unresolvable: |Δp50| {abs(delta)} ns is under {FLOOR_MULTIPLE:g}× "
                              f"the {clock} floor ({floor} ns)" if floor is not None
                              else "unresolvable: no floor measured for this clock")
    elif ci is None:
        out["p50_verdict"] = "unresolved: too few samples for an interval"
    elif ci[1] < 1.0:
        out["p50_verdict"] = "faster"
    elif ci[0] > 1.0:
        out["p50_verdict"] = "slower"
    else:
        out["p50_verdict"] = "indistinguishable: the interval holds 1"
    return out


def compare(results: list[dict[str, Any]], baseline: str | None,
            calibration: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per case, each valid runner's p50/p99 against the baseline runner's; invalid rows excluded.

    Ratios are runner / baseline, with BCa bootstrap intervals; a p50 difference under
    the stated multiple of the harness floor (from ``calibration``) is unresolvable.
    """
    excluded = [{"runner": r["runner"], "case": r["case"], "status": r["status"],
                 "reasons": r["reasons"], "options": (r.get("runner_report") or {}).get("options")}
                for r in results if r["status"] != "valid"]
    rows = []
    by_case: dict[str, dict[str, dict[str, Any]]] = {}
    for r in results:
        if r["status"] == "valid":
            by_case.setdefault(r["case"], {})[r["runner"]] = r
    for case, runners in by_case.items():
        if baseline not in runners:
            continue
        base = runners[baseline]
        for name, r in runners.items():
            if name == baseline:
                continue
            rows.append({"case": case, "runner": name, "baseline": baseline,
                         "p50_ratio": r["summary"]["p50_ns"] / base["summary"]["p50_ns"],
                         "p99_ratio": r["summary"]["p99_ns"] / base["summary"]["p99_ns"],
                         **_ratio_entry(r, base, calibration)})
    return {"baseline": baseline, "rows": rows, "excluded": excluded}


class Interrupted(BenchboxError):
    """SIGINT stopped the run; the receipt on disk holds every finished result (exit 130)."""

    exit_code = 130

    def __init__(self, message: str, path: Path | None, receipt: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.path = path
        self.receipt = receipt


class _SampleInterrupt(BaseException):
    """Raised from the harness's stop callback after the sample in progress has finished.

    A BaseException, so that no ``except Exception`` on the way turns it into a failed row.
    """

    def __init__(self, measurement: Any) -> None:
        super().__init__("interrupted")
        self.measurement = measurement


class _Stop:
    """SIGINT during a run: finish the current sample, keep every finished result, stop.

    The handler only sets a flag; the run checks it between samples (through the
    harness's ``should_stop`` callback) and between (runner, case) results. A
    second SIGINT raises KeyboardInterrupt at once; the receipt on disk still
    holds every finished result. Only installed in the main thread.
    """

    def __init__(self) -> None:
        self.requested = False
        self.immediate = False
        self.targets: list[tuple[Path, dict[str, Any]]] = []
        self._previous: Any = None
        self._installed = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self.requested or self.immediate:
            self.requested = True  # also if a library turns the KeyboardInterrupt into its own error
            raise KeyboardInterrupt
        self.requested = True

    @contextmanager
    def preparing(self) -> Iterator[None]:
        """No sample is in progress (build, compile, calibration): SIGINT stops at once."""
        if self.requested:
            raise self.interrupted("SIGINT")
        self.immediate = True
        try:
            yield
        finally:
            self.immediate = False

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
            self._installed = True

    def restore(self) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False

    def should_stop(self, inner: Callable[[Any], str | None] | None = None
                    ) -> Callable[[Any], str | None]:
        """The harness's stop callback, with the interrupt check in front of ``inner``."""
        def stop(m: Any) -> str | None:
            if self.requested:
                raise _SampleInterrupt(m)
            return inner(m) if inner is not None else None
        return stop

    def check(self) -> None:
        if self.requested:
            raise self.interrupted("SIGINT")

    def interrupted(self, why: str) -> Interrupted:
        """Mark the receipts interrupted and incomplete, write them, and build the error."""
        if not self.targets:
            return Interrupted(f"interrupted ({why}) before anything was measured", None, None)
        for out, receipt in self.targets:
            n = len(receipt["results"])
            receipt.update(complete=False, interrupted=True,
                           interrupt_reason=f"{why} after {n} result(s)", interrupted_at=now_iso())
            write_receipt(out, receipt)
        out, receipt = self.targets[0]
        where = ", ".join(str(o) for o, _ in self.targets)
        n = len(receipt["results"])
        return Interrupted(f"interrupted ({why}): {n} result(s) kept in the incomplete receipt {where}",
                           out, receipt)


def run(cfg: RunConfig, progress: Progress = lambda s: None) -> RunOutcome:
    """Measure every (runner, case); write the receipt after each one.

    SIGINT finishes the sample in progress, keeps the current case's samples so
    far as an ``invalid`` row marked ``partial`` (excluded from comparisons),
    writes the receipt with ``complete: false, interrupted: true`` and raises
    :class:`Interrupted`.
    """
    stop = _Stop()
    stop.install()
    try:
        return _run(cfg, progress, stop)
    except KeyboardInterrupt:
        raise stop.interrupted("SIGINT") from None
    finally:
        stop.restore()


def _run(cfg: RunConfig, progress: Progress, stop: _Stop) -> RunOutcome:
    _validate_config(cfg)
    contracts: list[Contract] = [load_contract(c) for c in (cfg.contracts or (cfg.contract,))]
    if len({c.name for c in contracts}) != len(contracts):
        raise UsageError("a contract is named twice")
    if len({c.policy.cuda_graphs for c in contracts}) > 1:
        raise UsageError("contracts in one run must agree on policy.cuda_graphs "
                         "(the runners are prepared once for all of them)")
    task: Task = load_task(cfg.task, size=cfg.size, dtype=cfg.dtype, options=dict(cfg.task_options),
                           gate_overrides=dict(cfg.gates))
    cases = task.cases()
    if not isinstance(cases, list) or not cases or not all(isinstance(c, Case) for c in cases):
        raise UsageError(f"--task {cfg.task}: cases() must return a non-empty list of benchbox.tasks.Case")
    for case in cases:
        try:
            task.parse(case.request)
        except Exception as e:  # a task's parse may fail in any way on a bad request
            raise UsageError(f"case {case.name}: invalid request for task {task.name}: "
                             f"{_error_line(e)}") from None
    if cfg.cases:
        names = [c.name for c in cases]
        unknown = [c for c in cfg.cases if c not in names]
        if unknown:
            raise UsageError(f"unknown case '{unknown[0]}' for task {task.name} (cases: {', '.join(names)})")
        cases = [c for c in cases if c.name in cfg.cases]
    outs = out_paths(cfg.out, [c.name for c in contracts])
    if cfg.baseline is not None and cfg.baseline not in cfg.runners:
        raise UsageError(f"--baseline {cfg.baseline!r} is not one of the runners of this run "
                         f"({', '.join(cfg.runners)})")
    unknown_gates = sorted(set(cfg.gates) - set(task.default_gates()))
    if unknown_gates:
        raise UsageError(f"--gate {unknown_gates[0]!r}: task {task.name} has the gates "
                         f"{', '.join(sorted(task.default_gates()))}")
    for g, v in cfg.gates.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise UsageError(f"--gate {g}={v!r}: the threshold must be a number")
    unsupported = [c.name for c in contracts if c.policy.state != "warm"
                   or not (c.policy.fresh_request or c.policy.saturated)]
    if unsupported:
        raise UsageError(f"contract {unsupported[0]}: the harness measures warm calls from fresh request "
                         "bytes only (policy.state = \"warm\", policy.fresh_request = true), or one "
                         "request re-run back to back under policy.saturated = true")
    baseline = cfg.baseline or ("torch-compile" if "torch-compile" in cfg.runners else cfg.runners[0])

    import torch  # (the runners need it; import before the environment is read)

    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)

    from benchbox import environment
    from benchbox.harness.calibration import calibrate

    env = environment.collect(cfg.device)
    receipts: list[dict[str, Any]] = [{
        "schema_version": SCHEMA_VERSION,
        "benchbox_version": __version__,
        "created_at": now_iso(),
        "command": list(cfg.command) or ["benchbox", "run"],
        "complete": False,
        "contract": contract.to_dict(),
        "environment": env,
        "task": {**task.info(), "cases": [{"name": c.name, "request_sha256": c.sha256} for c in cases]},
        "settings": {"warmup": cfg.warmup, "samples": cfg.samples, "device": cfg.device,
                     "sampling": sampling_policy(cfg).describe(),
                     "runners": list(cfg.runners), "baseline": baseline,
                     "gates": task.gate_thresholds(),
                     "contracts_in_run": [c.name for c in contracts]},
        "calibration": {},
        "results": [],
    } for contract in contracts]
    targets = list(zip(outs, receipts))

    def save() -> None:
        for o, r in targets:
            write_receipt(o, r)

    def add_rows(rows: list[dict[str, Any]]) -> None:
        for (_, r), row in zip(targets, rows):
            r["results"].append(row)
        save()

    save()
    stop.targets = targets
    for o in outs:
        progress(f"receipt: {o}")

    progress("calibrating the harness floors")
    for contract, receipt in zip(contracts, receipts):
        try:
            with stop.preparing():
                receipt["calibration"] = calibrate(contract, cfg.device)
        except Exception as e:  # e.g. a device that is not here: the runners report it per row
            stop.check()
            progress(f"calibration failed: {_error_line(e)}")
            receipt["calibration"] = {"error": _error_line(e)}

    # the float32 eager reference, computed once per case, outside any timing
    progress("computing the float32 reference")
    ref_task = dataclasses.replace(task, dtype="float32") if task.dtype != "float32" else task
    ref_model = ref_task.build_model()
    facts = model_facts(ref_model)
    for receipt in receipts:
        receipt["task"].update(facts)
    harnesses = [Harness(c) for c in contracts]
    harness = harnesses[0]
    ref_runner = make_runner("torch-eager", "cpu")
    references: dict[str, CallTrace] = {}
    ref_runner.prepare(ref_task, ref_model, task.preprocess(task.parse(cases[0].request)), PhaseTimer())
    for case in cases:
        try:
            references[case.name] = harness.call(ref_task, ref_runner, case.request)
        except ValueError as e:
            raise UsageError(f"case {case.name}: invalid request for task {task.name}: {e}") from None
    example = task.preprocess(task.parse(cases[0].request))
    save()

    for name in cfg.runners:
        stop.check()
        opts = cfg.runner_options.get(name, {})
        reason = _availability(name, cfg.device, opts)
        if reason is not None:
            progress(f"{name}: cannot run: {reason}; gathering build facts")
            report = {"options": opts, **_unavailable_facts(name, cfg.device, opts, task, example, progress,
                                                            contracts[0].policy),
                      "unavailable": reason}
            for case in cases:
                add_rows([_row(name, case, "failed", [reason], runner_report=report)] * len(targets))
            continue
        phases = PhaseTimer()
        try:
            runner = make_runner(name, cfg.device, opts)
            runner.apply_policy(contracts[0].policy)
            progress(f"{name}: preparing")
            with stop.preparing():
                runner.prepare(task, task.build_model(), example, phases)
        except UsageError:
            raise
        except Exception as e:
            stop.check()  # a SIGINT during preparation may come back as the library's own error
            progress(f"{name}: preparation failed: {_error_line(e)}")
            report = {"options": opts, "prepare_s": phases.seconds, "error": _error_line(e),
                      "traceback": traceback.format_exc(limit=8)}
            for case in cases:
                add_rows([_row(name, case, "failed", [f"preparation failed: {_error_line(e)}"],
                               runner_report=report)] * len(targets))
            continue
        for case in cases:
            stop.check()
            add_rows(_measure_case(harnesses, task, runner, case, references[case.name],
                                   cfg, phases, progress, stop))

    stop.check()
    after = environment.gpu_state(cfg.device) if cfg.device.startswith("cuda") else None
    for receipt in receipts:
        receipt["comparisons"] = compare(receipt["results"], baseline, receipt["calibration"])
        if after is not None:
            receipt["environment"] = {**receipt["environment"], "gpu_state_after": after}
        receipt["complete"] = True
    save()
    first, *rest = [RunOutcome(o, r) for o, r in targets]
    first.others = rest
    return first


def _unavailable_facts(name: str, device: str, opts: dict[str, Any], task: Task, example: Any,
                       progress: Progress, policy: Any) -> dict[str, Any]:
    """What a runner that cannot run here can still tell (build facts); never samples."""
    phases = PhaseTimer()
    try:
        runner = make_runner(name, device, opts)
        runner.apply_policy(policy)
        facts = runner.gather_facts(task, example, phases)
    except UsageError:
        raise
    except Exception as e:
        progress(f"{name}: gathering build facts failed: {_error_line(e)}")
        facts = {"facts_error": _error_line(e), "traceback": traceback.format_exc(limit=8)}
    return {**facts, "prepare_s": dict(phases.seconds)} if facts or phases.seconds else {}


def _availability(name: str, device: str, opts: dict[str, Any]) -> str | None:
    """The runner's availability; a check that itself crashes makes the runner unavailable."""
    try:
        return availability(name, device, opts)
    except UsageError:
        raise
    except Exception as e:
        return f"availability check failed: {_error_line(e)}"


def _report(runner: Any) -> dict[str, Any]:
    """The runner's report; a report that itself fails is recorded, not raised."""
    try:
        return dict(runner.report())
    except Exception as e:
        return {"report_error": _error_line(e)}


def _measure_case(harnesses: list[Harness], task: Task, runner: Any, case: Any, reference: CallTrace,
                  cfg: RunConfig, phases: PhaseTimer, progress: Progress,
                  stop: _Stop | None = None) -> list[dict[str, Any]]:
    """Validate once (two untimed calls, outside every timed region), then sample per contract."""
    try:
        first = harnesses[0].call(task, runner, case.request)
        second = harnesses[0].call(task, runner, case.request)
        gates = task.gates(reference, first, second)
    except Exception as e:
        progress(f"{runner.name} × {case.name}: failed: {_error_line(e)}")
        row = _row(runner.name, case, "failed", [_error_line(e)],
                   runner_report={**_report(runner), "prepare_s": dict(phases.seconds),
                                  "traceback": traceback.format_exc(limit=8)})
        return [row] * len(harnesses)
    if len(harnesses) > 1 and not sampling_policy(cfg).adaptive:
        return _measure_interleaved(harnesses, task, runner, case, gates, cfg, phases, progress, stop)
    rows = []
    for harness in harnesses:
        rows.append(_measure_one(harness, task, runner, case, gates, cfg, phases, progress, stop))
        if rows[-1].get("partial"):
            # interrupted: the other contracts get nothing more for this case
            break
    return rows


#: samples per contract per round when several contracts are sampled in one run
ROUND_SAMPLES = 100


def _sampling_key(contract: Contract) -> tuple[Any, ...]:
    """Contracts with equal keys run identical code per sample and can share samples.

    A host-clock contract adds no action inside the call unless it synchronizes at its
    close; the harness stamps every boundary anyway, so one sample gives every such
    contract's region. Device-clock and synchronizing contracts sample on their own.
    """
    p = contract.policy
    if contract.clock == "host" and p.sync_at_close == "none":
        return ("host", p.state, p.fresh_request, p.cuda_graphs)
    return ("own", contract.hash)


def _derive(m: Measurement, contract: Contract, leader: Contract) -> Measurement:
    """Another host-clock contract's samples from the stamps of ``m`` (the leader's samples)."""
    if contract is leader:
        return m
    a, b = contract.first_index, contract.last_index + 1
    cols = [m.stages_ns[s] for s in STAGES[a:b]]
    return Measurement(samples_ns=[int(sum(x)) for x in zip(*cols)], stages_ns=m.stages_ns,
                       clock_used="host", warmup=m.warmup,
                       clock_note=f"samples shared with {leader.name}: the same calls, this contract's "
                                  f"region ({contract.first}..{contract.last}) read from their stamps")


def _measure_interleaved(harnesses: list[Harness], task: Task, runner: Any, case: Any,
                         gates: list[Any], cfg: RunConfig, phases: PhaseTimer, progress: Progress,
                         stop: _Stop | None) -> list[dict[str, Any]]:
    """Fixed sampling of several contracts in one run.

    Host-clock contracts that add no synchronization share one set of calls (every
    boundary is stamped in every call, so each contract's region is read from the same
    stamps). Device-clock contracts take their samples in one pass (their stream hold and
    event floor are measured once per pass). The other sampling passes run in rounds, each taking up to
    ROUND_SAMPLES samples in turn (the first round after the full warm-up, later ones
    after one warm-up call), so drift on the machine hits every contract alike.
    """
    stop = stop or _Stop()
    policy = sampling_policy(cfg)
    leaders: dict[tuple[Any, ...], int] = {}
    for i, h in enumerate(harnesses):
        leaders.setdefault(_sampling_key(h.contract), i)
    lead_of = [leaders[_sampling_key(h.contract)] for h in harnesses]
    order = list(leaders.values())
    merged = {i: Measurement() for i in order}
    errors: dict[int, str] = {}
    rounds, left, interrupted = 0, policy.limit, False
    while left > 0 and len(errors) < len(order) and not interrupted:
        k = min(ROUND_SAMPLES, left)
        for i in order:
            harness = harnesses[i]
            one_pass = harness.contract.clock == "device"
            if i in errors or (one_pass and rounds > 0):
                continue
            try:
                part = harness.measure(task, runner, case.request,
                                       samples=policy.limit if one_pass else k,
                                       warmup=policy.warmup if rounds == 0 else 1,
                                       should_stop=stop.should_stop(None))
            except _SampleInterrupt as intr:
                _merge(merged[i], intr.measurement, first=rounds == 0)
                interrupted = True
                break
            except Exception as e:
                progress(f"{runner.name} × {case.name} [{harness.contract.name}]: failed: {_error_line(e)}")
                errors[i] = _error_line(e)
                continue
            _merge(merged[i], part, first=rounds == 0)
        rounds += 1
        left -= k
    rows = []
    for i, harness in enumerate(harnesses):
        lead = lead_of[i]
        m = _derive(merged[lead], harness.contract, harnesses[lead].contract)
        label = f"{runner.name} × {case.name} [{harness.contract.name}]"
        if lead in errors:
            rows.append(_row(runner.name, case, "failed", [errors[lead]],
                             runner_report={**_report(runner), "prepare_s": dict(phases.seconds)},
                             samples_ns=m.samples_ns, stages_ns=m.stages_ns))
        elif interrupted:
            rows.append(_partial_row(runner, case, gates, m, phases, progress, label))
        else:
            shared = [h.contract.name for j, h in enumerate(harnesses) if lead_of[j] == lead and j != i]
            if harnesses[lead].contract.clock == "device":
                m.stop_reason = (f"fixed sample count {len(m.samples_ns)} reached in one pass (a device "
                                 "clock's calibration — hold, floor, batch — is measured once per pass, "
                                 "so it is not split)")
            else:
                m.stop_reason = (f"fixed sample count {len(m.samples_ns)} reached in {rounds} round(s) of "
                                 f"≤ {ROUND_SAMPLES}, interleaved with the other contracts of this run"
                                 + (f"; the same calls also gave {', '.join(shared)}" if shared else ""))
            rows.append(_result_row(harness, runner, case, gates, m, phases, progress, label))
    return rows


def _merge(into: Measurement, part: Measurement, first: bool) -> None:
    into.samples_ns.extend(part.samples_ns)
    for s, v in part.stages_ns.items():
        into.stages_ns[s].extend(v)
    if first:
        into.clock_used, into.warmup = part.clock_used, part.warmup
        into.clock_note = part.clock_note
        # a device-clock contract samples in one pass, so only a first part carries these
        into.batch, into.host_span_ns = part.batch, part.host_span_ns


def _partial_row(runner: Any, case: Any, gates: list[Any], m: Measurement, phases: PhaseTimer,
                 progress: Progress, label: str) -> dict[str, Any]:
    """SIGINT during sampling: the samples so far, kept as a partial row never compared."""
    m.stop_reason = f"interrupted by SIGINT after {len(m.samples_ns)} sample(s)"
    progress(f"{label}: interrupted; keeping {len(m.samples_ns)} sample(s)")
    return _row(runner.name, case, "invalid", [f"partial: {m.stop_reason}; not comparable"],
                partial=True, runner_report={**_report(runner), "prepare_s": dict(phases.seconds)},
                accuracy={"passed": all(g.passed for g in gates), "gates": [g.to_dict() for g in gates],
                          "reference": "eager float32 on cpu"},
                samples_ns=m.samples_ns, stages_ns=m.stages_ns, summary=summarize(m.samples_ns),
                clock_used=m.clock_used, clock_note=m.clock_note, warmup=m.warmup,
                stop_reason=m.stop_reason)


def _measure_one(harness: Harness, task: Task, runner: Any, case: Any, gates: list[Any],
                 cfg: RunConfig, phases: PhaseTimer, progress: Progress,
                 stop: _Stop | None = None) -> dict[str, Any]:
    name = runner.name
    stop = stop or _Stop()
    label = f"{name} × {case.name}" + (f" [{harness.contract.name}]" if cfg.contracts else "")
    try:
        policy = sampling_policy(cfg)
        m = harness.measure(task, runner, case.request, samples=policy.limit, warmup=policy.warmup,
                            should_stop=stop.should_stop(policy.stopper()))
    except _SampleInterrupt as i:
        return _partial_row(runner, case, gates, i.measurement, phases, progress, label)
    except Exception as e:
        progress(f"{label}: failed: {_error_line(e)}")
        return _row(name, case, "failed", [_error_line(e)],
                    runner_report={**_report(runner), "prepare_s": dict(phases.seconds),
                                   "traceback": traceback.format_exc(limit=8)})
    return _result_row(harness, runner, case, gates, m, phases, progress, label)


def _result_row(harness: Harness, runner: Any, case: Any, gates: list[Any], m: Measurement,
                phases: PhaseTimer, progress: Progress, label: str) -> dict[str, Any]:
    """The receipt row of a finished measurement: status from the gates, statistics, caveats."""
    name = runner.name
    failed = [g for g in gates if not g.passed]
    status = "invalid" if failed else "valid"
    reasons = [f"accuracy gate {g.name} failed: value {g.value}, threshold {g.threshold}"
               + (f" ({g.detail})" if g.detail else "") for g in failed]
    try:
        summary = summarize(m.samples_ns)
        steady = steady_state(m.samples_ns)
        cross = clock_cross_check(m, harness.contract)
    except Exception as e:  # keep what was measured even if its statistics fail
        progress(f"{label}: statistics failed: {_error_line(e)}")
        return _row(name, case, "failed", [f"statistics failed: {_error_line(e)}"],
                    runner_report={**_report(runner), "prepare_s": dict(phases.seconds)},
                    samples_ns=m.samples_ns, stages_ns=m.stages_ns, clock_used=m.clock_used,
                    clock_note=m.clock_note, warmup=m.warmup, stop_reason=m.stop_reason)
    reasons += caveats(summary, steady)  # caveats never change the status
    if cross and cross["violations"]:
        reasons.append(f"clock cross-check: {cross['violations']} of {cross['samples']} samples have "
                       f"device time above the host span {cross['host_span']}: the accounting is wrong")
    progress(f"{label}: {status}, p50 {summary['p50_ns'] / 1e6:.3f} ms "
             f"over {summary['n']} samples")
    return _row(name, case, status, reasons,
                runner_report={**_report(runner), "prepare_s": dict(phases.seconds)},
                accuracy={"passed": not failed, "gates": [g.to_dict() for g in gates],
                          "reference": "eager float32 on cpu"},
                samples_ns=m.samples_ns, stages_ns=m.stages_ns, summary=summary,
                clock_used=m.clock_used, clock_note=m.clock_note, warmup=m.warmup,
                stop_reason=m.stop_reason, steady_state=steady, clock_cross_check=cross)


