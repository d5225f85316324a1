"""A small task through the public Task API: two 512-wide linear layers, float32, batch 1.

One input of 2 KiB and one output of 2 KiB, so a call is dominated by its fixed costs
(Python, launches, copies and synchronization) — the regime where how a runner moves data
shows most.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from benchbox.tasks import Case, Task

WIDTH = 512


class LinearTask(Task):
    """``{"id", "x": [512 numbers]}`` in, ``{"id", "best", "score"}`` out."""

    name = "linear2"
    input_names = ("x",)
    output_names = ("y",)

    def sizes(self) -> list[str]:
        return ["tiny"]

    def parse(self, request: bytes) -> Any:
        obj = json.loads(request)
        if not isinstance(obj, dict) or not isinstance(obj.get("x"), list) or len(obj["x"]) != WIDTH:
            raise ValueError(f"request must be an object with 'x': {WIDTH} numbers")
        return obj

    def preprocess(self, request: Any) -> tuple[np.ndarray, ...]:
        return (np.asarray(request["x"], np.float32).reshape(1, WIDTH),)

    def reduce(self, outputs: dict[str, np.ndarray], request: Any) -> Any:
        y = outputs["y"][0].astype(np.float64)
        return int(np.argmax(y)), float(y.max())

    def answer(self, reduced: Any, request: Any) -> Any:
        best, score = reduced
        return {"id": request.get("id", ""), "best": best, "score": round(score, 5)}

    def serialize(self, answer: Any) -> bytes:
        return json.dumps(answer, separators=(",", ":")).encode()

    def cases(self) -> list[Case]:
        return [Case(f"x{k}", json.dumps({"id": f"r{k}", "x": [((i * (31 + k)) % 97) / 48 - 1
                                                                for i in range(WIDTH)]}).encode())
                for k in range(2)]

    def build_model(self) -> Any:
        import torch

        class TwoLinear(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.a = torch.nn.Linear(WIDTH, WIDTH)
                self.b = torch.nn.Linear(WIDTH, WIDTH)

            def forward(self, x: Any) -> tuple[Any]:
                return (self.b(torch.relu(self.a(x))),)

        torch.manual_seed(0)
        return TwoLinear().eval().to(dtype={"float32": torch.float32, "float16": torch.float16,
                                            "bfloat16": torch.bfloat16}[self.dtype])


def make_task(size: str = "tiny", dtype: str = "float32", options: dict[str, Any] | None = None,
              gate_overrides: dict[str, Any] | None = None) -> LinearTask:
    return LinearTask(size=size, dtype=dtype, options=dict(options or {}),
                      gate_overrides=dict(gate_overrides or {}))
