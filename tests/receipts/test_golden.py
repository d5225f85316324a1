"""The receipt a run writes has the golden receipt's shape and values, apart from timings.

``tests/golden/receipt-v2.json`` (``tests.support.GOLDEN``, the current schema version) was
written by ``benchbox run --runner torch-eager --case invoice --case outage --samples 30
--warmup 1 --out tests/golden/receipt-v2.json`` on a machine at rest (30 samples: the fewest a
process needs for a p50 verdict); regenerate it with that command only when a run writes a new
field.
A run of the same command must write the same document: the same keys everywhere, the
same strings and booleans, the same list lengths; only what a timing moves (numbers,
the environment, the caveats that depend on the spread) may differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchbox.run import RunConfig, run
from tests.support import GOLDEN

#: Paths (dotted, list indices as []) whose values depend on the machine or the moment.
VOLATILE = ("created_at", "command", "environment", "results[].reasons", "results[].clock_note",
            "results[].steady_state", "results[].summary.unresolved", "processes[].started_at",
            "processes[].load", "processes[].quieting.cpus", "processes[].quieting.cpu_count",
            "processes[].quieting.hash_seed", "processes[].quieting.threads")


def _volatile(path: str) -> bool:
    return any(path == v or path.startswith(v + ".") for v in VOLATILE)


def differences(golden: Any, written: Any, path: str = "") -> list[str]:
    """Where ``written`` differs from ``golden`` in anything but timing-dependent values."""
    if _volatile(path):
        return [] if type(golden) is type(written) or None in (golden, written) else [
            f"{path}: {type(golden).__name__} → {type(written).__name__}"]
    if isinstance(golden, dict) and isinstance(written, dict):
        out = [f"{path}.{k}: missing" for k in golden if k not in written]
        out += [f"{path}.{k}: added" for k in written if k not in golden]
        for k in golden:
            if k in written:
                out += differences(golden[k], written[k], f"{path}.{k}" if path else k)
        return out
    if isinstance(golden, list) and isinstance(written, list):
        if len(golden) != len(written):
            return [f"{path}: {len(golden)} items → {len(written)}"]
        return [d for g, w in zip(golden, written) for d in differences(g, w, f"{path}[]")]
    if isinstance(golden, (int, float)) and not isinstance(golden, bool):
        ok = isinstance(written, (int, float)) and not isinstance(written, bool) \
            and isinstance(golden, int) == isinstance(written, int)
        return [] if ok else [f"{path}: {golden!r} → {written!r}"]
    return [] if golden == written else [f"{path}: {golden!r} → {written!r}"]


def test_differences_sees_a_renamed_key_a_changed_string_and_a_changed_type() -> None:
    golden = json.loads(GOLDEN.read_text())
    bad = json.loads(GOLDEN.read_text())
    bad["results"][0]["status_"] = bad["results"][0].pop("status")
    bad["contract"]["clock"] = "device"
    bad["results"][1]["summary"]["p50_ns"] = 1.5
    found = differences(golden, bad)
    assert "results[].status: missing" in found and "results[].status_: added" in found
    assert any(d.startswith("contract.clock") for d in found)
    assert any(d.startswith("results[].summary.p50_ns") for d in found)
    assert differences(golden, golden) == []


def test_a_run_writes_the_golden_receipt_apart_from_timings(tmp_path: Path) -> None:
    golden = json.loads(GOLDEN.read_text())
    outcome = run(RunConfig(runners=("torch-eager",), cases=("invoice", "outage"), samples=30, warmup=1,
                            out=tmp_path / "r.json", command=tuple(golden["command"])))
    written = json.loads(outcome.path.read_text())
    assert differences(golden, written) == []
