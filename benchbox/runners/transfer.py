"""How the PyTorch-family runners move data: strategies, the rules that pick them, CUDA primitives.

Three choices make up a runner's device stages on CUDA, each a runner option (``auto`` by
default) and each recorded with its reason in the runner report (``runner_report.transfer``):

``transfer`` — host inputs → device (the ``h2d`` stage):

- ``direct``: one copy per input, straight from the task's arrays. They are pageable memory,
  so the driver stages each copy and returns once it has read the source. Destinations are
  fresh device tensors, or the runner's static buffers when it needs fixed addresses.
- ``packed``: the inputs are copied on the host into one pinned block (each at a 256-byte
  aligned offset) and reach the device in one asynchronous copy per ``PACK_CHUNK_BYTES``
  of the block (an input larger than that is split), so copying the next chunk on the host
  overlaps the previous chunk's transfer. The device inputs are fixed views of one device block.
- ``staged``: one pinned staging buffer and one asynchronous copy per input, into static
  device buffers.

  ``auto`` takes, among the strategies the runner allows, the one that issues the fewest
  copies per call (``copies_per_call``); a tie goes to the earlier one in the runner's
  order (``direct`` before ``packed``: no host copy into a block). So several inputs are
  packed into one copy, and a single input is copied directly.

``d2h`` — device outputs → host (the ``d2h`` stage, which ends with them complete and visible):

- ``blocking``: ``.cpu()`` per output on the runner's stream: each copy waits for the stream
  and has completed when it returns — no pinned buffer, event or separate wait.
- ``pinned``: an asynchronous copy per output into pinned host memory, then one
  synchronization of the runner's stream.

  ``auto`` (decided on the first outputs, whose shapes are then fixed): ``blocking`` for a
  single output of at most ``D2H_BLOCKING_MAX_BYTES``, else ``pinned`` (pinned copies run
  at full bandwidth, and several outputs wait once instead of once each).

``stream`` — where the work is enqueued (``runner.stream``, on which the harness records
device events):

- ``current``: the stream current on the runner's device when the runner is made (the
  default stream, unless the caller chose another); nothing to switch per call.
- ``side``: a stream of the runner's own, made current once per call, from the start of
  ``h2d`` to the end of ``d2h`` (and restored if a stage raises).

  ``auto``: ``side`` when the runner requires one (TensorRT enqueues on its own stream:
  on the default stream it adds synchronizations), else ``current``.

Every strategy enqueues all of a call's copies and kernels on ``runner.stream``, so events
recorded there bracket them in order, and a contract's ``sync_at_close = "stream"`` waits
for exactly them. ``d2h`` always ends with the stream synchronized.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchbox.errors import UsageError

TRANSFERS = ("direct", "packed", "staged")
D2HS = ("blocking", "pinned")
STREAMS = ("current", "side")
#: option key → accepted values
OPTION_VALUES: dict[str, tuple[str, ...]] = {
    "transfer": ("auto", *TRANSFERS), "d2h": ("auto", *D2HS), "stream": ("auto", *STREAMS)}
OPTION_KEYS = tuple(OPTION_VALUES)

#: every input's offset in a packed block is a multiple of this (any dtype, vector loads, TensorRT)
ALIGN_BYTES = 256
#: a packed block goes to the device in copies of at most this size
PACK_CHUNK_BYTES = 512 * 1024
#: the largest single output ``d2h=auto`` copies back with a blocking ``.cpu()``
D2H_BLOCKING_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class TransferRequest:
    """The options as asked for (each ``auto`` or a strategy name)."""

    transfer: str = "auto"
    d2h: str = "auto"
    stream: str = "auto"

    def as_dict(self) -> dict[str, str]:
        return {"transfer": self.transfer, "d2h": self.d2h, "stream": self.stream}


def parse_request(runner: str, options: dict[str, Any], allowed: tuple[str, ...],
                  side_stream: bool) -> TransferRequest:
    """The transfer options of ``options``, checked; a bad value is a one-line ``UsageError``."""
    values: dict[str, str] = {}
    for key, accepted in OPTION_VALUES.items():
        raw = options.get(key, "auto")
        value = str(raw).strip().lower() if isinstance(raw, str) else raw
        if value not in accepted:
            raise UsageError(f"{runner} option {key}: expected {', '.join(accepted)}, got {str(raw)[:60]!r}")
        values[key] = value
    if values["transfer"] not in ("auto", *allowed):
        raise UsageError(f"{runner} option transfer={values['transfer']}: this runner supports "
                         f"{', '.join(allowed)}")
    if side_stream and values["stream"] == "current":
        raise UsageError(f"{runner} option stream=current: this runner needs a stream of its own")
    return TransferRequest(**values)


@dataclass(frozen=True)
class Chunk:
    """One copy of a packed block: bytes ``start``..``end``, filled from whole inputs and pieces.

    ``pieces`` are ``(input, lo, hi)``: bytes ``lo``..``hi`` of an input too large for one chunk.
    """

    start: int
    end: int
    whole: tuple[int, ...] = ()
    pieces: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True)
class PackLayout:
    """Where each input sits in the packed block, and the copies that move the block."""

    offsets: tuple[int, ...]
    nbytes: tuple[int, ...]
    total: int
    chunks: tuple[Chunk, ...]

    def within(self, nbytes: tuple[int, ...], chunk: int | None = None) -> PackLayout:
        """The same block and offsets holding inputs of ``nbytes`` (each at most its size here):
        the copies of a call whose inputs are smaller than the ones the block was laid out for."""
        if len(nbytes) != len(self.nbytes) or any(n > m for n, m in zip(nbytes, self.nbytes)):
            raise ValueError(f"inputs of {list(nbytes)} bytes do not fit a block laid out for "
                             f"{list(self.nbytes)}")
        chunk = PACK_CHUNK_BYTES if chunk is None else chunk
        return PackLayout(self.offsets, tuple(nbytes), self.total, _chunks(self.offsets, nbytes, chunk))


def _aligned(n: int, align: int) -> int:
    return -(-n // align) * align


def pack_layout(example: tuple[np.ndarray, ...], align: int | None = None,
                chunk: int | None = None) -> PackLayout:
    """Aligned offsets, in input order, and chunks of at most ``chunk`` bytes of inputs.

    Consecutive inputs share a chunk while they fit; an input larger than ``chunk`` gets
    chunks of its own, one per piece. Defaults: ``ALIGN_BYTES``, ``PACK_CHUNK_BYTES``.
    """
    align = ALIGN_BYTES if align is None else align
    chunk = PACK_CHUNK_BYTES if chunk is None else chunk
    offsets, sizes = [], []
    pos = 0
    for a in example:
        offsets.append(pos)
        sizes.append(int(a.nbytes))
        pos = _aligned(pos + int(a.nbytes), align)
    return PackLayout(tuple(offsets), tuple(sizes), max(pos, align), _chunks(offsets, sizes, chunk))


def _chunks(offsets: tuple[int, ...] | list[int], sizes: tuple[int, ...] | list[int],
            chunk: int) -> tuple[Chunk, ...]:
    """Consecutive inputs share a chunk while they fit; a larger input gets one chunk per piece."""
    chunks: list[Chunk] = []
    group: list[int] = []

    def flush() -> None:
        if group:
            chunks.append(Chunk(offsets[group[0]], offsets[group[-1]] + sizes[group[-1]], tuple(group)))
            group.clear()

    for i, (off, n) in enumerate(zip(offsets, sizes)):
        if n > chunk:
            flush()
            for lo in range(0, n, chunk):
                hi = min(n, lo + chunk)
                chunks.append(Chunk(off + lo, off + hi, (), ((i, lo, hi),)))
            continue
        if group and off + n - offsets[group[0]] > chunk:
            flush()
        group.append(i)
    flush()
    return tuple(chunks)


def copies_per_call(strategy: str, example: tuple[np.ndarray, ...]) -> int:
    """Host-to-device copies one call issues under ``strategy``."""
    if strategy == "packed":
        return len(pack_layout(example).chunks)
    return len(example)


@dataclass(frozen=True)
class H2DPlan:
    """The chosen way inputs reach the device, and why."""

    strategy: str
    static: bool
    reason: str
    inputs: int
    input_bytes: int
    copies: int
    layout: PackLayout | None = field(default=None, compare=False)

    @property
    def device_inputs(self) -> str:
        if self.strategy == "packed":
            return "static views of one device block"
        return "static device buffers" if self.static else "fresh device tensors each call"


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


def plan_h2d(request: TransferRequest, example: tuple[np.ndarray, ...], allowed: tuple[str, ...],
             static_inputs: bool) -> H2DPlan:
    """Apply the ``transfer`` rule (see the module docstring) to the runner's example inputs."""
    nbytes = sum(int(a.nbytes) for a in example)
    costs = {s: copies_per_call(s, example) for s in allowed}
    what = f"{len(example)} input(s), {_kib(nbytes)}"
    if request.transfer != "auto":
        strategy = request.transfer
        reason = f"option transfer={strategy}: {costs[strategy]} copies per call for {what}"
    else:
        order = [s for s in TRANSFERS if s in allowed]
        strategy = min(order, key=lambda s: (costs[s], order.index(s)))
        listed = ", ".join(f"{s} {costs[s]}" for s in order)
        reason = (f"auto: fewest copies per call for {what} ({listed}; a tie goes to the "
                  f"first of {', '.join(order)})")
    static = strategy != "direct" or static_inputs
    layout = pack_layout(example) if strategy == "packed" else None
    return H2DPlan(strategy, static, reason, len(example), nbytes, costs[strategy], layout)


def plan_stream(request: TransferRequest, side_required: bool) -> tuple[str, str]:
    """Apply the ``stream`` rule: the stream kind and why."""
    if request.stream != "auto":
        return request.stream, f"option stream={request.stream}"
    if side_required:
        return "side", "auto: this runner enqueues on a stream of its own"
    return "current", "auto: the stream current when the runner was made; nothing to switch per call"


def plan_d2h(request: TransferRequest, output_bytes: list[int], on_device: bool) -> tuple[str, str]:
    """Apply the ``d2h`` rule to the first outputs: the mode and why."""
    what = f"{len(output_bytes)} output(s), {_kib(sum(output_bytes))}"
    if request.d2h != "auto":
        return request.d2h, f"option d2h={request.d2h} for {what}"
    if len(output_bytes) == 1 and on_device and output_bytes[0] <= D2H_BLOCKING_MAX_BYTES:
        return "blocking", (f"auto: one output of {_kib(output_bytes[0])} "
                            f"(≤ {_kib(D2H_BLOCKING_MAX_BYTES)}): a blocking copy is the wait")
    return "pinned", (f"auto: {what} (blocking only for one output ≤ {_kib(D2H_BLOCKING_MAX_BYTES)}): "
                      "pinned copies, one stream synchronization")


class TransferShapeError(RuntimeError):
    """An input whose shape or dtype differs from the prepared one, where buffers are fixed."""


def torch_dtype(dtype: np.dtype) -> Any:
    """The torch dtype of a numpy dtype."""
    import torch

    return torch.from_numpy(np.empty(0, dtype=dtype)).dtype


class CudaOps:
    """The CUDA primitives the strategies use (through torch); tests substitute a stream simulator.

    Every copy runs on the stream current on the runner's device, which the runner makes its
    own stream for the span of a call.
    """

    def __init__(self, device: str) -> None:
        import torch

        self._torch = torch
        dev = torch.device(device)
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        self.device = dev
        self.index = int(dev.index)  # type: ignore[arg-type]
        # the C entry points behind torch.cuda.current_stream/set_stream, without the Stream
        # objects and device contexts those build (a few µs per call)
        self._get = torch._C._cuda_getCurrentStream
        self._set = torch._C._cuda_setStream
        self._get_device = torch._C._cuda_getDevice

    def current_stream(self) -> Any:
        return self._torch.cuda.current_stream(self.device)

    def side_stream(self) -> Any:
        return self._torch.cuda.Stream(device=self.device)

    def token(self, stream: Any) -> Any:
        """The stream as the C layer reports the current stream (compared on every call)."""
        torch = self._torch
        with torch.cuda.device(self.device), torch.cuda.stream(stream):
            return self._get(self.index)

    def enter(self, token: Any) -> Any:
        """Make ``token``'s stream current; None if it already was, else what to restore."""
        cur = self._get(self.index)
        if cur == token:
            return None
        device = self._get_device()
        self._set(stream_id=token[0], device_index=token[1], device_type=token[2])
        return cur, device

    def leave(self, saved: Any) -> None:
        cur, device = saved
        self._set(stream_id=cur[0], device_index=cur[1], device_type=cur[2])
        if device != self.index:
            self._torch.cuda.set_device(device)

    def pinned(self, nbytes: int) -> Any:
        return self._torch.empty(nbytes, dtype=self._torch.uint8, pin_memory=True)

    def pinned_like(self, a: np.ndarray) -> Any:
        return self._torch.empty(a.shape, dtype=torch_dtype(a.dtype), pin_memory=True)

    def device_block(self, nbytes: int) -> Any:
        return self._torch.empty(nbytes, dtype=self._torch.uint8, device=self.device)

    def device_like(self, a: np.ndarray) -> Any:
        return self._torch.empty(a.shape, dtype=torch_dtype(a.dtype), device=self.device)

    def to_device(self, a: np.ndarray) -> Any:
        return self._torch.from_numpy(a).to(self.device, non_blocking=True)

    def copy(self, dst: Any, src: Any) -> None:
        dst.copy_(src, non_blocking=True)

    def copy_from_host(self, dst: Any, a: np.ndarray) -> None:
        dst.copy_(self._torch.from_numpy(a), non_blocking=True)

    def to_host(self, t: Any) -> np.ndarray:
        return t.cpu().numpy()  # a blocking copy: it synchronizes the current stream

    def to_host_async(self, t: Any) -> Any:
        return t.to("cpu", non_blocking=True)  # lands in pinned memory (torch allocates it so)

    def on_device(self, t: Any) -> bool:
        return bool(getattr(t, "is_cuda", False))


def cuda_ops(device: str) -> CudaOps:
    """The primitives for ``device`` (tests replace this function to simulate a GPU)."""
    return CudaOps(device)
