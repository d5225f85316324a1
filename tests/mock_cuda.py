"""A mock of what cannot exist here, a CUDA device: a stream simulator behind the runners' CudaOps.

"Device" and "pinned" tensors are CPU tensors the simulator registered as such; device
tensors start as garbage (NaN, or all bits set). Work is queued per stream and runs in order
only when that stream is flushed — by a kernel launched on it (the runner's ``forward``,
wrapped by ``kernel``), a blocking copy on it, or its synchronization. So a copy enqueued
on another stream than the kernel's, a pinned buffer overwritten before its copy ran, or an
output read before its stream was synchronized, shows up as wrong numbers. Pageable sources
are read when the copy is issued (as the driver stages them); pinned ones when the copy runs.
Every operation is logged with the stream it was issued on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from benchbox.runners import transfer as tr

Op = tuple[str, Callable[[], None]]


class SimStream:
    """A queue of work; ``synchronize`` runs it."""

    def __init__(self, sim: MockCuda, name: str) -> None:
        self.sim = sim
        self.name = name
        self.queue: list[Op] = []
        #: the handle a library is given for this stream (``torch.cuda.Stream.cuda_stream``)
        self.cuda_stream = 0x5000 + len(sim.streams) if hasattr(sim, "streams") else 0x5000

    def synchronize(self) -> None:
        self.sim.log.append(("sync", self.name))
        self.sim.flush(self)

    def __repr__(self) -> str:
        return f"SimStream({self.name})"


def _garbage(t: torch.Tensor) -> torch.Tensor:
    if t.dtype.is_floating_point:
        return t.fill_(float("nan"))
    if t.dtype == torch.bool:
        return t.fill_(True)
    return t.fill_(-1 if t.dtype != torch.uint8 else 255)


class MockCuda:
    """The ``CudaOps`` interface over a simulated device (see the module docstring)."""

    device = torch.device("cpu")

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.default = SimStream(self, "default")
        self.current = self.default
        self.streams = [self.default]
        self._device: list[tuple[int, int]] = []
        self._pinned: list[tuple[int, int]] = []
        self._keep: list[torch.Tensor] = []  # registered memory is never freed, so never reused

    # -- bookkeeping -------------------------------------------------------------------
    @staticmethod
    def _range(t: torch.Tensor) -> tuple[int, int]:
        s = t.untyped_storage()
        return s.data_ptr(), s.data_ptr() + s.nbytes()

    def _is(self, ranges: list[tuple[int, int]], t: Any) -> bool:
        if not isinstance(t, torch.Tensor):
            return False
        p = t.data_ptr()
        return any(lo <= p < hi or (lo == hi == p) for lo, hi in ranges)

    def is_device(self, t: Any) -> bool:
        return self._is(self._device, t)

    def is_pinned(self, t: Any) -> bool:
        return self._is(self._pinned, t)

    def register_device(self, t: torch.Tensor) -> torch.Tensor:
        self._device.append(self._range(t))
        self._keep.append(t)
        return t

    def _new_device(self, shape: Any, dtype: Any) -> torch.Tensor:
        return self.register_device(_garbage(torch.empty(shape, dtype=dtype)))

    def _new_pinned(self, shape: Any, dtype: Any) -> torch.Tensor:
        t = _garbage(torch.empty(shape, dtype=dtype))
        self._pinned.append(self._range(t))
        self._keep.append(t)
        return t

    def enqueue(self, kind: str, fn: Callable[[], None], stream: SimStream | None = None) -> None:
        s = stream or self.current
        self.log.append((kind, s.name))
        s.queue.append((kind, fn))

    def flush(self, stream: SimStream) -> None:
        while stream.queue:
            _, fn = stream.queue.pop(0)
            fn()

    def stream_of(self, handle: int) -> SimStream:
        """The stream a library was handed as ``handle``."""
        return next(s for s in self.streams if s.cuda_stream == handle)

    def memory(self, ptr: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """The registered device memory at address ``ptr`` as a tensor of ``shape`` and ``dtype``
        (what a library that was handed the address reads and writes)."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * torch.empty(0, dtype=dtype).element_size()
        for t in self._keep:
            lo, hi = self._range(t)
            if lo <= ptr and ptr + nbytes <= hi and self.is_device(t):
                flat = torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage())
                return flat[ptr - lo: ptr - lo + nbytes].view(dtype).view(shape)
        raise AssertionError(f"address {ptr:#x} (+{nbytes} bytes) is not registered device memory")

    def kernel(self, forward: Callable[..., Any]) -> Callable[..., Any]:
        """``forward`` as a kernel launched on the current stream: queued work there runs first."""

        def launched(*inputs: Any) -> Any:
            assert all(self.is_device(t) for t in inputs), "a kernel read a tensor that is not on the device"
            self.log.append(("kernel", self.current.name))
            self.flush(self.current)
            outs = forward(*inputs)
            for t in outs:
                self.register_device(t)
            return outs

        return launched

    # -- the CudaOps interface ---------------------------------------------------------
    def current_stream(self) -> SimStream:
        return self.current

    def side_stream(self) -> SimStream:
        s = SimStream(self, f"side{len(self.streams)}")
        self.streams.append(s)
        return s

    def token(self, stream: SimStream) -> SimStream:
        return stream

    def enter(self, token: SimStream) -> Any:
        if self.current is token:
            return None
        saved, self.current = self.current, token
        self.log.append(("enter", token.name))
        return saved

    def leave(self, saved: SimStream) -> None:
        self.log.append(("leave", self.current.name))
        self.current = saved

    def pinned(self, nbytes: int) -> torch.Tensor:
        return self._new_pinned((nbytes,), torch.uint8)

    def pinned_like(self, a: np.ndarray) -> torch.Tensor:
        return self._new_pinned(a.shape, tr.torch_dtype(a.dtype))

    def device_block(self, nbytes: int) -> torch.Tensor:
        return self._new_device((nbytes,), torch.uint8)

    def device_like(self, a: np.ndarray) -> torch.Tensor:
        return self._new_device(a.shape, tr.torch_dtype(a.dtype))

    def to_device(self, a: np.ndarray) -> torch.Tensor:
        dst = self.device_like(a)
        snap = torch.from_numpy(np.array(a, copy=True))  # pageable: read at the call
        self.enqueue("h2d", lambda: dst.copy_(snap))
        return dst

    def copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        if self.is_device(dst) and self.is_pinned(src):
            self.enqueue("h2d", lambda: dst.copy_(src))  # DMA: the pinned source is read when it runs
        elif self.is_pinned(dst) and self.is_device(src):
            self.enqueue("d2h", lambda: dst.copy_(src))
        else:
            raise AssertionError("an asynchronous copy must go between pinned host memory and the device")

    def copy_from_host(self, dst: torch.Tensor, a: np.ndarray) -> None:
        assert self.is_device(dst)
        snap = torch.from_numpy(np.array(a, copy=True))
        self.enqueue("h2d", lambda: dst.copy_(snap))

    def to_host(self, t: torch.Tensor) -> np.ndarray:
        assert self.is_device(t)
        self.log.append(("d2h_blocking", self.current.name))
        self.flush(self.current)
        return t.detach().numpy().copy()

    def to_host_async(self, t: torch.Tensor) -> torch.Tensor:
        assert self.is_device(t)
        out = self._new_pinned(t.shape, t.dtype)
        self.enqueue("d2h", lambda: out.copy_(t))
        return out

    def on_device(self, t: Any) -> bool:
        return self.is_device(t)


class MockDeviceEvents:
    """Stands in for ``benchbox.harness.clocks.DeviceEvents``: records into the stream's queue."""

    def __init__(self, stream: SimStream, hold_stream: bool, subtract_floor: bool = False) -> None:
        self.stream = stream
        self.floor_ns = 0

    def set_hold(self, enqueue_ns: int) -> None:
        pass

    def describe(self) -> str:
        return "mock events"

    def open(self) -> None:
        self.stream.sim.enqueue("event_start", lambda: None, self.stream)

    def close(self) -> None:
        self.stream.sim.enqueue("event_end", lambda: None, self.stream)

    def elapsed_ns(self) -> int:
        self.stream.sim.flush(self.stream)
        return 1_000


class MockEventMarks:
    """Stands in for ``benchbox.harness.clocks.EventMarks`` (saturated sampling)."""

    def __init__(self, stream: SimStream) -> None:
        self.stream = stream
        self.n = 0

    def mark(self) -> int:
        self.n += 1
        self.stream.sim.enqueue("mark", lambda: None, self.stream)
        return self.n * 1_000_000

    def wait(self, mark: int) -> None:
        self.stream.sim.flush(self.stream)

    def elapsed_ns(self, a: int, b: int) -> int:
        return b - a
