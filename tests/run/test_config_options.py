"""The run options' one declaration (benchbox.run.options): the command line parses what the
declaration writes, and every declared option is an option of its commands."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from benchbox.cli import _run_config, main
from benchbox.errors import UsageError
from benchbox.run.options import OPTIONS, duration_ms, options, percent, rate, run_argv

GIVEN = {"contracts": ("model_io_wall", "device_span"), "task": "decision", "size": "tiny",
         "dtype": "float16",
         "runners": ("torch-eager", "torch-compile"), "cases": ("invoice",), "device": "cpu", "threads": 2,
         "warmup": 1, "samples": 40, "repeats": 2, "fresh_processes": False, "gc_mode": "off",
         "max_samples": 99, "max_time_s": 7.5, "gap_ms": 0.5, "idle": "busy", "max_backlog": 3,
         "max_queue_ms": 4.5, "case_time_limit_s": 20.0, "baseline": "torch-eager",
         "task_options": {"flag": True, "n": 2}, "gates": {"max_prob_error": 0.5}, "labels": {"k": "v=w"},
         "out": Path("o/r.json"), "overwrite": True,
         "runner_options": {"torch-compile": {"aten_fallbacks": ["layer_norm"], "mode": "default",
                                              "inductor_options": {"max_autotune": False}}}}


def _parsed(argv: list[str]):
    parent = click.Context(main, info_name="benchbox", **main.context_settings)  # as `benchbox` makes it
    params = main.commands["run"].make_context("run", argv[1:], parent=parent).params
    del params["quiet"], params["verbose"]
    return _run_config(**params)


def test_the_command_line_parses_what_the_declaration_writes() -> None:
    argv = run_argv(GIVEN)
    assert argv[:3] == ["run", "--contract", "model_io_wall"] and "--aten-fallback" in argv
    cfg = _parsed(argv)
    for name, value in GIVEN.items():
        got = cfg.contracts if name == "contracts" else getattr(cfg, name)
        assert got == value, name


def test_unset_and_switched_off_values_write_nothing_or_the_off_flag() -> None:
    assert run_argv({"target_ci": None, "overwrite": False}) == ["run"]
    assert run_argv({"fresh_processes": True, "rate_per_s": 5.0}) == \
        ["run", "--fresh-processes", "--rate", "5.0"]


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_every_declared_option_is_an_option_of_its_command_under_its_field(command: str) -> None:
    params = {p.name: p.opts for p in main.commands[command].params}
    for o in options(command):
        assert o.flag.split("/")[0] in params[o.field], o
    assert {o.field for o in OPTIONS if command in o.commands} <= set(params)


def test_values_read_as_before() -> None:
    assert percent(" 0.5 % ", "--target-ci") == 0.5 and percent(None, "--x") is None
    assert duration_ms("200us") == pytest.approx(0.2) and duration_ms("2s") == 2000.0
    assert duration_ms("3") == 3.0
    assert rate("50/s") == 50.0
    with pytest.raises(UsageError, match="--gap expects a duration"):
        duration_ms("soon")
    with pytest.raises(UsageError, match=r"--threshold expects a percentage such as 5 or 5%, got '5%%'"):
        percent("5%%", "--threshold", "5")
