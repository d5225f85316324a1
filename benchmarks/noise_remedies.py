"""How much of the run-to-run variance does each remedy remove? Variance components per contract.

Each configuration runs ``--processes`` fresh ``benchbox run`` processes (each ``--rounds``
in-process rounds), the configurations interleaved process by process so drift on the machine
reaches them alike. From the receipts, per contract and (runner, case), in log-p50 terms:

- ``within``: the sampling error of a round's median (the exact interval's half-width / z);
- ``rounds``: the sd of the round medians within a process beyond that sampling error;
- ``processes``: the sd of the process medians (each process's samples pooled) — what a diff
  across runs rests on;
- ``control``: the sd between processes of the control workload's p50 (fixed host work).

The median over rows of each is reported per configuration. Configurations (``--config``,
repeatable; default all): ``default``; ``threads1`` (``--threads 1``); ``one_core`` (the process
pinned to one CPU with ``taskset``); ``hash_seed`` (``PYTHONHASHSEED=0``); ``gc_off``
(``--gc off``); ``warmup50`` (``--warmup 50``); ``layout_fixed`` (``--layout fixed``: address
randomisation off and ``PYTHONHASHSEED=0``); ``threads1_layout_fixed`` (both);
``threads1_thp_off`` (one thread, transparent huge pages off for the process:
``prctl(PR_SET_THP_DISABLE)``); ``threads1_layout_fixed_stack_random`` (one thread, the fixed
layout but the stack moved by a random 0–8191 bytes of environment: is the stack's offset what
the fixed layout fixes?); ``all`` (every one of them).

    python -m benchmarks.noise_remedies --out benchmarks/results-noise-remedies-cpu.json
    python -m benchmarks.noise_remedies --device cuda --runner torch-eager --runner torch-compile \\
        --contract device_compute --out "$OUT/noise-remedies-h200.json"

Timings: run it alone on the machine (nothing else measuring); the load at start of every
process is in its receipt and the result names the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

# Transparent huge pages off for the process and what it executes (prctl PR_SET_THP_DISABLE is
# inherited across fork and kept across execve).
THP_OFF_EXEC = ("import ctypes, os, sys; ctypes.CDLL(None, use_errno=True).prctl(41, 1, 0, 0, 0); "
                "os.execvp(sys.argv[1], sys.argv[1:])")

CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "threads1": {"args": ["--threads", "1"]},
    "one_core": {"taskset": True},
    "hash_seed": {"env": {"PYTHONHASHSEED": "0"}},
    "gc_off": {"args": ["--gc", "off"]},
    "warmup50": {"args": ["--warmup", "50"]},
    "layout_fixed": {"args": ["--layout", "fixed"]},
    "threads1_layout_fixed": {"args": ["--threads", "1", "--layout", "fixed"]},
    "threads1_thp_off": {"args": ["--threads", "1"], "thp_off": True},
    "threads1_layout_fixed_stack_random": {"args": ["--threads", "1", "--layout", "fixed"],
                                           "pad_stack": True},
    "all": {"args": ["--threads", "1", "--gc", "off", "--warmup", "50"], "taskset": True,
            "env": {"PYTHONHASHSEED": "0"}},
}


def command(cfg: dict[str, Any], out: Path, a: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The ``benchbox run`` command line and environment of one process of a configuration."""
    args = [sys.executable, "-m", "benchbox", "run", "--size", a.size, "--device", a.device,
            "--samples", str(a.samples), "--repeats", str(a.rounds), "--in-process", "--out", str(out),
            "--quiet", "--overwrite"]
    for r in a.runner:
        args += ["--runner", r]
    for c in a.contract:
        args += ["--contract", c]
    for c in a.case:
        args += ["--case", c]
    if "--warmup" not in cfg.get("args", []):
        args += ["--warmup", str(a.warmup)]
    args += cfg.get("args", [])
    if cfg.get("taskset"):
        args = ["taskset", "-c", a.cpu, *args]
    if cfg.get("thp_off"):
        args = [sys.executable, "-c", THP_OFF_EXEC, *args]
    env = {**os.environ, **cfg.get("env", {})}
    if cfg.get("pad_stack"):  # the strings of the environment sit at the top of the stack
        env["BENCHBOX_STACK_PAD"] = "x" * random.randrange(8192)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                         *filter(None, [os.environ.get("PYTHONPATH")])])
    return args, env


def _log_median_se(x: np.ndarray) -> float:
    from benchbox.stats import log_quantile_se

    return log_quantile_se(np.sort(x), 0.5) or 0.0


def components(receipts: list[Any]) -> dict[str, dict[str, float | None]]:
    """Per contract: the median over (runner, case) rows of each variance component."""
    from benchbox.receipts.replication import process_samples

    by_contract: dict[str, dict[tuple[str, str], list[tuple[list[np.ndarray], np.ndarray]]]] = {}
    for r in receipts:
        for row in r.results:
            if row.status != "valid" or not row.samples_ns:
                continue
            rounds = [np.asarray(x, dtype=np.float64) for x in row.rounds() if x]
            pooled = process_samples(r, row)[0]
            by_contract.setdefault(r.contract.name, {}).setdefault(row.key, []).append((rounds, pooled))
    out: dict[str, dict[str, float | None]] = {}
    for contract, rows in by_contract.items():
        within, between_rounds, between_procs = [], [], []
        for procs in rows.values():
            within.append(float(np.mean([_log_median_se(x) for rounds, _ in procs for x in rounds])))
            spreads = [float(np.var([math.log(np.median(x)) for x in rounds], ddof=1))
                       for rounds, _ in procs if len(rounds) > 1]
            if spreads:
                between_rounds.append(math.sqrt(max(0.0, float(np.mean(spreads)) - within[-1] ** 2)))
            if len(procs) > 1:
                between_procs.append(float(np.std([math.log(np.median(p)) for _, p in procs], ddof=1)))
        out[contract] = {"within_round": _median(within), "between_rounds": _median(between_rounds),
                         "between_processes": _median(between_procs),
                         "between_processes_max": max(between_procs) if between_procs else None,
                         "rows": len(rows)}
    return out


def _median(v: list[float]) -> float | None:
    return float(np.median(v)) if v else None


def control_spread(receipts: list[Any]) -> float | None:
    """The sd between processes of the control workload's log p50."""
    ys = [math.log(p.control["p50_ns"]) for r in receipts[:1] for p in (r.processes or ())
          if p.control and p.control.get("p50_ns")]
    return None if len(ys) < 2 else float(np.std(ys, ddof=1))


def run(a: argparse.Namespace) -> dict[str, Any]:
    from benchbox.receipts import load_receipt

    names = a.config or list(CONFIGS)
    folder = Path(a.keep or tempfile.mkdtemp(prefix="noise-"))
    folder.mkdir(parents=True, exist_ok=True)
    made: dict[str, list[list[Path]]] = {n: [] for n in names}
    result: dict[str, Any] = {"command": ["python", "-m", "benchmarks.noise_remedies", *a.argv],
                              "loadavg_before": list(os.getloadavg()), "configs": {}}
    t0 = time.time()
    for i in range(a.processes):
        for name in (names if i % 2 == 0 else names[::-1]):  # interleaved, alternating order
            out = folder / f"{name}-{i}.json"
            args, env = command(CONFIGS[name], out, a)
            p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=a.timeout)
            if p.returncode not in (0, 1):
                raise SystemExit(f"noise_remedies: {name} process {i} exited {p.returncode}: "
                                 f"{(p.stderr or p.stdout).strip().splitlines()[-1:]}")
            made[name].append(sorted([*folder.glob(f"{name}-{i}.json"), *folder.glob(f"{name}-{i}.*.json")]))
            print(f"{name} {i + 1}/{a.processes} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    for name in names:
        receipts = [load_receipt(q) for paths in made[name] for q in paths]
        joined = _joined_per_contract(receipts)
        result["configs"][name] = {"components": components(receipts),
                                   "control_between_processes": control_spread(joined),
                                   "processes": a.processes}
    result["loadavg_after"] = list(os.getloadavg())
    result["seconds"] = round(time.time() - t0, 1)
    return result


def _joined_per_contract(receipts: list[Any]) -> list[Any]:
    """One receipt per contract whose processes are every process's (for the control's spread)."""
    from dataclasses import replace

    by: dict[str, Any] = {}
    for r in receipts:
        if r.contract.name in by:
            first = by[r.contract.name]
            by[r.contract.name] = replace(first, processes=(first.processes or ()) + (r.processes or ()))
        else:
            by[r.contract.name] = r
    return list(by.values())


def table(result: dict[str, Any]) -> str:
    lines = ["| configuration | contract | within a round | between rounds | between processes (max) "
             "| control between processes |", "|---|---|---|---|---|---|"]
    for name, c in result["configs"].items():
        for contract, v in c["components"].items():
            f = (lambda x: "-" if x is None else f"{x:.3f}")  # noqa: E731
            lines.append(f"| {name} | {contract} | {f(v['within_round'])} | {f(v['between_rounds'])} | "
                         f"{f(v['between_processes'])} ({f(v['between_processes_max'])}) | "
                         f"{f(c['control_between_processes'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", action="append", choices=list(CONFIGS), default=[])
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2, help="in-process rounds per process")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--runner", action="append", default=[])
    ap.add_argument("--contract", action="append", default=[])
    ap.add_argument("--case", action="append", default=[])
    ap.add_argument("--cpu", default="0", help="the CPU list one_core pins to (taskset -c)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    a.argv = list(argv if argv is not None else sys.argv[1:])
    a.runner = a.runner or ["torch-eager"]
    a.contract = a.contract or ["public_task_call_wall", "model_io_wall"]
    result = run(a)
    print(table(result))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
