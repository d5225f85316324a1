"""torch.compile: the compiled reference runner."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from benchbox.runners.base import Phases
from benchbox.runners.torch_runner import TorchRunner


class TorchCompileRunner(TorchRunner):
    """torch.compile(mode=...) with inductor; compile time is reported apart."""

    name = "torch-compile"

    def __init__(self, device: str = "cpu", options: dict[str, Any] | None = None) -> None:
        options = {"mode": "max-autotune", **(options or {})}
        super().__init__(device, options)

    def prepare(self, task: Any, model: Any, example: tuple[np.ndarray, ...], phases: Phases) -> None:
        with phases("load"):
            model = model.to(self.device)
            self.output_names = task.output_names
            self._allocate(example)
        torch._dynamo.reset()
        self.forward = torch.compile(model, mode=self.options["mode"], fullgraph=False)
        with phases("compile"):
            # compilation happens on the first call; outside any contract
            self.d2h(self.compute(self.h2d(example)))
