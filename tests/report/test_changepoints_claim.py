"""The README's change-point figures are the committed results', and the results are today's code's.

benchmarks/changepoints.py writes benchmarks/results-changepoints.json and the README paragraph
between its markers; here the paragraph is checked against the results, and the first seeded
history is rerun and must give exactly the committed record (the counts are seeded).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.changepoints import BEGIN, RESULTS, check_readme, one

README = Path(__file__).resolve().parents[2] / "README.md"
pytest.importorskip("otava", reason="apache-otava is not installed (pip install --no-deps apache-otava)")


def test_the_readme_paragraph_is_the_committed_results() -> None:
    assert check_readme(README, RESULTS) is None


def test_a_changed_figure_in_the_readme_is_caught(tmp_path: Path) -> None:
    text = README.read_text()
    head, rest = text.split(BEGIN, 1)
    changed = tmp_path / "README.md"
    changed.write_text(head + BEGIN + rest.replace(" of 100", " of 99", 1))
    problem = check_readme(changed, RESULTS)
    assert problem is not None and "disagrees" in problem


def test_the_first_history_reruns_to_the_committed_record(tmp_path: Path) -> None:
    committed = json.loads(RESULTS.read_text())["runs"][0]
    step_at = int(np.random.default_rng(12345).integers(5, 46))  # the benchmark's first draw
    fresh = json.loads(json.dumps(one(0, step_at, tmp_path)))  # tuples as JSON writes them
    for side in ("flat", "step"):
        del fresh[side]["add_s"], fresh[side]["report_s"]
    assert fresh == committed
