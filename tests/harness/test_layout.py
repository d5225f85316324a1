"""The fixed memory layout (``run --layout fixed``): address randomisation off and hash seed 0 in
the measuring process, recorded per process, and a condition when the sides differ in it.

The re-execution is real (Linux, as CI is); nothing is mocked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import benchbox
from benchbox.errors import FieldError
from benchbox.harness import quiet
from benchbox.receipts.diff import DiffOptions, diff_receipts
from tests.support import synthetic_receipt

REPO = Path(__file__).resolve().parents[2]
linux = pytest.mark.skipif(not sys.platform.startswith("linux"),
                           reason="address randomisation is switched on Linux")


def _run(tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHASHSEED", quiet.REEXEC_VARIABLE)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-m", "benchbox", "run", "--runner", "torch-eager", "--case",
                        "invoice", "--samples", "3", "--warmup", "0", "--quiet", "--out", str(out), *extra],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(out.read_text())


@linux
def test_run_layout_fixed_starts_itself_again_without_randomisation(tmp_path: Path) -> None:
    doc = _run(tmp_path, "--layout", "fixed")
    q = doc["processes"][0]["quieting"]
    assert q["aslr"] is False and q["hash_seed"] == "0" and q["layout"] == "fixed"
    assert doc["settings"]["layout"] == "fixed"
    # the command recorded is the one given, not a rewritten one
    assert doc["command"][-2:] == ["--layout", "fixed"]


@linux
def test_a_default_run_records_the_random_layout(tmp_path: Path) -> None:
    doc = _run(tmp_path)
    q = doc["processes"][0]["quieting"]
    assert q["layout"] == "random" and q["aslr"] is True and "layout" not in doc["settings"]


def test_a_program_asking_for_the_fixed_layout_in_a_random_process_is_refused(tmp_path: Path) -> None:
    if quiet.layout_in_effect() == "fixed":
        pytest.skip("this test process already runs with the fixed layout")
    with pytest.raises(FieldError) as e:
        benchbox.run(runners=("torch-eager",), cases=("invoice",), samples=3, layout="fixed",
                     out=tmp_path / "x.json")
    assert e.value.field == "layout" and "\n" not in str(e.value)
    assert not (tmp_path / "x.json").exists()


def test_an_unknown_layout_is_a_field_error() -> None:
    with pytest.raises(FieldError) as e:
        benchbox.run(runners=("torch-eager",), cases=("invoice",), samples=3, layout="tidy")
    assert e.value.field == "layout"


def _sides(layout_base: str, layout_head: str, scale: float) -> tuple:
    rng = np.random.default_rng(3)
    key = ("torch-eager", "invoice")

    def rounds(s: float) -> list:
        return [list((2e6 * s * rng.lognormal(0, 0.02, 200)).astype(int)) for _ in range(5)]

    def procs(layout: str) -> list[dict]:
        return [{"load": {"busy_fraction": 0.1}, "quieting": {"layout": layout}} for _ in range(5)]

    return (synthetic_receipt({key: rounds(1.0)}, repeats=5, processes=procs(layout_base)),
            synthetic_receipt({key: rounds(scale)}, repeats=5, processes=procs(layout_head)))


def test_sides_of_different_layouts_are_unreliable_unless_accepted() -> None:
    base, head = _sides("random", "fixed", 1.5)
    d = diff_receipts(base, head)
    assert d.rows[0].verdict == "unreliable" and d.exit_code == 3
    assert any("layout random → fixed" in n for n in d.notes)
    assert diff_receipts(base, head, DiffOptions(accept=frozenset({"layout"}))).rows[0].verdict == "slower"


def test_random_layouts_on_both_sides_are_judged() -> None:
    assert diff_receipts(*_sides("random", "random", 1.5)).rows[0].verdict == "slower"
    assert diff_receipts(*_sides("random", "random", 1.0)).rows[0].verdict in ("unchanged", "unresolved")


def test_fixed_layouts_on_both_sides_are_a_condition_an_interval_does_not_cover() -> None:
    """One layout a side: the offset between two layouts is not in the spread of either side."""
    d = diff_receipts(*_sides("fixed", "fixed", 1.5))
    assert d.rows[0].verdict == "unreliable" and d.exit_code == 3
    assert any("both sides ran with the fixed layout" in n for n in d.notes)
    accepted = diff_receipts(*_sides("fixed", "fixed", 1.5), DiffOptions(accept=frozenset({"layout"})))
    assert accepted.rows[0].verdict == "slower"
