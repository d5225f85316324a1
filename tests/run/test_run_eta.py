"""While it runs: a busy-machine warning at the start, a run ETA that moves during a case and
counts preparation, and a progress line per matrix cell.

The ETA is driven by a stand-in clock (the point is the arithmetic); the warning by a real run
whose load reading is replaced (this machine's load is whatever it is); the matrix by a
stand-in executor whose cells fail at once (no cell process needed to count cells).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchbox.matrix import driver, load_plan, run_matrix
from benchbox.matrix.cell import CellRun
from benchbox.receipts.conditions import load_warning
from benchbox.run import RunConfig, run
from benchbox.run.progress import LineReporter, Reporter, RunEta, RunPlan, eta_text

PLAN = RunPlan(runners=("torch-eager", "torch-compile"), cases=("invoice", "outage"), samples_per_case=400)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_the_eta_moves_during_a_case_and_names_preparation_still_to_come() -> None:
    now = Clock()
    eta = RunEta(PLAN, now)
    assert eta.left() == (None, ("torch-eager", "torch-compile"))  # nothing measured says yet
    eta.phase("compile", "torch-eager")
    now.t = 1.0
    eta.phase("validate", "torch-eager", "invoice")
    now.t = 2.0
    eta.phase("sample", "torch-eager", "invoice")
    eta.sampled(4.0)  # the case's sampling: 4 s left at the rate so far
    # this case 4 s, then 3 more cases at this one's 1 + 4 s; torch-compile not prepared yet
    assert eta.left() == (4.0 + 3 * 5.0, ("torch-compile",))
    now.t = 3.0
    assert eta.left()[0] == 3.0 + 3 * 5.0  # counts down between the sampler's updates
    now.t = 6.0
    eta.case_finished()
    assert eta.left() == (3 * 5.0, ("torch-compile",))
    assert eta_text(eta) == "run: ≈0:15 left + preparing torch-compile"
    eta.phase("validate", "torch-eager", "outage")
    now.t = 9.0
    assert eta.left()[0] == 2.0 + 2 * 5.0  # validating: the mean case less its time so far
    eta.case_finished()
    eta.phase("compile", "torch-compile")
    now.t = 39.0  # a 30 s compile
    eta.phase("validate", "torch-compile", "invoice")
    assert eta.prepared == {"torch-eager": 1.0, "torch-compile": 30.0}
    assert eta.left()[1] == () and "preparing" not in eta_text(eta)


def test_plain_lines_carry_the_run_eta_until_the_last_case() -> None:
    lines: list[str] = []
    r = LineReporter(lines.append)
    r.run_started(RunPlan(runners=("torch-eager",), cases=("invoice", "outage"), samples_per_case=5))
    for case in ("invoice", "outage"):
        r.phase("validate", "torch-eager", case)
        r.case_finished("torch-eager", case, f"torch-eager × {case}: valid")
    assert lines[0].startswith("torch-eager × invoice: valid (run: ≈0:00 left")
    assert lines[1] == "torch-eager × outage: valid"


def test_the_busy_warning_reads_the_load_at_start() -> None:
    assert load_warning({"busy_fraction": 0.1, "per_core": 2.0}) is None
    assert load_warning(None) is None and load_warning({}) is None
    said = load_warning({"busy_fraction": 0.505, "load_avg_1min": 2.9, "cores": 2})
    assert said is not None and said.startswith("warning: the machine is busy (50% of CPU time")
    assert "load average 2.9 on 2 cores" in said and "unreliable (load)" in said
    assert load_warning({"per_core": 1.4}) is not None  # no window reading: the load average per core


class Notes(Reporter):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def phase(self, phase: str, runner: str | None = None, case: str | None = None) -> None:
        self.events.append(("phase", phase))

    def note(self, text: str) -> None:
        self.events.append(("note", text))


def test_a_run_on_a_busy_machine_warns_before_it_calibrates(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from benchbox import environment

    busy = {"cores": 2, "load_avg_1min": 3.1, "per_core": 1.55, "busy_fraction": 0.8, "window_s": 0.5}
    monkeypatch.setattr(environment, "load_at_start", lambda window_s=0.5: dict(busy))
    rec = Notes()
    run(RunConfig(runners=("torch-eager",), cases=("invoice",), samples=5, warmup=0, out=tmp_path / "r.json"),
        reporter=rec)
    first_phase = rec.events.index(("phase", "calibrate"))
    warnings = [i for i, (kind, text) in enumerate(rec.events)
                if kind == "note" and "machine is busy" in text]
    assert warnings and warnings[0] < first_phase, rec.events[:5]


def test_matrix_cells_report_their_count_and_the_time_left(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHBOX_MATRIX_DIR", str(tmp_path / "registry"))

    class StandIn:  # cells fail at once, each after a stand-in 60 s
        name = "local"

        def start(self) -> None: ...

        def stop(self) -> None: ...

        def run_cells(self, jobs: list, on_done: Any, on_start: Any = None) -> None:
            for job in jobs:
                on_start(job)
                on_done(job, CellRun(job.cell_id, None, "stand-in cell", 60.0))

    monkeypatch.setattr(driver, "make_executor", lambda *a, **k: StandIn())
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text('name = "p"\n[axes]\nsize = ["tiny", "small", "base"]\nrunner = ["torch-eager"]\n')
    lines: list[str] = []
    run_matrix(load_plan(plan_file), tmp_path / "store", revision="rev-1", progress=lines.append)
    cells = [x for x in lines if x.startswith("cell ")]
    assert [x.split()[1] for x in cells] == ["1/3", "1/3", "2/3", "2/3", "3/3", "3/3"]
    assert cells[0].endswith(": running")  # nothing done yet: no estimate
    assert cells[1].endswith("· ≈2:00 left for 2 cells") and ": failed (60.0 s): stand-in cell" in cells[1]
    assert cells[2].endswith("running · ≈2:00 left for 2 cells")
    assert cells[5].endswith(": stand-in cell")  # the last: nothing left


def test_the_time_left_at_the_mean_of_what_is_done() -> None:
    from benchbox.durations import left_text

    assert left_text([], 3, "cell") == "" and left_text([60.0], 0, "cell") == ""  # nothing says / none left
    assert left_text([30.0, 90.0], 2, "cell") == " · ≈2:00 left for 2 cells"
    assert left_text([5.0], 1, "round") == " · ≈0:05 left for 1 round"
    assert left_text([3600.0], 2, "round") == " · ≈2:00:00 left for 2 rounds"


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh-processes", "in-process"])
def test_rounds_after_the_first_say_the_time_left(tmp_path: Path, fresh: bool) -> None:
    """Fresh processes: at each later round's start, at the mean round so far (a process's start,
    preparation and samples). In process: at the mean of the rounds after the first, once there
    are any (the first also validates every case)."""
    import re

    lines: list[str] = []
    run(RunConfig(task="tests.diff_tasks:factory", runners=("torch-eager",), samples=9, repeats=3,
                  warmup=1, fresh_processes=fresh, task_options={"sleep_ms": 1}, out=tmp_path / "r.json"),
        progress=lines.append)
    head = "round {} of 3 (fresh process, 3 samples): starting" if fresh else \
        "round {} of 3 (3 samples per runner and case)"
    said = {i: [ln for ln in lines if ln.startswith(head.format(i))] for i in (1, 2, 3)}
    assert said[1] == ([] if fresh else [head.format(1)]), lines  # nothing done yet: no estimate
    for i, left in ((2, "2 rounds"), (3, "1 round")):
        pattern = re.escape(head.format(i)) + rf" · ≈\d+:\d\d left for {left}"
        assert len(said[i]) == 1 and re.fullmatch(pattern, said[i][0]), lines
