"""benchmarks/probe_tracking.py: whether the process probe tracks a row and whether the side moves it.

Synthetic receipts with known answers: a probe that moves exactly with each process's machine
state correlates 1 with the row and its common slope removes the spread; a probe that HEAD's
processes made 30% slower shows as a ratio of 1.3.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from benchbox.receipts.io import write_receipt
from benchmarks import probe_tracking
from tests.support import synthetic_receipt

KEY = ("torch-eager", "invoice")


def _write(folder, rng, k: int, slow: float, probe_slow: float) -> None:
    folder.mkdir()
    m = rng.normal(0.0, 0.2, k)  # each process's machine state, the same on both sides
    for side, row_x, probe_x in (("base", 1.0, 1.0), ("head", slow, probe_slow)):
        rounds = [1e6 * row_x * math.exp(s) * np.exp(rng.normal(0.0, 0.001, 40)) for s in m]
        probes = [int(8e5 * probe_x * math.exp(s)) for s in m]
        receipt = synthetic_receipt({KEY: rounds}, repeats=k, probes={KEY: probes})
        write_receipt(folder / f"{side}.json", receipt)
    (folder / "diff.json").write_text(json.dumps({"rows": [{"runner": KEY[0], "case": KEY[1],
                                                             "verdict": "slower"}]}))


def test_a_tracking_probe_removes_the_spread_and_a_moved_probe_shows_its_ratio(tmp_path) -> None:
    rng = np.random.default_rng(1)
    _write(tmp_path / "tracks", rng, 5, 1.5, 1.0)
    _write(tmp_path / "moved", rng, 5, 1.5, 1.3)
    rows = {r["pair"].split("/")[0]: r for r in probe_tracking.folder_figures(tmp_path, ["diff.json"])}
    t, m = rows["tracks"], rows["moved"]
    assert t["corr_base"] == pytest.approx(1.0, abs=1e-3) and t["corr_head"] == pytest.approx(1.0, abs=1e-3)
    assert t["sd_raw"] > 0.1 and t["sd_adjusted"] < 0.01
    assert t["probe_ratio"] == pytest.approx(1.0, rel=1e-4)
    assert m["probe_ratio"] == pytest.approx(1.3, rel=1e-4)
    assert t["row_ratio"] == pytest.approx(1.5, rel=1e-2)
    assert m["verdict"] == "slower" and t["k_base"] == t["k_head"] == 5


def test_the_ratio_of_the_probe_is_head_over_base() -> None:
    base = (np.log([1.0, 1.1, 0.9]), np.log([2.0, 2.2, 1.8]))
    head = (np.log([1.5, 1.65, 1.35]), np.log([2.6, 2.86, 2.34]))
    got = probe_tracking.row_figures(base, head)
    assert got["probe_ratio"] == pytest.approx(1.3) and got["row_ratio"] == pytest.approx(1.5)
    assert got["corr_base"] == pytest.approx(1.0) and got["sd_adjusted"] == pytest.approx(0.0, abs=1e-9)
