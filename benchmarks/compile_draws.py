"""Draws and artifacts on a GPU: is the pinned row the fastest draw, and does the artifact travel?

Two fresh ``python -m benchbox run`` processes, each on empty caches of its own
(``BENCHBOX_CACHE``, ``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``: new directories):

1. **pin**: torch-compile with ``draws=N`` (default 3) and ``artifact_out``: N fresh
   max-autotune compiles, each timed by the harness, the fastest pinned, measured and saved.
   Check: the pinned row's p50 is within ``--tolerance`` (2%) of the fastest draw's p50.
2. **load**: the same command with ``artifact=`` the saved file, nothing else cached.
   Checks: the compile came from the artifact (status ``artifact``: every graph from it, no
   FX graph cache miss, nothing autotuned) and the compiled p50 is within ±``--tolerance``
   of the pinning run's.

``torch-eager`` runs in both processes as a control (``--no-eager`` leaves it out): its
p50 moving between the two processes is the machine's own drift. ``benchbox diff`` of the
two receipts is recorded too (the compiled rows name no probable cause: one artifact).

Run on a GPU (defaults: tiny float32, device_compute, case invoice, 400 samples):
  python benchmarks/compile_draws.py --out-dir results/
  python benchmarks/compile_draws.py --out-dir results-robust/ \
      --env TORCHINDUCTOR_USE_EXPERIMENTAL_BENCHMARKER=0        (autotune with do_bench's median)
Smoke test on a CPU (checks the logic, not the speed):
  python benchmarks/compile_draws.py --device cpu --contract model_io_wall --compile-mode default \
      --samples 20 --draw-samples 5 --tolerance 1000 --out-dir /tmp/cd

Writes ``compile_draws.json`` into ``--out-dir`` (settings, each step's command, exit code,
wall seconds and rows, the draws with their p50 and picks, the checks, the diff) and keeps
the two receipts, their logs and the artifact in ``--out-dir/work``; the caches live in a
temporary directory and are removed. Exit 0 when every check passed, 1 when one failed,
2 when a step wrote no receipt.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _pythonpath() -> str:
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


def _command(args: argparse.Namespace, out: Path, extra: list[str]) -> list[str]:
    runners = ["--runner", "torch-compile"] + ([] if args.no_eager else ["--runner", "torch-eager"])
    cmd = [sys.executable, "-m", "benchbox", "run", "--size", args.size, "--dtype", args.dtype,
           "--device", args.device, "--contract", args.contract, *runners,
           "--samples", str(args.samples), "--warmup", str(args.warmup),
           "--compile-mode", args.compile_mode, "--out", str(out),
           *[a for opt in (f"draws={args.draws}", f"draw_samples={args.draw_samples}",
                           f"draw_rounds={args.draw_rounds}")
             for a in ("--runner-option", f"torch-compile:{opt}")], *extra]
    for case in args.case:
        cmd += ["--case", case]
    for opt in args.compile_option:
        cmd += ["--compile-option", opt]
    return cmd


def _step(args: argparse.Namespace, name: str, work: Path, caches: Path, extra: list[str]) -> dict[str, Any]:
    """One benchbox run in a fresh process on empty caches; its receipt's rows, read back."""
    out = work / f"{name}.json"
    env = {**os.environ, **dict(kv.split("=", 1) for kv in args.env),
           "PYTHONPATH": _pythonpath(),
           "BENCHBOX_CACHE": str(caches / name / "benchbox"),
           "TORCHINDUCTOR_CACHE_DIR": str(caches / name / "inductor"),
           "TRITON_CACHE_DIR": str(caches / name / "triton")}
    cmd = _command(args, out, extra)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    (work / f"{name}.stderr.txt").write_text(proc.stderr[-200_000:])
    step: dict[str, Any] = {"command": " ".join(cmd[1:]), "exit": proc.returncode, "wall_s": round(wall, 1),
                            "receipt": str(out)}
    if not out.exists():
        step["error"] = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return step
    receipt = json.loads(out.read_text())
    step["rows"] = {f"{r['runner']}/{r['case']}": _row(r) for r in receipt["results"]}
    step["gpu"] = (receipt.get("environment") or {}).get("gpu")
    step["git"] = (receipt.get("environment") or {}).get("git")
    return step


def _row(r: dict[str, Any]) -> dict[str, Any]:
    rep = r.get("runner_report") or {}
    comp = rep.get("compile") or {}
    pin = comp.get("pin") or {}
    warm = ((comp.get("phases") or {}).get("compile_warm") or {})
    summary = r.get("summary") or {}
    row = {"status": r["status"], "reasons": r.get("reasons"), "p50_ns": summary.get("p50_ns"),
           "clock_used": r.get("clock_used"), "n": summary.get("n")}
    if comp:
        row.update(compile_status=pin.get("status"), summary=pin.get("summary"),
                   artifact=(comp.get("artifact") or {}).get("sha256"),
                   warm_cache_counters=(warm.get("cache_counters") or {}).get("inductor"),
                   warm_autotuned_ops=warm.get("autotuned_ops"), prepare_s=rep.get("prepare_s"),
                   autotune_settings=(rep.get("applied_options") or {}).get("autotune_settings"))
        draws = comp.get("draws")
        if draws:
            row["draws"] = {"fastest": draws["fastest"], "spread": draws["spread"],
                            "entries": [{k: e.get(k) for k in ("draw", "p50_ns", "samples", "compile_s",
                                                               "accuracy_passed", "autotuned_call_sites")}
                                        | {"picks_vs_fastest": e["picks_vs_fastest"]["lines"]}
                                        for e in draws["entries"]]}
    return row


def _compiled(step: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    return next(((k, v) for k, v in (step.get("rows") or {}).items() if k.startswith("torch-compile/")), None)


def _checks(pin: dict[str, Any], load: dict[str, Any], tol: float) -> dict[str, Any]:
    """The two acceptance checks (and what the loading run's compile was)."""
    out: dict[str, Any] = {"tolerance": tol}
    got, again = _compiled(pin), _compiled(load)
    if got is None or again is None or "draws" not in got[1]:
        out["error"] = "a step has no compiled row with draws (see its receipt and stderr)"
        return out
    row, loaded = got[1], again[1]
    fastest = next(e for e in row["draws"]["entries"] if e["draw"] == row["draws"]["fastest"])
    ratio = row["p50_ns"] / fastest["p50_ns"] if row["p50_ns"] and fastest["p50_ns"] else None
    out["pinned_vs_fastest_draw"] = {"pinned_p50_ns": row["p50_ns"], "fastest_draw_p50_ns": fastest["p50_ns"],
                                     "ratio": ratio, "ok": ratio is not None and abs(ratio - 1) <= tol}
    counters = loaded.get("warm_cache_counters") or {}
    from_artifact = (loaded.get("compile_status") == "artifact" and not counters.get("fxgraph_cache_miss")
                     and not loaded.get("warm_autotuned_ops")
                     and loaded.get("artifact") == row.get("artifact"))
    ratio2 = loaded["p50_ns"] / row["p50_ns"] if loaded["p50_ns"] and row["p50_ns"] else None
    out["loaded_vs_pinning_run"] = {"pinning_p50_ns": row["p50_ns"], "loaded_p50_ns": loaded["p50_ns"],
                                    "ratio": ratio2, "compiled_from_artifact": from_artifact,
                                    "ok": from_artifact and ratio2 is not None and abs(ratio2 - 1) <= tol}
    eager = [s["rows"].get(k, {}).get("p50_ns") for s in (pin, load) for k in s["rows"]
             if k.startswith("torch-eager/")]
    if len(eager) == 2 and all(eager):
        out["eager_control_ratio"] = eager[1] / eager[0]
    out["ok"] = out["pinned_vs_fastest_draw"]["ok"] and out["loaded_vs_pinning_run"]["ok"]
    return out


def _diff(work: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchbox", "diff", str(work / "pin.json"), str(work / "load.json"),
           "--format", "json"]
    env = {**os.environ, "PYTHONPATH": _pythonpath()}
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        return {"exit": proc.returncode, "error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    keys = ("runner", "case", "verdict", "causes", "reason")
    rows = [{k: r.get(k) for k in keys} for r in doc.get("rows", [])]
    return {"exit": proc.returncode, "rows": rows}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--contract", default="device_compute")
    ap.add_argument("--case", action="append", default=[], help="repeatable; default invoice")
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--compile-mode", default="max-autotune")
    ap.add_argument("--compile-option", action="append", default=[], help="inductor KEY=VALUE (repeatable)")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for both benchbox processes")
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--draw-samples", type=int, default=50)
    ap.add_argument("--draw-rounds", type=int, default=2)
    ap.add_argument("--tolerance", type=float, default=2.0, help="percent (default 2)")
    ap.add_argument("--no-eager", action="store_true", help="leave out the torch-eager control")
    return ap


def main() -> int:
    args = _parser().parse_args()
    args.case = args.case or ["invoice"]
    work = args.out_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    caches = Path(tempfile.mkdtemp(prefix="benchbox-compile-draws-"))
    artifact = work / "compile.artifact"
    started = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        pin = _step(args, "pin", work, caches, ["--runner-option", f"torch-compile:artifact_out={artifact}"])
        print(f"pin: exit {pin['exit']} in {pin['wall_s']} s", flush=True)
        load = _step(args, "load", work, caches, ["--runner-option", f"torch-compile:artifact={artifact}"])
        print(f"load: exit {load['exit']} in {load['wall_s']} s", flush=True)
    finally:
        shutil.rmtree(caches, ignore_errors=True)
    checks = _checks(pin, load, args.tolerance / 100) if "rows" in pin and "rows" in load else {
        "error": pin.get("error") or load.get("error")}
    result = {"started_at": started, "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
              "command": " ".join([Path(sys.executable).name, *sys.argv]),
              "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "steps": {"pin": pin, "load": load}, "checks": checks,
              "diff": _diff(work) if "rows" in pin and "rows" in load else None}
    (args.out_dir / "compile_draws.json").write_text(json.dumps(result, indent=1, default=str))
    for name in ("pinned_vs_fastest_draw", "loaded_vs_pinning_run"):
        c = checks.get(name)
        if c:
            print(f"{name}: ratio {c['ratio']:.4f} → {'PASS' if c['ok'] else 'FAIL'}")
    if "eager_control_ratio" in checks:
        print(f"eager control (load / pin): {checks['eager_control_ratio']:.4f}")
    print(f"written to {args.out_dir / 'compile_draws.json'}")
    if "error" in checks:
        print(f"error: {checks['error']}")
        return 2
    return 0 if checks.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
