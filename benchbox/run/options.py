"""The run options, each declared once: its flag, the configuration field it sets, the commands
that take it, how its text is read.

Defaults and help come from the field's own declaration (:class:`benchbox.run.config.RunConfig`,
or :class:`benchbox.sweep.SweepConfig` for a sweep's points). From :data:`OPTIONS` the command
line builds the options of ``benchbox run`` and ``benchbox sweep``, the configuration those
options parse to and the flag under which an error about a field is shown, and the matrix
builds a cell's ``benchbox run`` command line (:func:`run_argv`). This module does not import
click: the command line turns these declarations into click options.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from benchbox.contracts import IDLE_MODES
from benchbox.errors import UsageError
from benchbox.harness.quiet import GC_MODES, LAYOUTS
from benchbox.run.config import DEFAULT_RUNNERS, DTYPES
from benchbox.runners import ENTRIES, CliAlias

RUN, SWEEP = "run", "sweep"


def percent(raw: str | None, flag: str, example: str = "1") -> float | None:
    """'1', '1%' or '0.5 %' → 1.0 / 0.5; None stays None (``example``: the number the error shows)."""
    if raw is None:
        return None
    try:
        return float(raw.strip().removesuffix("%").strip())
    except ValueError:
        raise UsageError(f"{flag} expects a percentage such as {example} or {example}%, "
                         f"got {raw!r}") from None


def fraction(raw: str | None, flag: str, example: str = "5") -> float | None:
    """A percentage as a fraction ('5%' → 0.05); None stays None."""
    pct = percent(raw, flag, example)
    return None if pct is None else pct / 100


#: units a duration may be written in, in milliseconds
_TIME_UNITS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3}


def duration_ms(raw: str | None, flag: str = "--gap") -> float | None:
    """'0.2ms', '200us', '1' (ms), '0' → milliseconds; None stays None."""
    if raw is None:
        return None
    text = raw.strip().lower()
    for unit in sorted(_TIME_UNITS, key=len, reverse=True):
        if text.endswith(unit):
            num, scale = text[: -len(unit)].strip(), _TIME_UNITS[unit]
            break
    else:
        num, scale = text, 1.0
    try:
        return float(num) * scale
    except ValueError:
        raise UsageError(f"{flag} expects a duration such as 0.2ms, 200us or 1 (ms), got {raw!r}") from None


def rate(raw: str | None, flag: str = "--rate") -> float | None:
    """'50' or '50/s' → requests per second; None stays None."""
    if raw is None:
        return None
    try:
        return float(raw.strip().lower().removesuffix("/s").strip())
    except ValueError:
        raise UsageError(f"{flag} expects requests per second such as 50 or 50/s, got {raw!r}") from None


def scalar(raw: str) -> Any:
    """An option value's text as the bool, int, float or string it reads as."""
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    return raw


def pairs(values: Iterable[str], flag: str) -> dict[str, Any]:
    """``KEY=VALUE`` texts as a mapping, each value read by :func:`scalar`."""
    out: dict[str, Any] = {}
    for v in values:
        key, sep, raw = v.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} expects KEY=VALUE, got {v!r}")
        out[key] = scalar(raw)
    return out


def labels(values: Iterable[str], flag: str = "--label") -> dict[str, str]:
    """``KEY=VALUE`` labels: keys stripped, values kept as text."""
    out: dict[str, str] = {}
    for v in values:
        key, sep, raw = v.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} expects KEY=VALUE, got {v!r}")
        out[key.strip()] = raw
    return out


@dataclass(frozen=True)
class Option:
    """One option: ``flag`` sets configuration field ``field`` on the ``commands`` that take it.

    ``kind``: value (one value, read by ``parse`` when given), switch (on/off), list
    (repeatable), pairs (repeatable KEY=VALUE), labels (repeatable KEY=VALUE, text values),
    runner-options (``RUNNER:KEY=VALUE`` and the runners' own flags). ``type``: int, float,
    file, folder or text; ``choices``: the values allowed; ``values``: which valid values the
    help names (a key of :func:`valid_values`). ``sweep``: the field is SweepConfig's.
    """

    flag: str
    field: str
    commands: tuple[str, ...] = (RUN, SWEEP)
    kind: str = "value"
    type: str = "text"
    choices: tuple[str, ...] = ()
    parse: Callable[[str, str], Any] | None = None
    metavar: str | None = None
    values: str = ""
    help: str | None = None
    sweep: bool = False
    required: bool = False

    @property
    def name(self) -> str:
        """The first flag: ``--fresh-processes`` of ``--fresh-processes/--in-process``."""
        return self.flag.split("/")[0]

    def read(self, raw: Any) -> Any:
        """The field's value from what the command line gave."""
        if self.kind == "pairs":
            return pairs(raw, self.name)
        if self.kind == "labels":
            return labels(raw, self.name)
        if self.kind == "list":
            values = tuple(raw)
            return tuple(v for v in (self.parse(x, self.name) for x in values) if v is not None) \
                if self.parse else values
        return self.parse(raw, self.name) if self.parse else raw

    def argv(self, value: Any) -> list[str]:
        """The command line that gives ``value`` (empty: the value is not given)."""
        if value is None:
            return []
        if self.kind == "switch":
            on, _, off = self.flag.partition("/")
            return [on] if value else ([off] if off else [])
        if self.kind in ("pairs", "labels"):
            return [a for k, v in value.items() for a in (self.name, f"{k}={flag_value(v)}")]
        if self.kind == "list":
            return [a for v in value for a in (self.name, str(v))]
        return [self.name, str(value)]


_SWEEP_CONTRACT = ("Built-in contract name or path to a contract TOML file (repeatable): each is measured at "
                   "every point, one receipt per contract and point.")

#: every run option, in the order ``--help`` lists them
OPTIONS: tuple[Option, ...] = (
    Option("--contract", "contracts", kind="list", values="contracts"),
    Option("--task", "task", values="task"),
    Option("--size", "size", values="size"),
    Option("--dtype", "dtype", choices=DTYPES),
    Option("--runner", "runners", kind="list", values="runners"),
    Option("--case", "cases", kind="list", values="cases"),
    Option("--device", "device"),
    Option("--threads", "threads", type="int"),
    Option("--warmup", "warmup", type="int"),
    Option("--samples", "samples", type="int"),
    Option("--repeats", "repeats", (RUN,), type="int", metavar="K"),
    Option("--fresh-processes/--in-process", "fresh_processes", (RUN,), kind="switch"),
    Option("--gc", "gc_mode", (RUN,), choices=GC_MODES),
    Option("--layout", "layout", (RUN,), choices=LAYOUTS),
    Option("--target-ci", "target_ci", (RUN,), parse=percent, metavar="PCT"),
    Option("--max-samples", "max_samples", (RUN,), type="int"),
    Option("--max-time", "max_time_s", (RUN,), type="float"),
    Option("--gap", "gap_ms", (RUN,), parse=duration_ms, metavar="DURATION"),
    Option("--gap", "gaps_ms", (SWEEP,), kind="list", parse=duration_ms, metavar="DURATION", sweep=True,
           help="An idle gap between calls to measure (repeatable; 0.2ms, 200us, or a bare number of ms)."),
    Option("--rate", "rate_per_s", (RUN,), parse=rate, metavar="PER_S"),
    Option("--rate", "rates", (SWEEP,), kind="list", metavar="RATE", sweep=True,
           help="A Poisson arrival rate to measure (repeatable): requests per second (50), or a fraction of "
                "the runner's back-to-back throughput on the one --case (0.3x)."),
    Option("--idle", "idle", (RUN,), choices=IDLE_MODES),
    Option("--idle", "idles", (SWEEP,), kind="list", choices=IDLE_MODES, sweep=True,
           help="How waits are spent (repeatable: every point under each)"),
    Option("--max-backlog", "max_backlog", type="int"),
    Option("--max-queue", "max_queue_ms", type="float", metavar="MS"),
    Option("--settle-s", "settle_s", (RUN,), type="float", metavar="SECONDS"),
    Option("--settle-s", "settle_s", (SWEEP,), type="float", metavar="SECONDS", sweep=True,
           help="Untimed back-to-back calls for this long before each runner's first point (after its "
                "compile), so the back-to-back reference is not taken on a device coming up from idle "
                "clocks; recorded in sweep.json and each receipt's settings (0: none)."),
    Option("--case-time-limit", "case_time_limit_s", (RUN,), type="float", metavar="SECONDS"),
    Option("--runner-option", "runner_options", kind="runner-options",
           help="RUNNER:KEY=VALUE for any runner (repeatable)."),
    Option("--baseline", "baseline", (RUN,)),
    Option("--task-option", "task_options", kind="pairs", help="KEY=VALUE passed to the task (repeatable)."),
    Option("--gate", "gates", (RUN,), kind="pairs", metavar="GATE=VALUE", values="gates",
           help="Accuracy gate threshold override (repeatable)."),
    Option("--label", "labels", kind="labels", metavar="KEY=VALUE",
           help="A fact about the run's conditions, recorded as settings.labels (repeatable)."),
    Option("--out", "out", (RUN,), type="file"),
    Option("--overwrite", "overwrite", (RUN,), kind="switch"),
    Option("--out-dir", "out_dir", (SWEEP,), type="folder", sweep=True, required=True,
           help="Folder for the receipts (one per point) and the index sweep.json."),
)


def options(command: str) -> tuple[Option, ...]:
    """The options ``command`` takes, in help order."""
    return tuple(o for o in OPTIONS if command in o.commands)


def sweep_help(option: Option) -> str | None:
    """Help that differs on ``benchbox sweep`` from the field's own."""
    return _SWEEP_CONTRACT if option.field == "contracts" else option.help


def valid_values() -> dict[str, str]:
    """Valid values named in ``run --help`` and ``sweep --help`` (from torch-free registries)."""
    from benchbox.contracts import builtin_names
    from benchbox.tasks import builtin_tasks
    from benchbox.tasks.decision.spec import CASE_NAMES, SIZES
    from benchbox.tasks.decision.task import GATES

    per_dtype = ", ".join(f"{d} " + " / ".join(f"{v:g}" for v in g.values()) for d, g in GATES.items())
    return {"runners": ", ".join(ENTRIES),
            "cases": f"{', '.join(CASE_NAMES)} (the decision task; `benchbox tasks` lists every task's)",
            "size": f"{', '.join(SIZES)} (the decision task)",
            "contracts": f"{', '.join(builtin_names())} (built in; `benchbox contracts` shows each)",
            "task": f"{', '.join(builtin_tasks())} (built in)",
            "gates": f"{', '.join(GATES['float32'])} (the decision task's defaults: {per_dtype})"}


def alias_param(runner: str, alias: CliAlias) -> str:
    """The parameter name of a runner's own flag (``--compile-mode``)."""
    return f"alias__{runner.replace('-', '_')}__{alias.option}"


def runner_options(runners: tuple[str, ...], given: dict[str, Any], runner_option: Iterable[str]
                   ) -> dict[str, dict[str, Any]]:
    """Options per runner from the runners' own flags (``given``: by :func:`alias_param`) and
    ``--runner-option RUNNER:KEY=VALUE``, which wins."""
    out: dict[str, dict[str, Any]] = {}
    for runner, entry in ENTRIES.items():
        for alias in entry.aliases:
            value = given.get(alias_param(runner, alias))
            if runner not in runners:
                continue
            if alias.kind == "pairs" and value:
                out.setdefault(runner, {})[alias.option] = pairs(value, alias.flag)
            elif alias.kind == "list" and value:
                out.setdefault(runner, {})[alias.option] = list(value)
            elif alias.kind == "value" and value is not None:
                out.setdefault(runner, {})[alias.option] = value
    for item in runner_option:
        rname, sep, kv = item.partition(":")
        if not sep:
            raise UsageError(f"--runner-option expects RUNNER:KEY=VALUE, got {item!r}")
        out.setdefault(rname, {}).update(pairs((kv,), "--runner-option"))
    return out


def parse(command: str, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The keyword arguments of RunConfig and of the sweep's own fields that ``command``'s
    options (``params``: click's values, by field name) ask for."""
    run: dict[str, Any] = {}
    sweep: dict[str, Any] = {}
    for o in options(command):
        if o.kind != "runner-options":
            (sweep if o.sweep else run)[o.field] = o.read(params[o.field])
    contracts = run.pop("contracts")
    run.update(contract=contracts[0], contracts=contracts if len(contracts) > 1 else ())
    run["runners"] = run["runners"] or DEFAULT_RUNNERS
    run["runner_options"] = runner_options(run["runners"], params, params["runner_options"])
    run["command"] = tuple(["benchbox", *sys.argv[1:]])
    return run, sweep


def flag_value(v: Any) -> str:
    """A value as the command line writes it (booleans as true/false)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def run_argv(values: dict[str, Any]) -> list[str]:
    """The ``benchbox run`` command line that sets these RunConfig fields, in their order; a
    runner's list and KEY=VALUE options by its own flags, others as ``--runner-option``."""
    argv = ["run"]
    for field, value in values.items():
        if field == "runner_options":
            argv += _runner_option_argv(value)
        else:
            option = next(o for o in options(RUN) if o.field == field)
            argv += option.argv(value)
    return argv


def _runner_option_argv(given: dict[str, dict[str, Any]]) -> list[str]:
    argv: list[str] = []
    for runner, opts in given.items():
        own = {a.option: a for a in (ENTRIES[runner].aliases if runner in ENTRIES else ())}
        for key, value in opts.items():
            alias = own.get(key)
            if alias is not None and alias.kind == "list":
                argv += [a for v in value for a in (alias.flag, str(v))]
            elif alias is not None and alias.kind == "pairs":
                argv += [a for k, v in value.items() for a in (alias.flag, f"{k}={flag_value(v)}")]
            else:
                argv += ["--runner-option", f"{runner}:{key}={flag_value(value)}"]
    return argv
