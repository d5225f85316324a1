"""A tiny task for diff tests: a real model plus a sleep in ``serialize`` that a task option can grow.

``sleep_ms`` (default 50) is slept in ``serialize`` for every case; ``slow_case`` names one
case that sleeps ``extra_ms`` more, so a receipt can be made slower on exactly one row
through the real harness (these two stand for a change of code: task facts, not options).
Used as ``task="tests.diff_tasks:factory"``.

For tests of runs in several processes: with ``BENCHBOX_TEST_PID_FILE`` set, every load of the
task appends its process id to that file; with ``BENCHBOX_TEST_FAIL_LOAD`` = N as well, a load
fails once N process ids are in the file.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchbox.tasks import Case, Task


@dataclass
class SleepTask(Task):
    """Request {"x": [4 floats]} → a 2-way label; serialize sleeps as configured."""

    name = "sleepy"
    input_names = ("x",)
    output_names = ("logits",)
    #: options that stand for a change of code, which a diff must judge: recorded as task facts
    #: of their own, not among the options a diff declares
    CODE_CHANGES = ("slow_case", "extra_ms")

    def info(self) -> dict[str, Any]:
        d = super().info()
        d["options"] = {k: v for k, v in d["options"].items() if k not in self.CODE_CHANGES}
        return d | {k: self.options[k] for k in self.CODE_CHANGES if k in self.options}

    def __post_init__(self) -> None:
        self.sleep_s = float(self.options.get("sleep_ms", 50)) / 1e3
        self.slow_case = str(self.options.get("slow_case", ""))
        self.extra_s = float(self.options.get("extra_ms", 0)) / 1e3
        pid_file = os.environ.get("BENCHBOX_TEST_PID_FILE")
        if pid_file:
            seen = Path(pid_file).read_text().split() if os.path.exists(pid_file) else []
            fail_at = os.environ.get("BENCHBOX_TEST_FAIL_LOAD")
            if fail_at and len(seen) >= int(fail_at):
                raise ValueError(f"this load fails on purpose ({len(seen)} loads before it)")
            with open(pid_file, "a") as f:
                f.write(f"{os.getpid()}\n")

    def parse(self, request: bytes) -> Any:
        obj = json.loads(request)
        if not isinstance(obj, dict) or len(obj.get("x", [])) != 4:
            raise ValueError("request must be {'x': [4 numbers]}")
        return obj

    def preprocess(self, request: Any) -> tuple[np.ndarray, ...]:
        return (np.asarray([request["x"]], dtype=np.float32),)

    def reduce(self, outputs: dict[str, np.ndarray], request: Any) -> Any:
        return int(np.argmax(outputs["logits"][0]))

    def answer(self, reduced: Any, request: Any) -> Any:
        return {"case": request["case"], "label": ["no", "yes"][reduced]}

    def serialize(self, answer: Any) -> bytes:
        time.sleep(self.sleep_s + (self.extra_s if answer["case"] == self.slow_case else 0.0))
        return json.dumps(answer).encode()

    def cases(self) -> list[Case]:
        return [Case("alpha", b'{"case": "alpha", "x": [1, 2, 3, 4]}'),
                Case("beta", b'{"case": "beta", "x": [4, 3, 2, 1]}')]

    def build_model(self) -> Any:
        import torch

        class Tiny(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                torch.manual_seed(0)
                self.lin = torch.nn.Linear(4, 2)

            def forward(self, x: Any) -> tuple[Any]:
                return (self.lin(x),)

        return Tiny().eval()


def factory(**kwargs: Any) -> SleepTask:
    """The factory ``load_task`` calls with size, dtype, options and gate overrides."""
    return SleepTask(**kwargs)
