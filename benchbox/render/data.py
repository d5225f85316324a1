"""Machine-readable forms of what the listing commands print (``--format json``).

Plain JSON-ready values: key names match the receipt's where they overlap, times are
integers in nanoseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchbox.receipts.model import Receipt
from benchbox.render.common import json_text


def dumps(value: Any) -> str:
    """Indented JSON, keys in the order built, control characters escaped (see :func:`json_text`)."""
    return json_text(value)


def receipt_summary(receipt: Receipt, path: str | None = None) -> dict[str, Any]:
    """What ``benchbox show`` prints for one receipt: the contract, task, device and each row's summary."""
    c = receipt.contract
    rows = []
    for r in receipt.results:
        s = r.summary
        rows.append({"runner": r.runner, "case": r.case, "status": r.status, "n": s.n,
                     "p50_ns": s.p50_ns, "p50_ci_ns": s.p50_ci_ns, "p90_ns": s.p90_ns, "p99_ns": s.p99_ns,
                     "p99_ci_ns": s.p99_ci_ns, "reasons": list(r.reasons)})
    out: dict[str, Any] = {"path": path} if path is not None else {}
    out.update({"contract": {"name": c.name, "first": c.first, "last": c.last, "clock": c.clock,
                             "hash": c.hash},
                "task": {"name": receipt.task.name, "size": receipt.task.size},
                "device": receipt.device, "created_at": receipt.created_at,
                "complete": receipt.is_complete, "results": rows,
                "comparisons": _comparisons(receipt)})
    return out


def _comparisons(receipt: Receipt) -> dict[str, Any] | None:
    """The runners against the baseline runner, as the table shows them (judged by the diff engine)."""
    from benchbox.render.text import runner_comparisons

    comp = runner_comparisons(receipt)
    return comp.to_json() if comp is not None else None


def contract_data(c: Any) -> dict[str, Any]:
    """A contract as ``benchbox contracts --format json`` lists it."""
    canon = c.canonical()
    return {"name": c.name, "version": c.version, "first": c.first, "last": c.last,
            "stages": list(c.stages), "clock": c.clock, "hash": c.hash, "description": c.description,
            "policy": canon["policy"]}


def tasks_data(infos: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"name": i.name, "spec": i.spec, "cases": list(i.cases), "dtypes": list(i.dtypes),
             "sizes": [{"name": s.name, "parameters": s.parameters, "detail": s.detail} for s in i.sizes]}
            for i in infos]


def runners_data(device: str, reasons: dict[str, str | None]) -> list[dict[str, Any]]:
    return [{"name": n, "device": device, "ready": r is None, "reason": r} for n, r in reasons.items()]
