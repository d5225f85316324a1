"""What a first-time user reads: help that names valid values, -h, aligned tables, JSON for tools."""

from __future__ import annotations

import dataclasses
import json

import click
import pytest
from click.testing import CliRunner

from benchbox.cli import main
from benchbox.contracts import builtin_names
from benchbox.receipts import load_receipt
from benchbox.render import diff_table, results_table, side_by_side
from benchbox.render.table import table
from benchbox.runners import COMPILE_MODES, ENTRIES
from benchbox.tasks import builtin_tasks
from benchbox.tasks.decision.spec import CASE_NAMES, SIZES
from benchbox.tasks.decision.task import GATES
from tests.support import GOLDEN


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out = []
    for name, cmd in group.commands.items():
        out.append(((*path, name), cmd))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, (*path, name))
    return out


def test_every_option_has_help_and_every_command_takes_dash_h() -> None:
    for path, cmd in _commands(main):
        for p in cmd.params:
            if isinstance(p, click.Option):
                assert p.help, (path, p.opts)
        r = CliRunner().invoke(main, [*path, "-h"])
        assert r.exit_code == 0 and "Usage:" in r.output, (path, r.output)


def test_help_lists_whole_command_descriptions_and_valid_values() -> None:
    top = CliRunner().invoke(main, ["--help"]).output
    assert "..." not in top.split("Commands:")[1]
    assert "..." not in CliRunner().invoke(main, ["store", "--help"]).output.split("Commands:")[1]
    for path, cmd in _commands(main):
        if len(path) == 1:
            first = " ".join((cmd.help or "").split("\n\n")[0].split())
            assert first in " ".join(top.split()), path
    for group in ([], ["store"]):  # each description as its words, not its docstring's indentation
        listing = CliRunner().invoke(main, [*group, "--help"]).output.split("Commands:")[1]
        for line in listing.strip("\n").splitlines():
            name, _, text = line.strip().partition("  ") if not line.startswith("   ") else ("", "", line)
            assert "  " not in text.strip(), (group, line)
    run_help = " ".join(CliRunner().invoke(main, ["run", "-h"]).output.split())
    gates = GATES["float32"]
    for name in (*ENTRIES, *CASE_NAMES, *SIZES, *builtin_names(), *builtin_tasks(), *COMPILE_MODES, *gates):
        assert name in run_help, name
    sweep_help = " ".join(CliRunner().invoke(main, ["sweep", "-h"]).output.split())
    for name in (*ENTRIES, *CASE_NAMES, *SIZES, *builtin_names(), *builtin_tasks()):
        assert name in sweep_help, name


def test_verbose_help_says_library_output_shows_when_each_phase_ends() -> None:
    (verbose,) = [p for p in main.commands["run"].params if "--verbose" in p.opts]
    assert "as it comes" not in (verbose.help or "") and "once that phase ends" in (verbose.help or "")


def test_results_table_stays_aligned_past_1000_ms() -> None:
    r = load_receipt(GOLDEN)
    row = r.results[0]
    big = dataclasses.replace(row, summary=dataclasses.replace(row.summary, p50_ns=1_234_567_890_123))
    r = dataclasses.replace(r, results=(big, *r.results[1:]))
    text = results_table(r, width=200)
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("runner"))
    body = lines[head:head + 2 + len(r.results)]
    assert len({len(ln) for ln in body if not set(ln) <= {"─"}}) == 1, body  # right edges line up
    edge = body[0].index("p50 ms") + len("p50 ms")
    assert body[2][:edge].endswith("1234567.890")
    assert all(ln[edge - 1] != " " for ln in body[2:]), body


def test_tables_wrap_to_a_narrow_terminal_and_stay_plain_elsewhere() -> None:
    rows = [("a-very-long-runner-name-" * 3, "invoice", "1.000")]
    narrow = table(["runner", "case", "p50 ms"], rows, right=("p50 ms",), wrap=("runner",), width=40)
    assert all(len(ln) <= 40 for ln in narrow.splitlines()) and len(narrow.splitlines()) > 3
    r = load_receipt(GOLDEN)
    lines = results_table(r, width=50).split("notes:")[0].splitlines()
    p50 = f"p50 ms {r.results[0].summary.p50_ns / 1e6:.3f}"
    assert all(len(ln) <= 50 for ln in lines) and any(p50 in ln for ln in lines)  # as records
    plain = table(["runner", "case", "p50 ms"], rows, right=("p50 ms",), wrap=("runner",))
    assert len(plain.splitlines()) == 3 and "\x1b" not in plain  # header, rule, row: no colour codes
    assert "[bold]" in table(["x"], [("[bold]",)])  # cells are text, never markup


def test_show_side_by_side_and_diff_tables_render(tmp_path: object) -> None:
    r = load_receipt(GOLDEN)
    text = side_by_side([r, r], ["a", "b"])
    assert "[1] p50 ms" in text and "[2] p50 ms" in text
    from benchbox.receipts.diff import DiffOptions, diff_receipts

    out = diff_table(diff_receipts(r, r, DiffOptions(), str(GOLDEN), str(GOLDEN)))
    assert "verdict" in out and "torch-eager" in out


@pytest.mark.parametrize("args", [["show", str(GOLDEN)], ["contracts"], ["contracts", "model_io_wall"],
                                  ["tasks"], ["runners"]])
def test_format_json(args: list[str]) -> None:
    r = CliRunner().invoke(main, [*args, "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    if args[0] == "show":
        assert data["contract"]["name"] and data["results"][0]["p50_ns"] > 0
    elif args == ["contracts"]:
        assert {c["name"] for c in data} >= {"public_task_call_wall", "model_io_wall"}
    elif args[0] == "contracts":
        assert data["stages"] == ["h2d", "compute", "d2h"] and len(data["hash"]) == 64
    elif args[0] == "tasks":
        assert [s["name"] for s in data[0]["sizes"]] == list(SIZES)
    else:
        assert {x["name"] for x in data} == set(ENTRIES) and all("ready" in x for x in data)
