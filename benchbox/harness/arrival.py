"""Pacing the timed calls by the contract's arrival: waits, the Poisson schedule, overload.

The harness owns the clock; the pacer reads only the clock the harness gives it, and
every wait happens before a call's first stamp, so it lies outside every region. Under
open-loop (Poisson) arrivals each request has a scheduled arrival time drawn from a
seeded schedule; the call starts at that time or, when the previous call is still
running, as soon as it ends. The ``queue`` stage of a sample is the time from its
scheduled arrival to its first stamp (the wait for the previous call, plus the harness's
own wake-up and bookkeeping between calls); it is 0 under closed-loop arrivals.

Where the offered rate exceeds what the runner sustains the queue grows without bound:
the pacer stops sampling once the backlog (requests due but not started) or one
request's queue time passes the declared bound, and the measurement says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchbox.contracts import Arrival
from benchbox.errors import FieldError, Setting, UsageError
from benchbox.harness.clocks import HostClock

#: Declared overload bounds: a point stops when more requests than this are due but not started,
DEFAULT_MAX_BACKLOG = 200
#: or when one request waited longer than this.
DEFAULT_MAX_QUEUE_MS = 1000.0


@dataclass(frozen=True)
class LoadBound:
    """When an open-loop measurement is declared overloaded and stopped."""

    max_backlog: int = DEFAULT_MAX_BACKLOG
    max_queue_ms: float = DEFAULT_MAX_QUEUE_MS

    def __post_init__(self) -> None:
        n = self.max_backlog
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise FieldError("max_backlog", f"must be an integer ≥ 1, got {self.max_backlog!r}")
        if not (isinstance(self.max_queue_ms, (int, float)) and 0 < self.max_queue_ms < float("inf")):
            raise FieldError("max_queue_ms", f"must be a positive number of milliseconds, got "
                                             f"{self.max_queue_ms!r}")

    def describe(self) -> dict[str, Any]:
        return {"max_backlog": self.max_backlog, "max_queue_ms": self.max_queue_ms}


def wait_until(clock: HostClock, due_ns: int, idle: str) -> None:
    """Return once ``clock()`` reads at least ``due_ns``: sleeping, or busy-reading the clock."""
    if idle == "busy":
        while clock() < due_ns:
            pass
        return
    while (left := due_ns - clock()) > 0:
        time.sleep(left / 1e9)


def poisson_offsets(rate_per_s: float, n: int, seed: int) -> np.ndarray:
    """Arrival times (ns from the start) of ``n`` requests of a Poisson process, from ``seed``.

    The schedule is a Poisson process at ``rate_per_s`` conditioned on its ``n``-th arrival
    falling at ``T = n / rate_per_s``: seeded exponential gaps, their running sum rescaled
    so that it ends at ``T``. Given the ``n``-th arrival at ``T``, the earlier arrivals of a
    Poisson process are distributed as ``n − 1`` sorted uniforms on ``[0, T]`` (the standard
    order-statistics property), which is exactly what the rescaled gaps give. So the
    schedule's own rate, ``n`` / its last arrival, is the nominal rate (to the nanosecond
    rounding), whatever the seed: the offered rate a receipt states is the one the
    requests arrived at, where an unconditioned draw of a few hundred gaps is off by ±10%.
    """
    gaps = np.random.default_rng(seed).exponential(1.0, size=n)
    times = np.cumsum(gaps)
    return np.rint(times * (n * 1e9 / rate_per_s / times[-1])).astype(np.int64)


def schedule_rate(offsets: np.ndarray) -> float | None:
    """A schedule's empirical rate, requests per second: its length / its last arrival."""
    return len(offsets) * 1e9 / float(offsets[-1]) if len(offsets) and offsets[-1] > 0 else None


class Pacer:
    """The arrival of one measurement's timed calls (after its warm-up, which runs back to back)."""

    def __init__(self, arrival: Arrival, clock: HostClock, samples: int, bound: LoadBound) -> None:
        if arrival.open_loop and arrival.rate_per_s <= 0:
            rate = Setting("rate_per_s", "REQUESTS_PER_S")
            raise UsageError(f"this contract's Poisson arrivals need a rate: give one at run time ({rate})",
                             settings=(rate,))
        self.arrival, self.clock, self.bound = arrival, clock, bound
        self.offsets = (poisson_offsets(arrival.rate_per_s, samples, arrival.seed)
                        if arrival.open_loop else None)
        self.gap_ns = int(round(arrival.gap_ms * 1e6))
        self.t0 = 0
        self.max_backlog = 0
        self.max_queue = 0
        self.overload: str | None = None

    def start(self) -> None:
        """The schedule starts now (the first arrival is one inter-arrival time later)."""
        self.t0 = self.clock()

    def before(self, i: int, last_end: int) -> int | None:
        """Wait for sample ``i``'s arrival; its scheduled time (open loop), else None."""
        if self.offsets is not None:
            due = self.t0 + int(self.offsets[i])
            wait_until(self.clock, due, self.arrival.idle)
            return due
        if self.gap_ns:
            wait_until(self.clock, (last_end if i else self.t0) + self.gap_ns, self.arrival.idle)
        return None

    def after(self, i: int, queue_ns: int, end_ns: int) -> str | None:
        """After sample ``i`` ended at ``end_ns``: why sampling stops (overload), else None."""
        if self.offsets is None:
            return None
        elapsed = end_ns - self.t0
        due = int(np.searchsorted(self.offsets, elapsed, side="right"))
        if due == len(self.offsets):  # past the sampled schedule the process goes on at its rate
            due += int((elapsed - int(self.offsets[-1])) * self.arrival.rate_per_s / 1e9)
        backlog = due - (i + 1)
        self.max_backlog = max(self.max_backlog, backlog)
        self.max_queue = max(self.max_queue, queue_ns)
        b = self.bound
        if backlog > b.max_backlog:
            self.overload = (f"backlog of {backlog} requests due but not started exceeds the bound of "
                             f"{b.max_backlog}")
        elif queue_ns > b.max_queue_ms * 1e6:
            self.overload = (f"a request waited {queue_ns / 1e6:.1f} ms in the queue, over the bound of "
                             f"{b.max_queue_ms:g} ms")
        if self.overload:
            return (f"overloaded after {i + 1} samples: the offered {self.arrival.rate_per_s:g}/s exceeds "
                    f"what the runner sustains ({self.overload}); stopped at the declared bound")
        return None

    def record(self, stages_ns: dict[str, list[int]], n: int, first_end: int, last_end: int
               ) -> dict[str, Any]:
        """The load this measurement ran under: offered and achieved rate, utilisation, overload."""
        from benchbox.contracts import STAGES

        out: dict[str, Any] = {"arrival": self.arrival.describe(), "samples": n}
        if n and self.offsets is not None:
            span = max(1, last_end - self.t0)
            service = np.sum([np.asarray(stages_ns[s][:n], dtype=np.float64) for s in STAGES], axis=0)
            util = float(self.arrival.rate_per_s * service.mean() / 1e9)
            out.update(offered_per_s=self.arrival.rate_per_s, schedule_per_s=schedule_rate(self.offsets),
                       achieved_per_s=n * 1e9 / span,
                       mean_service_ns=int(service.mean()), utilisation=round(util, 4),
                       max_backlog=self.max_backlog, max_queue_ns=int(self.max_queue),
                       bound=self.bound.describe())
            if self.overload is None and util >= 1.0:
                self.overload = (f"measured utilisation {util:.2f} ≥ 1: the queue grows without bound "
                                 "(the bound was not reached within the samples)")
            out["overloaded"] = self.overload is not None
            if self.overload:
                out["overload"] = self.overload
        elif n:
            out["achieved_per_s"] = (n - 1) * 1e9 / max(1, last_end - first_end) if n > 1 else None
        return out
