"""Synthetic receipt histories for the store and the report: one receipt per commit.

Each receipt is assembled like ``benchbox run`` assembles one (contract declaration,
environment with the git commit, task facts, calibration floors, one result per
(runner, case) with raw samples, per-stage samples, the summary, steady-state check
and caveats computed by benchbox.stats) and written with the real receipt writer.

The samples follow what CPU CI runs look like: a log-normal body, a sparse heavy right
tail (preemption, allocator, GC), a small drift within the run, and a machine factor
per run shared by its rows (run-to-run variance, which no within-run interval sees).
Some runs are noisy (a denser tail) and some unsettled (the second half shifted), so
the flags benchbox derives are exercised. ``step`` slows one series' compute stage
from commit ``step_at`` on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchbox import __version__, stats
from benchbox.contracts import STAGES, load_contract
from benchbox.receipts.io import SCHEMA_VERSION, write_receipt

#: median latency (ms) of each (case, runner) series before any step
BASE_MS = {("invoice", "torch-eager"): 2.4, ("invoice", "torch-compile"): 1.6,
           ("outage", "torch-eager"): 2.9, ("outage", "torch-compile"): 1.9}
#: share of each stage in a call of the public_task_call_wall region
STAGE_SHARE = {"parse": 0.08, "preprocess": 0.30, "h2d": 0.02, "compute": 0.45, "d2h": 0.03,
               "reduce": 0.04, "answer": 0.03, "serialize": 0.05}
CPU = "AMD EPYC 7B13 64-Core Processor"


@dataclass(frozen=True)
class HistorySpec:
    """What history to write."""

    commits: int = 50
    #: relative slowdown of ``step_series`` from commit ``step_at`` on (0: no step)
    step: float = 0.0
    step_at: int = 31
    step_series: tuple[str, str] = ("invoice", "torch-compile")
    seed: int = 0
    samples: int = 400
    #: run-to-run machine factor (log-normal sigma), shared by the rows of one run
    run_sigma: float = 0.02
    #: per-row run-to-run factor on top of the machine factor
    row_sigma: float = 0.01
    task: str = "decision"
    contract: str = "public_task_call_wall"
    gpu: str | None = None
    hostname: str = "ci-runner-1"
    cases: tuple[str, ...] = ("invoice", "outage")
    runners: tuple[str, ...] = ("torch-eager", "torch-compile")
    base_ms: dict[tuple[str, str], float] = field(default_factory=lambda: dict(BASE_MS))
    #: (commit index, case, runner) made to fail an accuracy gate / fail outright
    invalid: tuple[tuple[int, str, str], ...] = ()
    failed: tuple[tuple[int, str, str], ...] = ()
    #: first commit's time; one commit per hour after it
    start: datetime = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def commit_sha(spec: HistorySpec, k: int) -> str:
    """The fake git commit of the k-th run."""
    return hashlib.sha1(f"{spec.task}/{spec.seed}/{k}".encode()).hexdigest()


def _samples(rng: np.random.Generator, median_ns: float, n: int, noisy: bool, unsettled: bool
             ) -> np.ndarray:
    body = median_ns * np.exp(rng.normal(0.0, 0.035, n))
    drift = rng.uniform(-0.01, 0.01)
    body *= np.linspace(1 + drift, 1 - drift, n)
    tail_p = 0.10 if noisy else 0.015
    spikes = rng.random(n) < tail_p
    body[spikes] *= 1.0 + rng.exponential(0.35, int(spikes.sum())) + 0.15
    if unsettled:
        body[n // 2:] *= 1.08
    return np.maximum(body, 1000.0)


def _stages(rng: np.random.Generator, total: np.ndarray, extra: np.ndarray) -> dict[str, list[int]]:
    """Split each sample into stages that add up to it; ``extra`` lands in compute."""
    base = total - extra
    shares = np.array([STAGE_SHARE[s] for s in STAGES])
    jitter = shares[None, :] * np.exp(rng.normal(0.0, 0.05, (len(total), len(STAGES))))
    jitter /= jitter.sum(axis=1, keepdims=True)
    parts = np.floor(base[:, None] * jitter).astype(np.int64)
    parts[:, STAGES.index("compute")] += extra.astype(np.int64)
    parts[:, -1] += total.astype(np.int64) - parts.sum(axis=1)
    return {s: parts[:, i].tolist() for i, s in enumerate(STAGES)}


def make_receipt(spec: HistorySpec, k: int, rng: np.random.Generator) -> dict[str, Any]:
    """The receipt of the k-th commit."""
    contract = load_contract(spec.contract)
    device = "cuda" if spec.gpu else "cpu"
    env: dict[str, Any] = {
        "python": "3.11.7", "platform": "Linux-6.1.0-x86_64-with-glibc2.36", "hostname": spec.hostname,
        "cpu": CPU, "cpu_count": 2, "device": device, "benchbox": __version__,
        "git": {"commit": commit_sha(spec, k), "dirty": False}, "system": {},
        "torch": "2.13.0", "torch_threads": 1, "cuda": None,
    }
    if spec.gpu:
        env["gpu"] = {"name": spec.gpu, "capability": "9.0"}
    case_sha = {c: hashlib.sha256(f"{spec.task}/{c}".encode()).hexdigest() for c in spec.cases}
    receipt: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "benchbox_version": __version__,
        "created_at": (spec.start + timedelta(hours=k)).isoformat(timespec="seconds"),
        "command": ["benchbox", "run", "--contract", spec.contract, "--device", device],
        "complete": True,
        "contract": contract.to_dict(),
        "environment": env,
        "task": {"name": spec.task, "size": "tiny", "dtype": "float32", "parameters": 396545,
                 "model_sha256": hashlib.sha256(spec.task.encode()).hexdigest(),
                 "cases": [{"name": c, "request_sha256": case_sha[c]} for c in spec.cases]},
        "settings": {"warmup": 5, "samples": spec.samples, "device": device,
                     "runners": list(spec.runners), "baseline": spec.runners[-1], "gates": {},
                     "contracts_in_run": [spec.contract], "labels": {"ci": "nightly"}},
        "calibration": {"clock": "time.perf_counter_ns", "clock_read_ns": 80,
                        "floors": {"host": 900, "device": None}, "floor_multiple": 3.0},
        "results": [],
    }
    machine = float(np.exp(rng.normal(0.0, spec.run_sigma)))
    for case in spec.cases:
        for runner in spec.runners:
            row_factor = float(np.exp(rng.normal(0.0, spec.row_sigma)))
            noisy, unsettled = rng.random() < 0.06, rng.random() < 0.04
            median = spec.base_ms[(case, runner)] * 1e6 * machine * row_factor
            total = _samples(rng, median, spec.samples, noisy, unsettled)
            extra = np.zeros_like(total)
            if spec.step and (case, runner) == spec.step_series and k >= spec.step_at:
                extra = total * spec.step
                total = total + extra
            samples = np.round(total).astype(np.int64)
            row: dict[str, Any] = {
                "runner": runner, "case": case, "request_sha256": case_sha[case], "status": "valid",
                "reasons": [], "runner_report": {"options": {}, "versions": {"torch": "2.13.0"},
                                                 "fallbacks": []},
                "accuracy": {"passed": True, "gates": [], "reference": "eager float32 on cpu"},
                "samples_ns": samples.tolist(), "round_sizes": [len(samples)],
                "stages_ns": _stages(rng, samples.astype(np.float64), np.round(extra)),
                "clock_used": "host", "clock_note": None, "warmup": 5,
                "stop_reason": f"fixed sample count {spec.samples} reached",
            }
            if (k, case, runner) in spec.failed:
                row.update(status="failed", reasons=["RuntimeError: the compiled graph crashed"],
                           samples_ns=[], round_sizes=[], stages_ns={}, summary={"n": 0})
                receipt["results"].append(row)
                continue
            summary = stats.summarize(row["samples_ns"])
            steady = stats.steady_state(row["samples_ns"])
            row.update(summary=summary, steady_state=steady)
            if (k, case, runner) in spec.invalid:
                row["status"] = "invalid"
                row["accuracy"] = {"passed": False, "gates": [], "reference": "eager float32 on cpu"}
                row["reasons"] = ["accuracy gate answer_equal failed: value 0, threshold 1"]
            row["reasons"] += stats.caveats(summary, steady)
            receipt["results"].append(row)
    return receipt


def write_history(folder: Path, spec: HistorySpec = HistorySpec()) -> list[Path]:
    """Write one receipt per commit under ``folder``; return their paths, oldest first."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed)
    paths = []
    for k in range(spec.commits):
        p = folder / f"{spec.task.replace('/', '_')}-{k:03d}.json"
        write_receipt(p, make_receipt(spec, k, rng))
        paths.append(p)
    return paths


#: a case whose name is markup: the site must show it as text
EVIL_CASE = "<img src=x onerror=\"document.title='pwned'\">"
EVIL = HistorySpec(commits=4, samples=60, task="x<script>alert(1)</script>", cases=(EVIL_CASE,),
                   runners=("torch-eager",), base_ms={(EVIL_CASE, "torch-eager"): 1.0})
#: the step series' regression, and the rows made invalid and failed on the way
STEP = HistorySpec(step=0.35, step_at=31, invalid=((12, "outage", "torch-eager"),),
                   failed=((20, "outage", "torch-compile"),))
GPU = HistorySpec(commits=6, samples=60, gpu="NVIDIA H200")


def fill_store(folder: Path, main: HistorySpec = STEP) -> Path:
    """A store holding ``main`` (50 commits on a CPU), a short GPU history and a markup-named task."""
    from benchbox.store import Store

    paths = write_history(folder / "main", main)
    paths += write_history(folder / "gpu", GPU)
    paths += write_history(folder / "evil", EVIL)
    Store(folder / "store").add(paths)
    return folder / "store"
