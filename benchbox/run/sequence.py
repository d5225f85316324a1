"""``benchbox run`` as a library call: the run sequence, top to bottom.

validate → open receipts → calibrate → reference → for each runner: prepare, then for
each case: validate (accuracy) → sample → record → finish.

Each runner is prepared (built, compiled) once and each case validated once; every
contract then gets its own samples and its own receipt, written after each
(runner, case). The seams (``clock``, ``runner_factory``, ``task``) let tests put fakes
in without touching module globals.
"""

from __future__ import annotations

import dataclasses
import hashlib
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbox.contracts import Contract, load_contract
from benchbox.errors import FieldError, UsageError, error_line
from benchbox.harness import Harness, PhaseTimer
from benchbox.harness.clocks import HostClock, host_clock
from benchbox.harness.schedule import sample, sampling_key
from benchbox.receipts import build
from benchbox.receipts.io import now_iso
from benchbox.receipts.model import Calibration, Receipt, ResultRow
from benchbox.run.capture import OutputLog
from benchbox.run.config import RunConfig
from benchbox.run.interrupt import Stop
from benchbox.run.progress import LineReporter, Reporter, RunPlan, passes
from benchbox.runners import Runner, availability, make_runner
from benchbox.tasks import CallTrace, Case, Task, load_task

Progress = Callable[[str], None]
RunnerFactory = Callable[[str, str, dict[str, Any]], Runner]


@dataclass
class RunOutcome:
    """The receipt and where it was written (the first contract's), and those of the others."""

    path: Path
    receipt: Receipt
    others: list[RunOutcome] = field(default_factory=list)

    @property
    def all(self) -> list[RunOutcome]:
        return [self, *self.others]

    @property
    def ok(self) -> bool:
        return all(r.status == "valid" for o in self.all for r in o.receipt.results)


def out_paths(out: Path | None, names: Sequence[str]) -> list[Path]:
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


def run(cfg: RunConfig, progress: Progress = lambda s: None, *, reporter: Reporter | None = None,
        clock: HostClock = host_clock, runner_factory: RunnerFactory = make_runner,
        task: Task | None = None) -> RunOutcome:
    """Measure every (runner, case); write the receipts after each one.

    ``reporter`` receives the phases and progress (:mod:`benchbox.run.progress`); without one,
    ``progress`` gets one plain line per step. Library output (warnings, compiler logs) is
    captured into each runner report's ``log`` and a ``.log`` file next to the receipt.

    An interrupt finishes the sample in progress, keeps the current case's samples so far
    as an ``invalid`` row marked ``partial`` (excluded from comparisons), writes the
    receipts with ``complete: false, interrupted: true`` and raises
    :class:`~benchbox.run.interrupt.Interrupted`.
    """
    stop = Stop()
    shown = reporter if reporter is not None else LineReporter(progress)
    with stop.installed():
        try:
            return _Run(cfg, shown, stop, clock, runner_factory, task).execute()
        except KeyboardInterrupt:
            raise stop.interrupted() from None
        finally:
            shown.run_finished()


class _Run:
    """One run's state; ``execute`` is the sequence."""

    def __init__(self, cfg: RunConfig, reporter: Reporter, stop: Stop, clock: HostClock,
                 runner_factory: RunnerFactory, task: Task | None) -> None:
        self.cfg, self.reporter, self.stop = cfg, reporter, stop
        self.progress: Progress = reporter.note
        self.log = OutputLog(None)
        self.clock, self.runner_factory, self.given_task = clock, runner_factory, task

    def execute(self) -> RunOutcome:
        cfg = self.cfg
        cfg.validate()
        self.contracts = self._contracts()
        self.task, self.cases = self._task()
        self.policy = cfg.sampling()
        self.baseline = cfg.chosen_baseline

        import torch  # (the runners need it; import before the environment is read)

        if cfg.threads is not None:
            torch.set_num_threads(cfg.threads)
        self.receipts = self._open_receipts()
        self.log = OutputLog(self.receipts.paths[0].with_suffix(".log"), self.reporter.captured)
        self.reporter.run_started(self._plan())
        self._calibrate()
        self.references = self._reference()
        self.harnesses = [Harness(c, self.clock) for c in self.contracts]
        for name in cfg.runners:
            self.stop.check()
            self._measure_runner(name)
        self.stop.check()
        return self._finish()

    def _plan(self) -> RunPlan:
        p = self.policy
        n = passes([sampling_key(c) for c in self.contracts])
        return RunPlan(runners=tuple(self.cfg.runners), cases=tuple(c.name for c in self.cases),
                       samples_per_case=p.limit * n, adaptive=p.adaptive,
                       max_time_s=p.max_time_s if p.adaptive else None, passes=n)

    # -- validate ---------------------------------------------------------------------------
    def _contracts(self) -> list[Contract]:
        contracts = [load_contract(c) for c in self.cfg.contract_names]
        if len({c.name for c in contracts}) != len(contracts):
            raise FieldError("contracts", "a contract is named twice")
        if len({c.policy.cuda_graphs for c in contracts}) > 1:
            raise FieldError("contracts", "contracts in one run must agree on policy.cuda_graphs "
                                          "(the runners are prepared once for all of them)")
        unsupported = [c.name for c in contracts if c.policy.state != "warm"
                       or not (c.policy.fresh_request or c.policy.saturated)]
        if unsupported:
            raise FieldError("contracts", f"contract {unsupported[0]}: the harness measures warm calls from "
                                          "fresh request bytes only (policy.state = \"warm\", "
                                          "policy.fresh_request = true), or one request re-run back to back "
                                          "under policy.saturated = true")
        return contracts

    def _task(self) -> tuple[Task, list[Case]]:
        cfg = self.cfg
        task = self.given_task or load_task(cfg.task, size=cfg.size, dtype=cfg.dtype,
                                            options=dict(cfg.task_options), gate_overrides=dict(cfg.gates))
        cases = task.cases()
        if not isinstance(cases, list) or not cases or not all(isinstance(c, Case) for c in cases):
            raise FieldError("task", f"{cfg.task}: cases() must return a non-empty list of "
                                     "benchbox.tasks.Case")
        for case in cases:
            try:
                task.parse(case.request)
            except Exception as e:  # a task's parse may fail in any way on a bad request
                raise UsageError(f"case {case.name}: invalid request for task {task.name}: "
                                 f"{error_line(e)}") from None
        if cfg.cases:
            names = [c.name for c in cases]
            unknown = [c for c in cfg.cases if c not in names]
            if unknown:
                raise FieldError("cases", f"unknown case '{unknown[0]}' for task {task.name} "
                                          f"(cases: {', '.join(names)})")
            cases = [c for c in cases if c.name in cfg.cases]
        unknown_gates = sorted(set(cfg.gates) - set(task.default_gates()))
        if unknown_gates:
            raise FieldError("gates", f"{unknown_gates[0]!r}: task {task.name} has the gates "
                                      f"{', '.join(sorted(task.default_gates()))}")
        return task, cases

    # -- open receipts ----------------------------------------------------------------------
    def _open_receipts(self) -> build.ReceiptSet:
        from benchbox import environment

        cfg = self.cfg
        env = environment.collect(cfg.device)
        settings: dict[str, Any] = {
            "warmup": cfg.warmup, "samples": cfg.samples, "device": cfg.device,
            "sampling": self.policy.describe(), "runners": list(cfg.runners), "baseline": self.baseline,
            "gates": self.task.gate_thresholds(), "contracts_in_run": [c.name for c in self.contracts]}
        if cfg.labels:
            settings["labels"] = dict(cfg.labels)
        receipts = [build.new_receipt(c, command=cfg.command, environment=env, task=self.task.info(),
                                      cases=self.cases, settings=settings) for c in self.contracts]
        book = build.ReceiptSet(out_paths(cfg.out, [c.name for c in self.contracts]), receipts)
        book.save()
        self.stop.receipts = book
        for p in book.paths:
            self.progress(f"receipt: {p}")
        return book

    # -- calibrate --------------------------------------------------------------------------
    def _calibrate(self) -> None:
        from benchbox.harness.calibration import calibrate

        self.reporter.phase("calibrate")
        cals: list[Calibration] = []
        for contract in self.contracts:
            try:
                with self.stop.preparing(), self.log.capture(f"calibrate {contract.name}"):
                    cals.append(Calibration.of(calibrate(contract, self.cfg.device)))
            except Exception as e:  # e.g. a device that is not here: the runners report it per row
                self.stop.check()
                self.progress(f"calibration failed: {error_line(e)}")
                cals.append(Calibration(error=error_line(e)))
        self.receipts.update(lambda i, r: dataclasses.replace(r, calibration=cals[i]))

    # -- reference --------------------------------------------------------------------------
    def _reference(self) -> dict[str, CallTrace]:
        """The float32 eager reference, computed once per case on the CPU, outside any timing."""
        self.reporter.phase("reference")
        with self.log.capture("reference"):
            return self._reference_calls()

    def _reference_calls(self) -> dict[str, CallTrace]:
        task = self.task
        ref_task = dataclasses.replace(task, dtype="float32") if task.dtype != "float32" else task
        ref_model = ref_task.build_model()
        facts = model_facts(ref_model)
        self.receipts.update(lambda i, r: dataclasses.replace(
            r, task=dataclasses.replace(r.task, **facts)))
        ref_runner = make_runner("torch-eager", "cpu")
        harness = Harness(self.contracts[0], self.clock)
        self.example = task.preprocess(task.parse(self.cases[0].request))
        ref_runner.prepare(ref_task, ref_model, self.example, PhaseTimer(self.clock))
        references: dict[str, CallTrace] = {}
        for case in self.cases:
            try:
                references[case.name] = harness.call(ref_task, ref_runner, case.request)
            except ValueError as e:
                raise UsageError(f"case {case.name}: invalid request for task {task.name}: {e}") from None
        return references

    # -- for each runner: prepare, then each case ---------------------------------------------
    def _measure_runner(self, name: str) -> None:
        opts = self.cfg.runner_options.get(name, {})
        reason = self._availability(name, opts)
        if reason is not None:
            self.progress(f"{name}: cannot run: {reason}; gathering build facts")
            report = {"options": opts, **self._unavailable_facts(name, opts), "unavailable": reason}
            for case in self.cases:
                self._record([build.failed_row(name, case, reason, report)] * len(self.contracts))
            return
        phases = PhaseTimer(self.clock)
        try:
            runner = self.runner_factory(name, self.cfg.device, opts)
            runner.apply_policy(self.contracts[0].policy)
            self.reporter.phase("compile", name)
            with self.stop.preparing(), self.log.capture(f"{name}: compile", name):
                runner.prepare(self.task, self.task.build_model(), self.example, phases)
        except UsageError:
            raise
        except Exception as e:
            self.stop.check()  # a signal during preparation may come back as the library's own error
            self.progress(f"{name}: preparation failed: {error_line(e)}")
            report = {"options": opts, "prepare_s": phases.seconds, "error": error_line(e),
                      "traceback": traceback.format_exc(limit=8), **self._log_entry(name)}
            for case in self.cases:
                self._record([build.failed_row(name, case, f"preparation failed: {error_line(e)}", report)]
                             * len(self.contracts))
            return
        for case in self.cases:
            self.stop.check()
            rows = self._measure_case(runner, case, phases)
            self._record(rows)
            self.reporter.case_finished(name, case.name, "\n".join(self._lines(runner.name, case, rows)))

    def _measure_case(self, runner: Runner, case: Case, phases: PhaseTimer) -> list[ResultRow]:
        """Validate once (two untimed calls, outside every timed region), then sample every contract."""
        n = len(self.contracts)
        label = f"{runner.name} × {case.name}"
        try:
            self.reporter.phase("validate", runner.name, case.name)
            with self.log.capture(f"{label}: validate", runner.name):
                first = self.harnesses[0].call(self.task, runner, case.request)
                second = self.harnesses[0].call(self.task, runner, case.request)
                gates = self.task.gates(self.references[case.name], first, second)
        except Exception as e:
            report = {**_report(runner), "prepare_s": dict(phases.seconds),
                      "traceback": traceback.format_exc(limit=8), **self._log_entry(runner.name)}
            return [build.failed_row(runner.name, case, error_line(e), report)] * n
        self.reporter.phase("sample", runner.name, case.name)
        with self.log.capture(f"{label}: sample", runner.name):
            results = sample(self.harnesses, self.task, runner, case.request, self.policy, self._counted())
        rows: list[ResultRow] = []
        for harness, s in zip(self.harnesses, results):
            report = {**_report(runner), "prepare_s": dict(phases.seconds), **self._log_entry(runner.name)}
            if s.error is not None:
                report["traceback"] = s.traceback
                rows.append(build.failed_row(runner.name, case, s.error, report, s.measurement))
            elif s.interrupted:
                rows.append(build.partial_row(runner.name, case, gates, s.measurement, report,
                                              self.stop.signal_name))
            else:
                rows.append(build.result_row(harness.contract, runner.name, case, gates, s.measurement,
                                             report))
        return rows  # fewer than the contracts when an interrupt cut the case short

    def _counted(self) -> Callable[[Any], Any]:
        """The stop callback factory, counting samples for the reporter (every 10th, and the last)."""
        total = self.policy.limit * passes([sampling_key(c) for c in self.contracts])
        done = [0]

        def wrap(inner: Any) -> Any:
            check = self.stop.should_stop(inner)

            def counted(m: Any) -> str | None:
                done[0] += 1
                if done[0] % 10 == 0 or done[0] == total:
                    self.reporter.sampled(done[0], total)
                return check(m)
            return counted
        return wrap

    def _log_entry(self, runner: str) -> dict[str, Any]:
        entry = self.log.report(runner)
        return {"log": entry} if entry else {}

    def _lines(self, runner: str, case: Case, rows: list[ResultRow]) -> list[str]:
        """What a finished case says: one line per contract's row."""
        n = len(self.contracts)
        out = []
        for harness, row in zip(self.harnesses, rows):
            label = f"{runner} × {case.name}" + (f" [{harness.contract.name}]" if n > 1 else "")
            if row.partial:
                out.append(f"{label}: interrupted; keeping {len(row.samples_ns)} sample(s)")
            else:
                out.append(_finished(label, row))
        return out

    def _record(self, rows: list[ResultRow]) -> None:
        self.receipts.add_rows(rows)

    # -- finish -----------------------------------------------------------------------------
    def _finish(self) -> RunOutcome:
        from benchbox.receipts.runner_compare import compare

        environment = None
        if self.cfg.device.startswith("cuda"):
            from benchbox.environment import gpu_state

            environment = gpu_state(self.cfg.device)
        comparisons = [compare(r.results, self.baseline, r.calibration) for r in self.receipts.receipts]
        self.receipts.finish(comparisons, environment)
        first, *rest = [RunOutcome(p, r) for p, r in zip(self.receipts.paths, self.receipts.receipts)]
        first.others = rest
        return first

    # -- runners that cannot run ------------------------------------------------------------
    def _availability(self, name: str, opts: dict[str, Any]) -> str | None:
        """The runner's availability; a check that itself crashes makes the runner unavailable."""
        try:
            return availability(name, self.cfg.device, opts)
        except UsageError:
            raise
        except Exception as e:
            return f"availability check failed: {error_line(e)}"

    def _unavailable_facts(self, name: str, opts: dict[str, Any]) -> dict[str, Any]:
        """What a runner that cannot run here can still tell (build facts); never samples."""
        phases = PhaseTimer(self.clock)
        try:
            runner = self.runner_factory(name, self.cfg.device, opts)
            runner.apply_policy(self.contracts[0].policy)
            facts = runner.gather_facts(self.task, self.example, phases)
        except UsageError:
            raise
        except Exception as e:
            self.progress(f"{name}: gathering build facts failed: {error_line(e)}")
            facts = {"facts_error": error_line(e), "traceback": traceback.format_exc(limit=8)}
        return {**facts, "prepare_s": dict(phases.seconds)} if facts or phases.seconds else {}


def _report(runner: Any) -> dict[str, Any]:
    """The runner's report; a report that itself fails is recorded, not raised."""
    try:
        return dict(runner.report())
    except Exception as e:
        return {"report_error": error_line(e)}


def _finished(label: str, row: ResultRow) -> str:
    if row.status == "failed":
        return f"{label}: failed: {row.reasons[0] if row.reasons else 'no reason recorded'}"
    return f"{label}: {row.status}, p50 {row.summary.p50_ns / 1e6:.3f} ms over {row.summary.n} samples"
