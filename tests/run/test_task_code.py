"""Task code that calls sys.exit or raises a BaseException is contained like any other task failure.

At load (import, factory, the cases' requests): one line and exit 2. In a stage: a failed row
with the reason, the run goes on. The task is a real user task (``tests/hostile_tasks.py``)
loaded through ``--task package.module:factory``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox.cli import main
from tests.support import loaded, one_line_exit_2

HOSTILE = ["run", "--task", "tests.hostile_tasks:factory", "--runner", "torch-eager",
           "--samples", "5", "--warmup", "1"]


@pytest.mark.parametrize("body, said", [
    ("import sys\nsys.exit(3)\n", "sys.exit(3)"),
    ("class Boom(BaseException):\n    pass\n\nraise Boom('at import')\n", "Boom: at import"),
])
def test_task_code_leaving_at_import_gives_one_line_and_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, said: str) -> None:
    name = f"leaves_at_import_{abs(hash(body))}"
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.chdir(tmp_path)
    line = one_line_exit_2(["run", "--runner", "torch-eager", "--task", f"{name}:factory",
                            "--out", str(tmp_path / "r.json")])
    assert said in line and line.startswith(f"benchbox: error: --task: {name}:factory: loading the task")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("options, said", [
    (["exit_in=factory", "exit_code=0"], "sys.exit(0)"),  # would have been a silent exit 0
    (["exit_in=parse", "at_call=1"], "sys.exit(3)"),  # the cases' requests are parsed at load
])
def test_task_code_leaving_while_loading_gives_one_line_and_exit_2(tmp_path: Path, options: list[str],
                                                                   said: str) -> None:
    args = [*HOSTILE, "--out", str(tmp_path / "r.json")]
    for o in options:
        args += ["--task-option", o]
    line = one_line_exit_2(args)
    assert said in line and "tests.hostile_tasks:factory" in line


@pytest.mark.parametrize("option, at_call, said", [
    ("exit_in=serialize", 1, "reference call failed: SystemExit: sys.exit(3)"),  # the first case's reference
    ("exit_in=serialize", 3, "sys.exit(3)"),  # the first validation call of the first case
    ("exit_in=parse", 6, "sys.exit(3)"),
    ("raise_in=reduce", 3, "Abandon: abandoned in reduce"),
    ("exit_in=serialize", 10, "sys.exit(3)"),  # in the middle of the first case's samples
])
def test_task_code_leaving_in_a_stage_gives_a_failed_row_and_the_run_goes_on(
        tmp_path: Path, option: str, at_call: int, said: str) -> None:
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, [*HOSTILE, "--task-option", option,
                                       "--task-option", f"at_call={at_call}", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    receipt = loaded(out)
    assert receipt["complete"] is True
    rows = {r["case"]: r for r in receipt["results"]}
    assert rows["alpha"]["status"] == "failed" and said in rows["alpha"]["reasons"][0]
    assert rows["beta"]["status"] == "valid"
