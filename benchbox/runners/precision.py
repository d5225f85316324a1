"""TF32 in float32 matrix multiplications and convolutions, as each runner's settings allow it.

On NVIDIA GPUs from Ampere on, a float32 matmul or convolution may run on tensor cores in
TF32 (10 bits of mantissa) instead of true float32. Whether it may is a setting per library:
torch's ``fp32_precision`` settings (``torch.backends.cuda.matmul`` for cuBLAS matmuls,
``torch.backends.cudnn.conv`` for cuDNN convolutions; torch 2.13 allows TF32 in convolutions
by default and not in matmuls), TensorRT's ``TF32`` builder flag (matmuls and convolutions
alike), and the environment variables ``NVIDIA_TF32_OVERRIDE`` (``0``: NVIDIA's libraries
compute without TF32 whatever the program asks) and ``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE``
(``1``: torch's matmuls allow TF32 whatever the setting).

``torch_tf32`` and ``tensorrt_tf32`` read these (never change them) into the record every
runner's report carries as ``tf32``: ``matmul`` and ``conv`` (``ieee``: true float32,
``tf32``: TF32 allowed), where each comes from, and a ``note`` stating the difference from
true float32 whenever TF32 is allowed on a CUDA device.
"""

from __future__ import annotations

import os
from typing import Any

#: the environment variables that override the programs' TF32 settings
OVERRIDES = ("NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")


def environment() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in OVERRIDES}


def _resolved(*settings: str) -> str | None:
    """The first setting that is not ``none`` (torch's "inherit from the parent")."""
    return next((s for s in settings if s not in ("none", "", None)), None)


def _torch_settings() -> tuple[str, str, dict[str, Any]]:
    """(matmul, conv, the settings they come from) as torch has them now."""
    import torch

    backends = torch.backends
    if not hasattr(backends.cuda.matmul, "fp32_precision"):  # a torch before the fp32_precision API
        matmul_on, conv_on = bool(backends.cuda.matmul.allow_tf32), bool(backends.cudnn.allow_tf32)
        return ("tf32" if matmul_on else "ieee", "tf32" if conv_on else "ieee",
                {"torch.backends.cuda.matmul.allow_tf32": matmul_on,
                 "torch.backends.cudnn.allow_tf32": conv_on})
    generic = str(getattr(backends, "fp32_precision", "none"))
    matmul_set = str(backends.cuda.matmul.fp32_precision)
    cudnn_set = str(getattr(backends.cudnn, "fp32_precision", "none"))
    conv_set = str(getattr(getattr(backends.cudnn, "conv", None), "fp32_precision", "none"))
    settings = {"torch.backends.fp32_precision": generic,
                "torch.backends.cuda.matmul.fp32_precision": matmul_set,
                "torch.backends.cudnn.fp32_precision": cudnn_set,
                "torch.backends.cudnn.conv.fp32_precision": conv_set,
                "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision()}
    # "none" inherits; torch's own defaults at the root: matmuls ieee, cuDNN convolutions tf32
    matmul = _resolved(matmul_set, generic) or "ieee"
    return matmul, _resolved(conv_set, cudnn_set, generic) or "tf32", settings


def torch_tf32(device: str) -> dict[str, Any]:
    """The TF32 record of a PyTorch runner on ``device``, from torch's settings as they are now."""
    matmul, conv, settings = _torch_settings()
    return finish({"matmul": matmul, "conv": conv, "source": "torch fp32_precision settings (read, "
                   "not changed, by benchbox)", "settings": settings}, device, honours_overrides=True)


def tensorrt_tf32(builder_flag: Any, device: str) -> dict[str, Any]:
    """The TF32 record of a TensorRT engine built with the ``TF32`` builder flag ``builder_flag``
    (as read back from the builder config; None when the build did not get that far)."""
    allowed = "tf32" if builder_flag else "ieee"
    record: dict[str, Any] = {"matmul": allowed, "conv": allowed,
                              "source": "the TF32 builder flag, read back from the builder config",
                              "settings": {"BuilderFlag.TF32": builder_flag}}
    return finish(record, device, honours_overrides=False)


def finish(record: dict[str, Any], device: str, *, honours_overrides: bool) -> dict[str, Any]:
    """Add the environment overrides, whether TF32 applies on ``device`` at all, and the note."""
    env = environment()
    record["environment"] = env
    if honours_overrides:
        if env["TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"] == "1":
            record["matmul"] = "tf32"
        if env["NVIDIA_TF32_OVERRIDE"] == "0":
            record["matmul"] = record["conv"] = "ieee"
    cuda = device.startswith("cuda")
    record["applies"] = cuda
    allowed = [what for what, key in (("matmuls", "matmul"), ("convolutions", "conv"))
               if record[key] == "tf32"]
    record["true_float32"] = not (cuda and allowed)
    if not cuda:
        record["note"] = "cpu device: TF32 does not apply, float32 is true float32"
    elif allowed:
        record["note"] = (f"TF32 allowed in float32 {' and '.join(allowed)} ({record['source']}): those "
                          "float32 layers are not true float32, unlike a runner with TF32 off")
    else:
        record["note"] = "TF32 off in float32 matmuls and convolutions: true float32"
    if not honours_overrides and env["NVIDIA_TF32_OVERRIDE"] is not None:
        record["note"] += (f"; NVIDIA_TF32_OVERRIDE={env['NVIDIA_TF32_OVERRIDE']} is set "
                           "(recorded, not judged)")
    return record
