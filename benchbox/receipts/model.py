"""The receipt model: the single source of a receipt's shape.

The writer encodes these records, the loader decodes into them (checking every
declared field), and the shipped JSON Schema is generated from them
(:func:`write_schema` rewrites ``receipt.schema.json``:
``python -c "from benchbox.receipts.model import write_schema; write_schema()"``; a test keeps
the file equal to the generated one). Receipts may carry keys the model does not declare:
each record keeps them in ``extra`` and writes them back.

Adding a field to a result row is one edit here (a field on :class:`ResultRow`) plus,
when old receipts need a value for it, one migration in :mod:`benchbox.receipts.io`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, ClassVar, Literal

from benchbox.contracts import TIMELINE
from benchbox.receipts.typed import (
    MaxLength,
    MinItems,
    Pattern,
    Range,
    Record,
    decode,
    json_schema,
    required,
    spec,
)

SCHEMA_VERSION = 2
#: Sample values are nanoseconds in a signed 64-bit integer.
MAX_NS = 2**63 - 1

#: The longest task, size, dtype, case, runner or contract name a receipt may carry (as a task's
#: names are checked when it runs: ``benchbox.tasks.MAX_NAME_LENGTH``): names are table cells.
MAX_NAME_LENGTH = 200

Ns = Annotated[int, Range(0, MAX_NS)]
Name = Annotated[str, MaxLength(MAX_NAME_LENGTH)]
Count = Annotated[int, Range(0)]
Sha256 = Annotated[str, Pattern("[0-9a-f]{64}")]
Status = Literal["valid", "invalid", "failed"]
StageName = Literal["queue", "parse", "preprocess", "h2d", "compute", "d2h", "reduce", "answer", "serialize"]
Clock = Literal["host", "device"]
Interval = tuple[Ns, Ns]
Fail = Callable[[str], None]

assert tuple(StageName.__args__) == TIMELINE  # type: ignore[attr-defined]

#: Rules the decoder enforces that a JSON Schema cannot state (the start of their messages).
BEYOND_SCHEMA = ("round_sizes add up to", "hash ", "first is", "last is", "arrival ", "round_process ",
                 "process_probe_ns ",
                 "summary ")

STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True, kw_only=True)
class _Base(Record):
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    nulls: frozenset[str] = field(default=frozenset(), repr=False, compare=False)


# -- the contract, task and environment ----------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ArrivalRecord(_Base):
    """How calls arrived: back to back, after a fixed gap, or open-loop Poisson at a rate."""

    kind: Literal["back_to_back", "gap", "poisson"] = required()
    gap_ms: Annotated[float, Range(0)] | None = spec(omit_none=True)
    rate_per_s: Annotated[float, Range(0)] | None = spec(omit_none=True)
    idle: Literal["sleep", "busy"] | None = spec(omit_none=True, description="how waits were spent")
    seed: Count | None = spec(omit_none=True)
    set_at_run: tuple[str, ...] | None = spec(omit_none=True, description="fields given at run time "
                                                                          "(part of the hash all the same)")

    def label(self) -> str:
        if self.kind == "gap":
            return f"gap {self.gap_ms:g} ms ({self.idle})"
        if self.kind == "poisson":
            return f"poisson {self.rate_per_s:g}/s ({self.idle})"
        return "back to back"


@dataclass(frozen=True, kw_only=True)
class ContractRecord(_Base):
    """The contract's full declaration and the hash of its canonical form."""

    name: Annotated[str, MaxLength(MAX_NAME_LENGTH), Pattern(".+")] = required()
    version: Annotated[int, Range(1)] = required()
    stages: Annotated[tuple[StageName, ...], MinItems(1)] = required()
    clock: Clock = required()
    policy: dict[str, Any] = required()
    description: str | None = spec(omit_none=True)
    first: StageName = required()
    last: StageName = required()
    hash: Sha256 = required()
    source: str | None = spec(omit_none=True)
    arrival: ArrivalRecord | None = spec(omit_none=True, description="absent in receipts written before "
                                                                     "arrivals were declared: back to back")

    @property
    def arrival_kind(self) -> str:
        return self.arrival.kind if self.arrival is not None else "back_to_back"

    def canonical_hash(self) -> str:
        """The sha256 of the declaration's canonical form, as the contract computes it."""
        blob = json.dumps({"name": self.name, "version": self.version, "stages": list(self.stages),
                           "clock": self.clock, "policy": self.policy}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def check(self, raw: Mapping[str, Any], fail: Fail) -> None:
        for key, stage in (("first", self.stages[0]), ("last", self.stages[-1])):
            if getattr(self, key) != stage:
                fail(f"{key} is {getattr(self, key)!r} but the stages say {stage!r}")
        actual = self.canonical_hash()
        if actual != self.hash:
            fail(f"hash {self.hash[:12]} is not the hash of the declared contract ({actual[:12]}): "
                 "the declaration was edited after the run")
        declared = self.policy.get("arrival", {"kind": "back_to_back"})
        recorded = self.arrival.to_json() if self.arrival is not None else {"kind": "back_to_back"}
        recorded.pop("set_at_run", None)
        if recorded != declared:  # the hash covers policy.arrival, so this one must say the same
            fail(f"arrival {_arrival_text(recorded)} does not match policy.arrival "
                 f"{_arrival_text(declared)}: the declaration was edited after the run")


def _arrival_text(arrival: Any) -> str:
    if not isinstance(arrival, Mapping):
        return repr(arrival)[:80]
    return "(" + ", ".join(f"{k} {v!r:.40}" for k, v in sorted(arrival.items())) + ")"


@dataclass(frozen=True, kw_only=True)
class CaseRef(_Base):
    """A case by name and the sha256 of its request bytes."""

    name: Name = required()
    request_sha256: Sha256 = required()


@dataclass(frozen=True, kw_only=True)
class TaskRecord(_Base):
    """The task's facts: name, size, dtype, options, cases, model hash."""

    name: Name = required()
    size: Name = required()
    dtype: Name | None = spec(omit_none=True)
    options: dict[str, Any] | None = spec(omit_none=True)
    cases: tuple[CaseRef, ...] = required()
    parameters: Count | None = spec(omit_none=True)
    model_sha256: Sha256 | None = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class Floors(_Base):
    """The floor per clock: a difference under ``floor_multiple`` × it is unresolvable."""

    host: Ns | None = spec()
    device: Ns | None = spec()


@dataclass(frozen=True, kw_only=True)
class Calibration(_Base):
    """The harness's measured floors (clock read, empty call, event pair); ``error`` if it failed."""

    floors: Floors | None = spec(omit_none=True)
    error: str | None = spec(omit_none=True)

    def floor(self, clock: str) -> int | None:
        """The floor of results timed with ``clock`` (None: not measured)."""
        if self.floors is None:
            return None
        return self.floors.device if clock == "device" else self.floors.host


# -- one result row ------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Summary(_Base):
    """Statistics derived from the raw samples (``n`` only when there are none)."""

    n: Count = required()
    p50_ns: Ns | None = spec(omit_none=True)
    p90_ns: Ns | None = spec(omit_none=True)
    p99_ns: Ns | None = spec(omit_none=True)
    mean_ns: Ns | None = spec(omit_none=True)
    min_ns: Ns | None = spec(omit_none=True)
    max_ns: Ns | None = spec(omit_none=True)
    std_ns: Ns | None = spec(omit_none=True)
    ci_level: float | None = spec(omit_none=True)
    ci_method: str | None = spec(omit_none=True)
    p50_ci_ns: Interval | None = spec(omit_none=True)
    p90_ci_ns: Interval | None = spec(omit_none=True)
    p99_ci_ns: Interval | None = spec(omit_none=True)
    p99_upper_ns: Ns | None = spec(omit_none=True, description="one-sided upper bound of p99, written "
                                                               "when p99_ci_ns is null")
    unresolved: tuple[str, ...] | None = spec(omit_none=True)
    noise: dict[str, Any] | None = spec(omit_none=True)

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
        v = (self.noise or {}).get("cv")
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass(frozen=True, kw_only=True)
class Fallback(_Base):
    """One thing a runner did other than the plain path (graph break, ATen op, autotune pick...)."""

    kind: str | None = spec(omit_none=True)
    count: Count | None = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class RunnerReport(_Base):
    """What the runner says about itself: options, versions, fallbacks, preparation times."""

    options: dict[str, Any] | None = spec(omit_none=True)
    versions: dict[str, Any] | None = spec(omit_none=True)
    fallbacks: tuple[Fallback, ...] | None = spec(omit_none=True)
    prepare_s: dict[str, float] | None = spec(omit_none=True)
    build_s: float | None = spec(omit_none=True)
    log: dict[str, Any] | None = spec(omit_none=True, description="library output captured while this "
                                                                   "runner prepared and ran (warnings, "
                                                                   "compiler logs): lines, chars, text "
                                                                   "(the last 4000 characters), file")


@dataclass(frozen=True, kw_only=True)
class Gate(_Base):
    """One accuracy gate's value, threshold and verdict."""

    name: str = required()
    value: float | bool | None = spec()
    threshold: float | bool | None = spec()
    passed: bool = required()
    detail: str | None = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class Accuracy(_Base):
    """The gates of one (runner, case) against the reference."""

    passed: bool = required()
    gates: tuple[Gate, ...] | None = spec(omit_none=True)
    reference: str | None = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class LoadRecord(_Base):
    """The load paced samples ran under: offered and achieved rate, utilisation, overload."""

    arrival: dict[str, Any] = required()
    samples: Count = required()
    offered_per_s: float | None = spec(omit_none=True, description="the declared (nominal) rate")
    schedule_per_s: float | None = spec(omit_none=True, description="the seeded schedule's own rate: its "
                                        "requests / its last scheduled arrival")
    achieved_per_s: float | None = spec(omit_none=True)
    mean_service_ns: Ns | None = spec(omit_none=True, description="mean of the pipeline stages' sum")
    utilisation: float | None = spec(omit_none=True, description="offered rate × mean service time")
    max_backlog: Count | None = spec(omit_none=True, description="most requests due but not started")
    max_queue_ns: Ns | None = spec(omit_none=True)
    bound: dict[str, Any] | None = spec(omit_none=True, description="the declared overload bound")
    overloaded: bool | None = spec(omit_none=True, description="the offered rate exceeded what the runner "
                                                               "sustains: the queue grew without bound")
    overload: str | None = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class ResultRow(_Base):
    """One (runner, case): status, the runner's report, accuracy, raw samples and statistics.
    round_sizes must add up to the number of samples (checked by benchbox's loader)."""

    runner: Name = required()
    case: Name = required()
    request_sha256: Sha256 | None = spec(omit_none=True)
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
    clock_used: Clock | None = spec(omit_none=True)
    clock_note: str | None = spec(omit_none=True)
    warmup: Count | None = spec(omit_none=True)
    stop_reason: str | None = spec(omit_none=True)
    steady_state: dict[str, Any] | None = spec(omit_none=True)
    clock_cross_check: dict[str, Any] | None = spec(omit_none=True)
    load: LoadRecord | None = spec(omit_none=True, description="paced arrivals: the load the samples ran "
                                                               "under")
    round_process: tuple[Count, ...] | None = spec(
        omit_none=True, description="for each round, the index (into the receipt's processes) of the "
                                    "process that took it: rounds of one process are one replication")
    process_probe_ns: tuple[Ns, ...] | None = spec(
        omit_none=True, description="for each process that took rounds of this row (in order of its "
                                    "first round), the median of the row probe timed right before and "
                                    "after its samples: the machine's speed for memory-bound work then")

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
    if summary.mean_ns is not None and abs(summary.mean_ns - sum(int(v) for v in x) / n) > 1:
        return f"mean_ns is {summary.mean_ns} but the samples' is {sum(int(v) for v in x) / n:.1f}"
    for key, q in (("p50_ns", 0.5), ("p90_ns", 0.9), ("p99_ns", 0.99)):
        got = getattr(summary, key)
        at = (n - 1) * q
        lo, hi = int(x[int(at)]), int(x[min(n - 1, int(at) + 1)])
        if got is not None and not lo <= got <= hi:
            return f"{key} is {got} but the samples' lies in [{lo}, {hi}]"
    return None


# -- the processes that took the samples ----------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ProcessRecord(_Base):
    """One process that measured: a replication of the run. A fresh process re-draws everything
    a run depends on (memory layout, hash seed, thread placement, compile draws); rounds taken in
    one process are sub-samples of one replication."""

    pid: int | None = spec(omit_none=True)
    started_at: str | None = spec(omit_none=True, description="ISO 8601 time the process started "
                                                              "measuring (UTC)")
    source: str | None = spec(omit_none=True, description="the receipt it was joined from (combine)")
    rounds: Count | None = spec(omit_none=True, description="rounds this process took")
    load: dict[str, Any] | None = spec(omit_none=True, description="how busy the machine was as the "
                                                                   "process started (busy_fraction)")
    gpu: dict[str, Any] | None = spec(omit_none=True, description="the GPU while it worked: SM clock "
                                      "and the throttle reasons read right after each case's samples")
    control: dict[str, Any] | None = spec(omit_none=True, description="the control workload, a fixed "
                                          "piece of host work timed in this process: p50_ns, n, name")
    quieting: dict[str, Any] | None = spec(omit_none=True, description="what was done against noise: "
                                           "CPU affinity, hash seed, garbage collector, threads")


# -- comparisons between the runners of one run --------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ComparisonRow(_Base):
    """One runner against the baseline runner, for one case."""

    case: str = required()
    runner: str = required()
    baseline: str | None = spec(omit_none=True)
    p50_ratio: float = required()
    p99_ratio: float | None = spec(omit_none=True)
    p50_ratio_ci: tuple[float, float] | None = spec(omit_none=True)
    p99_ratio_ci: tuple[float, float] | None = spec(omit_none=True)
    p50_verdict: str | None = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class Excluded(_Base):
    """A row left out of the comparisons, and why."""

    runner: str = required()
    case: str = required()
    status: Status = required()
    reasons: tuple[str, ...] | None = spec(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class Comparisons(_Base):
    """Each runner against the run's baseline runner, per case (valid rows only)."""

    baseline: str | None = spec()
    rows: tuple[ComparisonRow, ...] = spec(default=())
    excluded: tuple[Excluded, ...] = spec(default=())

    def check(self, raw: Mapping[str, Any], fail: Fail) -> None:
        if self.rows and self.baseline is None:
            fail("baseline missing")


# -- the receipt ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Receipt(_Base):
    """The record of one benchbox run under one contract."""

    DESCRIPTION: ClassVar[str] = (
        "The record of one benchbox run. Generated from benchbox.receipts.model; receipts may carry "
        "more fields than listed (additionalProperties is allowed everywhere). Times are integers "
        "in nanoseconds.")

    schema_version: Annotated[int, Range(1)] = required()
    benchbox_version: str = required()
    created_at: str = required(description="ISO 8601 time the run started (UTC)")
    command: tuple[str, ...] = required()
    complete: bool | None = spec(omit_none=True, description="false until the run has measured every "
                                                             "(runner, case)")
    interrupted: bool | None = spec(omit_none=True, description="true when a signal stopped the run")
    interrupt_reason: str | None = spec(omit_none=True)
    interrupted_at: str | None = spec(omit_none=True)
    contract: ContractRecord = required()
    environment: dict[str, Any] = required()
    task: TaskRecord = required()
    settings: dict[str, Any] | None = spec(omit_none=True)
    calibration: Calibration = required()
    results: tuple[ResultRow, ...] = required()
    comparisons: Comparisons | None = spec(omit_none=True)
    processes: tuple[ProcessRecord, ...] | None = spec(
        omit_none=True, description="the processes that measured, in order (rows' round_process "
                                    "index them); absent in receipts written before it was recorded")

    def check(self, raw: Mapping[str, Any], fail: Fail) -> None:
        if self.processes is not None:
            for row in self.results:
                row.check_processes(len(self.processes), fail)

    @property
    def is_complete(self) -> bool:
        return self.complete is not False

    @property
    def device(self) -> str:
        """The GPU's name, else the device string."""
        gpu = self.environment.get("gpu")
        if isinstance(gpu, dict) and gpu.get("name"):
            return str(gpu["name"])
        return str(self.environment.get("device", "unknown"))

    @property
    def device_label(self) -> str:
        """What the numbers were measured on, as a figure or a series names it: the GPU's
        name, else ``cpu (CPU model)``, else the device string."""
        gpu = self.environment.get("gpu")
        if isinstance(gpu, dict) and gpu.get("name"):
            return str(gpu["name"])
        dev = str(self.environment.get("device") or "unknown")
        cpu = self.environment.get("cpu")
        return f"{dev} ({cpu})" if dev == "cpu" and cpu else dev

    @property
    def runners(self) -> tuple[str, ...]:
        """The run's runners in the order it measured them."""
        declared = [str(r) for r in (self.settings or {}).get("runners", []) if isinstance(r, str)]
        seen = list(dict.fromkeys(declared))
        return tuple(seen + [r.runner for r in self.results if r.runner not in seen])

    @property
    def case_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.task.cases)

    def floor(self, clock: str) -> int | None:
        return self.calibration.floor(clock)

    def with_results(self, results: tuple[ResultRow, ...]) -> Receipt:
        return replace(self, results=results)


#: result-row field → the schema_version that made it required: an older receipt may lack it (the
#: loader's migration fills it in), so the schema requires it only from that version on
ROW_FIELDS_SINCE: dict[str, int] = {"round_sizes": 2}


def receipt_schema() -> dict[str, Any]:
    """The JSON Schema of every receipt the loader accepts, generated from the model: the current
    version, and older versions without the fields their migration adds (``ROW_FIELDS_SINCE``)."""
    schema = json_schema(Receipt, **{"$id": "https://benchbox.dev/schemas/receipt.schema.json",
                                    "title": "benchbox receipt"})
    schema["properties"]["schema_version"]["maximum"] = SCHEMA_VERSION  # newer ones are refused
    later = []
    row = schema["$defs"]["ResultRow"]
    for name, since in sorted(ROW_FIELDS_SINCE.items()):
        row["required"] = [f for f in row["required"] if f != name]
        later.append({"if": {"properties": {"schema_version": {"minimum": since}}},
                      "then": {"properties": {"results": {"items": {"required": [name]}}}}})
    if later:
        schema["allOf"] = later
    return schema


def decode_receipt(data: Any, where: str) -> Receipt:
    """A checked :class:`Receipt` from a parsed (and migrated) document."""
    return decode(Receipt, data, where)


def write_schema() -> None:
    """Rewrite the shipped ``receipt.schema.json`` from the model."""
    import json
    from pathlib import Path

    path = Path(__file__).with_name("receipt.schema.json")
    path.write_text(json.dumps(receipt_schema(), indent=2, ensure_ascii=False) + "\n")
