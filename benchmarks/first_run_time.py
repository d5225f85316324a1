"""The main job's time, as the README's "Set up" states it: `benchbox run --contract
public_task_call_wall` with an empty compile cache, then again with it warm.

Run: python -m benchmarks.first_run_time [--out FILE.json]

Uses the `benchbox` next to this Python (the checkout's venv). Each run gets a fresh receipt
path; the compile cache is a new temporary folder (``BENCHBOX_CACHE``), so the first run
compiles as on a new machine. Prints one JSON object: each run's wall seconds and exit code,
the load average before and after each, and the machine (CPU model, cores). A time means
little without the load beside it: take it on a quiet machine (load average below 1.5 on 2
cores is what the README's figure was measured at).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchbox.environment import cpu_model

COMMAND = ["run", "--contract", "public_task_call_wall"]


def timed_run(benchbox: str, cache: Path, out: Path) -> dict:
    """One run of the main job: wall seconds, exit code, load average before and after."""
    env = {**os.environ, "BENCHBOX_CACHE": str(cache)}
    before = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run([benchbox, *COMMAND, "--quiet", "--out", str(out)], env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    return {"wall_s": round(wall, 1), "exit_code": proc.returncode, "loadavg_before": list(before),
            "loadavg_after": list(os.getloadavg()),
            "stderr_tail": proc.stderr[-400:] if proc.returncode else ""}


def measure() -> dict:
    benchbox = str(Path(sys.executable).with_name("benchbox"))
    with tempfile.TemporaryDirectory(prefix="benchbox-first-run-") as tmp:
        cache = Path(tmp) / "cache"
        cold = timed_run(benchbox, cache, Path(tmp) / "cold.json")
        warm = timed_run(benchbox, cache, Path(tmp) / "warm.json")
    return {"command": ["benchbox", *COMMAND], "cold": cold, "warm": warm,
            "machine": {"cpu": cpu_model(), "cpu_count": os.cpu_count()}, "nice": os.nice(0),
            "when": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="also write the result here")
    args = ap.parse_args()
    result = measure()
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
