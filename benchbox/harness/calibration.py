"""The harness's own floors: what a clock read, an event pair and an empty call cost."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchbox.contracts import Contract
from benchbox.harness.clocks import HostClock, host_clock
from benchbox.runners.base import Runner
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
    """The region's floor: the null task through every stage under the contract."""
    from benchbox.harness.loop import Harness

    host_contract = contract if contract.clock == "host" else Contract(
        **{**contract.__dict__, "clock": "host"})
    m = Harness(host_contract, clock).measure(NullTask(), NullRunner(), b"{}", samples=n, warmup=100)
    full = np.asarray(m.stages_ns["parse"]) * 0
    for v in m.stages_ns.values():
        full = full + np.asarray(v)
    return {"region_p50_ns": int(np.median(m.samples_ns)), "call_p50_ns": int(np.median(full))}


def event_pair_ns(stream: Any, n: int = 200) -> int | None:
    """Median elapsed time of an empty device event pair on ``stream`` (CUDA only)."""
    if stream is None:
        return None
    import torch

    out = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(stream)
        b.record(stream)
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e6)
    return int(round(float(np.median(out))))


def calibrate(contract: Contract, device: str, clock: HostClock = host_clock) -> dict[str, Any]:
    """Floors measured before the samples, recorded in the receipt's ``calibration``."""
    cal: dict[str, Any] = {"clock": "time.perf_counter_ns", "clock_read_ns": clock_read_ns(clock)}
    cal.update(empty_call_ns(contract, clock))
    if device.startswith("cuda"):
        import torch

        stream = torch.cuda.Stream(device=device)
        cal["event_pair_ns"] = event_pair_ns(stream)
    return cal
