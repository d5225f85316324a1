"""Run-to-run spread of a compiled model, pinned and unpinned (issue 21's evidence).

Each run is a fresh ``python -m benchbox run`` process. Pinned runs share one new cache
directory (the first compiles fresh and pins, the later ones reuse); unpinned runs
(``pin=false``) compile fresh every time, and their picks are recorded and compared under
the same key. Runs alternate between the modes (pinned 1, unpinned 1, pinned 2, ...) so
drift on the machine hits both alike. ``--eager`` adds the eager runner to every run as a
control: its spread is the machine's.

Run on a GPU (defaults: tiny float32, device_compute, 400 samples, 2 runs per mode):
  python benchmarks/pin_spread.py --out results.json
  python benchmarks/pin_spread.py --size large --dtype bfloat16 --runs 2 --out large.json
Smoke test on a CPU:
  python benchmarks/pin_spread.py --device cpu --contract model_io_wall --samples 20 \
      --compile-mode default --runs 2

Writes JSON: per mode, per case, each run's p50 (ns), the spread (max/min), each run's
compile status and pick changes, plus commit, device, command and time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _run(args: argparse.Namespace, mode: str, index: int, cache: Path, work: Path) -> dict[str, Any]:
    out = work / f"{mode}-{index}.json"
    runners = ["--runner", "torch-eager"] if args.eager else []
    cmd = [sys.executable, "-m", "benchbox", "run", "--size", args.size, "--dtype", args.dtype,
           "--device", args.device, "--contract", args.contract, "--runner", "torch-compile", *runners,
           "--samples", str(args.samples), "--warmup", str(args.warmup),
           "--compile-mode", args.compile_mode,
           "--runner-option", f"torch-compile:pin={'true' if mode == 'pinned' else 'false'}",
           "--runner-option", f"torch-compile:cache_dir={cache}",
           "--runner-option", "torch-compile:cold_warm=false", "--out", str(out)]
    for case in args.case:
        cmd += ["--case", case]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if not out.exists():
        raise SystemExit(f"{mode} run {index} wrote no receipt (exit {proc.returncode}): "
                         f"{proc.stderr.strip().splitlines()[-1:] or ''}")
    receipt = json.loads(out.read_text())
    rows = {}
    for r in receipt["results"]:
        rep = r.get("runner_report") or {}
        pin = (rep.get("compile") or {}).get("pin") or {}
        cmp = pin.get("picks_vs_recorded") or {}
        rows[f"{r['runner']}/{r['case']}"] = {
            "status": r["status"], "p50_ns": (r.get("summary") or {}).get("p50_ns"),
            "compile_status": pin.get("status"), "key": pin.get("key"),
            "picks_changed_vs_recorded": cmp.get("changed_sites"), "pick_changes": cmp.get("lines")}
    env_ = receipt.get("environment") or {}
    return {"mode": mode, "run": index, "exit": proc.returncode, "receipt": str(out), "rows": rows,
            "gpu": env_.get("gpu"), "cpu": env_.get("cpu"), "git": env_.get("git"),
            "prepare_s": next((r["runner_report"].get("prepare_s") for r in receipt["results"]
                               if r["runner"] == "torch-compile" and r.get("runner_report")), None)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--contract", default="device_compute")
    ap.add_argument("--case", action="append", default=[], help="repeatable; default every case")
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--compile-mode", default="max-autotune")
    ap.add_argument("--runs", type=int, default=2, help="runs per mode")
    ap.add_argument("--modes", default="pinned,unpinned")
    ap.add_argument("--eager", action="store_true", help="add torch-eager to every run as a control")
    ap.add_argument("--keep", type=Path, default=None, help="keep receipts and caches in this directory")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="benchbox-pin-spread-"))
    work.mkdir(parents=True, exist_ok=True)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if set(modes) - {"pinned", "unpinned"}:
        raise SystemExit("--modes takes pinned and/or unpinned")
    caches = {m: work / f"cache-{m}" for m in modes}
    started = datetime.now(UTC).isoformat(timespec="seconds")
    runs = []
    for i in range(1, args.runs + 1):
        for mode in modes:
            r = _run(args, mode, i, caches[mode], work)
            runs.append(r)
            line = ", ".join(f"{k} {v['p50_ns'] / 1e6:.4f} ms ({v['compile_status'] or v['status']})"
                             for k, v in r["rows"].items() if v["p50_ns"])
            print(f"{mode} run {i}: {line}", flush=True)

    spread: dict[str, dict[str, Any]] = {}
    for mode in modes:
        mine = [r for r in runs if r["mode"] == mode]
        for key in sorted({k for r in mine for k in r["rows"]}):
            p50s = [r["rows"][key]["p50_ns"] for r in mine if r["rows"].get(key, {}).get("p50_ns")]
            spread.setdefault(mode, {})[key] = {
                "p50_ns": p50s, "max_over_min": (max(p50s) / min(p50s)) if len(p50s) > 1 else None}
    for mode, rows in spread.items():
        for key, s in rows.items():
            if s["max_over_min"]:
                print(f"{mode:<9} {key:<28} spread ×{s['max_over_min']:.3f} over {len(s['p50_ns'])} runs")
    result = {"started_at": started, "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
              "command": " ".join([Path(sys.executable).name, *sys.argv]),
              "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "runs": runs, "spread": spread}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
        print(f"written to {args.out}")


if __name__ == "__main__":
    main()
