"""``--repeats K``: samples in K independent rounds, interleaved across (runner, case), kept per row."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox.cli import main
from benchbox.errors import FieldError
from benchbox.receipts import load_receipt
from benchbox.run import RunConfig, run
from benchbox.run.progress import LineReporter
from benchbox.run.rounds import round_sizes

TASK = "tests.diff_tasks:factory"


def test_round_sizes_split_evenly() -> None:
    assert round_sizes(10, 3) == [4, 3, 3]
    assert sum(round_sizes(401, 5)) == 401


class _Heard(LineReporter):
    """The plain lines, and the phases and sample counts the run reported."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(lines.append)
        self.events: list[tuple[str, str | None]] = []

    def phase(self, phase: str, runner: str | None = None, case: str | None = None) -> None:
        self.events.append((phase, case))
        super().phase(phase, runner, case)

    def sampled(self, done: int, total: int) -> None:
        self.events.append(("sampled", None))
        super().sampled(done, total)


def test_repeats_take_rounds_in_turn_and_keep_each_samples_round(tmp_path: Path) -> None:
    lines: list[str] = []
    heard = _Heard(lines)
    out = run(RunConfig(task=TASK, runners=("torch-eager",), samples=12, repeats=3, warmup=1,
                        fresh_processes=False,
                        out=tmp_path / "r.json"), reporter=heard)
    # each case validated in its first turn, then a turn a round; no per-case sample count (the
    # time left is reckoned per case, and a round's share is not the case)
    first, second = [c for p, c in heard.events if p == "validate"]
    turns = [e for e in heard.events if e[0] in ("validate", "sample", "sampled")]
    assert turns == [("validate", first), ("sample", first), ("validate", second), ("sample", second),
                     *[("sample", c) for _ in range(2) for c in (first, second)]]
    r = load_receipt(out.path)
    assert r.settings["repeats"] == 3
    assert len(r.results) == 2
    for row in r.results:
        assert row.round_sizes == (4, 4, 4) and len(row.samples_ns) == 12
        assert "3 independent round(s) (repeats = 3)" in (row.stop_reason or "")
        assert row.steady_state is not None and "within each round" in row.steady_state["method"]
    rounds = [i for i, line in enumerate(lines) if line.startswith("round ")]
    assert len(rounds) == 3
    # every (runner, case) finished after the last round began: the rounds interleave the cases
    finished = [i for i, line in enumerate(lines) if "p50" in line and "samples" in line]
    assert finished and min(finished) > rounds[-1]


@pytest.mark.parametrize("kw, field", [({"repeats": 0}, "repeats"),
                                       ({"repeats": 2, "target_ci": 1.0}, "repeats"),
                                       ({"repeats": 50, "samples": 10}, "repeats")])
def test_bad_repeats_name_the_field(kw: dict, field: str) -> None:
    with pytest.raises(FieldError) as e:
        RunConfig(**kw).validate()
    assert e.value.field == field


def test_cli_repeats_flag_and_one_line_error(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["run", "--repeats", "0", "--out", str(tmp_path / "x.json")])
    assert r.exit_code == 2 and "--repeats: must be ≥ 1" in r.output
    assert "--repeats K" in CliRunner().invoke(main, ["run", "--help"]).output


def test_repeats_under_poisson_arrivals_keep_each_rounds_queue_times(tmp_path: Path) -> None:
    """Each round's queue stage joins the row (the rounds once failed on a stage missing at the start)."""
    out = run(RunConfig(task=TASK, runners=("torch-eager",), cases=("alpha",), samples=8, repeats=2, warmup=1,
                        fresh_processes=False,
                        rate_per_s=2000.0, out=tmp_path / "r.json"))
    (row,) = load_receipt(out.path).results
    # (a busy machine may declare a round overloaded before its last sample: the counts are not fixed)
    assert len(row.round_sizes) == 2 and sum(row.round_sizes) == len(row.samples_ns) > 0
    assert len(row.stages_ns["queue"]) == len(row.samples_ns)


def test_repeats_under_an_unsustainable_rate_keep_the_overload(tmp_path: Path) -> None:
    """One overloaded round makes the joined row overloaded (invalid), with its load record,
    as a one-round run at that rate is; the rounds once joined into a valid row with no load."""
    out = run(RunConfig(task=TASK, runners=("torch-eager",), cases=("alpha",), samples=40, repeats=2,
                        fresh_processes=False,
                        warmup=1, rate_per_s=1e7, out=tmp_path / "r.json"))
    (row,) = load_receipt(out.path).results
    assert row.status == "invalid" and row.load is not None and row.load.overloaded
    assert "a round was overloaded" in row.stop_reason
    assert any("overloaded" in r for r in row.reasons)
