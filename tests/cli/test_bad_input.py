"""Bad input on the command line: one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import benchbox
from tests.support import GOLDEN, cli_without_torch, one_line_exit_2


def test_bad_contract_files_are_one_line_exit_2(tmp_path: Path) -> None:
    good = (Path(benchbox.__file__).parent / "contracts" / "builtin" / "model_io_wall.toml").read_text()
    bad = {
        "malformed.toml": "name = 'x\nstages = [",
        "not-contiguous.toml": good.replace('["h2d", "compute", "d2h"]', '["h2d", "d2h"]'),
        "device-host-stage.toml": good.replace('clock = "host"', 'clock = "device"').replace(
            '["h2d", "compute", "d2h"]', '["parse", "preprocess"]'),
        "huge-int.toml": good.replace("version = 1", "version = 1" + "0" * 5000),
        "deep.toml": "x = " + "[" * 50_000 + "]" * 50_000,
        "wrong-type.toml": good.replace("version = 1", 'version = "one"'),
        "first-mismatch.toml": good + '\nfirst = "parse"\n',
        "empty.toml": "",
    }
    assert '"h2d", "compute", "d2h"' in good and "version = 1" in good and 'clock = "host"' in good
    for name, text in bad.items():
        path = tmp_path / name
        path.write_text(text)
        one_line_exit_2(["contracts", str(path)])
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00name")
    one_line_exit_2(["contracts", str(binary)])
    one_line_exit_2(["contracts", str(tmp_path / "missing.toml")])
    one_line_exit_2(["contracts", "x" * 5000])
    one_line_exit_2(["contracts", "bad\x00name"])
    # through `run` too, before anything heavy happens
    one_line_exit_2(["run", "--contract", str(tmp_path / "not-contiguous.toml"),
                      "--out", str(tmp_path / "r.json")])


TASK_MODULES = {
    "missing_factory": "X = 1\n",
    "raises_on_import": "raise RuntimeError('configuration file not found')\n",
    "syntax_error": "def broken(:\n",
    "returns_non_task": "def make(**kw):\n    return object()\n",
    "factory_raises": "def make(**kw):\n    raise RuntimeError('weights missing')\n",
    "abstract_task": ("from benchbox.tasks import Task\n"
                      "class Half(Task):\n    name = 'half'\n"
                      "def make(**kw):\n    return Half(**kw)\n"),
    "no_cases": ("from benchbox.tasks.decision.task import DecisionTask\n"
                 "class NoCases(DecisionTask):\n    def cases(self):\n        return []\n"
                 "def make(**kw):\n    return NoCases(**kw)\n"),
    "bad_request": ("from benchbox.tasks import Case\n"
                    "from benchbox.tasks.decision.task import DecisionTask\n"
                    "class BadRequest(DecisionTask):\n"
                    "    def cases(self):\n"
                    "        good = super().cases()[0].request\n"
                    "        return [Case('ok', good), Case('broken', b'{\"document\": 1}')]\n"
                    "def make(**kw):\n    return BadRequest(**kw)\n"),
}


@pytest.mark.parametrize("kind", sorted(TASK_MODULES))
def test_bad_task_is_one_line_exit_2(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = f"bbx_task_{kind}_{os.getpid()}"
    (tmp_path / f"{module}.py").write_text(TASK_MODULES[kind])
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    line = one_line_exit_2(["run", "--task", f"{module}:make", "--runner", "torch-eager",
                             "--out", str(tmp_path / "r.json")])
    if kind == "bad_request":
        assert "case broken: invalid request" in line


def test_bad_task_spec_and_requests(tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / "r.json")]
    one_line_exit_2(["run", "--task", "no_such_module_anywhere:make", *out])
    one_line_exit_2(["run", "--task", "nonsense", *out])
    one_line_exit_2(["run", "--size", "galactic", *out])
    one_line_exit_2(["run", "--case", "no-such-case", "--runner", "torch-eager", *out])
    one_line_exit_2(["run", "--runner", "no-such-runner", *out])
    one_line_exit_2(["run", "--samples", "0", *out])


def test_click_usage_errors_are_one_line_exit_2() -> None:
    for args in (["run", "--no-such-option"], ["no-such-command"], ["run", "--samples", "many"],
                 ["show"], ["run", "--dtype", "float8"]):
        line = one_line_exit_2(args)
        assert "--help" in line


def test_unexpected_exception_in_a_command_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    import benchbox.receipts as receipts

    def explode(path: Any) -> Any:
        raise ZeroDivisionError("division by zero deep inside a loader")

    monkeypatch.setattr(receipts, "load_receipt", explode)
    line = one_line_exit_2(["show", str(GOLDEN)])
    assert "ZeroDivisionError: division by zero deep inside a loader" in line


@pytest.mark.parametrize("args", [["--baseline", "nosuch"], ["--device", "cuda:x"], ["--dtype", "fp7"],
                                  ["--samples", "0"], ["--runner-option", "torch-compile:mdoe=default"],
                                  ["--runner-option", "torch-eager:threads=2"],
                                  ["--runner", "tensorrt", "--runner-option", "tensorrt:flavor=auto"]])
def test_a_run_refused_before_its_runners_are_checked_does_not_import_torch(args: list[str]) -> None:
    """Refusals that need no runner code come before the runners' option checks, which import
    torch: a mistyped flag or runner option key is answered in a fraction of a second, not after
    torch has loaded."""
    r = cli_without_torch(["run", *args, "--out", "never.json"], exit_code=2)
    assert r.stderr.startswith("benchbox: error: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
