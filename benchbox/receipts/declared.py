"""The receipt's declarations: the contract (its policy and arrivals) and the task."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from benchbox.receipts.record import MAX_NAME_LENGTH, Base, Clock, Count, Facts, Fail, Name, Sha256, StageName
from benchbox.typed import MaxLength, MinItems, Pattern, Range, required, spec

# -- the contract, task and environment ----------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ArrivalRecord(Base):
    """How calls arrived: back to back, after a fixed gap, or open-loop Poisson at a rate."""

    kind: Literal["back_to_back", "gap", "poisson"] = required()
    gap_ms: Annotated[float, Range(0)] | None
    rate_per_s: Annotated[float, Range(0)] | None
    idle: Literal["sleep", "busy"] | None = spec(omit_none=True, description="how waits were spent")
    seed: Count | None
    set_at_run: tuple[str, ...] | None = spec(omit_none=True, description="fields given at run time "
                                                                          "(part of the hash all the same)")

    def label(self) -> str:
        if self.kind == "gap":
            return f"gap {self.gap_ms:g} ms ({self.idle})"
        if self.kind == "poisson":
            return f"poisson {self.rate_per_s:g}/s ({self.idle})"
        return "back to back"


@dataclass(frozen=True, kw_only=True)
class PolicyRecord(Facts):
    """The contract's policy: state, request freshness, CUDA graphs, synchronization, arrivals."""

    state: str | None
    fresh_request: bool | None
    cuda_graphs: bool | None
    sync_at_close: str | None
    hold_stream: bool | None
    event_floor: str | None
    saturated: bool | None
    arrival: ArrivalRecord | None = spec(omit_none=True, description="absent: back to back")


@dataclass(frozen=True, kw_only=True)
class ContractRecord(Base):
    """The contract's full declaration and the hash of its canonical form."""

    name: Annotated[str, MaxLength(MAX_NAME_LENGTH), Pattern(".+")] = required()
    version: Annotated[int, Range(1)] = required()
    stages: Annotated[tuple[StageName, ...], MinItems(1)] = required()
    clock: Clock = required()
    policy: PolicyRecord = required()
    description: str | None
    first: StageName = required()
    last: StageName = required()
    hash: Sha256 = required()
    source: str | None
    arrival: ArrivalRecord | None = spec(omit_none=True, description="absent in receipts written before "
                                                                     "arrivals were declared: back to back")

    @property
    def arrival_kind(self) -> str:
        return self.arrival.kind if self.arrival is not None else "back_to_back"

    def canonical_hash(self) -> str:
        """The sha256 of the declaration's canonical form, as the contract computes it."""
        blob = json.dumps({"name": self.name, "version": self.version, "stages": list(self.stages),
                           "clock": self.clock, "policy": self.policy.to_json()},
                          sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def check(self, raw: Mapping[str, Any], fail: Fail) -> None:
        for key, stage in (("first", self.stages[0]), ("last", self.stages[-1])):
            if getattr(self, key) != stage:
                fail(f"{key} is {getattr(self, key)!r} but the stages say {stage!r}")
        actual = self.canonical_hash()
        if actual != self.hash:
            fail(f"hash {self.hash[:12]} is not the hash of the declared contract ({actual[:12]}): "
                 "the declaration was edited after the run")
        declared = _arrival_json(self.policy.arrival)
        recorded = _arrival_json(self.arrival)
        recorded.pop("set_at_run", None)
        if recorded != declared:  # the hash covers policy.arrival, so this one must say the same
            fail(f"arrival {_arrival_text(recorded)} does not match policy.arrival "
                 f"{_arrival_text(declared)}: the declaration was edited after the run")


def _arrival_json(arrival: ArrivalRecord | None) -> dict[str, Any]:
    return arrival.to_json() if arrival is not None else {"kind": "back_to_back"}


def _arrival_text(arrival: Any) -> str:
    if not isinstance(arrival, Mapping):
        return repr(arrival)[:80]
    return "(" + ", ".join(f"{k} {v!r:.40}" for k, v in sorted(arrival.items())) + ")"


@dataclass(frozen=True, kw_only=True)
class CaseRef(Base):
    """A case by name and the sha256 of its request bytes."""

    name: Name = required()
    request_sha256: Sha256 = required()


@dataclass(frozen=True, kw_only=True)
class TaskRecord(Base):
    """The task's facts: name, size, dtype, options, cases, model hash."""

    name: Name = required()
    size: Name = required()
    dtype: Name | None
    options: dict[str, Any] | None
    cases: tuple[CaseRef, ...] = required()
    parameters: Count | None
    model_sha256: Sha256 | None


