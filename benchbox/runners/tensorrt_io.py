"""The TensorRT runner's data path: static device memory bound to every I/O tensor of the engine
(``set_tensor_address``), filled by the strategies the PyTorch runners use, and the views each
call's shapes select.

The ``transfer`` rule is the PyTorch runners' (``benchbox.runners.transfer``): by default the
strategy with the fewest copies per call, so the decision task's nine inputs reach the device in
one ``packed`` copy into 256-byte aligned views of one device block, and those views' addresses
are what the engine reads. ``staged`` and ``direct`` stay options.

With dynamic input shapes the memory is laid out once for the optimization profile's maximum
(the packed block keeps every input's offset; staged and direct buffers hold the maximum), and a
call whose shapes differ from the last one sets them on the execution context and takes views of
its own shapes at the same addresses (cached per shape): the engine's bindings never move, and
each call copies only its own bytes.

``EngineIO`` is that part of :class:`~benchbox.runners.tensorrt.TensorRTRunner`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from benchbox.runners import transfer as tr
from benchbox.runners.tensorrt_inspect import dims

TORCH_DTYPES = {"FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16,
                "INT8": torch.int8, "INT32": torch.int32, "INT64": torch.int64,
                "BOOL": torch.bool, "UINT8": torch.uint8}


def view(t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The first ``prod(shape)`` elements of ``t`` as a tensor of ``shape`` (same storage)."""
    return t.reshape(-1)[: int(np.prod(shape, dtype=np.int64))].view(tuple(shape))


def _nbytes(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    return int(np.prod(shape, dtype=np.int64)) * torch.empty(0, dtype=dtype).element_size()


def _typed(block: Any, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A flat ``dtype`` tensor over a new block (``ops.pinned`` or ``ops.device_block``) that
    holds ``shape`` (at least one element, so every tensor has an address)."""
    size = torch.empty(0, dtype=dtype).element_size()
    return block(max(_nbytes(shape, dtype), size)).view(dtype)


@dataclasses.dataclass
class _Views:
    """What one shape signature selects: device inputs, host staging, copies, outputs."""

    signature: list[tuple[tuple[int, ...], np.dtype]]
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]
    staging: list[torch.Tensor] = dataclasses.field(default_factory=list)
    stage_views: list[np.ndarray] = dataclasses.field(default_factory=list)
    steps: list[Any] = dataclasses.field(default_factory=list)


class EngineIO:
    """Binding, transfers and per-call shapes of the runner's engine tensors."""

    name: str
    device: str
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    transfer_request: tr.TransferRequest
    TRANSFERS: tuple[str, ...]
    _ops: Any
    _trt: Any
    _context: Any
    _shapes: dict[str, Any]
    _dynamic: set[str]
    _bound: dict[str, tuple[int, ...]]
    _addresses: dict[str, int]
    _inputs: list[torch.Tensor]
    _outputs: list[torch.Tensor]
    _staging: list[torch.Tensor]
    _stage_views: list[np.ndarray]
    _steps: list[Any]
    _signature: list[tuple[tuple[int, ...], np.dtype]]
    _casts: bool
    _h2d_plan: tr.H2DPlan | None
    _h2d_impl: Any
    _pin_block: Any
    _dev_block: Any

    def _bind(self, task: Any, engine: Any, example: tuple[np.ndarray, ...]) -> None:
        """Device memory for every I/O tensor of the engine, bound once; inputs filled by the
        transfer strategy's copies; the example's shapes selected."""
        trt, ctx = self._trt, self._context
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        if sorted(inputs) != sorted(task.input_names):
            raise RuntimeError(f"engine inputs {inputs} differ from the task's {list(task.input_names)}")
        self.input_names, self.output_names = tuple(task.input_names), tuple(task.output_names)
        self._dynamic = {n for n in inputs if -1 in dims(engine.get_tensor_shape(n))}
        for n in self._dynamic:
            if not ctx.set_input_shape(n, tuple(self._shapes[n].max)):
                raise RuntimeError(f"TensorRT refused the declared maximum shape {list(self._shapes[n].max)} "
                                   f"of input {n}")
        types: dict[str, torch.dtype] = {}
        for n in names:
            types[n] = TORCH_DTYPES.get(engine.get_tensor_dtype(n).name)  # type: ignore[assignment]
            if types[n] is None:
                raise RuntimeError(f"tensor {n}: TensorRT dtype {engine.get_tensor_dtype(n).name} "
                                   "has no torch buffer type")
        largest = tuple(np.empty(tuple(self._shapes[n].max) if n in self._dynamic else a.shape, a.dtype)
                        for n, a in zip(self.input_names, example))
        self._addresses, self._views = {}, {}
        self._allocate_inputs(largest, [types[n] for n in self.input_names])
        self._out_buffers = {}
        for n in self.output_names:
            shape = tuple(dims(ctx.get_tensor_shape(n)))
            buf = _typed(self._ops.device_block, shape, types[n])
            self._out_buffers[n] = buf
            self._addresses[n] = buf.data_ptr()
        for n, ptr in self._addresses.items():
            ctx.set_tensor_address(n, ptr)
        self._selected: tuple[tuple[int, ...], ...] | None = None
        self._select(example)

    def _allocate_inputs(self, largest: tuple[np.ndarray, ...], types: list[torch.dtype]) -> None:
        """The strategy by the PyTorch runners' rule, over inputs of the largest declared shapes;
        its memory allocated and each input's address recorded."""
        plan = tr.plan_h2d(self.transfer_request, largest, self.TRANSFERS, True)
        cast = [n for n, a, t in zip(self.input_names, largest, types) if tr.torch_dtype(a.dtype) != t]
        self._casts = bool(cast)
        if cast and plan.strategy != "staged":
            if self.transfer_request.transfer != "auto":
                raise RuntimeError(f"{self.name}: transfer={plan.strategy} copies the bytes as they are, "
                                   f"but input {cast[0]} has another dtype in the engine; transfer=staged "
                                   "casts")
            plan = dataclasses.replace(
                plan, strategy="staged", layout=None, copies=len(largest),
                reason=f"auto: staged, the one strategy that casts (input {cast[0]} has another dtype in "
                       "the engine)")
        if self._dynamic:
            plan = dataclasses.replace(plan, reason=plan.reason + "; dynamic shapes: memory for the "
                                       "profile's maximum, each call copies its own shapes")
        self._h2d_plan = plan
        ops = self._ops
        if plan.strategy == "packed":
            self._pin_block = ops.pinned(plan.layout.total)
            self._dev_block = ops.device_block(plan.layout.total)
            self._addresses.update((n, self._dev_block[off:].data_ptr())
                                   for n, off in zip(self.input_names, plan.layout.offsets))
            self._h2d_copy = self._h2d_packed
        else:
            self._in_buffers = [_typed(ops.device_block, a.shape, t) for a, t in zip(largest, types)]
            self._addresses.update((n, b.data_ptr()) for n, b in zip(self.input_names, self._in_buffers))
            if plan.strategy == "staged":
                self._pin_buffers = [_typed(ops.pinned, a.shape, t) for a, t in zip(largest, types)]
                self._h2d_copy = self._h2d_staged
            else:
                self._h2d_copy = self._h2d_direct_static
        self._h2d_impl = self._h2d_shaped if self._dynamic else self._h2d_copy

    def _h2d_shaped(self, host: tuple[np.ndarray, ...]) -> Any:
        """A call of dynamic shapes: select its shapes (after the previous call's copies are done),
        then copy."""
        self._select(host)
        return self._h2d_copy(host)

    def _select(self, host: tuple[np.ndarray, ...]) -> None:
        """Set the dynamic inputs' shapes of ``host`` on the context and take their views; the
        addresses bound to the engine stay as they are."""
        if len(host) != len(self.input_names):
            return  # the copy's own check refuses it in one line
        key = tuple(tuple(a.shape) if n in self._dynamic else () for n, a in zip(self.input_names, host))
        if key == self._selected:
            return
        for n, a in zip(self.input_names, host):
            if n in self._dynamic and not self._context.set_input_shape(n, tuple(a.shape)):
                self._selected = None
                raise tr.TransferShapeError(f"TensorRT refused shape {list(a.shape)} for input {n} (declared "
                                            f"{list(self._shapes[n].min)}..{list(self._shapes[n].max)})")
        self._bound = {n: tuple(a.shape) for n, a in zip(self.input_names, host) if n in self._dynamic}
        v = self._views.get(key)
        if v is None:
            v = self._views[key] = self._make_views(host)
        self._signature, self._inputs, self._outputs = v.signature, v.inputs, v.outputs
        self._staging, self._stage_views, self._steps = v.staging, v.stage_views, v.steps
        self._selected = key

    def _make_views(self, host: tuple[np.ndarray, ...]) -> _Views:
        """The views of one shape signature (fixed inputs keep their prepared shapes)."""
        largest = self._h2d_plan
        assert largest is not None
        shaped = [a if n in self._dynamic else np.empty(self._fixed_shape(i), a.dtype)
                  for i, (n, a) in enumerate(zip(self.input_names, host))]
        signature = [(tuple(a.shape), a.dtype) for a in shaped]
        outputs = [view(self._out_buffers[n], tuple(dims(self._context.get_tensor_shape(n))))
                   for n in self.output_names]
        if largest.strategy == "packed":
            assert largest.layout is not None
            self._pack_views(tuple(shaped), largest.layout.within(tuple(int(a.nbytes) for a in shaped)))
            return _Views(signature, list(self._inputs), outputs, steps=list(self._steps))
        inputs = [view(b, shape) for b, (shape, _) in zip(self._in_buffers, signature)]
        if largest.strategy == "staged":
            staging = [view(p, shape) for p, (shape, _) in zip(self._pin_buffers, signature)]
            return _Views(signature, inputs, outputs, staging, [s.numpy() for s in staging])
        return _Views(signature, inputs, outputs)

    def _fixed_shape(self, i: int) -> tuple[int, ...]:
        return tuple(self._shapes[self.input_names[i]].max)
