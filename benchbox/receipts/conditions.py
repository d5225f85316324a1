"""The conditions a number was timed under, and whether two runs' conditions let them be compared.

Two kinds of difference make a comparison unreliable rather than a change: the row itself
was flagged (noisy, unsettled) on either side while run-to-run spread is not measured (fewer
than three rounds a side), or the environment differs in something
that moves timings (CPU model or cores, load at start, GPU driver, clocks or throttle at
start, library versions). A machine busy at start on either side counts as a load condition
even when both sides were equally busy (:func:`load_difference`). Such rows get the verdict
``unreliable`` with the reason, never ``slower``; ``benchbox diff --accept KIND`` compares them anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchbox import stats
from benchbox.receipts.model import Receipt, ResultRow

#: Kinds of condition that make a row unreliable unless accepted.
CONDITION_KINDS = ("noisy", "unsettled", "cpu", "load", "gpu", "versions")
#: Fraction of the CPUs busy with other work at start above which a machine counts as loaded.
LOAD_BUSY = 0.5
#: Relative difference of the GPU's SM clock at start that counts as a different condition.
CLOCK_CHANGE = 0.10
#: Rounds on each side from which a row's own noise and drift are measured, not assumed away:
#: the hierarchical interval (rounds, then samples) widens with them, so they no longer block a
#: verdict. With fewer rounds a noisy or unsettled row stays ``unreliable``.
MEASURED_ROUNDS = 3


def _get(d: Any, *path: str) -> Any:
    for p in path:
        d = d.get(p) if isinstance(d, Mapping) else None
    return d


def load_class(env: Mapping[str, Any]) -> str | None:
    """"busy" or "idle" from the load recorded at start (None: not recorded)."""
    load = env.get("load")
    if isinstance(load, Mapping):
        busy = load.get("busy_fraction")
        if isinstance(busy, (int, float)):
            return "busy" if busy >= LOAD_BUSY else "idle"
        per_core = load.get("per_core")
        if isinstance(per_core, (int, float)):
            return "busy" if per_core >= LOAD_BUSY else "idle"
    avg, cores = _get(env, "system", "pyperf", "load_avg_1min"), env.get("cpu_count")
    if isinstance(avg, (int, float)) and isinstance(cores, int) and cores > 0:
        return "busy" if avg / cores >= LOAD_BUSY else "idle"
    return None


def busy_runs(env: Mapping[str, Any]) -> tuple[int, int] | None:
    """(runs that started busy, runs): from ``load_by_run`` for a receipt joined from several
    runs (``benchbox combine``), else one run from its load at start (None: not recorded)."""
    by_run = env.get("load_by_run")
    if isinstance(by_run, list) and by_run:
        known = [b for b in by_run if isinstance(b, (int, float))]
        if known:
            return sum(1 for b in known if b >= LOAD_BUSY), len(known)
    c = load_class(env)
    return None if c is None else (int(c == "busy"), 1)


def _runs_text(env: Mapping[str, Any], counted: tuple[int, int]) -> str:
    if counted[1] == 1:
        return f"{load_class(env)} ({_load_text(env)})"
    return f"busy at start in {counted[0]} of {counted[1]} runs"


def _load_text(env: Mapping[str, Any]) -> str:
    load = env.get("load") if isinstance(env.get("load"), Mapping) else {}
    busy = load.get("busy_fraction")
    if isinstance(busy, (int, float)):
        return f"{busy:.0%} of CPU busy at start"
    avg = _get(env, "system", "pyperf", "load_avg_1min")
    if avg is None:
        avg = load.get("load_avg_1min")
    return f"load average {avg} on {env.get('cpu_count')} CPUs"


def _throttle(env: Mapping[str, Any]) -> list[str]:
    names = _get(env, "gpu_state_before", "throttle_reasons") or []
    return sorted(str(n) for n in names if n not in ("gpu_idle", "applications_clocks_setting"))


def _num(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _gpu_changes(eb: Mapping[str, Any], eh: Mapping[str, Any]) -> list[str]:
    out = []
    db, dh = _get(eb, "gpu", "driver"), _get(eh, "gpu", "driver")
    if db != dh:
        out.append(f"driver {db} → {dh}")
    for key in ("sm_clock_mhz", "max_sm_clock_mhz"):
        cb = _num(_get(eb, "gpu_state_before", key))
        ch = _num(_get(eh, "gpu_state_before", key))
        if cb and ch and abs(ch - cb) / cb > CLOCK_CHANGE:
            out.append(f"{key.replace('_mhz', '').replace('_', ' ')} at start {cb:g} → {ch:g} MHz")
    tb, th = _throttle(eb), _throttle(eh)
    if tb != th:
        out.append(f"throttle at start {', '.join(tb) or 'none'} → {', '.join(th) or 'none'}")
    return out


def load_difference(eb: Mapping[str, Any], eh: Mapping[str, Any]) -> str | None:
    """Why the load at start makes the comparison unreliable, or None.

    The share of runs that started busy must agree: a side busy in more of its runs (a joined
    receipt's rounds) ran under other conditions, whatever its busiest or first run says. And
    a run that started busy shared the CPU with other work: how much of it each call got moved
    its timings by up to 2× between runs of identical code (BENCHMARKS.md §4, a busy process on
    every core for base and head alike), more than the spread of five rounds can bound. So a
    busy start on either side is a condition too, even when both sides were equally busy.
    """
    lb, lh = busy_runs(eb), busy_runs(eh)
    if lb is None or lh is None or (lb[0] == 0 and lh[0] == 0):
        return None
    text = f"BASE {_runs_text(eb, lb)}, HEAD {_runs_text(eh, lh)}"
    if lb[0] * lh[1] == lh[0] * lb[1]:
        text += (": both sides shared the CPU with other work, which moves timings more than a change is "
                 "judged by")
    return text


def environment_differences(base: Receipt, head: Receipt) -> dict[str, str]:
    """Kind → reason for each difference in what moves timings between the two runs."""
    eb, eh = base.environment, head.environment
    out: dict[str, str] = {}
    cpu = [f"{k} {eb.get(k)} → {eh.get(k)}" for k in ("cpu", "cpu_count") if eb.get(k) != eh.get(k)]
    if cpu:
        out["cpu"] = ", ".join(cpu)
    load = load_difference(eb, eh)
    if load:
        out["load"] = load
    gpu = _gpu_changes(eb, eh)
    if gpu:
        out["gpu"] = ", ".join(gpu)
    versions = [f"{k} {eb.get(k)} → {eh.get(k)}" for k in ("torch", "cuda") if eb.get(k) != eh.get(k)]
    if versions:
        out["versions"] = ", ".join(versions)
    return out


def row_versions(base: ResultRow, head: ResultRow) -> str | None:
    """The runner's library versions (e.g. TensorRT) that differ, or None."""
    vb, vh = dict(base.runner_report.versions or {}), dict(head.runner_report.versions or {})
    changed = [f"{k} {vb.get(k)} → {vh.get(k)}" for k in sorted(set(vb) | set(vh))
               if str(vb.get(k)) != str(vh.get(k))]
    return ", ".join(changed) or None


def row_flags(row: ResultRow) -> dict[str, str]:
    """The row's own flags that make it unreliable: noisy and unsettled.

    Noisy: the robust coefficient of variation (1.4826 × MAD / median) above
    ``stats.NOISE_CV`` — the body of the distribution is spread, as on a loaded machine.
    Outliers and the plain coefficient of variation are left out on purpose: a tail that
    got slower raises both, and a tail change is a result, not noise.
    Unsettled: the receipt's steady-state check failed.
    """
    out: dict[str, str] = {}
    rcv = (row.summary.noise or {}).get("robust_cv")
    if isinstance(rcv, (int, float)) and rcv > stats.NOISE_CV:
        out["noisy"] = f"robust coefficient of variation {rcv:.1%} exceeds {stats.NOISE_CV:.0%}"
    for c in stats.caveats({}, row.steady_state):
        if c.startswith("unsettled:"):
            out["unsettled"] = c.split(": ", 1)[1]
    return out


def rounds_measured(base: ResultRow, head: ResultRow) -> bool:
    """Whether both rows hold enough rounds for run-to-run spread to be in the interval."""
    return min(len(base.round_sizes), len(head.round_sizes)) >= MEASURED_ROUNDS


def row_conditions(base: ResultRow, head: ResultRow, base_name: str = "BASE",
                   head_name: str = "HEAD") -> dict[str, str]:
    """Kind → reason for the flags of either row and the runner versions that differ.

    A row's own flags (noisy, unsettled) count only while either side has fewer than
    :data:`MEASURED_ROUNDS` rounds; with more, the comparison's interval includes them.
    """
    out: dict[str, list[str]] = {}
    for name, row in ((base_name, base), (head_name, head)) if not rounds_measured(base, head) else ():
        for kind, why in row_flags(row).items():
            out.setdefault(kind, []).append(f"{name} {why}")
    merged = {k: "; ".join(v) for k, v in out.items()}
    versions = row_versions(base, head)
    if versions:
        merged["versions"] = versions
    return merged
