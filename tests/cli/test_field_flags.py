"""Library errors name configuration fields; the command line shows the flag that sets each."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from benchbox.cli import _flagged, _flags, main
from benchbox.errors import FieldError, Setting, UsageError
from benchbox.receipts import write_receipt
from benchbox.receipts.diff import ComparisonRefused, DiffOptions, DiffResult, diff_receipts
from benchbox.run.config import RunConfig
from benchbox.tasks import load_task
from tests.support import GOLDEN, one_line_exit_2, synthetic_receipt


def test_flagged_shows_the_settings_named_under_the_commands_own_flags() -> None:
    accept, rate = Setting("accept", "incomplete"), Setting("rate_per_s", "REQUESTS_PER_S")
    task = Setting("task", "pkg.mod:make")
    assert _flagged("rerun it, or pass accept=incomplete", (accept,), "diff") == \
        "rerun it, or pass --accept incomplete"
    assert _flagged("(rate_per_s=REQUESTS_PER_S)", (rate,), "run") == "(--rate REQUESTS_PER_S)"
    assert _flagged("task=pkg.mod:make: cannot import", (task,), "run") == \
        "--task pkg.mod:make: cannot import"
    # a field the command has no flag for, a setting the message does not name, no command: as written
    cpu = Setting("accept", "cpu")
    assert _flagged("pass accept=cpu", (cpu,), "run") == "pass accept=cpu"
    assert _flagged("pass accept=cpu", (), "diff") == "pass accept=cpu"
    assert _flagged("pass accept=cpu", (accept,), "diff") == "pass accept=cpu"
    assert _flagged("accept=cpu", (cpu,), None) == "accept=cpu"


def test_the_settings_a_message_suggests_travel_with_it_as_data() -> None:
    from benchbox.matrix.executors import make_executor
    from benchbox.receipts.diff_result import DiffRow

    with pytest.raises(FieldError) as e:
        make_executor("local", "10.0.0.1:6379")
    assert e.value.settings == (Setting("executor", "ray"),)
    assert str(e.value).endswith("only with executor=ray")
    with pytest.raises(UsageError) as refused:
        load_task("no_such_module_anywhere_bbx:make")
    assert refused.value.settings == (Setting("task", "no_such_module_anywhere_bbx:make"),)
    row = DiffRow("t", "c", "r", "unreliable", reason="cpu: differs (pass accept=cpu to judge anyway)",
                  settings=(Setting("accept", "cpu"),))
    assert "settings" not in DiffResult("a", "b", {}, DiffOptions(), (row,)).to_dict()["rows"][0]


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


#: field → flag per command, as a hand-written table had it before options were declared once
BEFORE: dict[str, dict[str, str]] = {
    "run": {"contract": "--contract", "contracts": "--contract", "task": "--task", "size": "--size",
            "dtype": "--dtype", "runners": "--runner", "cases": "--case", "device": "--device",
            "threads": "--threads", "warmup": "--warmup", "samples": "--samples", "repeats": "--repeats",
            "fresh_processes": "--fresh-processes", "gc_mode": "--gc", "target_ci": "--target-ci",
            "max_samples": "--max-samples", "max_time_s": "--max-time",
            "out": "--out", "overwrite": "--overwrite", "case_time_limit_s": "--case-time-limit",
            "baseline": "--baseline", "runner_options": "--runner-option", "task_options": "--task-option",
            "gates": "--gate", "labels": "--label", "gap_ms": "--gap", "rate_per_s": "--rate",
            "idle": "--idle", "max_backlog": "--max-backlog", "max_queue_ms": "--max-queue"},
    "diff": {"threshold": "--threshold", "metric": "--metric", "alpha": "--alpha", "accept": "--accept",
             "drift": "--drift"},
    "plot": {"threshold": "--threshold", "metric": "--metric", "accept": "--accept"},
    "sweep": {"contract": "--contract", "contracts": "--contract", "task": "--task", "size": "--size",
              "dtype": "--dtype", "runners": "--runner", "cases": "--case", "device": "--device",
              "threads": "--threads", "warmup": "--warmup", "samples": "--samples",
              "runner_options": "--runner-option", "task_options": "--task-option", "labels": "--label",
              "max_backlog": "--max-backlog", "max_queue_ms": "--max-queue", "gaps_ms": "--gap",
              "rates": "--rate", "idles": "--idle", "settle_s": "--settle-s"},
    "report": {"threshold": "--threshold", "metric": "--metric", "alpha": "--alpha",
               "max_pvalue": "--max-pvalue", "min_change": "--min-change", "commit_url": "--commit-url"},
    "tasks": {"task": "--task"},
    "runners": {"device": "--device"},
    "selfcheck": {"runner": "--runner", "device": "--device", "flavours": "--flavour",
                  "samples": "--samples", "warmup": "--warmup", "dtypes": "--dtype", "size": "--size"},
    "matrix": {"executor": "--executor", "ray_address": "--ray-address", "revision": "--revision"},
}


@pytest.mark.parametrize("command", sorted(BEFORE))
def test_each_field_shows_the_flag_it_showed_before(command: str) -> None:
    flags = _flags(command)
    assert {field: flags.get(field) for field in BEFORE[command]} == BEFORE[command]


def test_every_run_config_field_but_the_sweeps_settle_and_the_command_has_a_run_flag() -> None:
    import dataclasses

    fields = {f.name for f in dataclasses.fields(RunConfig)} - {"command", "settle_s"}
    assert fields <= set(_flags("run")), fields - set(_flags("run"))
    assert "settle_s" in _flags("sweep") and "out_dir" in _flags("sweep")
