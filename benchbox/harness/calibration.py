"""The harness's own floors: what a clock read, an event pair and an empty call cost."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from benchbox.contracts import Arrival, Contract
from benchbox.harness.clocks import HostClock, host_clock
from benchbox.runners.base import Runner
from benchbox.stats import FLOOR_MULTIPLE
from benchbox.tasks.base import Case, Task


class NullTask(Task):
    """A task whose stages do nothing: its calls cost only the harness."""

    name = "null"
    input_names = ("x",)
    output_names = ("y",)
    _x = (np.zeros(1, np.float32),)

    def parse(self, request: bytes) -> Any:
        return request

    def preprocess(self, request: Any) -> tuple[np.ndarray, ...]:
        return self._x

    def reduce(self, outputs: dict[str, np.ndarray], request: Any) -> Any:
        return outputs

    def answer(self, reduced: Any, request: Any) -> Any:
        return reduced

    def serialize(self, answer: Any) -> bytes:
        return b""

    def cases(self) -> list[Case]:
        return [Case("null", b"{}")]

    def build_model(self) -> Any:
        return None


class NullRunner(Runner):
    """A runner whose device stages do nothing."""

    name = "null"

    def prepare(self, task: Any, model: Any, example: tuple[np.ndarray, ...], phases: Any) -> None:
        return None

    def h2d(self, host: tuple[np.ndarray, ...]) -> Any:
        return host

    def compute(self, inputs: Any) -> Any:
        return inputs

    def d2h(self, outputs: Any) -> dict[str, np.ndarray]:
        return {"y": outputs[0]}


def clock_read_ns(clock: HostClock = host_clock, n: int = 20_000) -> int:
    """Median cost of one host clock read (difference of back-to-back reads)."""
    t = np.fromiter((clock() for _ in range(n + 1)), dtype=np.int64, count=n + 1)
    return int(np.median(np.diff(t)))


def empty_call_ns(contract: Contract, clock: HostClock = host_clock, n: int = 2_000) -> dict[str, int]:
    """The region's floor: the null task through every stage under the contract, host clock."""
    from benchbox.harness.loop import Harness

    host_contract = contract if contract.clock == "host" else dataclasses.replace(
        contract, clock="host", policy=dataclasses.replace(contract.policy, hold_stream=False,
                                                           saturated=False, fresh_request=True))
    if host_contract.policy.arrival.paced:  # the floor of the call itself: calls back to back
        host_contract = dataclasses.replace(
            host_contract, policy=dataclasses.replace(host_contract.policy, arrival=Arrival()))
    m = Harness(host_contract, clock).measure(NullTask(), NullRunner(), b"{}", samples=n, warmup=100)
    region = np.asarray(m.samples_ns, dtype=np.int64)
    full = np.sum([np.asarray(v, dtype=np.int64) for v in m.stages_ns.values()], axis=0)
    return {"region_p50_ns": int(np.median(region)), "region_p90_ns": int(np.quantile(region, 0.9)),
            "call_p50_ns": int(np.median(full)), "empty_call_samples": n}


def event_pair_ns(stream: Any, n: int = 200, hold_cycles: int = 0) -> int | None:
    """Median elapsed time of an empty device event pair on ``stream`` (CUDA only).

    With ``hold_cycles`` the pair is enqueued behind a blocking kernel, so it measures
    the device-side floor alone (as under a ``hold_stream`` contract); without, it
    includes the host's enqueue gap between the two records.
    """
    if stream is None:
        return None
    import torch

    out = []
    for i in range(n + 1):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            if hold_cycles:
                torch.cuda._sleep(hold_cycles)
            a.record(stream)
            b.record(stream)
        b.synchronize()
        if i:  # the first pair warms up
            out.append(a.elapsed_time(b) * 1e6)
    return int(round(float(np.median(out))))


def stream_sync_ns(stream: Any, clock: HostClock = host_clock, n: int = 200) -> int | None:
    """Median host cost of synchronizing an idle stream (CUDA only)."""
    if stream is None:
        return None
    stream.synchronize()
    t = []
    for _ in range(n):
        t0 = clock()
        stream.synchronize()
        t.append(clock() - t0)
    return int(np.median(t))


def calibrate(contract: Contract, device: str, clock: HostClock = host_clock) -> dict[str, Any]:
    """Floors measured before the samples, recorded in the receipt's ``calibration``.

    ``floors`` gives, per clock a result may be measured with, the harness's own cost
    of that measurement; a difference under ``floor_multiple`` × the floor is
    unresolvable (``benchbox.stats.floor_resolvable``).
    """
    info = time.get_clock_info("perf_counter")
    cal: dict[str, Any] = {"clock": "time.perf_counter_ns", "clock_resolution_ns": int(info.resolution * 1e9),
                           "clock_read_ns": clock_read_ns(clock)}
    cal.update(empty_call_ns(contract, clock))
    host_floor = cal["region_p50_ns"]
    device_floor: int | None = None
    if device.startswith("cuda"):
        import torch

        stream = torch.cuda.Stream(device=device)
        cal["event_pair_ns"] = event_pair_ns(stream)
        cal["event_pair_held_ns"] = event_pair_ns(stream, hold_cycles=1_000_000)
        cal["stream_sync_ns"] = stream_sync_ns(stream, clock)
        if contract.policy.sync_at_close != "none":
            host_floor += cal["stream_sync_ns"] or 0
        device_floor = cal["event_pair_held_ns"] if contract.policy.hold_stream else cal["event_pair_ns"]
    cal["floors"] = {"host": host_floor, "device": device_floor}
    cal["floor_multiple"] = FLOOR_MULTIPLE
    cal["floor_rule"] = (f"a difference under {FLOOR_MULTIPLE:g}× the floor of its clock is unresolvable: "
                         "host = the empty call's region p50 under this contract"
                         + (" plus an idle stream sync" if device.startswith("cuda")
                            and contract.policy.sync_at_close != "none" else "")
                         + "; device = an empty event pair"
                         + (" behind a blocking kernel" if contract.policy.hold_stream else "")
                         + (" (per batch: conservative for a saturated sample, which is a batch / its size)"
                            if contract.policy.saturated else ""))
    return cal
