"""NVIDIA's own measurement beside benchbox's: where ``trtexec`` is on PATH, its GPU compute
median on the very engine the runner built, next to the runner's ``device_throughput`` p50.

``trtexec --loadEngine`` runs full TensorRT engines; it times inferences back to back with
CUDA graphs and no data transfers here, as ``device_throughput`` times compute at saturation.
The two are recorded side by side and flagged (a warning) when they differ by more than
``AGREEMENT``; trtexec's output is kept beside the receipts.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbox.errors import last_line
from benchbox.selfcheck.checks import Check, p50s

if TYPE_CHECKING:
    from benchbox.selfcheck.checks import Receipts
    from benchbox.selfcheck.facts import TensorRTFacts

#: device_throughput p50 / trtexec's GPU compute median outside this range is flagged
AGREEMENT = (0.7, 1.3)
NAME = "trtexec GPU compute median beside device_throughput"
#: ``GPU Compute Time: min = 0.1 ms, max = ..., mean = ..., median = 0.12 ms, percentile(90%) = ...``
_GPU_COMPUTE = re.compile(r"GPU Compute Time: min = ([-+.\deE]+) ms, max = ([-+.\deE]+) ms, "
                          r"mean = ([-+.\deE]+) ms, median = ([-+.\deE]+) ms")
_VERSIONS = (re.compile(r"TensorRT version: ([\w.]+)"), re.compile(r"\[TensorRT v(\d+)\]"))


def parse_output(text: str) -> dict[str, Any] | None:
    """trtexec's GPU compute summary (ms) and version from its output; None without a summary."""
    m = _GPU_COMPUTE.search(text)
    if m is None:
        return None
    version = next((v.group(1) for v in (p.search(text) for p in _VERSIONS) if v), None)
    return {"gpu_compute_ms": {"min": float(m.group(1)), "max": float(m.group(2)),
                               "mean": float(m.group(3)), "median": float(m.group(4))},
            "version": version}


def command(trtexec: str, engine: Path, device: str) -> list[str]:
    index = device.partition(":")[2] or "0"
    return [trtexec, f"--loadEngine={engine}", "--useCudaGraph", "--noDataTransfers", "--useSpinWait",
            "--warmUp=500", "--duration=3", f"--device={index}"]


def compare(receipts: Receipts, report: TensorRTFacts, flavour: str, device: str,
            log_path: Path, which: Callable[[str], str | None] = shutil.which,
            runner: Callable[..., Any] = subprocess.run) -> Check:
    """Run trtexec on the runner's engine (when it can) and set its median beside device_throughput."""
    found = which("trtexec")
    if found is None:
        return Check(NAME, "not_run", "trtexec is not on PATH")
    if flavour != "tensorrt":
        return Check(NAME, "not_run", f"trtexec runs full TensorRT engines; this one is {flavour}'s")
    engine = Path(report.engine_path)
    throughput = p50s(receipts, "device_throughput")
    if not engine.is_file() or not throughput:
        why = "no device_throughput result" if engine.is_file() else "the engine is not in the engine cache"
        return Check(NAME, "not_run", why)
    cmd = command(found, engine, device)
    try:
        proc = runner(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check(NAME, "warning", f"trtexec did not finish: {type(e).__name__}: {e}")
    log_path.write_text(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    parsed = parse_output(proc.stdout + proc.stderr)
    if proc.returncode != 0 or parsed is None:
        last = last_line(proc.stderr or proc.stdout, 200)
        return Check(NAME, "warning", f"trtexec exited {proc.returncode} without a GPU compute summary "
                                      f"({last}); output in {log_path.name}")
    case = next(iter(throughput))
    median_ns = parsed["gpu_compute_ms"]["median"] * 1e6
    ratio = throughput[case] / median_ns if median_ns > 0 else float("inf")
    lo, hi = AGREEMENT
    detail = (f"{case}: device_throughput p50 {throughput[case] / 1e3:.1f} µs, trtexec "
              f"{parsed['version'] or ''} GPU compute median {median_ns / 1e3:.1f} µs: {ratio:.2f}× "
              f"(agreement {lo:g}×..{hi:g}×); output in {log_path.name}").replace("trtexec  ", "trtexec ")
    if not lo <= ratio <= hi:
        return Check(NAME, "warning", "FLAGGED: " + detail)
    return Check(NAME, "passed", detail)
