"""The store's own faults: damaged tables, interrupted creation, edited receipts, leftovers;
and what `store add` does with files that are not receipts, `store list`, `store rm`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox.cli import main
from benchbox.errors import UsageError
from benchbox.store import Store, receipt_identity
from tests.history_fixture import HistorySpec, write_history
from tests.support import loaded

ROOT = Path(__file__).resolve().parents[2]
SMALL = HistorySpec(commits=3, samples=40)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_history(tmp_path_factory.mktemp("small"), SMALL)


def _cli(*args: str) -> object:
    return CliRunner().invoke(main, list(args))


# -- damaged tables ----------------------------------------------------------------------------

@pytest.mark.parametrize("table", ["rows.parquet", "receipts.parquet"])
@pytest.mark.parametrize("damage", [b"", b"PAR1 not parquet at all PAR1", None])
def test_a_damaged_table_is_rebuilt_from_the_receipts(small: list[Path], tmp_path: Path, table: str,
                                                      damage: bytes | None) -> None:
    store = Store(tmp_path / "s")
    store.add(small[:2])
    path = tmp_path / "s" / table
    if damage is None:  # cut short, as a full disk leaves it
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        path.write_bytes(damage)
    again = Store(tmp_path / "s")
    assert again.rows().height == 2 * 4 and again.index().height == 2
    # and it stays repaired: the next add and the next reader find good tables
    assert len(again.add(small[2:]).added) == 1
    assert Store(tmp_path / "s").rows().height == 3 * 4
    r = _cli("report", str(tmp_path / "s"), "-o", str(tmp_path / "site"))
    assert r.exit_code == 0, r.output


def test_tables_that_disagree_are_rebuilt(small: list[Path], tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.add(small[:1])
    rows = store.rows_path.read_bytes()
    store.add(small[1:2])
    store.rows_path.write_bytes(rows)  # an older rows table beside a newer index
    assert Store(tmp_path / "s").rows().height == 2 * 4


# -- creation ----------------------------------------------------------------------------------

def test_a_creation_interrupted_before_the_marker_is_finished_not_refused(small: list[Path],
                                                                          tmp_path: Path) -> None:
    (tmp_path / "s" / "receipts").mkdir(parents=True)  # what a kill after mkdir left
    (tmp_path / "s" / ".lock").write_bytes(b"")
    assert len(Store(tmp_path / "s").add(small[:1]).added) == 1
    assert (tmp_path / "s" / "store.json").is_file()


def test_a_store_appears_whole_or_not_at_all(small: list[Path], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import benchbox.store as st

    def killed(*_: object) -> None:
        raise KeyboardInterrupt  # stands in for a kill just before the rename

    monkeypatch.setattr(st.os, "rename", killed)
    with pytest.raises(KeyboardInterrupt):
        Store(tmp_path / "s")
    monkeypatch.undo()
    assert not (tmp_path / "s").exists()
    assert len(Store(tmp_path / "s").add(small[:1]).added) == 1


def test_a_dead_creators_build_folder_is_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    build = tmp_path / f".s.new-{dead}-abcd"
    (build / "receipts").mkdir(parents=True)
    (build / "store.json").write_text("{}")
    mine = tmp_path / f".s.new-{os.getpid()}-efgh"  # a live creator's: kept
    (mine / "receipts").mkdir(parents=True)
    Store(tmp_path / "s")
    assert not build.exists() and mine.exists()


def test_concurrent_first_adds_all_find_one_store(tmp_path: Path) -> None:
    paths = write_history(tmp_path / "h", HistorySpec(commits=4, samples=30))
    code = ("import sys\nfrom pathlib import Path\nfrom benchbox.store import Store\n"
            "Store(Path(sys.argv[1])).add([Path(sys.argv[2])])\n")
    for trial in range(4):
        root = tmp_path / f"s{trial}"
        procs = [subprocess.Popen([sys.executable, "-c", code, str(root), str(p)], cwd=ROOT,
                                  env={"PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True)
                 for p in paths]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        assert len(Store(root).identities()) == 4
        assert not [n for n in os.listdir(tmp_path) if n.startswith(f".s{trial}.new-")]


# -- edited receipts, leftovers ----------------------------------------------------------------

def test_report_refuses_a_receipt_edited_after_it_was_indexed(small: list[Path], tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    added = store.add(small).added
    store.rows()  # indexed
    target = store.receipt_path(added[1].identity)
    r = json.loads(target.read_text())
    r["results"][0]["samples_ns"] = [v * 3 for v in r["results"][0]["samples_ns"]]
    from benchbox import stats

    r["results"][0]["summary"] = stats.summarize(r["results"][0]["samples_ns"])
    target.write_text(json.dumps(r))
    res = _cli("report", str(tmp_path / "s"), "-o", str(tmp_path / "site"))
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [
        f"benchbox: error: {target}: edited after it was stored (its content no longer has its identity); "
        f"restore it, or remove it: benchbox store rm {added[1].identity[:16]}"]
    assert not (tmp_path / "site").exists()


def test_a_re_encoded_receipt_is_not_an_edit(small: list[Path], tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    (e,) = store.add(small[:1]).added
    store.rows()
    path = store.receipt_path(e.identity)
    path.write_text(json.dumps(json.loads(path.read_text()), indent=2))  # same content, other bytes
    assert store.verify() == 1


def test_temporary_files_a_killed_writer_left_are_removed_under_the_lock(small: list[Path],
                                                                          tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.add(small[:1])
    left = [store.receipts_dir / f".{'a' * 64}.json.x1y2.tmp", tmp_path / "s" / ".rows.parquet.q9.tmp"]
    for f in left:
        f.write_bytes(b"half")
    keep = store.receipts_dir / "notes.txt"  # not ours: kept
    keep.write_text("x")
    store.add(small[1:2])
    assert not any(f.exists() for f in left) and keep.exists()
    # and by report's check, which writes nothing else
    left[0].write_bytes(b"half")
    assert store.verify() == 2 and not left[0].exists()


# -- store add: what is not a receipt, what is unfinished ----------------------------------------

def test_store_add_skips_files_that_are_not_receipts_with_a_warning(small: list[Path],
                                                                   tmp_path: Path) -> None:
    csv = tmp_path / "export.csv"
    csv.write_text("runner,case,sample_ns\ntorch-eager,invoice,1\n")
    pyperf = tmp_path / "export.json"
    pyperf.write_text(json.dumps({"version": "1.0", "benchmarks": []}))
    root = tmp_path / "s"
    r = _cli("store", "add", "--store", str(root), str(small[0]), str(csv), str(pyperf))
    assert r.exit_code == 0, r.output
    assert r.stdout.strip().splitlines()[-1] == f"1 added, 0 already in {root}, 2 skipped (not receipts)"
    assert r.stderr.strip().splitlines() == [
        f"benchbox: warning: skipped {csv}: not a receipt: invalid JSON (Expecting value: line 1 column 1 "
        "(char 0))",
        f"benchbox: warning: skipped {pyperf}: not a receipt: no 'schema_version'"]
    assert len(Store(root).identities()) == 1
    # nothing but non-receipts: refused in one line
    r = _cli("store", "add", "--store", str(root), str(csv), str(pyperf))
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines()[-1] == ("benchbox: error: no receipts to add: none of the 2 files "
                                                 "given is a receipt")


def test_a_broken_receipt_still_refuses_the_batch(small: list[Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 2, "results": 3}')  # claims to be a receipt: not skipped
    with pytest.raises(UsageError, match="bad.json"):
        Store(tmp_path / "s").add([small[0], bad])
    assert Store(tmp_path / "s").identities() == set()


def test_store_add_warns_of_an_incomplete_receipt(small: list[Path], tmp_path: Path) -> None:
    doc = loaded(small[0])
    doc["complete"] = False
    part = tmp_path / "part.json"
    part.write_text(json.dumps(doc))
    r = _cli("store", "add", "--store", str(tmp_path / "s"), str(part))
    assert r.exit_code == 0, r.output
    assert r.stderr.strip().splitlines() == [
        f"benchbox: warning: {part} is an incomplete receipt (its run stopped, or is still writing it); "
        "stored as it is"]


# -- store list, store rm ----------------------------------------------------------------------

def test_store_list_and_rm(small: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "s"
    Store(root).add(small)
    ids = [receipt_identity(loaded(p)) for p in small]
    r = _cli("store", "list", "--store", str(root))
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == f"3 receipts in {root}"
    assert [ln.split()[0] for ln in lines[:-1]] == [i[:16] for i in ids]  # oldest first
    assert all("tiny" in ln for ln in lines[:-1])
    r = _cli("store", "rm", "--store", str(root), ids[1][:10], ids[2])
    assert r.exit_code == 0, r.output
    assert r.stdout.strip().splitlines() == [f"removed {ids[1][:16]}", f"removed {ids[2][:16]}",
                                             f"2 removed from {root}"]
    assert Store(root).identities() == {ids[0]}
    assert set(Store(root).index()["identity"].to_list()) == {ids[0]}


@pytest.mark.parametrize("ref, why", [("0000000000", "no stored receipt has this identity"),
                                      ("xyz", "is not a receipt identity"),
                                      ("", "is not a receipt identity")])
def test_store_rm_refuses_what_it_cannot_name_and_removes_nothing(small: list[Path], tmp_path: Path,
                                                                  ref: str, why: str) -> None:
    root = tmp_path / "s"
    Store(root).add(small[:2])
    first = receipt_identity(loaded(small[0]))
    r = _cli("store", "rm", "--store", str(root), first, ref)
    assert r.exit_code == 2 and why in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert len(Store(root).identities()) == 2  # the first, named well, was not removed either


def test_store_list_and_rm_do_not_make_a_store(tmp_path: Path) -> None:
    for args in (["list"], ["rm", "0" * 64]):
        r = _cli("store", *args, "--store", str(tmp_path / "none"))
        assert r.exit_code == 2 and "no such receipt store" in r.output
    assert not (tmp_path / "none").exists()


# -- report's output place -----------------------------------------------------------------------

def test_report_checks_its_output_place_before_any_analysis(small: list[Path], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import benchbox.report as report

    Store(tmp_path / "s").add(small)
    calls: list[int] = []
    monkeypatch.setattr(report, "analyze", lambda *a, **k: calls.append(1))
    (tmp_path / "file").write_text("x")
    for out in (tmp_path / "file" / "site", tmp_path / "file"):
        r = _cli("report", str(tmp_path / "s"), "-o", str(out))
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert f"cannot create the site: {tmp_path / 'file'} is not a directory" in _cli(
        "report", str(tmp_path / "s"), "-o", str(tmp_path / "file" / "site")).output
    assert calls == []
