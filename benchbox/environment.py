"""Environment and provenance for the receipt."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchbox import __version__


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def git_state(cwd: Path | None = None) -> dict[str, Any]:
    """Commit and dirtiness of the working tree benchbox runs in (null outside git)."""
    cwd = cwd or Path.cwd()
    commit = _git(["rev-parse", "HEAD"], cwd)
    if commit is None:
        return {"commit": None, "dirty": None}
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    return {"commit": commit, "dirty": bool(status)}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect(device: str) -> dict[str, Any]:
    """What the run ran on: software versions, device, CPU, git state."""
    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hostname": platform.node(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "device": device,
        "benchbox": __version__,
        "git": git_state(),
    }
    if "torch" in sys.modules or device != "none":
        import torch

        env["torch"] = torch.__version__
        env["torch_threads"] = torch.get_num_threads()
        env["cuda"] = torch.version.cuda
        if device.startswith("cuda") and torch.cuda.is_available():
            idx = torch.device(device).index or 0
            props = torch.cuda.get_device_properties(idx)
            env["gpu"] = {
                "name": props.name,
                "capability": f"{props.major}.{props.minor}",
                "memory_bytes": int(props.total_memory),
                "multiprocessors": props.multi_processor_count,
            }
            env["gpu"].update(_nvidia_smi(idx))
    return env


def _nvidia_smi(index: int) -> dict[str, Any]:
    fields = "driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw"
    try:
        r = subprocess.run(["nvidia-smi", f"--id={index}", f"--query-gpu={fields}",
                            "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    if r.returncode != 0:
        return {}
    vals = [v.strip() for v in r.stdout.strip().split(",")]
    return dict(zip(["driver", "sm_clock_mhz", "mem_clock_mhz", "max_sm_clock_mhz",
                     "temperature_c", "power_w"], vals))
