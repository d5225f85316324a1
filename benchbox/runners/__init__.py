"""Runners: the interface and the registry of built-in runners.

The registry is torch-free: each runner is declared by the class that implements it
("module:Class", imported only when used) and the command-line aliases it offers for
its options (``--compile-mode`` is ``torch-compile``'s ``mode``), and names where its option
keys are declared, a module that does not import torch, so a mistyped key is refused in a
fraction of a second. The class takes those keys as ``OPTION_KEYS``; its ``check_options``
checks keys and values once, before anything is measured.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from benchbox.errors import UsageError, did_you_mean
from benchbox.runners.base import Phases, Runner, RunnerUnavailable, refuse_unknown_options

__all__ = ["CliAlias", "Phases", "Runner", "RunnerEntry", "RunnerUnavailable", "RUNNERS", "ENTRIES",
           "availability", "check_option_keys", "make_runner", "runner_class"]


@dataclass(frozen=True)
class CliAlias:
    """A command-line flag that sets one runner option.

    ``kind``: ``value`` (one value), ``list`` (repeatable, a list), ``pairs`` (repeatable
    KEY=VALUE, a dict). ``choices`` restricts a value; ``default`` is the option's value
    when the flag is not given (None: the runner's own default applies).
    """

    flag: str
    option: str
    help: str
    kind: str = "value"
    choices: tuple[str, ...] = ()
    default: Any = None
    metavar: str | None = None


@dataclass(frozen=True)
class RunnerEntry:
    """A registered runner: where its class lives, the flags it adds to ``benchbox run``, and
    where its option keys are declared (``module:NAME`` of a module that does not import torch:
    the class's ``OPTION_KEYS`` is that tuple), so a mistyped key is refused before torch loads."""

    target: str
    summary: str
    aliases: tuple[CliAlias, ...] = ()
    option_keys: str | None = None


#: torch.compile's modes (``torch._inductor.list_mode_options()``; a newer torch may list more)
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")

ENTRIES: dict[str, RunnerEntry] = {
    "torch-eager": RunnerEntry("benchbox.runners.torch_eager:TorchEagerRunner",
                               "eager PyTorch, the model as written (the baseline)",
                               option_keys="benchbox.runners.transfer:OPTION_KEYS"),
    "torch-compile": RunnerEntry(
        "benchbox.runners.torch_compile:TorchCompileRunner",
        "torch.compile with inductor (max-autotune by default)",
        (CliAlias("--compile-mode", "mode", "torch.compile mode for torch-compile: "
                  + ", ".join(COMPILE_MODES) + " (or another mode the installed torch lists).",
                  default="max-autotune"),
         CliAlias("--compile-option", "inductor_options", "Inductor option KEY=VALUE for torch-compile "
                  "(repeatable).", kind="pairs", metavar="KEY=VALUE"),
         CliAlias("--aten-fallback", "aten_fallbacks", "Operator torch-compile must run in ATen, e.g. "
                  "layer_norm (repeatable).", kind="list", metavar="OP")),
        option_keys="benchbox.runners.compile_options:OPTION_KEYS"),
    "tensorrt": RunnerEntry(
        "benchbox.runners.tensorrt:TensorRTRunner",
        "native TensorRT (full TensorRT or TensorRT for RTX) from an ONNX export",
        (CliAlias("--tensorrt-flavour", "flavour", "TensorRT flavour: full TensorRT or TensorRT for RTX "
                  "(auto: full TensorRT when it works here).", choices=("auto", "tensorrt", "tensorrt_rtx"),
                  default="auto"),),
        option_keys="benchbox.runners.tensorrt_options:OPTION_KEYS"),
}
#: runner name → "module:Class"
RUNNERS: dict[str, str] = {name: e.target for name, e in ENTRIES.items()}


def runner_class(name: str) -> type[Runner]:
    if name not in RUNNERS:
        raise UsageError(f"unknown runner '{name}' ({did_you_mean(name, RUNNERS)}"
                         f"runners: {', '.join(RUNNERS)})")
    mod, _, cls = RUNNERS[name].partition(":")
    return getattr(importlib.import_module(mod), cls)


def check_option_keys(name: str, options: dict[str, Any]) -> None:
    """Refuse an option key ``name`` does not take, without importing the runner (or torch)."""
    entry = ENTRIES.get(name)
    if entry is None or entry.option_keys is None:
        return
    mod, _, attr = entry.option_keys.partition(":")
    refuse_unknown_options(name, getattr(importlib.import_module(mod), attr), options)


def availability(name: str, device: str, options: dict[str, Any] | None = None) -> str | None:
    """None when ready, else the precise reason the runner cannot run on ``device``."""
    try:
        cls = runner_class(name)
    except ImportError as e:
        return f"cannot import: {e}"
    return cls.availability_for(device, options)


def make_runner(name: str, device: str, options: dict[str, Any] | None = None) -> Runner:
    return runner_class(name)(device=device, options=options)
