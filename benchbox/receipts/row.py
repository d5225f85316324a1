"""One result row of a receipt: status, the runner's report, accuracy, samples and statistics."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from benchbox import stats
from benchbox.fallbacks.records import CompileChoice, FallbackEntry
from benchbox.receipts.declared import ArrivalRecord
from benchbox.receipts.record import (
    Base,
    Clock,
    Count,
    Facts,
    Fail,
    Interval,
    Name,
    Ns,
    Sha256,
    StageName,
    Status,
)
from benchbox.receipts.settings import OverloadBound
from benchbox.typed import derived, required, spec

# -- the statistics of a row's samples -------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Outliers(Facts):
    """Tukey-fence outlier counts: beyond 1.5 IQR (and, far, 3 IQR) from the quartiles."""

    method: str | None
    low: int | None
    high: int | None
    far_low: int | None
    far_high: int | None

    @property
    def count(self) -> int:
        return (self.low or 0) + (self.high or 0)


@dataclass(frozen=True, kw_only=True)
class NoiseThresholds(Facts):
    """The limits above which a row was flagged noisy."""

    cv: float | None
    outlier_fraction: float | None


@dataclass(frozen=True, kw_only=True)
class Noise(Facts):
    """The samples' spread: coefficient of variation, MAD, robust CV, outliers."""

    cv: float | None
    mad_ns: float | None
    robust_cv: float | None = spec(omit_none=True, description="1.4826 × MAD / median")
    outliers: Outliers | None
    thresholds: NoiseThresholds | None


@dataclass(frozen=True, kw_only=True)
class SteadyState(Facts):
    """First-half against second-half medians, in sampling order (within each round): did the run
    settle?"""

    method: str | None
    threshold: float | None
    checked: bool | None
    settled: bool | None
    note: str | None
    first_half_p50_ns: float | None
    second_half_p50_ns: float | None
    shift: float | None = spec(omit_none=True, description="second half's median relative to the first")
    intervals_overlap: bool | None
    rounds_checked: int | None
    rounds_unsettled: int | None
    round: int | None = spec(omit_none=True, description="joined runs: the run (from 0) that did not "
                                                         "settle")


@dataclass(frozen=True, kw_only=True)
class ClockCrossCheck(Facts):
    """Device-timed samples checked against the host span that must contain their device work."""

    checked: bool | None
    samples: int | None
    violations: int | None = spec(omit_none=True, description="samples longer than their host span")
    tolerance_ns: float | None
    max_excess_ns: float | None
    host_span: str | None
    host_region_shorter: int | None
    note: str | None


# -- one result row ------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Summary(Base):
    """Statistics derived from the raw samples (``n`` only when there are none)."""

    n: Count = required()
    p50_ns: Ns | None
    p90_ns: Ns | None
    p99_ns: Ns | None
    mean_ns: Ns | None
    min_ns: Ns | None
    max_ns: Ns | None
    std_ns: Ns | None
    ci_level: float | None
    ci_method: str | None
    p50_ci_ns: Interval | None
    p90_ci_ns: Interval | None
    p99_ci_ns: Interval | None
    p99_upper_ns: Ns | None = spec(omit_none=True, description="one-sided upper bound of p99, written "
                                                               "when p99_ci_ns is null")
    unresolved: tuple[str, ...] | None
    noise: Noise | None

    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {
        "if": {"properties": {"n": {"minimum": 1}}},
        "then": {"required": ["p50_ns", "p90_ns", "p99_ns", "mean_ns", "min_ns", "max_ns",
                              "p50_ci_ns", "p99_ci_ns"]}}

    def check(self, raw: Mapping[str, Any], fail: Fail) -> None:
        if self.n >= 1:
            for key in self.SCHEMA_EXTRA["then"]["required"]:
                if key not in raw:
                    fail(f"{key} is missing (n = {self.n})")

    @property
    def cv(self) -> float | None:
        return float(self.noise.cv) if self.noise is not None and self.noise.cv is not None else None


@dataclass(frozen=True, kw_only=True)
class Fallback(FallbackEntry):
    """One thing a runner did other than the plain path (graph break, ATen op, autotune pick...)."""

    @property
    def kind_name(self) -> str:
        """Its kind (``other`` when it names none)."""
        return str(self.kind) if self.given("kind") else "other"

    @property
    def times(self) -> int:
        """How many it stands for: its ``count``, else one."""
        return self.count if self.count is not None else 1

    @property
    def requested(self) -> Any:
        """The op the runner's options asked to fall back (an ATen fallback; None: not asked)."""
        return self.extra["requested"] if "requested" in self.extra else None

    @property
    def called(self) -> bool:
        """Whether its report gives a number of calls other than zero."""
        return bool(self.calls)


@dataclass(frozen=True, kw_only=True)
class RunnerLog(Facts):
    """Library output captured while a runner prepared and ran."""

    lines: int | None
    chars: int | None
    text: str | None = spec(omit_none=True, description="the last 4000 characters")
    truncated: bool | None
    file: str | None


@dataclass(frozen=True, kw_only=True)
class CompileNote(Facts):
    """A part of a compiling runner's report that sums itself up in one line."""

    summary: str | None = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class CompileFacts(Facts):
    """The common part of a compiling runner's ``compile`` report: the pinned compile and the
    autotune stability check (each with its one-line summary); the rest stays the runner's own."""

    pin: CompileNote | None = spec(omit_none=True)
    autotune_stability: CompileNote | None = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class RunnerReport(Base):
    """What the runner says about itself: options, versions, fallbacks, preparation times."""

    options: dict[str, Any] | None
    versions: dict[str, Any] | None
    fallbacks: tuple[Fallback, ...] | None
    prepare_s: dict[str, float] | None
    build_s: float | None
    log: RunnerLog | None = spec(omit_none=True, description="library output captured while this "
                                                              "runner prepared and ran (warnings, "
                                                              "compiler logs): lines, chars, text "
                                                              "(the last 4000 characters), file")

    def section(self, name: str) -> Any:
        """A runner's own part of its report (``compile``, ``tf32``...: not declared here), or None."""
        return self.extra[name] if name in self.extra else None

    @property
    def compile(self) -> CompileFacts | None:
        """A compiling runner's ``compile`` report, typed in its common part (None: none)."""
        comp = self.section("compile")
        return CompileFacts.of(comp) if isinstance(comp, Mapping) else None

    @property
    def compile_choice(self) -> CompileChoice | None:
        """How a compiling runner's kernels were chosen (artifact, pin, draws), from its ``compile``
        report; None: none, or one that does not say it in the shape the runner writes."""
        return CompileChoice.read(self.section("compile"))


@dataclass(frozen=True, kw_only=True)
class Gate(Base):
    """One accuracy gate's value, threshold and verdict."""

    name: str = required()
    value: float | bool | None = spec()
    threshold: float | bool | None = spec()
    passed: bool = required()
    detail: str | None


@dataclass(frozen=True, kw_only=True)
class Accuracy(Base):
    """The gates of one (runner, case) against the reference."""

    passed: bool = required()
    gates: tuple[Gate, ...] | None
    reference: str | None


@dataclass(frozen=True, kw_only=True)
class LoadRecord(Base):
    """The load paced samples ran under: offered and achieved rate, utilisation, overload."""

    arrival: ArrivalRecord = required()
    samples: Count = required()
    offered_per_s: float | None = spec(omit_none=True, description="the declared (nominal) rate")
    schedule_per_s: float | None = spec(omit_none=True, description="the seeded schedule's own rate: its "
                                        "requests / its last scheduled arrival")
    achieved_per_s: float | None
    mean_service_ns: Ns | None = spec(omit_none=True, description="mean of the pipeline stages' sum")
    utilisation: float | None = spec(omit_none=True, description="offered rate × mean service time")
    max_backlog: Count | None = spec(omit_none=True, description="most requests due but not started")
    max_queue_ns: Ns | None
    bound: OverloadBound | None = spec(omit_none=True, description="the declared overload bound")
    overloaded: bool | None = spec(omit_none=True, description="the offered rate exceeded what the runner "
                                                               "sustains: the queue grew without bound")
    overload: str | None


@dataclass(frozen=True, kw_only=True)
class ResultRow(Base):
    """One (runner, case): status, the runner's report, accuracy, raw samples and statistics.
    round_sizes must add up to the number of samples (checked by benchbox's loader)."""

    runner: Name = required()
    case: Name = required()
    request_sha256: Sha256 | None
    status: Status = required()
    reasons: tuple[str, ...] = required()
    partial: bool | None = spec(omit_none=True, description="true for the case SIGINT stopped part "
                                                            "way; such rows are invalid")
    runner_report: RunnerReport = required()
    accuracy: Accuracy | None = required()
    samples_ns: tuple[Ns, ...] = required(description="the contract's region, one per sample")
    round_sizes: tuple[Count, ...] = required(description="samples per round, in sampling order: "
                                                          "samples_ns is their concatenation")
    stages_ns: dict[StageName, tuple[Ns, ...]] = required()
    summary: Summary = required()
    clock_used: Clock | None
    clock_note: str | None
    warmup: Count | None
    stop_reason: str | None
    steady_state: SteadyState | None
    clock_cross_check: ClockCrossCheck | None
    load: LoadRecord | None = spec(omit_none=True, description="paced arrivals: the load the samples ran "
                                                               "under")
    round_process: tuple[Count, ...] | None = spec(
        omit_none=True, description="for each round, the index (into the receipt's processes) of the "
                                    "process that took it: rounds of one process are one replication")
    process_probe_ns: tuple[Ns, ...] | None = spec(
        omit_none=True, description="for each process that took rounds of this row (in order of its "
                                    "first round), the median of the process probe timed at the start "
                                    "of that process's run, before the task was loaded: the "
                                    "machine's speed for memory-bound work then")
    #: ``noisy`` and/or ``unsettled`` (in the order of :data:`benchbox.stats.FLAG_REASONS`): the flags
    #: its statistics raised, set by the code that decides them; the receipt records them as reasons
    #: (``noise: ...``, ``unsettled: ...``), which :meth:`derive` reads them back from
    flags: tuple[str, ...] = derived(default=())

    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {
        "if": {"properties": {"status": {"const": "valid"}}},
        "then": {"properties": {"accuracy": {"type": "object", "properties": {"passed": {"const": True}}},
                                "samples_ns": {"minItems": 1}}}}

    def check(self, raw: Mapping[str, Any], fail: Fail) -> None:
        if self.status == "valid":
            if self.accuracy is None or not self.accuracy.passed:
                fail("a valid row needs accuracy.passed = true")
            if not self.samples_ns:
                fail("a valid row needs samples")
        if sum(self.round_sizes) != len(self.samples_ns):
            fail(f"round_sizes add up to {sum(self.round_sizes)}, not to the {len(self.samples_ns)} samples")
        problem = summary_problem(self.samples_ns, self.summary)
        if problem is not None:
            fail(f"summary {problem}: the summary was edited, or written for other samples")

    def derive(self) -> ResultRow:
        """The row as decoded, its flags read from the reasons that record them."""
        flags = tuple(f for f, start in stats.FLAG_REASONS.items()
                      if any(r.startswith(start) for r in self.reasons))
        return self if flags == self.flags else dataclasses.replace(self, flags=flags)

    @property
    def key(self) -> tuple[str, str]:
        return self.runner, self.case

    def check_processes(self, processes: int, fail: Fail) -> None:
        """round_process, where given, names a process of the receipt for every round."""
        rp = self.round_process
        if rp is None:
            return
        if len(rp) != len(self.round_sizes):
            fail(f"round_process of {self.runner}/{self.case} has {len(rp)} entries for "
                 f"{len(self.round_sizes)} rounds")
        elif rp and max(rp) >= processes:
            fail(f"round_process of {self.runner}/{self.case} names process {max(rp)}, but the receipt "
                 f"lists {processes}")
        elif self.process_probe_ns is not None and len(self.process_probe_ns) != len(set(rp)):
            fail(f"process_probe_ns of {self.runner}/{self.case} has {len(self.process_probe_ns)} entries "
                 f"for {len(set(rp))} processes")

    def rounds(self) -> list[tuple[int, ...]]:
        """The samples of each round, in sampling order."""
        out, at = [], 0
        for n in self.round_sizes:
            out.append(self.samples_ns[at:at + n])
            at += n
        return out

    @property
    def noisy(self) -> bool:
        return "noisy" in self.flags

    @property
    def unsettled(self) -> bool:
        return "unsettled" in self.flags

    @property
    def measured(self) -> bool:
        return bool(self.samples_ns) and self.summary.p50_ns is not None

    @property
    def usable(self) -> bool:
        """Valid and measured: the rows comparisons may use."""
        return self.status == "valid" and bool(self.samples_ns)

    @property
    def clock(self) -> str:
        return self.clock_used or "host"

    @property
    def fallbacks(self) -> tuple[Fallback, ...]:
        return self.runner_report.fallbacks or ()

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.runner_report.options or {})


def summary_problem(samples: tuple[int, ...], summary: Summary) -> str | None:
    """Where a row's summary contradicts its samples (None: it agrees).

    n, min and max must be exact; the mean within a nanosecond of the exact mean; p50, p90 and
    p99 between the two order statistics that any interpolation rule takes them from, so a
    summary written by an earlier version (another quantile rule) still agrees.
    """
    if not samples:
        return None if summary.p50_ns is None else f"gives p50_ns {summary.p50_ns} for no samples"
    if summary.n == 0 and all(getattr(summary, k) is None for k in ("min_ns", "max_ns", "mean_ns", "p50_ns")):
        return None  # no statistics (they failed, or the row ended first): it claims nothing
    import numpy as np

    x = np.sort(np.asarray(samples, dtype=np.int64))
    n = len(x)
    if summary.n != n:
        return f"n is {summary.n} but there are {n} samples"
    for key, want in (("min_ns", int(x[0])), ("max_ns", int(x[-1]))):
        got = getattr(summary, key)
        if got is not None and got != want:
            return f"{key} is {got} but the samples' is {want}"
    mean = sum(map(int, samples)) / n  # exact: Python integers do not overflow
    if summary.mean_ns is not None and abs(summary.mean_ns - mean) > 1:
        return f"mean_ns is {summary.mean_ns} but the samples' is {mean:.1f}"
    for key, q in (("p50_ns", 0.5), ("p90_ns", 0.9), ("p99_ns", 0.99)):
        got = getattr(summary, key)
        at = (n - 1) * q
        lo, hi = int(x[int(at)]), int(x[min(n - 1, int(at) + 1)])
        if got is not None and not lo <= got <= hi:
            return f"{key} is {got} but the samples' lies in [{lo}, {hi}]"
    return None


