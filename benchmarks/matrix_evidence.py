"""One plan over every GPU of this machine with the Ray executor, and the same plan serially.

Usage (on a machine with one or more GPUs, from the repository root):

    python benchmarks/matrix_evidence.py --out DIR [--size small] [--samples 400] [--cpus 4]
    python benchmarks/matrix_evidence.py --out DIR --print-only   # the table again, from DIR

Writes DIR/plan.toml, the two stores DIR/serial and DIR/parallel (receipts and the
matrix records), DIR/matrix-evidence.json (commit, GPUs, times, wall times, per-cell
p50s) and prints a table: the wall time of each executor, and for every cell and case
the p50 measured serially and beside the other cells, with the GPU each ran on and
what it shared. Each executor run gets fresh compile and engine caches, so neither
profits from the other's compilation. Serial runs first, then parallel; ``--order``
swaps them. Smoke-run it without a GPU with ``--device cpu --samples 5 --runners torch-eager``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchbox.harness import PhaseTimer
from benchbox.matrix.host import list_gpus


def _plan(args: argparse.Namespace) -> str:
    runners = ", ".join(f'"{r}"' for r in args.runners)
    dtypes = ", ".join(f'"{d}"' for d in args.dtypes)
    compile_opts = (f'[runner_options.torch-compile]\nmode = "{args.compile_mode}"\n\n'
                    if "torch-compile" in args.runners else "")
    return f"""name = "matrix-evidence"
description = "A matrix over the GPUs of one machine against the same plan run serially."
task = "decision"

[axes]
size = ["{args.size}"]
dtype = [{dtypes}]
runner = [{runners}]
contract = ["public_task_call_wall"]
device = ["{args.device}"]

[run]
samples = {args.samples}
warmup = {args.warmup}

{compile_opts}[resources]
cpus = {args.cpus}
timeout_s = {args.timeout}
"""


def _run(executor: str, plan: Path, out: Path, revision: str) -> dict[str, Any]:
    store = out / executor_dir(executor)
    env = {**os.environ,
           "TORCHINDUCTOR_CACHE_DIR": str(out / "caches" / executor / "inductor"),
           "BENCHBOX_CACHE": str(out / "caches" / executor / "benchbox")}
    argv = [sys.executable, "-m", "benchbox", "matrix", str(plan), "--store", str(store),
            "--executor", executor, "--revision", revision, "--force"]
    phases = PhaseTimer()
    with phases("wall"), open(out / f"{executor_dir(executor)}.log", "w") as log:
        rc = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    records = sorted((store / "matrix" / "runs").glob("*.json"))
    record = json.loads(records[-1].read_text()) if records else {}
    return {"executor": executor, "exit_code": rc, "wall_s": phases.seconds["wall"],
            "matrix_wall_s": record.get("wall_s"), "record": str(records[-1]) if records else None,
            "cells": record.get("cells", [])}


def executor_dir(executor: str) -> str:
    return "serial" if executor == "local" else "parallel"


def _p50s(store: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(cell config, runner, case) → p50 and the conditions it was measured under."""
    out = {}
    for p in (store / "receipts").glob("*.json"):
        r = json.loads(p.read_text())
        labels = r["settings"]["labels"]
        for row in r["results"]:
            out[(labels["matrix_config"], row["runner"], row["case"])] = {
                "p50_ns": row["summary"].get("p50_ns"), "status": row["status"],
                "gpu": labels.get("matrix_gpu_bus_id", "-"),
                "overlapping": labels.get("matrix_overlapping_cells"),
                "pcie_shared": labels.get("matrix_pcie_shared"),
                "cpus": labels.get("matrix_cpus_pinned"),
                "axes": f"{r['task']['size']} {r['task'].get('dtype', '')} {row['runner']}"}
    return out


def _ms(ns: int | None) -> str:
    return f"{ns / 1e6:.3f}" if ns else "-"


def table(out: Path) -> str:
    ev = json.loads((out / "matrix-evidence.json").read_text())
    runs = {r["executor"]: r for r in ev["runs"]}
    lines = [f"commit {ev['commit']}  host {ev['host']}  {ev['time']}",
             "GPUs: " + ("; ".join(f"{g['index']} {g['name']} {g['bus_id']} {g['uuid']}" for g in ev["gpus"])
                         or "none"), ""]
    lines.append(f"{'executor':<10} {'exit':>4} {'wall s':>8} {'cells s':>8} {'cells':>6} {'valid':>6}"
                 "   (wall: the whole command, Ray's start included; cells: first cell started to last done)")
    for r in runs.values():
        valid = sum(c["status"] == "valid" for c in r["cells"])
        lines.append(f"{r['executor']:<10} {r['exit_code']:>4} {r['wall_s']:>8.1f} "
                     f"{r['matrix_wall_s'] or 0:>8.1f} {len(r['cells']):>6} {valid:>6}")
    if "local" in runs and "ray" in runs and runs["ray"]["wall_s"]:
        lines.append(f"serial / parallel wall time: {runs['local']['wall_s'] / runs['ray']['wall_s']:.2f}×")
    serial, parallel = _p50s(out / "serial"), _p50s(out / "parallel")
    lines += ["", f"{'cell':<28} {'case':<8} {'serial p50 ms':>13} {'parallel p50 ms':>15} {'ratio':>6}  "
                  "parallel: gpu / cells beside / pcie shared / cpus"]
    for key in sorted(set(serial) | set(parallel)):
        s, p = serial.get(key, {}), parallel.get(key, {})
        sp, pp = s.get("p50_ns"), p.get("p50_ns")
        ratio = f"{pp / sp:.3f}" if sp and pp else "-"
        lines.append(f"{(s or p).get('axes', ''):<28} {key[2]:<8} {_ms(sp):>13} {_ms(pp):>15} {ratio:>6}  "
                     f"{p.get('gpu', '-')} / {p.get('overlapping', '-')} / {p.get('pcie_shared', '-')} / "
                     f"{p.get('cpus', '-')}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--size", default="small")
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--runners", nargs="+", default=["torch-eager", "torch-compile"])
    ap.add_argument("--compile-mode", default="default")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--cpus", type=int, default=4, help="CPUs per cell (pinned)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    ap.add_argument("--order", choices=["serial-first", "parallel-first"], default="serial-first")
    ap.add_argument("--print-only", action="store_true")
    args = ap.parse_args()
    if args.print_only:
        print(table(args.out))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    plan = args.out / "plan.toml"
    plan.write_text(_plan(args))
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    revision = f"evidence-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
    order = ["local", "ray"] if args.order == "serial-first" else ["ray", "local"]
    runs = [_run(ex, plan, args.out, revision) for ex in order]
    ev = {"commit": commit, "host": platform.node(), "time": datetime.now(UTC).isoformat(timespec="seconds"),
          "gpus": [g.__dict__ for g in list_gpus()], "cpu_count": os.cpu_count(), "order": order,
          "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}, "runs": runs}
    (args.out / "matrix-evidence.json").write_text(json.dumps(ev, indent=1))
    print(table(args.out))
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
