"""The shipped JSON Schema accepts every receipt version the loader loads, and the receipts this
repository commits (the H200 baselines are schema_version 1, written before rows recorded their
rounds) validate against it."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from benchbox.errors import UsageError
from benchbox.receipts import parse_receipt, schema_path
from benchbox.receipts.model import SCHEMA_VERSION
from tests.receipts.test_model import loader_and_schema_agree
from tests.support import GOLDEN, GOLDEN_V1, REPO
from tests.test_fuzz import _mutate_tree


def _committed() -> list[Path]:
    """Every committed receipt: JSON files under receipts/ and tests/golden/ with a schema_version
    (a sweep's index, sweep.json, is not a receipt)."""
    files = sorted((REPO / "receipts").rglob("*.json")) + sorted((REPO / "tests" / "golden").glob("*.json"))
    return [p for p in files if "schema_version" in json.loads(p.read_text())]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(schema_path().read_text()))


def _errors(validator: jsonschema.Draft202012Validator, doc: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}"[:200] for e in validator.iter_errors(doc)]


def _loads(doc: Any) -> bool:
    try:
        parse_receipt(json.dumps(doc).encode(), "doc")
    except UsageError:
        return False
    return True


def test_the_repository_commits_receipts_of_both_versions() -> None:
    versions = {json.loads(p.read_text())["schema_version"] for p in _committed()}
    assert versions == {1, SCHEMA_VERSION} and len(_committed()) > 20


@pytest.mark.parametrize("path", _committed(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_committed_receipt_validates_against_the_shipped_schema(
        path: Path, validator: jsonschema.Draft202012Validator) -> None:
    doc = json.loads(path.read_text())
    assert _errors(validator, doc) == []
    assert _loads(doc)


def _v1() -> dict:
    return json.loads(GOLDEN_V1.read_text())


def _v2() -> dict:
    return json.loads(GOLDEN.read_text())


def _without_round_sizes(doc: dict) -> dict:
    for row in doc["results"]:
        row.pop("round_sizes", None)
    return doc


def _without(key: str) -> Any:
    return lambda d: {k: v for k, v in d.items() if k != key}


@pytest.mark.parametrize(("make", "accepted"), [
    (lambda: _without_round_sizes(_v1()), True),  # version 1 never had them: migrated on load
    (lambda: _without_round_sizes(_v2()), False),  # version 2 must record its rounds
    (lambda: _without("settings")(_v1()), True),
    (lambda: _without("settings")(_v2()), True),
    (lambda: {**_v2(), "settings": None}, True),
    (lambda: {**_v2(), "settings": []}, False),
    (lambda: {**_v2(), "schema_version": SCHEMA_VERSION + 1}, False),  # newer: refused by both
    (lambda: {**_v2(), "schema_version": 0}, False),
    (lambda: _without("calibration")(_v1()), False),
])
def test_schema_and_loader_agree_across_versions(make: Any, accepted: bool,
                                                 validator: jsonschema.Draft202012Validator) -> None:
    doc = make()
    assert (_errors(validator, doc) == []) is accepted, _errors(validator, doc)[:3]
    assert _loads(doc) is accepted


def test_loader_and_schema_agree_on_mutants_of_a_version_1_receipt(
        validator: jsonschema.Draft202012Validator) -> None:
    golden = _v1()
    rng = random.Random(11)
    seen = {True: 0, False: 0}
    for i in range(600):
        doc = _mutate_tree(copy.deepcopy(golden), rng)
        text = json.dumps(doc, allow_nan=True)
        if "NaN" in text or "Infinity" in text:
            continue
        loader_ok = loader_and_schema_agree(validator, doc, i)
        if loader_ok is not None:
            seen[loader_ok] += 1
    assert seen[True] > 20 and seen[False] > 20
