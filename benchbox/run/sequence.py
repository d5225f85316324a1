"""``benchbox run`` as a library call: the run sequence, top to bottom.

validate → open receipts → calibrate → reference → measure (:mod:`benchbox.run.rounds`: for
each runner: prepare, then for each case: validate (accuracy) → sample → record, in one round or
``--repeats K``) → finish. What is validated first (contracts, task, cases) is
:mod:`benchbox.run.inputs`; the reference is :mod:`benchbox.run.reference`.

Each runner is prepared (built, compiled) once and each case validated once; every
contract then gets its own samples and its own receipt, written after each
(runner, case). The seams (``clock``, ``runner_factory``, ``task``) let tests put fakes
in without touching module globals: ``runner_factory`` (:mod:`benchbox.run.factory`) says
which runners exist, checks their options and availability, and makes them and the reference.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchbox.contracts import Contract
from benchbox.errors import FieldError, UsageError, error_line
from benchbox.harness import Harness, PhaseTimer
from benchbox.harness.clocks import HostClock, host_clock
from benchbox.harness.control import measure_control, probe
from benchbox.harness.quiet import check_layout, quieting
from benchbox.harness.sampling import SamplingPolicy
from benchbox.harness.schedule import sampling_key
from benchbox.receipts import build
from benchbox.receipts.conditions import load_warning
from benchbox.receipts.model import Calibration, ResultRow
from benchbox.receipts.settings import Settings
from benchbox.run.capture import OutputLog
from benchbox.run.config import RunConfig
from benchbox.run.contain import contained, describe
from benchbox.run.factory import REGISTERED, RunnerFactory
from benchbox.run.inputs import run_contracts, run_task
from benchbox.run.interrupt import Interrupted, Stop
from benchbox.run.limits import TimeLimit
from benchbox.run.outcome import RunOutcome
from benchbox.run.output import Output, log_path
from benchbox.run.progress import LineReporter, Reporter, RunPlan, passes
from benchbox.run.reference import Reference
from benchbox.run.rounds import measure
from benchbox.runners import Runner
from benchbox.tasks import CallTrace, Case, Task

Progress = Callable[[str], None]


def run(cfg: RunConfig, progress: Progress = lambda s: None, *, reporter: Reporter | None = None,
        clock: HostClock = host_clock, runner_factory: RunnerFactory = REGISTERED,
        task: Task | None = None, points: Sequence[tuple[Contract, Path]] | None = None) -> RunOutcome:
    """Measure every (runner, case); write the receipts after each one.

    ``reporter`` receives the phases and progress (:mod:`benchbox.run.progress`); without one,
    ``progress`` gets one plain line per step. Library output (warnings, compiler logs) is
    captured into each runner report's ``log`` and a ``.log`` file next to the receipt.

    ``clock`` is the harness's host clock (stamps and preparation phases); ``runner_factory``
    says which runners exist and makes them (:class:`~benchbox.run.factory.RunnerClasses` runs
    classes of one's own); ``task``, when given, is measured in place of ``cfg.task``.

    ``points`` (a sweep): contracts already resolved (the same contract under several
    arrivals, say), each with its receipt path, in place of the configuration's contracts.

    An interrupt finishes the sample in progress, keeps the current case's samples so far
    as an ``invalid`` row marked ``partial`` (excluded from comparisons), writes the
    receipts with ``complete: false, interrupted: true`` and raises
    :class:`~benchbox.run.interrupt.Interrupted`.
    """
    stop = Stop()
    shown = reporter if reporter is not None else LineReporter(progress)
    this = _Run(cfg, shown, stop, clock, runner_factory, task, points)
    with stop.installed():
        try:
            return this.execute()
        except Interrupted:  # the fresh processes' own: it is on its way out, as stop.interrupted()'s
            stop.exiting = True
            raise
        except KeyboardInterrupt:
            raise stop.interrupted() from None
        except BaseException as e:  # sys.exit or a BaseException from task or runner code
            if not contained(e):
                raise
            raise this.ended_by(e) from None
        finally:
            this.close()
            shown.run_finished()


class _Run:
    """One run's state; ``execute`` is the sequence."""

    def __init__(self, cfg: RunConfig, reporter: Reporter, stop: Stop, clock: HostClock,
                 runner_factory: RunnerFactory, task: Task | None,
                 points: Sequence[tuple[Contract, Path]] | None = None) -> None:
        self.cfg, self.reporter, self.stop = cfg, reporter, stop
        self.progress: Progress = reporter.note
        self.log = OutputLog(None)
        self.clock, self.runner_factory, self.given_task = clock, runner_factory, task
        self.points = list(points) if points is not None else None
        self.output: Output | None = None
        self.limit = TimeLimit(cfg.case_time_limit_s)
        #: the GPU's state read right after each case's samples (CUDA only)
        self.gpu_readings: list[dict[str, Any]] = []
        #: the process probe's calls (ns), timed before the task is loaded (:meth:`execute`)
        self.probe_ns: list[int] = []

    def close(self) -> None:
        """Release the receipt paths (after the last write)."""
        if self.output is not None:
            self.output.release()

    def ended_by(self, e: BaseException) -> UsageError:
        """The one line for task or runner code that left the run where nothing contained it."""
        kept = ""
        if self.output is not None and self.output.opened:
            kept = (f"; {len(self.output.receipts[0].results)} result(s) kept in the incomplete receipt "
                    f"{self.output.where}")
        return UsageError(f"the run was ended by {describe(e)}{kept}")

    def execute(self) -> RunOutcome:
        cfg = self.cfg
        cfg.validate(self.runner_factory)
        check_layout(cfg.layout)
        self.contracts = run_contracts(cfg, self.points)
        if cfg.in_workers:
            return self._in_fresh_processes()
        # the process probe: timed before the task is loaded (its module, constructor, cases and
        # parse are the code under test too), so that no change to that code can move it
        self.probe_ns = probe(self.clock)
        self.output = Output.claim(cfg.out, [c.name for c in self.contracts], cfg.overwrite,
                                   paths=[p for _, p in self.points] if self.points is not None else None)
        self.task, self.cases = run_task(cfg, self.stop, self.given_task)
        self.policy = cfg.sampling()
        self.baseline = cfg.chosen_baseline

        import torch  # (the runners need it; import before the environment is read)

        if cfg.threads is not None:
            torch.set_num_threads(cfg.threads)
        self.receipts = self._open_receipts()
        self.log = OutputLog(log_path(self.receipts.paths[0]), self.reporter.captured)
        self.reporter.run_started(self._plan())
        busy = load_warning(self.receipts.receipts[0].environment.load)
        if busy:
            self.reporter.note(busy)
        self._calibrate()
        self.references = self._reference()
        self.harnesses = [Harness(c, self.clock, cfg.load_bound()) for c in self.contracts]
        measure(self)
        self.stop.check()
        return self._finish()

    def _in_fresh_processes(self) -> RunOutcome:
        """Each round in a worker process of its own (:mod:`benchbox.run.workers`)."""
        from benchbox.run.workers import run_in_fresh_processes

        if self.points is not None or self.given_task is not None or self.runner_factory is not REGISTERED \
                or self.clock is not host_clock:
            raise FieldError("fresh_processes", "a worker process finds its task and runners by name: a "
                                                "task, runner factory, clock or sweep points given in code "
                                                "cannot reach it: run the rounds in one process "
                                                "(fresh_processes = false)")
        return run_in_fresh_processes(self.cfg, [c.name for c in self.contracts], self.reporter)

    def _plan(self) -> RunPlan:
        p = self.policy
        n = passes([sampling_key(c) for c in self.contracts])
        return RunPlan(runners=tuple(self.cfg.runners), cases=tuple(c.name for c in self.cases),
                       samples_per_case=p.limit * n, adaptive=p.adaptive,
                       max_time_s=p.max_time_s if p.adaptive else None, passes=n)

    # -- open receipts ----------------------------------------------------------------------
    def _open_receipts(self) -> Output:
        from benchbox import environment

        cfg = self.cfg
        env = environment.collect(cfg.device)
        settings = Settings(
            warmup=cfg.warmup, samples=cfg.samples, repeats=cfg.repeats, device=cfg.device,
            sampling=self.policy.describe(), runners=tuple(cfg.runners), baseline=self.baseline,
            gates=self.task.gate_thresholds(), contracts_in_run=tuple(c.name for c in self.contracts),
            case_time_limit_s=cfg.case_time_limit_s, settle_s=cfg.settle_s or None,
            labels=dict(cfg.labels) or None,
            overload_bound=cfg.load_bound().describe() if any(c.arrival.open_loop for c in self.contracts)
            else None,
            fresh_processes=cfg.in_workers, gc_mode=None if cfg.gc_mode == "on" else cfg.gc_mode,
            layout=None if cfg.layout == "random" else cfg.layout)
        process = build.this_process(env, cfg.repeats, quieting(cfg.gc_mode, env.get("torch_threads")))
        receipts = [build.new_receipt(c, command=cfg.command, environment=env, task=self.task.info(),
                                      cases=self.cases, settings=settings, process=process)
                    for c in self.contracts]
        assert self.output is not None
        book = self.output
        book.receipts = receipts
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
        self.reporter.phase("control")
        control = measure_control(self.clock)
        self.receipts.update(lambda _, r: build.with_process_facts(r, control=control))

    # -- reference --------------------------------------------------------------------------
    def _reference(self) -> dict[str, CallTrace]:
        """The float32 eager reference, computed once per case on the CPU, outside any timing."""
        self.reporter.phase("reference")
        with self.stop.preparing(), self.log.capture("reference"):  # no sample in progress: stop at once
            harness = Harness(self.contracts[0], self.clock)
            ref = Reference.of(self.task, self.cases, self.runner_factory, harness, self.limit, self.progress,
                               self._record_model_facts)
        self.example, self.reference_failures = ref.example, ref.failures
        return ref.calls

    def _record_model_facts(self, facts: dict[str, Any]) -> None:
        self.receipts.update(lambda i, r: dataclasses.replace(r, task=dataclasses.replace(r.task, **facts)))


    # -- the steps of measuring (:mod:`benchbox.run.rounds`) -------------------------------
    def prepare_runner(self, name: str) -> tuple[Runner, PhaseTimer] | None:
        """The prepared runner, or None when it cannot run or failed (its rows recorded)."""
        opts = self.cfg.runner_options.get(name, {})
        reason = self._availability(name, opts)
        if reason is not None:
            self.progress(f"{name}: cannot run: {reason}; gathering build facts")
            with self.log.capture(f"{name}: build facts", name):  # an ONNX export's warnings, say
                facts = self._unavailable_facts(name, opts)
            report = {"options": opts, **facts, "unavailable": reason, **self._log_entry(name)}
            for case in self.cases:
                self.receipts.add_rows([build.failed_row(name, case, reason, report)] * len(self.contracts))
            return None
        phases = PhaseTimer(self.clock, trials=self._trials())
        runner: Runner | None = None
        try:
            runner = self.runner_factory.make(name, self.cfg.device, opts)
            runner.apply_policy(self.contracts[0].policy)
            self.reporter.phase("compile", name)
            with self.stop.preparing(), self.log.capture(f"{name}: compile", name):
                runner.prepare(self.task, self.task.build_model(), self.example, phases)
        except UsageError:
            raise
        except BaseException as e:  # also sys.exit or a BaseException from task or runner code
            if not (isinstance(e, Exception) or contained(e)):
                raise
            self.stop.check()  # a signal during preparation may come back as the library's own error
            self.progress(f"{name}: preparation failed: {describe(e)}")
            # what the runner recorded before failing (parser findings, fallbacks, build facts)
            reported = _report(runner) if runner is not None else {}
            report = {**reported, "options": opts, "prepare_s": phases.seconds, "error": describe(e),
                      "traceback": traceback.format_exc(limit=8), **self._log_entry(name)}
            failed = f"preparation failed: {describe(e)}"
            for case in self.cases:
                self.receipts.add_rows([build.failed_row(name, case, failed, report)] * len(self.contracts))
            return None
        return runner, phases

    def _trials(self) -> Any:
        """The harness's trial measurement for a runner choosing between builds while it prepares:
        the first contract, the first case whose reference call succeeded (checked against it)."""
        from benchbox.harness.trials import Trials

        case = next((c for c in self.cases if c.name in self.references), self.cases[0])
        return Trials(self.harnesses[0], self.task, case.name, case.request, self.references.get(case.name))

    def reference_failed(self, runner: Runner, case: Case, phases: PhaseTimer) -> list[ResultRow]:
        """The rows of a (runner, case) whose reference call failed."""
        report = {**_report(runner), "prepare_s": dict(phases.seconds)}
        return [build.failed_row(runner.name, case, self.reference_failures[case.name], report)
                ] * len(self.contracts)

    def failed_case(self, runner: Runner, case: Case, phases: PhaseTimer, e: BaseException,
                    kept: Sequence[Any] = ()) -> list[ResultRow]:
        """The rows of a (runner, case) that sys.exit, a BaseException or the time limit ended
        (called from the ``except``); ``kept``: what sampling measured before, one per contract."""
        failed = describe(e)
        self.progress(f"{runner.name} × {case.name}: failed: {failed}")
        report = {**_report(runner), "prepare_s": dict(phases.seconds),
                  "traceback": traceback.format_exc(limit=8), **self._log_entry(runner.name)}
        if kept:
            return [build.failed_row(runner.name, case, failed, report, m) for m in kept]
        return [build.failed_row(runner.name, case, failed, report)] * len(self.contracts)

    def validate_case(self, runner: Runner, case: Case,
                      phases: PhaseTimer) -> tuple[list[ResultRow] | None, Any]:
        """(None, the accuracy gates) of one (runner, case), or (its failed rows, None)."""
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
            return [build.failed_row(runner.name, case, error_line(e), report)] * n, None
        return None, gates

    def settle_case(self, runner: Runner, case: Case, phases: PhaseTimer) -> list[ResultRow] | None:
        """The declared settle phase (cfg.settle_s of untimed back-to-back calls); failed rows or None."""
        seconds = self.cfg.settle_s
        if not seconds:
            return None
        label = f"{runner.name} × {case.name}"
        try:
            with self.log.capture(f"{label}: settle", runner.name):
                calls = self.harnesses[0].settle(self.task, runner, case.request, seconds,
                                                 stop=lambda: self.stop.requested)
        except Exception as e:
            report = {**_report(runner), "prepare_s": dict(phases.seconds),
                      "traceback": traceback.format_exc(limit=8), **self._log_entry(runner.name)}
            return [build.failed_row(runner.name, case, f"settle call failed: {error_line(e)}", report)
                    ] * len(self.contracts)
        if self.stop.requested:  # the interrupt cut the settle short
            self.progress(f"{label}: settle stopped by the interrupt after {calls} untimed call(s)")
        else:
            self.progress(f"{label}: settled with {calls} untimed back-to-back call(s) over {seconds:g} s")
        return None

    def rows(self, runner: Runner, case: Case, phases: PhaseTimer, gates: Any,
             results: Sequence[Any]) -> list[ResultRow]:
        """One row per contract from what sampling gave (and, on CUDA, the GPU's state read while
        it still works)."""
        if self.cfg.device.startswith("cuda"):
            from benchbox.environment import gpu_state

            self.gpu_readings.append(gpu_state(self.cfg.device))
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
                                             report, independent_rounds=self.cfg.repeats > 1))
        return rows  # fewer than the contracts when an interrupt cut the case short

    def counted(self, policy: SamplingPolicy) -> Callable[[Any], Any]:
        """The stop callback factory, counting samples for the reporter (every 10th, and the last)."""
        total = policy.limit * passes([sampling_key(c) for c in self.contracts])
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

    def lines(self, runner: str, case: Case, rows: list[ResultRow]) -> list[str]:
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

    # -- finish -----------------------------------------------------------------------------
    def _finish(self) -> RunOutcome:
        from benchbox.receipts.diff import compare_runners

        environment = None
        if self.cfg.device.startswith("cuda"):
            from benchbox.environment import gpu_state

            environment = gpu_state(self.cfg.device)
        if self.gpu_readings:
            gpu = build.gpu_while_working(self.gpu_readings)
            self.receipts.update(lambda _, r: build.with_process_facts(r, gpu=gpu))
        comparisons = [compare_runners(r, self.baseline) for r in self.receipts.receipts]
        self.receipts.finish(comparisons, environment)
        return RunOutcome.of(self.receipts)

    # -- runners that cannot run ------------------------------------------------------------
    def _availability(self, name: str, opts: dict[str, Any]) -> str | None:
        """The runner's availability; a check that itself crashes makes the runner unavailable."""
        try:
            return self.runner_factory.availability(name, self.cfg.device, opts)
        except UsageError:
            raise
        except Exception as e:
            return f"availability check failed: {error_line(e)}"

    def _unavailable_facts(self, name: str, opts: dict[str, Any]) -> dict[str, Any]:
        """What a runner that cannot run here can still tell (build facts); never samples."""
        phases = PhaseTimer(self.clock, trials=self._trials())
        runner: Runner | None = None
        try:
            runner = self.runner_factory.make(name, self.cfg.device, opts)
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
