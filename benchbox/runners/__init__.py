"""Runners: the interface and the registry of built-in runners."""

from __future__ import annotations

import importlib
from typing import Any

from benchbox.errors import UsageError
from benchbox.runners.base import Phases, Runner, RunnerUnavailable

__all__ = ["Phases", "Runner", "RunnerUnavailable", "RUNNERS", "runner_class", "availability"]

#: runner name → "module:Class", imported only when used
RUNNERS: dict[str, str] = {
    "torch-eager": "benchbox.runners.torch_eager:TorchEagerRunner",
    "torch-compile": "benchbox.runners.torch_compile:TorchCompileRunner",
    "tensorrt": "benchbox.runners.tensorrt:TensorRTRunner",
}


def runner_class(name: str) -> type[Runner]:
    if name not in RUNNERS:
        raise UsageError(f"unknown runner '{name}' (runners: {', '.join(RUNNERS)})")
    mod, _, cls = RUNNERS[name].partition(":")
    return getattr(importlib.import_module(mod), cls)


def availability(name: str, device: str, options: dict[str, Any] | None = None) -> str | None:
    """None when ready, else the precise reason the runner cannot run on ``device``."""
    try:
        cls = runner_class(name)
    except ImportError as e:
        return f"cannot import: {e}"
    return cls.availability_for(device, options)


def make_runner(name: str, device: str, options: dict[str, Any] | None = None) -> Runner:
    return runner_class(name)(device=device, options=options)
