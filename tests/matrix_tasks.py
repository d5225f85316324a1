"""Sentiment tasks that misbehave on purpose once the first case is measured, for the matrix tests.

``exits``: the benchmark process calls ``os._exit(3)``. ``slow``: every later parse of
the second case sleeps 0.5 s (a cell that outruns its timeout). ``waits``: writes
"PID PARENT_PID" to the file named by the ``pid_file`` task option, then sleeps, so a
test can SIGKILL the parent (a Ray worker). ``well_behaved``: the plain task, ignoring
``pid_file``. Used as ``task = "tests.matrix_tasks:exits"`` and so on.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from examples.sentiment_task import SentimentTask

#: parses of the first case once its sampling has begun (after the run's own check,
#: the reference and the two validation calls): the first case's row is written by then
FIRST_CASE_SAMPLED = 5


@dataclass
class FaultyTask(SentimentTask):
    """Misbehaves (``fault``) on the second case, after the first case was measured."""

    fault: str = "none"

    def __post_init__(self) -> None:
        self._parses: dict[bytes, int] = {}
        cases = SentimentTask.cases(self)
        self._first, self._second = cases[0].request, cases[1].request

    def parse(self, request: bytes) -> dict[str, str]:
        self._parses[request] = self._parses.get(request, 0) + 1
        if request == self._second and self._parses.get(self._first, 0) >= FIRST_CASE_SAMPLED:
            self._misbehave()
        return super().parse(request)

    def _misbehave(self) -> None:
        if self.fault == "exit":
            os._exit(3)
        if self.fault == "slow":
            time.sleep(0.5)
        if self.fault == "wait":
            path = str(self.options["pid_file"])
            with open(path + ".tmp", "w") as f:
                f.write(f"{os.getpid()} {os.getppid()}")
            os.replace(path + ".tmp", path)
            time.sleep(600)


def _make(fault: str, size: str, dtype: str, options: dict[str, Any] | None,
          gate_overrides: dict[str, float] | None) -> FaultyTask:
    return FaultyTask(size=size, dtype=dtype, options=dict(options or {}),
                      gate_overrides=dict(gate_overrides or {}), fault=fault)


def exits(size: str = "tiny", dtype: str = "float32", options: dict[str, Any] | None = None,
          gate_overrides: dict[str, float] | None = None) -> FaultyTask:
    return _make("exit", size, dtype, options, gate_overrides)


def slow(size: str = "tiny", dtype: str = "float32", options: dict[str, Any] | None = None,
         gate_overrides: dict[str, float] | None = None) -> FaultyTask:
    return _make("slow", size, dtype, options, gate_overrides)


def waits(size: str = "tiny", dtype: str = "float32", options: dict[str, Any] | None = None,
          gate_overrides: dict[str, float] | None = None) -> FaultyTask:
    return _make("wait", size, dtype, options, gate_overrides)


def well_behaved(size: str = "tiny", dtype: str = "float32", options: dict[str, Any] | None = None,
                 gate_overrides: dict[str, float] | None = None) -> FaultyTask:
    return _make("none", size, dtype, options, gate_overrides)
