"""The Python API: what ``import benchbox`` offers, that it is cheap, and the runnable example."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import benchbox
from benchbox.errors import UsageError
from tests.support import GOLDEN, REPO


def test_import_benchbox_is_cheap_and_documents_the_api() -> None:
    code = ("import sys, benchbox\n"
            "heavy = [m for m in ('torch', 'numpy', 'matplotlib', 'polars', 'rich') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "assert callable(benchbox.run) and 'torch' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 0, r.stderr
    for name in ("run(", "load_receipt(", "diff(", "plot(", "export(", "Task", "Runner"):
        assert name in (benchbox.__doc__ or ""), name
    for name in benchbox.__all__:
        assert getattr(benchbox, name) is not None, name
    assert (REPO / "benchbox" / "py.typed").is_file()
    assert "py.typed" in (REPO / "pyproject.toml").read_text()


def test_exported_bases_are_the_interfaces() -> None:
    from benchbox.runners.base import Runner
    from benchbox.tasks.base import Task

    assert benchbox.Task is Task and benchbox.Runner is Runner


def test_load_and_diff_take_paths_or_receipts() -> None:
    r = benchbox.load_receipt(GOLDEN)
    a = benchbox.diff(GOLDEN, GOLDEN)
    b = benchbox.diff(r, r)
    assert [x.verdict for x in a.rows] == [x.verdict for x in b.rows] and a.rows
    assert a.base == str(GOLDEN) and b.base == "BASE"


def test_run_refuses_an_unknown_field_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown field 'sample'"):
        benchbox.run(sample=10, out=tmp_path / "r.json")


def test_the_example_runs(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(REPO / "examples" / "api_example.py"), "--samples", "10",
                        "--out-dir", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=600, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-3000:]
    for phase in ("calibrate", "reference", "compile: torch-eager", "validate: torch-eager × invoice",
                  "sample: torch-eager × outage"):
        assert phase in r.stdout, phase
    assert r.stdout.count("diff torch-eager × ") == 2
    assert (tmp_path / "diff.png").stat().st_size > 0
    assert (tmp_path / "base.pyperf.json").is_file() and (tmp_path / "head.pyperf.json").is_file()
    again = subprocess.run([sys.executable, str(REPO / "examples" / "api_example.py"), "--samples", "10",
                            "--out-dir", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path,
                           timeout=600, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert again.returncode == 2 and again.stderr.count("\n") == 1, again.stderr[-2000:]
    assert again.stderr.startswith("api_example: ") and "base.json" in again.stderr


def test_help_of_benchbox_run_gives_the_functions_signature() -> None:
    """``benchbox.run`` is a package that can be called: its signature and help are the function's."""
    import inspect
    import pydoc

    from benchbox.api import run

    assert inspect.signature(benchbox.run) == inspect.signature(run)
    assert "reporter" in str(inspect.signature(benchbox.run))
    shown = pydoc.render_doc(benchbox.run, renderer=pydoc.plaintext)
    assert f"benchbox.run{inspect.signature(run)}" in shown
    assert inspect.getdoc(run).splitlines()[0] in shown


def test_api_page_names_every_plot_kind_and_keyword() -> None:
    import inspect

    from benchbox.api import plot
    from benchbox.plots import KINDS

    page = (REPO / "docs" / "api.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `plot("))
    for name in inspect.signature(plot).parameters:
        assert name in row, name
    for kind in KINDS:
        assert f"`{kind}`" in row, kind
