"""`benchbox run` end to end through the CLI, as the README runs it (both runners, max-autotune)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchbox.contracts import STAGES


def _run(out: Path, *contracts: str, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    args = [a for c in contracts for a in ("--contract", c)]
    r = subprocess.run([sys.executable, "-m", "benchbox", "run", *args, *extra, "--out", str(out)],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-2000:]
    return r


@pytest.fixture(scope="module")
def receipts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The README's default run, and one run of both contracts (runners prepared once).

    Comparing the two contracts inside one process keeps process-to-process variation
    (tens of percent for a millisecond-scale model on a small VM) out of the comparison. The two
    host-clock contracts read their regions from the stamps of the same calls, so model_io_wall's
    region is inside public_task_call_wall's in every sample: 30 samples show it as 400 do.
    """
    tmp = tmp_path_factory.mktemp("cli")
    r = _run(tmp / "default.json", "public_task_call_wall")
    assert "receipt written to" in r.stdout and "public_task_call_wall" in r.stdout
    _run(tmp / "both.json", "public_task_call_wall", "model_io_wall", extra=("--samples", "30"))
    return {"default": json.loads((tmp / "default.json").read_text()),
            **{c: json.loads((tmp / f"both.{c}.json").read_text())
               for c in ("public_task_call_wall", "model_io_wall")}}


def test_default_run_writes_a_complete_receipt(receipts: dict[str, dict]) -> None:
    r = receipts["default"]
    assert isinstance(r["schema_version"], int) and r["complete"] is True
    c = r["contract"]
    assert (c["name"], c["first"], c["last"]) == ("public_task_call_wall", "parse", "serialize")
    assert re.fullmatch(r"[0-9a-f]{64}", c["hash"])
    rows = {(x["runner"], x["case"]): x for x in r["results"]}
    cases = {x["case"] for x in r["results"]}
    assert {x["runner"] for x in r["results"]} == {"torch-eager", "torch-compile"}
    assert len(cases) >= 3 and len(rows) == 2 * len(cases)
    for row in rows.values():
        assert row["status"] == "valid", row["reasons"]
        assert len(row["samples_ns"]) >= 30
        assert set(row["stages_ns"]) == set(STAGES)
        assert all(len(v) == len(row["samples_ns"]) for v in row["stages_ns"].values())
        assert row["summary"]["p50_ns"] > 0 and row["summary"]["p99_ns"] >= row["summary"]["p50_ns"]
        # the region is the whole call: it equals the sum of its stages up to the stamps' cost
        total = [sum(v[i] for v in row["stages_ns"].values()) for i in range(len(row["samples_ns"]))]
        assert total == row["samples_ns"]
        assert row["accuracy"]["passed"] is True
    assert r["task"]["cases"][0]["request_sha256"] and r["task"]["model_sha256"]
    assert rows["torch-compile", "invoice"]["runner_report"]["options"]["mode"] == "max-autotune"


def test_model_io_wall_is_smaller_and_hashed_differently(receipts: dict[str, dict]) -> None:
    pub, io = receipts["public_task_call_wall"], receipts["model_io_wall"]
    assert pub["contract"]["hash"] != io["contract"]["hash"]
    p = {(x["runner"], x["case"]): x["summary"]["p50_ns"] for x in pub["results"]}
    q = {(x["runner"], x["case"]): x["summary"]["p50_ns"] for x in io["results"]}
    assert p.keys() == q.keys()
    for key in p:
        assert q[key] < p[key], key


def test_show_prints_the_table(receipts: dict[str, dict], tmp_path: Path) -> None:
    f = tmp_path / "r.json"
    f.write_text(json.dumps(receipts["model_io_wall"]))
    r = subprocess.run([sys.executable, "-m", "benchbox", "show", str(f)], capture_output=True, text=True)
    assert r.returncode == 0
    assert "model_io_wall" in r.stdout and "torch-compile" in r.stdout and "invoice" in r.stdout


def test_show_refuses_a_broken_receipt_with_one_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text('{"schema_version": 1, "results": [')
    r = subprocess.run([sys.executable, "-m", "benchbox", "show", str(f)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
