"""Sampling policy: a fixed sample count, or adaptive sampling that stops on precision only.

The adaptive rule never looks at a comparison: it stops when the p50's exact 95%
interval is narrow enough (relative half-width below the target), or when the
sample or time budget runs out. Stopping when a difference "looks significant"
would inflate false alarms, so no such rule exists here.
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchbox.errors import FieldError, UsageError
from benchbox.harness.clocks import HostClock, host_clock
from benchbox.harness.loop import Measurement
from benchbox.stats import CI_LEVEL, ci_ranks, min_n_for_ci

#: Default fixed sample count: p99 gets a two-sided 95% interval from 368 samples.
DEFAULT_SAMPLES = 400
DEFAULT_WARMUP = 5
DEFAULT_MAX_SAMPLES = 10_000
DEFAULT_MAX_TIME_S = 60.0
#: Adaptive sampling takes at least this many samples before it may stop.
ADAPTIVE_MIN_SAMPLES = 30
#: Adaptive sampling checks the precision every this many samples.
ADAPTIVE_CHECK_EVERY = 10


@dataclass(frozen=True)
class SamplingPolicy:
    """How many samples to take: ``samples`` fixed, or adaptive to ``target_ci_pct``."""

    samples: int = DEFAULT_SAMPLES
    warmup: int = DEFAULT_WARMUP
    #: stop once the p50 interval's relative half-width is below this percentage (None: fixed)
    target_ci_pct: float | None = None
    max_samples: int = DEFAULT_MAX_SAMPLES
    max_time_s: float = DEFAULT_MAX_TIME_S
    min_samples: int = ADAPTIVE_MIN_SAMPLES
    check_every: int = ADAPTIVE_CHECK_EVERY
    level: float = CI_LEVEL

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise FieldError("samples", f"must be ≥ 1, got {self.samples}")
        if self.warmup < 0:
            raise FieldError("warmup", f"must be ≥ 0, got {self.warmup}")
        if self.target_ci_pct is not None:
            if not 0.0 < self.target_ci_pct < 100.0:
                raise FieldError("target_ci", f"must be a percentage in (0, 100), got {self.target_ci_pct}")
            if self.max_samples < 1:
                raise FieldError("max_samples", f"must be ≥ 1, got {self.max_samples}")
            if not self.max_time_s > 0:
                raise FieldError("max_time_s", f"must be > 0 seconds, got {self.max_time_s}")
        if self.min_samples < 1 or self.check_every < 1:
            raise UsageError("min_samples and check_every must be ≥ 1")

    @property
    def adaptive(self) -> bool:
        return self.target_ci_pct is not None

    @property
    def limit(self) -> int:
        """The most samples the loop may take."""
        return self.max_samples if self.adaptive else self.samples

    def describe(self) -> dict[str, Any]:
        """The policy as recorded in the receipt's settings."""
        if not self.adaptive:
            return {"mode": "fixed", "samples": self.samples, "warmup": self.warmup,
                    "p99_resolvable": self.samples >= min_n_for_ci(0.99, self.level)}
        return {"mode": "adaptive", "target_ci_pct": self.target_ci_pct, "warmup": self.warmup,
                "rule": f"stop when the p50 {self.level:.0%} interval's half-width / p50 "
                        f"< {self.target_ci_pct}% (precision only)",
                "max_samples": self.max_samples, "max_time_s": self.max_time_s,
                "min_samples": self.min_samples, "check_every": self.check_every}

    def stopper(self, clock: HostClock = host_clock) -> AdaptiveStop | None:
        """The ``should_stop`` callback for Harness.measure (None for a fixed count)."""
        return AdaptiveStop(self, clock) if self.adaptive else None


class AdaptiveStop:
    """Called after every sample; returns why sampling stops, or None to go on.

    Keeps the samples sorted as they arrive so a precision check costs two look-ups.
    The time budget counts from the first sample (warm-up excluded).
    """

    def __init__(self, policy: SamplingPolicy, clock: HostClock = host_clock) -> None:
        assert policy.target_ci_pct is not None
        self.policy = policy
        self.target = policy.target_ci_pct / 100.0
        self.clock = clock
        self.t0: int | None = None
        self.sorted: list[int] = []
        self.last_half_width: float | None = None

    def half_width(self) -> float | None:
        """Relative half-width of the p50 interval of the samples so far (None: unresolved)."""
        x = self.sorted
        lo, hi = ci_ranks(len(x), 0.5, self.policy.level)
        if lo is None or hi is None:
            return None
        p50 = float(np.quantile(np.asarray(x), 0.5))
        return (x[hi] - x[lo]) / 2.0 / p50 if p50 > 0 else None

    def _pct(self) -> str:
        hw = self.last_half_width
        return "unresolved" if hw is None else f"{hw * 100:.2f}%"

    def __call__(self, m: Measurement) -> str | None:
        p = self.policy
        if self.t0 is None:
            self.t0 = self.clock()
        insort(self.sorted, m.samples_ns[-1])
        n = len(self.sorted)
        if n >= p.min_samples and (n % p.check_every == 0 or n >= p.max_samples):
            self.last_half_width = self.half_width()
            if self.last_half_width is not None and self.last_half_width < self.target:
                return (f"precision reached: p50 {p.level:.0%} interval half-width {self._pct()} "
                        f"< target {p.target_ci_pct}% after {n} samples")
        if n >= p.max_samples:
            self.last_half_width = self.half_width()
            return (f"max samples {p.max_samples} reached before the target precision "
                    f"(p50 half-width {self._pct()}, target {p.target_ci_pct}%)")
        elapsed = (self.clock() - self.t0) / 1e9
        if elapsed >= p.max_time_s:
            self.last_half_width = self.half_width()
            return (f"max time {p.max_time_s:g} s reached after {n} samples before the target "
                    f"precision (p50 half-width {self._pct()}, target {p.target_ci_pct}%)")
        return None
