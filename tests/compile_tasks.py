"""A tiny user task for the torch-compile tests: a few vectors in, a label out.

Its model can break the graph on purpose (``.item()`` in ``forward``), so the
torch-compile runner must report a graph break. Loaded as
``--task tests.compile_tasks:factory`` (or ``compile_tasks:factory`` from tests/).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from benchbox.tasks import Case, Task
from benchbox.tasks.base import GateResult

LABELS = ("alpha", "beta", "gamma", "delta")
DIM = 8


@dataclass
class VectorTask(Task):
    """``{"values": [8 floats]}`` → ``{"label": ..., "probs": [...]}``.

    Option ``graph_break`` (default true): ``forward`` calls ``.item()``. Option ``fail_gate``
    (default false): the probability gate fails on purpose, whatever the outputs (a gate under 0,
    which once did this, is refused before a run starts).
    """

    name: ClassVar[str] = "vector"
    input_names: ClassVar[tuple[str, ...]] = ("x",)
    output_names: ClassVar[tuple[str, ...]] = ("logits",)

    def __post_init__(self) -> None:
        unknown = set(self.options) - {"graph_break", "fail_gate"}
        if unknown:
            raise ValueError(f"unknown option {sorted(unknown)[0]!r} (options: graph_break, fail_gate)")

    def gates(self, reference: Any, first: Any, second: Any) -> list[GateResult]:
        out = super().gates(reference, first, second)
        if not self.options.get("fail_gate"):
            return out
        return [dataclasses.replace(g, passed=False, detail="fails on purpose (task option fail_gate)")
                if g.name == "prob_max_abs" else g for g in out]

    def parse(self, request: bytes) -> Any:
        obj = json.loads(request)
        vals = obj.get("values") if isinstance(obj, dict) else None
        if not isinstance(vals, list) or len(vals) != DIM:
            raise ValueError(f"'values' must be a list of {DIM} numbers")
        return [float(v) for v in vals]

    def preprocess(self, request: Any) -> tuple[np.ndarray, ...]:
        return (np.asarray([request], dtype=np.float32),)

    def reduce(self, outputs: dict[str, np.ndarray], request: Any) -> Any:
        z = outputs["logits"][0].astype(np.float64)
        e = np.exp(z - z.max())
        return e / e.sum()

    def answer(self, reduced: Any, request: Any) -> Any:
        return {"label": LABELS[int(np.argmax(reduced))],
                "probs": [round(float(p), 6) for p in reduced]}

    def serialize(self, answer: Any) -> bytes:
        return json.dumps(answer, sort_keys=True).encode()

    def probabilities(self, reduced: Any) -> np.ndarray | None:
        return np.asarray(reduced)

    def answer_key(self, answer: Any) -> Any:
        return answer["label"]

    def cases(self) -> list[Case]:
        rng = np.random.default_rng(7)
        return [Case(f"v{i}", json.dumps({"values": rng.normal(size=DIM).round(4).tolist()}).encode())
                for i in range(2)]

    def build_model(self) -> Any:
        import torch
        from torch import nn

        class Model(nn.Module):
            def __init__(self, graph_break: bool) -> None:
                super().__init__()
                self.graph_break = graph_break
                self.fc1 = nn.Linear(DIM, 32)
                self.norm = nn.LayerNorm(32)
                self.fc2 = nn.Linear(32, len(LABELS))

            def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
                h = torch.relu(self.norm(self.fc1(x)))
                if self.graph_break and h.abs().sum().item() > 1e30:  # never true: only breaks the graph
                    h = h * 0.5
                return (self.fc2(h).float(),)

        torch.manual_seed(0)
        dtype = {"float32": torch.float32, "float16": torch.float16,
                 "bfloat16": torch.bfloat16}[self.dtype]
        return Model(bool(self.options.get("graph_break", True))).to(dtype).eval()


def factory(**kwargs: Any) -> VectorTask:
    """The task factory ``load_task`` calls."""
    return VectorTask(**kwargs)


BATCH, ROWS = 4, 16


@dataclass
class MatmulTask(VectorTask):
    """The vector request through three batched matmuls (no options).

    On the CPU, ``max-autotune`` benchmarks inductor's C++ GEMM template against ATen's
    ``bmm`` at each of the three call sites, so the autotuner really chooses here.
    """

    name: ClassVar[str] = "matmul"

    def __post_init__(self) -> None:
        if self.options:
            raise ValueError(f"unknown option {sorted(self.options)[0]!r} (the matmul task has none)")

    def preprocess(self, request: Any) -> tuple[np.ndarray, ...]:
        v = np.asarray(request, dtype=np.float32)
        ramp = np.linspace(0.5, 1.5, BATCH * ROWS, dtype=np.float32).reshape(BATCH, ROWS, 1)
        return (np.ascontiguousarray(ramp * v),)

    def build_model(self) -> Any:
        import torch
        from torch import nn

        class Model(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                g = torch.Generator().manual_seed(0)
                self.w1 = nn.Parameter(torch.randn(BATCH, DIM, 32, generator=g) / DIM ** 0.5)
                self.w2 = nn.Parameter(torch.randn(BATCH, 32, 16, generator=g) / 32 ** 0.5)
                self.w3 = nn.Parameter(torch.randn(BATCH, 16, len(LABELS), generator=g) / 4.0)

            def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
                h = torch.relu(torch.bmm(x, self.w1))
                h = torch.relu(torch.bmm(h, self.w2))
                return (torch.bmm(h, self.w3).mean(dim=(0, 1)).unsqueeze(0).float(),)

        dtype = {"float32": torch.float32, "float16": torch.float16,
                 "bfloat16": torch.bfloat16}[self.dtype]
        return Model().to(dtype).eval()


def matmul_factory(**kwargs: Any) -> MatmulTask:
    """The factory for ``--task tests.compile_tasks:matmul_factory``."""
    return MatmulTask(**kwargs)
