"""Every default is declared once, in the library: the command line's options read it from there."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from benchbox.cli import _run_config, _sweep_config, _threshold, main
from benchbox.receipts.diff import DiffOptions, accept_kinds
from benchbox.report.changepoints import Detector
from benchbox.run.config import RunConfig
from benchbox.runners import ENTRIES
from benchbox.selfcheck import SelfCheckConfig
from benchbox.sweep import SweepConfig


def _params(command: str, *args: str) -> dict[str, Any]:
    """The values ``benchbox COMMAND ARGS`` parses its options to (nothing is run)."""
    parent = click.Context(main, info_name="benchbox", **main.context_settings)  # as `benchbox` makes it
    return main.commands[command].make_context(command, list(args), parent=parent).params


def test_run_options_default_to_run_config() -> None:
    params = _params("run")
    del params["quiet"], params["verbose"]
    cli, lib = _run_config(**params), RunConfig()
    for f in dataclasses.fields(RunConfig):
        if f.name not in ("command", "runner_options"):
            assert getattr(cli, f.name) == getattr(lib, f.name), f.name
    # runner flags with a default (--compile-mode) set the runner's option, for the runners that run
    given = {r: {a.option: a.default for a in ENTRIES[r].aliases if a.default is not None}
             for r in lib.runners}
    assert cli.runner_options == {r: o for r, o in given.items() if o}


def test_sweep_options_default_to_run_config_and_sweep_config(tmp_path: Path) -> None:
    cli = _sweep_config(**_params("sweep", "--out-dir", str(tmp_path)))
    lib = SweepConfig(run=RunConfig(), out_dir=tmp_path)
    assert cli.idles == lib.idles and cli.gaps_ms == lib.gaps_ms and cli.rates == lib.rates
    assert dataclasses.replace(cli.run, command=()) == lib.run


@pytest.mark.parametrize("command, args", [("diff", ("a.json", "b.json")),
                                           ("plot", ("a.json", "-o", "a.png")),
                                           ("report", ("store", "-o", "site"))])
def test_diff_options_default_to_diff_options(command: str, args: tuple[str, ...]) -> None:
    params, lib = _params(command, *args), DiffOptions()
    assert _threshold(params["threshold"]) == lib.threshold and params["metric"] == lib.metric
    if "alpha" in params:
        assert params["alpha"] == lib.alpha
    if "accept" in params:
        assert accept_kinds(params["accept"]) == lib.accept
    if command == "report":
        assert params["max_pvalue"] == Detector().max_pvalue


def test_selfcheck_and_runners_options_default_to_their_configs() -> None:
    params, lib = _params("selfcheck"), SelfCheckConfig()
    assert (params["runner"], params["device"], params["samples"], params["warmup"]) == \
        (lib.runner, lib.device, lib.samples, lib.warmup)
    assert (tuple(params["dtypes"]), params["size"]) == (lib.dtypes, lib.size) == (("float32", "bfloat16"),
                                                                                    "tiny")
    assert _params("runners")["device"] == RunConfig().device


def test_a_changed_declaration_changes_the_option_and_its_help_with_the_declaration_patched(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fields = {f.name: f for f in dataclasses.fields(DiffOptions)}
    monkeypatch.setattr(fields["threshold"], "default", 0.1)
    monkeypatch.setattr(fields["alpha"], "default", 0.01)
    params = _params("diff", "a.json", "b.json")
    assert params["threshold"] == "10%" and params["alpha"] == 0.01
    shown = " ".join(CliRunner().invoke(main, ["diff", "--help"]).output.split())
    assert "[default: 10%]" in shown and "[default: 0.01]" in shown
