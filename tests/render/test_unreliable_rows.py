"""Unreliable rows keep their numbers (shown, not judged), and a condition of the whole receipts
(the load at start, another CPU) is stated once, not under every row."""

from __future__ import annotations

import numpy as np

from benchbox.receipts.diff import diff_receipts
from benchbox.render import diff_markdown
from benchbox.render.diff import diff_table
from tests.support import synthetic_receipt

CASES = ("invoice", "outage", "video")
BUSY = {"busy_fraction": 0.9, "per_core": [0.9, 0.9]}


def _busy_diff(own_flag: bool = False):  # noqa: ANN202
    rng = np.random.default_rng(3)

    def rounds(mu: float) -> list:
        return [rng.lognormal(np.log(mu), 0.02, 80) for _ in range(5)]

    base = synthetic_receipt({("torch-eager", c): rounds(1e6) for c in CASES}, repeats=5,
                             environment={"load": BUSY})
    head = synthetic_receipt({("torch-eager", c): rounds(1.1e6) for c in CASES}, repeats=5,
                             environment={"load": BUSY})
    return diff_receipts(base, head)


def test_a_busy_machine_makes_every_row_unreliable_with_its_numbers_kept() -> None:
    d = _busy_diff()
    assert {r.verdict for r in d.rows} == {"unreliable"} and d.exit_code == 3
    for r in d.rows:
        m = r.metrics[0]
        assert m.ratio is not None and 1.05 < m.ratio < 1.15 and m.ci is not None
    md = diff_markdown(d)
    rows = [line for line in md.splitlines() if line.startswith("| torch-eager")]
    assert len(rows) == 3
    for line in rows:
        cells = line.split(" | ")
        assert cells[3].startswith("*p50 ") and cells[4].startswith("*×1.")  # greyed (italic), not "-"


def test_the_whole_receipts_condition_is_stated_once() -> None:
    d = _busy_diff()
    assert sum("load differs" in n for n in d.notes) == 1
    assert sum("accept=load" in n for n in d.notes) == 1
    assert all(r.reason == "load (see the notes)" for r in d.rows)
    table = diff_table(d, width=200)
    assert table.count("load differs") == 1 and table.count("accept=load") == 1
    assert table.count("load (see the notes)") == 1  # one details line naming the three rows
    assert "3 rows (torch-eager × invoice, torch-eager × outage, torch-eager × video)" in table
    md = diff_markdown(d)
    assert md.count("load differs") == 1 and md.count("accept=load") == 1
