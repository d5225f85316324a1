"""The shipped JSON Schema (draft 2020-12) describes the receipts benchbox really writes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from benchbox.receipts import schema_path
from benchbox.run import RunConfig, run
from tests.support import GOLDEN, loaded


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(schema_path().read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator: jsonschema.Draft202012Validator, receipt: dict) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(receipt)]


def test_schema_ships_with_the_package_and_is_draft_2020_12() -> None:
    schema = json.loads(schema_path().read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert {"schema_version", "contract", "task", "results"} <= set(schema["required"])


def test_real_eager_receipt_validates(validator: jsonschema.Draft202012Validator,
                                      eager_receipt_path: Path) -> None:
    receipt = json.loads(eager_receipt_path.read_text())
    assert receipt["results"] and all(r["status"] == "valid" for r in receipt["results"])
    assert _errors(validator, receipt) == []
    loaded(eager_receipt_path)  # the loader agrees


def test_golden_v1_receipt_validates(validator: jsonschema.Draft202012Validator) -> None:
    assert _errors(validator, json.loads(GOLDEN.read_text())) == []


def test_receipt_with_failed_rows_validates(validator: jsonschema.Draft202012Validator,
                                            tmp_path: Path) -> None:
    # torch-eager on a CUDA device on this CPU-only machine: every row fails with the reason
    outcome = run(RunConfig(runners=("torch-eager",), device="cuda", samples=5, warmup=0,
                            cases=("invoice",), out=tmp_path / "failed.json"))
    receipt = json.loads(outcome.path.read_text())
    rows = receipt["results"]
    assert rows and all(r["status"] == "failed" and r["reasons"] for r in rows)
    assert receipt["complete"] is True
    assert _errors(validator, receipt) == []
    loaded(outcome.path)


def test_schema_rejects_what_breaks_the_stable_names(validator: jsonschema.Draft202012Validator) -> None:
    good = json.loads(GOLDEN.read_text())
    breakers = [
        lambda r: r.pop("contract"),
        lambda r: r.__setitem__("schema_version", "1"),
        lambda r: r["results"][0].__setitem__("status", "great"),
        lambda r: r["results"][0]["samples_ns"].append(-5),
        lambda r: r["results"][0]["samples_ns"].append(1.5),
        lambda r: r["results"][0]["stages_ns"].__setitem__("warp", [1]),
        lambda r: r["results"][0]["summary"].pop("p50_ns"),
        lambda r: r["contract"].__setitem__("clock", "sundial"),
        lambda r: r["task"]["cases"][0].pop("request_sha256"),
    ]
    for i, breaker in enumerate(breakers):
        bad = copy.deepcopy(good)
        breaker(bad)
        assert _errors(validator, bad), f"breaker {i} was accepted"


def test_schema_allows_added_fields(validator: jsonschema.Draft202012Validator) -> None:
    r = json.loads(GOLDEN.read_text())
    r["new_top_level_field"] = {"anything": [1, "two"]}
    r["results"][0]["new_row_field"] = 3.5
    r["results"][0]["summary"]["p999_ns"] = 12
    assert _errors(validator, r) == []
