"""Single-kernel tasks for checking benchbox's numbers against ground truth.

``add``: one elementwise add on 4096 float32 values (launch-bound, ~1 µs);
``mid``: a 1024×1024×1024 float16 matmul (~tens of µs);
``matmul``: a 4096×4096×4096 float16 matmul (≥ 150 µs on an H200).
The host stages are trivial, so the task isolates what the device clock reads.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from benchbox.tasks.base import Case, Task

WORKLOADS = {"add": (4096,), "mid": (1024, 1024, 1024), "matmul": (4096, 4096, 4096)}


class KernelTask(Task):
    """A task whose model is one kernel; inputs are seeded random data (never zeros)."""

    name = "kernel"
    input_names = ("x",)
    output_names = ("y",)

    def __post_init__(self) -> None:
        if self.size not in WORKLOADS:
            raise ValueError(f"unknown size {self.size!r} (sizes: {', '.join(WORKLOADS)})")
        rng = np.random.default_rng(0)
        shape = WORKLOADS[self.size]
        if self.size == "add":
            self._x = rng.standard_normal(shape).astype(np.float32)
        else:
            self._x = rng.standard_normal(shape[:2]).astype(np.float16)

    def sizes(self) -> list[str]:
        return list(WORKLOADS)

    def parse(self, request: bytes) -> Any:
        return json.loads(request)

    def preprocess(self, request: Any) -> tuple[np.ndarray, ...]:
        return (self._x,)

    def reduce(self, outputs: dict[str, np.ndarray], request: Any) -> Any:
        return float(np.asarray(outputs["y"], np.float64).sum())

    def answer(self, reduced: Any, request: Any) -> Any:
        return {"checksum": round(reduced, 1)}

    def serialize(self, answer: Any) -> bytes:
        return json.dumps(answer).encode()

    def cases(self) -> list[Case]:
        return [Case(self.size, b'{"op": "%s"}' % self.size.encode())]

    def build_model(self) -> Any:
        import torch

        class Add(torch.nn.Module):
            def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
                return (x + 1.0,)

        class MatMul(torch.nn.Module):
            def __init__(self, k: int, n: int) -> None:
                super().__init__()
                g = torch.Generator().manual_seed(1)
                self.w = torch.nn.Parameter(torch.randn(k, n, generator=g).half() / k**0.5,
                                            requires_grad=False)

            def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
                return (x @ self.w,)

        if self.size == "add":
            return Add().eval()
        _, k, n = WORKLOADS[self.size]
        return MatMul(k, n).eval()


def make(size: str = "add", **kw: Any) -> KernelTask:
    """Factory for ``--task benchmarks.kernel_task:make``."""
    return KernelTask(size=size, **{k: v for k, v in kw.items() if k in ("dtype", "options",
                                                                          "gate_overrides")})
