"""The command line: parse options, call the library, render, pick the exit code."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from benchbox import __version__
from benchbox.errors import BenchboxError, UsageError


def _one_line(text: str) -> str:
    return " / ".join(part.strip() for part in text.splitlines() if part.strip())


def _fail(e: BenchboxError) -> NoReturn:
    prefix = "benchbox: " if e.exit_code == 130 else "benchbox: error: "
    click.echo(prefix + _one_line(str(e)), err=True)
    sys.exit(e.exit_code)


class _Group(click.Group):
    """Turns every error into one line on stderr and the right exit code, never a traceback.

    Benchbox errors carry their exit code; click's usage errors exit 2; an
    interrupt exits 130; anything unexpected exits 2 with its class and message
    (set BENCHBOX_DEBUG=1 to see the traceback instead).
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BenchboxError as e:
            _fail(e)
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
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.ClickException as e:
            hint = ""
            if isinstance(e, click.UsageError) and e.ctx is not None:
                hint = f" (see '{e.ctx.command_path} --help')"
            click.echo(f"benchbox: error: {_one_line(e.format_message())}{hint}", err=True)
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("benchbox: interrupted", err=True)
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)


def _pairs(values: tuple[str, ...], what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for v in values:
        key, sep, raw = v.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} expects KEY=VALUE, got {v!r}")
        out[key] = _scalar(raw)
    return out


def _percent(raw: str | None) -> float | None:
    """'1', '1%' or '0.5 %' → 1.0 / 0.5; None stays None."""
    if raw is None:
        return None
    try:
        value = float(raw.strip().removesuffix("%").strip())
    except ValueError:
        raise UsageError(f"--target-ci expects a percentage such as 1 or 1%, got {raw!r}") from None
    if not 0.0 < value < 100.0:
        raise UsageError(f"--target-ci must be between 0 and 100 percent, got {raw!r}")
    return value


def _scalar(raw: str) -> Any:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    return raw


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="benchbox")
def main() -> None:
    """Benchmark ML inference tasks under explicit timing contracts."""


@main.command()
@click.option("--contract", "contract", multiple=True, default=("public_task_call_wall",),
              show_default=True,
              help="Built-in contract name or path to a contract TOML file. Repeat it to measure "
                   "several contracts in one run: runners are prepared once, one receipt per contract "
                   "(OUT becomes OUT-stem.CONTRACT.json).")
@click.option("--task", "task_spec", default="decision", show_default=True,
              help="Built-in task name or package.module:factory.")
@click.option("--size", default="tiny", show_default=True)
@click.option("--dtype", default="float32", show_default=True,
              type=click.Choice(["float32", "float16", "bfloat16"]))
@click.option("--runner", "runners", multiple=True,
              help="Runner to measure (repeatable); default torch-eager and torch-compile.")
@click.option("--case", "cases", multiple=True, help="Case to run (repeatable); default all.")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N.")
@click.option("--threads", type=int, default=None,
              help="torch intra-op threads (default: torch's choice); recorded in the receipt.")
@click.option("--warmup", default=5, show_default=True, type=int)
@click.option("--samples", default=400, show_default=True, type=int,
              help="Fixed sample count (a two-sided 95% p99 interval needs ≥ 368).")
@click.option("--target-ci", default=None, metavar="PCT",
              help="Adaptive sampling: stop once the p50 95% interval half-width is below PCT percent "
                   "(e.g. 1 or 1%), within --max-samples and --max-time.")
@click.option("--max-samples", default=10_000, show_default=True, type=int)
@click.option("--max-time", "max_time", default=60.0, show_default=True, type=float,
              help="Seconds of sampling per (runner, case) at most, with --target-ci.")
@click.option("--compile-mode", default="max-autotune", show_default=True,
              help="torch.compile mode for the torch-compile runner.")
@click.option("--compile-option", multiple=True,
              help="Inductor option KEY=VALUE for torch-compile (repeatable).")
@click.option("--aten-fallback", multiple=True,
              help="Operator torch-compile must run in ATen, e.g. layer_norm (repeatable).")
@click.option("--tensorrt-flavour", type=click.Choice(["auto", "tensorrt", "tensorrt_rtx"]),
              default="auto", show_default=True)
@click.option("--runner-option", multiple=True, help="RUNNER:KEY=VALUE for any runner (repeatable).")
@click.option("--baseline", default=None, help="Runner the others are compared against.")
@click.option("--task-option", multiple=True, help="KEY=VALUE passed to the task (repeatable).")
@click.option("--gate", multiple=True, help="Accuracy gate threshold override GATE=VALUE.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Receipt path; default a timestamped file under ./receipts/.")
def run(contract: tuple[str, ...], task_spec: str, size: str, dtype: str, runners: tuple[str, ...],
        cases: tuple[str, ...], device: str, threads: int | None, warmup: int, samples: int,
        target_ci: str | None,
        max_samples: int, max_time: float, compile_mode: str, compile_option: tuple[str, ...],
        aten_fallback: tuple[str, ...], tensorrt_flavour: str, runner_option: tuple[str, ...],
        baseline: str | None, task_option: tuple[str, ...], gate: tuple[str, ...],
        out: Path | None) -> None:
    """Measure runners × cases under a timing contract and write a receipt."""
    from benchbox.render import results_table
    from benchbox.run import DEFAULT_RUNNERS, RunConfig
    from benchbox.run import run as do_run

    ropts: dict[str, dict[str, Any]] = {
        "torch-compile": {"mode": compile_mode},
        "tensorrt": {"flavour": tensorrt_flavour},
    }
    if compile_option:
        ropts["torch-compile"]["inductor_options"] = _pairs(compile_option, "--compile-option")
    if aten_fallback:
        ropts["torch-compile"]["aten_fallbacks"] = list(aten_fallback)
    for item in runner_option:
        rname, sep, kv = item.partition(":")
        if not sep:
            raise UsageError(f"--runner-option expects RUNNER:KEY=VALUE, got {item!r}")
        ropts.setdefault(rname, {}).update(_pairs((kv,), "--runner-option"))
    cfg = RunConfig(
        contract=contract[0], contracts=tuple(contract) if len(contract) > 1 else (),
        task=task_spec, size=size, dtype=dtype,
        runners=tuple(runners) or DEFAULT_RUNNERS, cases=tuple(cases), device=device, threads=threads,
        warmup=warmup, samples=samples, target_ci=_percent(target_ci), max_samples=max_samples,
        max_time_s=max_time, out=out, baseline=baseline,
        runner_options={k: v for k, v in ropts.items() if k in (runners or DEFAULT_RUNNERS)},
        task_options=_pairs(task_option, "--task-option"), gates=_pairs(gate, "--gate"),
        command=tuple(["benchbox", *sys.argv[1:]]))
    outcome = do_run(cfg, progress=lambda s: click.echo(s, err=True))
    for o in outcome.all:
        click.echo(results_table(o.receipt))
        click.echo(f"receipt written to {o.path}")
    sys.exit(0 if outcome.ok else 1)


@main.command()
@click.argument("receipts", nargs=-1, required=True, type=click.Path(path_type=Path))
def show(receipts: tuple[Path, ...]) -> None:
    """Print the summary table of a receipt, or several receipts side by side."""
    from benchbox.receipts import load_receipt
    from benchbox.render import results_table

    if len(receipts) == 1:
        click.echo(results_table(load_receipt(receipts[0])))
        return
    from benchbox.receipts.compare_render import side_by_side

    click.echo(side_by_side([load_receipt(r) for r in receipts], [str(r) for r in receipts]))


@main.command()
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("head", type=click.Path(path_type=Path))
@click.option("--threshold", default="5%", show_default=True,
              help="Relative change that counts, in percent (5 or 5%).")
@click.option("--metric", type=click.Choice(["p50", "p99", "both"]), default="p50", show_default=True)
@click.option("--accept", multiple=True,
              help="Compare rows despite this kind of difference: device, model, options, fallbacks, "
                   "incomplete (a receipt of an unfinished run) (repeatable).")
@click.option("--alpha", default=0.05, show_default=True, type=float,
              help="Family-wise error rate (Holm across rows).")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table",
              show_default=True)
def diff(base: Path, head: Path, threshold: str, metric: str, accept: tuple[str, ...], alpha: float,
         fmt: str) -> None:
    """Compare two receipts row by row; exit 1 on a regression, 2 on a refused comparison."""
    import os

    from benchbox.receipts import compare_render as cr
    from benchbox.receipts.diff import ComparisonRefused, DiffOptions, accept_kinds, diff_files

    raw = threshold.strip().rstrip("%")
    try:
        th = float(raw) / 100
    except ValueError:
        raise UsageError(f"--threshold expects a percentage such as 5 or 5%, got {threshold!r}") from None
    opts = DiffOptions(threshold=th, metric=metric, alpha=alpha, accept=accept_kinds(accept))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    try:
        result = diff_files(base, head, opts)
    except ComparisonRefused as e:
        if summary:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(f"### ⛔ benchbox diff refused\n\n{e}\n")
        raise
    render = {"table": cr.diff_table, "markdown": cr.diff_markdown, "json": cr.diff_json}[fmt]
    click.echo(render(result))
    if summary:
        with open(summary, "a", encoding="utf-8") as f:
            f.write(cr.diff_markdown(result))
    sys.exit(result.exit_code)


@main.command()
@click.argument("receipt", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["pyperf", "csv", "parquet"]), required=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Output file; default next to the receipt (.pyperf.json, .csv, .parquet).")
def export(receipt: Path, fmt: str, output: Path | None) -> None:
    """Export a receipt's raw samples for pyperf, or as CSV/Parquet (one row per sample)."""
    from benchbox.receipts import load_receipt
    from benchbox.receipts.export import default_output, export_receipt

    path = export_receipt(load_receipt(receipt), fmt, output or default_output(receipt, fmt))
    click.echo(f"wrote {path}")


@main.command()
@click.argument("receipts", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Image file; the format follows the extension (.png or .svg).")
@click.option("--kind", type=click.Choice(["quantiles", "stages", "ecdf", "diff"]), default="quantiles",
              show_default=True, help="diff takes two receipts: BASE HEAD.")
@click.option("--threshold", default="5%", show_default=True,
              help="diff: relative change that counts, in percent (5 or 5%).")
def plot(receipts: tuple[Path, ...], output: Path, kind: str, threshold: str) -> None:
    """Draw a figure from receipts: p50/p99 per case, stages, distributions, or a diff."""
    from benchbox.plots import render

    try:
        th = float(threshold.strip().rstrip("%")) / 100
    except ValueError:
        raise UsageError(f"--threshold expects a percentage such as 5 or 5%, got {threshold!r}") from None
    click.echo(f"wrote {render(receipts, output, kind, th)}")


@main.command()
@click.argument("name", required=False)
def contracts(name: str | None) -> None:
    """List the built-in contracts, or show which stages one times."""
    from benchbox.contracts import STAGES, builtin_contracts, load_contract

    if name is None:
        for c in builtin_contracts():
            click.echo(f"{c.name:<24} {c.first}..{c.last:<12} {c.clock:<7} {c.description}")
        return
    c = load_contract(name)
    click.echo(f"{c.name} (version {c.version}, {c.clock} clock, hash {c.hash[:16]})")
    click.echo(c.description)
    for s in STAGES:
        click.echo(f"  {'[x]' if s in c.stages else '[ ]'} {s}")
    click.echo("policy: " + ", ".join(f"{k}={v}" for k, v in c.canonical()["policy"].items()))


@main.command()
@click.option("--task", "task_specs", multiple=True,
              help="Built-in task name or package.module:factory (repeatable); default the built-in tasks.")
def tasks(task_specs: tuple[str, ...]) -> None:
    """List tasks with their cases, sizes and parameter counts (counted from the built model)."""
    from benchbox.tasks import describe_tasks

    for info in describe_tasks(task_specs):
        click.echo(f"{info.name} ({info.spec})")
        click.echo(f"  cases:  {', '.join(info.cases)}")
        click.echo(f"  dtypes: {', '.join(info.dtypes)}")
        for s in info.sizes:
            click.echo(f"  {s.name:<8} {s.parameters:>13,} parameters  {s.detail}".rstrip())


@main.command()
@click.option("--device", default="cpu", show_default=True)
def runners(device: str) -> None:
    """List runners and whether each can run here."""
    from benchbox.runners import RUNNERS, availability

    for name in RUNNERS:
        reason = availability(name, device)
        click.echo(f"{name:<16} {'ready' if reason is None else reason}")


@main.group()
def store() -> None:
    """A local store of receipts: the history that `benchbox report` draws."""


@store.command("add")
@click.argument("receipts", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--store", "root", envvar="BENCHBOX_STORE", default="benchbox-store", show_default=True,
              type=click.Path(path_type=Path),
              help="Store directory (created when missing); also from $BENCHBOX_STORE.")
def store_add(receipts: tuple[Path, ...], root: Path) -> None:
    """Add receipts to a store; a receipt already there is not stored twice."""
    from benchbox.store import Store

    result = Store(root).add(receipts)
    for e in result.added:
        click.echo(f"added   {e.identity[:16]}  {e.source}")
    for e in result.present:
        click.echo(f"present {e.identity[:16]}  {e.source}")
    click.echo(f"{len(result.added)} added, {len(result.present)} already in {root}")


@main.command()
@click.argument("store_dir", metavar="STORE", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Site directory (replaced whole if benchbox wrote it before).")
@click.option("--threshold", default="5%", show_default=True,
              help="Relative change that counts, for steps (as in benchbox diff) and change points.")
@click.option("--metric", type=click.Choice(["p50", "p99", "both"]), default="p50", show_default=True,
              help="What the diff of each step judges.")
@click.option("--alpha", default=0.05, show_default=True, type=float,
              help="Family-wise error rate of each step's diff (Holm across its rows).")
@click.option("--max-pvalue", default=0.001, show_default=True, type=float,
              help="Change points: the t-test p-value a change must reach.")
@click.option("--min-change", default=None, metavar="PCT",
              help="Change points: the smallest change kept (default: --threshold).")
def report(store_dir: Path, output: Path, threshold: str, metric: str, alpha: float, max_pvalue: float,
           min_change: str | None) -> None:
    """Write a static site of a store's history: trends, diff steps and change points."""
    from benchbox.receipts.diff import DiffOptions
    from benchbox.report import Detector, build_report

    def pct(raw: str, name: str) -> float:
        try:
            return float(raw.strip().rstrip("%")) / 100
        except ValueError:
            raise UsageError(f"{name} expects a percentage such as 5 or 5%, got {raw!r}") from None

    th = pct(threshold, "--threshold")
    opts = DiffOptions(threshold=th, metric=metric, alpha=alpha)
    least = th if min_change is None else pct(min_change, "--min-change")
    det = Detector(max_pvalue=max_pvalue, min_change=least)
    r = build_report(store_dir, output, opts, det)
    click.echo(f"wrote {r.out}/index.html: {len(r.pages)} page(s), {r.series} series, {r.points} points, "
               f"{r.receipts} receipts, {r.diffs} diffs, {len(r.changes)} change point(s)")
    for c in r.changes:
        click.echo(f"  change {c.change:+.1%} at {(c.commit or 'no commit')[:12]}: {c.case} · {c.runner} "
                   f"({c.group}) in {c.page}; diff verdict {c.verdict}")


if __name__ == "__main__":  # pragma: no cover
    main()
