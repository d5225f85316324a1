"""Every receipt in tests/ loads into the typed model and is written back as it was.

``receipt-v2.json`` and the two ``receipt-main-*.json`` were written by ``benchbox run`` before
the receipt's fields were typed (one run joined from two fresh processes with paced arrivals
and labels; one of two in-process rounds with a gap): decoding them and encoding the records
again gives the same bytes, so typing a field changed nothing a run writes.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from benchbox import stats
from benchbox.receipts import load_receipt, parse_receipt
from benchbox.receipts.io import MIGRATIONS, encode_receipt
from benchbox.receipts.model import (
    ClockCrossCheck,
    Environment,
    GitState,
    MachineLoad,
    Noise,
    PolicyRecord,
    ResultRow,
    Settings,
    SteadyState,
)
from tests.support import GOLDEN, GOLDEN_V1

GOLDEN_DIR = GOLDEN.parent
WRITTEN_BY_RUN = sorted(p for p in GOLDEN_DIR.glob("receipt-*.json") if p != GOLDEN_V1)


def _compact(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()


def test_the_fixtures_cover_the_fields_typed_from_dicts() -> None:
    docs = [json.loads(p.read_text()) for p in WRITTEN_BY_RUN]
    rows = [row for d in docs for row in d["results"]]
    assert len(WRITTEN_BY_RUN) >= 3
    assert all(d["environment"] and d["settings"] for d in docs)
    assert any(row.get("load", {}).get("bound") for row in rows)
    assert any("rounds_checked" in (row.get("steady_state") or {}) for row in rows)
    assert any(row["summary"].get("noise", {}).get("outliers") for row in rows)


@pytest.mark.parametrize("path", WRITTEN_BY_RUN, ids=lambda p: p.name)
def test_a_receipt_written_by_a_run_is_written_back_byte_for_byte(path: Path) -> None:
    raw = json.loads(path.read_text())
    assert encode_receipt(load_receipt(path)) == _compact(raw)


def test_a_version_1_receipt_is_written_back_as_its_migration_says() -> None:
    raw = json.loads(GOLDEN_V1.read_text())
    migrated = MIGRATIONS[1](raw)
    written = encode_receipt(load_receipt(GOLDEN_V1))
    assert json.loads(written) == migrated
    assert encode_receipt(parse_receipt(written, "written")) == written  # a fixed point


def test_every_field_that_was_a_dict_decodes_into_its_record() -> None:
    r = load_receipt(GOLDEN_DIR / "receipt-main-combined.json")
    row = r.results[0]
    assert isinstance(r.environment, Environment) and isinstance(r.environment.git, GitState)
    assert isinstance(r.environment.load, MachineLoad) and r.environment.load.busy is not None
    assert isinstance(r.settings, Settings) and r.settings.sampling is not None and r.settings.sampling.fixed
    assert r.settings.labels == {"site": "test"} and r.settings.overload_bound is not None
    assert r.settings.overload_bound.max_backlog == 50
    assert [j.receipt for j in r.settings.combined_from or ()] == [
        "receipt-main-combined.rounds/round-1.json", "receipt-main-combined.rounds/round-2.json"]
    assert isinstance(r.contract.policy, PolicyRecord) and r.contract.policy.state == "warm"
    assert isinstance(row.summary.noise, Noise) and isinstance(row.steady_state, SteadyState)
    assert row.load is not None and row.load.arrival.kind == "poisson" and row.load.bound is not None
    control = r.processes[0].control if r.processes else None
    assert control is not None and control.name == "json-sort-v1"


def test_a_record_of_facts_writes_its_keys_back_in_the_order_it_was_given() -> None:
    # the two orders the harness writes a device clock cross-check in (one per kind of region)
    saturated = {"checked": True, "samples": 3, "tolerance_ns": 1000, "violations": 0, "max_excess_ns": -5,
                 "host_span": "all batches"}
    paired = {"checked": False, "samples": 3, "violations": 0, "tolerance_ns": 1000, "note": "no sync"}
    for doc in (saturated, paired):
        assert list(ClockCrossCheck.of(doc).to_json()) == list(doc)
    row = ClockCrossCheck.of(paired)
    assert row.violations == 0 and row.tolerance_ns == 1000 and row.note == "no sync"


def test_a_dict_given_for_a_record_field_is_checked_into_the_record() -> None:
    r = load_receipt(GOLDEN)
    edited = dataclasses.replace(r, environment={**r.environment.to_json(), "device": "cuda:1"})
    assert isinstance(edited.environment, Environment) and edited.environment.device == "cuda:1"
    assert list(edited.environment.to_json()) == list(r.environment.to_json())


@pytest.mark.parametrize("reasons, flags", [
    ((), ()),
    (("noise: coefficient of variation 31.0% exceeds 20%",), ("noisy",)),
    (("unsettled: second-half median +12.0% from the first half",), ("unsettled",)),
    (("p99 needs more samples", "noise: 5 of 30 samples are Tukey outliers (over 5%)",
      "unsettled: second-half median +9.0% from the first half"), ("noisy", "unsettled")),
    (("round 1 of 2: noise: coefficient of variation 31.0% exceeds 20%",), ()),
])
def test_a_rows_flags_are_the_caveats_it_recorded(reasons: tuple[str, ...], flags: tuple[str, ...]) -> None:
    doc = json.loads(GOLDEN.read_text())
    doc["results"][0]["reasons"] = list(reasons)
    row = parse_receipt(json.dumps(doc).encode(), "edited").results[0]
    assert row.flags == flags
    assert (row.noisy, row.unsettled) == ("noisy" in flags, "unsettled" in flags)
    assert "flags" not in row.to_json() and row.reasons == reasons  # the receipt keeps them as reasons


def test_the_flags_read_back_are_the_ones_the_statistics_wrote() -> None:
    rng = np.random.default_rng(3)
    flat = [int(v) for v in rng.normal(1e6, 1e3, 200)]
    drifting = [int(v) for v in np.linspace(1e6, 2e6, 200)]
    spiky = [int(5e7) if i % 4 == 0 else v for i, v in enumerate(flat)]
    row = load_receipt(GOLDEN).results[0]
    for samples, want in ((flat, ()), (drifting, ("unsettled",)), (spiky, ("noisy",))):
        reasons, flags = stats.flagged_caveats(stats.summarize(samples), stats.steady_state(samples))
        assert flags == want, reasons
        assert stats.caveats(stats.summarize(samples), stats.steady_state(samples)) == reasons
        written = dataclasses.replace(row, reasons=tuple(reasons), flags=flags)
        assert ResultRow.of(written.to_json()).flags == want, reasons


def test_a_record_of_facts_reads_by_key_as_the_dict_it_replaced() -> None:
    raw = json.loads(GOLDEN.read_text())
    r = load_receipt(GOLDEN)
    for record, doc in ((r.environment, raw["environment"]), (r.settings, raw["settings"])):
        assert list(record) == list(doc) and list(record.keys()) == list(doc)
        for key, value in doc.items():
            got = record[key]
            got = got.to_json() if hasattr(got, "to_json") else got
            assert json.loads(json.dumps(got)) == value  # as JSON: a tuple stands for the array
        assert record.get("not a key", 7) == 7
        with pytest.raises(KeyError):
            record["not a key"]
    assert r.environment.get("cuda", "absent") is None  # written as null: null, not the default
