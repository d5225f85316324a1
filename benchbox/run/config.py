"""What a run measures: the configuration, its defaults (declared once) and its validation.

Every default lives on :class:`RunConfig`; the command line reads them (and the help
text) from here, so ``benchbox run --help``, the library and the receipt agree.
Validation errors name the field (``samples: must be ≥ 1``); the command line shows
them under the flag that sets the field.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbox.contracts import IDLE_MODES
from benchbox.errors import FieldError, did_you_mean
from benchbox.harness.arrival import DEFAULT_MAX_BACKLOG, DEFAULT_MAX_QUEUE_MS, LoadBound
from benchbox.harness.quiet import GC_MODES, LAYOUTS
from benchbox.harness.sampling import (
    DEFAULT_MAX_SAMPLES,
    DEFAULT_MAX_TIME_S,
    DEFAULT_SAMPLES,
    DEFAULT_WARMUP,
    SamplingPolicy,
)
from benchbox.run.factory import REGISTERED, RunnerFactory

DEFAULT_RUNNERS = ("torch-eager", "torch-compile")
#: seconds one (runner, case) may take (validation, warm-up, samples) before it becomes a failed row
DEFAULT_CASE_TIME_LIMIT_S = 1800.0
DTYPES = ("float32", "float16", "bfloat16")


def _f(default: Any = dataclasses.MISSING, *, help: str, factory: Any = dataclasses.MISSING) -> Any:
    meta = {"help": help}
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def check_environment() -> None:
    """The environment variables every run reads, checked before anything starts (UsageError):
    ``$BENCHBOX_LOAD_WINDOW_S``. A command that starts runs of its own (sweep, matrix,
    selfcheck) calls it before it writes anything."""
    from benchbox.environment import load_window_s

    load_window_s()


@dataclass(frozen=True)
class RunConfig:
    """Everything that decides what a run measures."""

    contract: str = _f("public_task_call_wall",
                       help="Built-in contract name or path to a contract TOML file.")
    #: several contracts in one run (prepared once, one receipt each); overrides ``contract``
    contracts: tuple[str, ...] = _f((), help="Built-in contract name or path to a contract TOML file; "
                                             "repeat it to measure several contracts in one run (runners "
                                             "prepared once, one receipt each: OUT-stem.CONTRACT.json).")
    task: str = _f("decision", help="Built-in task name or package.module:factory.")
    size: str = _f("tiny", help="Task size (see `benchbox tasks`).")
    dtype: str = _f("float32", help="Model dtype: " + ", ".join(DTYPES) + ".")
    runners: tuple[str, ...] = _f(DEFAULT_RUNNERS, help="Runner to measure (repeatable, in order; "
                                                        "`benchbox runners` lists them); default "
                                                        + " and ".join(DEFAULT_RUNNERS) + ".")
    cases: tuple[str, ...] = _f((), help="Cases to run; default all of the task's cases.")
    device: str = _f("cpu", help="cpu, cuda or cuda:N.")
    threads: int | None = _f(None, help="torch intra-op threads (default: torch's choice); recorded in "
                                        "the receipt.")
    warmup: int = _f(DEFAULT_WARMUP, help="Untimed calls before sampling.")
    samples: int = _f(DEFAULT_SAMPLES, help="Fixed sample count (a two-sided 95% p99 interval needs ≥ 368).")
    repeats: int = _f(1, help="Take the samples in K rounds, each in a fresh process of its own (see "
                              "fresh_processes): K replications, from whose spread diff measures "
                              "run-to-run variance; the receipt keeps each sample's round and the process "
                              "that took it.")
    fresh_processes: bool = _f(True, help="With repeats K ≥ 2, each round in a fresh worker process (the "
                                          "default, as pyperf does): task, reference and every runner's "
                                          "compile redone per round, so the spread between rounds includes "
                                          "what a process decides once, and diff counts K replications; "
                                          "rounds kept in OUT.rounds/. Off (--in-process): the rounds share "
                                          "one process and diff counts them as one replication.")
    gc_mode: str = _f("on", help="The garbage collector while a (runner, case) is sampled: on (as Python "
                                 "decides) or off (a full collection and gc.freeze() before the samples, "
                                 "collection disabled during them); recorded per process.")
    layout: str = _f("random", help="Memory layout and hash seed of the measuring processes: random (as "
                                    "the OS and Python decide: each process draws its own) or fixed "
                                    "(address-space randomisation off and PYTHONHASHSEED=0, so processes of "
                                    "the same code lay out alike; Linux; `benchbox run` starts itself again "
                                    "for it); recorded per process.")
    target_ci: float | None = _f(None, help="Adaptive sampling: stop once the p50 95% interval half-width "
                                            "is below PCT percent (e.g. 1 or 1%), within max_samples and "
                                            "max_time_s.")
    max_samples: int = _f(DEFAULT_MAX_SAMPLES, help="Adaptive sampling: most samples per (runner, case).")
    max_time_s: float = _f(DEFAULT_MAX_TIME_S, help="Adaptive sampling: most seconds of sampling per "
                                                    "(runner, case).")
    gap_ms: float | None = _f(None, help="Idle gap before every timed call, from the previous call's end "
                                         "(e.g. 0.2ms, 200us, 1; a bare number is ms; 0 is back to back): "
                                         "every contract of the run gets this arrival, part of its hash.")
    rate_per_s: float | None = _f(None, help="Open-loop Poisson arrivals at this many requests per second "
                                             "(e.g. 50 or 50/s): every contract of the run gets this "
                                             "arrival, part of its hash; latency runs from the scheduled "
                                             "arrival where the region opens at queue.")
    idle: str | None = _f(None, help="How waits between calls are spent: sleep or busy (default: the "
                                     "contract's, else sleep).")
    max_backlog: int = _f(DEFAULT_MAX_BACKLOG, help="Poisson arrivals: declare the point overloaded and stop "
                                                    "once more requests than this are due but not started.")
    max_queue_ms: float = _f(DEFAULT_MAX_QUEUE_MS, help="Poisson arrivals: declare the point overloaded and "
                                                        "stop once a request waited longer than this (ms).")
    settle_s: float = _f(0.0, help="Seconds of untimed back-to-back calls before each (runner, case)'s "
                                   "warm-up and samples, after validation, so a GPU or CPU coming up from "
                                   "idle clocks settles first (0: none; with --repeats: in every fresh "
                                   "process, or in process before the first round); recorded "
                                   "in the receipt's settings.")
    case_time_limit_s: float = _f(DEFAULT_CASE_TIME_LIMIT_S, help="Most seconds one (runner, case) may "
                                  "take — validation calls, warm-up and samples — and one case's reference "
                                  "call; past it the case becomes a failed row (0: no limit). Python code "
                                  "is interrupted; a C call that never returns is not.")
    out: Path | None = _f(None, help="Receipt path; default a timestamped file under ./receipts/. An "
                                     "existing file is refused unless overwrite; a symbolic link, device, "
                                     "FIFO or directory always.")
    overwrite: bool = _f(False, help="Replace an existing receipt at --out (never one another run is "
                                     "writing).")
    baseline: str | None = _f(None, help="Runner the others are compared against (default torch-compile "
                                         "when it runs, else the first runner).")
    runner_options: dict[str, dict[str, Any]] = _f(help="Options per runner: {runner: {key: value}}.",
                                                    factory=dict)
    task_options: dict[str, Any] = _f(help="Options passed to the task.", factory=dict)
    gates: dict[str, float] = _f(help="Accuracy gate threshold overrides.", factory=dict)
    labels: dict[str, str] = _f(help="Free labels recorded in the receipt's settings (e.g. a matrix cell).",
                                factory=dict)
    command: tuple[str, ...] = _f((), help="The command line, as recorded in the receipt.")

    def to_json(self) -> dict[str, Any]:
        """The configuration as JSON data (how a worker process receives it, :mod:`benchbox.run.worker`)."""
        return {f.name: _as_json(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunConfig:
        """The configuration :meth:`to_json` wrote (paths and tuples restored)."""
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                v = data[f.name]
                if f.name == "out" and v is not None:
                    v = Path(v)
                elif isinstance(default(f.name), tuple) and isinstance(v, list):
                    v = tuple(v)
                kw[f.name] = v
        return cls(**kw)

    @property
    def contract_names(self) -> tuple[str, ...]:
        return self.contracts or (self.contract,)

    def sampling(self) -> SamplingPolicy:
        """The sampling policy this configuration asks for (FieldError on bad values)."""
        return SamplingPolicy(samples=self.samples, warmup=self.warmup, target_ci_pct=self.target_ci,
                              max_samples=self.max_samples, max_time_s=self.max_time_s)

    def load_bound(self) -> LoadBound:
        """When an open-loop point is declared overloaded (FieldError on bad values)."""
        return LoadBound(max_backlog=self.max_backlog, max_queue_ms=self.max_queue_ms)

    @property
    def arrival_overrides(self) -> dict[str, Any]:
        """The arrival given at run time, as keyword arguments of Contract.with_arrival."""
        return {k: v for k, v in (("gap_ms", self.gap_ms), ("rate_per_s", self.rate_per_s),
                                  ("idle", self.idle)) if v is not None}

    def _validate_arrival(self) -> None:
        import math

        if self.gap_ms is not None and self.rate_per_s is not None:
            raise FieldError("gap_ms", "give a gap or a rate, not both")
        for name, v, zero_ok in (("gap_ms", self.gap_ms, True), ("rate_per_s", self.rate_per_s, False)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not math.isfinite(v) or v < 0 or (v == 0 and not zero_ok)):
                raise FieldError(name, f"must be a {'non-negative' if zero_ok else 'positive'} number, "
                                       f"got {v!r}")
        if self.idle is not None and self.idle not in IDLE_MODES:
            raise FieldError("idle", f"must be one of {', '.join(IDLE_MODES)}, got {self.idle!r}")
        self.load_bound()

    def validate(self, runners: RunnerFactory = REGISTERED) -> None:
        """Check everything that needs no task, model or runner code; FieldError on the first problem.

        ``runners``: where the run gets its runners (their names and option checks).
        """
        self._validate_scalars()
        check_environment()
        self._validate_arrival()

        known = runners.names()
        for r in self.runners:
            if r not in known:
                raise FieldError("runners", f"unknown runner '{r}' ({did_you_mean(r, known)}"
                                           f"runners: {', '.join(known)})")
        if not self.runners:
            raise FieldError("runners", "no runner named")
        if len(set(self.runners)) != len(self.runners):
            raise FieldError("runners", "a runner is named twice")
        unknown = sorted(set(self.runner_options) - set(self.runners))
        if unknown:
            raise FieldError("runner_options", f"options for '{unknown[0]}', which is not a runner of this "
                                               f"run ({', '.join(self.runners)})")
        if self.threads is not None and self.threads < 1:
            raise FieldError("threads", f"must be ≥ 1, got {self.threads}")
        self.sampling()
        self._validate_times()
        if self.repeats < 1:
            raise FieldError("repeats", f"must be ≥ 1, got {self.repeats}")
        if self.repeats > 1 and self.target_ci is not None:
            raise FieldError("repeats", "adaptive sampling (target_ci) takes one round; drop one of them")
        if self.gc_mode not in GC_MODES:
            raise FieldError("gc_mode", f"must be one of {', '.join(GC_MODES)}, got {self.gc_mode!r}")
        if self.layout not in LAYOUTS:
            raise FieldError("layout", f"must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        if self.repeats > self.samples:
            raise FieldError("repeats", f"{self.repeats} rounds need at least as many samples "
                                        f"(samples = {self.samples})")
        if self.dtype not in DTYPES:
            raise FieldError("dtype", f"unknown dtype '{self.dtype}' ({', '.join(DTYPES)})")
        if not re.fullmatch(r"cpu|cuda(:\d+)?", self.device):
            raise FieldError("device", f"unknown device '{self.device}' (cpu, cuda, cuda:N)")
        if self.baseline is not None and self.baseline not in self.runners:
            raise FieldError("baseline", f"{self.baseline!r} is not one of the runners of this run "
                                         f"({', '.join(self.runners)})")
        self._validate_gates()
        for k, v in self.labels.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise FieldError("labels", "labels are strings")
        if len(set(self.contract_names)) != len(self.contract_names):
            raise FieldError("contracts", "a contract is named twice")
        keys = getattr(runners, "check_option_keys", None)  # a mistyped key does not wait for torch
        for r in self.runners if keys is not None else ():
            keys(r, self.runner_options.get(r, {}))
        # last: the runners' own checks import their code (torch, seconds), which a refusal above
        # does not wait for
        for r in self.runners:  # option keys and values (also against the device), before anything runs
            runners.check_options(r, self.runner_options.get(r, {}), self.device)

    def _validate_gates(self) -> None:
        for g, v in self.gates.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise FieldError("gates", f"{g}={v!r}: the threshold must be a number")
            if not v >= 0:  # an error's size: a gate under 0 (or NaN) could never pass; inf never fails
                raise FieldError("gates", f"{g}={v!r}: the threshold is a largest error, a number ≥ 0")

    def _validate_scalars(self) -> None:
        """Every field declared a plain bool, int, float or str holds one (a config built in code
        is checked as one read from a file or the command line is): a receipt records them."""
        kinds = {"bool": (bool,), "int": (int,), "float": (int, float), "str": (str,)}
        words = {"bool": "true or false", "int": "a whole number", "float": "a number", "str": "a string"}
        for f in dataclasses.fields(self):
            want = kinds.get(str(f.type))
            value = getattr(self, f.name)
            if want is None or (isinstance(value, want) and (bool in want or not isinstance(value, bool))):
                continue
            raise FieldError(f.name, f"must be {words[str(f.type)]}, got {value!r}")

    def _validate_times(self) -> None:
        """The per-case time limit, adaptive sampling's budget below it, and the settle phase (their
        types checked first, by :meth:`_validate_scalars`)."""
        limit = self.case_time_limit_s  # a number, non-bool: _validate_scalars
        if not math.isfinite(limit) or limit < 0:
            raise FieldError("case_time_limit_s", f"must be a finite number of seconds ≥ 0 (0: no limit), "
                                                  f"got {limit!r}")
        if limit and self.target_ci is not None and self.max_time_s >= limit:
            raise FieldError("max_time_s", f"{self.max_time_s:g} s of adaptive sampling must be below the "
                                           f"per-case time limit case_time_limit_s = {limit:g} s, which "
                                           "would end the case first")
        settle = self.settle_s
        if not math.isfinite(settle) or settle < 0:
            raise FieldError("settle_s", f"must be a finite number of seconds ≥ 0, got {settle!r}")
        if limit and settle >= limit:
            raise FieldError("settle_s", f"{settle:g} s of settling must be below the per-case time limit "
                                         f"case_time_limit_s = {limit:g} s, which would end every case first")

    @property
    def chosen_baseline(self) -> str:
        return self.baseline or ("torch-compile" if "torch-compile" in self.runners else self.runners[0])

    @property
    def in_workers(self) -> bool:
        """Whether the rounds run in fresh worker processes."""
        return self.fresh_processes and self.repeats > 1


def _as_json(v: Any) -> Any:
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, tuple):
        return list(v)
    return v


def default(name: str) -> Any:
    """The declared default of a RunConfig field (for the command line)."""
    f = {f.name: f for f in dataclasses.fields(RunConfig)}[name]
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]


def help_text(name: str) -> str:
    """The declared help of a RunConfig field (for the command line)."""
    return str({f.name: f for f in dataclasses.fields(RunConfig)}[name].metadata["help"])
