"""Shared fixtures: real receipts produced by real (small) runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchbox.run import RunConfig, run


def make_receipt(tmp: Path, name: str = "r.json", **kw: object) -> dict:
    """Run benchbox for real (eager only by default: seconds on a CPU) and load the receipt."""
    defaults: dict = {"runners": ("torch-eager",), "samples": 40, "warmup": 2, "out": tmp / name}
    defaults.update(kw)
    outcome = run(RunConfig(**defaults))
    return json.loads(Path(outcome.path).read_text())


@pytest.fixture(scope="session")
def eager_receipt_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A receipt from a real eager run of the built-in task (all cases)."""
    tmp = tmp_path_factory.mktemp("eager")
    make_receipt(tmp)
    return tmp / "r.json"
