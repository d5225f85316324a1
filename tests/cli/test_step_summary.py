"""The CI step summary: the command line appends it to ``$GITHUB_STEP_SUMMARY``; render only
returns text."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from click.testing import CliRunner

import benchbox.render
from benchbox.cli import main
from benchbox.render import diff_markdown, refused_markdown
from tests.support import GOLDEN


def test_diff_appends_its_markdown_to_the_step_summary(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["diff", str(GOLDEN), str(GOLDEN)],
                           env={"GITHUB_STEP_SUMMARY": str(summary)})
    from benchbox import api

    shown = diff_markdown(api.diff(GOLDEN, GOLDEN))
    assert summary.read_text(encoding="utf-8") == "earlier step\n" + shown, r.output


def test_a_refused_diff_appends_the_refusal_with_the_flag_named(tmp_path: Path) -> None:
    doc = json.loads(GOLDEN.read_text())
    doc.update(complete=False, interrupted=True, interrupt_reason="SIGINT after 1 result(s)")
    (tmp_path / "head.json").write_text(json.dumps(doc))
    summary = tmp_path / "summary.md"
    r = CliRunner().invoke(main, ["diff", str(GOLDEN), str(tmp_path / "head.json")],
                           env={"GITHUB_STEP_SUMMARY": str(summary)})
    text = summary.read_text(encoding="utf-8")
    assert r.exit_code == 2 and text.startswith(refused_markdown("x").split("\n")[0])
    assert "--accept incomplete" in text and "accept=incomplete" not in text


def test_no_summary_file_is_written_without_the_variable(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["diff", str(GOLDEN), str(GOLDEN)], env={"GITHUB_STEP_SUMMARY": None})
    assert r.exit_code == 0 and not list(tmp_path.iterdir())


def test_render_reads_no_environment_and_opens_no_file() -> None:
    for path in Path(benchbox.render.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert "open" not in names and not {"environ", "write_text", "write_bytes", "getenv"} & attrs, path


def test_percentages_are_read_in_one_place() -> None:
    """Every percentage option (--target-ci, --threshold, --min-change, --drift) is read by
    benchbox.run.options.percent; no other module strips a '%'."""
    package = Path(benchbox.render.__file__).parent.parent
    readers = sorted(str(p.relative_to(package)) for p in package.rglob("*.py")
                     if 'removesuffix("%")' in p.read_text(encoding="utf-8")
                     or 'rstrip("%")' in p.read_text(encoding="utf-8"))
    assert readers == ["run/options.py"]
    from benchbox.cli import _percent, _threshold
    from benchbox.run.options import fraction, percent

    assert _percent is percent and _threshold("5 %") == fraction("5%", "--x") == 0.05
