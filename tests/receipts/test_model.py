"""The receipt model is the one source of the receipt's shape.

The shipped JSON Schema is generated from it, and the loader (the model's decoder) and the
schema accept and refuse the same documents, over the fuzz corpus too.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest

from benchbox.errors import UsageError
from benchbox.receipts import parse_receipt, schema_path
from benchbox.receipts.model import BEYOND_SCHEMA, SCHEMA_VERSION, Receipt, ResultRow, receipt_schema
from benchbox.typed import decode
from tests.support import GOLDEN
from tests.test_fuzz import _mutate_tree

#: how many samples the golden receipt's first row holds (an appended one has this index)
GOLDEN_SAMPLES = len(json.loads(GOLDEN.read_text())["results"][0]["samples_ns"])

#: documents the agreement test compares; the loader refuses others for reasons a schema of one
#: version cannot state (newer versions, non-finite numbers, nesting beyond the limit)
AGREEMENT_EXAMPLES = 3000


def _validator() -> jsonschema.Draft202012Validator:
    """The shipped schema under stock draft 2020-12 semantics (1.0 is an integer there)."""
    return jsonschema.Draft202012Validator(json.loads(schema_path().read_text()))


def test_shipped_schema_is_the_one_generated_from_the_model() -> None:
    # regenerate with: python -c "from benchbox.receipts.model import write_schema; write_schema()"
    assert json.loads(schema_path().read_text()) == receipt_schema()
    jsonschema.Draft202012Validator.check_schema(receipt_schema())


def _comparable(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return True
    v = doc.get("schema_version")
    if isinstance(v, int) and not isinstance(v, bool) and v > SCHEMA_VERSION:
        return False
    text = json.dumps(doc, allow_nan=True)
    return "NaN" not in text and "Infinity" not in text


def loader_and_schema_agree(validator: Any, doc: Any, where: object) -> bool | None:
    """Assert that benchbox's loader and the shipped schema accept or refuse ``doc`` alike; return
    whether it was accepted (None: refused for a rule the schema cannot state)."""
    try:
        parse_receipt(json.dumps(doc).encode(), "m")
        loader_ok, why = True, ""
    except UsageError as e:
        loader_ok, why = False, str(e)
    schema_ok = validator.is_valid(doc)  # stops at the first error; all of them only to report
    if not loader_ok and schema_ok and any(b in why for b in BEYOND_SCHEMA):
        return None  # a rule the schema cannot state (listed in the model)
    if loader_ok != schema_ok:
        errors = [f"{list(e.absolute_path)}: {e.message}"[:200] for e in validator.iter_errors(doc)]
        raise AssertionError((where, why, errors[:3]))
    return loader_ok


def test_loader_and_schema_accept_and_refuse_the_same_mutants() -> None:
    golden = json.loads(GOLDEN.read_text())
    validator = _validator()
    rng = random.Random(7)
    seen = {True: 0, False: 0}
    for i in range(AGREEMENT_EXAMPLES):
        doc = _mutate_tree(golden, rng)
        if not _comparable(doc):
            continue
        loader_ok = loader_and_schema_agree(validator, doc, i)
        if loader_ok is not None:
            seen[loader_ok] += 1
    assert seen[True] > 100 and seen[False] > 100  # both sides reached


def test_integral_floats_are_integers_to_the_schema_and_to_the_loader() -> None:
    doc = json.loads(GOLDEN.read_text())
    first = doc["results"][0]["samples_ns"][0]
    doc["schema_version"] = float(doc["schema_version"])
    doc["results"][0]["samples_ns"][0] = float(first)  # written as 12345.0 by another tool
    assert not list(_validator().iter_errors(doc))
    r = parse_receipt(json.dumps(doc).encode(), "floats")
    assert type(r.schema_version) is int and type(r.results[0].samples_ns[0]) is int
    assert r.results[0].samples_ns[0] == first
    doc["results"][0]["samples_ns"][0] = first + 0.5  # not an integer: both refuse it
    assert list(_validator().iter_errors(doc))
    with pytest.raises(UsageError, match=r"samples_ns\[0\]: is number, not an integer"):
        parse_receipt(json.dumps(doc).encode(), "half")


def test_a_document_round_trips_through_the_model_unchanged() -> None:
    doc = json.loads(GOLDEN.read_text())
    doc["results"][0]["a_field_from_a_newer_writer"] = {"kept": [1, 2]}
    doc["results"][0]["summary"]["p999_ns"] = 12
    r = decode(Receipt, doc, "golden")
    assert r.to_json() == doc


@pytest.mark.parametrize("change, message", [
    (lambda d: d["results"][0].__setitem__("status", "great"), "results[0].status"),
    (lambda d: d["results"][0]["samples_ns"].append(-5), f"results[0].samples_ns[{GOLDEN_SAMPLES}]"),
    (lambda d: d["results"][0]["summary"].pop("p50_ns"), "results[0].summary: p50_ns is missing"),
    (lambda d: d["results"][0]["accuracy"].__setitem__("passed", False),
     "results[0]: a valid row needs accuracy.passed = true"),
    (lambda d: d["task"]["cases"][0].__setitem__("request_sha256", "x"), "task.cases[0].request_sha256"),
])
def test_a_refusal_names_the_field(change: Any, message: str) -> None:
    doc = json.loads(GOLDEN.read_text())
    change(doc)
    with pytest.raises(UsageError, match=f"^m: invalid receipt: {message}".replace("[", r"\[")
                       .replace("]", r"\]").replace(".", r"\.")):
        parse_receipt(json.dumps(doc).encode(), "m")


def test_rows_built_in_code_are_checked_like_loaded_ones() -> None:
    with pytest.raises(UsageError, match="a valid row needs samples"):
        ResultRow.of({"runner": "r", "case": "c", "status": "valid", "reasons": [], "runner_report": {},
                      "accuracy": {"passed": True}, "samples_ns": [], "round_sizes": [], "stages_ns": {},
                      "summary": {"n": 0}})


@pytest.mark.parametrize("environment, label", [
    ({"device": "cpu", "cpu": "AMD EPYC", "gpu": None}, "cpu (AMD EPYC)"),
    ({"device": "cuda:0", "cpu": "AMD EPYC", "gpu": {"name": "NVIDIA H200"}}, "NVIDIA H200"),
    ({"device": "cuda:0", "cpu": "AMD EPYC", "gpu": {"name": ""}}, "cuda:0"),
    ({"device": "cpu"}, "cpu"),
    ({"device": None, "cpu": "AMD EPYC"}, "unknown"),
])
def test_the_device_label_names_the_gpu_else_the_cpu_model(environment: dict, label: str) -> None:
    doc = json.loads(GOLDEN.read_text())
    doc["environment"] = environment
    receipt = decode(Receipt, doc, "golden")
    assert receipt.device_label == label
    assert receipt.device == (environment["gpu"]["name"] if (environment.get("gpu") or {}).get("name")
                              else str(environment.get("device", "unknown")))


def test_the_receipts_name_limit_is_the_tasks() -> None:
    from benchbox.receipts.model import MAX_NAME_LENGTH
    from benchbox.tasks import MAX_NAME_LENGTH as TASK_LIMIT

    assert MAX_NAME_LENGTH == TASK_LIMIT
