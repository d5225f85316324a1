"""The commands that read receipts: show, combine, diff (and the CI step summary), export,
plot, contracts, the store and its report."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from pathlib import Path
from typing import Any

import click

from benchbox.cli.app import (
    _LIST_FORMAT,
    _declared,
    _detector,
    _diff_default,
    _echo,
    _flagged,
    _HelpGroup,
    main,
)
from benchbox.errors import UsageError
from benchbox.run.options import fraction, percent

_percent = percent
_threshold = functools.partial(fraction, flag="--threshold")


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

    rows = tuple(dataclasses.replace(r, reason=_flagged(r.reason, r.settings, "diff")) for r in result.rows)
    return dataclasses.replace(result, rows=rows,
                               notes=tuple(_flagged(n, result.settings, "diff") for n in result.notes))


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
                   "load, gpu, versions, machine, layout, pacing) (repeatable).")
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
        _step_summary(render.refused_markdown(_flagged(str(e), e.settings, "diff")))
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
@click.option("--overwrite", is_flag=True, help="Replace an existing output file (never the receipt).")
def export(receipt: Path, fmt: str, output: Path | None, overwrite: bool) -> None:
    """Export a receipt's raw samples for pyperf, or as CSV/Parquet (one row per sample)."""
    from benchbox.api import export as do_export
    from benchbox.receipts.export import default_output

    target = output if output is not None else default_output(receipt, fmt)
    if target.exists() and receipt.exists() and target.resolve() == receipt.resolve():
        raise UsageError(f"{target} is the receipt itself: choose another --output")
    if target.exists() and not overwrite:
        raise UsageError(f"{target} exists: choose another --output, or pass --overwrite")
    _echo(f"wrote {do_export(receipt, fmt, target)}")


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
