"""Short measurements a runner asks for while it prepares.

A runner that chooses between builds of its own (the torch-compile runner's ``draws``:
several fresh compiles, the fastest kept) must not time them itself: runners never read a
clock. The run hands it a :class:`Trials` through the ``phases`` object of ``prepare``
(``phases.trials``); the runner calls ``trials(runner, samples, warmup)`` with its
current build in place, and the harness runs one case's request through the whole call
under the run's first contract, exactly as it samples (same stamps, the device clock where
the contract and the device have one, the same warm-up), after two untimed calls checked
against the reference by the task's accuracy gates. The runner gets the samples back and
compares builds by them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbox.harness.loop import Harness
from benchbox.runners.base import Runner
from benchbox.tasks.base import CallTrace, Task


@dataclass(frozen=True)
class Trial:
    """One short measurement of a runner's current build (the harness's samples)."""

    samples_ns: tuple[int, ...]
    clock_used: str
    warmup: int
    #: the accuracy gates on the trial's request passed (None: no reference to check against)
    passed: bool | None
    #: the gates that failed, by name
    failed_gates: tuple[str, ...] = ()


class Trials:
    """The harness's trial measurement, bound to one contract, task and request."""

    def __init__(self, harness: Harness, task: Task, case: str, request: bytes,
                 reference: CallTrace | None) -> None:
        self.harness, self.task, self.case = harness, task, case
        self.request, self.reference = request, reference

    def describe(self) -> dict[str, Any]:
        """What a trial measures: the contract, its clock and the case."""
        contract = self.harness.contract
        return {"contract": contract.name, "clock": contract.clock, "case": self.case,
                "accuracy_checked": self.reference is not None}

    def __call__(self, runner: Runner, samples: int, warmup: int) -> Trial:
        """Check the runner's current build against the reference, then time ``samples`` calls."""
        passed: bool | None = None
        failed: tuple[str, ...] = ()
        if self.reference is not None:
            first = self.harness.call(self.task, runner, self.request)
            second = self.harness.call(self.task, runner, self.request)
            gates = self.task.gates(self.reference, first, second)
            failed = tuple(g.name for g in gates if not g.passed)
            passed = not failed
        m = self.harness.measure(self.task, runner, self.request, samples, warmup)
        return Trial(samples_ns=tuple(m.samples_ns), clock_used=m.clock_used, warmup=m.warmup,
                     passed=passed, failed_gates=failed)
