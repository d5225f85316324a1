"""Smoke tests of benchmarks/receipt_saves.py and benchmarks/receipt_loads.py at small sizes:
the documents they time are what they say, and the replay writes what a run writes."""

from __future__ import annotations

from pathlib import Path

from benchbox.receipts import load_receipt
from benchmarks.receipt_loads import picks_receipt, time_parses
from benchmarks.receipt_saves import replay


def test_the_picks_receipt_holds_its_rows_samples_and_autotune_picks(tmp_path: Path) -> None:
    path = tmp_path / "picks.json"
    picks_receipt(path, rows=3, samples=20, picks=4)
    r = load_receipt(path)
    assert [row.case for row in r.results] == ["case-000", "case-001", "case-002"]
    assert all(len(row.samples_ns) == 20 and row.runner == "torch-compile" for row in r.results)
    assert all([f.op for f in row.fallbacks] == ["op0", "op1", "op2", "op3"] for row in r.results)
    got = time_parses(path.read_bytes(), "picks", 3)
    assert got["parses"] == 3 and 0 < got["min_ms"] <= got["median_ms"]


def test_the_replay_writes_every_row_and_ends_with_the_receipt_a_run_would_write(tmp_path: Path) -> None:
    got = replay(tmp_path, samples=10)  # exits if the file is not encode_receipt of the receipt
    assert got["rows"] == 200 and got["samples_per_row"] == 10
    assert 0 < got["first_write_s"] <= got["all_writes_s"] and got["last_write_s"] <= got["all_writes_s"]
    assert len(load_receipt(tmp_path / "run.json").results) == 200
