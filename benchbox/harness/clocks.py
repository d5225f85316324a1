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

    def __init__(self, stream: Any, hold_stream: bool, subtract_floor: bool = False) -> None:
        import torch

        self._torch = torch
        self.stream = stream
        self.hold_stream = hold_stream
        self.subtract_floor = subtract_floor
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.hold_cycles = 0
        self.floor_ns = 0
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
        """Hold the stream ≥ 3× the host time it takes to enqueue the region (≥ 20 µs).

        Then measure the empty pair the same way (held or not): the floor.
        """
        if self.hold_stream:
            self.hold_cycles = int(self._cycles_per_ns * max(20_000, 3 * enqueue_ns))
        self.floor_ns = self.empty_pair_ns()

    def empty_pair_ns(self, n: int = 51) -> int:
        """Median of ``n`` empty event pairs recorded exactly as the region's pair is."""
        out = []
        for _ in range(n):
            self.open()
            self.close()
            out.append(self._raw_ns())
        out.sort()
        return out[n // 2]

    def describe(self) -> str:
        how = (f"stream held by a blocking kernel of {self.hold_cycles} cycles while the region "
               "is enqueued (device busy time)" if self.hold_cycles else
               "plain event pair: the device span, launch gaps included")
        floor = (f"; empty-pair floor {self.floor_ns} ns subtracted from every sample"
                 if self.subtract_floor else f"; empty-pair floor {self.floor_ns} ns (not subtracted)")
        return how + floor

    def open(self) -> None:
        torch = self._torch
        if self.hold_cycles:
            with torch.cuda.stream(self.stream):
                torch.cuda._sleep(self.hold_cycles)
        self.start.record(self.stream)

    def close(self) -> None:
        self.end.record(self.stream)

    def _raw_ns(self) -> int:
        self.end.synchronize()
        return int(round(self.start.elapsed_time(self.end) * 1e6))

    def elapsed_ns(self) -> int:
        """The last pair's elapsed time, less the floor where the contract says so (≥ 0)."""
        raw = self._raw_ns()
        return max(0, raw - self.floor_ns) if self.subtract_floor else raw


class HostMarks:
    """Clock reads between batches of calls on a runner without a device stream (calls are synchronous)."""

    def __init__(self, clock: HostClock) -> None:
        self.clock = clock

    def mark(self) -> int:
        return self.clock()

    def wait(self, mark: int) -> None:
        pass

    def elapsed_ns(self, a: int, b: int) -> int:
        return b - a


class EventMarks:
    """Device events recorded on a runner's stream between batches of calls (CUDA via torch)."""

    def __init__(self, stream: Any) -> None:
        import torch

        self._event = torch.cuda.Event
        self.stream = stream

    def mark(self) -> Any:
        e = self._event(enable_timing=True)
        e.record(self.stream)
        return e

    def wait(self, mark: Any) -> None:
        mark.synchronize()

    def elapsed_ns(self, a: Any, b: Any) -> int:
        return int(round(a.elapsed_time(b) * 1e6))
