"""A user task that misbehaves on request: ``task="tests.hostile_tasks:factory"``.

Options (``--task-option``):

- ``exit_in``: ``factory`` or a stage name (``parse``, ``preprocess``, ``reduce``, ``answer``,
  ``serialize``): call ``sys.exit(exit_code)`` there;
- ``raise_in``: a stage name: raise :class:`Abandon`, a ``BaseException`` subclass;
- ``hang_in``: ``factory`` or a stage name: sleep forever there (with ``swallow=true`` inside a
  loop that catches every ``Exception``; with ``hang_how=exec``, in code run by ``exec`` of a string,
  as torch.compile runs the code it generates); with ``mark=PATH``, that file is written as it starts;
- ``signal_in``: a stage name: send this process SIGINT there (a Ctrl-C at a known point);
- ``at_call``: the misbehaviour happens at that call of the stage (counted from 1 over the whole
  run: the reference calls each case once, then each runner validates a case with two calls).

It is the sleepy diff task (a real model) with the sleep set to zero by default.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.diff_tasks import SleepTask

STAGES = ("parse", "preprocess", "reduce", "answer", "serialize")


class Abandon(BaseException):  # noqa: N818 - what a careless task might raise
    """Not an Exception: ``except Exception`` does not catch it."""


@dataclass
class HostileTask(SleepTask):
    name = "hostile"

    def __post_init__(self) -> None:
        self.options = {"sleep_ms": 0, **self.options}
        super().__post_init__()
        self.calls = dict.fromkeys(STAGES, 0)

    def _misbehave(self, stage: str) -> None:
        self.calls[stage] += 1
        if self.calls[stage] != int(self.options.get("at_call", 1)):
            return
        if self.options.get("exit_in") == stage:
            sys.exit(self.options.get("exit_code", 3))
        if self.options.get("raise_in") == stage:
            raise Abandon(f"abandoned in {stage}")
        if self.options.get("hang_in") == stage:
            _hang(self.options)
        if self.options.get("signal_in") == stage:
            os.kill(os.getpid(), signal.SIGINT)

    def parse(self, request: bytes) -> Any:
        self._misbehave("parse")
        return super().parse(request)

    def preprocess(self, request: Any) -> Any:
        self._misbehave("preprocess")
        return super().preprocess(request)

    def reduce(self, outputs: Any, request: Any) -> Any:
        self._misbehave("reduce")
        return super().reduce(outputs, request)

    def answer(self, reduced: Any, request: Any) -> Any:
        self._misbehave("answer")
        return super().answer(reduced, request)

    def serialize(self, answer: Any) -> bytes:
        self._misbehave("serialize")
        return super().serialize(answer)


def _hang(options: dict[str, Any]) -> None:
    if options.get("mark"):
        Path(options["mark"]).write_text("hanging\n")
    if options.get("hang_how") == "exec":
        exec("import time\nwhile True:\n    time.sleep(3600)\n")
    while True:
        try:
            time.sleep(3600)
        except Exception:
            if not options.get("swallow"):
                raise


def factory(**kwargs: Any) -> HostileTask:
    options = kwargs.get("options") or {}
    if options.get("exit_in") == "factory":
        sys.exit(options.get("exit_code", 3))
    if options.get("hang_in") == "factory":
        _hang(options)
    return HostileTask(**kwargs)
