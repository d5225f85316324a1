"""Receipts on disk: atomic writes, refused files and documents (one line, exit 2), migrations."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchbox import stats
from benchbox.errors import UsageError
from benchbox.receipts import io, load_receipt, parse_receipt
from benchbox.receipts.build import ReceiptSet
from benchbox.receipts.io import write_receipt
from benchbox.receipts.model import ResultRow
from benchbox.receipts.record import MAX_NS
from tests.support import GOLDEN, GOLDEN_V1, loaded, one_line_exit_2

# -- atomic writes ---------------------------------------------------------------------------

def test_write_receipt_replaces_atomically_and_leaves_no_temp_files(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "r.json"
    receipt = json.loads((GOLDEN).read_text())
    write_receipt(out, receipt)
    receipt["results"] = receipt["results"][:1]
    write_receipt(out, receipt)
    assert loaded(out)["results"] == receipt["results"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.json"]
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_write_receipt_keeps_values_json_cannot_hold(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    receipt = json.loads((GOLDEN).read_text())
    receipt["results"][0]["runner_report"]["odd"] = {"nan": float("nan"), "np": np.float32(1.5),
                                                      "arr": np.arange(3), "path": Path("/x")}
    write_receipt(out, receipt)
    odd = loaded(out)["results"][0]["runner_report"]["odd"]
    assert odd == {"nan": None, "np": 1.5, "arr": [0, 1, 2], "path": "/x"}


def test_unwritable_receipt_path_is_one_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UsageError, match="cannot write receipt"):
        write_receipt(blocker / "r.json", {"schema_version": 1})





def _golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


def _extra(text: str, literal: str) -> bytes:
    """The receipt text with one more top-level field holding ``literal`` as written."""
    assert '"schema_version": 2' in text
    return text.replace('"schema_version": 2', f'"schema_version": 2, "x": {literal}', 1).encode()


def _bad_receipts() -> dict[str, bytes]:
    text = GOLDEN.read_text()
    cases: dict[str, bytes] = {
        "truncated": text[: len(text) // 2].encode(),
        "empty": b"",
        "not-json": b"\x00\xff\xfe garbage \x89PNG",
        "top-level-list": b"[1, 2, 3]",
        "nan": text.replace('"complete": true', '"complete": NaN', 1).encode(),
        "infinity": _extra(text, "-Infinity"),
        "overflowing-float": _extra(text, "1e999"),
        "huge-int-literal": _extra(text, "1" + "0" * 5000),
        "deep-nesting": b'{"schema_version": 1, "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
        "moderate-nesting": b'{"schema_version": 1, "x": ' + b"[" * 500 + b"]" * 500 + b"}",
        "invalid-utf8": text.encode()[:100] + b"\xc3\x28" + text.encode()[100:],
    }
    mutations = {
        "newer-schema": lambda r: r.__setitem__("schema_version", 99),
        "schema-zero": lambda r: r.__setitem__("schema_version", 0),
        "schema-string": lambda r: r.__setitem__("schema_version", "1"),
        "schema-bool": lambda r: r.__setitem__("schema_version", True),
        "no-contract": lambda r: r.pop("contract"),
        "no-results": lambda r: r.pop("results"),
        "results-string": lambda r: r.__setitem__("results", "none"),
        "row-not-object": lambda r: r["results"].__setitem__(0, 7),
        "row-no-runner": lambda r: r["results"][0].pop("runner"),
        "bad-status": lambda r: r["results"][0].__setitem__("status", "great"),
        "sample-string": lambda r: r["results"][0]["samples_ns"].__setitem__(0, "12"),
        "sample-negative": lambda r: r["results"][0]["samples_ns"].__setitem__(0, -1),
        "sample-float": lambda r: r["results"][0]["samples_ns"].__setitem__(0, 1.5),
        "sample-too-big": lambda r: r["results"][0]["samples_ns"].__setitem__(0, 2**70),
        "unknown-stage": lambda r: r["results"][0]["stages_ns"].__setitem__("warp", [1]),
        "summary-string": lambda r: r["results"][0]["summary"].__setitem__("p50_ns", "fast"),
        "ci-triple": lambda r: r["results"][0]["summary"].__setitem__("p50_ci_ns", [1, 2, 3]),
        "reasons-ints": lambda r: r["results"][0].__setitem__("reasons", [1]),
        "contract-hash-int": lambda r: r["contract"].__setitem__("hash", 5),
        "contract-no-stages": lambda r: r["contract"].__setitem__("stages", []),
        "task-name-null": lambda r: r["task"].__setitem__("name", None),
        "complete-string": lambda r: r.__setitem__("complete", "yes"),
        "comparison-ratio-string": lambda r: r.__setitem__(
            "comparisons", {"baseline": "a", "rows": [{"runner": "a", "case": "b", "p50_ratio": "x"}]}),
    }
    for name, mutate in mutations.items():
        r = _golden()
        mutate(r)
        cases[name] = json.dumps(r).encode()
    return cases


BAD_RECEIPTS = _bad_receipts()


@pytest.mark.parametrize("name", sorted(BAD_RECEIPTS))
def test_bad_receipt_is_one_line_exit_2(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.json"
    path.write_bytes(BAD_RECEIPTS[name])
    line = one_line_exit_2(["show", str(path)])
    assert str(path) in line
    if name == "newer-schema":
        assert "newer than this benchbox understands" in line
    with pytest.raises(UsageError):
        loaded(path)


def test_receipt_files_that_are_not_files(tmp_path: Path) -> None:
    one_line_exit_2(["show", str(tmp_path / "missing.json")])
    one_line_exit_2(["show", str(tmp_path)])
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert "not a regular file" in one_line_exit_2(["show", str(fifo)])  # and does not block


def test_huge_receipt_file_is_refused_before_reading(tmp_path: Path) -> None:
    from benchbox.receipts.io import MAX_RECEIPT_BYTES

    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:  # sparse: no disk used
        f.truncate(MAX_RECEIPT_BYTES + 1)
    assert "limit" in one_line_exit_2(["show", str(huge)])


def test_large_arrays_within_the_limit_load(tmp_path: Path) -> None:
    r = _golden()
    n = 300_000
    r["results"][0]["samples_ns"] = list(range(n))
    r["results"][0]["round_sizes"] = [n]
    r["results"][0]["summary"] = stats.summarize(r["results"][0]["samples_ns"])
    path = tmp_path / "big.json"
    path.write_text(json.dumps(r))
    assert len(loaded(path)["results"][0]["samples_ns"]) == n



# -- migrations ------------------------------------------------------------------------------

def test_golden_v1_receipt_keeps_loading_and_rendering() -> None:
    from benchbox.render import results_table

    r = load_receipt(GOLDEN_V1)
    assert r.schema_version == 2 and r.results
    assert "invoice" in results_table(r)


def test_version_1_rows_migrate_to_one_round_each_and_nothing_else_changes() -> None:
    v1 = json.loads(GOLDEN_V1.read_text())
    v2 = loaded(GOLDEN_V1)
    assert [row["round_sizes"] for row in v2["results"]] == [[len(r["samples_ns"])] for r in v1["results"]]
    for row in v2["results"]:
        del row["round_sizes"]
    assert {**v2, "schema_version": 1} == v1
    failed = {**v1, "results": [{**v1["results"][0], "status": "failed", "samples_ns": [],
                                  "summary": {"n": 0}, "accuracy": None}]}
    assert io._v1_to_v2(failed)["results"][0]["round_sizes"] == []


def test_migration_chain_runs_in_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from benchbox.receipts import io

    seen: list[int] = []

    def v1_to_v2(r: dict[str, Any]) -> dict[str, Any]:
        seen.append(1)
        r = io._v1_to_v2(r)
        return {**r, "settings": {**r.get("settings", {}), "migrated": [1]}}

    def v2_to_v3(r: dict[str, Any]) -> dict[str, Any]:
        seen.append(2)
        return {**r, "schema_version": 3,
                "settings": {**r["settings"], "migrated": r["settings"]["migrated"] + [2]}}

    monkeypatch.setattr(io, "SCHEMA_VERSION", 3)
    monkeypatch.setitem(io.MIGRATIONS, 1, v1_to_v2)
    monkeypatch.setitem(io.MIGRATIONS, 2, v2_to_v3)
    r = loaded(GOLDEN_V1)
    assert seen == [1, 2] and r["schema_version"] == 3 and r["settings"]["migrated"] == [1, 2]


def test_broken_or_missing_migrations_are_usage_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchbox.receipts import io

    monkeypatch.delitem(io.MIGRATIONS, 1)
    with pytest.raises(UsageError, match="no migration from version 1"):
        loaded(GOLDEN_V1)
    monkeypatch.setitem(io.MIGRATIONS, 1, lambda r: r["no such key"])
    with pytest.raises(UsageError, match="cannot migrate receipt from schema_version 1: KeyError"):
        loaded(GOLDEN_V1)
    monkeypatch.setitem(io.MIGRATIONS, 1, lambda r: r)  # forgets to advance the version
    with pytest.raises(UsageError, match="did not advance"):
        loaded(GOLDEN_V1)


# -- the contract hash is recomputed, never trusted --------------------------------------------

def test_a_receipt_declaring_another_contract_under_the_public_calls_hash_is_refused(
        tmp_path: Path) -> None:
    from benchbox.contracts import load_contract

    doc = json.loads(GOLDEN.read_text())
    public = load_contract("public_task_call_wall")
    assert doc["contract"]["hash"] == public.hash
    edited = {**load_contract("model_io_wall").to_dict(), "hash": public.hash}
    doc["contract"] = edited
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    for args in (["show", str(path)], ["diff", str(GOLDEN), str(path)], ["diff", str(path), str(GOLDEN)]):
        line = one_line_exit_2(args)
        assert "hash" in line and "edited.json" in line, line


def test_first_and_last_must_match_the_stages(tmp_path: Path) -> None:
    doc = json.loads(GOLDEN.read_text())
    doc["contract"]["first"] = "compute"
    path = tmp_path / "first.json"
    path.write_text(json.dumps(doc))
    assert "first" in one_line_exit_2(["show", str(path)])


# -- resource bombs: a receipt's shape is bounded before it is parsed --------------------------

@pytest.mark.parametrize("item", [b"[],", b"{},", b'{"a":0},', b'"ab",', '"\u0100",'.encode()])
def test_a_receipt_of_many_small_containers_is_refused_before_parsing(item: bytes, tmp_path: Path) -> None:
    """3 MB of "[]," would cost ~25x its size in Python objects, of short strings ("ab", or one
    character past Latin-1) 12 to 18x; the pre-scan refuses them."""
    n = 3_000_000 // len(item)
    blob = b'{"schema_version": 2, "x": [' + item * n + b"[]]}"
    assert len(blob) < io.MAX_RECEIPT_BYTES
    with pytest.raises(UsageError) as e:
        io.parse_receipt(blob, "bomb")
    assert "limit" in str(e.value) and "\n" not in str(e.value), str(e.value)
    path = tmp_path / "bomb.json"
    path.write_bytes(blob)
    assert "limit" in one_line_exit_2(["show", str(path)])


def test_the_receipt_prescan_passes_real_receipts_with_bracket_heavy_strings() -> None:
    doc = _golden()
    doc["environment"]["note"] = "[{:" * 50_000
    io.parse_receipt(json.dumps(doc).encode(), "brackets")


def _with_contract(name: str, arrival_edit: dict | None, tmp_path: Path) -> Path:
    from benchbox.contracts import load_contract

    doc = json.loads(GOLDEN.read_text())
    doc["contract"] = load_contract(name).to_dict()
    if arrival_edit is None:
        doc["contract"].pop("arrival")
    else:
        doc["contract"]["arrival"] = {**doc["contract"]["arrival"], **arrival_edit}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("name, edit", [
    ("public_task_call_50rps", {"rate_per_s": 500.0}),  # the rate that sweep plots go by
    ("public_task_call_50rps", {"kind": "back_to_back"}),
    ("public_task_call_wall", {"kind": "gap", "gap_ms": 5.0, "idle": "sleep"}),
    ("public_task_call_50rps", None),  # absent reads as back to back: not what policy.arrival says
])
def test_a_receipt_whose_arrival_disagrees_with_its_policy_is_refused(name: str, edit: dict | None,
                                                                       tmp_path: Path) -> None:
    line = one_line_exit_2(["show", str(_with_contract(name, edit, tmp_path))])
    assert "arrival" in line and "policy.arrival" in line, line


def test_a_receipt_whose_arrival_agrees_with_its_policy_loads(tmp_path: Path) -> None:
    receipt = io.load_receipt(_with_contract("public_task_call_50rps", {"set_at_run": ["rate_per_s"]},
                                             tmp_path))
    assert receipt.contract.arrival is not None and receipt.contract.arrival.rate_per_s == 50.0
    io.load_receipt(_with_contract("public_task_call_wall", None, tmp_path))  # written before arrivals


# -- what the loader checks beyond the shape ---------------------------------------------------

@pytest.mark.parametrize("where", ["task.name", "task.size", "task.cases[0].name", "results[0].case",
                                   "results[0].runner", "contract.name"])
def test_a_name_over_the_limit_is_refused_on_load_at_once(where: str, tmp_path: Path) -> None:
    from benchbox.tasks import MAX_NAME_LENGTH

    r = _golden()
    node: Any = r
    *path, last = where.replace("[0]", ".0").split(".")
    for k in path:
        node = node[int(k)] if k.isdigit() else node[k]
    node[last] = "x" * 5_000_000  # 5 MB: the loader must refuse it, not print it
    p = tmp_path / "long.json"
    p.write_text(json.dumps(r))
    with pytest.raises(UsageError, match=rf"{re.escape(where)}: is 5,000,000 characters long, over the "
                                         rf"limit of {MAX_NAME_LENGTH}"):
        load_receipt(p)
    if where != "contract.name":  # (a contract's name is in its hash)
        node[last] = "y" * MAX_NAME_LENGTH  # at the limit: loads
        p.write_text(json.dumps(r))
        assert load_receipt(p) is not None


@pytest.mark.parametrize("key, value", [("n", 29), ("p50_ns", 1), ("min_ns", 0), ("max_ns", 2**40),
                                        ("mean_ns", 7), ("p99_ns", 3)])
def test_a_summary_that_contradicts_its_samples_is_refused(key: str, value: int, tmp_path: Path) -> None:
    r = _golden()
    r["results"][0]["summary"][key] = value
    p = tmp_path / "edited.json"
    p.write_text(json.dumps(r))
    with pytest.raises(UsageError, match=rf"results\[0\]: summary {key} is {value} but"):
        load_receipt(p)
    one_line_exit_2(["show", str(p)])


def test_summaries_written_by_benchbox_agree_with_their_samples() -> None:
    """Every committed receipt loads: the check refuses edits, not what benchbox wrote."""
    paths = [GOLDEN, GOLDEN_V1, *sorted((Path(__file__).resolve().parents[2] / "receipts").glob("*.json"))]
    assert len(paths) > 2
    for p in paths:
        assert load_receipt(p).results


def test_sample_lists_are_checked_item_by_item_where_the_whole_list_check_fails(tmp_path: Path) -> None:
    # the loader checks a list of in-range integers as a whole; anything else, item by item
    r = _golden()
    r["results"][0]["samples_ns"][3] = -1
    with pytest.raises(UsageError, match=r"results\[0\]\.samples_ns\[3\]: -1 is below 0"):
        parse_receipt(json.dumps(r).encode(), "m")
    over = MAX_NS + 1
    for at, value, said in ((2, True, "is boolean, not an integer"), (4, over, f"{over} is above")):
        r = _golden()
        r["results"][0]["samples_ns"][at] = value
        with pytest.raises(UsageError, match=rf"results\[0\]\.samples_ns\[{at}\]: {said}"):
            parse_receipt(json.dumps(r).encode(), "m")
    r = _golden()
    first = r["results"][0]["samples_ns"][5]
    r["results"][0]["samples_ns"][5] = float(first)  # an integral float is the integer it is
    row = parse_receipt(json.dumps(r).encode(), "m").results[0]
    assert row.samples_ns[5] == first and type(row.samples_ns[5]) is int
    text = json.dumps(_golden()).replace('"samples_ns": [', '"samples_ns": [1e999, ', 1)
    with pytest.raises(UsageError, match=r"a number is out of range \(infinite\)"):
        parse_receipt(text.encode(), "m")


# -- a run's writes: each row encoded once -----------------------------------------------------

RUN_RECEIPTS = sorted(GOLDEN.parent.glob("receipt-*.json"))


def _replayed(source: Path, folder: Path, compare: bool = True) -> tuple[ReceiptSet, Path]:
    """``source``'s receipt written as a run writes it: without rows, then a row at a time, then
    marked interrupted; with ``compare``, each write's bytes against encode_receipt's."""
    full = load_receipt(source)
    out = folder / "run.json"
    book = ReceiptSet([out], [replace(full, results=())])
    book.save()
    mismatched = []
    for row in full.results:
        book.add_rows([row])
        if compare and out.read_bytes() != io.encode_receipt(book.receipts[0]):
            mismatched.append(row.case)
    book.mark_interrupted("SIGINT")
    assert mismatched == []
    assert not compare or out.read_bytes() == io.encode_receipt(book.receipts[0])
    return book, out


@pytest.mark.parametrize("source", RUN_RECEIPTS, ids=lambda p: p.name)
def test_a_receipt_written_row_by_row_has_the_bytes_encode_receipt_gives(source: Path,
                                                                          tmp_path: Path) -> None:
    book, out = _replayed(source, tmp_path)
    assert len(book.receipts[0].results) == len(load_receipt(source).results) >= 2
    assert json.loads(out.read_bytes())["interrupted"] is True


def test_a_run_encodes_each_row_once_however_often_it_writes(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = ResultRow.to_json

    def counted(self: ResultRow) -> dict[str, Any]:
        calls.append(self.case)
        return original(self)

    rows = load_receipt(GOLDEN).results
    expected = [r.to_json() for r in rows]
    monkeypatch.setattr(ResultRow, "to_json", counted)
    _, out = _replayed(GOLDEN, tmp_path, compare=False)
    assert sorted(calls) == sorted(r.case for r in rows)  # written len(rows) + 2 times
    assert json.loads(out.read_bytes())["results"] == expected


def test_a_row_replaced_or_holding_what_json_cannot_is_written_as_encode_receipt_writes_it(
        tmp_path: Path) -> None:
    full = load_receipt(GOLDEN)
    out = tmp_path / "r.json"
    book = ReceiptSet([out], [full])
    book.save()
    first = full.results[0]
    for changed in (replace(first, status="invalid"), replace(first, extra={"odd": float("nan")}),
                    replace(first, case="\x00benchbox-rows\x00")):
        book.update(lambda _, r, row=changed: r.with_results((row, *r.results[1:])))
        assert out.read_bytes() == io.encode_receipt(book.receipts[0]), changed.case
    assert loaded(out)["results"][0]["case"] == "\x00benchbox-rows\x00"
