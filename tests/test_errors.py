"""One way to show a caught error in one line, used wherever an error becomes a message or a reason."""

from __future__ import annotations

import ast

from benchbox.errors import error_line, first_line, last_line
from tests.support import REPO


def test_first_line_is_the_first_non_empty_line_cut_to_the_limit() -> None:
    assert first_line(ValueError("\n  bad value  \nsecond line")) == "bad value"
    assert first_line(ValueError("")) == "ValueError"  # no message: the class names it
    assert first_line("") == ""  # text has no class to fall back on
    assert first_line("x" * 900, 200) == "x" * 200
    assert error_line(RuntimeError("")) == "RuntimeError: "
    assert error_line(RuntimeError("boom\ntrace"), 10) == "RuntimeErr"
    assert last_line("building\n\n  error: no GPU  \n\n") == "error: no GPU"
    assert last_line("  \n") == "no output" and last_line("abcdef", 3) == "abc"


def test_no_module_keeps_its_own_copy_of_first_line() -> None:
    """``str(e).strip().splitlines()[0]`` and friends are errors.first_line; nowhere else."""
    copies = []
    for path in sorted((REPO / "benchbox").rglob("*.py")):
        if path.name == "errors.py" and path.parent.name == "benchbox":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.strip("_") == "first_line":
                copies.append(f"{path.relative_to(REPO)}: def {node.name}")
            if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "splitlines"
                    and _strips_a_message(node.value.func.value)):
                copies.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not copies, copies


def _strips_a_message(node: ast.AST) -> bool:
    """``<str(e) or x.stderr or a text>.strip()``: the first-line idiom (data parsing reads files)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "strip"
            and not (isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "stdout"))
