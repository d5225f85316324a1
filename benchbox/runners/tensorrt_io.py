"""The TensorRT runner's device buffers: static buffers bound to every I/O tensor of the
engine (``set_tensor_address``), and the views of them each call's shapes select.

``EngineIO`` is that part of :class:`~benchbox.runners.tensorrt.TensorRTRunner`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from benchbox.runners.tensorrt_inspect import dims

TORCH_DTYPES = {"FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16,
                "INT8": torch.int8, "INT32": torch.int32, "INT64": torch.int64,
                "BOOL": torch.bool, "UINT8": torch.uint8}


def view(t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The first ``prod(shape)`` elements of ``t`` as a tensor of ``shape`` (same storage)."""
    return t.reshape(-1)[: int(np.prod(shape, dtype=np.int64))].view(tuple(shape))


class EngineIO:
    """Binding and per-call shapes of the runner's engine tensors."""

    device: str
    output_names: tuple[str, ...]
    _trt: Any
    _context: Any
    _shapes: dict[str, Any]
    _dynamic: set[str]
    _bound: dict[str, tuple[int, ...]]
    _buffers: dict[str, torch.Tensor]
    _full_staging: list[torch.Tensor]
    _input_order: tuple[str, ...]
    _inputs: list[torch.Tensor]
    _staging: list[torch.Tensor]
    _outputs: list[torch.Tensor]

    def _bind(self, task: Any, engine: Any, example: tuple[np.ndarray, ...]) -> None:
        """Static device buffers (torch CUDA tensors) bound to every I/O tensor of the engine.

        Inputs with dynamic dimensions get buffers of their declared maximum shape; each
        call then binds views of its own shape (``_apply_shapes``).
        """
        trt = self._trt
        assert trt is not None
        ctx = self._context
        self.output_names = tuple(task.output_names)
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        if sorted(inputs) != sorted(task.input_names):
            raise RuntimeError(f"engine inputs {inputs} differ from the task's {list(task.input_names)}")
        self._input_order = tuple(task.input_names)
        self._dynamic = {n for n in inputs if -1 in dims(engine.get_tensor_shape(n))}
        for n in self._dynamic:
            ctx.set_input_shape(n, tuple(self._shapes[n].max))
        buffers: dict[str, torch.Tensor] = {}
        for n in names:
            dtype = TORCH_DTYPES.get(engine.get_tensor_dtype(n).name)
            if dtype is None:
                raise RuntimeError(f"tensor {n}: TensorRT dtype {engine.get_tensor_dtype(n).name} "
                                   "has no torch buffer type")
            buffers[n] = torch.empty(tuple(dims(ctx.get_tensor_shape(n))), dtype=dtype, device=self.device)
            ctx.set_tensor_address(n, buffers[n].data_ptr())
        self._buffers = buffers
        self._full_staging = [torch.empty(tuple(buffers[n].shape), dtype=buffers[n].dtype).pin_memory()
                              for n in task.input_names]
        self._bound = {}
        self._apply_shapes(example, force=True)
        torch.cuda.synchronize(self.device)

    def _apply_shapes(self, host: tuple[np.ndarray, ...], force: bool = False) -> None:
        """Bind this call's shapes of the dynamic inputs; the buffers stay where they are."""
        changed = force
        for n, a in zip(self._input_order, host):
            if n in self._dynamic and self._bound.get(n) != tuple(a.shape):
                if not self._context.set_input_shape(n, tuple(a.shape)):
                    raise RuntimeError(f"TensorRT refused shape {list(a.shape)} for input {n}")
                self._bound[n] = tuple(a.shape)
                changed = True
        if not changed:
            return

        def bound(n: str) -> torch.Tensor:
            return view(self._buffers[n], tuple(dims(self._context.get_tensor_shape(n))))

        self._inputs = [bound(n) for n in self._input_order]
        self._staging = [view(s, tuple(d.shape)) for s, d in zip(self._full_staging, self._inputs)]
        self._outputs = [bound(n) for n in self.output_names]
