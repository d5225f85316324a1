"""The receipt store: identity, idempotent add, the Parquet tables, recovery, refusals, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox.cli import main
from benchbox.errors import UsageError
from benchbox.receipts import io
from benchbox.store import Store, receipt_identity
from tests.history_fixture import HistorySpec, commit_sha, write_history
from tests.support import cli_without_torch, loaded

ROOT = Path(__file__).resolve().parents[1]
SMALL = HistorySpec(commits=4, samples=60)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_history(tmp_path_factory.mktemp("small"), SMALL)


def test_identity_ignores_formatting_and_key_order(small: list[Path], tmp_path: Path) -> None:
    r = loaded(small[0])
    again = tmp_path / "again.json"
    again.write_text(json.dumps(dict(reversed(list(r.items()))), indent=None, separators=(", ", ": ")))
    assert receipt_identity(loaded(again)) == receipt_identity(r)
    r2 = json.loads(json.dumps(r))
    r2["results"][0]["samples_ns"][0] += 1
    assert receipt_identity(r2) != receipt_identity(r)


def test_an_old_receipt_and_its_migrated_copy_share_one_identity(
        small: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(io, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(io.MIGRATIONS, 1, lambda r: {**r, "schema_version": 2, "migrated_from": 1})
    migrated = loaded(small[0])
    assert migrated["schema_version"] == 2
    copy = tmp_path / "v2.json"
    io.write_receipt(copy, migrated)
    assert receipt_identity(loaded(copy)) == receipt_identity(migrated)
    result = Store(tmp_path / "s").add([small[0], copy])
    assert len(result.added) == 1 and len(result.present) == 1


def test_add_is_idempotent_and_keeps_the_receipts_as_written(small: list[Path], tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    first = store.add(small[:3])
    assert len(first.added) == 3 and not first.present
    second = store.add(small)
    assert [e.source for e in second.present] == small[:3]
    assert [e.source for e in second.added] == small[3:]
    assert store.identities() == {receipt_identity(loaded(p)) for p in small}
    for e in (*first.added, *second.added):
        assert store.receipt_path(e.identity).read_bytes() == e.source.read_bytes()
    # the same file twice in one call is stored once
    third = Store(tmp_path / "t").add([small[0], small[0]])
    assert len(third.added) == 1 and len(third.present) == 1


def test_rows_table_holds_one_row_per_receipt_runner_and_case(small: list[Path], tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.add(small)
    rows = store.rows()
    assert rows.height == len(small) * len(SMALL.cases) * len(SMALL.runners)
    for col in ("identity", "created_at", "commit", "task", "size", "dtype", "contract", "contract_hash",
                "device", "runner", "case", "status", "n", "p50_ns", "p50_lo_ns", "p50_hi_ns", "p90_ns",
                "p99_ns", "p99_lo_ns", "p99_hi_ns", "noisy", "unsettled", "labels", "series"):
        assert col in rows.columns, col
    r = loaded(small[2])
    ident = receipt_identity(r)
    for res in r["results"]:
        got = rows.filter((rows["identity"] == ident) & (rows["runner"] == res["runner"])
                          & (rows["case"] == res["case"])).row(0, named=True)
        s = res["summary"]
        assert (got["p50_ns"], got["n"], got["status"]) == (s["p50_ns"], s["n"], res["status"])
        assert [got["p50_lo_ns"], got["p50_hi_ns"]] == s["p50_ci_ns"]
        assert got["commit"] == commit_sha(SMALL, 2)
        assert got["noisy"] == any(x.startswith("noise:") for x in res["reasons"])
        assert got["unsettled"] == any(x.startswith("unsettled:") for x in res["reasons"])
        assert json.loads(got["labels"]) == {"ci": "nightly"}
    # any Parquet reader: the file is plain Parquet
    import polars as pl

    assert pl.read_parquet(store.rows_path).height == rows.height


def test_series_never_mix_contracts_sizes_dtypes_or_devices(tmp_path: Path) -> None:
    a = write_history(tmp_path / "a", HistorySpec(commits=2, samples=40))
    b = write_history(tmp_path / "b", HistorySpec(commits=2, samples=40, contract="model_io_wall"))
    c = write_history(tmp_path / "c", HistorySpec(commits=2, samples=40, gpu="NVIDIA H200"))
    store = Store(tmp_path / "s")
    store.add([*a, *b, *c])
    rows = store.rows()
    import polars as pl

    per_series = rows.group_by("series").agg(pl.col("contract_hash").n_unique().alias("h"),
                                             pl.col("device").n_unique().alias("d"))
    assert per_series.height == 3
    assert per_series["h"].max() == 1 and per_series["d"].max() == 1


def test_cells_are_the_matrix_cell_labels(small: list[Path], tmp_path: Path) -> None:
    paths = []
    for k, p in enumerate(small[:3]):
        r = json.loads(p.read_text())
        if k < 2:
            r["settings"]["labels"]["matrix_cell"] = f"tiny/float32/cell-{k}"
        q = tmp_path / f"cell{k}.json"
        io.write_receipt(q, r)
        paths.append(q)
    store = Store(tmp_path / "s")
    store.add(paths)
    assert store.cells() == {"tiny/float32/cell-0", "tiny/float32/cell-1"}
    got = {s.identity: s for s in store.receipts()}
    assert {s.matrix_cell for s in got.values()} == {"tiny/float32/cell-0", "tiny/float32/cell-1", None}
    assert [s.created_at for s in store.receipts()] == sorted(s.created_at for s in got.values())


def test_a_bad_receipt_leaves_the_store_as_it_was(small: list[Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1}')
    store = Store(tmp_path / "s")
    with pytest.raises(UsageError, match="bad.json"):
        store.add([small[0], bad])
    assert store.identities() == set()


def test_tables_catch_up_with_receipts_after_a_crash(small: list[Path], tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.add(small[:2])
    # a crash after the receipt was written but before the tables were
    ident = receipt_identity(loaded(small[2]))
    store.receipt_path(ident).write_bytes(small[2].read_bytes())
    reopened = Store(tmp_path / "s")
    assert ident in set(reopened.rows()["identity"].to_list())
    assert reopened.index().height == 3
    # a lost table is rebuilt from the receipts
    store.rows_path.unlink()
    assert Store(tmp_path / "s").rows().height == 3 * 4
    # a receipt removed by hand leaves the tables
    store.receipt_path(ident).unlink()
    assert set(Store(tmp_path / "s").index()["identity"].to_list()) == store.identities()


def test_a_receipt_edited_in_the_store_is_refused_on_rebuild(small: list[Path], tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    (e,) = store.add(small[:1]).added
    r = json.loads(store.receipt_path(e.identity).read_text())
    r["results"][0]["samples_ns"][0] += 1
    store.receipt_path(e.identity).write_text(json.dumps(r))
    store.rows_path.unlink()
    with pytest.raises(UsageError, match="does not match its identity"):
        store.rows()


def test_concurrent_adds_from_several_processes_lose_nothing(tmp_path: Path) -> None:
    paths = write_history(tmp_path / "h", HistorySpec(commits=6, samples=30))
    Store(tmp_path / "s")
    code = ("import sys\nfrom pathlib import Path\nfrom benchbox.store import Store\n"
            "Store(Path(sys.argv[1])).add([Path(p) for p in sys.argv[2:]])\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "s"),
                               *[str(p) for p in paths[k::3]]], cwd=ROOT, env={"PYTHONPATH": str(ROOT)},
                              stderr=subprocess.PIPE, text=True) for k in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    store = Store(tmp_path / "s")
    assert len(store.identities()) == 6
    assert set(store.index()["identity"].to_list()) == store.identities()
    assert store.rows().height == 6 * 4


def test_refuses_what_is_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        Store(tmp_path / "file")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("x")
    with pytest.raises(UsageError, match="not a benchbox store"):
        Store(tmp_path / "busy")
    Store(tmp_path / "new")
    (tmp_path / "new" / "store.json").write_text(json.dumps({"format": "benchbox-store", "version": 99}))
    with pytest.raises(UsageError, match="newer"):
        Store(tmp_path / "new")
    with pytest.raises(UsageError, match="not a receipt identity"):
        Store(tmp_path / "ok").receipt_path("../../etc/passwd")


def test_a_real_run_receipt_goes_into_the_store(eager_receipt_path: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.add([eager_receipt_path])
    r = loaded(eager_receipt_path)
    rows = store.rows()
    assert rows.height == len(r["results"])
    assert set(rows["status"].to_list()) <= {"valid", "invalid", "failed"}
    assert rows["contract"].unique().to_list() == ["public_task_call_wall"]
    assert rows["device"].item(0).startswith("cpu (")


def test_cli_store_add_reports_added_and_present(small: list[Path], tmp_path: Path) -> None:
    runner = CliRunner()
    root = tmp_path / "s"
    r = runner.invoke(main, ["store", "add", "--store", str(root), str(small[0]), str(small[1])])
    assert r.exit_code == 0, r.output
    assert r.output.strip().splitlines()[-1] == f"2 added, 0 already in {root}"
    r = runner.invoke(main, ["store", "add", str(small[1]), str(small[2])], env={"BENCHBOX_STORE": str(root)})
    assert r.exit_code == 0, r.output
    assert r.output.strip().splitlines()[-1] == f"1 added, 1 already in {root}"
    r = runner.invoke(main, ["store", "add", "--store", str(root), str(tmp_path / "missing.json")])
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [f"benchbox: error: {tmp_path / 'missing.json'}: no such receipt"]


def test_store_add_never_imports_torch(small: list[Path], tmp_path: Path) -> None:
    cli_without_torch(["store", "add", "--store", str(tmp_path / "s"), str(small[0])])
