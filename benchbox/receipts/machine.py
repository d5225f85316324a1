"""Where a run measured: the machine's environment, the harness's calibration and the processes
that took samples."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbox.receipts.record import Base, Count, Facts, Ns
from benchbox.typed import spec

# -- the environment ------------------------------------------------------------------------

#: A fact as the machine reported it: any JSON value (a receipt is not refused for an odd one; a
#: reader that needs a kind checks it).
Fact = Any


@dataclass(frozen=True, kw_only=True)
class MachineLoad(Facts):
    """How busy the machine was as a run (or a process) started."""

    cores: Fact
    load_avg_1min: Fact
    per_core: Fact = spec(omit_none=True, description="the load average per core")
    busy_fraction: Fact = spec(omit_none=True, description="the fraction of CPU time other work took "
                                                           "over window_s")
    window_s: Fact
    run: Fact = spec(omit_none=True, description="joined runs: the busiest run, from 1")
    of_runs: Fact

    @property
    def windowed(self) -> bool:
        """Whether there is a window's busy fraction (else ``busy`` is the load average per core)."""
        v = self.busy_fraction
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    @property
    def busy(self) -> float | None:
        """The fraction of the CPU other work took (else the load average per core; None: unknown)."""
        for v in (self.busy_fraction, self.per_core):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
        return None


@dataclass(frozen=True, kw_only=True)
class GitState(Facts):
    """The commit of the checkout that ran, and whether it had changes."""

    commit: Fact
    dirty: Fact


@dataclass(frozen=True, kw_only=True)
class GpuInfo(Facts):
    """The GPU a run measured on (its properties, and what nvidia-smi reports)."""

    name: Fact
    capability: Fact
    memory_bytes: Fact
    multiprocessors: Fact
    driver: Fact
    power_limit_w: Fact


@dataclass(frozen=True, kw_only=True)
class Environment(Facts):
    """What the run ran on: software versions, device, CPU, git state, load at start."""

    python: Fact
    platform: Fact
    hostname: Fact
    cpu: Fact
    cpu_count: Fact
    device: Fact
    benchbox: Fact
    git: GitState | None
    system: dict[str, Any] | None = spec(omit_none=True, description="pyperf's system metadata, CPU "
                                                                     "governors")
    load: MachineLoad | None
    torch: Fact
    torch_threads: Fact
    cuda: Fact
    gpu: GpuInfo | None
    gpu_state_before: dict[str, Any] | None
    gpu_state_after: dict[str, Any] | None
    load_by_run: list[float | None] | None = spec(omit_none=True, description="joined runs: each "
                                                        "run's busy fraction at start (a run with no "
                                                        "load window: its load average per core)")

    @property
    def gpu_name(self) -> str | None:
        return str(self.gpu.name) if self.gpu is not None and self.gpu.name else None


@dataclass(frozen=True, kw_only=True)
class Floors(Base):
    """The floor per clock: a difference under ``floor_multiple`` × it is unresolvable."""

    host: Ns | None = spec()
    device: Ns | None = spec()


@dataclass(frozen=True, kw_only=True)
class Calibration(Base):
    """The harness's measured floors (clock read, empty call, event pair); ``error`` if it failed."""

    floors: Floors | None
    error: str | None

    @property
    def floor_multiple(self) -> float | None:
        """The multiple of a floor under which a difference is unresolvable, as the harness recorded it."""
        value = self.extra["floor_multiple"] if "floor_multiple" in self.extra else None
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def floor(self, clock: str) -> int | None:
        """The floor of results timed with ``clock`` (None: not measured)."""
        if self.floors is None:
            return None
        return self.floors.device if clock == "device" else self.floors.host


# -- the processes that took the samples ----------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class GpuWhileWorking(Facts):
    """The GPU's state while a process worked, read right after each case's samples."""

    readings: int | None
    idle_readings: int | None
    sm_clock_mhz: float | None = spec(omit_none=True, description="median of the readings not idle")
    sm_clock_min_mhz: float | None
    throttle_reasons: tuple[str, ...] | None
    source: str | None


@dataclass(frozen=True, kw_only=True)
class ControlRecord(Facts):
    """The control workload: a fixed piece of host work timed in one process."""

    name: str | None
    row_probe: str | None = spec(omit_none=True, description="the process probe timed at the start of "
                                                             "this process's run, before the task was loaded "
                                                             "(its name and version)")
    n: int | None
    p50_ns: float | None
    se_log: float | None = spec(omit_none=True, description="standard error of the log p50")
    min_ns: float | None
    what: str | None


@dataclass(frozen=True, kw_only=True)
class Quieting(Facts):
    """What one process did against noise (:func:`benchbox.harness.quiet.quieting`)."""

    cpus: tuple[int, ...] | None
    cpu_count: int | None
    hash_seed: str | None
    hash_randomization: bool | None
    aslr: bool | None = spec(omit_none=True, description="address-space randomisation on (None: "
                                                         "not known off Linux)")
    layout: str | None = spec(omit_none=True, description="random, or fixed: address randomisation "
                                                           "off and hash seed 0 (run --layout fixed)")
    gc: str | None
    threads: int | None


@dataclass(frozen=True, kw_only=True)
class ProcessRecord(Base):
    """One process that measured: a replication of the run. A fresh process re-draws everything
    a run depends on (memory layout, hash seed, thread placement, compile draws); rounds taken in
    one process are sub-samples of one replication."""

    pid: int | None
    started_at: str | None = spec(omit_none=True, description="ISO 8601 time the process started "
                                                              "measuring (UTC)")
    source: str | None = spec(omit_none=True, description="the receipt it was joined from (combine)")
    rounds: Count | None = spec(omit_none=True, description="rounds this process took")
    load: MachineLoad | None = spec(omit_none=True, description="how busy the machine was as the "
                                                                "process started (busy_fraction)")
    gpu: GpuWhileWorking | None = spec(omit_none=True, description="the GPU while it worked: SM clock "
                                       "and the throttle reasons read right after each case's samples")
    control: ControlRecord | None = spec(omit_none=True, description="the control workload, a fixed "
                                         "piece of host work timed in this process: p50_ns, n, name")
    quieting: Quieting | None = spec(omit_none=True, description="what was done against noise: "
                                           "CPU affinity, hash seed, garbage collector, threads")


