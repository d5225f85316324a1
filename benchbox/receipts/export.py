"""Export a receipt's raw samples to formats other tools read: pyperf JSON, CSV, Parquet."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from benchbox.contracts import QUEUE, STAGES
from benchbox.errors import MissingExtraError, UsageError
from benchbox.receipts.model import Receipt, ResultRow

FORMATS = ("pyperf", "csv", "parquet")
_SUFFIX = {"pyperf": ".pyperf.json", "csv": ".csv", "parquet": ".parquet"}


def default_output(receipt_path: str | Path, fmt: str) -> Path:
    """``run.json`` → ``run.pyperf.json`` / ``run.csv`` / ``run.parquet`` next to it."""
    p = Path(receipt_path)
    return p.with_name(p.stem + _SUFFIX[fmt])


def _rows_with_samples(receipt: Receipt) -> list[ResultRow]:
    rows = [r for r in receipt.results if r.samples_ns]
    if not rows:
        raise UsageError("receipt has no result with samples to export")
    return rows


def _one_line(value: Any) -> Any:
    """A metadata value pyperf accepts: control characters (newlines among them) as escapes."""
    if not isinstance(value, str):
        return value
    return re.sub("[\x00-\x1f\x7f-\x9f]", lambda m: f"\\x{ord(m.group()):02x}", value)


def to_pyperf(receipt: Receipt) -> Any:
    """A pyperf.BenchmarkSuite: one benchmark per (runner, case), values in seconds."""
    try:
        import pyperf
    except ImportError:
        raise MissingExtraError("pyperf", "analysis") from None
    c = receipt.contract
    task = receipt.task
    benches = []
    names: dict[str, int] = {}
    for r in _rows_with_samples(receipt):
        if min(r.samples_ns) <= 0:
            raise UsageError(f"pyperf holds only positive durations, and row {r.runner!r:.60} × "
                             f"{r.case!r:.60} has a zero sample (export it as csv or parquet)")
        name = f"{task.name}/{r.case}/{r.runner}"
        names[name] = names.get(name, 0) + 1
        if names[name] > 1:  # a receipt may repeat a (runner, case); pyperf names must be unique
            name += f"#{names[name]}"
        meta = {
            "name": name,
            "unit": "second",
            "description": f"benchbox {c.name} ({c.first}..{c.last}, {c.clock} clock)",
            "benchbox_task": task.name,
            "benchbox_size": task.size,
            "benchbox_case": r.case,
            "benchbox_runner": r.runner,
            "benchbox_status": r.status,
            "benchbox_contract": c.name,
            "benchbox_contract_hash": c.hash,
            "benchbox_version": receipt.benchbox_version,
        }
        values = [v / 1e9 for v in r.samples_ns]
        run = pyperf.Run(values, metadata={k: _one_line(v) for k, v in meta.items() if v != ""},
                         collect_metadata=False)
        benches.append(pyperf.Benchmark([run]))
    return pyperf.BenchmarkSuite(benches)


def to_frame(receipt: Receipt) -> Any:
    """A polars DataFrame with one row per sample and one column per stage (nanoseconds)."""
    try:
        import polars as pl
    except ImportError:
        raise MissingExtraError("polars", "analysis") from None
    c = receipt.contract
    cols: dict[str, list[Any]] = {k: [] for k in ("task", "contract", "contract_hash", "runner", "case",
                                                  "status", "sample", "region_ns")}
    rows = _rows_with_samples(receipt)
    # queue (paced arrivals) first when any row recorded it, so old exports keep their columns
    stage_cols = ((QUEUE,) if any(QUEUE in r.stages_ns for r in rows) else ()) + STAGES
    for s in stage_cols:
        cols[f"{s}_ns"] = []
    for r in rows:
        n = len(r.samples_ns)
        stages = r.stages_ns
        cols["task"] += [receipt.task.name] * n
        cols["contract"] += [c.name] * n
        cols["contract_hash"] += [c.hash] * n
        cols["runner"] += [r.runner] * n
        cols["case"] += [r.case] * n
        cols["status"] += [r.status] * n
        cols["sample"] += list(range(n))
        cols["region_ns"] += list(r.samples_ns)
        for s in stage_cols:
            v = list(stages.get(s) or [])[:n]
            cols[f"{s}_ns"] += v + [None] * (n - len(v))
    schema = {k: (pl.Int64 if k.endswith("_ns") or k == "sample" else pl.Utf8) for k in cols}
    return pl.DataFrame(cols, schema=schema)


def export_receipt(receipt: Receipt, fmt: str, out: str | Path) -> Path:
    """Write ``receipt`` in ``fmt`` (pyperf, csv or parquet) to ``out``; return the path."""
    if fmt not in FORMATS:
        raise UsageError(f"export format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    out = Path(out)
    if out.parent and not out.parent.is_dir():
        raise UsageError(f"{out}: folder {out.parent} does not exist")
    try:
        if fmt == "pyperf":
            to_pyperf(receipt).dump(str(out), compact=False, replace=True)
        elif fmt == "csv":
            to_frame(receipt).write_csv(out)
        else:
            to_frame(receipt).write_parquet(out)
    except OSError as e:
        raise UsageError(f"{out}: cannot write: {e.strerror or e}") from None
    return out
