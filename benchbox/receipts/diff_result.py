"""What a diff gives: its options, one verdict per row, the result and its exit code.

The engine that fills them is :mod:`benchbox.receipts.diff`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from benchbox import stats
from benchbox.errors import FieldError, Setting, UsageError
from benchbox.receipts.conditions import (
    CONDITION_KINDS,
)
from benchbox.receipts.judge import MetricDiff, fmt_delta
from benchbox.receipts.model import Receipt

VERDICTS = ("slower", "faster", "unchanged", "unresolved", "unreliable", "invalid", "new", "removed",
            "not comparable")
#: Verdicts of a row whose statistics were taken: a diff with none of them could judge nothing.
JUDGED = ("slower", "faster", "unchanged", "unresolved")
#: Kinds of declared difference that make a row not comparable unless accepted with ``--accept``.
DECLARED_KINDS = ("device", "model", "options", "incomplete")
#: Every kind ``--accept`` takes: declared differences, then conditions. ``fallbacks`` is kept
#: for old command lines and has no effect (compiler choices never block a comparison).
ACCEPT_KINDS = (*DECLARED_KINDS, *CONDITION_KINDS, "fallbacks")
#: Runner options that do not change what is measured: where a cache lives; whether torch-compile
#: reuses the compile an earlier run pinned or compiles afresh (``pin``), and whether it first
#: compiles twice more to check its picks (``autotune_stability``). Either way the compile measured
#: is the same mode's compile of the same model, and picks that differ are named as probable causes.
#: Receipts written before ``pin`` and ``autotune_stability`` existed lack them.
IGNORED_OPTIONS = ("cache_dir", "pin", "autotune_stability")
#: Probable causes listed per row at most.
CAUSE_LINES = 6
METRICS = ("p50", "p99", "both")
#: A median difference under this multiple of the harness floor is unresolved.
FLOOR_MULTIPLE = float(stats.FLOOR_MULTIPLE)
#: Stages named in an explanation at most.
EXPLAIN_STAGES = 3


class ComparisonRefused(UsageError):
    """The two receipts cannot be compared at all (exit 2)."""


@dataclass(frozen=True)
class DiffOptions:
    """How to judge a difference."""

    threshold: float = 0.05
    metric: str = "p50"
    alpha: float = 0.05
    level: float = 0.95
    accept: frozenset[str] = frozenset()
    floor_multiple: float = FLOOR_MULTIPLE
    #: the run-to-run spread (sd of the log of a process's quantile) to take for a side of one
    #: process, measured elsewhere; None: the other side's, else the largest measured
    drift: float | None = None
    #: the power at which the smallest detectable change and the processes needed are stated
    power: float = stats.DETECT_POWER
    #: how far the time between regions may move before the pacing counts as a condition
    pacing_margin: float = 0.25

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise FieldError("threshold", f"must be between 0% and 100%, got {self.threshold:.4g}")
        if self.metric not in METRICS:
            raise FieldError("metric", f"must be one of {', '.join(METRICS)}, got {self.metric!r}")
        if not 0.0 < self.alpha < 1.0:
            raise FieldError("alpha", f"must be between 0 and 1, got {self.alpha}")
        if not 0.5 <= self.level < 1.0:
            raise FieldError("level", f"must be in [0.5, 1), got {self.level}")
        bad = sorted(set(self.accept) - set(ACCEPT_KINDS))
        if bad:
            raise FieldError("accept", f"{bad[0]!r} is not one of {', '.join(ACCEPT_KINDS)}")
        if self.drift is not None and not 0.0 <= self.drift < 5.0:
            raise FieldError("drift", f"must be a spread between 0% and 500%, got {self.drift:.4g}")
        if not 0.5 <= self.power < 1.0:
            raise FieldError("power", f"must be in [0.5, 1), got {self.power}")
        if not self.pacing_margin > 0:
            raise FieldError("pacing_margin", f"must be above 0, got {self.pacing_margin}")


@dataclass(frozen=True)
class DiffRow:
    """One (task, case, runner) row of a diff."""

    task: str
    case: str
    runner: str
    verdict: str
    reason: str = ""
    metrics: tuple[MetricDiff, ...] = ()
    base_status: str | None = None
    head_status: str | None = None
    newly_invalid: bool = False
    explanation: tuple[tuple[str, float], ...] = ()
    #: what the compiler decided differently ("bmm → triton_mm at 3 sites"), compact
    causes: tuple[str, ...] = ()
    accepted: tuple[str, ...] = ()
    #: the conditions that made the row unreliable (kinds)
    conditions: tuple[str, ...] = ()
    #: the settings its reason suggests (``accept=cpu``), not part of its JSON form
    settings: tuple[Setting, ...] = ()

    @property
    def key(self) -> tuple[str, str, str]:
        return self.task, self.case, self.runner

    @property
    def regression(self) -> bool:
        """Whether this row fails the diff (exit 1)."""
        return self.verdict == "slower" or self.newly_invalid

    @property
    def judged(self) -> MetricDiff | None:
        """The first metric that was judged (not advisory) and has an interval."""
        return next((m for m in self.metrics if not m.advisory and m.ci is not None), None)

    @property
    def detectable(self) -> float | None:
        """The smallest relative change the row could have detected (its first judged metric)."""
        m = self.judged
        return m.detectable if m is not None else None

    @property
    def needed(self) -> int | None:
        """Processes a side that would detect a change of the threshold's size."""
        m = self.judged
        return m.needed if m is not None else None

    def explain(self) -> str:
        """The stages whose medians moved most, e.g. "serialize +20.1 ms, d2h +0.4 ms"."""
        return ", ".join(f"{s} {fmt_delta(d)}" for s, d in self.explanation)


@dataclass(frozen=True)
class DiffResult:
    """A whole diff: what was compared, how, and one row per (task, case, runner)."""

    base: str
    head: str
    contract: dict[str, Any]
    options: DiffOptions
    rows: tuple[DiffRow, ...]
    notes: tuple[str, ...] = ()
    floor_ns: float | None = None
    #: processes per side (the most any row had)
    processes: tuple[int, int] = (1, 1)
    #: the settings its notes suggest (``accept=cpu``), not part of its JSON form
    settings: tuple[Setting, ...] = ()

    @property
    def exit_code(self) -> int:
        """1: a slower or newly invalid row; else 3 when a row is unreliable or no row could be
        judged at all (every one not comparable, invalid, new, removed or without an interval);
        else 0."""
        if any(r.regression for r in self.rows):
            return 1
        if any(r.verdict == "unreliable" for r in self.rows):
            return 3
        return 0 if any(r.verdict in JUDGED and r.judged is not None for r in self.rows) else 3

    def counts(self) -> dict[str, int]:
        out = {v: 0 for v in VERDICTS}
        for r in self.rows:
            out[r.verdict] += 1
        return {k: v for k, v in out.items() if v}

    def resolution(self) -> dict[str, Any] | None:
        """What the diff could resolve: the median and largest smallest-detectable change over
        its judged rows, and the processes a side that would resolve the threshold on all."""
        judged = [r for r in self.rows if r.detectable is not None]
        if not judged:
            return None
        det = sorted(r.detectable for r in judged if r.detectable is not None)
        short = [r for r in judged if (r.detectable or 0) > self.options.threshold]
        needs = [r.needed for r in short]
        return {"rows": len(judged), "median": det[len(det) // 2], "largest": det[-1],
                "rows_over_threshold": len(short),
                "needed": None if (not short or None in needs) else max(n for n in needs if n),
                "processes": list(self.processes)}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``benchbox diff --format json``)."""
        opts = asdict(self.options)
        opts["accept"] = sorted(self.options.accept)
        rows = []
        for r in self.rows:
            d = asdict(r)
            del d["settings"]
            d["explanation"] = [{"stage": s, "delta_ns": dl} for s, dl in r.explanation]
            d["explain"] = r.explain()
            d["regression"] = r.regression
            d["causes"] = list(r.causes)
            d["accepted"] = list(r.accepted)
            d["conditions"] = list(r.conditions)
            d["detectable"], d["needed"] = r.detectable, r.needed
            d["metrics"] = [{**asdict(m), "ci": list(m.ci) if m.ci else None,
                             "processes": list(m.processes), "spread": list(m.spread) if m.spread else None,
                             "df": None if m.df is None or m.df == float("inf") else m.df}
                            for m in r.metrics]
            rows.append(d)
        return {"base": self.base, "head": self.head, "contract": self.contract, "options": opts,
                "floor_ns": self.floor_ns, "notes": list(self.notes), "counts": self.counts(),
                "processes": list(self.processes), "resolution": self.resolution(),
                "exit_code": self.exit_code, "rows": rows}


def harness_floor(receipt: Receipt, clock_used: str) -> float | None:
    """The harness floor recorded in the receipt's calibration for this clock, if any."""
    v = receipt.floor(clock_used)
    return float(v) if v is not None else None
