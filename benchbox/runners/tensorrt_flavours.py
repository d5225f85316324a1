"""TensorRT's two flavours: which one a request resolves to, and what an RTX build can target.

Full TensorRT (TensorRT 10/11, module ``tensorrt``) and TensorRT for RTX (module
``tensorrt_rtx_bindings``) share the Python API the runner uses; a flavour is picked by
what imports and reports a version here, never by a package's presence alone.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from benchbox.errors import UsageError

#: flavour → (Python module, benchbox extra)
FLAVOURS: dict[str, tuple[str, str]] = {
    "tensorrt": ("tensorrt", "tensorrt"),
    "tensorrt_rtx": ("tensorrt_rtx_bindings", "tensorrt-rtx"),
}
NOT_INSTALLED = ("neither tensorrt nor tensorrt_rtx_bindings is installed: "
                 "pip install 'benchbox-contracts[tensorrt]' or 'benchbox-contracts[tensorrt-rtx]'")
#: compute capability an RTX engine is built for when no option names one and no GPU the
#: flavour supports is usable (Ada Lovelace: RTX 40-series, L4, L40S)
DEFAULT_OFFLINE_CAPABILITY = "8.9"


def error_line(e: BaseException) -> str:
    from benchbox.errors import error_line as line

    return line(e)


@dataclass(frozen=True)
class FlavourChoice:
    """The flavour a request resolved to, and why the others were passed over."""

    requested: str
    flavour: str | None
    skipped: tuple[tuple[str, str], ...] = ()

    def missing_reason(self) -> str:
        if self.requested == "auto":
            if all(why == "not installed" for _, why in self.skipped):
                return NOT_INSTALLED
            return "no usable TensorRT: " + "; ".join(f"{f}: {why}" for f, why in self.skipped)
        module, extra = FLAVOURS[self.requested]
        why = dict(self.skipped).get(self.requested, "not installed")
        if why == "not installed":
            return f"flavour {self.requested} needs {module}, which is not installed: " \
                   f"pip install 'benchbox-contracts[{extra}]'"
        return f"flavour {self.requested}: {why}"

    def to_dict(self) -> dict[str, Any]:
        return {"requested": self.requested, "chosen": self.flavour,
                "skipped": [{"flavour": f, "reason": why} for f, why in self.skipped]}


def installed(flavour: str) -> bool:
    """Whether the flavour's Python module can be found (checked without importing it)."""
    try:
        return importlib.util.find_spec(FLAVOURS[flavour][0]) is not None
    except (ImportError, ValueError):
        return False


def probe(flavour: str) -> str | None:
    """Why the flavour cannot be used (not installed, fails to import, no version), or None."""
    if not installed(flavour):
        return "not installed"
    module = FLAVOURS[flavour][0]
    try:
        mod = importlib.import_module(module)
    except Exception as e:  # a broken install can fail in any way (missing shared libraries, ...)
        return f"{module} is installed but does not import ({error_line(e)})"
    version = getattr(mod, "__version__", None)
    if not isinstance(version, str) or not re.match(r"\d+\.\d+", version):
        return f"{module} imports but reports no version ({version!r})"
    if not hasattr(mod, "Builder") or not hasattr(mod, "OnnxParser"):
        return f"{module} {version} has no Builder/OnnxParser (not the TensorRT Python bindings)"
    return None


def resolve_flavour(requested: str | None) -> FlavourChoice:
    """The requested flavour, or under ``auto`` full TensorRT when it imports and reports a
    version, else TensorRT for RTX; ``flavour`` None when none is usable."""
    requested = requested or "auto"
    if requested != "auto" and requested not in FLAVOURS:
        raise UsageError(f"unknown TensorRT flavour '{requested}' (auto, {', '.join(FLAVOURS)})")
    skipped = []
    for f in (FLAVOURS if requested == "auto" else (requested,)):
        why = probe(f)
        if why is None:
            return FlavourChoice(requested, f, tuple(skipped))
        skipped.append((f, why))
    return FlavourChoice(requested, None, tuple(skipped))


def load_module(flavour: str) -> ModuleType:
    return importlib.import_module(FLAVOURS[flavour][0])


def rtx_capabilities(trt: ModuleType) -> dict[str, Any]:
    """The compute capabilities TensorRT for RTX can build for, as "major.minor" → enum member."""
    out: dict[str, Any] = {}
    for name, member in trt.ComputeCapability.__members__.items():
        m = re.fullmatch(r"SM(\d+)(\d)", name)
        if m:
            out[f"{m.group(1)}.{m.group(2)}"] = member
    return out


def target_capabilities(named: list[str] | None, supported: dict[str, Any], usable_gpu: str | None,
                        gpu: dict[str, Any] | None, version: str) -> tuple[list[str], str]:
    """The compute capabilities an RTX engine is built for, and why.

    ``usable_gpu`` is the capability of this run's GPU when TensorRT for RTX supports it;
    ``gpu`` describes the GPU torch sees (if any), for the reason.
    """
    if named is None:
        if usable_gpu is not None:
            return ["current"], f"default: the GPU of this run (compute capability {usable_gpu})"
        if gpu is not None:
            return [DEFAULT_OFFLINE_CAPABILITY], (
                f"default without a supported GPU: TensorRT for RTX {version} does not run on "
                f"{gpu.get('name')} (compute capability {gpu.get('capability')}), so the engine is "
                f"built for {DEFAULT_OFFLINE_CAPABILITY}")
        return [DEFAULT_OFFLINE_CAPABILITY], (f"default without a CUDA device: the engine is built for "
                                              f"{DEFAULT_OFFLINE_CAPABILITY}")
    if named == ["current"]:
        if usable_gpu is None:
            where = (f"{gpu.get('name')} (compute capability {gpu.get('capability')}) is not supported"
                     if gpu is not None else "no CUDA device is usable")
            raise UsageError(f"tensorrt option compute_capabilities=current: {where}; name one "
                             f"({', '.join(supported)})")
        return ["current"], f"option (the GPU of this run, compute capability {usable_gpu})"
    for c in named:
        if c not in supported:
            raise UsageError(f"tensorrt option compute_capabilities: {c} is not one TensorRT for RTX "
                             f"{version} builds for ({', '.join(supported)})")
    return list(named), "option"


class TensorRTBuildError(RuntimeError):
    """The ONNX parse or the engine build failed; the runner's ``facts`` keep what was learnt."""
