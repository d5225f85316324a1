"""A run under paced arrivals: the arrival in the contract's identity, queue in the receipt, diff refusal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchbox.contracts import QUEUE, load_contract
from benchbox.receipts import load_receipt
from benchbox.receipts.diff import ComparisonRefused
from benchbox.receipts.diff import diff_receipts as diff
from benchbox.run import RunConfig, run
from tests.harness.test_accounting import LightTask
from tests.support import one_line_exit_2


def _run(tmp_path: Path, name: str, **kw: object) -> Path:
    cfg = RunConfig(contracts=("public_task_call_poisson", "model_io_wall"), runners=("torch-eager",),
                    samples=40, warmup=2, out=tmp_path / f"{name}.json", **kw)  # type: ignore[arg-type]
    return run(cfg, task=LightTask()).path


def test_a_rate_given_at_run_time_is_recorded_with_its_queue(tmp_path: Path) -> None:
    path = _run(tmp_path, "r200", rate_per_s=200.0)
    r = load_receipt(path)
    c = r.contract
    assert c.arrival is not None and (c.arrival.kind, c.arrival.rate_per_s) == ("poisson", 200.0)
    assert c.arrival.set_at_run == ("rate_per_s",)
    assert c.hash == load_contract("public_task_call_poisson").with_arrival(rate_per_s=200.0).hash
    assert c.hash != load_contract("public_task_call_poisson").hash
    assert c.stages[0] == QUEUE
    row = r.results[0]
    assert row.load is not None and row.load.offered_per_s == 200.0 and row.load.samples == 40
    assert row.load.schedule_per_s == pytest.approx(200.0, rel=1e-6)  # the schedule's own rate, stored
    assert len(row.stages_ns[QUEUE]) == len(row.samples_ns) == 40
    for k, v in enumerate(row.samples_ns):  # the region is queue + the pipeline, sample by sample
        assert v == sum(row.stages_ns[s][k] for s in c.stages)
    bound = r.settings.overload_bound
    assert bound is not None and (bound.max_backlog, bound.max_queue_ms) == (200, 1000.0)
    # the other contract of the run shares the calls (same arrival) and times model I/O only
    io = load_receipt(path.with_name("r200.model_io_wall.json"))
    assert io.contract.arrival.kind == "poisson" and io.results[0].stages_ns[QUEUE] == row.stages_ns[QUEUE]
    assert io.results[0].samples_ns != row.samples_ns


def test_diff_refuses_receipts_under_different_arrivals(tmp_path: Path) -> None:
    a = load_receipt(_run(tmp_path, "a", gap_ms=0.5))
    b = load_receipt(_run(tmp_path, "b", gap_ms=0.5, idle="busy"))
    with pytest.raises(ComparisonRefused, match="arrival"):
        diff(a, b)
    assert diff(a, a) is not None


def test_an_open_loop_contract_without_a_rate_is_refused_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    line = one_line_exit_2(["run", "--contract", "public_task_call_poisson", "--out", str(out)])
    assert "--rate" in line and not out.exists()
    for args in (["--gap", "1", "--rate", "2"], ["--gap", "soon"], ["--rate", "-3"], ["--rate", "fast"],
                 ["--max-backlog", "0", "--rate", "5"], ["--idle", "busy"]):
        one_line_exit_2(["run", *args, "--out", str(out)])
    assert not out.exists()


def test_old_receipts_without_arrivals_load_as_back_to_back(tmp_path: Path) -> None:
    from tests.support import GOLDEN_V1

    r = load_receipt(GOLDEN_V1)
    assert r.contract.arrival is None and r.contract.arrival_kind == "back_to_back"
    doc = json.loads(GOLDEN_V1.read_text())
    assert "arrival" not in json.dumps(doc["contract"])


def test_stage_figure_and_export_attribute_the_queue(tmp_path: Path) -> None:
    from benchbox.plots import label_receipts
    from benchbox.plots._common import rows_of, stage_order
    from benchbox.receipts.export import export_receipt

    path = _run(tmp_path, "q", rate_per_s=300.0)
    r = load_receipt(path)
    assert stage_order(rows_of(label_receipts([path], [r])))[0] == QUEUE
    pytest.importorskip("polars")
    csv = export_receipt(r, "csv", tmp_path / "q.csv").read_text().splitlines()
    head = csv[0].split(",")
    assert head[head.index("region_ns") + 1] == "queue_ns"
    first = dict(zip(head, csv[1].split(",")))
    assert int(first["queue_ns"]) == r.results[0].stages_ns[QUEUE][0]


def test_the_diff_names_queue_as_the_stage_that_moved(tmp_path: Path) -> None:
    """A head whose requests waited 3 ms longer each (same calls, same contract): the diff's stage
    explanation names ``queue``. The head is the base receipt with that wait added, since a real
    run cannot move the queue alone."""
    import dataclasses

    base = load_receipt(_run(tmp_path, "q", rate_per_s=200.0))
    wait = 3_000_000

    def waited(row: object) -> object:
        stages = dict(row.stages_ns)  # type: ignore[attr-defined]
        stages[QUEUE] = tuple(q + wait for q in stages[QUEUE])
        return dataclasses.replace(row, stages_ns=stages,
                                   samples_ns=tuple(v + wait for v in row.samples_ns))  # type: ignore

    pub = next(i for i, r in enumerate(base.results) if r.runner == "torch-eager")
    head = dataclasses.replace(base, results=tuple(waited(r) if i == pub else r
                                                   for i, r in enumerate(base.results)))
    from benchbox.receipts.diff import DiffOptions

    # Poisson waits spread the region (a queue of 0 to a few calls): a noisy or unsettled row is
    # accepted, and so is a busy machine at the run's start (both sides are the one run)
    opts = DiffOptions(accept=frozenset({"noisy", "unsettled", "load", "machine"}))
    row = next(r for r in diff(base, head, opts).rows if r.runner == "torch-eager")
    assert row.verdict == "slower", row
    assert row.explanation[0][0] == QUEUE and 2.5e6 < row.explanation[0][1] < 3.5e6
    assert row.explain().startswith("queue +")
