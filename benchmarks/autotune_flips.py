"""Do fresh max-autotune compiles of identical code pick the same kernels? (no GPU needed)

Compiles a model of batched matmuls K times, each time fresh (the torch-compile runner
with ``pin=false``: empty inductor caches, so the autotuner benchmarks every candidate
again), and records every call site's pick and the autotuner's timing of each candidate.
The default shapes are ones where, on a CPU, inductor's C++ GEMM template and ATen's
``bmm`` run within a few percent of each other, so noise in the autotuner's measurements
can decide the pick. On CUDA (``--device cuda``) the same model is tuned among Triton
templates and cuBLAS.

Run:  OMP_NUM_THREADS=1 python benchmarks/autotune_flips.py [--compiles 6] [--out FILE]

Prints one line per compile (picks, and the call sites that differ from the previous
compile) and writes JSON with every pick and timing, the commit, the machine and the time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchbox.environment import cpu_model  # noqa: E402
from benchbox.fallbacks import compare_picks, kernel_label  # noqa: E402
from benchbox.harness import PhaseTimer  # noqa: E402
from benchbox.tasks.base import Case, Task  # noqa: E402

#: (batch, m, k, n) per call site; near-ties between the C++ template and ATen on an AVX-512 CPU
SHAPES = ((2, 128, 8, 128), (4, 48, 24, 40), (16, 8, 32, 8), (8, 8, 64, 8))


class BmmTask(Task):
    """One batched matmul per shape; the request is ignored (inputs are seeded random data)."""

    name = "bmm_sites"
    output_names = ("y",)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(0)
        self.input_names = tuple(f"x{i}" for i in range(len(SHAPES)))
        self._x = tuple(rng.standard_normal((b, m, k)).astype(np.float32) for b, m, k, _ in SHAPES)

    def parse(self, request: bytes) -> Any:
        return json.loads(request)

    def preprocess(self, request: Any) -> tuple[np.ndarray, ...]:
        return self._x

    def reduce(self, outputs: dict[str, np.ndarray], request: Any) -> Any:
        return float(np.asarray(outputs["y"], np.float64).sum())

    def answer(self, reduced: Any, request: Any) -> Any:
        return {"checksum": round(reduced, 3)}

    def serialize(self, answer: Any) -> bytes:
        return json.dumps(answer).encode()

    def cases(self) -> list[Case]:
        return [Case("sites", b"{}")]

    def build_model(self) -> Any:
        import torch
        from torch import nn

        class Model(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                g = torch.Generator().manual_seed(0)
                self.w = nn.ParameterList(nn.Parameter(torch.randn(b, k, n, generator=g))
                                          for b, _, k, n in SHAPES)

            def forward(self, *xs: torch.Tensor) -> tuple[torch.Tensor]:
                return (sum(torch.bmm(x, w).sum() for x, w in zip(xs, self.w)).reshape(1),)

        return Model().eval()


def _git() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                           cwd=Path(__file__).resolve().parents[1])
        return r.stdout.strip() or None
    except OSError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compiles", type=int, default=6)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    import torch

    from benchbox.runners.torch_compile import TorchCompileRunner

    task = BmmTask(size="tiny", dtype="float32")
    example = task.preprocess(task.parse(task.cases()[0].request))
    cache = tempfile.mkdtemp(prefix="benchbox-flips-")
    compiles: list[dict[str, Any]] = []
    previous: list[dict[str, Any]] | None = None
    for i in range(args.compiles):
        runner = TorchCompileRunner(args.device, {"pin": False, "cold_warm": False, "cache_dir": cache})
        phases = PhaseTimer()
        runner.prepare(task, task.build_model(), example, phases)
        sites = runner.records["compile_cold"].autotune
        picks = [kernel_label(s["chosen"]) for s in sites]
        vs = compare_picks(previous, sites).to_dict() if previous is not None else None
        compiles.append({"compile_s": phases.seconds.get("compile_cold"), "picks": picks,
                         "timings_ms": [{kernel_label(a["kernel"]): a["ms"] for a in s["alternatives"]}
                                        for s in sites],
                         "vs_previous": vs})
        changed = "" if vs is None else (f"  differs from the previous at {vs['changed_sites']} site(s): "
                                         + "; ".join(vs["lines"]) if not vs["same"] else "  same as previous")
        print(f"compile {i + 1}: {', '.join(p.split(' (')[0] for p in picks)}{changed}", flush=True)
        previous = sites

    per_site = []
    for j, (b, m, k, n) in enumerate(SHAPES):
        picked = [c["picks"][j] for c in compiles if j < len(c["picks"])]
        kernels = sorted({name for c in compiles if j < len(c["timings_ms"]) for name in c["timings_ms"][j]})
        spread = {}
        for name in kernels:
            ts = [c["timings_ms"][j][name] for c in compiles
                  if j < len(c["timings_ms"]) and name in c["timings_ms"][j]]
            spread[name] = {"min": min(ts), "median": median(ts), "max": max(ts)}
        per_site.append({"shape": f"bmm {b}×{m}×{k} @ {b}×{k}×{n}",
                         "picks": {p: picked.count(p) for p in sorted(set(picked))},
                         "autotune_ms": spread})
    differing = sum(1 for c in compiles if c["vs_previous"] and not c["vs_previous"]["same"])
    result = {"measured_at": datetime.now(UTC).isoformat(timespec="seconds"), "git": _git(),
              "machine": {"cpu": cpu_model(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
                          "torch": torch.__version__, "threads": torch.get_num_threads(),
                          "device": args.device,
                          "gpu": torch.cuda.get_device_name(args.device) if args.device.startswith("cuda")
                          else None},
              "command": " ".join([Path(sys.executable).name, *sys.argv]),
              "compiles": compiles, "per_site": per_site,
              "compiles_differing_from_previous": differing}
    for s in per_site:
        times = "; ".join(f"{k.split(' (')[0]} {v['min']:.4f}–{v['max']:.4f}"
                          for k, v in s["autotune_ms"].items())
        print(f"{s['shape']}: picks {s['picks']}; autotuner ms {times}")
    print(f"{differing} of {len(compiles) - 1} compiles picked differently from the compile before")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
        print(f"written to {args.out}")


if __name__ == "__main__":
    main()
