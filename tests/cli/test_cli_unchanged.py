"""The command line's surface stays as it was: ``--help`` of every command, the RunConfig (and
SweepConfig) that a set of command lines parses to, the one-line errors and exit codes of bad
ones, and the ``benchbox run`` command line of matrix cells.

``tests/cli/cli_surface.json`` was written by this file run as a script against the code
before the options were declared in one place (``python tests/cli/test_cli_unchanged.py
--write`` with that code first on the path); the test compares today's code with it. An option
added since (``run --settle-s``) was written in with ``--write``, its diff read first: one line of
help and one more parsed command line, nothing else changed; then its help again, when a settle
phase became allowed with ``--repeats`` (that help line alone changed).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).with_name("cli_surface.json")
HELP = ["", "run", "sweep", "matrix", "diff", "plot", "report", "selfcheck", "runners", "tasks", "contracts",
        "show", "combine", "export", "store", "store add", "store list", "store rm"]
RUN_ARGV = [
    [],
    ["--contract", "public_task_call_wall", "--contract", "model_io_wall", "--task", "decision", "--size",
     "tiny", "--dtype", "float16", "--runner", "torch-eager", "--runner", "torch-compile", "--case",
     "invoice", "--device", "cpu", "--threads", "2", "--warmup", "3", "--samples", "50", "--repeats", "2",
     "--in-process", "--gc", "off", "--max-samples", "500", "--max-time", "9", "--max-backlog", "10",
     "--max-queue", "20", "--case-time-limit", "60"],
    ["--target-ci", "1%", "--gap", "200us", "--idle", "busy", "--max-time", "30"],
    ["--settle-s", "2.5", "--samples", "40"],
    ["--target-ci", " 0.5 % ", "--gap", "0.2ms"], ["--gap", "1"], ["--gap", "2s"], ["--rate", "50/s"],
    ["--rate", "7.5"],
    ["--task-option", "k=true", "--task-option", "n=3", "--task-option", "f=0.5", "--task-option", "s=x",
     "--gate", "max_prob_error=0.1", "--label", " a =b=c", "--baseline", "torch-eager", "--out", "x.json",
     "--overwrite"],
    ["--runner", "torch-compile", "--compile-mode", "default", "--compile-option", "max_autotune=true",
     "--aten-fallback", "layer_norm", "--aten-fallback", "gelu",
     "--runner-option", "torch-compile:mode=reduce-overhead"],
    ["--runner", "torch-eager", "--compile-mode", "default", "--fresh-processes"], ["--size", "huge"],
]
RUN_BAD = [
    ["--samples", "0"], ["--target-ci", "abc"], ["--gap", "2parsecs"], ["--rate", "fast"],
    ["--repeats", "2", "--target-ci", "1"], ["--runner", "nope"], ["--gap", "1", "--rate", "2"],
    ["--max-time", "5000", "--target-ci", "1"], ["--task-option", "novalue"], ["--runner-option", "bad"],
    ["--runner-option", "torch-eager:novalue"], ["--label", "=x"], ["--threads", "0"], ["--device", "tpu"],
    ["--baseline", "xyz"], ["--contract", "nope"], ["--case", "nope"], ["--repeats", "0"],
    ["--repeats", "5", "--samples", "3"], ["--case-time-limit", "-1"], ["--max-backlog", "0"],
    ["--max-queue", "-1"], ["--gate", "g=x"], ["--dtype", "int8"], ["--gc", "maybe"], ["--warmup", "x"],
    ["--runner", "torch-eager", "--runner", "torch-eager"], ["--runner-option", "tensorrt:flavour=auto"],
    ["--contract", "model_io_wall", "--contract", "model_io_wall"], ["--task", "nope"],
    ["--rate", "0"], ["--gap", "-1"],
]
SWEEP_ARGV = [
    ["--gap", "0"],
    ["--gap", "0.2ms", "--gap", "1", "--rate", "50", "--rate", "0.3x", "--idle", "busy", "--idle", "sleep",
     "--settle-s", "2", "--max-backlog", "7", "--max-queue", "3", "--contract", "model_io_wall",
     "--runner", "torch-eager", "--case", "invoice", "--threads", "1", "--warmup", "2", "--samples", "9",
     "--runner", "torch-compile", "--runner-option", "torch-compile:mode=default", "--task-option", "k=v",
     "--label", "x=y"],
]
SWEEP_BAD = [[], ["--gap", "bad"], ["--samples", "0", "--gap", "0"], ["--gap", "-1"], ["--idle", "nope"],
             ["--label", "x", "--gap", "0"], ["--runner", "nope", "--gap", "0"]]


class _Parsed(BaseException):  # passes the command line's own handlers
    def __init__(self, config: Any) -> None:
        self.config = config


def _plain(value: Any) -> Any:
    """JSON data of a configuration, without the command line the process was started with."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name != "command"}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def _invoke(argv: list[str]) -> dict[str, Any]:
    """What the command line makes of ``argv``: the configuration it parsed (after preflight and
    validation, where running would start: that call is replaced), else its exit code and stderr."""
    from click.testing import CliRunner

    import benchbox.api
    import benchbox.run.preflight as pre
    import benchbox.sweep
    from benchbox.cli import main

    real = pre.preflight

    def checked(cfg: Any) -> None:
        real(cfg)
        cfg.validate()

    def stop(cfg: Any, *args: Any, **kwargs: Any) -> None:
        if hasattr(cfg, "points"):  # a sweep's own checks
            cfg.points()
        raise _Parsed(cfg)

    saved = (pre.preflight, benchbox.api.run, benchbox.sweep.sweep)
    pre.preflight, benchbox.api.run, benchbox.sweep.sweep = checked, stop, stop
    try:
        r = CliRunner().invoke(main, argv, env={"COLUMNS": "110", "BENCHBOX_DEBUG": None})
    except _Parsed as parsed:
        return {"config": _plain(parsed.config)}
    finally:
        pre.preflight, benchbox.api.run, benchbox.sweep.sweep = saved
    return {"exit": r.exit_code, "stderr": r.stderr if hasattr(r, "stderr") else r.output}


def _cells() -> list[Any]:
    from benchbox.matrix.plan import Cell

    base = dict(task="decision", size="tiny", dtype="float32", device="cpu", runners=("torch-eager",),
                contracts=(), cases=(), sampling={"samples": 30, "warmup": 5, "max_samples": 1000,
                                                  "max_time": 30.0}, threads=1, cpus=1, pin_cpus=False,
                timeout_s=60.0)
    full = {**base, "runners": ("torch-eager", "torch-compile"), "cases": ("invoice", "video"),
            "device": "cuda", "dtype": "bfloat16", "threads": 4, "baseline": "torch-eager",
            "sampling": {"samples": 400, "warmup": 3, "max_samples": 4000, "max_time": 12.5,
                         "target_ci": 1.0},
            "task_options": {"flag": True, "n": 2, "s": "x y"}, "gates": {"max_prob_error": 0.01},
            "runner_options": {"torch-compile": {"aten_fallbacks": ["layer_norm", "gelu"],
                                                 "inductor_options": {"a": True, "b": 2},
                                                 "mode": "default", "dynamic": False}}}
    return [Cell(**base), Cell(**full)]


def observe() -> dict[str, Any]:
    from click.testing import CliRunner

    from benchbox.cli import main
    from benchbox.matrix.cell import command

    helps = {}
    for name in HELP:
        r = CliRunner().invoke(main, [*name.split(), "--help"], env={"COLUMNS": "110"})
        helps[name] = [r.exit_code, r.output]
    cells = [command(c, Path("out/receipt.json"), ["model_io_wall", "mine/x.toml"], {"cell": "abc", "k": "v"})
             for c in _cells()]
    return {"help": helps,
            "run": [[a, _invoke(["run", *a])] for a in RUN_ARGV + RUN_BAD],
            "sweep": [[a, _invoke(["sweep", "--out-dir", "sw", *a])] for a in SWEEP_ARGV + SWEEP_BAD],
            "cells": cells}


def test_help_parsing_errors_and_cell_commands_are_as_before() -> None:
    want = json.loads(FIXTURE.read_text(encoding="utf-8"))
    got = json.loads(json.dumps(observe()))
    for section in ("help", "run", "sweep", "cells"):
        assert got[section] == want[section], section
        assert json.dumps(got[section]) == json.dumps(want[section]), f"{section}: the order changed"


def test_the_fixture_covers_valid_and_refused_command_lines() -> None:
    want = json.loads(FIXTURE.read_text(encoding="utf-8"))
    outcomes = [o for _, o in want["run"] + want["sweep"]]
    assert sum("config" in o for o in outcomes) == len(RUN_ARGV) + len(SWEEP_ARGV)
    assert all(o["exit"] == 2 and o["stderr"].startswith("benchbox: error: ") for o in outcomes
               if "config" not in o)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    FIXTURE.write_text(json.dumps(observe(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
