"""SM clock and power while a 4096³ fp16 matmul runs back to back vs. isolated calls.

Explains why a single call measured behind a blocking kernel (device_compute) can be
faster than the per-call time of K back-to-back calls (graph replay): sustained
matmuls draw more power and the SM clock drops. Samples nvidia-smi every 100 ms.

Run:  python benchmarks/clocks_probe.py > clocks.json      (needs a CUDA device)
"""

from __future__ import annotations

import json
import subprocess
import time
from statistics import median

import torch


def sample_smi(seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active",
                             "--format=csv,noheader,nounits", "-lms", "100"],
                            stdout=subprocess.PIPE, text=True)


def phase(name: str, body: object, seconds: float = 3.0) -> dict[str, object]:
    p = sample_smi(seconds)
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += body()  # type: ignore[operator]
    torch.cuda.synchronize()
    p.terminate()
    rows = [r.split(",") for r in p.communicate()[0].strip().splitlines() if r.count(",") == 2]
    sm = [float(r[0]) for r in rows]
    power = [float(r[1]) for r in rows]
    reasons = sorted({r[2].strip() for r in rows})
    return {"phase": name, "calls": n, "sm_clock_mhz_median": median(sm) if sm else None,
            "power_w_median": median(power) if power else None, "throttle_reasons": reasons}


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16, generator=g)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16, generator=g)
    cycles = 2_000_000  # about 1 ms of a blocking kernel at 1.98 GHz

    def back_to_back() -> int:
        for _ in range(50):
            a @ b
        torch.cuda.synchronize()
        return 50

    def isolated() -> int:
        for _ in range(5):
            torch.cuda._sleep(cycles)
            a @ b
        torch.cuda.synchronize()
        return 5

    back_to_back()
    out = [phase("back_to_back", back_to_back), phase("isolated_behind_1ms_sleep", isolated)]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
