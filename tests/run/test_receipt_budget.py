"""What `run` accepts it can write, and what it writes `show` and `diff` can read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchbox.contracts import STAGES
from benchbox.errors import UsageError
from benchbox.receipts import io
from tests.support import GOLDEN, one_line_exit_2


@pytest.mark.parametrize("factory, needle", [("int_case", "case name"), ("dup_cases", "'alpha' twice"),
                                             ("int_name", "task name")])
def test_bad_task_metadata_is_refused_at_run_before_measuring(factory: str, needle: str,
                                                              tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    line = one_line_exit_2(["run", "--task", f"tests.evil_tasks:{factory}", "--runner", "torch-eager",
                            "--samples", "3", "--warmup", "1", "--out", str(out)])
    assert needle in line, line
    assert not out.exists()  # refused before a receipt was opened


def test_a_run_whose_receipt_could_exceed_the_read_limit_is_refused_before_measuring(tmp_path: Path) -> None:
    """200 rows × 10,000 samples: a receipt of up to ~360 MB, over the 256 MiB that loads."""
    out = tmp_path / "r.json"
    line = one_line_exit_2(["run", "--task", "tests.evil_tasks:many", "--task-option", "n=200",
                            "--runner", "torch-eager", "--samples", "10000", "--out", str(out)])
    assert "read limit" in line and "--samples" in line, line
    assert not out.exists()


def _largest_receipt(rows: int, samples: int) -> dict:
    """A receipt of ``rows`` rows of ``samples`` samples, every number the widest a sample can be."""
    doc = json.loads(GOLDEN.read_text())
    template = doc["results"][0]
    wide = [2**63 - 1] * samples
    top = wide[0]  # the summary agrees with the samples (the loader checks), as wide as they are
    summary = {**template["summary"], "n": samples, "min_ns": top, "max_ns": top, "mean_ns": top,
               "p50_ns": top, "p90_ns": top, "p99_ns": top}
    row = {**template, "samples_ns": wide, "round_sizes": [samples],
           "stages_ns": {s: wide for s in STAGES}, "summary": summary}
    doc["results"] = [{**row, "case": f"c{i}"} for i in range(rows)]
    return doc


def test_the_largest_receipt_a_run_may_write_is_readable_small_limit_mocked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The read limit scaled down to 3 MiB (a receipt at the real limit takes gigabytes to build
    here): the largest sample count the run admits writes a receipt that loads; one more is refused."""
    monkeypatch.setattr(io, "MAX_RECEIPT_BYTES", 3 * 1024**2)
    rows = 4
    n = io.max_samples_per_row(rows)
    assert n > 1000
    blob = io.encode_receipt(_largest_receipt(rows, n))
    assert len(blob) <= io.MAX_RECEIPT_BYTES
    assert len(io.parse_receipt(blob, "largest").results) == rows
    io.check_receipt_budget(rows, n)
    with pytest.raises(UsageError, match="read limit"):
        io.check_receipt_budget(rows, n + 1)
