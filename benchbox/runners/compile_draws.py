"""Several fresh compiles, each measured by the harness; the fastest is kept.

Fresh max-autotune compiles of one model on one device pick different kernels from run to
run (the autotuner times each candidate alone, briefly, on generated inputs), and the
whole model's speed moves with the picks. With ``draws=N`` the torch-compile runner
compiles N times, each in a throw-away cache directory, has the harness time each compile
under the run's first contract (``benchbox.harness.trials``), and keeps the fastest by its
p50. Draws that fail the accuracy gates are never kept while another passes.

Measuring runs in rounds: round 1 times each draw right after its compile; every later
round loads each draw again from its own caches (a warm compile: the same kernels) and
times it again, in reverse order every other round, so that drift over the draws (clocks
coming up, a neighbour's load) falls on all of them alike. A draw's p50 is over all its
samples.

This module holds the draws' bookkeeping and their report; the compiles and the
measurement calls are the runner's (``TorchCompileRunner._run_draws``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchbox.durations import ms_number
from benchbox.fallbacks import compare_kernel_configs, compare_picks
from benchbox.runners.compile_report import PhaseRecord, group_autotune

#: calls before each draw's timed samples (the harness's warm-up)
DRAW_WARMUP = 10
MAX_DRAWS = 16
MAX_ROUNDS = 10


@dataclass
class Draw:
    """One fresh compile: where its caches are, what it picked and what the harness measured."""

    index: int
    cache_dir: str
    record: PhaseRecord
    kernel_configs: dict[str, Any]
    compile_s: float | None = None
    samples_ns: list[int] = field(default_factory=list)
    rounds: int = 0
    clock_used: str | None = None
    passed: bool | None = None
    failed_gates: list[str] = field(default_factory=list)
    #: graphs a reload compiled anew instead of finding them in the draw's caches
    reload_misses: int = 0

    @property
    def phase(self) -> str:
        return f"compile_draw_{self.index}"

    @property
    def p50_ns(self) -> float | None:
        return float(np.median(self.samples_ns)) if self.samples_ns else None

    def add(self, trial: Any) -> None:
        """One round's trial: its samples, and the accuracy verdict (a failure sticks)."""
        self.samples_ns.extend(int(s) for s in trial.samples_ns)
        self.rounds += 1
        self.clock_used = trial.clock_used
        if trial.passed is not None:
            self.passed = bool(trial.passed) and self.passed is not False
            self.failed_gates = sorted(set(self.failed_gates) | set(trial.failed_gates))


def fastest(draws: list[Draw]) -> Draw:
    """The draw with the lowest p50 among those that passed the gates (or were not checked);
    among all of them when none did."""
    measured = [d for d in draws if d.p50_ns is not None] or draws
    eligible = [d for d in measured if d.passed is not False] or measured
    return min(eligible, key=lambda d: (d.p50_ns if d.p50_ns is not None else float("inf"), d.index))


def spread(draws: list[Draw]) -> float | None:
    """Slowest p50 over fastest p50 among the measured draws (None with fewer than two)."""
    p50s = [d.p50_ns for d in draws if d.p50_ns]
    return max(p50s) / min(p50s) if len(p50s) > 1 else None


def cleanup(draws: list[Draw]) -> None:
    for d in draws:
        shutil.rmtree(d.cache_dir, ignore_errors=True)


def _ms(ns: float | None) -> str:
    return ms_number(ns, ".4g", missing="?")


def selection_text(sel: dict[str, Any]) -> str:
    """``"fastest of 3 fresh compiles, draws spread ×1.214"`` (with the p50 range and the clock)."""
    n, s = sel.get("draws"), sel.get("spread")
    text = f"fastest of {n} fresh compiles"
    if isinstance(s, (int, float)):
        text += f", draws spread ×{s:.3f}"
    p50s = [p for p in sel.get("p50_ns") or [] if isinstance(p, (int, float))]
    if p50s:
        text += (f" (p50 {_ms(min(p50s))}–{_ms(max(p50s))} ms, {sel.get('contract')}, "
                 f"{sel.get('clock_used')} clock)")
    return text


def selection(draws: list[Draw], winner: Draw, measured_by: dict[str, Any]) -> dict[str, Any]:
    """How the kept compile was chosen, compactly: kept with the pin and in artifacts."""
    sel = {"draws": len(draws), "fastest": winner.index, "spread": spread(draws),
           "p50_ns": [d.p50_ns for d in draws], "fastest_p50_ns": winner.p50_ns,
           "contract": measured_by.get("contract"), "case": measured_by.get("case"),
           "clock_used": winner.clock_used}
    sel["summary"] = selection_text(sel)
    return sel


def _picks(record: PhaseRecord) -> list[dict[str, Any]]:
    return [{k: g[k] for k in ("op", "input_shapes", "chosen", "chosen_kind", "count")}
            for g in group_autotune(record.autotune, top=0)]


def _entry(d: Draw, winner: Draw) -> dict[str, Any]:
    vs = compare_picks(winner.record.autotune, d.record.autotune)
    return {"draw": d.index, "phase": d.phase, "fastest": d is winner, "p50_ns": d.p50_ns,
            "ratio_to_fastest": (d.p50_ns / winner.p50_ns) if d.p50_ns and winner.p50_ns else None,
            "samples": len(d.samples_ns), "rounds": d.rounds, "clock_used": d.clock_used,
            "compile_s": d.compile_s, "accuracy_passed": d.passed, "failed_gates": d.failed_gates,
            "reload_graph_misses": d.reload_misses, "autotuned_call_sites": len(d.record.autotune),
            "picks": _picks(d.record),
            "picks_vs_fastest": {"same": vs.same, "changed_sites": vs.changed_sites + vs.unmatched_sites,
                                 "sites": vs.sites, "lines": vs.lines()},
            "kernel_configs_vs_fastest": compare_kernel_configs(winner.kernel_configs, d.kernel_configs)}


def draws_facts(draws: list[Draw], winner: Draw, measured_by: dict[str, Any], samples: int,
                rounds: int) -> dict[str, Any]:
    """The runner report's ``compile.draws``: every draw, the kept one, the spread."""
    sel = selection(draws, winner, measured_by)
    facts = {"n": len(draws), "rounds": rounds, "samples_per_round": samples, "warmup": DRAW_WARMUP,
             "measured_by": {**measured_by, "clock_used": winner.clock_used,
                             "how": "the harness's trial measurement (benchbox.harness.trials)"},
             "fastest": winner.index, "spread": sel["spread"],
             "entries": [_entry(d, winner) for d in draws], "summary": sel["summary"]}
    failed = [d.index for d in draws if d.passed is False]
    if failed:
        facts["failed_accuracy"] = failed
        if winner.passed is False:
            facts["note"] = "no draw passed the accuracy gates: the fastest is kept all the same"
    return facts
