"""The history of a store: series of (case, runner) points over commits, and change points.

A series never mixes tasks, contracts (by hash), sizes, dtypes or devices: those five
make a *group*, whose receipts are ordered by ``created_at``; each (case, runner) of a
group is one series. Change points are found over each series' p50s by :class:`Detector`,
and each is judged by the diff engine (:func:`benchbox.receipts.diff.diff_receipts`, the
rules of ``benchbox diff``) on up to :data:`SIDE` runs either side of it, each side joined
by :func:`benchbox.receipts.combine.combine` as the rounds of one receipt.

No point is judged against its predecessor alone: a receipt of one run is one process, and
the diff engine judges the spread between processes (Welch's t over processes), so two
one-run receipts always read ``unresolved``. Runs either side of a change point are the
replications that verdict needs.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from benchbox.errors import UsageError
from benchbox.receipts.combine import combine
from benchbox.receipts.diff import ComparisonRefused, DiffOptions, DiffResult, diff_receipts
from benchbox.receipts.model import ContractRecord, Receipt
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


#: Runs taken either side of a change point to judge it (fewer where the series or a
#: neighbouring change point leaves fewer).
SIDE = 10


@dataclass(frozen=True)
class Step:
    """The diff engine's verdict at a change point: the runs before it (``base``, oldest first)
    against the runs from it on (``head``), each side combined into one receipt."""

    base: tuple[str, ...]
    head: tuple[str, ...]
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

    @property
    def usable(self) -> bool:
        """Valid with samples: what the diff engine compares and change points are found over."""
        return self.status == "valid" and self.n > 0 and self.p50_ns is not None


@dataclass(frozen=True)
class SeriesChange:
    """A change point of a series, with the diff engine's verdict on the runs either side."""

    point: Point
    found: ChangePoint
    step: Step


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
    contract: ContractRecord
    groups: tuple[Group, ...]
    series: tuple[Series, ...]

    @property
    def contract_hash(self) -> str:
        return self.contract.hash


@dataclass(frozen=True)
class History:
    """A store's history: pages, and every diff that judged a change point."""

    pages: tuple[Page, ...]
    diffs: dict[tuple[tuple[str, ...], tuple[str, ...]], DiffResult | str]
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
    """Stored receipts loaded on demand, the last few kept (a change point's two sides)."""

    def __init__(self, store: Store, keep: int = 2 * SIDE + 2) -> None:
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


def _step(diff: DiffResult | str, key: tuple[str, str, str], base: tuple[str, ...],
          head: tuple[str, ...]) -> Step:
    if isinstance(diff, str):
        return Step(base, head, "not compared", diff)
    row = next((r for r in diff.rows if r.key == key), None)
    if row is None:  # cannot happen for a row both sides hold; kept explicit
        return Step(base, head, "not compared", "the row is missing from the diff")
    m = row.metrics[0] if row.metrics else None
    return Step(base, head, row.verdict, row.reason, ratio=m.ratio if m else None,
                ci=tuple(m.ci) if m and m.ci else None, explain=row.explain())


class _Judge:
    """Diffs of combined sides, each computed once."""

    def __init__(self, loader: _Receipts, opts: DiffOptions) -> None:
        self.loader = loader
        self.opts = opts
        self.diffs: dict[tuple[tuple[str, ...], tuple[str, ...]], DiffResult | str] = {}

    def side(self, ids: tuple[str, ...]) -> Receipt:
        receipts = [self.loader.get(i) for i in ids]
        return receipts[0] if len(receipts) == 1 else combine(receipts, [f"receipts/{i}.json" for i in ids])

    def __call__(self, base: tuple[str, ...], head: tuple[str, ...]) -> DiffResult | str:
        if (base, head) not in self.diffs:
            try:
                b, h = self.side(base), self.side(head)
                self.diffs[(base, head)] = diff_receipts(b, h, self.opts, _side_name("BASE", base),
                                                         _side_name("HEAD", head))
            except (ComparisonRefused, UsageError) as e:
                self.diffs[(base, head)] = str(e)
        return self.diffs[(base, head)]


def _side_name(role: str, ids: tuple[str, ...]) -> str:
    """A side's name in its diff: the receipt, or the file ``benchbox combine`` would write."""
    return f"receipts/{ids[0]}.json" if len(ids) == 1 else f"{role.lower()}.json"


def analyze(store: Store, options: DiffOptions | None = None, detector: Detector | None = None) -> History:
    """Series, steps and change points of every receipt in ``store``."""
    import polars as pl

    opts = options or DiffOptions()
    det = detector or Detector(min_change=opts.threshold)
    index = store.index()
    rows = store.rows()
    facts = {r["identity"]: r for r in index.iter_rows(named=True)}
    loader = _Receipts(store)
    judge = _Judge(loader, opts)

    pages: list[Page] = []
    page_keys = index.select("task", "contract_hash").unique().sort("task", "contract_hash")
    for task, chash in page_keys.iter_rows():
        in_page = index.filter((pl.col("task") == task) & (pl.col("contract_hash") == chash))
        first = in_page.sort("created").get_column("identity")[-1]
        contract = loader.get(first).contract
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
                series.append(_series(gi, (task, case, runner), srows, order, judge, det))
        series.sort(key=lambda s: (s.group, s.case, s.runner))
        pages.append(Page(task, contract, tuple(groups), tuple(series)))
    return History(tuple(pages), judge.diffs, opts, det, len(facts))


def _series(gi: int, key: tuple[str, str, str], srows: list[dict[str, Any]], order: dict[str, int],
            judge: _Judge, det: Detector) -> Series:
    points = tuple(
        Point(index=order[r["identity"]], identity=r["identity"], status=r["status"], n=int(r["n"] or 0),
              p50_ns=r["p50_ns"], p50_ci_ns=_pair(r, "p50_lo_ns", "p50_hi_ns"),
              p99_ns=r["p99_ns"], p99_ci_ns=_pair(r, "p99_lo_ns", "p99_hi_ns"),
              noisy=bool(r["noisy"]), unsettled=bool(r["unsettled"]),
              caveats=tuple(r["caveats"] or ()), reasons=tuple(r["reasons"] or ()))
        for r in srows)
    usable = [p for p in points if p.usable]
    found = det.find([float(p.p50_ns) for p in usable])  # type: ignore[arg-type]
    cuts = [0, *(c.index for c in found), len(usable)]
    changes = []
    for k, c in enumerate(found):
        # up to SIDE runs either side, never across a neighbouring change point
        base = tuple(p.identity for p in usable[max(cuts[k], c.index - SIDE):c.index])
        head = tuple(p.identity for p in usable[c.index:min(cuts[k + 2], c.index + SIDE)])
        changes.append(SeriesChange(usable[c.index], c, _step(judge(base, head), key, base, head)))
    return Series(gi, key[1], key[2], points, tuple(changes))
