"""How a run was set up: the run's settings as its receipt records them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbox.receipts.machine import GitState
from benchbox.receipts.record import Facts
from benchbox.typed import spec


@dataclass(frozen=True, kw_only=True)
class OverloadBound(Facts):
    """The declared point past which paced arrivals count as an overload."""

    max_backlog: int | None = spec(omit_none=True, description="requests due but not started")
    max_queue_ms: float | None


@dataclass(frozen=True, kw_only=True)
class Sampling(Facts):
    """The sampling policy: a fixed count, or adaptive with its target and limits."""

    mode: str | None = spec(omit_none=True, description="fixed or adaptive")
    samples: int | None
    target_ci_pct: float | None
    warmup: int | None
    p99_resolvable: bool | None
    rule: str | None
    max_samples: int | None
    max_time_s: float | None
    min_samples: int | None
    check_every: int | None

    @property
    def fixed(self) -> bool:
        return self.mode == "fixed"


@dataclass(frozen=True, kw_only=True)
class JoinedFrom(Facts):
    """One receipt a joined receipt was made of."""

    receipt: str | None
    created_at: str | None
    git: GitState | None


@dataclass(frozen=True, kw_only=True)
class Settings(Facts):
    """The run's settings: samples, rounds, device, sampling, runners, gates, labels..."""

    warmup: int | None
    samples: int | None
    repeats: int | None = spec(omit_none=True, description="rounds, each in a fresh process or not")
    device: str | None
    sampling: Sampling | None = spec(omit_none=True, description="the sampling policy: fixed or "
                                                                 "adaptive, and its limits")
    runners: tuple[Any, ...] | None = spec(omit_none=True, description="in the order measured")
    baseline: str | None
    gates: dict[str, Any] | None = spec(omit_none=True, description="accuracy gate thresholds")
    contracts_in_run: tuple[str, ...] | None
    case_time_limit_s: float | None
    settle_s: float | None
    labels: dict[str, Any] | None = spec(omit_none=True, description="facts about the run's conditions")
    overload_bound: OverloadBound | None
    fresh_processes: bool | None
    gc_mode: str | None
    layout: str | None = spec(omit_none=True, description="fixed: address randomisation off, hash seed 0")
    combined_from: tuple[JoinedFrom, ...] | None = spec(omit_none=True, description="the receipts "
                                                                                   "joined into this one")

    def label(self, name: str) -> Any:
        """One of the run's labels (None: not given)."""
        labels = self.labels or {}
        return labels[name] if name in labels else None

    @property
    def runner_names(self) -> tuple[str, ...]:
        """The declared runners (names only), in order, once each."""
        return tuple(dict.fromkeys(r for r in self.runners or () if isinstance(r, str)))
