"""Library errors name configuration fields; the command line shows the flag that sets each."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from benchbox.cli import FLAGS, _flagged, main
from benchbox.errors import FieldError, UsageError
from benchbox.receipts import write_receipt
from benchbox.receipts.diff import ComparisonRefused, DiffOptions, diff_receipts
from benchbox.tasks import load_task
from tests.support import GOLDEN, one_line_exit_2, synthetic_receipt


def test_flagged_maps_only_the_commands_own_fields() -> None:
    assert _flagged("rerun it, or pass accept=incomplete", "diff") == "rerun it, or pass --accept incomplete"
    assert _flagged("(rate_per_s=REQUESTS_PER_S)", "run") == "(--rate REQUESTS_PER_S)"
    assert _flagged("task=pkg.mod:make: cannot import", "run") == "--task pkg.mod:make: cannot import"
    # not a field of the command, part of a longer word, or no value: left as written
    assert _flagged("pass accept=cpu", "run") == "pass accept=cpu"
    assert _flagged("max_prob_error=0.1 and xaccept=cpu", "diff") == "max_prob_error=0.1 and xaccept=cpu"
    assert _flagged("accept= nothing", "diff") == "accept= nothing"
    assert _flagged("accept=cpu", None) == "accept=cpu"


def test_an_incomplete_receipt_names_the_field_in_the_library_and_the_flag_on_the_command_line(
        tmp_path: Path) -> None:
    doc = json.loads(GOLDEN.read_text())
    doc.update(complete=False, interrupted=True, interrupt_reason="SIGINT after 1 result(s)")
    head = tmp_path / "head.json"
    head.write_text(json.dumps(doc))
    from benchbox.receipts import load_receipt

    with pytest.raises(ComparisonRefused) as e:
        diff_receipts(load_receipt(GOLDEN), load_receipt(head))
    assert "accept=incomplete" in str(e.value) and "--" not in str(e.value)
    line = one_line_exit_2(["diff", str(GOLDEN), str(head)])
    assert line.endswith("rerun it, or pass --accept incomplete")


def test_a_bad_task_spec_names_the_field_in_the_library_and_the_flag_on_the_command_line(
        tmp_path: Path) -> None:
    spec = "no_such_module_anywhere_bbx:make"
    with pytest.raises(UsageError) as e:
        load_task(spec)
    assert str(e.value).startswith(f"task={spec}: cannot import") and "--task" not in str(e.value)
    line = one_line_exit_2(["run", "--task", spec, "--out", str(tmp_path / "r.json")])
    assert line.startswith(f"benchbox: error: --task {spec}: cannot import")
    line = one_line_exit_2(["tasks", "--task", spec])
    assert line.startswith(f"benchbox: error: --task {spec}: cannot import")


def test_report_shows_its_own_flags_for_field_errors(tmp_path: Path) -> None:
    with pytest.raises(FieldError) as e:
        DiffOptions(alpha=2)
    assert e.value.field == "alpha" and str(e.value).startswith("alpha: must be")
    line = one_line_exit_2(["report", str(tmp_path / "store"), "-o", str(tmp_path / "site"), "--alpha", "2"])
    assert line.startswith("benchbox: error: --alpha: must be between 0 and 1")
    line = one_line_exit_2(["report", str(tmp_path / "store"), "-o", str(tmp_path / "site"),
                            "--max-pvalue", "3"])
    assert line.startswith("benchbox: error: --max-pvalue: must be between 0 and 1")


def test_a_refused_row_names_the_field_in_the_library_and_the_flag_in_the_diff_table(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    key = ("torch-eager", "invoice")
    base = synthetic_receipt({key: [rng.lognormal(13.8, 0.1, 200)]})
    head = synthetic_receipt({key: [rng.lognormal(13.8, 0.1, 200)]}, environment={"cpu": "Another CPU"})
    assert any("(pass accept=cpu to judge anyway)" in n for n in diff_receipts(base, head).notes)
    write_receipt(tmp_path / "base.json", base)
    write_receipt(tmp_path / "head.json", head)
    args = ["diff", str(tmp_path / "base.json"), str(tmp_path / "head.json")]
    table = CliRunner().invoke(main, args)
    assert table.exit_code == 3 and "--accept cpu" in table.stdout and "accept=cpu" not in table.stdout
    as_json = CliRunner().invoke(main, [*args, "--format", "json"])
    assert "pass accept=cpu" in as_json.stdout  # tools read the library's wording


def test_every_flag_named_in_flags_exists_on_its_command() -> None:
    for command, fields in FLAGS.items():
        options = {o for p in main.commands[command].params for o in getattr(p, "opts", ())}
        for field, flag in fields.items():
            assert flag in options, (command, field, flag)
