"""Device stages shared by the PyTorch runners (and, by subclassing, TensorRT's).

How inputs reach the device, on which stream, and how outputs come back is chosen per runner
by the options ``transfer``, ``d2h`` and ``stream`` (rules and strategies in
``benchbox.runners.transfer``) and recorded in the runner report under ``transfer``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from benchbox.runners import precision
from benchbox.runners import transfer as tr
from benchbox.runners.base import Runner


def cuda_reason(device: str) -> str | None:
    if device.startswith("cuda") and not torch.cuda.is_available():
        if torch.version.cuda is None:
            return (f"no CUDA device is visible to torch (torch {torch.__version__} is a CPU-only build: "
                    "install a CUDA build of torch)")
        return "no CUDA device is visible to torch"
    return None


class TorchRunner(Runner):
    """h2d/compute/d2h for a ``forward(*inputs)`` on a torch device; subclasses decide ``forward``.

    A subclass states what its compute needs with three class attributes. The defaults are
    those of a runner that binds fixed device addresses itself (as the TensorRT runner does):
    static buffers, staged copies, a stream of its own. Such a runner either calls
    ``_allocate(example)`` and then binds ``self._inputs`` (the static device inputs of the
    chosen strategy), or fills ``self._inputs`` (device buffers) and ``self._staging``
    (pinned host buffers of the same shapes) itself, which is the ``staged`` strategy.
    """

    #: transfer strategies this runner can use (``auto`` picks among them; ties to the first)
    TRANSFERS: tuple[str, ...] = ("staged",)
    #: the device inputs must stay at fixed addresses (engine bindings, captured graphs)
    STATIC_INPUTS: bool = True
    #: the runner must enqueue on a stream of its own, never the caller's current stream
    SIDE_STREAM: bool = True

    def __init__(self, device: str = "cpu", options: dict[str, Any] | None = None) -> None:
        super().__init__(device, options)
        self.forward: Any = None
        self.input_names: tuple[str, ...] = ()
        self.output_names: tuple[str, ...] = ()
        self._cuda = device.startswith("cuda")
        self.transfer_request = tr.parse_request(self.name, self.options, self.TRANSFERS, self.SIDE_STREAM)
        self._staging: list[torch.Tensor] = []
        self._inputs: list[torch.Tensor] = []
        self._h2d_plan: tr.H2DPlan | None = None
        self._h2d_impl: Any = self._h2d_adopt
        self._d2h_pinned: bool | None = None
        self._d2h_facts: dict[str, Any] = {}
        self._signature: list[tuple[tuple[int, ...], np.dtype]] = []
        self._casts = False           # inputs of another dtype are cast into the buffers, not refused
        self._saved: Any = None       # what to restore once the call leaves the runner's stream
        self._in_flight = False       # an h2d whose call has not reached d2h yet
        self._switched_calls = 0
        self._no_grad = torch.inference_mode()
        self._ops: Any = None
        self._stream: Any = None
        self._stream_kind, self._stream_reason = "none", "cpu device: no stream"
        if self._cuda:
            self._ops = tr.cuda_ops(device)
            self._stream_kind, self._stream_reason = tr.plan_stream(self.transfer_request, self.SIDE_STREAM)
            self._stream = (self._ops.side_stream() if self._stream_kind == "side"
                            else self._ops.current_stream())
            self._token = self._ops.token(self._stream)

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Unknown keys and bad transfer values are refused in one line, before anything runs."""
        super().check_options(options)
        if cls.OPTION_KEYS is not None and any(k in cls.OPTION_KEYS for k in tr.OPTION_KEYS):
            tr.parse_request(cls.name, options, cls.TRANSFERS, cls.SIDE_STREAM)

    @classmethod
    def availability(cls, device: str) -> str | None:
        return cuda_reason(device)

    @property
    def stream(self) -> Any:
        return self._stream

    @property
    def model_device(self) -> Any:
        """Where the model's parameters go (the torch device of this runner's tensors)."""
        return self._ops.device if self._ops is not None else self.device

    def synchronize(self) -> None:
        if self._stream is not None:
            self._stream.synchronize()

    def versions(self) -> dict[str, str]:
        v = {"torch": torch.__version__}
        if self._cuda:
            v["cuda"] = str(torch.version.cuda)
        return v

    # -- preparation ------------------------------------------------------------------
    def _allocate(self, example: tuple[np.ndarray, ...]) -> None:
        """Choose the input strategy from the example inputs and make its buffers."""
        if not self._cuda:
            self._h2d_impl = None
            return
        plan = tr.plan_h2d(self.transfer_request, example, self.TRANSFERS, self.STATIC_INPUTS)
        self._set_plan(plan, example)
        ops = self._ops
        if plan.strategy == "direct":
            self._inputs = [ops.device_like(a) for a in example] if plan.static else []
            self._h2d_impl = self._h2d_direct_static if plan.static else self._h2d_direct
        elif plan.strategy == "packed":
            self._pack(example, plan.layout)
            self._h2d_impl = self._h2d_packed
        else:
            self._staging = [ops.pinned_like(a) for a in example]
            self._inputs = [ops.device_like(a) for a in example]
            self._stage_views = [s.numpy() for s in self._staging]
            self._h2d_impl = self._h2d_staged

    def _set_plan(self, plan: tr.H2DPlan, example: tuple[np.ndarray, ...]) -> None:
        self._h2d_plan = plan
        self._signature = [(tuple(a.shape), a.dtype) for a in example]

    def _pack(self, example: tuple[np.ndarray, ...], layout: tr.PackLayout) -> None:
        """One pinned host block and one device block; inputs are fixed views of both."""
        ops = self._ops
        self._pin_block = ops.pinned(layout.total)
        self._dev_block = ops.device_block(layout.total)
        self._pack_views(example, layout)

    def _pack_views(self, example: tuple[np.ndarray, ...], layout: tr.PackLayout) -> None:
        """``_inputs`` as views of the device block at the layout's offsets, and ``_steps``, the
        copies of one call of inputs shaped like ``example``."""
        host = self._pin_block.numpy()
        self._inputs = []
        views: list[np.ndarray] = []
        for a, off, n in zip(example, layout.offsets, layout.nbytes):
            self._inputs.append(self._dev_block[off:off + n].view(tr.torch_dtype(a.dtype)).view(a.shape))
            views.append(host[off:off + n].view(a.dtype).reshape(a.shape))
        sig = [(tuple(a.shape), a.dtype) for a in example]
        # per chunk: whole inputs (index, host view, shape, dtype), pieces (index, host bytes,
        # lo, hi, shape, dtype), and the device/pinned slices of the block that one copy moves
        self._steps = [
            ([(i, views[i], *sig[i]) for i in c.whole],
             [(i, host[layout.offsets[i] + lo:layout.offsets[i] + hi], lo, hi, *sig[i])
              for i, lo, hi in c.pieces],
             self._dev_block[c.start:c.end], self._pin_block[c.start:c.end])
            for c in layout.chunks]

    def _h2d_adopt(self, host: tuple[np.ndarray, ...]) -> Any:
        """A subclass filled ``_inputs``/``_staging`` itself (never called ``_allocate``): staged."""
        if not self._inputs or len(self._staging) != len(self._inputs):
            raise RuntimeError(f"{self.name}: h2d before the device buffers were allocated "
                               "(call _allocate in prepare, or fill _inputs and _staging)")
        example = tuple(s.numpy() for s in self._staging)
        plan = tr.H2DPlan("staged", True, "the runner bound its own static device buffers and pinned "
                          "staging (staged)", len(example), sum(int(a.nbytes) for a in example),
                          len(example))
        self._set_plan(plan, example)
        self._stage_views = list(example)
        self._casts = True  # as before: numpy casts each input into the buffer's (the engine's) dtype
        self._h2d_impl = self._h2d_staged
        return self._h2d_staged(host)

    # -- the device stages -------------------------------------------------------------
    def h2d(self, host: tuple[np.ndarray, ...]) -> Any:
        if not self._cuda:
            return [torch.from_numpy(a) for a in host]
        if self._in_flight:
            # a second h2d before this call's d2h: its copies may still be reading the pinned buffers
            self._stream.synchronize()
        self._in_flight = True
        saved = self._ops.enter(self._token)
        if saved is not None:
            self._switched_calls += 1
            if self._saved is None:  # else a call that never reached d2h already saved the caller's
                self._saved = saved
        try:
            return self._h2d_impl(host)
        except BaseException:
            self._leave()
            raise

    def _h2d_direct(self, host: tuple[np.ndarray, ...]) -> Any:
        to_device = self._ops.to_device
        return [to_device(a) for a in host]

    def _h2d_direct_static(self, host: tuple[np.ndarray, ...]) -> Any:
        if len(host) != len(self._signature):
            self._check(host)
        copy = self._ops.copy_from_host
        for dst, (shape, dtype), a in zip(self._inputs, self._signature, host):
            if a.shape != shape or a.dtype != dtype:
                self._check(host)
            copy(dst, a)
        return self._inputs

    def _h2d_staged(self, host: tuple[np.ndarray, ...]) -> Any:
        if len(host) != len(self._signature):
            self._check(host)
        copy = self._ops.copy
        for view, stage, dst, (shape, dtype), a in zip(self._stage_views, self._staging, self._inputs,
                                                       self._signature, host):
            if a.shape != shape or a.dtype != dtype:
                self._check(host)
            view[...] = a
            copy(dst, stage)
        return self._inputs

    def _h2d_packed(self, host: tuple[np.ndarray, ...]) -> Any:
        if len(host) != len(self._signature):
            self._check(host)
        copy = self._ops.copy
        flat: dict[int, np.ndarray] = {}
        for whole, pieces, dev, pin in self._steps:
            for i, view, shape, dtype in whole:
                a = host[i]
                if a.shape != shape or a.dtype != dtype:
                    self._check(host)
                view[...] = a
            for i, dst, lo, hi, shape, dtype in pieces:
                src = flat.get(i)
                if src is None:
                    a = host[i]
                    if a.shape != shape or a.dtype != dtype:
                        self._check(host)
                    src = flat[i] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
                dst[...] = src[lo:hi]
            copy(dev, pin)
        return self._inputs

    def _check(self, host: tuple[np.ndarray, ...]) -> None:
        """Inputs must match the prepared shapes and dtypes where buffers are fixed."""
        names = self.input_names
        if len(host) != len(self._signature):
            raise tr.TransferShapeError(f"{self.name}: {len(host)} inputs, prepared for "
                                        f"{len(self._signature)}")
        for i, (a, (shape, dtype)) in enumerate(zip(host, self._signature)):
            if a.shape != shape or (a.dtype != dtype and not self._casts):
                label = names[i] if names and i < len(names) else str(i)
                raise tr.TransferShapeError(
                    f"{self.name}: input {label} is {a.dtype}{list(a.shape)}, prepared as "
                    f"{dtype}{list(shape)}; transfer={self._h2d_plan.strategy if self._h2d_plan else '?'} "
                    "keeps fixed buffers (fixed shapes per task; transfer=direct takes any)")

    def compute(self, inputs: Any) -> Any:
        if not self._cuda:
            with self._no_grad:
                return self.forward(*inputs)
        try:
            with self._no_grad:
                return self.forward(*inputs)
        except BaseException:
            self._leave()
            raise

    def d2h(self, outputs: Any) -> dict[str, np.ndarray]:
        if not self._cuda:
            return {n: t.detach().numpy().copy() for n, t in zip(self.output_names, outputs)}
        try:
            if self._d2h_pinned is None:
                self._choose_d2h(outputs)
            if self._d2h_pinned:
                to_host_async = self._ops.to_host_async
                host = [to_host_async(t) for t in outputs]
                self._stream.synchronize()
                return {n: h.numpy() for n, h in zip(self.output_names, host)}
            to_host = self._ops.to_host
            return {n: to_host(t) for n, t in zip(self.output_names, outputs)}
        finally:
            self._in_flight = False
            self._leave()

    def _leave(self) -> None:
        if self._saved is not None:
            saved, self._saved = self._saved, None
            self._ops.leave(saved)

    def _choose_d2h(self, outputs: Any) -> None:
        outs = list(outputs)
        sizes = [int(t.numel() * t.element_size()) for t in outs]
        on_device = all(self._ops.on_device(t) for t in outs)
        mode, reason = tr.plan_d2h(self.transfer_request, sizes, on_device)
        if mode == "blocking" and not (outs and on_device):
            # a blocking copy is the wait only for device tensors; with none there is nothing to wait on
            mode, reason = "pinned", reason + "; pinned: not every output is a device tensor"
        self._d2h_pinned = mode == "pinned"
        self._d2h_facts = {"d2h": mode, "d2h_reason": reason, "outputs": len(outs),
                           "output_bytes": sum(sizes)}

    # -- report -----------------------------------------------------------------------
    def transfer_facts(self) -> dict[str, Any] | None:
        """How data moved (for ``runner_report.transfer``); None before the runner has moved any."""
        requested = self.transfer_request.as_dict()
        if not self._cuda:
            if self.forward is None:
                return None
            changed = {k: v for k, v in requested.items() if v != "auto"}
            return {"h2d": "none", "requested": requested,
                    "reason": "cpu device: the inputs are the host arrays (torch.from_numpy, no copy); "
                              "outputs are copied to fresh arrays"
                              + (f"; {', '.join(f'{k}={v}' for k, v in changed.items())} "
                                 "does not apply on the cpu" if changed else "")}
        plan = self._h2d_plan
        if plan is None:
            return None
        facts: dict[str, Any] = {
            "h2d": plan.strategy, "h2d_reason": plan.reason, "requested": requested,
            "device_inputs": plan.device_inputs, "inputs": plan.inputs, "input_bytes": plan.input_bytes,
            "copies_per_call": plan.copies,
            "stream": self._stream_kind, "stream_reason": self._stream_reason,
            "calls_that_switched_stream": self._switched_calls,
            **self._d2h_facts}
        if plan.layout is not None:
            facts["pack"] = {"align_bytes": tr.ALIGN_BYTES, "chunk_bytes": tr.PACK_CHUNK_BYTES,
                             "block_bytes": plan.layout.total}
        return facts

    def report(self) -> dict[str, Any]:
        rep = super().report()
        # the transfer options as understood ("AUTO" is "auto"), and left out at "auto", their
        # default: a receipt that names the default then declares the options one that does not
        # name it does, and receipts written before the options existed declare them too
        asked = {k: v for k, v in self.transfer_request.as_dict().items() if v != "auto"}
        rep["options"] = {**{k: v for k, v in rep["options"].items() if k not in tr.OPTION_KEYS}, **asked}
        facts = self.transfer_facts()
        if facts is not None:
            rep["transfer"] = facts
        rep.setdefault("tf32", precision.torch_tf32(self.device))  # TF32 in float32 matmuls, convolutions
        return rep


class ModuleRunner(TorchRunner):
    """A runner whose compute is a torch module called on the caller's stream (eager, compiled):
    inputs may move between calls, so every transfer strategy serves, and the transfer options
    are its options."""

    OPTION_KEYS: tuple[str, ...] | None = tr.OPTION_KEYS
    TRANSFERS = tr.TRANSFERS
    STATIC_INPUTS = False
    SIDE_STREAM = False
