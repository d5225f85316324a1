"""Clocks: the host clock and device events. Only the harness uses these."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

HostClock = Callable[[], int]
host_clock: HostClock = time.perf_counter_ns


class DeviceEvents:
    """Device event pairs recorded on a runner's stream (CUDA via torch).

    With ``hold_stream`` a blocking kernel is enqueued before the start event, so
    the region is enqueued while the device waits and the pair measures device
    busy time rather than the span including launch gaps.
    """

    def __init__(self, stream: Any, hold_stream: bool) -> None:
        import torch

        self._torch = torch
        self.stream = stream
        self.hold_stream = hold_stream
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.hold_cycles = 0
        self._cycles_per_ns = self._calibrate_sleep() if hold_stream else 0.0

    def _calibrate_sleep(self) -> float:
        torch = self._torch
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 2_000_000
        with torch.cuda.stream(self.stream):
            torch.cuda._sleep(cycles)  # warm the kernel
            a.record(self.stream)
            torch.cuda._sleep(cycles)
            b.record(self.stream)
        b.synchronize()
        return cycles / (a.elapsed_time(b) * 1e6)

    def set_hold(self, enqueue_ns: int) -> None:
        """Hold the stream ≥ 3× the host time it takes to enqueue the region (≥ 20 µs)."""
        if self.hold_stream:
            self.hold_cycles = int(self._cycles_per_ns * max(20_000, 3 * enqueue_ns))

    def open(self) -> None:
        torch = self._torch
        if self.hold_cycles:
            with torch.cuda.stream(self.stream):
                torch.cuda._sleep(self.hold_cycles)
        self.start.record(self.stream)

    def close(self) -> None:
        self.end.record(self.stream)

    def elapsed_ns(self) -> int:
        self.end.synchronize()
        return int(round(self.start.elapsed_time(self.end) * 1e6))
