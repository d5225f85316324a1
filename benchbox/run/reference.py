"""The reference a run checks every runner against: float32 eager outputs per case, computed once
on the CPU, outside any timing."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchbox.errors import UsageError
from benchbox.harness import Harness, PhaseTimer
from benchbox.run.contain import contained, describe
from benchbox.run.factory import RunnerFactory
from benchbox.run.limits import TimeLimit
from benchbox.tasks import CallTrace, Case, Task


def model_facts(model: Any) -> dict[str, Any]:
    """Parameter count and a hash of the weights."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().float().cpu().contiguous().numpy().tobytes())
    n = sum(p.numel() for p in model.parameters())
    return {"parameters": int(n), "model_sha256": h.hexdigest()}


@dataclass
class Reference:
    """The reference call of each case, the cases whose reference call failed (why), and the first
    case's preprocessed request (what every runner prepares with)."""

    example: Any
    calls: dict[str, CallTrace] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, task: Task, cases: Sequence[Case], factory: RunnerFactory, harness: Harness, limit: TimeLimit,
           progress: Callable[[str], None], record_facts: Callable[[dict[str, Any]], None]) -> Reference:
        """Build the float32 model (``record_facts`` gets its parameter count and weights' hash),
        prepare the reference runner and call it once per case under the case time limit. A
        request the task refuses is a UsageError; a case whose call exits is a failure kept."""
        ref_task = dataclasses.replace(task, dtype="float32") if task.dtype != "float32" else task
        ref_model = ref_task.build_model()
        record_facts(model_facts(ref_model))
        ref_runner = factory.reference()
        ref = cls(task.preprocess(task.parse(cases[0].request)))
        ref_runner.prepare(ref_task, ref_model, ref.example, PhaseTimer(harness.clock))
        for case in cases:
            try:
                with limit.guard(f"reference × {case.name}"):
                    ref.calls[case.name] = harness.call(ref_task, ref_runner, case.request)
            except ValueError as e:
                raise UsageError(f"case {case.name}: invalid request for task {task.name}: {e}") from None
            except BaseException as e:  # sys.exit or a BaseException: this case's rows fail
                if not contained(e):
                    raise
                ref.failures[case.name] = f"reference call failed: {describe(e)}"
                progress(f"{case.name}: {ref.failures[case.name]}")
        return ref
