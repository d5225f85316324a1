"""The commands that measure, and those that list what can be measured: run, sweep, matrix,
selfcheck, tasks, runners. The options of run and sweep are built from their declaration,
:data:`benchbox.run.options.OPTIONS`; defaults and help from the fields they set."""

from __future__ import annotations

import dataclasses
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from benchbox.cli.app import _LIST_FORMAT, _declared, _echo, _flagged, _one_line, main
from benchbox.run.config import DTYPES, RunConfig, default, help_text
from benchbox.run.options import RUN, SWEEP, Option, alias_param, options, parse, sweep_help, valid_values
from benchbox.runners import ENTRIES, CliAlias
from benchbox.selfcheck import RUNNERS as SELFCHECK_RUNNERS
from benchbox.sweep import SweepConfig

#: the click type of each declared option type
_TYPES: dict[str, Any] = {"int": int, "float": float, "file": click.Path(dir_okay=False, path_type=Path),
                          "folder": click.Path(file_okay=False, path_type=Path)}


def _option(o: Option, command: str, values: dict[str, str]) -> Callable[[Any], Any]:
    """The click option of a declared run option: default and help from the field's declaration."""
    f = {f.name: f for f in dataclasses.fields(SweepConfig if o.sweep else RunConfig)}[o.field]
    d = f.default_factory() if f.default_factory is not dataclasses.MISSING else \
        None if f.default is dataclasses.MISSING else f.default
    multiple = o.kind not in ("value", "switch")
    kw: dict[str, Any] = {"metavar": o.metavar} if o.metavar else {}
    if o.choices or o.type in _TYPES:
        kw["type"] = click.Choice(o.choices) if o.choices else _TYPES[o.type]
    if o.kind == "switch" and "/" not in o.flag:
        kw["is_flag"] = True
    if o.field == "contracts":
        kw.update(default=(default("contract"),), show_default=True)
    elif not multiple and d not in (None, (), {}):
        kw.update(default=d, show_default=True)
    text = (sweep_help(o) if command == SWEEP else o.help) or help_text(o.field)
    if o.values:
        text += f" {'Gates' if o.field == 'gates' else 'Values'}: {values[o.values]}."
    if multiple and o.sweep and d:
        text += f"; default {', '.join(d)}."
    return click.option(o.flag, o.field, multiple=multiple, required=o.required, help=text, **kw)


def _declared_options(command: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The command's run options (and, on ``run``, the runners' own flags before --runner-option)."""
    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        for o in reversed(options(command)):
            fn = _option(o, command, _VALUES)(fn)
            if o.kind == "runner-options" and command == RUN:
                fn = _runner_aliases(fn)
        return fn
    return apply


_VALUES = valid_values()


def _selfcheck_default(name: str) -> dict[str, Any]:
    def config() -> Any:
        from benchbox.selfcheck import SelfCheckConfig
        return SelfCheckConfig

    return _declared(config, name)


def _alias_option(runner: str, alias: CliAlias) -> Callable[[Any], Any]:
    kw: dict[str, Any] = {"help": alias.help, "metavar": alias.metavar}
    if alias.kind in ("list", "pairs"):
        kw["multiple"] = True
    elif alias.choices:
        kw["type"] = click.Choice(list(alias.choices))
    if alias.default is not None:
        kw.update(default=alias.default, show_default=True)
    return click.option(alias.flag, alias_param(runner, alias), **kw)


def _runner_aliases(fn: Callable[..., Any]) -> Callable[..., Any]:
    for runner, entry in reversed(list(ENTRIES.items())):
        for alias in reversed(entry.aliases):
            fn = _alias_option(runner, alias)(fn)
    return fn


def _progress_stream() -> Any:
    """A stream to the terminal's stderr that stays there while the run captures descriptor 2."""
    try:
        return os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return sys.stderr


@main.command()
@_declared_options(RUN)
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr (the tables still go to stdout).")
@click.option("-v", "--verbose", is_flag=True,
              help="Every phase of every case, and the library output (warnings, compiler logs) of each "
                   "phase once that phase ends; it is kept in RECEIPT.log and the runner reports either "
                   "way.")
def run(quiet: bool, verbose: bool, **params: Any) -> None:
    """Measure runners × cases under a timing contract and write a receipt.

    On a terminal a live line shows the case, its phase (calibrate, reference, compile,
    validate, sample) and the time left; elsewhere one plain line per step.
    """
    from benchbox.run.preflight import preflight

    cfg = _run_config(**params)
    preflight(cfg)  # names and device, before torch is imported

    from benchbox import api
    from benchbox.render import results_table
    from benchbox.run.progress import reporter_for

    outcome = api.run(cfg, reporter=reporter_for(_progress_stream(), quiet, verbose))
    for o in outcome.all:
        _echo(results_table(o.receipt))
        _echo(f"receipt written to {o.path}" if o.saved else "receipt NOT written (see below)")
    if outcome.problem:  # a write failed: the rows are elsewhere or only in the table
        _echo(f"benchbox: error: {_one_line(outcome.problem)}", err=True)
    sys.exit(0 if outcome.ok and not outcome.problem else 1)


def _run_config(**params: Any) -> RunConfig:
    """The RunConfig that ``benchbox run``'s options ask for."""
    return RunConfig(**parse(RUN, params)[0])


@main.command()
@_declared_options(SWEEP)
def sweep(**params: Any) -> None:
    """Measure latency against load: back to back, then under each gap and each rate."""
    from benchbox.run.preflight import preflight
    from benchbox.sweep import sweep as do_sweep

    cfg = _sweep_config(**params)
    preflight(cfg.run)  # names and device, before torch is imported
    outcome = do_sweep(cfg, progress=lambda s: _echo(s, err=True))
    for r, t in outcome.throughput_per_s.items():
        _echo(f"{r}: back-to-back throughput {t:,.0f} calls/s")
    for o in outcome.overloaded:
        _echo(f"overloaded: {o}")
    _echo(f"{len(outcome.receipts)} receipts; index written to {outcome.index}")
    sys.exit(0 if outcome.ok else 1)


def _sweep_config(**params: Any) -> SweepConfig:
    """The SweepConfig that ``benchbox sweep``'s options ask for."""
    run, points = parse(SWEEP, params)
    return SweepConfig(run=RunConfig(**run), **{k: v for k, v in points.items() if v or k != "idles"})


@main.command()
@click.argument("plan", type=click.Path(path_type=Path))
@click.option("--store", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Store directory the receipts are gathered into (created if missing).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: cells one after another here; ray: cells as tasks on a Ray cluster.")
@click.option("--ray-address", default=None,
              help="Ray cluster address (ray.init(address=...)); default RAY_ADDRESS, else a local instance.")
@click.option("--revision", default=None,
              help="Revision the cells measure (part of each cell's identity); default the git commit here.")
@click.option("--force", is_flag=True, help="Run every cell, also those already in the store.")
@click.option("--dry-run", is_flag=True, help="List the cells and whether the store holds them; run nothing.")
def matrix(plan: Path, store: Path, executor: str, ray_address: str | None, revision: str | None,
           force: bool, dry_run: bool) -> None:
    """Run a PLAN.toml matrix of runs and gather the receipts into a store."""
    from benchbox.matrix import load_plan, preview, render_preview, render_result, run_matrix

    p = load_plan(plan)
    if dry_run:
        _echo(render_preview(preview(p, store, revision)))
        return
    result = run_matrix(p, store, executor, ray_address, revision, force,
                        progress=lambda s: _echo(s, err=True))
    _echo(render_result(result))
    sys.exit(result.exit_code)


@main.command()
@click.option("--runner", type=click.Choice(SELFCHECK_RUNNERS), **_selfcheck_default("runner"),
              help="Runner to check.")
@click.option("--device", **_selfcheck_default("device"), help="cuda or cuda:N.")
@click.option("--flavour", "flavours", multiple=True, type=click.Choice(["tensorrt", "tensorrt_rtx"]),
              help="Flavour to check (repeatable); default every flavour that imports.")
@click.option("--samples", type=int, **_selfcheck_default("samples"), help="Samples per (contract, case).")
@click.option("--warmup", type=int, **_selfcheck_default("warmup"), help="Untimed calls before sampling.")
@click.option("--dtype", "dtypes", multiple=True, type=click.Choice(DTYPES), **_selfcheck_default("dtypes"),
              help="Model dtype of the fixed-shape runs (repeatable); the dynamic-shape and no-graph "
                   "runs use the first.")
@click.option("--size", **_selfcheck_default("size"), help=f"Task size: {_VALUES['size']}.")
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the receipts and verdict.txt go; default receipts/selfcheck-STAMP/.")
def selfcheck(runner: str, device: str, flavours: tuple[str, ...], samples: int, warmup: int,
              dtypes: tuple[str, ...], size: str, out_dir: Path | None) -> None:
    """Run the back-to-back built-in contracts on the decision task with a runner (each dtype, a
    dynamic-shape run and a run without CUDA graphs) and check the results.

    Exit 0: every check passed; 1: a check failed; 3: nothing could execute here (the
    verdict says why; no GPU result is claimed).
    """
    from benchbox.selfcheck import SelfCheckConfig, run_selfcheck

    result = run_selfcheck(SelfCheckConfig(runner=runner, device=device, flavours=flavours,
                                           samples=samples, warmup=warmup, dtypes=tuple(dtypes), size=size,
                                           out_dir=out_dir),
                           progress=lambda s: _echo(s, err=True))
    _echo(result.verdict_text())
    _echo(f"verdict written to {result.verdict_path}")
    sys.exit(result.exit_code)


@main.command()
@click.option("--task", "task", multiple=True,
              help="Built-in task name or package.module:factory (repeatable); default the built-in tasks.")
@_LIST_FORMAT
def tasks(task: tuple[str, ...], fmt: str) -> None:
    """List tasks with their cases, sizes and parameter counts."""
    from benchbox.render.data import dumps, tasks_data
    from benchbox.render.table import table
    from benchbox.tasks import describe_tasks

    infos = describe_tasks(task)
    if fmt == "json":
        click.echo(dumps(tasks_data(infos)))
        return
    for info in infos:
        _echo(f"{info.name} ({info.spec})")
        _echo(f"  cases:  {', '.join(info.cases)}")
        _echo(f"  dtypes: {', '.join(info.dtypes)}")
        rows = [(s.name, f"{s.parameters:,}", s.detail) for s in info.sizes]
        _echo(table(["size", "parameters", "shape"], rows, right=("parameters",), wrap=("shape",)))


@main.command()
@click.option("--device", default=default("device"), show_default=True, help="cpu, cuda or cuda:N.")
@_LIST_FORMAT
def runners(device: str, fmt: str) -> None:
    """List runners and whether each can run here (and if not, why)."""
    from benchbox.render.data import dumps, runners_data
    from benchbox.render.table import table
    from benchbox.runners import RUNNERS, availability, runner_class

    reasons = {name: availability(name, device) for name in RUNNERS}
    if fmt == "json":
        click.echo(dumps(runners_data(device, reasons)))
        return

    def shown(name: str, reason: str) -> str:  # a runner that cannot be imported suggests nothing
        try:
            return _flagged(reason, runner_class(name).SUGGESTS, "runners")
        except ImportError:
            return reason

    _echo(table(["runner", f"on {device}"], [(n, shown(n, r) if r else "ready") for n, r in reasons.items()],
                     wrap=(f"on {device}",)))
