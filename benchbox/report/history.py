"""The history of a store: series of (case, runner) points over commits, steps and change points.

A series never mixes tasks, contracts (by hash), sizes, dtypes or devices: those five
make a *group*, whose receipts are ordered by ``created_at``; each (case, runner) of a
group is one series. Every point is judged against its predecessor by the diff engine
(:func:`benchbox.receipts.diff.diff_receipts`, the rules of ``benchbox diff``), and
change points are found over each series' p50s by :class:`Detector`.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from benchbox.receipts.diff import ComparisonRefused, DiffOptions, DiffResult, diff_receipts
from benchbox.receipts.model import Receipt
from benchbox.report.changepoints import ChangePoint, Detector
from benchbox.store import Store


@dataclass(frozen=True)
class ReceiptRef:
    """A receipt of a group, at its place in the group's order."""

    identity: str
    commit: str | None
    created_at: str | None
    dirty: bool | None
    complete: bool
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def short(self) -> str:
        return (self.commit or "no-commit")[:8] + ("+dirty" if self.dirty else "")


@dataclass(frozen=True)
class Step:
    """The diff engine's verdict on a point against its predecessor."""

    base: str
    head: str
    verdict: str
    reason: str
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    explain: str = ""


@dataclass(frozen=True)
class Point:
    """One (receipt, case, runner) result in a series."""

    index: int
    identity: str
    status: str
    n: int
    p50_ns: int | None
    p50_ci_ns: tuple[int, int] | None
    p99_ns: int | None
    p99_ci_ns: tuple[int, int] | None
    noisy: bool
    unsettled: bool
    caveats: tuple[str, ...]
    reasons: tuple[str, ...]
    step: Step | None

    @property
    def usable(self) -> bool:
        """Valid with samples: what the diff engine compares and change points are found over."""
        return self.status == "valid" and self.n > 0 and self.p50_ns is not None


@dataclass(frozen=True)
class SeriesChange:
    """A change point of a series, with the diff engine's verdict at that commit."""

    point: Point
    found: ChangePoint


@dataclass(frozen=True)
class Series:
    """One (case, runner) of a group over time."""

    group: int
    case: str
    runner: str
    points: tuple[Point, ...]
    changes: tuple[SeriesChange, ...]


@dataclass(frozen=True)
class Group:
    """Receipts that may share a series: one task, contract hash, size, dtype and device."""

    size: str | None
    dtype: str | None
    device: str
    receipts: tuple[ReceiptRef, ...]


@dataclass(frozen=True)
class Page:
    """Everything of one (task, contract hash)."""

    task: str
    contract: dict[str, Any]
    groups: tuple[Group, ...]
    series: tuple[Series, ...]

    @property
    def contract_hash(self) -> str:
        return str(self.contract["hash"])


@dataclass(frozen=True)
class History:
    """A store's history: pages, and every diff that judged a step."""

    pages: tuple[Page, ...]
    diffs: dict[tuple[str, str], DiffResult | str]
    options: DiffOptions
    detector: Detector
    receipts: int


def _time(ts: str | None) -> datetime:
    if ts:
        try:
            t = datetime.fromisoformat(ts)
            return t.replace(tzinfo=UTC) if t.tzinfo is None else t
        except ValueError:
            pass
    return datetime.min.replace(tzinfo=UTC)


class _Receipts:
    """Stored receipts loaded on demand, the last few kept (steps are mostly consecutive)."""

    def __init__(self, store: Store, keep: int = 8) -> None:
        self.store = store
        self.keep = keep
        self.cache: OrderedDict[str, Receipt] = OrderedDict()

    def get(self, identity: str) -> Receipt:
        if identity in self.cache:
            self.cache.move_to_end(identity)
            return self.cache[identity]
        r = self.store.load(identity)
        self.cache[identity] = r
        if len(self.cache) > self.keep:
            self.cache.popitem(last=False)
        return r


def _pair(row: dict[str, Any], lo: str, hi: str) -> tuple[int, int] | None:
    return (int(row[lo]), int(row[hi])) if row[lo] is not None and row[hi] is not None else None


def _step(diff: DiffResult | str, task: str, case: str, runner: str, base: str, head: str) -> Step:
    if isinstance(diff, str):
        return Step(base, head, "not compared", diff)
    row = next((r for r in diff.rows if r.key == (task, case, runner)), None)
    if row is None:  # cannot happen for a row both receipts hold; kept explicit
        return Step(base, head, "not compared", "the row is missing from the diff")
    m = row.metrics[0] if row.metrics else None
    return Step(base, head, row.verdict, row.reason, ratio=m.ratio if m else None,
                ci=tuple(m.ci) if m and m.ci else None, explain=row.explain())


def analyze(store: Store, options: DiffOptions | None = None, detector: Detector | None = None) -> History:
    """Series, steps and change points of every receipt in ``store``."""
    import polars as pl

    opts = options or DiffOptions()
    det = detector or Detector(min_change=opts.threshold)
    index = store.index()
    rows = store.rows()
    facts = {r["identity"]: r for r in index.iter_rows(named=True)}
    loader = _Receipts(store)
    diffs: dict[tuple[str, str], DiffResult | str] = {}

    def diff(base: str, head: str) -> DiffResult | str:
        if (base, head) not in diffs:
            try:
                diffs[(base, head)] = diff_receipts(loader.get(base), loader.get(head), opts,
                                                    f"receipts/{base}.json", f"receipts/{head}.json")
            except ComparisonRefused as e:
                diffs[(base, head)] = str(e)
        return diffs[(base, head)]

    pages: list[Page] = []
    page_keys = index.select("task", "contract_hash").unique().sort("task", "contract_hash")
    for task, chash in page_keys.iter_rows():
        in_page = index.filter((pl.col("task") == task) & (pl.col("contract_hash") == chash))
        first = in_page.sort("created").get_column("identity")[-1]
        contract = loader.get(first).contract.to_json()
        groups: list[Group] = []
        series: list[Series] = []
        gkeys = in_page.select("size", "dtype", "device").unique().sort("size", "dtype", "device",
                                                                        nulls_last=True)
        for size, dtype, device in gkeys.iter_rows():
            members = [facts[i] for i in in_page.filter(
                pl.col("size").eq_missing(size) & pl.col("dtype").eq_missing(dtype)
                & (pl.col("device") == device)).get_column("identity").to_list()]
            members.sort(key=lambda r: (_time(r["created_at"]), r["identity"]))
            refs = tuple(ReceiptRef(r["identity"], r["commit"], r["created_at"], r["dirty"],
                                    bool(r["complete"]), json.loads(r["labels"] or "{}")) for r in members)
            order = {ref.identity: k for k, ref in enumerate(refs)}
            gi = len(groups)
            groups.append(Group(size, dtype, device, refs))
            grows = rows.filter(pl.col("identity").is_in(list(order)))
            for case, runner in grows.select("case", "runner").unique(maintain_order=True).iter_rows():
                srows = sorted(grows.filter((pl.col("case") == case) & (pl.col("runner") == runner))
                               .iter_rows(named=True), key=lambda r: order[r["identity"]])
                series.append(_series(gi, task, case, runner, srows, order, diff, det))
        series.sort(key=lambda s: (s.group, s.case, s.runner))
        pages.append(Page(task, contract, tuple(groups), tuple(series)))
    return History(tuple(pages), diffs, opts, det, len(facts))


def _series(gi: int, task: str, case: str, runner: str, srows: list[dict[str, Any]],
            order: dict[str, int], diff: Any, det: Detector) -> Series:
    points: list[Point] = []
    last_usable: Point | None = None
    for r in srows:
        ident = r["identity"]
        # the predecessor: the latest usable point before it, else the point just before it
        pred = last_usable or (points[-1] if points else None)
        step = None
        if pred is not None:
            step = _step(diff(pred.identity, ident), task, case, runner, pred.identity, ident)
        p = Point(index=order[ident], identity=ident, status=r["status"], n=int(r["n"] or 0),
                  p50_ns=r["p50_ns"], p50_ci_ns=_pair(r, "p50_lo_ns", "p50_hi_ns"),
                  p99_ns=r["p99_ns"], p99_ci_ns=_pair(r, "p99_lo_ns", "p99_hi_ns"),
                  noisy=bool(r["noisy"]), unsettled=bool(r["unsettled"]),
                  caveats=tuple(r["caveats"] or ()), reasons=tuple(r["reasons"] or ()), step=step)
        points.append(p)
        if p.usable:
            last_usable = p
    usable = [p for p in points if p.usable]
    found = det.find([float(p.p50_ns) for p in usable])  # type: ignore[arg-type]
    changes = tuple(SeriesChange(usable[c.index], c) for c in found)
    return Series(gi, case, runner, tuple(points), changes)
