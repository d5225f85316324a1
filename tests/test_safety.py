"""Data only: no code runs from receipts or contracts, and a run makes no network call."""

from __future__ import annotations

import ast
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import benchbox
from benchbox.cli import main
from benchbox.run import RunConfig, run
from tests.support import GOLDEN, loaded

# -- safety: data only, no code from receipts or contracts, no network -----------------------

def test_package_source_never_evaluates_or_unpickles() -> None:
    root = Path(benchbox.__file__).parent
    banned_modules = {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "yaml"}
    banned_calls = {"eval", "exec", "__import__"}
    # modules the package imports by name: only from fixed tables, a runner registry, or --task
    import_module_allowed = {"tasks/__init__.py", "runners/__init__.py", "runners/tensorrt_flavours.py",
                             "plots/__init__.py", "__init__.py"}  # the last: the package's public names
    problems = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
            if isinstance(node, ast.Import):
                problems += [f"{rel}: import {a.name}" for a in node.names
                             if a.name.split(".")[0] in banned_modules]
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] in banned_modules:
                    problems.append(f"{rel}: from {node.module} import")
            elif isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Name) and f.id in banned_calls:
                    problems.append(f"{rel}: {f.id}()")
                if isinstance(f, ast.Attribute) and f.attr in ("load", "loads") and \
                        isinstance(f.value, ast.Name) and f.value.id in ("pickle", "yaml", "torch"):
                    problems.append(f"{rel}: {f.value.id}.{f.attr}()")
                if isinstance(f, ast.Attribute) and f.attr == "import_module" and \
                        rel not in import_module_allowed:
                    problems.append(f"{rel}: import_module outside the registries")
    assert problems == []


def test_loading_a_receipt_runs_nothing_from_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = tmp_path / "ran"
    module = f"bbx_evil_{os.getpid()}"
    (tmp_path / f"{module}.py").write_text(f"open({str(sentinel)!r}, 'w').write('x')\n"
                                           "def make(**kw):\n    raise SystemExit(9)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    strange = [f"__import__('os').system('touch {sentinel}')", f"{module}:make", "{{7*7}}", "${HOME}",
               "!!python/object/apply:os.system ['true']", "\u202e\u0000\ud7ff"]
    r = json.loads(GOLDEN.read_text())
    r["task"]["name"] = f"{module}:make"
    r["contract"]["source"] = f"{module}.py"
    r["results"][0]["runner"] = f"{module}:Runner"
    r["results"][0]["reasons"] = strange
    r["environment"]["note"] = strange
    path = tmp_path / "strange.json"
    path.write_text(json.dumps(r))
    doc = loaded(path)
    assert doc["results"][0]["reasons"] == strange  # kept as plain strings
    result = CliRunner().invoke(main, ["show", str(path)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["diff", str(path), str(path)])
    assert result.exit_code in (0, 1, 2, 3) and isinstance(result.exception, SystemExit | None)
    assert not sentinel.exists() and module not in sys.modules


def test_run_makes_no_network_calls_with_socket_mocked(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    attempts: list[str] = []

    def refuse(name: str) -> Any:
        def _refuse(*args: Any, **kwargs: Any) -> Any:
            attempts.append(name)
            raise OSError(f"network use during a benchbox run: {name}")
        return _refuse

    # modules that subclass socket.socket (ssl, imported by torch's dependencies) must load before
    # the mock replaces it with a function; importing is not a network call
    import ssl  # noqa: F401

    import torch  # noqa: F401

    # a mock of the network: every way to open a connection or resolve a name is refused
    monkeypatch.setattr(socket, "socket", refuse("socket"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    out = tmp_path / "r.json"
    outcome = run(RunConfig(runners=("torch-eager",), cases=("invoice",), samples=5, warmup=1, out=out))
    assert outcome.ok and loaded(out)["complete"] is True
    assert attempts == []
