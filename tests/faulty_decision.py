"""The decision task with deliberate faults and a deliberate slowdown, for tests and benchmarks
only: ``--task tests.faulty_decision:FaultyDecisionTask``.

Two options beyond the built-in task's: ``fault`` (``flip_answer``, ``unrepeatable``: faults
that prove the accuracy gates fail) and ``slowdown_us`` (``serialize`` sleeps that many
microseconds more per call: a known slowdown that proves a diff sees it). Both are recorded in
the receipt's task facts, not among its options: they stand for a change of code. The model,
its weights and its hash are the built-in task's, so a receipt of this task compares with one
of ``decision``.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from benchbox.tasks.decision.task import OPTIONS, DecisionTask, Request

FAULTS = ("none", "flip_answer", "unrepeatable")
TEST_OPTIONS: dict[str, tuple[type, Any, str]] = {
    "fault": (str, "none", "deliberate fault, to prove the gates: none, flip_answer, unrepeatable"),
    "slowdown_us": (int, 0, "deliberate slowdown, to prove a diff: serialize sleeps this many "
                            "microseconds more per call (recorded in the receipt's task facts)"),
}


class FaultyDecisionTask(DecisionTask):
    """The decision task, misbehaving or slowed down on request."""

    declared_options: ClassVar[dict[str, tuple[type, Any, str]]] = {**OPTIONS, **TEST_OPTIONS}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.settings["slowdown_us"] < 0:
            raise ValueError(f"task option slowdown_us: must be ≥ 0, got {self.settings['slowdown_us']}")
        if self.settings["fault"] not in FAULTS:
            raise ValueError(f"task option fault: {self.settings['fault']!r} is not one of "
                             f"{', '.join(FAULTS)}")
        self._calls: dict[bytes, int] = {}

    def reduce(self, outputs: dict[str, np.ndarray], request: Request) -> dict[str, Any]:
        logits = self.logits(outputs, request)
        call = self._count(request)
        if self.settings["fault"] == "unrepeatable" and call % 2 == 0:
            # every other call of a request nudges one logit by 1e-4, well inside the logit and
            # probability gates, but the response bytes differ
            logits = logits.copy()
            logits[0] += np.float32(1e-4)
        reduced = self.decide(logits)
        if self.settings["fault"] == "flip_answer" and call > 1:
            # after the first call of a request (the reference, in a run), answer the runner-up
            reduced["best"] = int(np.argsort(-reduced["probabilities"], kind="stable")[1])
        return reduced

    def _count(self, request: Request) -> int:
        if self.settings["fault"] == "none":
            return 0
        key = request.id.encode()
        self._calls[key] = self._calls.get(key, 0) + 1
        return self._calls[key]

    def serialize(self, answer: dict[str, Any]) -> bytes:
        if self.settings["slowdown_us"] > 0:
            time.sleep(self.settings["slowdown_us"] / 1e6)
        return super().serialize(answer)

    def info(self) -> dict[str, Any]:
        d = super().info()
        # the fault and the slowdown stand for a change of code, which a diff must judge: they are
        # facts of their own, not options (a diff declares the task's options, as it declares
        # the weights: they change the model, and the model measured)
        d["options"] = {k: v for k, v in d["options"].items() if k not in TEST_OPTIONS}
        dynamic = d.pop("dynamic_tokens", None)  # the facts in the order the receipt had them
        if self.settings["fault"] != "none":
            d["fault"] = self.settings["fault"]
        if self.settings["slowdown_us"]:
            d["slowdown_us"] = self.settings["slowdown_us"]
        if dynamic is not None:
            d["dynamic_tokens"] = dynamic
        return d
