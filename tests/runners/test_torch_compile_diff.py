"""Two torch-compile runs of identical code on the CPU diff as comparable.

Each run compiles afresh under max-autotune into its own cache directory (pin off), so the
autotuner measures its candidates anew: the fallback entries carry other kernel timings
every time. The diff must compare the rows anyway (a changed pick is a probable cause,
never a refusal), and the cache location is not a declared difference.
"""

from __future__ import annotations

from pathlib import Path

from benchbox.receipts.diff import DiffOptions, diff_receipts
from benchbox.receipts.io import load_receipt
from benchbox.run import RunConfig, run

MATMUL = "tests.compile_tasks:matmul_factory"


def _run(tmp: Path, name: str) -> Path:
    cfg = RunConfig(task=MATMUL, cases=("v0",), runners=("torch-compile",), samples=30, warmup=1,
                    runner_options={"torch-compile": {"cold_warm": False, "pin": False,
                                                      "cache_dir": str(tmp / f"cache-{name}")}},
                    out=tmp / f"{name}.json")
    return run(cfg).path


def test_two_compiled_runs_of_identical_code_are_comparable(tmp_path: Path) -> None:
    a, b = _run(tmp_path, "a"), _run(tmp_path, "b")
    opts = DiffOptions(accept=frozenset({"noisy", "unsettled", "load", "machine"}))
    d = diff_receipts(load_receipt(a), load_receipt(b), opts, str(a), str(b))
    assert d.rows
    for row in d.rows:
        assert row.verdict not in ("not comparable", "invalid"), row.reason
        assert "fallback" not in row.reason and "options" not in row.reason
    # 30 samples a process: the fewest a p50 verdict needs, so the rows are judged (0 or 1), not
    # all advisory (3)
    assert d.exit_code in (0, 1)  # the verdict is a statistical one; no refusal
