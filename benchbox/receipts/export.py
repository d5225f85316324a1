"""Export a receipt's raw samples to formats other tools read: pyperf JSON, CSV, Parquet."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from benchbox.contracts import QUEUE, STAGES
from benchbox.errors import MissingExtraError, UsageError
from benchbox.receipts.model import GitState, GpuInfo, Receipt, ResultRow

FORMATS = ("pyperf", "csv", "parquet")
_SUFFIX = {"pyperf": ".pyperf.json", "csv": ".csv", "parquet": ".parquet"}


def default_output(receipt_path: str | Path, fmt: str) -> Path:
    """``run.json`` → ``run.pyperf.json`` / ``run.csv`` / ``run.parquet`` next to it."""
    p = Path(receipt_path)
    return p.with_name(p.stem + _SUFFIX[fmt])


def _rows_with_samples(receipt: Receipt) -> list[ResultRow]:
    rows = [r for r in receipt.results if r.samples_ns]
    if not rows:
        raise UsageError("receipt has no result with samples to export")
    return rows


def _one_line(value: Any) -> Any:
    """A metadata value pyperf accepts: control characters (newlines among them) as escapes."""
    if not isinstance(value, str):
        return value
    return re.sub("[\x00-\x1f\x7f-\x9f]", lambda m: f"\\x{ord(m.group()):02x}", value)


def environment_facts(receipt: Receipt) -> dict[str, Any]:
    """What the numbers were measured on, as flat values (None when the receipt does not say).

    ``device`` is the GPU's name, else the device string; ``commit`` the git commit of the
    working tree that ran (``dirty`` when it had changes).
    """
    env = receipt.environment
    git, gpu = env.git or GitState(), env.gpu or GpuInfo()
    facts: dict[str, Any] = {
        "device": receipt.device, "dtype": receipt.task.dtype, "size": receipt.task.size,
        "commit": git.commit, "dirty": git.dirty, "created_at": receipt.created_at,
        "cpu": env.cpu, "cpu_count": env.cpu_count, "hostname": env.hostname,
        "platform": env.platform, "python": env.python, "torch": env.torch,
        "cuda": env.cuda, "gpu_driver": gpu.driver,
        "benchbox_version": receipt.benchbox_version,
    }
    plain = (str, int, float, bool)
    return {k: (v if isinstance(v, plain) or v is None else str(v)) for k, v in facts.items()}


def _pyperf_metadata(receipt: Receipt, r: ResultRow) -> dict[str, Any]:
    c, task, env = receipt.contract, receipt.task, environment_facts(receipt)
    meta: dict[str, Any] = {
        "name": f"{task.name}/{r.case}/{r.runner}",
        "unit": "second",
        "description": f"benchbox {c.name} ({c.first}..{c.last}, {c.clock} clock)",
        "benchbox_task": task.name, "benchbox_size": task.size, "benchbox_case": r.case,
        "benchbox_runner": r.runner, "benchbox_status": r.status, "benchbox_contract": c.name,
        "benchbox_contract_hash": c.hash, "benchbox_version": receipt.benchbox_version,
        "benchbox_device": env["device"], "benchbox_dtype": env["dtype"], "benchbox_commit": env["commit"],
        "benchbox_commit_dirty": None if env["dirty"] is None else str(env["dirty"]).lower(),
        # pyperf's own keys, so `pyperf metadata` and `compare_to` show them
        "cpu_model_name": env["cpu"], "cpu_count": env["cpu_count"], "hostname": env["hostname"],
        "platform": env["platform"], "python_version": env["python"], "date": env["created_at"],
        "torch_version": env["torch"], "cuda_version": env["cuda"],
    }
    return {k: _one_line(v) for k, v in meta.items() if v is not None and v != ""
            and not (k == "cpu_count" and (not isinstance(v, int) or v < 1))}


def to_pyperf(receipt: Receipt) -> Any:
    """A pyperf.BenchmarkSuite: one benchmark per (runner, case), one run per sampling round.

    Values are in seconds; every run carries the environment (device, dtype, commit, CPU,
    Python, torch) as metadata. pyperf's ``compare_to`` reads files of any sample counts;
    its t-test needs equal counts, so with unequal ones it says "ERROR when testing if
    values are significant" and still prints the comparison (``benchbox diff`` judges
    significance for any counts).
    """
    try:
        import pyperf
    except ImportError:
        raise MissingExtraError("pyperf", "analysis") from None
    benches = []
    names: dict[str, int] = {}
    for r in _rows_with_samples(receipt):
        if min(r.samples_ns) <= 0:
            raise UsageError(f"pyperf holds only positive durations, and row {r.runner!r:.60} × "
                             f"{r.case!r:.60} has a zero sample (export it as csv or parquet)")
        meta = _pyperf_metadata(receipt, r)
        names[meta["name"]] = names.get(meta["name"], 0) + 1
        if names[meta["name"]] > 1:  # a receipt may repeat a (runner, case); pyperf names must be unique
            meta["name"] += f"#{names[meta['name']]}"
        runs = [pyperf.Run([v / 1e9 for v in values], metadata=meta, collect_metadata=False)
                for values in _rounds(r)]
        benches.append(pyperf.Benchmark(runs))
    return pyperf.BenchmarkSuite(benches)


def _rounds(r: ResultRow) -> list[tuple[int, ...]]:
    """The row's samples per round (one round when the receipt does not split them)."""
    rounds = [x for x in r.rounds() if x] if sum(r.round_sizes) == len(r.samples_ns) else []
    return rounds or [tuple(r.samples_ns)]


#: environment columns of the CSV/Parquet export (strings, or integers where noted)
ENV_COLUMNS = ("device", "dtype", "size", "commit", "created_at", "cpu", "cpu_count", "hostname", "python",
               "torch", "cuda", "benchbox_version")


def _text(v: Any) -> str | None:
    return None if v is None else _utf8(v if isinstance(v, str) else str(v))


def _frame_parts(receipt: Receipt) -> tuple[Any, list[ResultRow], tuple[str, ...]]:
    try:
        import polars as pl
    except ImportError:
        raise MissingExtraError("polars", "analysis") from None
    rows = _rows_with_samples(receipt)
    # queue (paced arrivals) first when any row recorded it, so old exports keep their columns
    stage_cols = ((QUEUE,) if any(QUEUE in r.stages_ns for r in rows) else ()) + STAGES
    return pl, rows, stage_cols


def _row_frame(pl: Any, receipt: Receipt, r: ResultRow, stage_cols: tuple[str, ...],
               env: dict[str, Any]) -> Any:
    """One result row's samples as a frame, built column by column (no per-sample Python lists
    beyond the receipt's own): the constant columns are literals, the numbers typed arrays."""
    import numpy as np

    n, c = len(r.samples_ns), receipt.contract
    texts = {"task": receipt.task.name, "contract": c.name, "contract_hash": c.hash, "runner": r.runner,
             "case": r.case, "status": r.status}
    sizes = [len(part) for part in _rounds(r)]
    cols: dict[str, Any] = {k: pl.repeat(_text(v), n, dtype=pl.Utf8, eager=True) for k, v in texts.items()}
    cols["sample"] = pl.Series(np.arange(n, dtype=np.int64))
    cols["round"] = pl.Series(np.repeat(np.arange(len(sizes), dtype=np.int64), sizes))
    cols["region_ns"] = pl.Series(r.samples_ns, dtype=pl.Int64)
    for st in stage_cols:
        v = tuple(r.stages_ns.get(st) or ())[:n]
        series = pl.Series(v, dtype=pl.Int64)
        cols[f"{st}_ns"] = series.extend_constant(None, n - len(v)) if len(v) < n else series
    cpus = env["cpu_count"] if isinstance(env["cpu_count"], int) and not isinstance(env["cpu_count"], bool) \
        else None
    for k in ENV_COLUMNS:
        cols[k] = pl.repeat(cpus, n, dtype=pl.Int64, eager=True) if k == "cpu_count" \
            else pl.repeat(_text(env[k]), n, dtype=pl.Utf8, eager=True)
    return pl.DataFrame(cols)


def frames(receipt: Receipt) -> Any:
    """The export's rows, one polars DataFrame per result row, in order (see :func:`to_frame`)."""
    pl, rows, stage_cols = _frame_parts(receipt)
    env = environment_facts(receipt)
    for r in rows:
        yield _row_frame(pl, receipt, r, stage_cols, env)


def to_frame(receipt: Receipt) -> Any:
    """A polars DataFrame: one row per sample, one column per stage (ns), the round, the environment."""
    pl = _frame_parts(receipt)[0]
    return pl.concat(list(frames(receipt)), how="vertical")


def write_csv(receipt: Receipt, out: Path) -> None:
    """The CSV export, written one result row at a time: memory holds one row's frame, never the
    whole table."""
    with open(out, "wb") as f:
        for i, frame in enumerate(frames(receipt)):
            frame.write_csv(f, include_header=i == 0)


def _utf8(text: str) -> str:
    """``text`` as valid UTF-8: a lone surrogate (legal in JSON's \\u escapes, not in UTF-8)
    becomes U+FFFD instead of failing the export."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def export_receipt(receipt: Receipt, fmt: str, out: str | Path) -> Path:
    """Write ``receipt`` in ``fmt`` (pyperf, csv or parquet) to ``out``; return the path."""
    if fmt not in FORMATS:
        raise UsageError(f"export format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    out = Path(out)
    if out.parent and not out.parent.is_dir():
        raise UsageError(f"{out}: folder {out.parent} does not exist")
    try:
        if fmt == "pyperf":
            to_pyperf(receipt).dump(str(out), compact=False, replace=True)
        elif fmt == "csv":
            write_csv(receipt, out)
        else:
            to_frame(receipt).write_parquet(out)
    except OSError as e:
        raise UsageError(f"{out}: cannot write: {e.strerror or e}") from None
    return out
