"""The store's tables, derived from its receipts: one row per receipt (``receipts.parquet``) and
one per (receipt, runner, case) (``rows.parquet``), and their Parquet schemas."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from benchbox import stats
from benchbox.errors import MissingExtraError
from benchbox.receipts.model import Receipt, ResultRow

RECEIPTS_DIR = "receipts"
#: Label that a matrix run puts on each of its receipts (``settings.labels``).
MATRIX_CELL = "matrix_cell"


def labels_of(receipt: Receipt) -> dict[str, str]:
    """``settings.labels`` as strings (empty when the receipt has none)."""
    labels = receipt.settings.labels if receipt.settings is not None else None
    if not isinstance(labels, dict):
        return {}
    return {str(k): str(v) for k, v in labels.items()}


def series_key(task: str, contract_hash: str, size: Any, dtype: Any, device: str) -> str:
    """The part of a series' identity shared by every (case, runner) of one receipt."""
    return json.dumps([task, contract_hash, size, dtype, device], separators=(",", ":"))


def parse_time(ts: str | None) -> datetime | None:
    if not ts:
        return None
    try:
        t = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _ci(ci: tuple[int, int] | None) -> tuple[int | None, int | None]:
    return (ci[0], ci[1]) if ci is not None else (None, None)


def receipt_facts(identity: str, receipt: Receipt, file_sha256: str | None = None) -> dict[str, Any]:
    """The receipts-table row of one loaded receipt (``file_sha256``: of the stored file's bytes)."""
    task, contract, env = receipt.task, receipt.contract, receipt.environment
    commit, dirty = (env.git.commit, env.git.dirty) if env.git is not None else (None, None)
    labels = labels_of(receipt)
    return {
        "identity": identity,
        "path": f"{RECEIPTS_DIR}/{identity}.json",
        "created_at": receipt.created_at,
        "created": parse_time(receipt.created_at),
        "commit": commit if isinstance(commit, str) else None,
        "dirty": dirty if isinstance(dirty, bool) else None,
        "task": task.name,
        "size": task.size,
        "dtype": task.dtype,
        "model_sha256": task.model_sha256,
        "contract": contract.name,
        "contract_version": contract.version,
        "contract_hash": contract.hash,
        "clock": contract.clock,
        "device": receipt.device_label,
        "hostname": str(env.hostname or "") or None,
        "benchbox_version": receipt.benchbox_version,
        "complete": receipt.is_complete,
        "interrupted": receipt.interrupted is True,
        "n_results": len(receipt.results),
        "labels": json.dumps(labels, sort_keys=True, ensure_ascii=False),
        "matrix_cell": labels.get(MATRIX_CELL),
        "file_sha256": file_sha256,
    }


def _caveats(row: ResultRow) -> tuple[list[str], tuple[str, ...]]:
    """The row's caveats as its statistics give them now, and the flags they raise."""
    try:
        return stats.flagged_caveats(row.summary.to_json(), row.steady_state)
    except (TypeError, KeyError, ValueError):  # a hand-made summary missing noise fields
        starts = tuple(stats.FLAG_REASONS.values())
        return [r for r in row.reasons if r.startswith(starts)], row.flags


def result_rows(identity: str, receipt: Receipt) -> list[dict[str, Any]]:
    """The rows-table rows of one loaded receipt: one per (runner, case)."""
    facts = receipt_facts(identity, receipt)
    shared = {k: facts[k] for k in ("identity", "created_at", "created", "commit", "dirty", "task", "size",
                                     "dtype", "contract", "contract_hash", "clock", "device", "labels",
                                     "matrix_cell")}
    shared["series"] = series_key(facts["task"], facts["contract_hash"], facts["size"], facts["dtype"],
                                  facts["device"])
    out = []
    for row in receipt.results:
        s = row.summary
        cav, flags = _caveats(row)
        p50, p90, p99 = _ci(s.p50_ci_ns), _ci(s.p90_ci_ns), _ci(s.p99_ci_ns)
        out.append({
            **shared,
            "runner": row.runner,
            "case": row.case,
            "status": row.status,
            "partial": row.partial is True,
            "clock_used": row.clock,
            "n": s.n,
            "p50_ns": s.p50_ns, "p50_lo_ns": p50[0], "p50_hi_ns": p50[1],
            "p90_ns": s.p90_ns, "p90_lo_ns": p90[0], "p90_hi_ns": p90[1],
            "p99_ns": s.p99_ns, "p99_lo_ns": p99[0], "p99_hi_ns": p99[1],
            "p99_upper_ns": s.p99_upper_ns,
            "mean_ns": s.mean_ns, "min_ns": s.min_ns, "max_ns": s.max_ns,
            "cv": s.cv,
            "noisy": "noisy" in flags,
            "unsettled": "unsettled" in flags,
            "caveats": cav,
            "reasons": list(row.reasons),
        })
    return out


def polars() -> Any:
    try:
        import polars as pl
    except ImportError:
        raise MissingExtraError("polars", "analysis") from None
    return pl


def schemas(pl: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    ts = pl.Datetime("us", "UTC")
    index = {"identity": pl.Utf8, "path": pl.Utf8, "created_at": pl.Utf8, "created": ts, "commit": pl.Utf8,
             "dirty": pl.Boolean, "task": pl.Utf8, "size": pl.Utf8, "dtype": pl.Utf8,
             "model_sha256": pl.Utf8, "contract": pl.Utf8, "contract_version": pl.Int64,
             "contract_hash": pl.Utf8, "clock": pl.Utf8, "device": pl.Utf8, "hostname": pl.Utf8,
             "benchbox_version": pl.Utf8, "complete": pl.Boolean, "interrupted": pl.Boolean,
             "n_results": pl.Int64, "labels": pl.Utf8, "matrix_cell": pl.Utf8, "file_sha256": pl.Utf8}
    rows = {"identity": pl.Utf8, "created_at": pl.Utf8, "created": ts, "commit": pl.Utf8,
            "dirty": pl.Boolean, "task": pl.Utf8, "size": pl.Utf8, "dtype": pl.Utf8, "contract": pl.Utf8,
            "contract_hash": pl.Utf8, "clock": pl.Utf8, "device": pl.Utf8, "labels": pl.Utf8,
            "matrix_cell": pl.Utf8, "series": pl.Utf8, "runner": pl.Utf8, "case": pl.Utf8,
            "status": pl.Utf8, "partial": pl.Boolean, "clock_used": pl.Utf8, "n": pl.Int64}
    for q in ("p50", "p90", "p99"):
        rows.update({f"{q}_ns": pl.Int64, f"{q}_lo_ns": pl.Int64, f"{q}_hi_ns": pl.Int64})
    rows.update({"p99_upper_ns": pl.Int64, "mean_ns": pl.Int64, "min_ns": pl.Int64, "max_ns": pl.Int64,
                 "cv": pl.Float64, "noisy": pl.Boolean, "unsettled": pl.Boolean,
                 "caveats": pl.List(pl.Utf8), "reasons": pl.List(pl.Utf8)})
    return index, rows
