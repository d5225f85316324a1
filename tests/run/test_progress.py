"""The run's reporter interface: phases in order, sample counts, and library output kept off stderr."""

from __future__ import annotations

import io
import sys
import warnings
from pathlib import Path
from typing import Any

from benchbox.run import RunConfig, run
from benchbox.run.capture import REPORT_CHARS, OutputLog
from benchbox.run.progress import PHASES, LineReporter, Reporter, RunPlan, clock_text, eta_s, reporter_for


class Recording(Reporter):
    """Records every event, as a terminal would see them."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def run_started(self, plan: RunPlan) -> None:
        self.events.append(("start", plan))

    def phase(self, phase: str, runner: str | None = None, case: str | None = None) -> None:
        self.events.append(("phase", phase, runner, case))

    def sampled(self, done: int, total: int) -> None:
        self.events.append(("sampled", done, total))

    def case_finished(self, runner: str, case: str, line: str) -> None:
        self.events.append(("done", runner, case, line))

    def run_finished(self) -> None:
        self.events.append(("end",))


def test_a_run_reports_each_phase_in_order_with_sample_counts(tmp_path: Path) -> None:
    rec = Recording()
    run(RunConfig(runners=("torch-eager",), cases=("invoice", "outage"), samples=20, warmup=1,
                  out=tmp_path / "r.json"), reporter=rec)
    plan = rec.events[0][1]
    assert rec.events[0][0] == "start" and plan.total_cases == 2 and plan.samples_per_case == 20
    phases = [(e[1], e[2], e[3]) for e in rec.events if e[0] == "phase"]
    assert phases == [("calibrate", None, None), ("control", None, None), ("reference", None, None),
                      ("compile", "torch-eager", None),
                      ("validate", "torch-eager", "invoice"), ("sample", "torch-eager", "invoice"),
                      ("validate", "torch-eager", "outage"), ("sample", "torch-eager", "outage")]
    assert {p for p, _, _ in phases} == set(PHASES)
    counts = [e[1:] for e in rec.events if e[0] == "sampled"]
    assert counts[:2] == [(10, 20), (20, 20)] and len(counts) == 4
    done = [e for e in rec.events if e[0] == "done"]
    assert [(e[1], e[2]) for e in done] == [("torch-eager", "invoice"), ("torch-eager", "outage")]
    assert "valid, p50" in done[0][3] and "over 20 samples" in done[0][3]
    assert rec.events[-1] == ("end",)


def test_captured_output_goes_to_the_log_and_the_runner_report_not_stderr(tmp_path: Path, capfd: Any) -> None:
    log = OutputLog(tmp_path / "r.log")
    with log.capture("torch-compile: compile", "torch-compile"):
        warnings.warn("a library warning", UserWarning, stacklevel=1)
        sys.stderr.write("AUTOTUNE mm(8x8, 8x8)\n")
        print("strides: [8, 1]", file=sys.__stderr__, flush=True)
    err = capfd.readouterr().err
    assert "AUTOTUNE" not in err and "a library warning" not in err and "strides" not in err
    text = (tmp_path / "r.log").read_text()
    assert "== torch-compile: compile" in text and "AUTOTUNE mm" in text and "a library warning" in text
    entry = log.report("torch-compile")
    assert entry is not None and "AUTOTUNE mm" in entry["text"] and entry["file"] == str(tmp_path / "r.log")
    assert log.report("torch-eager") is None


def test_the_report_keeps_a_bounded_tail_of_long_output(tmp_path: Path) -> None:
    log = OutputLog(None)
    with log.capture("x", "r"):
        sys.stderr.write("".join(f"line {i}\n" for i in range(5000)))
    entry = log.report("r")
    assert entry is not None and entry["truncated"] is True and len(entry["text"]) == REPORT_CHARS
    assert entry["text"].endswith("line 4999") and entry["chars"] > REPORT_CHARS


def test_line_reporter_and_quiet_when_not_a_terminal() -> None:
    lines: list[str] = []
    r = LineReporter(lines.append)
    r.phase("calibrate")
    r.phase("sample", "torch-eager", "invoice")  # not a line unless verbose
    r.case_finished("torch-eager", "invoice", "torch-eager × invoice: valid")
    assert lines == ["calibrating the harness floors", "torch-eager × invoice: valid"]
    assert type(reporter_for(io.StringIO(), quiet=True)) is Reporter
    assert isinstance(reporter_for(io.StringIO()), LineReporter)  # not a terminal: no live display


def test_eta_from_the_rate_so_far_capped_by_the_policy() -> None:
    assert eta_s(10.0, 0, 100) is None
    assert eta_s(10.0, 50, 100) == 10.0
    assert eta_s(10.0, 50, 100, cap_s=15.0) == 5.0
    assert clock_text(75) == "1:15" and clock_text(None) == "?"


def test_cli_quiet_prints_nothing_on_stderr_and_piped_output_is_plain_lines(tmp_path: Path) -> None:
    import subprocess

    base = [sys.executable, "-m", "benchbox", "run", "--runner", "torch-eager", "--case", "invoice",
            "--samples", "5", "--warmup", "1"]
    quiet = subprocess.run([*base, "--quiet", "--out", str(tmp_path / "q.json")], capture_output=True,
                           text=True, timeout=600)
    assert quiet.returncode == 0 and quiet.stderr == "" and "torch-eager" in quiet.stdout
    piped = subprocess.run([*base, "--out", str(tmp_path / "p.json")], capture_output=True, text=True,
                           timeout=600)
    assert piped.returncode == 0 and "\x1b" not in piped.stderr  # no live display when not a terminal
    assert piped.stderr.splitlines()[-1].startswith("torch-eager × invoice: valid, p50")


def test_captured_output_is_handed_to_the_reporter(tmp_path: Path) -> None:
    shown: list[str] = []
    log = OutputLog(tmp_path / "r.log", shown.append)
    with log.capture("x: compile", "x"):
        sys.stderr.write("AUTOTUNE bmm\n")
    assert shown == ["[x: compile]\nAUTOTUNE bmm"]
    lines: list[str] = []
    LineReporter(lines.append, verbose=True).captured(shown[0])
    LineReporter(lines.append).captured(shown[0])
    assert lines == [shown[0]]  # shown only when verbose
