"""One cell on one host: a ``python -m benchbox run`` subprocess, its receipts back as bytes.

The process is started, timed out, interrupted and reaped by :mod:`benchbox.run.child`, the
executor the rounds in fresh processes (:mod:`benchbox.run.workers`) go through too.

Both executors call :func:`execute` on the host that runs the cell (the local executor
in its own process, Ray inside a worker), so a cell behaves the same everywhere: it
claims its CPUs in the host registry, runs pinned to them with the GPU it was given,
dies with its parent, and returns the receipts it wrote (labelled with what it shared)
rather than a path, since the driver may be on another host.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from benchbox.harness import PhaseTimer
from benchbox.matrix import host
from benchbox.matrix.plan import Cell
from benchbox.receipts.io import receipt_is_complete, relabel_receipt
from benchbox.run import child
from benchbox.run.options import run_argv

#: seconds a cell gets to write its receipt after SIGINT (timeout or interrupt) before SIGKILL
GRACE_S = 30.0
LOG_TAIL = 20_000


@dataclass(frozen=True)
class CellJob:
    """What a worker needs to run one cell (plain data; it travels through Ray)."""

    cell: Cell
    cell_id: str
    labels: dict[str, str]
    #: "local": the GPU is chosen here; "ray": the scheduler set CUDA_VISIBLE_DEVICES
    executor: str = "local"


@dataclass
class CellRun:
    """What came back from one cell: exit status, receipts (name → bytes) and the log's tail."""

    cell_id: str
    exit_code: int | None
    reason: str | None
    wall_s: float | None
    receipts: dict[str, bytes] = field(default_factory=dict)
    log_tail: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    host: str = ""
    interrupted: bool = False


def command(cell: Cell, out: Path, contract_args: list[str], labels: dict[str, str]) -> list[str]:
    """The ``benchbox run`` command line of a cell (what a person would type to repeat it)."""
    s = cell.sampling
    return run_argv({"task": cell.task, "size": cell.size, "dtype": cell.dtype, "device": cell.device,
                     "runners": cell.runners, "contracts": contract_args, "cases": cell.cases,
                     "samples": s["samples"], "warmup": s["warmup"], "max_samples": s["max_samples"],
                     "max_time_s": s["max_time"], "settle_s": s.get("settle_s"), "threads": cell.threads,
                     "target_ci": s.get("target_ci"),
                     "baseline": cell.baseline or None, "task_options": cell.task_options,
                     "gates": cell.gates,
                     "runner_options": cell.runner_options, "labels": labels, "out": out})


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("benchbox: ")]
    line = (errors or lines or [""])[-1]
    return line[:300]


def _gpu_env(job: CellJob, env: dict[str, str]) -> host.Gpu | None:
    """Give a CUDA cell exactly one GPU and say which (nvidia-smi's index order everywhere)."""
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    gpus = host.list_gpus()
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        visible = gpus[0].index if gpus else "0"
    env["CUDA_VISIBLE_DEVICES"] = visible.split(",")[0].strip()
    return host.visible_gpu(gpus, env["CUDA_VISIBLE_DEVICES"])


def start_labels(job: CellJob, claim: host.Claim, gpu: host.Gpu | None, env: dict[str, str]
                 ) -> dict[str, str]:
    """Labels known when the cell starts: where it runs and what it was given."""
    labels = {**job.labels,
              "matrix_host": platform.node(),
              "matrix_cpus_declared": str(job.cell.cpus),
              "matrix_cpus_available": str(len(claim.cpus_available)),
              "matrix_cpus_pinned": host.cpu_ranges(claim.cpus),
              "matrix_cells_running_at_start": str(len(claim.running_at_start))}
    if job.cell.device == "cuda":
        labels["matrix_cuda_visible_devices"] = env.get("CUDA_VISIBLE_DEVICES", "")
        labels["matrix_gpu_bus_id"] = gpu.bus_id if gpu else "unknown"
        labels["matrix_gpu_uuid"] = gpu.uuid if gpu else "unknown"
        labels["matrix_gpu_pcie_path"] = (host.pcie_path(gpu.bus_id) or "unknown") if gpu else "unknown"
        labels["matrix_cpus_near_gpu"] = {True: "true", False: "false"}.get(claim.gpu_local, "unknown")
        others = host.gpu_processes(gpu.bus_id) if gpu else None
        labels["matrix_gpu_processes_at_start"] = "unknown" if others is None else str(others)
    return labels


def clean_stale_work(folder: Path) -> list[str]:
    """Remove the work folders (``<cell>-<pid>``) of cells whose executing process is gone (a
    driver or worker killed before it could clean up; its ``benchbox run`` died with it).
    Returns the names removed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    gone = []
    for name in names:
        pid = name.rsplit("-", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue
        except ProcessLookupError:
            pass
        except OSError:  # another user's live process
            continue
        shutil.rmtree(folder / name, ignore_errors=True)
        gone.append(name)
    return gone


def execute(job: CellJob) -> CellRun:
    """Run one cell here; never raises for what the run does (a crash is a reason, not an error)."""
    cell = job.cell
    registry = host.HostRegistry()
    clean_stale_work(registry.root / "work")
    work = registry.root / "work" / f"{job.cell_id[:12]}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = dict(os.environ)
    gpu = _gpu_env(job, env) if cell.device == "cuda" else None
    contract_args = _contract_args(cell, work)
    claim = registry.claim(job.cell_id, cell.cpus, cell.pin_cpus, gpu)
    labels = start_labels(job, claim, gpu, env)
    argv = [sys.executable, "-m", "benchbox", *command(cell, work / "receipt.json", contract_args, labels)]
    phases = PhaseTimer()
    try:
        with phases("cell"):
            rc, timed_out, interrupted = _run_child(argv, env, claim.cpus, cell.timeout_s, work / "run.log")
    finally:
        overlap = registry.release(claim)
    end_labels = host.overlap_labels(claim, overlap, gpu)
    text = (work / "run.log").read_bytes()[-LOG_TAIL:].decode("utf-8", "replace")
    receipts = {p.name: relabel_receipt(p.read_bytes(), end_labels)
                for p in sorted(work.glob("receipt*.json"))}
    complete = bool(receipts) and all(receipt_is_complete(b) for b in receipts.values())
    if timed_out:
        reason: str | None = (f"timed out after {cell.timeout_s:g} s (stopped with SIGINT; what was "
                              "measured is kept)")
    else:
        reason = "interrupted" if interrupted else _exit_reason(rc, complete, text)
    with contextlib.suppress(OSError):
        shutil.rmtree(work)
    return CellRun(cell_id=job.cell_id, exit_code=rc, reason=reason,
                   wall_s=phases.seconds.get("cell"), receipts=receipts, log_tail=text,
                   labels={**labels, **end_labels}, host=platform.node(), interrupted=interrupted)


def _contract_args(cell: Cell, work: Path) -> list[str]:
    """The ``--contract`` values: a built-in's name, a user's contract written under ``work``."""
    args = []
    for c in cell.contracts:
        if c.builtin:
            args.append(c.name)
        else:  # a user's contract travels as text: the worker may be on another host
            f = work / "contracts" / f"{c.name}.toml"
            f.parent.mkdir(exist_ok=True)
            f.write_text(c.text or "", encoding="utf-8")
            args.append(str(f))
    return args


def _run_child(argv: list[str], env: dict[str, str], cpus: list[int], timeout_s: float, log_path: Path
               ) -> tuple[int | None, bool, bool]:
    """Run the cell's ``benchbox run``, output into ``log_path``: (exit code, timed out, interrupted).

    On a time-out or a Ctrl-C the run gets one SIGINT (it keeps what it measured), and
    SIGKILL if it does not stop within GRACE_S (:func:`benchbox.run.child.wait`).
    """
    with open(log_path, "wb") as log:
        # its own process group: a Ctrl-C reaches the driver only, which forwards one SIGINT
        # (a second one would make benchbox run drop the case in progress)
        proc = child.start(argv, env=env, out=log, cpus=cpus, kill_with_parent=True)
        ended = child.wait(proc, timeout_s, GRACE_S)
    return ended.exit_code, ended.timed_out, ended.interrupted


def _exit_reason(rc: int | None, complete: bool, text: str) -> str | None:
    """Why a run that ended by itself failed the cell (None: it did not)."""
    if rc is not None and rc < 0:
        return f"killed by {_signal_name(-rc)}"
    if rc not in (0, 1):
        return f"exited with code {rc}: {_last_line(text)}"
    if not complete:
        return f"exited with code {rc} without a complete receipt: {_last_line(text)}"
    return None


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"
