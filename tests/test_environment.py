"""The load at start: how long a run watches the machine's CPU time, and what it records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox import environment
from benchbox.cli import main
from benchbox.errors import UsageError
from benchbox.run import RunConfig, run


def test_the_window_is_half_a_second_unless_the_variable_says_otherwise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCHBOX_LOAD_WINDOW_S", raising=False)
    assert environment.load_window_s() == 0.5
    monkeypatch.setenv("BENCHBOX_LOAD_WINDOW_S", " ")
    assert environment.load_window_s() == 0.5
    for text, value in (("0.2", 0.2), ("0", 0.0), ("60", 60.0)):
        monkeypatch.setenv("BENCHBOX_LOAD_WINDOW_S", text)
        assert environment.load_window_s() == value


@pytest.mark.parametrize("text", ["-1", "61", "nan", "inf", "half", "0,5"])
def test_a_window_out_of_range_or_not_a_number_is_refused(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("BENCHBOX_LOAD_WINDOW_S", text)
    with pytest.raises(UsageError, match=r"^BENCHBOX_LOAD_WINDOW_S must be seconds from 0 to 60, not "):
        environment.load_window_s()


def test_the_busy_fraction_is_read_over_the_window_and_a_zero_window_reads_none(
        monkeypatch: pytest.MonkeyPatch) -> None:
    timed = environment.load_at_start(0.05)
    assert timed["window_s"] == 0.05 and 0 <= timed["busy_fraction"] <= 1 and timed["cores"] >= 1
    monkeypatch.setattr(environment, "_cpu_times", lambda: pytest.fail("a zero window reads no CPU times"))
    bare = environment.load_at_start(0)
    assert "busy_fraction" not in bare and "window_s" not in bare
    assert bare["per_core"] == pytest.approx(bare["load_avg_1min"] / bare["cores"], abs=1e-3)


def test_a_run_records_the_window_it_watched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHBOX_LOAD_WINDOW_S", "0.2")
    cfg = RunConfig(runners=("torch-eager",), cases=("invoice",), samples=3, warmup=0,
                    out=tmp_path / "r.json")
    out = run(cfg)
    load = json.loads(Path(out.path).read_text())["environment"]["load"]
    assert load["window_s"] == 0.2 and "busy_fraction" in load


@pytest.mark.parametrize("rounds", [[], ["--repeats", "2"]], ids=["one-round", "fresh-processes"])
def test_a_bad_window_exits_2_with_one_line_before_anything_is_written(tmp_path: Path,
                                                                      rounds: list[str]) -> None:
    out = tmp_path / "r.json"
    args = ["run", "--runner", "torch-eager", "--case", "invoice", "--samples", "4", "--out", str(out)]
    args += rounds
    result = CliRunner().invoke(main, args, env={"BENCHBOX_LOAD_WINDOW_S": "soon"})
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        "benchbox: error: BENCHBOX_LOAD_WINDOW_S must be seconds from 0 to 60, not 'soon'"]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", ["sweep", "selfcheck", "matrix"])
def test_commands_that_start_runs_refuse_a_bad_window_before_they_write(tmp_path: Path,
                                                                       command: str) -> None:
    out = tmp_path / "out"
    plan = tmp_path / "plan.toml"
    plan.write_text('[axes]\nrunner = ["torch-eager"]\ncase = ["invoice"]\n')
    args = {"sweep": ["sweep", "--runner", "torch-eager", "--case", "invoice", "--rate", "10",
                      "--out-dir", str(out)],
            "selfcheck": ["selfcheck", "--out-dir", str(out)],
            "matrix": ["matrix", str(plan), "--store", str(out)]}[command]
    result = CliRunner().invoke(main, args, env={"BENCHBOX_LOAD_WINDOW_S": "-1"})
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        "benchbox: error: BENCHBOX_LOAD_WINDOW_S must be seconds from 0 to 60, not '-1'"]
    assert not out.exists()


def test_without_a_window_the_warning_gives_the_load_average_per_core() -> None:
    from benchbox.receipts.conditions import load_warning

    said = load_warning({"cores": 2, "load_avg_1min": 2.8, "per_core": 1.4})
    assert said is not None and "(load average 1.40 per core as the run started)" in said
    assert "% of CPU time" not in said
    windowed = load_warning({"cores": 2, "load_avg_1min": 2.8, "per_core": 1.4, "busy_fraction": 0.7,
                             "window_s": 0.5})
    assert windowed is not None and "(70% of CPU time went to other work" in windowed


def test_nvidia_smi_fields_it_could_not_read_are_not_recorded() -> None:
    """nvidia-smi's own output, parsed (nvidia-smi cannot run on this machine): `[N/A]` is no
    power limit, so a receipt does not hold it as one and a diff does not compare it."""
    line = "580.159.04, 1980, 3201, 1980, 39, 79.02, 700.00\n"
    assert environment.smi_readings(line) == {
        "driver": "580.159.04", "sm_clock_mhz": "1980", "mem_clock_mhz": "3201", "max_sm_clock_mhz": "1980",
        "temperature_c": "39", "power_w": "79.02", "power_limit_w": "700.00"}
    got = environment.smi_readings("580.159.04, 1980, [N/A], 1980, 39, [Not Supported], [N/A]\n")
    assert got == {"driver": "580.159.04", "sm_clock_mhz": "1980", "max_sm_clock_mhz": "1980",
                   "temperature_c": "39"}
