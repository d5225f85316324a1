"""The command line: parse options, call the library, render, pick the exit code.

Defaults and help of ``benchbox run`` come from :class:`benchbox.run.config.RunConfig`;
runner-specific flags from the runner registry (:data:`benchbox.runners.ENTRIES`).
Library errors name configuration fields; this layer shows them under their flags.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from benchbox import __version__
from benchbox.errors import BenchboxError, FieldError, UsageError
from benchbox.run.config import DTYPES, RunConfig, default, help_text
from benchbox.run.options import (
    RUN,
    SWEEP,
    Option,
    alias_param,
    fraction,
    options,
    parse,
    percent,
    sweep_help,
    valid_values,
)
from benchbox.runners import ENTRIES, CliAlias
from benchbox.selfcheck import RUNNERS as SELFCHECK_RUNNERS
from benchbox.sweep import SweepConfig


#: configuration field → the flag that sets it, per command
def _flags(command: str | None) -> dict[str, str]:
    """Configuration field → the flag that sets it on ``command``: each option's parameter is named
    after the field it sets (run and sweep: :data:`benchbox.run.options.OPTIONS`)."""
    cmd = main.commands.get(command or "")
    found = {p.name: p.opts[0] for p in getattr(cmd, "params", ()) if isinstance(p, click.Option) and p.name
             and not p.name.startswith("alias__")}
    if "contracts" in found:
        found["contract"] = found["contracts"]
    return found


def _flagged(text: str, command: str | None) -> str:
    """Library wording in the command's terms: a setting written ``field=value`` (see
    :mod:`benchbox.errors`) becomes ``--flag value`` for the fields the command has a flag for."""
    flags = _flags(command)
    if not flags or "=" not in text:
        return text
    names = "|".join(re.escape(f) for f in sorted(flags, key=len, reverse=True))
    return re.sub(rf"(?<![\w.=-])({names})=(?=\S)", lambda m: f"{flags[m[1]]} ", text)


def _echo(text: Any = "", err: bool = False) -> None:
    """Print text that may carry names from receipts, contracts or tasks: control characters
    (escape sequences among them) are shown as visible escapes, never sent to the terminal."""
    from benchbox.render.common import terminal_lines

    click.echo(terminal_lines(str(text)), err=err)


def _one_line(text: str) -> str:
    return " / ".join(part.strip() for part in text.splitlines() if part.strip())


def _fail(e: BenchboxError, command: str | None = None) -> NoReturn:
    interrupted = e.exit_code in (130, 143)  # SIGINT, SIGTERM
    if interrupted:
        from benchbox.run.interrupt import ignore_further_signals

        ignore_further_signals()  # exiting: a second Ctrl-C must not hit torch's exit handlers
    if e.unsaved:  # results that no write reached (a full disk): the table is where they are
        from benchbox.render import results_table

        for receipt in e.unsaved:
            _echo(results_table(receipt))
    prefix = "benchbox: " if interrupted else "benchbox: error: "
    message = str(e)
    if isinstance(e, FieldError):
        flag = _flags(command).get(e.field)
        message = f"{flag or e.field}: {e.message}"
    _echo(prefix + _one_line(_flagged(message, command)), err=True)
    sys.exit(e.exit_code)


class _HelpGroup(click.Group):
    """Lists each command with its whole first paragraph, wrapped rather than cut."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, (cmd.short_help or cmd.help or "").split("\n\n")[0].replace("\n", " ")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class _Group(_HelpGroup):
    """Turns every error into one line on stderr and the right exit code, never a traceback.

    Benchbox errors carry their exit code; click's usage errors exit 2; an
    interrupt exits 130; anything unexpected exits 2 with its class and message
    (set BENCHBOX_DEBUG=1 to see the traceback instead).
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BenchboxError as e:
            _fail(e, ctx.invoked_subcommand)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:  # the reader went away (`benchbox show R | head`): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(141)
        except Exception as e:
            if os.environ.get("BENCHBOX_DEBUG"):
                raise
            _fail(UsageError(f"unexpected {type(e).__name__}: {e} "
                             "(BENCHBOX_DEBUG=1 shows the traceback)"))

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        from benchbox.run import interrupt

        interrupt.PROCESS_EXITS_ON_INTERRUPT = True  # this process ends once a run is interrupted
        try:
            self._standalone(*args, **kwargs)
        finally:  # a caller in the same process (a test's CliRunner) gets the library behaviour back
            interrupt.PROCESS_EXITS_ON_INTERRUPT = False

    def _standalone(self, *args: Any, **kwargs: Any) -> None:
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.ClickException as e:
            hint = ""
            if isinstance(e, click.UsageError) and e.ctx is not None:
                hint = f" (see '{e.ctx.command_path} --help')"
            _echo(f"benchbox: error: {_one_line(e.format_message())}{hint}", err=True)
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            from benchbox.run.interrupt import ignore_further_signals

            ignore_further_signals()
            _echo("benchbox: interrupted", err=True)
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)


_percent = percent
_threshold = functools.partial(fraction, flag="--threshold")


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


class _Declared(click.Option):
    """An option whose default is the library's declaration, read when help or parsing needs it
    (not at import: the declaring module may be a heavy one)."""

    def __init__(self, *args: Any, declared: Callable[[], Any], **kw: Any) -> None:
        super().__init__(*args, show_default=True, **kw)
        self.declared = declared

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        return self.declared()


def _declared(declaring: Callable[[], Any], name: str, shown: Callable[[Any], Any] = lambda v: v
              ) -> dict[str, Any]:
    """Keywords of an option whose default is field ``name`` of the dataclass ``declaring()``
    returns (imported only when help or parsing needs it)."""
    def read() -> Any:
        import dataclasses

        fields = {f.name: f for f in dataclasses.fields(declaring())}
        return shown(fields[name].default)

    return {"cls": _Declared, "declared": read}


def _detector() -> Any:
    from benchbox.report.changepoints import Detector
    return Detector


def _diff_default(name: str) -> dict[str, Any]:
    """An option of diff, plot or report defaulting to DiffOptions' field (the threshold in percent)."""
    def options() -> Any:
        from benchbox.receipts.diff import DiffOptions
        return DiffOptions

    return _declared(options, name,
                     (lambda v: f"{v * 100:g}%") if name == "threshold" else (lambda v: v))


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


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="benchbox")
def main() -> None:
    """Benchmark ML inference tasks under explicit timing contracts."""


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


_LIST_FORMAT = click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
                            show_default=True, help="table for people, json for tools.")


@main.command()
@click.argument("receipts", nargs=-1, required=True, type=click.Path(path_type=Path))
@_LIST_FORMAT
def show(receipts: tuple[Path, ...], fmt: str) -> None:
    """Print the summary table of a receipt, or several receipts side by side."""
    from benchbox.api import load_receipt
    from benchbox.render import results_table, side_by_side

    if fmt == "json":
        from benchbox.render.data import dumps, receipt_summary

        data = [receipt_summary(load_receipt(r), str(r)) for r in receipts]
        click.echo(dumps(data[0] if len(data) == 1 else data))
        return
    if len(receipts) == 1:
        _echo(results_table(load_receipt(receipts[0])))
        return
    _echo(side_by_side([load_receipt(r) for r in receipts], [str(r) for r in receipts]))


@main.command()
@click.argument("receipts", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The combined receipt (refused if it exists).")
def combine(receipts: tuple[Path, ...], output: Path) -> None:
    """Join runs of one configuration into one receipt, each run a round.

    For CI: run base and head alternately, combine each side's runs, then diff; the
    comparison then sees the spread between runs. Runs of another contract, task,
    settings or machine class are refused.
    """
    from benchbox.receipts import load_receipt, write_receipt
    from benchbox.receipts.combine import combine as join

    if output.exists():
        raise UsageError(f"{output} exists: choose another --output")
    joined = join([load_receipt(r) for r in receipts], [str(r) for r in receipts])
    write_receipt(output, joined, exclusive=True, readable=True)
    _echo(f"wrote {output}: {len(receipts)} runs as rounds of {len(joined.results)} rows")


def _step_summary(text: str) -> None:
    """Append markdown to the GitHub step summary, when ``GITHUB_STEP_SUMMARY`` names one."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)


def _diff_in_flags(result: Any) -> Any:
    """A diff whose row reasons and notes name flags (``--accept cpu``) where the library names
    fields."""
    import dataclasses

    rows = tuple(dataclasses.replace(r, reason=_flagged(r.reason, "diff")) for r in result.rows)
    return dataclasses.replace(result, rows=rows, notes=tuple(_flagged(n, "diff") for n in result.notes))


@main.command()
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("head", type=click.Path(path_type=Path))
@click.option("--threshold", **_diff_default("threshold"),
              help="Relative change that counts, in percent (5 or 5%).")
@click.option("--metric", type=click.Choice(["p50", "p99", "both"]), **_diff_default("metric"),
              help="What the verdict judges: the median, the 99th percentile, or both.")
@click.option("--accept", multiple=True,
              help="Compare rows despite this kind of difference: declared (device, model, options, "
                   "incomplete: a receipt of an unfinished run) or conditions (noisy, unsettled, cpu, "
                   "load, gpu, versions, machine, pacing) (repeatable).")
@click.option("--alpha", type=float, **_diff_default("alpha"),
              help="Family-wise error rate (Holm across rows; halved per family with --metric both).")
@click.option("--drift", metavar="PCT", default=None,
              help="Run-to-run spread measured elsewhere (the sd of a process's log-p50, in percent: 5 or "
                   "5%), taken for a side of one process; default: the other side's spread, else the "
                   "largest measured between processes.")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table",
              show_default=True, help="table for the terminal, markdown for a pull request, json for tools.")
def diff(base: Path, head: Path, threshold: str, metric: str, accept: tuple[str, ...], alpha: float,
         drift: str | None, fmt: str) -> None:
    """Compare two receipts row by row.

    Exit 0: no regression; 1: a slower or newly invalid row; 2: a refused comparison or
    unusable input; 3: no regression found, but some rows were unreliable (conditions) or
    none could be judged.
    """
    from benchbox import api, render
    from benchbox.receipts.diff import ComparisonRefused

    try:
        result = api.diff(base, head, threshold=_threshold(threshold), metric=metric, alpha=alpha,
                          accept=accept, drift=fraction(drift, "--drift", "1"))
    except ComparisonRefused as e:
        _step_summary(render.refused_markdown(_flagged(str(e), "diff")))
        raise
    shown = {"table": render.diff_table, "markdown": render.diff_markdown, "json": render.diff_json}[fmt]
    people = _diff_in_flags(result)  # for tools (json) the library's wording
    if fmt == "json":
        click.echo(shown(result))  # JSON is escaped already (controls as \uXXXX): it always parses
    else:
        _echo(shown(people))
    _step_summary(render.diff_markdown(people))
    sys.exit(result.exit_code)


@main.command()
@click.argument("receipt", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["pyperf", "csv", "parquet"]), required=True,
              help="pyperf: a file `python -m pyperf` reads (one run per round); csv/parquet: one row "
                   "per sample with every stage and the environment.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Output file; default next to the receipt (.pyperf.json, .csv, .parquet).")
def export(receipt: Path, fmt: str, output: Path | None) -> None:
    """Export a receipt's raw samples for pyperf, or as CSV/Parquet (one row per sample)."""
    from benchbox.api import export as do_export

    _echo(f"wrote {do_export(receipt, fmt, output)}")


@main.command()
@click.argument("receipts", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Image file; the format follows the extension (.png or .svg).")
@click.option("--kind", type=click.Choice(["quantiles", "stages", "ecdf", "diff", "sweep"]),
              default="quantiles", show_default=True,
              help="diff takes two receipts: BASE HEAD; sweep takes a sweep's receipts or its sweep.json.")
@click.option("--threshold", **_diff_default("threshold"),
              help="diff: relative change that counts, in percent (5 or 5%).")
@click.option("--metric", type=click.Choice(["p50", "p99", "both"]), **_diff_default("metric"),
              help="diff: what is judged, as in benchbox diff.")
@click.option("--accept", multiple=True, help="diff: as benchbox diff --accept (repeatable).")
def plot(receipts: tuple[Path, ...], output: Path, kind: str, threshold: str, metric: str,
         accept: tuple[str, ...]) -> None:
    """Draw a figure from receipts: p50/p99 per case, stages, distributions, or a diff."""
    from benchbox.api import plot as do_plot

    _echo(f"wrote {do_plot(receipts, output, kind, _threshold(threshold), metric=metric, accept=accept)}")


@main.command()
@click.argument("name", required=False)
@_LIST_FORMAT
def contracts(name: str | None, fmt: str) -> None:
    """List the built-in contracts, or show which stages one (NAME or a .toml file) times."""
    from benchbox.contracts import QUEUE, STAGES, TIMELINE, builtin_contracts, load_contract
    from benchbox.render.data import contract_data, dumps
    from benchbox.render.table import table, wrapped

    if name is None:
        found = builtin_contracts()
        if fmt == "json":
            click.echo(dumps([contract_data(c) for c in found]))
            return
        _echo(table(["contract", "region", "clock", "arrival", "description"],
                    [(c.name, f"{c.first}..{c.last}", c.clock, c.arrival.label(), c.description)
                     for c in found], wrap=("arrival", "description")))
        return
    c = load_contract(name)
    if fmt == "json":
        click.echo(dumps(contract_data(c)))
        return
    _echo(f"{c.name} (version {c.version}, {c.clock} clock, hash {c.hash[:16]})")
    _echo(wrapped(c.description))
    for s in (TIMELINE if c.arrival.open_loop or c.includes_queue else STAGES):
        note = "  (wait from the scheduled arrival to the call's start)" if s == QUEUE else ""
        _echo(f"  {'[x]' if s in c.stages else '[ ]'} {s}{note}")
    _echo(f"arrival: {c.arrival.label()}")
    _echo(wrapped("policy: " + ", ".join(f"{k}={v}" for k, v in c.canonical()["policy"].items())))


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
    from benchbox.runners import RUNNERS, availability

    reasons = {name: availability(name, device) for name in RUNNERS}
    if fmt == "json":
        click.echo(dumps(runners_data(device, reasons)))
        return
    _echo(table(["runner", f"on {device}"], [(n, _flagged(r, "runners") if r else "ready")
                                             for n, r in reasons.items()],
                     wrap=(f"on {device}",)))


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


@main.group(cls=_HelpGroup)
def store() -> None:
    """A local store of receipts: the history that `benchbox report` draws."""


def _store_option(help: str) -> Any:
    return click.option("--store", "root", envvar="BENCHBOX_STORE", default="benchbox-store",
                        show_default=True, type=click.Path(path_type=Path), help=help)


@store.command("add")
@click.argument("receipts", nargs=-1, required=True, type=click.Path(path_type=Path))
@_store_option("Store directory (created when missing); also from $BENCHBOX_STORE.")
def store_add(receipts: tuple[Path, ...], root: Path) -> None:
    """Add receipts to a store; a receipt already there is not stored twice.

    A file that is not a receipt (an export beside the receipts, say) is skipped with a
    warning; an incomplete receipt (its run stopped, or still writing it) is stored with one.
    """
    from benchbox.store import Store

    result = Store(root).add(receipts)
    for path, why in result.skipped:
        _echo(f"benchbox: warning: skipped {path}: {why.removeprefix(f'{path}: ')}", err=True)
    for path in result.incomplete:
        _echo(f"benchbox: warning: {path} is an incomplete receipt (its run stopped, or is still writing "
              "it); stored as it is", err=True)
    for e in result.added:
        _echo(f"added   {e.identity[:16]}  {e.source}")
    for e in result.present:
        _echo(f"present {e.identity[:16]}  {e.source}")
    skipped = f", {len(result.skipped)} skipped (not receipts)" if result.skipped else ""
    _echo(f"{len(result.added)} added, {len(result.present)} already in {root}{skipped}")


def _existing_store(root: Path) -> Any:
    from benchbox.store import MARKER, Store

    if not (root / MARKER).is_file():
        raise UsageError(f"{root}: no such receipt store (benchbox store add RECEIPT... makes one)")
    return Store(root)


@store.command("list")
@_store_option("Store directory; also from $BENCHBOX_STORE.")
def store_list(root: Path) -> None:
    """List the stored receipts, oldest first: identity, time, commit, task, contract, device."""
    stored = _existing_store(root).receipts()
    for s in stored:
        state = "" if s.complete else "  (incomplete)"
        cell = f"  [{s.matrix_cell}]" if s.matrix_cell else ""
        _echo(f"{s.identity[:16]}  {s.created_at or '-'}  {(s.commit or '-')[:12]}  {s.task}/{s.size}  "
              f"{s.contract}  {s.device}  {s.n_results} rows{cell}{state}")
    _echo(f"{len(stored)} receipts in {root}")


@store.command("rm")
@click.argument("identities", nargs=-1, required=True)
@_store_option("Store directory; also from $BENCHBOX_STORE.")
def store_rm(identities: tuple[str, ...], root: Path) -> None:
    """Remove receipts from a store, each named by its identity or a unique prefix (8+ digits)."""
    gone = _existing_store(root).remove(identities)
    for ident in gone:
        _echo(f"removed {ident[:16]}")
    _echo(f"{len(gone)} removed from {root}")


@main.command()
@click.argument("store_dir", metavar="STORE", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Site directory (replaced whole if benchbox wrote it before).")
@click.option("--threshold", **_diff_default("threshold"),
              help="Relative change that counts, for steps (as in benchbox diff) and change points.")
@click.option("--metric", type=click.Choice(["p50", "p99", "both"]), **_diff_default("metric"),
              help="What the diff of each step judges.")
@click.option("--alpha", type=float, **_diff_default("alpha"),
              help="Family-wise error rate of each step's diff (Holm across its rows).")
@click.option("--max-pvalue", type=float,
              **_declared(_detector, "max_pvalue"),
              help="Change points: the t-test p-value a change must reach.")
@click.option("--min-change", default=None, metavar="PCT",
              help="Change points: the smallest change kept (default: --threshold).")
@click.option("--commit-url", default=None, metavar="TEMPLATE",
              help="Link every commit: a URL with {commit}, e.g. https://github.com/ORG/REPO/commit/{commit}.")
def report(store_dir: Path, output: Path, threshold: str, metric: str, alpha: float, max_pvalue: float,
           min_change: str | None, commit_url: str | None) -> None:
    """Write a static site of a store's history: trends, change points and their diff verdicts."""
    from benchbox.receipts.diff import DiffOptions
    from benchbox.report import Detector, build_report

    th = _threshold(threshold)
    opts = DiffOptions(threshold=th, metric=metric, alpha=alpha)
    least = th if min_change is None else fraction(min_change, "--min-change")
    det = Detector(max_pvalue=max_pvalue, min_change=least)
    r = build_report(store_dir, output, opts, det, commit_url=commit_url)
    _echo(f"wrote {r.out}/index.html: {len(r.pages)} page(s), {r.series} series, {r.points} points, "
          f"{r.receipts} receipts, {len(r.changes)} change point(s)")
    for c in r.changes:
        _echo(f"  change {c.change:+.1%} at {(c.commit or 'no commit')[:12]}: {c.case} · {c.runner} "
              f"({c.group}) in {c.page}; diff verdict {c.verdict} ({c.runs[0]} v {c.runs[1]} runs)")


if __name__ == "__main__":  # pragma: no cover
    main()
