"""Eager PyTorch: the baseline runner."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchbox.runners.base import Phases
from benchbox.runners.torch_runner import ModuleRunner


class TorchEagerRunner(ModuleRunner):
    """The model as written, eager mode. Options: ``transfer``, ``d2h``, ``stream`` (see transfer)."""

    name = "torch-eager"

    def prepare(self, task: Any, model: Any, example: tuple[np.ndarray, ...], phases: Phases) -> None:
        with phases("load"):
            self.forward = model.to(self.model_device)
            self.input_names = tuple(task.input_names)
            self.output_names = task.output_names
            self._allocate(example)
