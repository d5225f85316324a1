"""What a run measures, checked before anything is measured: its contracts, its task and cases."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchbox.contracts import Contract, load_contract
from benchbox.errors import FieldError, UsageError, did_you_mean, error_line
from benchbox.receipts.io import check_receipt_budget
from benchbox.run.config import RunConfig
from benchbox.run.contain import contained, describe
from benchbox.run.interrupt import Stop
from benchbox.tasks import Case, Task, check_task_metadata, load_task


def run_contracts(cfg: RunConfig, points: Sequence[tuple[Contract, Path]] | None) -> list[Contract]:
    """The contracts a run measures: the sweep's points, or the configuration's under its arrival
    overrides; FieldError naming the field when they cannot be measured together."""
    if points is not None:
        return check_contracts([c for c, _ in points])
    contracts = [load_contract(c) for c in cfg.contract_names]
    overrides = cfg.arrival_overrides
    if overrides:
        if list(overrides) == ["idle"] and not any(c.arrival.paced for c in contracts):
            raise FieldError("idle", "an idle mode needs paced arrivals: a gap, a rate, or a paced "
                                     "contract")
        contracts = [c.with_arrival(**overrides) if c.arrival.paced or set(overrides) != {"idle"} else c
                     for c in contracts]
    if len({c.name for c in contracts}) != len(contracts):
        raise FieldError("contracts", "a contract is named twice")
    return check_contracts(contracts)


def check_contracts(contracts: list[Contract]) -> list[Contract]:
    if not contracts:
        raise FieldError("contracts", "no contract to measure")
    rateless = [c.name for c in contracts if c.arrival.open_loop and c.arrival.rate_per_s <= 0]
    if rateless:
        raise FieldError("rate_per_s", f"contract {rateless[0]} has Poisson arrivals at a rate given at "
                                       "run time: give one")
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


def run_task(cfg: RunConfig, stop: Stop, given: Task | None) -> tuple[Task, list[Case]]:
    """The task (``given``, else ``cfg.task`` loaded) and the cases to measure, checked; task code
    that fails or exits while it loads is a FieldError on ``task``."""
    try:
        with stop.preparing():  # task code that hangs while it loads: a signal stops at once
            return _load_task(cfg, given)
    except BaseException as e:
        stop.check()  # a signal while loading may come back as the task's own error
        if not contained(e):
            raise
        raise FieldError("task", f"{cfg.task}: loading the task ended in {describe(e)}") from None


def _load_task(cfg: RunConfig, given: Task | None) -> tuple[Task, list[Case]]:
    task = given or load_task(cfg.task, size=cfg.size, dtype=cfg.dtype,
                                        options=dict(cfg.task_options), gate_overrides=dict(cfg.gates))
    cases = task.cases()
    if not isinstance(cases, list) or not cases or not all(isinstance(c, Case) for c in cases):
        raise FieldError("task", f"{cfg.task}: cases() must return a non-empty list of "
                                 "benchbox.tasks.Case")
    check_task_metadata(task, cases, cfg.task)
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
                                      f"({did_you_mean(unknown[0], names)}cases: {', '.join(names)})")
        cases = [c for c in cases if c.name in cfg.cases]
    policy = cfg.sampling()
    check_receipt_budget(len(cfg.runners) * len(cases), policy.limit,
                         "max_samples" if policy.adaptive else "samples")
    unknown_gates = sorted(set(cfg.gates) - set(task.default_gates()))
    if unknown_gates:
        raise FieldError("gates", f"{unknown_gates[0]!r}: task {task.name} has the gates "
                                  f"{', '.join(sorted(task.default_gates()))}")
    return task, cases
