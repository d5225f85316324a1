"""Where and how a run measured: the harness's calibration and the processes that took samples."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbox.receipts.record import Base, Count, Ns
from benchbox.receipts.typed import spec


@dataclass(frozen=True, kw_only=True)
class Floors(Base):
    """The floor per clock: a difference under ``floor_multiple`` × it is unresolvable."""

    host: Ns | None = spec()
    device: Ns | None = spec()


@dataclass(frozen=True, kw_only=True)
class Calibration(Base):
    """The harness's measured floors (clock read, empty call, event pair); ``error`` if it failed."""

    floors: Floors | None = spec(omit_none=True)
    error: str | None = spec(omit_none=True)

    def floor(self, clock: str) -> int | None:
        """The floor of results timed with ``clock`` (None: not measured)."""
        if self.floors is None:
            return None
        return self.floors.device if clock == "device" else self.floors.host


# -- the processes that took the samples ----------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ProcessRecord(Base):
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


