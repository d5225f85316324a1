"""The receipt model: the single source of a receipt's shape.

The records live by concept in :mod:`~benchbox.receipts.declared` (contract and its policy,
task), :mod:`~benchbox.receipts.machine` (environment, calibration, processes),
:mod:`~benchbox.receipts.settings` (the run's settings), :mod:`~benchbox.receipts.row` (a result
row: statistics, noise, steady state, runner report, load) and
:mod:`~benchbox.receipts.comparisons`, over :mod:`~benchbox.receipts.record` (the base record);
this module holds the receipt itself and names them all.

The writer encodes these records, the loader decodes into them (checking every
declared field), and the shipped JSON Schema is generated from them
(:func:`write_schema` rewrites ``receipt.schema.json``:
``python -c "from benchbox.receipts.model import write_schema; write_schema()"``; a test keeps
the file equal to the generated one). Receipts may carry keys the model does not declare:
each record keeps them in ``extra`` and writes them back.

Adding a field to a result row is one edit (a field on :class:`ResultRow`, in ``row``) plus,
when old receipts need a value for it, one migration in :mod:`benchbox.receipts.io`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Annotated, Any, ClassVar

from benchbox.receipts.comparisons import ComparisonRow, Comparisons, Excluded
from benchbox.receipts.declared import ArrivalRecord, CaseRef, ContractRecord, PolicyRecord, TaskRecord
from benchbox.receipts.machine import (
    Calibration,
    ControlRecord,
    Environment,
    Floors,
    GitState,
    GpuInfo,
    GpuWhileWorking,
    MachineLoad,
    ProcessRecord,
    Quieting,
)
from benchbox.receipts.record import (
    BEYOND_SCHEMA,
    MAX_NAME_LENGTH,
    MAX_NS,
    SCHEMA_VERSION,
    STATUSES,
    Base,
    Fail,
)
from benchbox.receipts.row import (
    Accuracy,
    ClockCrossCheck,
    Fallback,
    Gate,
    LoadRecord,
    Noise,
    NoiseThresholds,
    Outliers,
    ResultRow,
    RunnerLog,
    RunnerReport,
    SteadyState,
    Summary,
    summary_problem,
)
from benchbox.receipts.settings import JoinedFrom, OverloadBound, Settings
from benchbox.typed import Range, decode, required, spec
from benchbox.typed.schema import json_schema

__all__ = ["BEYOND_SCHEMA", "MAX_NAME_LENGTH", "MAX_NS", "SCHEMA_VERSION", "STATUSES", "Accuracy",
           "ArrivalRecord", "Calibration", "CaseRef", "ClockCrossCheck", "ComparisonRow", "Comparisons",
           "ContractRecord", "ControlRecord", "Environment", "Excluded", "Fallback", "Floors", "Gate",
           "GitState", "GpuInfo", "GpuWhileWorking", "JoinedFrom", "LoadRecord", "MachineLoad", "Noise",
           "NoiseThresholds", "Outliers", "OverloadBound", "PolicyRecord", "ProcessRecord", "Quieting",
           "Receipt",
           "ResultRow", "RunnerLog", "RunnerReport", "Settings", "SteadyState", "Summary", "TaskRecord",
           "decode_receipt", "receipt_schema", "summary_problem", "write_schema"]

# -- the receipt ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Receipt(Base):
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
    interrupt_reason: str | None
    interrupted_at: str | None
    contract: ContractRecord = required()
    environment: Environment = required()
    task: TaskRecord = required()
    settings: Settings | None
    calibration: Calibration = required()
    results: tuple[ResultRow, ...] = required()
    comparisons: Comparisons | None
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
        env = self.environment
        return env.gpu_name or str(env.device if env.device is not None or "device" in env.nulls
                                   else "unknown")

    @property
    def device_label(self) -> str:
        """What the numbers were measured on, as a figure or a series names it: the GPU's
        name, else ``cpu (CPU model)``, else the device string."""
        env = self.environment
        if env.gpu_name:
            return env.gpu_name
        dev = str(env.device or "unknown")
        return f"{dev} ({env.cpu})" if dev == "cpu" and env.cpu else dev

    @property
    def runners(self) -> tuple[str, ...]:
        """The run's runners in the order it measured them."""
        seen = list(self.settings.runner_names if self.settings is not None else ())
        return tuple(seen + [r.runner for r in self.results if r.runner not in seen])

    @property
    def declared_baseline(self) -> str | None:
        """The runner the run compared the others against, as its settings say (None: not said)."""
        return self.settings.baseline if self.settings is not None else None

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
