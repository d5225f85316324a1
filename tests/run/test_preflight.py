"""Pre-flight: a misspelt name or ``--device cuda`` without a usable GPU is one line, exit 2, before
torch is imported and before anything is written.

The "before torch" tests run the command in a fresh interpreter that says on leaving whether
torch was imported (a second line on stderr).
The GPU tests give ``gpu_unusable`` a torch build and a driver listing (folders in a temporary
directory standing for ``/proc/driver/nvidia/gpus``): this machine has no GPU to list.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchbox.run.preflight import gpu_unusable, torch_build, visible_gpus
from tests.support import REPO, one_line_exit_2

#: runs benchbox's command line and says, on leaving, whether torch was imported
NO_TORCH = ("import atexit, sys\n"
            "atexit.register(lambda: 'torch' in sys.modules and sys.stderr.write('torch was imported\\n'))\n"
            "from benchbox.cli import main\n"
            "main()\n")

CUDA_BUILD = {"__version__": "2.13.0+cu130", "cuda": "13.0", "hip": "None"}
CPU_BUILD = {"__version__": "2.13.0+cpu", "cuda": "None", "hip": "None"}


def _without_torch(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", NO_TORCH, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(("args", "said"), [
    (["--contract", "public_task_cal_wall"], "unknown contract 'public_task_cal_wall' (did you mean "
                                             "'public_task_call_wall'? built-in: "),
    (["--runner", "torch-eagr"], "--runner: unknown runner 'torch-eagr' (did you mean 'torch-eager'? "),
    (["--case", "invoce"], "--case: unknown case 'invoce' for task decision (did you mean 'invoice'? "),
    (["--task", "decison"], "--task: unknown task 'decison' (did you mean 'decision'? "),
])
def test_a_misspelt_name_is_one_line_with_a_suggestion_before_torch(args: list[str], said: str,
                                                                    tmp_path: Path) -> None:
    for command in (["run", *args, "--out", str(tmp_path / "r.json")],
                    ["sweep", *args, "--gap", "1", "--out-dir", str(tmp_path / "sweep")]):
        proc = _without_torch(command, tmp_path)
        assert proc.returncode == 2, proc.stderr[-2000:]
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"benchbox: error: {said}"), lines
        assert not list(tmp_path.iterdir())  # no receipt, no log, no sweep folder


def test_a_name_far_from_every_known_one_gets_no_suggestion() -> None:
    line = one_line_exit_2(["run", "--case", "zzzz", "--out", "/nonexistent/r.json"])
    assert "did you mean" not in line and "cases: invoice, outage" in line


def test_cuda_on_this_cpu_only_machine_is_one_line_before_torch(tmp_path: Path) -> None:
    if not gpu_unusable("cuda"):
        pytest.skip("this machine has a usable GPU")
    for command in (["run", "--device", "cuda", "--out", str(tmp_path / "r.json")],
                    ["sweep", "--device", "cuda:1", "--gap", "1", "--out-dir", str(tmp_path / "s")]):
        proc = _without_torch(command, tmp_path)
        assert proc.returncode == 2, proc.stderr[-2000:]
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("benchbox: error: --device: cuda"), lines
        assert not list(tmp_path.iterdir())


def test_the_torch_build_is_read_without_importing_it_and_agrees_with_torch() -> None:
    import torch

    build = torch_build()
    assert build is not None and build["__version__"] == torch.__version__
    assert build["cuda"] == str(torch.version.cuda)


def _gpus(tmp_path: Path, n: int) -> Path:
    d = tmp_path / "gpus"
    d.mkdir()
    for i in range(n):
        (d / f"0000:{i:02x}:00.0").mkdir()
    return d


def test_gpu_unusable_names_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    two = _gpus(tmp_path, 2)
    assert gpu_unusable("cpu", CPU_BUILD, two) is None
    assert "torch 2.13.0+cpu is a CPU-only build" in gpu_unusable("cuda", CPU_BUILD, two)
    assert gpu_unusable("cuda", CUDA_BUILD, two) is None and gpu_unusable("cuda:1", CUDA_BUILD, two) is None
    assert gpu_unusable("cuda:2", CUDA_BUILD, two) == "GPU 2 does not exist here: 2 visible (cuda:0..cuda:1)"
    empty = tmp_path / "none"
    empty.mkdir()
    assert "lists none" in gpu_unusable("cuda", CUDA_BUILD, empty)
    assert gpu_unusable("cuda", {**CPU_BUILD, "hip": "6.2"}, empty) is None  # ROCm: no listing to read
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert gpu_unusable("cuda", CUDA_BUILD, two) == "no GPU is visible (CUDA_VISIBLE_DEVICES='-1' hides them)"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert visible_gpus(two) == 1 and "GPU 1 does not exist" in gpu_unusable("cuda:1", CUDA_BUILD, two)


def test_the_light_list_of_builtin_tasks_is_the_registry() -> None:
    from benchbox.tasks import BUILTIN_TASK_NAMES, builtin_tasks

    assert tuple(builtin_tasks()) == BUILTIN_TASK_NAMES
