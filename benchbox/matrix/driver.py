"""``benchbox matrix`` as a library call: run a plan's cells, gather their receipts into the store.

Cells already in the store (by ``settings.labels.matrix_cell``) are skipped. A cell
whose run finished (exit 0, or 1 for rows that failed a gate or a runner) has its
receipts added to the store; any other cell is failed with its reason, and whatever
receipt it left is kept under ``STORE/matrix/partial/`` (never in the store, so a
re-run measures it again). Every matrix run leaves a record under ``STORE/matrix/runs/``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import signal
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchbox.durations import left_text
from benchbox.errors import BenchboxError, FieldError, UsageError
from benchbox.fileio import write_atomic
from benchbox.harness import PhaseTimer
from benchbox.matrix.cell import CellJob, CellRun
from benchbox.matrix.executors import make_executor
from benchbox.matrix.plan import Cell, Plan
from benchbox.receipts.io import load_receipt, now_iso
from benchbox.run.config import check_environment
from benchbox.run.interrupt import Stop

Progress = Callable[[str], None]
STATUSES = ("valid", "invalid", "failed", "skipped", "not_run")


@dataclass(frozen=True)
class CellOutcome:
    """One cell's fate in one matrix run."""

    cell_id: str
    config_hash: str
    axes: dict[str, str]
    status: str
    reason: str | None = None
    wall_s: float | None = None
    host: str = ""
    exit_code: int | None = None
    #: identities of the receipts now in the store (stored now or earlier)
    receipts: tuple[str, ...] = ()
    #: receipts of a failed cell, kept outside the store
    kept: tuple[str, ...] = ()
    log: str | None = None
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class MatrixResult:
    """Every cell's outcome, the wall time of the matrix, and where its record is."""

    plan: Plan
    executor: str
    revision: str
    outcomes: list[CellOutcome]
    wall_s: float
    record: Path
    cluster: dict[str, Any] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def exit_code(self) -> int:
        """0 when every cell is valid or skipped; 1 when one failed or holds non-valid rows."""
        return 0 if all(o.status in ("valid", "skipped") for o in self.outcomes) else 1


class MatrixInterrupted(BenchboxError):
    """A signal stopped the matrix; finished cells are in the store (exit 128 + the signal's
    number: 130 for SIGINT, 143 for SIGTERM)."""

    exit_code = 130

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.exit_code = 128 + int(signum)


def _git(args: list[str]) -> str | None:
    try:
        r = subprocess.run(["git", *args], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.decode("utf-8", "replace").strip() if r.returncode == 0 else None


def current_revision() -> str:
    """The revision the matrix measures: the git commit here, plus a hash of uncommitted changes."""
    commit = _git(["rev-parse", "HEAD"])
    if commit is None:
        return "unversioned"
    diff = _git(["diff", "HEAD", "--binary"])
    if diff:
        return f"{commit}+dirty.{hashlib.sha256(diff.encode()).hexdigest()[:12]}"
    return commit


def _check_revision(revision: str) -> str:
    if not re.fullmatch(r"[\w.+\-/:]{1,200}", revision):
        raise FieldError("revision", f"{revision[:60]!r}: use letters, digits and . + - / : _ only")
    return revision


def cell_labels(plan: Plan, cell: Cell, cell_id: str, revision: str, executor: str) -> dict[str, str]:
    """The labels the driver gives each cell's receipts."""
    return {"matrix_cell": cell_id, "matrix_config": cell.config_hash, "matrix_plan": plan.name,
            "matrix_revision": revision, "matrix_executor": executor}


@dataclass(frozen=True)
class PlannedCell:
    """A cell with its identity and whether the store already holds it."""

    cell: Cell
    cell_id: str
    done: bool


def preview(plan: Plan, store_root: Path, revision: str | None = None) -> list[PlannedCell]:
    """The plan's cells and which of them the store already holds (nothing runs)."""
    from benchbox.store import Store

    rev = _check_revision(revision) if revision else current_revision()
    done = Store(store_root).cells()
    return [PlannedCell(c, c.identity(rev), c.identity(rev) in done) for c in plan.cells]


def _write_json(path: Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=1), parents=True)


class _Gatherer:
    """Turns each cell's run into an outcome: receipts into the store, or kept aside with the log."""

    def __init__(self, store_root: Path, stamp: str) -> None:
        from benchbox.store import Store, receipt_identity

        self.store = Store(store_root)
        self.identity = receipt_identity
        self.dir = Path(store_root) / "matrix"
        self.stamp = stamp

    def _keep(self, cell_id: str, run: CellRun) -> tuple[tuple[str, ...], str | None]:
        kept = []
        for name, blob in run.receipts.items():
            p = self.dir / "partial" / f"{cell_id[:12]}-{self.stamp}-{name}"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(blob)
            kept.append(str(p))
        log = None
        if run.log_tail:
            lp = self.dir / "logs" / f"{cell_id[:12]}-{self.stamp}.log"
            lp.parent.mkdir(parents=True, exist_ok=True)
            lp.write_text(run.log_tail, encoding="utf-8")
            log = str(lp)
        return tuple(kept), log

    def gather(self, planned: PlannedCell, run: CellRun) -> CellOutcome:
        cell = planned.cell
        base = {"cell_id": planned.cell_id, "config_hash": cell.config_hash, "axes": cell.axes(),
                "wall_s": run.wall_s, "host": run.host, "exit_code": run.exit_code, "labels": run.labels}
        reason = run.reason
        if reason is None:
            try:
                idents, status, reason = self._store(planned, run)
                return CellOutcome(**base, status=status, reason=reason, receipts=idents)
            except UsageError as e:
                reason = f"receipt refused: {e}"
        kept, log = self._keep(planned.cell_id, run)
        return CellOutcome(**base, status="failed", reason=reason, kept=kept, log=log)

    def _store(self, planned: PlannedCell, run: CellRun) -> tuple[tuple[str, ...], str, str | None]:
        declared = {c.hash for c in planned.cell.contracts}
        incoming = self.dir / "incoming" / f"{planned.cell_id[:12]}-{self.stamp}"
        incoming.mkdir(parents=True, exist_ok=True)
        try:
            paths, receipts = [], []
            for name, blob in run.receipts.items():
                p = incoming / name
                p.write_bytes(blob)
                r = load_receipt(p)
                if r.contract.hash not in declared:
                    raise UsageError(f"{name} was measured under contract {r.contract.name} "
                                     f"{r.contract.hash[:12]}, which the plan does not declare "
                                     "(a worker with another benchbox version?)")
                cell_id = r.settings.label("matrix_cell") if r.settings is not None else None
                if cell_id != planned.cell_id:
                    raise UsageError(f"{name} does not carry this cell's matrix_cell label")
                paths.append(p)
                receipts.append(r)
            self.store.add(paths)
        finally:
            for p in incoming.glob("*"):
                p.unlink()
            incoming.rmdir()
            with contextlib.suppress(OSError):
                incoming.parent.rmdir()
        bad = [(row.runner, row.case, row.status, (row.reasons or ("",))[0])
               for r in receipts for row in r.results if row.status != "valid"]
        idents = tuple(self.identity(r) for r in receipts)
        if not bad and run.exit_code == 0:
            return idents, "valid", None
        rows = sum(len(r.results) for r in receipts)
        first = bad[0] if bad else ("", "", "", f"exit code {run.exit_code}")
        return idents, "invalid", (f"{len(bad)} of {rows} rows not valid; first: {first[0]} × {first[1]} "
                                   f"{first[2]}: {first[3]}"[:400])


class _RunRecord:
    """One matrix run's outcomes, and its record under ``STORE/matrix/runs/``, rewritten after every cell."""

    def __init__(self, plan: Plan, executor: str, ray_address: str | None, rev: str, started: str,
                 path: Path, planned: list[PlannedCell], ex: Any) -> None:
        self.plan, self.executor, self.ray_address, self.rev = plan, executor, ray_address, rev
        self.started, self.path, self.planned, self.ex = started, path, planned, ex
        self.outcomes: dict[str, CellOutcome] = {
            p.cell_id: CellOutcome(p.cell_id, p.cell.config_hash, p.cell.axes(), "skipped",
                                   "already in the store")
            for p in planned if p.done}

    def result(self, wall: float) -> MatrixResult:
        order = [self.outcomes.get(p.cell_id) or CellOutcome(p.cell_id, p.cell.config_hash, p.cell.axes(),
                                                              "not_run", "the matrix stopped first")
                 for p in self.planned]
        return MatrixResult(self.plan, self.executor, self.rev, order, wall, self.path,
                            getattr(self.ex, "cluster", {}))

    def save(self, wall: float) -> None:
        r = self.result(wall)
        plan = self.plan
        _write_json(self.path, {"plan": plan.name, "plan_path": str(plan.path), "plan_sha256": plan.sha256,
                                "revision": self.rev, "executor": self.executor,
                                "ray_address": self.ray_address, "cluster": r.cluster,
                                "started_at": self.started, "updated_at": now_iso(),
                                "wall_s": wall, "cells": [asdict(o) for o in r.outcomes]})


def run_matrix(plan: Plan, store_root: Path, executor: str = "local", ray_address: str | None = None,
               revision: str | None = None, force: bool = False,
               progress: Progress = lambda s: None) -> MatrixResult:
    """Run every cell of ``plan`` that the store does not hold yet; gather receipts into the store.

    ``force`` runs every cell again (the store then holds both measurements).
    """
    check_environment()  # each cell's run reads it (on Ray, the remote one's; this checks the driver's)
    rev = _check_revision(revision) if revision else current_revision()
    ex = make_executor(executor, ray_address, plan.ray.get("runtime_env"))
    started = now_iso()
    stamp = started.replace(":", "").replace("-", "").replace("+0000", "Z")
    gatherer = _Gatherer(store_root, stamp)
    done = set() if force else gatherer.store.cells()
    planned = [PlannedCell(c, c.identity(rev), c.identity(rev) in done) for c in plan.cells]
    record = _RunRecord(plan, executor, ray_address, rev, started,
                        gatherer.dir / "runs" / f"{_slug(plan.name)}-{stamp}.json", planned, ex)
    phases = PhaseTimer()
    by_id = {p.cell_id: p for p in planned}

    jobs = [CellJob(p.cell, p.cell_id, cell_labels(plan, p.cell, p.cell_id, rev, executor), executor)
            for p in planned if not p.done]
    walls: list[float] = []  # the time left assumes cells one after another: Ray's concurrent ones end sooner

    def on_start(job: CellJob) -> None:
        progress(f"cell {len(walls) + 1}/{len(jobs)} {job.cell_id[:12]} {_axes_text(job.cell.axes())}: "
                 f"running{left_text(walls, len(jobs) - len(walls), 'cell')}")

    def on_done(job: CellJob, run: CellRun) -> None:
        o = gatherer.gather(by_id[job.cell_id], run)
        record.outcomes[job.cell_id] = o
        walls.append(o.wall_s or 0.0)
        wall = f"{o.wall_s:.1f} s" if o.wall_s is not None else "-"
        progress(f"cell {len(walls)}/{len(jobs)} {o.cell_id[:12]} {_axes_text(o.axes)}: {o.status} ({wall})"
                 + (f": {o.reason}" if o.reason else "") + left_text(walls, len(jobs) - len(walls), 'cell'))
        record.save(phases.seconds.get("matrix", 0.0))

    progress(f"plan {plan.name}: {len(planned)} cells, {len(planned) - len(jobs)} already in the store, "
             f"{len(jobs)} to run ({executor} executor, revision {rev[:20]})")
    _run_cells(ex, jobs, on_done, on_start, record, phases)
    wall = phases.seconds["matrix"]
    record.save(wall)
    return record.result(wall)


def _run_cells(ex: Any, jobs: list[CellJob], on_done: Callable[[CellJob, CellRun], None],
               on_start: Callable[[CellJob], None], record: _RunRecord, phases: PhaseTimer) -> None:
    """Run the cells under the matrix's own signal handling (as ``benchbox run``'s).

    SIGTERM (a scheduler, a CI cancel, a container stop) stops the matrix as Ctrl-C does, also in a
    process that started with SIGINT ignored: a local cell in progress gets one SIGINT and keeps
    what it measured (within GRACE_S), then the record is written. A second signal while that cell
    stops kills it (it is dropped); a finished cell is stored whole before a signal takes effect.
    The handlers go in once the executor has started: Ray's start installs a SIGTERM handler of
    its own (``sys.exit``) over whatever was there.
    """
    stop = Stop()

    def stored(job: CellJob, run: CellRun) -> None:
        stop.immediate = False  # a first signal waits for the cell to be stored; a second does not
        try:
            on_done(job, run)
        finally:
            stop.immediate = True
        if stop.requested:
            raise KeyboardInterrupt

    def interrupted() -> MatrixInterrupted:
        stop.exiting = True  # further signals change nothing while the record is written
        record.save(phases.seconds.get("matrix", 0.0))
        finished = sum(o.reason != "interrupted" for o in record.outcomes.values())
        return MatrixInterrupted(f"interrupted ({stop.signal_name}): {finished} of {len(record.planned)} "
                                 f"cells finished; record {record.path}", stop.signum)

    try:
        if jobs:
            ex.start()
        with stop.installed(), stop.preparing():
            try:
                with phases("matrix"):
                    ex.run_cells(jobs, stored, on_start)
            except KeyboardInterrupt:
                raise interrupted() from None
    except KeyboardInterrupt:  # while the executor started, under Python's own SIGINT handler
        raise interrupted() from None
    finally:
        ex.stop()


def _slug(name: str) -> str:
    return re.sub(r"[^\w.-]+", "-", name).strip("-")[:80] or "plan"


def _axes_text(axes: dict[str, str]) -> str:
    return " ".join(axes.values())


def render_result(result: MatrixResult) -> str:
    """The matrix as a table: one row per cell, then the counts and the wall time."""
    keys = [k for k in result.outcomes[0].axes] if result.outcomes else []
    head = ["cell", *keys, "status", "wall s", "reason"]
    rows = [[o.cell_id[:12], *(o.axes.get(k, "") for k in keys), o.status,
             f"{o.wall_s:.1f}" if o.wall_s is not None else "-", (o.reason or "")[:120]]
            for o in result.outcomes]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip() for r in [head, *rows]]
    counts = ", ".join(f"{result.count(s)} {s}" for s in STATUSES if result.count(s))
    lines.append(f"{len(result.outcomes)} cells: {counts}; wall {result.wall_s:.1f} s "
                 f"({result.executor} executor); record {result.record}")
    return "\n".join(lines)


def render_preview(planned: list[PlannedCell]) -> str:
    """The cells a plan expands to, with their identities and whether they are already stored."""
    if not planned:
        return ""
    keys = list(planned[0].cell.axes())
    head = ["cell", *keys, "in store"]
    rows = [[p.cell_id[:12], *(p.cell.axes().get(k, "") for k in keys), "yes" if p.done else "no"]
            for p in planned]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    return "\n".join("  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip() for r in [head, *rows])
