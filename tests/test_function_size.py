"""Every function of ``benchbox`` reads on one screen: none is longer than 60 lines."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import REPO

MOST_LINES = 60
PACKAGE = REPO / "benchbox"


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


def package_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_check_walks_every_subpackage() -> None:
    walked = {p.parent for p in package_files()}
    subpackages = {p.parent for p in PACKAGE.rglob("__init__.py")}
    assert PACKAGE in walked
    assert len(subpackages) >= 10
    assert subpackages <= walked


def test_no_function_of_the_package_is_over_60_lines() -> None:
    assert long_functions(package_files()) == []


def test_the_check_finds_a_long_function(tmp_path: Path) -> None:
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * MOST_LINES)
    short = tmp_path / "short.py"
    short.write_text("def g():\n" + "    x = 1\n" * (MOST_LINES - 1))
    method = tmp_path / "method.py"
    method.write_text("class C:\n    async def h(self):\n" + "        x = 1\n" * MOST_LINES)
    assert [line.split(" ")[1] for line in long_functions([long, short, method])] == ["f", "h"]
