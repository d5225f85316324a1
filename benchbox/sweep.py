"""``benchbox sweep``: one run over a list of gaps or rates; one receipt per point, and an index.

A sweep measures its contracts back to back (the reference point; it also gives each
runner's back-to-back throughput, 1 / mean complete call) and under every gap and every
rate, each spent sleeping or busy as asked, in one run. Rates are requests per second, or
fractions of the runner's own back-to-back throughput (``0.3x``): those points are
measured afterwards, in one run per runner, since each runner has its own throughput. Each point is the base
contract under that arrival, so its hash says which arrival it was; the runners are
prepared once per run, and the points of a run share the preparation. Before the first
point of each (runner, case) in a run, a declared settle phase (``settle_s``, default
2 s) of untimed back-to-back calls lets a GPU or CPU come up from its idle clocks after the
compile, so the reference is not measured on a cold device. The index (``sweep.json``)
lists every point and its receipt, and the settle, and is written after every run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbox.contracts import DEFAULT_IDLE, IDLE_MODES, STAGES, Contract, load_contract
from benchbox.errors import FieldError, UsageError
from benchbox.run.config import RunConfig

INDEX = "sweep.json"
INDEX_KIND = "benchbox-sweep"
#: seconds of untimed back-to-back calls before each run's first point (per runner and case)
DEFAULT_SETTLE_S = 2.0

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Point:
    """One arrival of a sweep: a gap, an absolute rate, or a fraction of back-to-back throughput."""

    kind: str  # back_to_back, gap or poisson
    idle: str = DEFAULT_IDLE
    gap_ms: float = 0.0
    rate_per_s: float | None = None
    fraction: float | None = None

    @property
    def slug(self) -> str:
        if self.kind == "gap":
            return f"gap-{self.gap_ms:g}ms-{self.idle}"
        if self.kind == "poisson":
            rate = f"{self.fraction:g}x" if self.fraction is not None else f"{self.rate_per_s:g}rps"
            return f"rate-{rate}-{self.idle}"
        return "back-to-back"

    def apply(self, contract: Contract, throughput: float | None = None) -> Contract:
        """The base contract under this point's arrival."""
        if self.kind == "gap":
            return contract.with_arrival(gap_ms=self.gap_ms, idle=self.idle)
        if self.kind == "poisson":
            rate = self.rate_per_s if self.fraction is None else self.fraction * (throughput or 0.0)
            return contract.with_arrival(rate_per_s=rate, idle=self.idle)
        return contract.with_arrival(gap_ms=0)


@dataclass(frozen=True)
class SweepConfig:
    """What to sweep: the run's configuration (contracts, task, runners...), the points, where to."""

    run: RunConfig
    out_dir: Path
    gaps_ms: tuple[float, ...] = ()
    #: requests per second ("50") or fractions of back-to-back throughput ("0.3x")
    rates: tuple[str, ...] = ()
    idles: tuple[str, ...] = (DEFAULT_IDLE,)
    #: untimed back-to-back calls before each (runner, case)'s first point, in seconds
    settle_s: float = DEFAULT_SETTLE_S

    def points(self) -> list[Point]:
        """Every gap and rate under every idle mode, in the order given (a gap of 0 is back to back)."""
        if not self.gaps_ms and not self.rates:
            raise FieldError("gaps_ms", "a sweep needs at least one gap or one rate")
        if not self.idles or any(i not in IDLE_MODES for i in self.idles):
            raise FieldError("idles", f"idle modes are {', '.join(IDLE_MODES)}, got {', '.join(self.idles)}")
        out: list[Point] = []
        for idle in dict.fromkeys(self.idles):
            for g in self.gaps_ms:
                if not (isinstance(g, (int, float)) and math.isfinite(g) and g >= 0):
                    raise FieldError("gaps_ms", f"a gap must be a non-negative number of ms, got {g!r}")
                if g > 0:
                    out.append(Point("gap", idle, gap_ms=float(g)))
            for raw in self.rates:
                rate, fraction = parse_rate(raw)
                out.append(Point("poisson", idle, rate_per_s=rate, fraction=fraction))
        return list(dict.fromkeys(out))


def parse_rate(raw: str) -> tuple[float | None, float | None]:
    """'50' or '50/s' → (50.0, None); '0.3x' → (None, 0.3). FieldError on anything else."""
    text = str(raw).strip().lower()
    relative = text.endswith("x")
    try:
        value = float(text.removesuffix("x").removesuffix("/s").strip())
    except ValueError:
        raise FieldError("rates", f"a rate is requests per second (50) or a fraction of the "
                                  f"back-to-back throughput (0.3x), got {raw!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise FieldError("rates", f"a rate must be positive, got {raw!r}")
    return (None, value) if relative else (value, None)


@dataclass
class SweepOutcome:
    """Where the index and the receipts are, and each runner's back-to-back throughput."""

    index: Path
    receipts: list[Path] = field(default_factory=list)
    throughput_per_s: dict[str, float] = field(default_factory=dict)
    overloaded: list[str] = field(default_factory=list)
    ok: bool = True


def throughput(receipt: Any, runner: str) -> float | None:
    """1 / mean complete call (the pipeline stages' sum) of a runner's first usable row, per second."""
    for row in receipt.results:
        if row.runner == runner and row.usable:
            cols = [row.stages_ns[s] for s in STAGES if row.stages_ns.get(s)]
            if not cols:
                return None
            n = min(len(c) for c in cols)
            mean = sum(sum(c[:n]) for c in cols) / n
            return 1e9 / mean if mean > 0 else None
    return None


def sweep(cfg: SweepConfig, progress: Progress = lambda s: None, **seams: Any) -> SweepOutcome:
    """Measure the back-to-back reference, then every point; write the receipts and the index.

    ``seams`` go to :func:`benchbox.run.run` (``task``, ``clock``, ``runner_factory``).
    """
    from benchbox.receipts import load_receipt
    from benchbox.run import Interrupted, run

    points, base_cfg, contracts, out_dir = _checked(cfg, seams.get("runner_factory"))
    relative = [p for p in points if p.fraction is not None]
    outcome = SweepOutcome(index=out_dir / INDEX)
    entries: list[dict[str, Any]] = []

    def measure(pts: list[tuple[Point, Contract, str | None]], runners: tuple[str, ...]) -> Any:
        placed = [(c, out_dir / f"{c.name}.{p.slug}{'.' + r if r else ''}.json") for p, c, r in pts]
        progress(f"sweep: {len(placed)} point(s) for {', '.join(runners)}")
        try:
            res = run(_for_runners(base_cfg, runners), progress, points=placed, **seams)
        except Interrupted:  # the receipts written so far stay listed, marked as cut short
            for (p, c, runner), (_, path) in zip(pts, placed):
                if path.exists():
                    entries.append({**_entry(p, c, path, load_receipt(path), out_dir, runner),
                                    "interrupted": True})
            _write_index(outcome, cfg, contracts, entries)
            raise
        for (p, c, runner), o in zip(pts, res.all):
            entries.append(_entry(p, c, o.path, o.receipt, out_dir, runner))
            outcome.receipts.append(o.path)
            # an overloaded point is a finding, not a failure of the sweep
            outcome.ok &= all(r.status == "valid" or (r.load is not None and r.load.overloaded)
                              for r in o.receipt.results)
        _write_index(outcome, cfg, contracts, entries)
        return res

    # the back-to-back reference and every absolute point in one run (the runners prepared once)
    ref = measure([(Point("back_to_back"), c.with_arrival(gap_ms=0), None) for c in contracts]
                  + [(p, p.apply(c), None) for p in points if p.fraction is None for c in contracts],
                  base_cfg.runners)
    for r in base_cfg.runners:
        t = throughput(ref.receipt, r)
        if t is not None:
            outcome.throughput_per_s[r] = t
    for r in base_cfg.runners if relative else ():
        if r not in outcome.throughput_per_s:
            progress(f"sweep: {r} has no back-to-back throughput (no valid reference row): "
                     "its relative rates are skipped")
            continue
        measure([(p, p.apply(c, outcome.throughput_per_s[r]), r) for p in relative for c in contracts], (r,))
    outcome.overloaded = [f"{e['receipt']} ({', '.join(e['overloaded'])})"
                          for e in entries if e["overloaded"]]
    _write_index(outcome, cfg, contracts, entries)
    return outcome


def _for_runners(cfg: RunConfig, runners: tuple[str, ...]) -> RunConfig:
    """``cfg`` for some of its runners: their options only, the baseline only if it is one of them."""
    return dataclasses.replace(cfg, runners=runners,
                               runner_options={r: o for r, o in cfg.runner_options.items() if r in runners},
                               baseline=cfg.baseline if cfg.baseline in runners else None)


def _checked(cfg: SweepConfig, runners: Any = None) -> tuple[list[Point], RunConfig, list[Contract], Path]:
    """The points, the run's configuration without a run-time arrival, the contracts, the folder
    (runner names and options checked against ``runners``, the run's runner factory, if given)."""
    points = cfg.points()
    base_cfg = dataclasses.replace(cfg.run, gap_ms=None, rate_per_s=None, idle=None, out=None,
                                   settle_s=cfg.settle_s)
    base_cfg.validate() if runners is None else base_cfg.validate(runners)
    if any(p.fraction is not None for p in points) and len(base_cfg.cases) != 1:
        raise FieldError("cases", "rates as fractions of the back-to-back throughput need exactly one case")
    contracts = [load_contract(c) for c in base_cfg.contract_names]
    if len({c.name for c in contracts}) != len(contracts):
        raise FieldError("contracts", "a contract is named twice")
    out_dir = Path(cfg.out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{out_dir}: cannot create the sweep folder: {e.strerror or e}") from None
    return points, base_cfg, contracts, out_dir


def _entry(p: Point, c: Contract, path: Path, receipt: Any, out_dir: Path, runner: str | None
           ) -> dict[str, Any]:
    rows = receipt.results
    return {"point": p.slug, "contract": c.name, "hash": c.hash, "arrival": c.arrival.describe(),
            "fraction": p.fraction, "runners": [runner] if runner else sorted({r.runner for r in rows}),
            "receipt": os.path.relpath(path, out_dir),
            "overloaded": sorted({r.runner for r in rows if r.load is not None and r.load.overloaded})}


def _write_index(outcome: SweepOutcome, cfg: SweepConfig, contracts: Sequence[Contract],
                 entries: list[dict[str, Any]]) -> None:
    from benchbox.receipts.io import now_iso

    doc = {"kind": INDEX_KIND, "written_at": now_iso(), "command": list(cfg.run.command),
           "contracts": [c.name for c in contracts], "gaps_ms": list(cfg.gaps_ms), "rates": list(cfg.rates),
           "idles": list(cfg.idles), "settle_s": cfg.settle_s,
           "overload_bound": cfg.run.load_bound().describe(),
           "throughput_per_s": outcome.throughput_per_s, "points": entries}
    tmp = outcome.index.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(outcome.index)


def expand_index(paths: Sequence[Path]) -> list[Path]:
    """Receipt paths, with any sweep index replaced by the receipts it lists."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.name == INDEX or p.suffix == ".json" and _is_index(p):
            try:
                doc = json.loads(p.read_text())
            except (OSError, ValueError) as e:
                raise UsageError(f"{p}: cannot read the sweep index: {e}") from None
            out += [p.parent / e["receipt"] for e in doc.get("points", []) if isinstance(e, dict)
                    and isinstance(e.get("receipt"), str)]
        else:
            out.append(p)
    return out


def _is_index(p: Path) -> bool:
    try:
        with p.open("rb") as f:
            head = f.read(200)
    except OSError:
        return False
    return INDEX_KIND.encode() in head
