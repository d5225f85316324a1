"""The matrix's own signal handling with stand-in executors (cells that return at once): where a
signal lands decides what the record says. Real cells and real signals: tests/matrix/test_matrix.py."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from benchbox.matrix import MatrixInterrupted, driver, load_plan, run_matrix
from benchbox.matrix.cell import CellRun


def _plan(tmp_path: Path) -> Any:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text('name = "p"\n[axes]\nsize = ["tiny", "small"]\nrunner = ["torch-eager"]\n')
    return load_plan(plan_file)


def _cells(store: Path) -> list[dict[str, Any]]:
    (record,) = (store / "matrix" / "runs").glob("*.json")
    return json.loads(record.read_text())["cells"]


def _term_self(wait_s: float) -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(wait_s)  # the handler runs in here


class StandIn:
    """Cells that fail at once with a stand-in reason."""

    name = "local"

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def run_cells(self, jobs: list, on_done: Any, on_start: Any = None) -> None:
        for job in jobs:
            on_done(job, CellRun(job.cell_id, None, "stand-in cell", 1.0))


def test_sigterm_after_a_stand_in_executor_whose_start_sets_a_handler_as_rays_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ray.init installs a SIGTERM handler that calls sys.exit (checked with Ray 2.60 here); the
    matrix's handlers go in after the executor starts, so SIGTERM still stops the matrix (exit 143)."""
    monkeypatch.setenv("BENCHBOX_MATRIX_DIR", str(tmp_path / "registry"))

    class RayLike(StandIn):
        def start(self) -> None:
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))

        def run_cells(self, jobs: list, on_done: Any, on_start: Any = None) -> None:
            _term_self(2.0)
            super().run_cells(jobs, on_done, on_start)

    monkeypatch.setattr(driver, "make_executor", lambda *a, **k: RayLike())
    with pytest.raises(MatrixInterrupted) as e:
        run_matrix(_plan(tmp_path), tmp_path / "store", revision="rev-1")
    assert e.value.exit_code == 143
    assert str(e.value).startswith("interrupted (SIGTERM): 0 of 2 cells finished")
    assert [c["status"] for c in _cells(tmp_path / "store")] == ["not_run", "not_run"]


def test_a_signal_while_a_finished_stand_in_cell_is_stored_waits_until_it_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHBOX_MATRIX_DIR", str(tmp_path / "registry"))
    monkeypatch.setattr(driver, "make_executor", lambda *a, **k: StandIn())
    gather = driver._Gatherer.gather

    def signalled(self: Any, planned: Any, run: CellRun) -> Any:
        _term_self(0.5)
        return gather(self, planned, run)

    monkeypatch.setattr(driver._Gatherer, "gather", signalled)
    with pytest.raises(MatrixInterrupted) as e:
        run_matrix(_plan(tmp_path), tmp_path / "store", revision="rev-1")
    assert e.value.exit_code == 143
    cells = _cells(tmp_path / "store")
    # the first cell is stored whole, with its own reason; the second never started
    assert [(c["status"], c["reason"]) for c in cells] == [("failed", "stand-in cell"),
                                                           ("not_run", "the matrix stopped first")]
