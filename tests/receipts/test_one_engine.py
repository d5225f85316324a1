"""One engine, one vocabulary: diff, the diff figure and show give the same receipts the same verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from benchbox.cli import main
from benchbox.receipts import load_receipt
from benchbox.receipts.diff import VERDICTS
from tests.support import synthetic_receipt


def _write(tmp: Path, name: str, receipt) -> Path:
    p = tmp / name
    p.write_text(json.dumps(receipt.to_json()))
    return p


def test_diff_plot_and_show_agree_on_every_verdict(tmp_path: Path) -> None:
    from benchbox.plots import figure, label_receipts

    rng = np.random.default_rng(21)

    def x(scale: float = 1.0) -> list[np.ndarray]:  # five processes, 2% apart
        return [1e6 * scale * np.exp(rng.normal(0, 0.02) + rng.normal(0, 0.05, 400)) for _ in range(5)]

    base = synthetic_receipt({("torch-eager", "same"): x(), ("torch-eager", "slow"): x(),
                              ("torch-eager", "fast"): x(), ("torch-eager", "other"): x(),
                              ("torch-eager", "gone"): x()}, repeats=5)
    head = synthetic_receipt({("torch-eager", "same"): x(), ("torch-eager", "slow"): x(1.6),
                              ("torch-eager", "fast"): x(0.6), ("torch-eager", "other"): x(),
                              ("torch-eager", "added"): x()}, repeats=5)
    pb = _write(tmp_path, "base.json", base)
    doc = head.to_json()  # the runner's library changed on one row: a condition, never a verdict
    next(r for r in doc["results"] if r["case"] == "other")["runner_report"]["versions"] = {"torch": "2.99"}
    ph = tmp_path / "head.json"
    ph.write_text(json.dumps(doc))

    r = CliRunner().invoke(main, ["diff", str(pb), str(ph), "--format", "json"])
    diff = {row["case"]: row["verdict"] for row in json.loads(r.output)["rows"]}
    assert r.exit_code == 1
    assert diff == {"same": "unchanged", "slow": "slower", "fast": "faster", "other": "unreliable",
                    "gone": "removed", "added": "new"}

    fig = figure(label_receipts([pb, ph], [load_receipt(pb), load_receipt(ph)]), "diff", 0.05)
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    plotted = {}
    case = None
    for t in ticks:
        if "[" not in t:
            case = t
        else:
            plotted[case] = t.split("[", 1)[1].rstrip("]")
    assert plotted == diff

    r = CliRunner().invoke(main, ["show", str(pb), str(ph)])
    assert r.exit_code == 0, r.output
    shown = {line.split()[2]: line.split()[-1] for line in r.output.splitlines()
             if line.startswith("decision ")}
    shown = {k: {"comparable": "not comparable"}.get(v, v) for k, v in shown.items()}
    assert shown == diff
    assert set(diff.values()) <= set(VERDICTS)


def _stale_comparison(tmp_path: Path, seed: int) -> Path:
    """A receipt (eager twice as slow as compile) whose stored comparison has an older word."""
    rng = np.random.default_rng(seed)
    r = synthetic_receipt({("torch-compile", "invoice"): [1e6 * np.exp(rng.normal(0, 0.05, 400))],
                           ("torch-eager", "invoice"): [2e6 * np.exp(rng.normal(0, 0.05, 400))]})
    doc = r.to_json()
    doc["settings"]["baseline"] = "torch-compile"
    doc["comparisons"] = {"baseline": "torch-compile", "rows": [
        {"case": "invoice", "runner": "torch-eager", "p50_ratio": 2.0, "p50_verdict": "indistinguishable"}]}
    p = tmp_path / "one.json"
    p.write_text(json.dumps(doc))
    return p


def test_show_of_one_receipt_uses_the_engine_words(tmp_path: Path) -> None:
    p = _stale_comparison(tmp_path, 22)
    out = CliRunner().invoke(main, ["show", str(p)]).output
    line = next(x for x in out.splitlines() if x.strip().startswith("torch-eager") and "invoice" in x
                and "×" not in x and "ratio" not in x and "valid" not in x)
    assert line.split()[-1] == "slower" and "indistinguishable" not in out


def test_show_json_carries_the_runner_comparisons_judged_by_the_engine(tmp_path: Path) -> None:
    p = _stale_comparison(tmp_path, 23)
    shown = json.loads(CliRunner().invoke(main, ["show", str(p), "--format", "json"]).output)
    comp = shown["comparisons"]
    assert comp["baseline"] == "torch-compile"
    [row] = comp["rows"]
    assert row["runner"] == "torch-eager" and row["p50_verdict"] == "slower"
    assert 1.8 < row["p50_ratio"] < 2.2
