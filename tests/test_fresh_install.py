"""A new user's first contact: the README's first command in a fresh virtual environment, then the
commands that read its receipt (plot, export, diff, show), all exiting 0.

A real install: ``python3 -m venv`` and ``pip install torch==2.13.0 -e <repo>`` (pip finds torch
and the rest wherever this machine's pip is configured to look), so a dependency missing from
pyproject.toml fails here. It takes minutes; it runs with ``BENCHBOX_FRESH_VENV=1`` (``.ci/run``
sets it) or where ``CI`` is set.

The diff of the receipt with itself accepts the row's own flags (``noisy``, ``unsettled``) and the
load at start (``load``; a run that started on a busy machine is busy on both sides): 20
samples on a busy 2-core machine are often flagged, which alone makes a row ``unreliable`` (exit 3),
and identical samples must then read a ratio of 1 (``unchanged``, or ``unresolved`` where 20 noisy
samples give too wide an interval), never faster or slower.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = pytest.mark.skipif(not (os.environ.get("CI") or os.environ.get("BENCHBOX_FRESH_VENV")),
                                reason="installs a fresh virtual environment (minutes): runs in CI, or "
                                       "with BENCHBOX_FRESH_VENV=1")

#: the README's first command gets this budget added (everything else as written)
TINY_BUDGET = ["--samples", "30", "--warmup", "1", "--case", "invoice", "--case", "video"]
#: a row's own flags, which a short run on a loaded machine may raise on both sides of a self-diff,
#: and the load at start (a run that started on a busy machine is a load condition on both sides)
OWN_FLAGS = ["--accept", "noisy", "--accept", "unsettled", "--accept", "load", "--accept", "machine",
             # one process a side: judged against a given run-to-run spread, small enough that a
             # self-diff of quiet samples resolves to 'unchanged' (with the default, one process
             # cannot resolve ±5%)
             "--drift", "1%"]


def readme_first_command() -> str:
    """The first shell block of the README (its "Set up" command)."""
    block = re.search(r"```sh\n(.*?)\n```", (REPO / "README.md").read_text(), re.S)
    assert block, "README.md has no sh block"
    return block.group(1).strip()


def _sh(cmd: list[str] | str, cwd: Path, env: dict[str, str], timeout: int = 900) -> str:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                       shell=isinstance(cmd, str))
    shown = cmd if isinstance(cmd, str) else shlex.join(cmd)
    assert r.returncode == 0, f"{shown} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def test_readme_first_command_then_every_reader_of_its_receipt(tmp_path: Path) -> None:
    command = readme_first_command()
    install, _, run = command.rpartition(" && ")
    assert install.startswith("python3 -m venv .venv && ") and " -e . " in f"{install} "
    assert run.startswith(".venv/bin/benchbox run ")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["BENCHBOX_CACHE"] = str(tmp_path / "cache")  # compiles as on a new machine
    out = tmp_path / "first.json"
    _sh(install.replace(" -e .", f" -e {shlex.quote(str(REPO))}"), tmp_path, env)
    _sh(f"{run} {shlex.join(TINY_BUDGET)} --out {shlex.quote(str(out))}", tmp_path, env)
    bb = str(tmp_path / ".venv" / "bin" / "benchbox")
    assert "invoice" in _sh([bb, "show", str(out)], tmp_path, env)
    _sh([bb, "show", str(out), "--format", "json"], tmp_path, env)
    _sh([bb, "plot", str(out), "-o", str(tmp_path / "q.png")], tmp_path, env)
    _sh([bb, "plot", str(out), "--kind", "ecdf", "-o", str(tmp_path / "e.png")], tmp_path, env)
    for fmt in ("pyperf", "csv", "parquet"):
        _sh([bb, "export", str(out), "--format", fmt], tmp_path, env)
    _sh([bb, "diff", str(out), str(out), *OWN_FLAGS], tmp_path, env)
    self_diff = json.loads(_sh([bb, "diff", str(out), str(out), *OWN_FLAGS, "--format", "json"],
                               tmp_path, env))
    verdicts = {r["verdict"] for r in self_diff["rows"]}
    # identical samples: a ratio of exactly 1, never slower or faster; 'unresolved' where 30 samples
    # on a busy machine leave the median's own interval wider than ±5%
    assert self_diff["exit_code"] == 0 and verdicts <= {"unchanged", "unresolved"}, verdicts
    assert {m["ratio"] for r in self_diff["rows"] for m in r["metrics"]} == {1.0}
    _sh([bb, "tasks"], tmp_path, env)
    assert (tmp_path / "q.png").stat().st_size > 0 and (tmp_path / "first.pyperf.json").is_file()
