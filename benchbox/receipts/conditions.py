"""The conditions a number was timed under, and whether two runs' conditions let them be compared.

Conditions are signal, not noise: only what moves timings and was read while it mattered.

- ``cpu``: CPU model, core count or torch's intra-op threads differ.
- ``load``: a process of either side started on a busy machine (CPU time busy over the 0.5 s
  before it, or ``$BENCHBOX_LOAD_WINDOW_S``; with no window, the load average per core), or the
  sides started busy in different shares of their processes.
- ``gpu``: driver or power limit differ (a fact one side did not record is named in the notes,
  not compared), or — read right after each case's samples, while the GPU worked — the SM
  clock (by more than 10%) or the throttle reasons other than idle. A clock read while the GPU
  idles says nothing about the measured work and is never compared.
- ``versions``: torch, CUDA or the runner's libraries differ.
- ``machine``: the control workload — a fixed piece of host work timed in every process — moved
  beyond the threshold: the machine changed, not only the code (host-clock rows). Where a side
  started busy, the control's move is the load's effect and is named under ``load``.
- ``layout``: a side ran with the fixed memory layout and hash seed (``benchbox run --layout
  fixed``): it measured one layout, and a layout's offset is not the code's (identical code
  from two checkouts at different paths read ×0.81–0.99 apart on a 2-core machine, BENCHMARKS.md
  §4); only random layouts on both sides, averaged over processes, are compared by default.
- ``pacing``: the time outside the region, between consecutive regions, moved by more than
  ``pacing_margin``: the region's code may be unchanged while what runs between regions is not.
- ``noisy``/``unsettled``: the row's own flags, while a side has one process (with two or more
  the spread between processes is measured and carries them).

Such rows get the verdict ``unreliable`` with the reason, never ``slower``; ``benchbox diff
--accept KIND`` judges them anyway.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from benchbox import stats
from benchbox.receipts.model import GpuInfo, MachineLoad, Receipt, ResultRow
from benchbox.receipts.replication import process_samples, processes

#: Kinds of condition that make a row unreliable unless accepted.
CONDITION_KINDS = ("noisy", "unsettled", "cpu", "load", "gpu", "versions", "machine", "layout", "pacing")
#: Fraction of the CPUs busy with other work at start above which a machine counts as loaded.
LOAD_BUSY = 0.5
#: Relative difference of the GPU's SM clock while working that counts as a different condition.
CLOCK_CHANGE = 0.10
#: Processes on each side from which a row's own noise and drift are measured, not assumed away.
MEASURED_PROCESSES = 2
#: Throttle reasons that say nothing about the measured work (the GPU idled, or clocks were set).
IDLE_REASONS = frozenset({"gpu_idle", "applications_clocks_setting"})


def _busy(load: MachineLoad | None) -> float | None:
    return load.busy if load is not None else None


def busy_processes(r: Receipt) -> tuple[int, int] | None:
    """(processes that started busy, processes with a load reading), or None without readings."""
    known = [b for b in (_busy(p.load) for p in processes(r)) if b is not None]
    if not known:  # processes recorded without their load: the run's load at start
        one = _busy(r.environment.load)
        if one is None:
            return None
        known = [one]
    return sum(1 for b in known if b >= LOAD_BUSY), len(known)


def load_warning(load: MachineLoad | Mapping[str, Any] | None) -> str | None:
    """The warning a run gives as it starts on a busy machine (``environment.load``), or None."""
    if isinstance(load, Mapping) and not isinstance(load, MachineLoad):
        load = MachineLoad.of(load)
    busy = _busy(load)
    if load is None or busy is None or busy < LOAD_BUSY:
        return None
    avg, cores = load.load_avg_1min, load.cores
    if load.windowed:
        also = (f"; load average {avg:.1f} on {cores} cores" if isinstance(avg, (int, float))
                and isinstance(cores, int) else "")
        what = f"{busy:.0%} of CPU time went to other work as the run started{also}"
    else:  # no window: the load average, which counts benchbox's own start too
        what = f"load average {busy:.2f} per core as the run started"
    return (f"warning: the machine is busy ({what}): timings taken now move with that work, and "
            "benchbox diff will call this run's rows unreliable (load); rerun on a quiet machine to compare")


def _load_text(r: Receipt, counted: tuple[int, int]) -> str:
    if counted[1] == 1:
        found = [p.load for p in processes(r) if _busy(p.load) is not None]
        load = found[0] if found else r.environment.load
        busy = _busy(load) or 0.0
        reading = (f"{busy:.0%} of CPU busy at start" if load is None or load.windowed
                   else f"load average {busy:.2f} per core at start")
        return f"{'busy' if busy >= LOAD_BUSY else 'idle'} ({reading})"
    return f"busy at start in {counted[0]} of {counted[1]} processes"


def load_difference(base: Receipt, head: Receipt) -> str | None:
    """Why the load at start makes the comparison unreliable, or None.

    A process that started busy shared the CPU with other work: how much of it each call got
    moved timings of identical code by up to 2× between runs (BENCHMARKS.md §4, a busy process
    on every core for base and head alike), more than the spread of a few processes can bound.
    So a busy start on either side is a condition, even when both sides were equally busy.
    """
    lb, lh = busy_processes(base), busy_processes(head)
    if (lb is None or lb[0] == 0) and (lh is None or lh[0] == 0):
        return None
    if lb is None or lh is None:  # a side that read no load says nothing; a busy one still moved
        return ", ".join(f"{name} {_load_text(r, c) if c is not None else 'read no load at start'}"
                         for name, r, c in (("BASE", base, lb), ("HEAD", head, lh)))
    text = f"BASE {_load_text(base, lb)}, HEAD {_load_text(head, lh)}"
    if lb[0] * lh[1] == lh[0] * lb[1]:
        text += (": both sides shared the CPU with other work, which moves timings more than a change is "
                 "judged by")
    return text


def _working(r: Receipt) -> tuple[list[float], set[str], int]:
    """The SM clocks read while the GPU worked (one median per process), the throttle reasons
    other than idle seen then, and how many readings there were."""
    clocks: list[float] = []
    reasons: set[str] = set()
    readings = 0
    for gpu in (p.gpu for p in processes(r) if p.gpu is not None):
        readings += int(gpu.readings or 0)
        if gpu.sm_clock_mhz is not None:
            clocks.append(float(gpu.sm_clock_mhz))
        reasons |= {str(x) for x in gpu.throttle_reasons or () if x not in IDLE_REASONS}
    return clocks, reasons, readings


#: GPU facts read once per run that move timings when they differ: field, label.
GPU_FACTS = (("driver", "driver"), ("power_limit_w", "power limit"))


def _gpu_changes(base: Receipt, head: Receipt) -> list[str]:
    out = []
    gb, gh = (r.environment.gpu or GpuInfo() for r in (base, head))
    for key, label in GPU_FACTS:
        vb, vh = getattr(gb, key), getattr(gh, key)
        if vb is not None and vh is not None and vb != vh:  # one side unrecorded: unrecorded_facts
            out.append(f"{label} {vb} → {vh}")
    (cb, tb, nb), (ch, th, nh) = _working(base), _working(head)
    if cb and ch:
        mb, mh = float(np.median(cb)), float(np.median(ch))
        if abs(mh - mb) / mb > CLOCK_CHANGE:
            out.append(f"sm clock while working {mb:g} → {mh:g} MHz")
    if nb and nh and tb != th:
        out.append(f"throttle while working {', '.join(sorted(tb)) or 'none'} → "
                   f"{', '.join(sorted(th)) or 'none'}")
    return out


def unrecorded_facts(base: Receipt, head: Receipt, names: tuple[str, str] = ("BASE", "HEAD")) -> list[str]:
    """Notes on GPU facts one side recorded and the other did not (a receipt written before
    benchbox read them, or a reading that failed): unknown is not a difference, so they are not
    compared, and the diff says so."""
    gb, gh = (r.environment.gpu for r in (base, head))
    if gb is None or gh is None:
        return []
    out = []
    for key, label in GPU_FACTS:
        vb, vh = getattr(gb, key), getattr(gh, key)
        if (vb is None) != (vh is None):
            side, value = (names[1], vh) if vb is None else (names[0], vb)
            out.append(f"not compared: {label} recorded by {side} only ({value})")
    return out


def _controls(r: Receipt) -> tuple[list[float], float]:
    """The log p50 of the control workload per process, and the mean of their standard errors."""
    ys, ws = [], []
    for c in (p.control for p in processes(r) if p.control is not None):
        if c.p50_ns is not None and c.p50_ns > 0:
            ys.append(math.log(float(c.p50_ns)))
            ws.append(float(c.se_log or 0.0))
    return ys, float(np.mean(ws)) if ws else 0.0


def control_difference(base: Receipt, head: Receipt, threshold: float, level: float = 0.95) -> str | None:
    """Why the control workload says the machine changed, or None: its ratio is beyond
    ±``threshold`` and its interval (Welch over the processes, or each side's own sampling
    error with one process a side) excludes 1."""
    (yb, wb), (yh, wh) = _controls(base), _controls(head)
    if not yb or not yh:
        return None
    got = stats.log_ratio(stats.Replicates(tuple(yb), wb), stats.Replicates(tuple(yh), wh), level,
                          fallback_sd=0.0)
    if got is None or abs(got.ratio - 1) <= threshold or got.ci[0] <= 1 <= got.ci[1]:
        return None
    return (f"the control workload (fixed host work, the same code on both sides) ran ×{got.ratio:.3f} "
            f"[{got.ci[0]:.3f}, {got.ci[1]:.3f}] in HEAD: the machine changed, not only the code")


def environment_differences(base: Receipt, head: Receipt, threshold: float = 0.05) -> dict[str, str]:
    """Kind → reason for each difference in what moves timings between the two runs."""
    eb, eh = base.environment, head.environment
    out: dict[str, str] = {}
    cpu = [f"{k} {getattr(eb, k)} → {getattr(eh, k)}" for k in ("cpu", "cpu_count")
           if getattr(eb, k) != getattr(eh, k)]
    # torch's intra-op threads (--threads): where both sides read them (older receipts may not)
    if None not in (eb.torch_threads, eh.torch_threads) and eb.torch_threads != eh.torch_threads:
        cpu.append(f"torch threads {eb.torch_threads} → {eh.torch_threads}")
    if cpu:
        out["cpu"] = ", ".join(cpu)
    load = load_difference(base, head)
    if load:
        out["load"] = load
    gpu = _gpu_changes(base, head)
    if gpu:
        out["gpu"] = ", ".join(gpu)
    versions = [f"{k} {getattr(eb, k)} → {getattr(eh, k)}" for k in ("torch", "cuda")
                if getattr(eb, k) != getattr(eh, k)]
    if versions:
        out["versions"] = ", ".join(versions)
    lb, lh = layouts(base), layouts(head)
    if lb != lh:
        out["layout"] = f"layout {'/'.join(lb)} → {'/'.join(lh)}"
    elif lb == ["fixed"]:
        out["layout"] = ("both sides ran with the fixed layout: each measured one layout, whose offset "
                         "from the other's (identical code from two checkouts read ×0.81–0.99 apart on a "
                         "2-core machine) no interval covers")
    machine = control_difference(base, head, threshold)
    if machine and load:  # a busy machine moves the control workload too: one cause, named once
        out["load"] = f"{load}; {machine.split(': the machine')[0]}"
    elif machine:
        out["machine"] = machine
    return out


def layouts(r: Receipt) -> list[str]:
    """The memory layouts (``random``, ``fixed``) of a receipt's processes, sorted; random when unrecorded."""
    return sorted({(p.quieting.layout if p.quieting else None) or "random" for p in processes(r)})


def _versions(row: ResultRow) -> dict[str, str]:
    return {k: str(v) for k, v in (row.runner_report.versions or {}).items() if v is not None}


def row_versions(base: ResultRow, head: ResultRow) -> str | None:
    """The runner's library versions (e.g. TensorRT) that differ, or None; a library only one
    side recorded is not compared (:func:`unrecorded_versions`)."""
    vb, vh = _versions(base), _versions(head)
    changed = [f"{k} {vb[k]} → {vh[k]}" for k in sorted(set(vb) & set(vh)) if vb[k] != vh[k]]
    return ", ".join(changed) or None


def unrecorded_versions(base: ResultRow, head: ResultRow, names: tuple[str, str]) -> list[str]:
    """The runner libraries whose version only one side recorded, as ``name (SIDE)``."""
    vb, vh = _versions(base), _versions(head)
    return [f"{k} ({names[0] if k in vb else names[1]})" for k in sorted(set(vb) ^ set(vh))]


def robust_cv(groups: Sequence[np.ndarray]) -> float | None:
    """The median over processes of each one's robust coefficient of variation (1.4826 × MAD /
    median): the noise within a process, never the drift between processes."""
    cvs = []
    for g in groups:
        if len(g) >= 2:
            med = float(np.median(g))
            if med > 0:
                cvs.append(1.4826 * float(np.median(np.abs(g - med))) / med)
    return float(np.median(cvs)) if cvs else None


def row_flags(receipt: Receipt, row: ResultRow) -> dict[str, str]:
    """The row's own flags that make it unreliable while its spread is not measured.

    Noisy: the robust coefficient of variation within its processes above ``stats.NOISE_CV`` —
    the body of the distribution is spread, as on a loaded machine. Outliers and the plain
    coefficient of variation are left out on purpose: a tail that got slower raises both, and a
    tail change is a result, not noise. Unsettled: the receipt's steady-state check failed.
    """
    out: dict[str, str] = {}
    rcv = robust_cv(process_samples(receipt, row))
    if rcv is not None and rcv > stats.NOISE_CV:
        out["noisy"] = f"robust coefficient of variation {rcv:.1%} exceeds {stats.NOISE_CV:.0%}"
    s = row.steady_state
    if s is not None and s.settled is False:
        out["unsettled"] = stats.unsettled_text(s.shift, s.first_half_p50_ns, s.second_half_p50_ns)
    return out


def outside_region(row: ResultRow, region: Sequence[str]) -> float | None:
    """The median over samples of the time spent in stages outside ``region``: what runs between
    two consecutive regions (None: no stage outside, or stages not recorded)."""
    outside = [s for s, v in row.stages_ns.items() if s not in region and len(v) == len(row.samples_ns)]
    if not outside or not row.samples_ns:
        return None
    total = np.sum([np.asarray(row.stages_ns[s], dtype=np.float64) for s in outside], axis=0)
    return float(np.median(total))


def pacing_difference(base: ResultRow, head: ResultRow, region: Sequence[str], margin: float,
                      threshold: float) -> str | None:
    """Why the time between regions moved enough to change how the region is paced, or None:
    by more than ``margin`` of BASE's, and by more than ``threshold`` of BASE's region p50."""
    ob, oh = outside_region(base, region), outside_region(head, region)
    p50 = base.summary.p50_ns
    if ob is None or oh is None or not p50:
        return None
    delta = oh - ob
    if abs(delta) <= margin * ob or abs(delta) <= threshold * p50:
        return None
    return (f"the time between regions moved {ob / 1e3:.1f} → {oh / 1e3:.1f} µs per call (outside "
            f"{region[0]}..{region[-1]}, over ±{margin:.0%}): the calls are paced differently, so the "
            "region's time may move with no change to its code")


def row_conditions(base: ResultRow, head: ResultRow, base_name: str = "BASE", head_name: str = "HEAD", *,
                   receipts: tuple[Receipt, Receipt] | None = None, measured: bool = False,
                   region: Sequence[str] = (), pacing_margin: float = 0.25,
                   threshold: float = 0.05) -> dict[str, str]:
    """Kind → reason for the row-level conditions: the rows' own flags while their spread is not
    ``measured`` (fewer than :data:`MEASURED_PROCESSES` processes a side), the runner versions
    that differ, and pacing (given the contract's ``region``)."""
    out: dict[str, list[str]] = {}
    if receipts is not None and not measured:
        for name, row, rec in ((base_name, base, receipts[0]), (head_name, head, receipts[1])):
            for kind, why in row_flags(rec, row).items():
                out.setdefault(kind, []).append(f"{name} {why}")
    merged = {k: "; ".join(v) for k, v in out.items()}
    versions = row_versions(base, head)
    if versions:
        merged["versions"] = versions
    pacing = pacing_difference(base, head, region, pacing_margin, threshold) if region else None
    if pacing:
        merged["pacing"] = pacing
    return merged
