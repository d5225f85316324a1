"""Smoke test of benchmarks/diff_speed.py: its synthetic receipts load, and the diff judges them."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchbox.receipts import load_receipt
from benchmarks.diff_speed import main


def test_the_synthetic_receipts_load_and_the_slowed_rows_are_found(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    main(["--rows", "8", "--samples", "60", "--keep", str(tmp_path)])
    out = capsys.readouterr().out
    assert "receipts: 8 rows × 60 samples each" in out and "load both:" in out
    assert "write one loaded receipt again:" in out
    assert (tmp_path / "base-again.json").read_bytes() == (tmp_path / "base.json").read_bytes()
    base, head = (load_receipt(tmp_path / f"{side}.json") for side in ("base", "head"))
    assert len(base.results) == len(head.results) == 8
    assert all(len(r.samples_ns) == 60 for r in base.results)
    # head's first row has its serialize stage slowed by half
    b, h = (sorted(r.stages_ns["serialize"]) for r in (base.results[0], head.results[0]))
    assert h[30] > 1.3 * b[30]
