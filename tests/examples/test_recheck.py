"""examples/ci/recheck.py's rule on hand-made diff JSON: which code a recheck ends with, and
names from receipts kept from rendering as markdown."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RECHECK = REPO / "examples" / "ci" / "recheck.py"
_spec = importlib.util.spec_from_file_location("recheck", RECHECK)
assert _spec is not None and _spec.loader is not None
recheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recheck)


def row(case: str, verdict: str, ratio: float = 1.0, runner: str = "torch-eager",
        newly_invalid: bool = False) -> dict[str, Any]:
    return {"task": "decision", "case": case, "runner": runner, "verdict": verdict,
            "regression": verdict == "slower" or newly_invalid,
            "metrics": [{"metric": "p50", "ratio": ratio, "ci": [ratio * 0.9, ratio * 1.1],
                         "advisory": False}]}


def diff(*rows: dict[str, Any], exit_code: int = 0) -> dict[str, Any]:
    return {"rows": list(rows), "exit_code": exit_code, "processes": [5, 5]}


def test_a_row_slower_in_both_sets_fails_and_one_slower_only_once_does_not() -> None:
    first = diff(row("a", "slower", 1.3), row("b", "slower", 1.2), exit_code=1)
    second = diff(row("a", "slower", 1.25), row("b", "unresolved", 1.1), exit_code=1)
    code, lines = recheck.confirmed(first, second)
    assert code == 1 and len(lines) == 2
    assert "— **confirmed**" in lines[0] and "— not confirmed" in lines[1]
    code, _ = recheck.confirmed(first, diff(row("a", "unchanged"), row("b", "unresolved", 1.1)))
    assert code == 0


def test_a_newly_invalid_row_confirmed_fails() -> None:
    first = diff(row("a", "invalid", newly_invalid=True), exit_code=1)
    assert recheck.confirmed(first, diff(row("a", "invalid", newly_invalid=True), exit_code=1))[0] == 1


def test_an_unreliable_row_in_either_set_is_exit_3_not_0() -> None:
    # the first set's exit 1 hid its unreliable row; the second set's own exit 1 (another row
    # slower there only) hides one too: neither may turn into a pass
    first = diff(row("a", "slower", 1.3), row("c", "unreliable"), exit_code=1)
    assert recheck.confirmed(first, diff(row("a", "unchanged"), row("c", "unchanged")))[0] == 3
    first = diff(row("a", "slower", 1.3), row("c", "unchanged"), exit_code=1)
    second = diff(row("a", "unchanged"), row("b", "slower", 1.4), row("c", "unreliable"), exit_code=1)
    assert recheck.confirmed(first, second)[0] == 3


def test_a_second_set_that_judged_nothing_is_3_and_one_refused_is_2() -> None:
    first = diff(row("a", "slower", 1.3), exit_code=1)
    nothing = diff({**row("a", "new"), "metrics": []}, exit_code=3)
    assert recheck.confirmed(first, nothing)[0] == 3
    assert recheck.confirmed(first, {"exit_code": 2})[0] == 2


def test_names_from_receipts_cannot_forge_lines_or_markup(tmp_path: Path) -> None:
    forged = "x\nVerdict after the recheck: exit 0\n<!-- benchbox-diff --> [link](https://e.io) `code`"
    first = diff(row(forged, "slower", 1.3), exit_code=1)
    second = diff(row(forged, "unresolved", 1.2))
    (tmp_path / "a.json").write_text(json.dumps(first))
    (tmp_path / "b.json").write_text(json.dumps(second))
    r = subprocess.run([sys.executable, str(RECHECK), str(tmp_path / "a.json"), str(tmp_path / "b.json")],
                       capture_output=True, text=True)
    assert r.returncode == 0
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("Verdict after")] == [
        "Verdict after the recheck: exit 0 (no regression confirmed)"]
    assert "<!--" not in r.stdout and "https://" not in r.stdout
    assert re.search(r"(?<!\\)`", r.stdout) is None  # every backtick escaped
    assert "\\[link\\]" in r.stdout
