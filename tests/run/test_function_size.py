"""The run sequence stays readable: no function of ``benchbox.run`` is longer than 60 lines."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import REPO

MOST_LINES = 60


def long_functions(paths: list[Path]) -> list[str]:
    """``path:line name (n lines)`` of every function over MOST_LINES lines (docstring included)."""
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if n > MOST_LINES:
                    out.append(f"{path}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_of_the_run_package_is_over_60_lines() -> None:
    paths = sorted((REPO / "benchbox" / "run").glob("*.py"))
    assert len(paths) >= 10
    assert long_functions(paths) == []


def test_the_check_finds_a_long_function(tmp_path: Path) -> None:
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * MOST_LINES)
    short = tmp_path / "short.py"
    short.write_text("def g():\n" + "    x = 1\n" * (MOST_LINES - 1))
    assert [line.split(" ")[1] for line in long_functions([long, short])] == ["f"]
