"""Fuzzing the loaders: mutated receipts and contracts give UsageError or load, nothing else.

Bounded in CI: BENCHBOX_FUZZ_EXAMPLES mutated inputs per loader (default 6000, so 12,000
in all, receipts and contracts), from the seed BENCHBOX_FUZZ_SEED (default 0). The longer
mode documented in the README raises both, e.g. BENCHBOX_FUZZ_EXAMPLES=500000.
Property tests (hypothesis) cover receipt round trips, the statistics and contract parsing.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import random
import re
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchbox import stats
from benchbox.contracts import STAGES, TIMELINE, contract_from_dict, parse_contract_toml
from benchbox.contracts.model import builtin_names
from benchbox.errors import UsageError
from benchbox.plots._common import plain_text
from benchbox.receipts import parse_receipt, write_receipt
from benchbox.receipts.model import Receipt, ResultRow
from benchbox.render import results_table
from benchbox.stats import quantile_ci, summarize
from tests.support import BUILTIN_CONTRACTS, GOLDEN, loaded

EXAMPLES = int(os.environ.get("BENCHBOX_FUZZ_EXAMPLES", "6000"))
SEED = int(os.environ.get("BENCHBOX_FUZZ_SEED", "0"))
#: accepted mutants that are also diffed against the original (the diff is slower), exported
#: (pyperf and a polars frame, in memory) and drawn (one kind of figure in turn, the slowest)
DIFF_EVERY = 20
EXPORT_EVERY = 5
PLOT_EVERY = 40
BUILTIN = BUILTIN_CONTRACTS

# -- mutation engine -------------------------------------------------------------------------

TOKENS = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1", b"0", b"null", b"true", b"[]", b"{}",
          b'"', b"\\", b"\\u0000", b"\\ud800", b"[[[[", b"}}}", b",", b":", b"9" * 30, b"1" * 5000,
          b'"schema_version": 2', b'"status": "maybe"', b"\xff\xfe", b"\x00", b"\xc3\x28"]
TOML_TOKENS = ["[", "]", "=", '"', "'", "\n", "[policy]", "[[x]]", 'clock = "device"', "stages = []",
               "version = -1", "1" * 5000, "inf", "nan", "1979-05-27", "{a=1}", "\\", "\x00", "\ud800",
               '"parse", "serialize"', "hold_stream = true", "state = 'first_call'", "= = ="]


def _json_values(rng: random.Random, depth: int = 0) -> Any:
    pool: list[Callable[[], Any]] = [
        lambda: None, lambda: True, lambda: False, lambda: 0, lambda: -1, lambda: 2**63, lambda: 2**64 + 1,
        lambda: -(2**70), lambda: 1.5, lambda: -0.0, lambda: 1e308, lambda: float("nan"),
        lambda: float("inf"), lambda: "", lambda: "x" * rng.randint(1, 3000), lambda: "\ud800\u202e",
        lambda: "valid", lambda: "parse", lambda: [], lambda: {}, lambda: [1, 2, 3],
        lambda: ["h2d", "compute"], lambda: {"n": 3}, lambda: [[[[[]]]]],
        lambda: [rng.randint(0, 10**9) for _ in range(rng.randint(0, 50))],
    ]
    if depth < 3:
        pool += [lambda: [_json_values(rng, depth + 1)], lambda: {"k": _json_values(rng, depth + 1)}]
    return rng.choice(pool)()


def _nodes(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _nodes(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:6]):  # a few elements of long sample lists are enough
            out += _nodes(v, (*path, i))
    return out


def _mutate_tree(doc: Any, rng: random.Random) -> Any:
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = _nodes(doc)
        path = rng.choice(paths[1:]) if len(paths) > 1 else ()
        if not path:
            return _json_values(rng)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        op = rng.random()
        if op < 0.25 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.35 and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        elif op < 0.45 and isinstance(parent[key], list) and parent[key]:
            rng.shuffle(parent[key])
            parent[key] = parent[key][: rng.randint(0, len(parent[key]))]
        elif op < 0.5 and isinstance(parent, dict):
            parent[rng.choice(["extra", "schema_version", "complete", "comparisons", "partial"])] = \
                _json_values(rng)
        else:
            parent[key] = _json_values(rng)
    return doc


def _mutate_bytes(blob: bytes, rng: random.Random) -> bytes:
    b = bytearray(blob)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        at = rng.randint(0, max(0, len(b) - 1))
        if op < 0.2 and b:
            b[at] = rng.randint(0, 255)
        elif op < 0.35:
            del b[at: at + rng.randint(1, 64)]
        elif op < 0.6:
            b[at:at] = rng.choice(TOKENS)
        elif op < 0.7:
            b[at:at] = bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 16)))
        elif op < 0.8:
            del b[rng.randint(0, len(b)):]  # truncation
        elif op < 0.9 and b:
            span = b[at: at + rng.randint(1, 200)]
            b[at:at] = span
        else:  # swap a number for another number-ish literal
            digits = [i for i in range(len(b)) if 48 <= b[i] <= 57]
            if digits:
                i = rng.choice(digits)
                b[i: i + 1] = rng.choice([b"-", b".", b"e9", b"E-999", b"00", b"9" * 25])
    return bytes(b)


def _mutate_text(text: str, rng: random.Random) -> str:
    s = text
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        at = rng.randint(0, max(0, len(s) - 1))
        if op < 0.2 and s:
            s = s[:at] + chr(rng.choice([rng.randint(0, 127), rng.randint(0, 0x10FFFF)])) + s[at + 1:]
        elif op < 0.4:
            s = s[:at] + s[at + rng.randint(1, 40):]
        elif op < 0.75:
            s = s[:at] + rng.choice(TOML_TOKENS) + s[at:]
        elif op < 0.85:
            s = s[: rng.randint(0, len(s))]
        else:
            line = rng.choice(s.splitlines() or [""])
            s = s[:at] + "\n" + line + "\n" + s[at:]
    return s.replace("\ud800", "\ufffd") if rng.random() < 0.5 else s


def _failure(kind: str, i: int, data: Any, e: BaseException) -> str:
    shown = repr(data)
    shown = shown if len(shown) < 600 else shown[:600] + "..."
    return (f"{kind} mutant {i} (BENCHBOX_FUZZ_SEED={SEED}) raised {type(e).__name__}: {e}\n"
            f"input: {shown}\n{''.join(traceback.format_exception(e, limit=-4))}")


def _export(r: Receipt) -> None:
    from benchbox.receipts.export import to_frame, to_pyperf

    to_frame(r)
    to_pyperf(r)


def _plot(r: Receipt, golden: Receipt, turn: int) -> None:
    import io

    from benchbox.plots import KINDS, LabelledReceipt, figure

    kind = list(KINDS)[turn % len(KINDS)]
    pair = [LabelledReceipt("golden", golden), LabelledReceipt("mutant", r)]
    if kind == "sweep" and r.contract.arrival_kind not in ("poisson", "gap"):
        with pytest.raises(UsageError, match="^a sweep figure draws latency against load"):
            figure(pair[1:], kind)  # no load to draw against: refused in one line, never drawn empty
        return
    fig = figure(pair if kind == "diff" else pair[1:], kind)
    with plain_text():
        fig.savefig(io.BytesIO(), format="png", dpi=40)


# -- the fuzz tests --------------------------------------------------------------------------

def test_fuzz_receipts_only_usage_errors() -> None:
    from benchbox.receipts.diff import diff_receipts

    golden_bytes = GOLDEN.read_bytes()
    golden = json.loads(golden_bytes)
    golden_receipt = parse_receipt(golden_bytes, "golden")
    rng = random.Random(SEED)
    accepted = rejected = 0
    for i in range(EXAMPLES):
        if i % 2:
            doc = _mutate_tree(golden, rng)
            blob = json.dumps(doc, allow_nan=True).encode()
        else:
            blob = _mutate_bytes(golden_bytes, rng)
        try:
            r = parse_receipt(blob, "fuzz")
        except UsageError as e:
            msg = str(e)
            assert msg.startswith("fuzz: ") and "\n" not in msg, msg
            rejected += 1
            continue
        except Exception as e:  # noqa: BLE001 - the point: nothing but UsageError may escape
            pytest.fail(_failure("receipt", i, blob, e))
        accepted += 1
        try:  # what `benchbox show`, `diff`, `export` and `plot` do with an accepted receipt
            results_table(r)
            if accepted % DIFF_EVERY == 0:
                diff_receipts(golden_receipt, r)
            if accepted % EXPORT_EVERY == 0:
                _export(r)
            if accepted % PLOT_EVERY == 0:
                _plot(r, golden_receipt, accepted // PLOT_EVERY)
        except UsageError:
            pass
        except Exception as e:  # noqa: BLE001
            pytest.fail(_failure("accepted receipt", i, blob, e))
    assert accepted + rejected == EXAMPLES
    assert rejected > EXAMPLES // 4 and accepted > EXAMPLES // 20  # the mutations reach both sides


def test_fuzz_contracts_only_usage_errors() -> None:
    import tomllib

    texts = [(BUILTIN / f"{n}.toml").read_text() for n in builtin_names()]
    tables = [tomllib.loads(t) for t in texts]
    rng = random.Random(SEED + 1)
    accepted = rejected = 0
    for i in range(EXAMPLES):
        if i % 2:
            data: Any = _mutate_tree(rng.choice(tables), rng)
            parse: Callable[[], Any] = lambda data=data: contract_from_dict(data, "fuzz")  # noqa: E731
        else:
            data = _mutate_text(rng.choice(texts), rng)
            parse = lambda data=data: parse_contract_toml(data, "fuzz")  # noqa: E731
        try:
            c = parse()
        except UsageError as e:
            assert str(e).startswith("fuzz: ") and "\n" not in str(e), str(e)
            rejected += 1
            continue
        except Exception as e:  # noqa: BLE001
            pytest.fail(_failure("contract", i, data, e))
        accepted += 1
        # what is accepted is a real contract: contiguous, hashable, and round trips
        assert list(c.stages) == list(TIMELINE[TIMELINE.index(c.first): TIMELINE.index(c.last) + 1])
        assert list(c.stages[int(c.includes_queue):]) == list(STAGES[c.first_index: c.last_index + 1])
        assert contract_from_dict(c.to_dict(), "again").hash == c.hash
    assert accepted + rejected == EXAMPLES
    assert rejected > EXAMPLES // 4 and accepted > EXAMPLES // 50


def test_fuzz_count_meets_the_floor() -> None:
    """CI feeds at least 10,000 mutants in all unless a smaller run was asked for explicitly."""
    if "BENCHBOX_FUZZ_EXAMPLES" not in os.environ:
        assert 2 * EXAMPLES >= 10_000


# -- property tests --------------------------------------------------------------------------

NS = st.integers(min_value=0, max_value=2**63 - 1)
#: realistic sample values: up to 2**53 ns (104 days), where float quantiles are exact
REAL_NS = st.integers(min_value=0, max_value=2**53)
JSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | \
    st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
JSON = st.recursive(JSON_SCALARS, lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=12)


ROW_FIELDS = {f.name for f in dataclasses.fields(ResultRow)}


@st.composite
def result_rows(draw: st.DrawFn) -> dict[str, Any]:
    status = draw(st.sampled_from(["valid", "invalid", "failed"]))
    samples = draw(st.lists(REAL_NS, min_size=1 if status == "valid" else 0, max_size=40))
    stages = draw(st.dictionaries(st.sampled_from(STAGES), st.lists(NS, max_size=10), max_size=8))
    row = {"runner": draw(st.text(max_size=20)), "case": draw(st.text(max_size=20)), "status": status,
           "reasons": draw(st.lists(st.text(max_size=30), max_size=3)),
           "runner_report": draw(st.dictionaries(st.text(max_size=8), JSON, max_size=3)),
           "accuracy": {"passed": True} if status == "valid" else None,
           "samples_ns": samples, "round_sizes": [len(samples)] if samples else [], "stages_ns": stages,
           "summary": summarize(samples) if samples else {"n": 0}}
    # unknown keys are kept as they are; the model's own optional fields (partial, warmup, ...) are
    # not unknown, and a random JSON value in one of them is rightly refused
    unknown = st.text(max_size=8).filter(lambda k: k not in row and k not in ROW_FIELDS)
    row.update(draw(st.dictionaries(unknown, JSON, max_size=2)))
    return row


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(result_rows(), max_size=4), extra=st.dictionaries(st.text(max_size=8), JSON,
                                                                       max_size=3))
def test_receipt_round_trip(rows: list[dict[str, Any]], extra: dict[str, Any]) -> None:
    receipt = json.loads(GOLDEN.read_text())
    receipt["results"] = rows
    receipt["environment"]["extra"] = extra
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.json"
        write_receipt(path, receipt)
        assert loaded(path) == receipt
        assert os.listdir(d) == ["r.json"]


@settings(max_examples=150, deadline=None)
@given(st.lists(REAL_NS, min_size=1, max_size=400))
def test_summary_is_monotone_and_within_bounds(samples: list[int]) -> None:
    s = summarize(samples)
    lo, hi = min(samples), max(samples)
    assert s["n"] == len(samples) and s["min_ns"] == lo and s["max_ns"] == hi
    assert lo <= s["p50_ns"] <= s["p90_ns"] <= s["p99_ns"] <= hi
    assert lo <= s["mean_ns"] <= hi
    for key in ("p50_ci_ns", "p90_ci_ns", "p99_ci_ns"):
        ci = s[key]
        assert ci is None or lo <= ci[0] <= ci[1] <= hi


@settings(max_examples=150, deadline=None)
@given(st.lists(NS, min_size=0, max_size=200), st.sampled_from([0.5, 0.9, 0.99]))
def test_quantile_ci_never_raises_and_stays_in_range(samples: list[int], q: float) -> None:
    x = np.sort(np.asarray(samples, dtype=np.int64))
    ci = quantile_ci(x, q)
    if ci is not None:
        assert int(x[0]) <= int(ci[0]) <= int(ci[1]) <= int(x[-1])
    summarize(samples)  # valid nanosecond lists never make it raise


@st.composite
def contracts(draw: st.DrawFn) -> dict[str, Any]:
    clock = draw(st.sampled_from(["host", "device"]))
    lo_hi = (2, 4) if clock == "device" else (0, len(STAGES) - 1)
    a = draw(st.integers(*lo_hi))
    b = draw(st.integers(a, lo_hi[1]))
    policy = {"state": draw(st.sampled_from(["warm", "first_call"])), "fresh_request": draw(st.booleans()),
              "cuda_graphs": draw(st.booleans()),
              "sync_at_close": draw(st.sampled_from(["none", "stream", "device"])),
              "hold_stream": draw(st.booleans()) if clock == "device" else False}
    return {"name": draw(st.from_regex(r"[a-z][a-z0-9_-]{0,30}", fullmatch=True)),
            "version": draw(st.integers(1, 10**6)), "description": draw(st.text(max_size=40)),
            "stages": list(STAGES[a: b + 1]), "clock": clock,
            "policy": {k: v for k, v in policy.items() if draw(st.booleans())}}


def _toml(d: dict[str, Any]) -> str:
    def val(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return '"' + "".join(f"\\u{ord(ch):04x}" if ord(ch) < 0x20 or ord(ch) == 0x7F or ch in '"\\'
                             else ch for ch in v) + '"'

    lines = [f"{k} = {val(v)}" for k, v in d.items() if k != "policy"]
    lines.append("[policy]")
    lines += [f"{k} = {val(v)}" for k, v in d["policy"].items()]
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None)
@given(contracts())
def test_valid_contracts_parse_and_round_trip(d: dict[str, Any]) -> None:
    c = contract_from_dict(d, "prop")
    assert list(c.stages) == d["stages"] and c.first == d["stages"][0] and c.last == d["stages"][-1]
    again = contract_from_dict(c.to_dict(), "again")
    assert again == c and again.hash == c.hash
    from_toml = parse_contract_toml(_toml(d), "toml")
    assert from_toml.hash == c.hash


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "version", "description", "stages", "clock", "policy",
                                        "first", "last", "hash", "other"]), JSON, max_size=7)
       | JSON)
def test_arbitrary_contract_tables_give_usage_errors_only(d: Any) -> None:
    try:
        c = contract_from_dict(d, "prop")
    except UsageError as e:
        assert "\n" not in str(e)
        return
    assert c.stages and not math.isnan(float(c.version))


# -- a markdown and terminal-escape corpus ----------------------------------------------------

HOSTILE = ["|", "\n", "\r", "\r\n", "<!--", "-->", "<script>", "&amp;", "&", "`", "```", "[x](https://e.x)",
           "![i](u)", "*", "**", "_", "#", "\n# h", "~~", "\\", "> q", "- ", "1. ", "\x1b]52;c;aGk=\x07",
           "\x1b[2J", "\x1b[31m", "\x9b2J", "\x9d0;t\x9c", "\x07", "\x00", "\x7f", "\t", "\x0b", "\x85",
           "\u2028", "\u202e", "\u2066", "$x$", "$\\foo$", "$a^$", "$$", "{", "}", "@user", "é", "名", "a",
           "b", "https://e.x", "http:", "//", "www.", "WWW", "."]
CORPUS_EXAMPLES = max(50, EXAMPLES // 20)
#: terminal output may carry newlines between lines, nothing else below U+0020 or in C1
TERMINAL_CONTROL = re.compile("[\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u2028\\u2029"
                              "\\u202a-\\u202e\\u2066-\\u2069]")


def _hostile(rng: random.Random) -> str:
    return "".join(rng.choice(HOSTILE) for _ in range(rng.randint(1, 6)))


def _hostile_pair(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    from benchbox.contracts import load_contract

    doc = json.loads(GOLDEN.read_text())
    contract = dataclasses.replace(load_contract("public_task_call_wall"), name=_hostile(rng))
    doc["contract"] = contract.to_dict()
    doc["environment"] = {"device": _hostile(rng)}
    doc["task"]["name"] = _hostile(rng)
    names = [_hostile(rng) for _ in doc["results"]]
    for row, name in zip(doc["results"], names):
        row[rng.choice(["runner", "case"])] = name
        row["reasons"] = [_hostile(rng)]
    doc.pop("comparisons", None)
    head = copy.deepcopy(doc)
    for row in head["results"]:
        row["samples_ns"] = [v * 2 for v in row["samples_ns"]]
        row["summary"] = stats.summarize(row["samples_ns"])  # the loader checks it agrees
    return doc, head


def test_fuzz_markdown_and_terminal_output_of_hostile_names() -> None:
    from benchbox.receipts.diff import diff_receipts
    from benchbox.receipts.model import decode_receipt
    from benchbox.render import diff_json, diff_markdown, diff_table, side_by_side
    from benchbox.render.data import dumps, receipt_summary

    rng = random.Random(SEED + 2)
    for i in range(CORPUS_EXAMPLES):
        base_doc, head_doc = _hostile_pair(rng)
        try:
            base, head = decode_receipt(base_doc, "base"), decode_receipt(head_doc, "head")
            d = diff_receipts(base, head)
        except UsageError:
            continue  # e.g. two rows that the names made identical
        except Exception as e:  # noqa: BLE001
            pytest.fail(_failure("hostile receipt", i, base_doc["results"], e))
        md = diff_markdown(d)
        lines = md.split("\n")
        assert "<" not in md.replace("<br>", "") and "\r" not in md, (i, md)
        assert not re.search(r"(?<!\\)(://|\$)|(?i:www)[.]", md), (i, md)  # no autolink, no math
        assert [ln for ln in lines if ln.startswith("#")] == [lines[0]], (i, md)
        table = [ln for ln in lines if ln.startswith("|")]
        assert len(table) == 2 + len(d.rows), (i, md)
        assert all(len(re.findall(r"(?<!\\)\|", ln)) == 7 for ln in table), (i, md)
        plain = [results_table(base), diff_table(d), side_by_side([base, head], ["a", "b"])]
        for text in plain:
            assert not TERMINAL_CONTROL.search(text), (i, text)
        for doc, text in ((d.to_dict(), diff_json(d)), (receipt_summary(base), dumps(receipt_summary(base)))):
            assert not TERMINAL_CONTROL.search(text.replace("\n", "")), (i, text)
            assert json.loads(text) == json.loads(json.dumps(doc)), i  # escaped, not altered
        if i % 10 == 0:
            _export(base)
            _plot(head, base, i // 10)
