"""Smoke test of benchmarks/diff_speed.py: its synthetic receipts load, and the diff judges them."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchbox.receipts import load_receipt
from benchmarks.diff_speed import main


def test_the_synthetic_receipts_load_and_the_slowed_rows_are_found(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    main(["--rows", "8", "--samples", "500", "--keep", str(tmp_path)])
    out = capsys.readouterr().out
    assert "receipts: 8 rows × 500 samples each" in out and "load both:" in out
    assert "write one loaded receipt again:" in out
    # five processes a side: the diff judges every row, and finds the one slowed row
    assert "5 processes a side" in out and "'slower': 1," in out and "exit code 1" in out
    assert "unresolved" not in out
    assert (tmp_path / "base-again.json").read_bytes() == (tmp_path / "base.json").read_bytes()
    base, head = (load_receipt(tmp_path / f"{side}.json") for side in ("base", "head"))
    assert len(base.results) == len(head.results) == 8
    assert all(len(r.samples_ns) == 500 and r.round_process == (0, 1, 2, 3, 4) for r in base.results)
    # head's first row has its serialize stage slowed by half
    b, h = (sorted(r.stages_ns["serialize"]) for r in (base.results[0], head.results[0]))
    assert h[250] > 1.3 * b[250]
