"""Checks a run can make before any heavy import (torch, a task's model, a runner): the names it
was given and whether the device it asks for exists.

``benchbox run`` and ``benchbox sweep`` call :func:`preflight` first, so a misspelt name or
``--device cuda`` on a machine without a usable GPU is one line and exit 2 within a second,
with nothing written. The GPU check reads files (torch's ``version.py``, ``/proc/driver/nvidia``)
instead of importing torch; a later check in the run itself still stands behind it.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Any

from benchbox.errors import FieldError, did_you_mean

#: where the NVIDIA driver lists the GPUs it drives, one folder each
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")
#: where the device nodes (``/dev/nvidia0``, ...) are
DEV = "/dev"


def preflight(cfg: Any) -> None:
    """UsageError (one line) for a name the run cannot know or a device it cannot use.

    A run asking for the fixed memory layout starts this command again under it first (once,
    before anything is read or measured; :func:`benchbox.harness.quiet.exec_fixed_layout`).
    """
    from benchbox.contracts import load_contract

    if getattr(cfg, "layout", "random") == "fixed":
        from benchbox.harness.quiet import exec_fixed_layout

        exec_fixed_layout()

    for name in cfg.contract_names:
        load_contract(name)
    if ":" not in cfg.task:
        from benchbox.tasks import BUILTIN_TASK_NAMES

        if cfg.task not in BUILTIN_TASK_NAMES:
            near = did_you_mean(cfg.task, BUILTIN_TASK_NAMES)
            raise FieldError("task", f"unknown task '{cfg.task}' ({near}built-in: "
                                     f"{', '.join(BUILTIN_TASK_NAMES)}; or package.module:factory)")
    if cfg.task == "decision":
        from benchbox.tasks.decision.spec import CASE_NAMES

        for case in cfg.cases:
            if case not in CASE_NAMES:
                raise FieldError("cases", f"unknown case '{case}' for task decision "
                                          f"({did_you_mean(case, CASE_NAMES)}cases: {', '.join(CASE_NAMES)})")
    why = gpu_unusable(cfg.device)
    if why:
        raise FieldError("device", f"{cfg.device}: {why}")


def torch_build() -> dict[str, str] | None:
    """The installed torch's ``__version__``, ``cuda`` and ``hip`` as its ``version.py`` states them
    (``"None"`` for a build without), read without importing torch; None where it cannot be read."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text()
    except OSError:
        return None
    return {k: v.strip().strip("'\"") for k, v in
            re.findall(r"^(cuda|hip|__version__)\b[^=\n]*=\s*(.+)$", text, re.M)}


def visible_gpus(gpus_dir: Path = NVIDIA_GPUS) -> int | None:
    """How many NVIDIA GPUs the driver lists and ``CUDA_VISIBLE_DEVICES`` leaves visible; None
    where there is no driver listing to read."""
    try:
        listed = sum(1 for p in gpus_dir.iterdir() if p.is_dir())
    except OSError:  # no /proc listing: the device nodes, where a container exposes only those
        nodes = [p for p in Path(DEV).glob("nvidia*") if re.fullmatch(r"nvidia\d+", p.name)]
        if not nodes:
            return None
        listed = len(nodes)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return listed
    valid = 0  # CUDA stops at the first invalid ordinal ("-1" hides every GPU)
    for v in (v.strip() for v in visible.split(",")):
        if not ((v.isdigit() and int(v) < listed) or v.startswith(("GPU-", "MIG-"))):
            break
        valid += 1
    return min(valid, listed)


def gpu_unusable(device: str, build: dict[str, str] | None = None,
                 gpus_dir: Path = NVIDIA_GPUS) -> str | None:
    """Why ``device`` (``cuda`` or ``cuda:N``) has no usable GPU here; None for ``cpu``, for a usable
    GPU, or where nothing can be read without importing torch (the run then decides).

    ``build``: torch's build facts (default: read from the installed torch).
    """
    m = re.fullmatch(r"cuda(?::(\d+))?", device)
    if not m:
        return None
    build = torch_build() if build is None else build
    if not build:
        return None
    if build.get("hip", "None") != "None":
        return None  # ROCm: no NVIDIA listing to read
    if build.get("cuda", "None") == "None":
        return (f"torch {build.get('__version__', '?')} is a CPU-only build; run on --device cpu, or "
                "install a CUDA build of torch")
    count = visible_gpus(gpus_dir)
    if count is None:
        return f"no NVIDIA GPU here (no {gpus_dir}, no /dev/nvidiaN); run on --device cpu"
    index = int(m.group(1) or 0)
    if count == 0:
        hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
        return (f"no GPU is visible (CUDA_VISIBLE_DEVICES={hidden!r} hides them)" if hidden is not None
                else f"no NVIDIA GPU here ({gpus_dir} lists none); run on --device cpu")
    if index >= count:
        return f"GPU {index} does not exist here: {count} visible (cuda:0..cuda:{count - 1})"
    return None
