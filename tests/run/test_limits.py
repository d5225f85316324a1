"""The per-case time limit: a stage that hangs becomes a failed row, and the run goes on.

The hanging stage is real Python code of a user task (``tests/hostile_tasks.py``) that sleeps
forever; the limit is the run's own (``--case-time-limit``), recorded in the receipt.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox.cli import main
from benchbox.run.config import RunConfig, default
from tests.support import loaded, one_line_exit_2

HANGS = ["run", "--task", "tests.hostile_tasks:factory", "--runner", "torch-eager",
         "--samples", "5", "--warmup", "1", "--case-time-limit", "1"]


@pytest.mark.parametrize("option, at_call, said", [
    ("hang_in=serialize", 3, "over the per-case time limit of 1 s"),  # the first validation call
    ("hang_in=reduce", 6, "over the per-case time limit of 1 s"),  # among the warm-up and samples
    ("hang_in=reduce,swallow=true", 6, "over the per-case time limit of 1 s"),  # except Exception: pass
    ("hang_in=serialize", 1, "reference call failed: "),  # the first case's reference
])
def test_a_stage_that_hangs_becomes_a_failed_row_and_the_run_goes_on(tmp_path: Path, option: str,
                                                                     at_call: int, said: str) -> None:
    out = tmp_path / "r.json"
    options = [a for o in option.split(",") for a in ("--task-option", o)]
    result = CliRunner().invoke(main, [*HANGS, *options, "--task-option", f"at_call={at_call}",
                                       "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    receipt = loaded(out)
    assert receipt["complete"] is True
    assert receipt["settings"]["case_time_limit_s"] == 1
    rows = {r["case"]: r for r in receipt["results"]}
    assert rows["alpha"]["status"] == "failed"
    assert said in rows["alpha"]["reasons"][0] and "TimeLimitExceeded" in rows["alpha"]["reasons"][0]
    assert rows["beta"]["status"] == "valid"


def test_the_limit_has_a_declared_default_that_the_receipt_records(tmp_path: Path) -> None:
    from benchbox.run import run

    limit = default("case_time_limit_s")
    assert isinstance(limit, float) and limit > 0
    outcome = run(RunConfig(runners=("torch-eager",), cases=("invoice",), samples=3, warmup=1,
                            out=tmp_path / "r.json"))
    assert loaded(outcome.path)["settings"]["case_time_limit_s"] == limit


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_an_unusable_limit_is_one_line_and_exit_2(tmp_path: Path, value: str) -> None:
    line = one_line_exit_2(["run", "--runner", "torch-eager", "--case-time-limit", value,
                            "--out", str(tmp_path / "r.json")])
    assert line.startswith("benchbox: error: --case-time-limit: ")


def test_the_limit_passes_a_case_that_finishes_in_time(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["run", "--task", "tests.hostile_tasks:factory", "--runner",
                                       "torch-eager", "--samples", "5", "--warmup", "1",
                                       "--case-time-limit", "60", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert [r["status"] for r in loaded(out)["results"]] == ["valid", "valid"]


@pytest.mark.parametrize("option, said", [
    ("hang_in=reduce", "over the per-case time limit of 1 s"),  # the limit fires in the third sample
    ("raise_in=reduce", "Abandon: abandoned in reduce"),  # a BaseException in the third sample
    ("exit_in=reduce", "SystemExit: sys.exit(3) called by task or runner code"),
])
@pytest.mark.parametrize("contracts", [["public_task_call_wall"], ["public_task_call_wall", "model_io_wall"]])
def test_a_case_ended_while_sampling_keeps_the_samples_measured_before(
        tmp_path: Path, option: str, said: str, contracts: list[str]) -> None:
    """``reduce``: calls 1-2 are the references, 3-4 validate alpha, 5 warms up, 6-7 are samples."""
    out = tmp_path / "r.json"
    named = [a for c in contracts for a in ("--contract", c)]
    result = CliRunner().invoke(main, [*HANGS, *named, "--task-option", option, "--task-option", "at_call=8",
                                       "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    paths = [out] if len(contracts) == 1 else [tmp_path / f"r.{c}.json" for c in contracts]
    for path in paths:
        rows = {r["case"]: r for r in loaded(path)["results"]}
        alpha = rows["alpha"]
        assert alpha["status"] == "failed" and said in alpha["reasons"][0], alpha["reasons"]
        assert len(alpha["samples_ns"]) == 2, path
        assert all(len(v) == 2 for v in alpha["stages_ns"].values() if v), alpha["stages_ns"]
        assert rows["beta"]["status"] == "valid"


@pytest.mark.parametrize("max_time", ["5", "2"])
def test_adaptive_sampling_longer_than_the_case_limit_is_one_line_and_exit_2_before_measuring(
        tmp_path: Path, max_time: str) -> None:
    out = tmp_path / "r.json"
    line = one_line_exit_2(["run", "--runner", "torch-eager", "--target-ci", "1", "--max-time", max_time,
                            "--case-time-limit", "2", "--out", str(out)])
    assert line.startswith("benchbox: error: --max-time: ") and "case_time_limit_s" in line, line
    assert not out.exists()


def test_the_library_refuses_adaptive_sampling_longer_than_the_case_limit_with_the_fields_named() -> None:
    from benchbox.errors import FieldError

    cfg = RunConfig(runners=("torch-eager",), target_ci=1.0, max_time_s=5.0, case_time_limit_s=2.0)
    with pytest.raises(FieldError) as caught:
        cfg.validate()
    assert caught.value.field == "max_time_s" and "case_time_limit_s" in caught.value.message
    RunConfig(runners=("torch-eager",), target_ci=1.0, max_time_s=5.0, case_time_limit_s=0).validate()
    RunConfig(runners=("torch-eager",), target_ci=1.0, max_time_s=1.0, case_time_limit_s=2.0).validate()
