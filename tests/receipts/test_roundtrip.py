"""Every receipt in tests/ loads into the typed model and is written back as it was.

``receipt-v2.json`` and the two ``receipt-main-*.json`` were written by ``benchbox run`` before
the receipt's fields were typed (one run joined from two fresh processes with paced arrivals
and labels; one of two in-process rounds with a gap): decoding them and encoding the records
again gives the same bytes, so typing a field changed nothing a run writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchbox.receipts import load_receipt, parse_receipt
from benchbox.receipts.io import MIGRATIONS, encode_receipt
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
