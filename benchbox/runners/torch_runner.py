"""Device stages shared by the PyTorch runners: static buffers, a stream, pinned staging."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from benchbox.runners.base import Runner


def cuda_reason(device: str) -> str | None:
    if device.startswith("cuda") and not torch.cuda.is_available():
        return "no CUDA device is visible to torch"
    return None


class TorchRunner(Runner):
    """h2d/d2h through static device buffers; subclasses decide what ``forward`` is."""

    def __init__(self, device: str = "cpu", options: dict[str, Any] | None = None) -> None:
        super().__init__(device, options)
        self.forward: Any = None
        self.output_names: tuple[str, ...] = ()
        self._cuda = device.startswith("cuda")
        self._stream = torch.cuda.Stream(device=device) if self._cuda else None
        self._staging: list[torch.Tensor] = []
        self._inputs: list[torch.Tensor] = []

    @classmethod
    def availability(cls, device: str) -> str | None:
        return cuda_reason(device)

    @property
    def stream(self) -> Any:
        return self._stream

    def synchronize(self) -> None:
        if self._stream is not None:
            self._stream.synchronize()

    def versions(self) -> dict[str, str]:
        v = {"torch": torch.__version__}
        if self._cuda:
            v["cuda"] = str(torch.version.cuda)
        return v

    def _allocate(self, example: tuple[np.ndarray, ...]) -> None:
        if self._cuda:
            self._staging = [torch.from_numpy(a).pin_memory() for a in example]
            self._inputs = [torch.empty_like(t, device=self.device) for t in self._staging]

    def h2d(self, host: tuple[np.ndarray, ...]) -> Any:
        if not self._cuda:
            return [torch.from_numpy(a) for a in host]
        with torch.cuda.stream(self._stream):
            for stage, dev, a in zip(self._staging, self._inputs, host):
                stage.numpy()[...] = a
                dev.copy_(stage, non_blocking=True)
        return self._inputs

    def compute(self, inputs: Any) -> Any:
        if not self._cuda:
            with torch.inference_mode():
                return self.forward(*inputs)
        with torch.cuda.stream(self._stream), torch.inference_mode():
            return self.forward(*inputs)

    def d2h(self, outputs: Any) -> dict[str, np.ndarray]:
        if not self._cuda:
            return {n: t.detach().numpy().copy() for n, t in zip(self.output_names, outputs)}
        with torch.cuda.stream(self._stream):
            host = [t.to("cpu", non_blocking=True) for t in outputs]
        self._stream.synchronize()
        return {n: t.numpy() for n, t in zip(self.output_names, host)}
