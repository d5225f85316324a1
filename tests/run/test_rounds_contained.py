"""``--repeats K``: a case that misbehaves in a later round fails alone, as in a one-round run.

The misbehaving code is a real user task (``tests/hostile_tasks.py``): ``sys.exit`` or a stage
that hangs, at a chosen call of a stage. The run has two cases, references first, then round
after round each case's warm-up call and samples, its first round after its two validation
calls: with 10 samples in 2 rounds, ``serialize`` call 20 falls in the second round of ``alpha``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox.cli import main
from tests.support import loaded

RUN = ["run", "--task", "tests.hostile_tasks:factory", "--runner", "torch-eager",
       "--samples", "10", "--repeats", "2", "--in-process", "--warmup", "1"]


@pytest.mark.parametrize("options, said", [
    (["exit_in=serialize"], "SystemExit: sys.exit(3) called by task or runner code"),
    (["hang_in=serialize", "swallow=true"], "over the per-case time limit of 2 s"),
])
def test_a_case_that_fails_in_its_second_round_keeps_its_first_round_and_the_run_goes_on(
        tmp_path: Path, options: list[str], said: str) -> None:
    out = tmp_path / "r.json"
    extra = [a for o in [*options, "at_call=20"] for a in ("--task-option", o)]
    result = CliRunner().invoke(main, [*RUN, *extra, "--case-time-limit", "2", "--out", str(out)])
    assert result.exit_code == 1, result.output  # a failed row, not an ended run
    assert "Traceback" not in result.output
    receipt = loaded(out)
    assert receipt["complete"] is True
    rows = {r["case"]: r for r in receipt["results"]}
    assert rows["alpha"]["status"] == "failed"
    assert said in rows["alpha"]["reasons"][0], rows["alpha"]["reasons"]
    assert rows["alpha"]["round_sizes"] == [5]  # the first round's samples are kept
    assert len(rows["alpha"]["samples_ns"]) == 5
    assert rows["beta"]["status"] == "valid" and rows["beta"]["round_sizes"] == [5, 5]


def test_the_time_limit_covers_a_case_across_its_rounds(tmp_path: Path) -> None:
    """Each round of ``alpha`` sleeps ~0.6 s (5 samples + 1 warm-up × 100 ms): two rounds pass a
    limit of 1 s together though neither does alone."""
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, [*RUN, "--task-option", "sleep_ms=100", "--case-time-limit", "1",
                                       "--case", "alpha", "--out", str(out)])
    assert result.exit_code == 1, result.output
    (row,) = loaded(out)["results"]
    assert row["status"] == "failed" and "over the per-case time limit of 1 s" in row["reasons"][0]
