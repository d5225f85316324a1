"""benchbox combine: runs of one configuration become the rounds of one receipt."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox.cli import main
from benchbox.contracts import load_contract
from benchbox.errors import UsageError
from benchbox.receipts import load_receipt
from benchbox.receipts.combine import combine
from benchbox.receipts.model import ContractRecord, ResultRow
from benchbox.run import RunConfig, run


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("runs")
    out = []
    for i in range(2):
        o = run(RunConfig(runners=("torch-eager",), cases=("invoice", "outage"), samples=40, warmup=1,
                          out=d / f"r{i}.json"))
        out.append(o.path)
    return out


def test_rows_keep_every_run_as_a_round_in_input_order(two_runs: list[Path]) -> None:
    a, b = (load_receipt(p) for p in two_runs)
    joined = combine([a, b], ["a", "b"])
    assert [r.key for r in joined.results] == [r.key for r in a.results]
    for row, ra, rb in zip(joined.results, a.results, b.results):
        assert row.samples_ns == ra.samples_ns + rb.samples_ns
        assert row.round_sizes == ra.round_sizes + rb.round_sizes
        assert row.round_process == (0,) * len(ra.round_sizes) + (1,) * len(rb.round_sizes)
        assert row.summary.n == len(ra.samples_ns) + len(rb.samples_ns)
        assert row.stages_ns["compute"] == ra.stages_ns["compute"] + rb.stages_ns["compute"]
    assert [c["receipt"] for c in joined.settings["combined_from"]] == ["a", "b"]
    assert [p.source for p in joined.processes] == ["a", "b"]
    assert [p.pid for p in joined.processes] == [a.processes[0].pid, b.processes[0].pid]
    assert all(p.control and p.control["p50_ns"] > 0 for p in joined.processes)


def test_an_invalid_round_makes_the_row_invalid_with_the_round_named(two_runs: list[Path]) -> None:
    a, b = (load_receipt(p) for p in two_runs)
    bad = replace(b.results[1], status="failed", reasons=("boom",))
    b = replace(b, results=(b.results[0], bad))
    joined = combine([a, b], ["a", "b"])
    assert joined.results[0].status == "valid"
    assert joined.results[1].status == "failed" and joined.results[1].reasons == ("round 2 of 2: boom",)


def test_a_joined_rows_flags_are_its_joined_caveats_as_a_receipt_of_them_loads(two_runs: list[Path]) -> None:
    a, b = (load_receipt(p) for p in two_runs)
    noisy = replace(b.results[1], status="invalid", reasons=("noise: 5 of 40 samples are Tukey outliers",),
                    flags=("noisy",))
    joined = combine([a, replace(b, results=(b.results[0], noisy))], ["a", "b"])
    assert joined.results[1].flags == ()  # its reasons are the round's, under the round's name
    loaded = [ResultRow.of(r.to_json()) for r in joined.results]
    assert [r.flags for r in loaded] == [r.flags for r in joined.results]


def test_runs_of_another_machine_or_contract_are_refused(two_runs: list[Path]) -> None:
    a, b = (load_receipt(p) for p in two_runs)
    other_cpu = replace(b, environment={**b.environment, "cpu": "Some Other CPU", "cpu_count": 64})
    with pytest.raises(UsageError, match="machine differs .*cpu"):
        combine([a, other_cpu], ["a", "b"])
    gpu = {"name": "NVIDIA H200", "capability": "9.0", "driver": "580.159.04", "power_limit_w": "700.00"}
    on = [replace(r, environment={**r.environment, "gpu": gpu}) for r in (a, b)]
    assert combine(on, ["a", "b"]).results  # the same card: rounds of one measurement
    for moved in ({"power_limit_w": "500.00"}, {"capability": "8.0"}):
        other_gpu = replace(b, environment={**b.environment, "gpu": {**gpu, **moved}})
        with pytest.raises(UsageError, match=r"machine differs \(gpu\)"):
            combine([on[0], other_gpu], ["a", "b"])
    other = replace(b, contract=ContractRecord.of(load_contract("model_io_wall").to_dict()))
    with pytest.raises(UsageError, match="contract differs"):
        combine([a, other], ["a", "b"])
    with pytest.raises(UsageError, match="at least two"):
        combine([a], ["a"])


def test_the_cli_writes_a_receipt_that_diff_reads(two_runs: list[Path], tmp_path: Path) -> None:
    cli = CliRunner()
    out = tmp_path / "joined.json"
    r = cli.invoke(main, ["combine", *map(str, two_runs), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["results"][0]["round_sizes"] == [40, 40]
    again = cli.invoke(main, ["combine", *map(str, two_runs), "-o", str(out)])
    assert again.exit_code == 2 and "exists" in again.output
    # the same rounds on both sides: no change, whatever this machine's noise flags and load at start
    d = cli.invoke(main, ["diff", str(out), str(out), "--format", "json", "--accept", "noisy,unsettled,load"])
    assert d.exit_code == 0, d.output


def _at_load(r, busy: float):  # noqa: ANN001, ANN202 - a receipt with its load at start replaced
    load = {"cores": 2, "busy_fraction": busy, "window_s": 0.5}
    return replace(r, environment={**r.environment, "load": load},
                   processes=tuple(replace(p, load=load) for p in r.processes))


def test_the_busiest_run_sets_the_load_so_a_load_in_a_later_round_reaches_the_diff(
        two_runs: list[Path], tmp_path: Path) -> None:
    from benchbox.receipts.diff import DiffOptions, diff_receipts
    from benchbox.receipts.io import write_receipt

    a, b = (load_receipt(p) for p in two_runs)
    quiet = combine([_at_load(a, 0.05), _at_load(b, 0.1)], ["a", "b"])
    loaded = combine([_at_load(a, 0.05), _at_load(b, 0.95)], ["a", "b"])  # busy only in round 2
    assert loaded.environment["load"]["busy_fraction"] == 0.95 and loaded.environment["load"]["run"] == 2
    assert loaded.environment["load_by_run"] == [0.05, 0.95]
    write_receipt(tmp_path / "q.json", quiet)
    write_receipt(tmp_path / "l.json", loaded)
    d = diff_receipts(load_receipt(tmp_path / "q.json"), load_receipt(tmp_path / "l.json"),
                      DiffOptions(accept=frozenset({"noisy", "unsettled"})))
    assert {r.verdict for r in d.rows} == {"unreliable"}
    assert all("load" in r.reason for r in d.rows)


def test_runs_with_no_load_window_are_ranked_by_their_load_per_core(two_runs: list[Path]) -> None:
    a, b = (load_receipt(p) for p in two_runs)

    def unwindowed(r, per_core: float):  # noqa: ANN001, ANN202 - as BENCHBOX_LOAD_WINDOW_S=0 writes it
        load = {"cores": 2, "load_avg_1min": 2 * per_core, "per_core": per_core}
        return replace(r, environment={**r.environment, "load": load},
                       processes=tuple(replace(p, load=load) for p in r.processes))

    joined = combine([unwindowed(a, 1.4), unwindowed(b, 0.2)], ["a", "b"])
    assert joined.environment.load.per_core == 1.4 and joined.environment.load.run == 1
    assert joined.environment.load.of_runs == 2 and joined.environment.load_by_run == [1.4, 0.2]


def _with_rounds(r, sizes: tuple[int, ...], repeats: int):  # noqa: ANN001, ANN202
    rows = tuple(replace(row, round_sizes=sizes, round_process=(0,) * len(sizes)) for row in r.results)
    return replace(r, results=rows, settings={**r.settings, "repeats": repeats})


def test_each_run_is_a_process_for_the_diff(two_runs: list[Path]) -> None:
    """The CI recipe joins one-process runs: the diff must count one replication per run, not one
    of all the samples (which would take the runs' spread for certainty)."""
    from benchbox.receipts.replication import process_samples

    a, b = (load_receipt(p) for p in two_runs)
    joined = combine([a, b], ["a", "b"])
    assert joined.settings["repeats"] == 2
    for row, ra, rb in zip(joined.results, a.results, b.results):
        assert [len(x) for x in process_samples(joined, row)] == [len(ra.samples_ns), len(rb.samples_ns)]


def test_sub_rounds_and_in_process_rounds_stay_with_their_process(two_runs: list[Path]) -> None:
    from benchbox.receipts.replication import process_samples

    a, b = (load_receipt(p) for p in two_runs)
    # one pass interleaved between contracts, or --repeats 2 in one process: one process per run
    rounds = combine([_with_rounds(a, (20, 20), 2), _with_rounds(b, (20, 20), 2)], ["a", "b"])
    assert rounds.settings["repeats"] == 4
    for row in rounds.results:
        assert row.round_sizes == (20, 20, 20, 20) and row.round_process == (0, 0, 1, 1)
        assert [len(x) for x in process_samples(rounds, row)] == [40, 40]


def test_copies_are_refused_naming_both_files(two_runs: list[Path], tmp_path: Path) -> None:
    a, b = (load_receipt(p) for p in two_runs)
    with pytest.raises(UsageError, match=r"^a2 is a copy of a1 \(the same receipt\)"):
        combine([a, b, a], ["a1", "b", "a2"])
    # a copy with its metadata edited still carries the run's samples: refused all the same
    renamed = replace(a, created_at="2030-01-01T00:00:00+00:00", command=("edited",))
    with pytest.raises(UsageError, match=r"^a2 is a copy of a1 \(the same samples in every row\)"):
        combine([a, renamed], ["a1", "a2"])
    # on the command line: one line naming both files, exit 2, nothing written
    copy = tmp_path / "copy.json"
    copy.write_bytes(two_runs[0].read_bytes())
    r = CliRunner().invoke(main, ["combine", str(two_runs[0]), str(two_runs[1]), str(copy),
                                  "-o", str(tmp_path / "out.json")])
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [
        f"benchbox: error: {copy} is a copy of {two_runs[0]} (the same receipt): combine joins separate "
        "runs, and a copy would count one run's samples twice"]
    assert not (tmp_path / "out.json").exists()
