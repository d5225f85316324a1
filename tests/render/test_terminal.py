"""Terminal output: nothing from a receipt, contract or task reaches the terminal as a control."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from benchbox import stats
from benchbox.cli import main
from benchbox.render.common import terminal
from tests.evil_tasks import ESCAPES
from tests.support import GOLDEN

#: what must never be printed: C0 but newline, DEL, C1 (ESC, CSI, OSC and BEL among them)
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def _evil_receipt(tmp: Path, name: str, slower: float = 1.0, marker: str = ESCAPES) -> Path:
    doc = json.loads(GOLDEN.read_text())
    doc["environment"]["device"] = "cpu" + marker
    doc["environment"].pop("gpu", None)
    doc["task"]["name"] = "decision" + marker
    for row in doc["results"]:
        row["runner"] += marker
        row["case"] += marker
        row["reasons"] = ["why" + marker + ("\nsecond line" if marker else " second line")]
        row["samples_ns"] = [int(v * slower) for v in row["samples_ns"]]
        row["summary"] = stats.summarize(row["samples_ns"])  # the loader checks it agrees
    doc.pop("comparisons", None)
    path = tmp / name
    path.write_text(json.dumps(doc))
    return path


def test_show_and_diff_print_no_escape_sequences(tmp_path: Path) -> None:
    a = _evil_receipt(tmp_path, "a.json")
    b = _evil_receipt(tmp_path, "b.json", slower=2.0)
    plain_lines = _invoke("show", str(_evil_receipt(tmp_path, "p.json", marker="")))[1].count("\n")
    for args in (("show", str(a)), ("show", str(a), str(b)), ("diff", str(a), str(b))):
        code, out, err = _invoke(*args)
        assert code in (0, 1), (args, out, err)
        assert not CONTROL.search(out + err), (args, out)
        assert "\\x1b]52" in out  # shown, not executed
    # a name with a newline cannot start a line of its own: the break is shown as an escape
    # (the tables may wrap a long cell inside its column, so line counts are not compared)
    shown = _invoke("show", str(a))[1]
    assert "\\x0asecond line" in shown
    assert not any(line.lstrip().startswith("second line") for line in shown.splitlines())
    assert plain_lines > 0


def test_a_contract_description_prints_no_escape_sequences(tmp_path: Path) -> None:
    toml = tmp_path / "c.toml"
    desc = json.dumps("clears" + ESCAPES)
    toml.write_text(f'name = "c"\nversion = 1\ndescription = {desc}\nstages = ["compute"]\n'
                    'clock = "host"\n')
    code, out, err = _invoke("contracts", str(toml))
    assert code == 0, err
    assert not CONTROL.search(out + err) and "clears\\x1b" in out


def test_task_names_print_no_escape_sequences(tmp_path: Path) -> None:
    code, out, err = _invoke("tasks", "--task", "tests.evil_tasks:evil")
    assert code == 0, err
    assert not CONTROL.search(out + err) and "alpha\\x1b" in out
    code, out, err = _invoke("run", "--task", "tests.evil_tasks:evil", "--runner", "torch-eager",
                             "--samples", "3", "--warmup", "1", "--out", str(tmp_path / "r.json"))
    assert code == 0, err
    assert not CONTROL.search(out + err), (out, err)
    assert "alpha\\x1b]52" in out


def test_terminal_escapes_every_control_character() -> None:
    raw = "".join(chr(i) for i in [*range(0x20), 0x7f, *range(0x80, 0xa0), 0x2028, 0x202e, 0x2066])
    out = terminal("a" + raw + "b")
    assert out.startswith("a") and out.endswith("b")
    assert re.fullmatch(r"a(\\x[0-9a-f]{2}|\\u[0-9a-f]{4})+b", out), out


#: raw characters JSON output must never carry: C0, DEL, C1, line separators, bidi controls
RAW_IN_JSON = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
BIDI = "\u202e\u2066"


def _parsed_json(*args: str, codes: tuple[int, ...] = (0,)) -> object:
    code, out, err = _invoke(*args)
    assert code in codes, (args, out, err)
    assert not RAW_IN_JSON.search(out), (args, out)
    return json.loads(out)  # parses: no terminal escaping (``\x9b``) was applied to it


def test_json_output_escapes_controls_and_always_parses(tmp_path: Path) -> None:
    marker = ESCAPES + BIDI
    a = _evil_receipt(tmp_path, "a.json", marker=marker)
    b = _evil_receipt(tmp_path, "b.json", slower=2.0, marker=marker)
    shown = _parsed_json("show", str(a), "--format", "json")
    assert shown["task"]["name"] == "decision" + marker  # the value survives, escaped as \uXXXX
    assert len(_parsed_json("show", str(a), str(b), "--format", "json")) == 2
    diffed = _parsed_json("diff", str(a), str(b), "--format", "json", codes=(0, 1, 3))
    assert any(row["case"].endswith(marker) for row in diffed["rows"])
    toml = tmp_path / "c.toml"
    toml.write_text(f'name = "c"\nversion = 1\ndescription = {json.dumps("d" + marker)}\n'
                    'stages = ["compute"]\nclock = "host"\n')
    assert _parsed_json("contracts", str(toml), "--format", "json")["description"] == "d" + marker
    assert _parsed_json("contracts", "--format", "json")
    tasks = _parsed_json("tasks", "--task", "tests.evil_tasks:evil", "--format", "json")
    assert tasks[0]["cases"] == ["alpha" + ESCAPES]
    assert _parsed_json("runners", "--device", "cuda" + marker, "--format", "json")
