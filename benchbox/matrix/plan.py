"""PLAN.toml: a declared matrix of runs, validated and expanded into cells.

A plan names axes (task, size, dtype, runner, contract, device, case); the cells are
their product, less the ``[[exclude]]`` combinations. Every cell is one
``benchbox run`` and has a stable identity: the sha256 of its declared configuration
and the revision of the code it measures. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from benchbox.contracts.shape import check_toml_shape
from benchbox.errors import UsageError, did_you_mean
from benchbox.typed import Declared, Range, decode, spec

#: axis → the value used when the plan does not name the axis
AXES: dict[str, tuple[str, ...]] = {
    "task": ("decision",),
    "size": ("tiny",),
    "dtype": ("float32",),
    "runner": ("torch-eager", "torch-compile"),
    "contract": ("public_task_call_wall",),
    "device": ("cpu",),
    "case": (),
}
#: axes whose values may share one ``benchbox run`` (runners prepared once, one receipt per contract)
TOGETHER_AXES = ("runner", "contract")
DTYPES = ("float32", "float16", "bfloat16")
DEVICES = ("cpu", "cuda")
#: runner options that are lists or tables
_STRUCTURED_OPTIONS = {("torch-compile", "aten_fallbacks"): list,
                       ("torch-compile", "inductor_options"): dict}
MAX_CELLS = 10_000
MAX_PLAN_BYTES = 1024 * 1024

Scalar = str | int | float | bool


@dataclass(frozen=True)
class ContractRef:
    """A contract as the plan declares it: built-in by name, or a file's text (sent to workers)."""

    name: str
    hash: str
    builtin: bool
    text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "hash": self.hash}


@dataclass(frozen=True)
class Cell:
    """One run of the matrix: everything ``benchbox run`` is told, and what it may use."""

    task: str
    size: str
    dtype: str
    device: str
    runners: tuple[str, ...]
    contracts: tuple[ContractRef, ...]
    cases: tuple[str, ...]
    sampling: dict[str, Any]
    threads: int
    cpus: int
    pin_cpus: bool
    timeout_s: float
    baseline: str | None = None
    task_options: dict[str, Scalar] = field(default_factory=dict)
    runner_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    gates: dict[str, float] = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        """The declared configuration that decides what the cell measures (its identity's input).

        The timeout and whether CPUs are pinned are left out: they decide whether a run
        finishes and what it shares, which the receipt records, not what it measures.
        """
        return {"task": self.task, "size": self.size, "dtype": self.dtype, "device": self.device,
                "runners": list(self.runners), "contracts": [c.to_dict() for c in self.contracts],
                "cases": list(self.cases), "sampling": dict(self.sampling), "threads": self.threads,
                "cpus": self.cpus, "baseline": self.baseline, "task_options": dict(self.task_options),
                "runner_options": {r: self.runner_options[r] for r in self.runners
                                   if r in self.runner_options},
                "gates": dict(self.gates)}

    @property
    def config_hash(self) -> str:
        return _sha256(self.config())

    def identity(self, revision: str) -> str:
        """The cell's identity: its configuration and the revision of the code it measures."""
        return _sha256({"config": self.config_hash, "revision": revision})

    def axes(self) -> dict[str, str]:
        """The cell's coordinates, for tables."""
        out = {"task": self.task, "size": self.size, "dtype": self.dtype,
               "runner": ",".join(self.runners), "contract": ",".join(c.name for c in self.contracts),
               "device": self.device}
        if len(self.cases) == 1:
            out["case"] = self.cases[0]
        return out


@dataclass(frozen=True)
class Plan:
    """A validated plan and its cells, in declaration order."""

    name: str
    path: Path
    sha256: str
    cells: tuple[Cell, ...]
    ray: dict[str, Any] = field(default_factory=dict)
    description: str = ""


def _sha256(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _fail(where: str, msg: str) -> UsageError:
    return UsageError(f"{where}: {msg}")


def load_plan(path: str | Path) -> Plan:
    """Read, validate and expand a plan file; UsageError with one line on any problem."""
    p = Path(path)
    try:
        if p.is_dir():
            raise UsageError(f"{p}: is a directory, not a plan")
        if p.stat().st_size > MAX_PLAN_BYTES:
            raise UsageError(f"{p}: plan is over the {MAX_PLAN_BYTES}-byte limit")
        blob = p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{p}: no such plan") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"{p}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        text = blob.decode("utf-8")
        check_toml_shape(text, str(p))
        data = tomllib.loads(text)
    except RecursionError:
        raise UsageError(f"{p}: not a plan: nested too deeply") from None
    except UnicodeDecodeError:
        raise UsageError(f"{p}: not a plan: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{p}: not a plan: invalid TOML ({e})") from None
    return parse_plan(data, where=str(p), base=p.parent, name=p.stem,
                      sha256=hashlib.sha256(blob).hexdigest(), path=p)


def _contracts(names: tuple[str, ...], base: Path, where: str) -> dict[str, ContractRef]:
    from benchbox.contracts import builtin_names, load_contract

    out: dict[str, ContractRef] = {}
    for n in names:
        if n in builtin_names():
            c = load_contract(n)
            out[n] = ContractRef(c.name, c.hash, builtin=True)
            continue
        f = Path(n) if Path(n).is_absolute() else base / n
        try:
            c = load_contract(str(f))
        except UsageError as e:
            raise _fail(where, str(e)) from None
        out[n] = ContractRef(c.name, c.hash, builtin=False, text=f.read_text(encoding="utf-8"))
    dup = [r.name for r in out.values()]
    if len(set(dup)) != len(dup):
        raise _fail(where, f"two contracts are named '{next(d for d in dup if dup.count(d) > 1)}'")
    return out


# -- the declaration, as typed records (decoded by benchbox.typed) --------------------------

#: one name, or a list of them
Names = tuple[str, ...] | str


def _names(value: Names | None) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value or ())


def _names_problem(value: Names | None, at: str, allow_empty: bool = False) -> str | None:
    names = _names(value)
    if not all(names):
        return f"{at}: must be a list of non-empty strings"
    if not names and not allow_empty:
        return f"{at}: must not be empty"
    twice = [v for v in names if names.count(v) > 1]
    return f"{at}: '{twice[0]}' is listed twice" if twice else None


def _scalars_problem(table: Mapping[str, Any], at: str) -> str | None:
    odd = [k for k, v in table.items() if not isinstance(v, (str, int, float, bool))]
    return f"{at}: '{odd[0]}' must be a string, number or boolean, got {type(table[odd[0]]).__name__}" \
        if odd else None


@dataclass(frozen=True, kw_only=True)
class AxesDeclaration(Declared):
    """``[axes]``: the values of each axis (one name or a list); an axis left out takes its default."""

    task: Names | None = spec()
    size: Names | None = spec()
    dtype: Names | None = spec()
    runner: Names | None = spec()
    contract: Names | None = spec()
    device: Names | None = spec()
    case: Names | None = spec()


@dataclass(frozen=True, kw_only=True)
class ExcludeDeclaration(AxesDeclaration):
    """One ``[[exclude]]`` table: the cells whose coordinates all match are left out."""

    def check(self, raw: Mapping[str, Any], fail: Callable[[str], None]) -> None:
        if not raw:
            fail("an [[exclude]] table names axis = value(s)")


@dataclass(frozen=True, kw_only=True)
class RunDeclaration(Declared):
    """``[run]``: fixed cases, sampling, threads, task options, gates, baseline."""

    cases: tuple[str, ...] | None = spec()
    samples: Annotated[int, Range(1)] = spec(default=400)
    warmup: Annotated[int, Range(0)] = spec(default=5)
    target_ci: float | None = spec()
    max_samples: Annotated[int, Range(1)] = spec(default=10_000)
    max_time: float = spec(default=60.0)
    settle_s: float = spec(default=0.0)
    threads: Annotated[int, Range(1)] | None = spec()
    baseline: str | None = spec()
    task_options: dict[str, Any] = spec(default_factory=dict)
    gates: dict[str, float] = spec(default_factory=dict)

    def check(self, raw: Mapping[str, Any], fail: Callable[[str], None]) -> None:
        if self.target_ci is not None and not 0 < self.target_ci < 100:
            fail("target_ci is a percentage between 0 and 100")
        if self.max_time <= 0:
            fail("max_time must be > 0 seconds")
        if not math.isfinite(self.settle_s) or self.settle_s < 0:
            fail("settle_s must be a finite number of seconds ≥ 0")
        problem = _scalars_problem(self.task_options, "task_options")
        if problem is None and self.cases is not None:
            problem = _names_problem(self.cases, "cases")
        if problem is not None:
            fail(problem)

    def sampling(self) -> dict[str, Any]:
        """What the cell's sampling is told; a settle phase only when declared, so the identities
        of cells declared before it existed stay as they were."""
        out = {"samples": self.samples, "warmup": self.warmup, "target_ci": self.target_ci,
               "max_samples": self.max_samples, "max_time": self.max_time}
        return {**out, "settle_s": float(self.settle_s)} if self.settle_s else out  # 2 and 2.0: one cell


@dataclass(frozen=True, kw_only=True)
class ResourcesDeclaration(Declared):
    """``[resources]``: what one cell may use."""

    cpus: Annotated[int, Range(1)] = spec(default=1)
    timeout_s: float = spec(default=3600)
    pin_cpus: bool = spec(default=True)

    def check(self, raw: Mapping[str, Any], fail: Callable[[str], None]) -> None:
        if self.timeout_s <= 0:
            fail("timeout_s must be > 0")


@dataclass(frozen=True, kw_only=True)
class RayDeclaration(Declared):
    """``[ray]``: what a Ray cluster is told."""

    runtime_env: dict[str, Any] = spec(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class PlanDeclaration(Declared):
    """A PLAN.toml document (see docs/matrix.md)."""

    name: str | None = spec()
    description: str = spec(default="")
    task: str | None = spec()
    axes: AxesDeclaration = spec(default_factory=AxesDeclaration)
    together: Names = spec(default=())
    run: RunDeclaration = spec(default_factory=RunDeclaration)
    resources: ResourcesDeclaration = spec(default_factory=ResourcesDeclaration)
    runner_options: dict[str, dict[str, Any]] = spec(default_factory=dict)
    ray: RayDeclaration = spec(default_factory=RayDeclaration)
    exclude: tuple[ExcludeDeclaration, ...] = spec(default=())

    def axis_values(self) -> dict[str, tuple[str, ...]]:
        """Each axis's values: as declared (``task`` may stand for axes.task), else its default."""
        given = {a: getattr(self.axes, a) for a in AXES if getattr(self.axes, a) is not None}
        if self.task is not None:
            given["task"] = self.task
        return {a: _names(given[a]) if a in given else default for a, default in AXES.items()}

    def check(self, raw: Mapping[str, Any], fail: Callable[[str], None]) -> None:
        for rule in (_header_problem, _axes_problem, _run_problem, _options_problem, _exclude_problem):
            problem = rule(self)
            if problem is not None:
                fail(problem)


def _header_problem(plan: PlanDeclaration) -> str | None:
    if plan.name is not None and not plan.name.strip():
        return "'name' must be a non-empty string"
    if plan.task is not None and plan.axes.task is not None:
        return "give the task either as 'task' or as axes.task, not both"
    if plan.task == "":
        return "'task' must be a task name or package.module:factory"
    return None


def _axes_problem(plan: PlanDeclaration) -> str | None:
    from benchbox.runners import RUNNERS

    for axis in AXES:
        value = getattr(plan.axes, axis)
        problem = _names_problem(value, f"axes.{axis}") if value is not None else None
        if problem is not None:
            return problem
    axes = plan.axis_values()
    for r in axes["runner"]:
        if r not in RUNNERS:
            return (f"axes.runner: unknown runner '{r}' ({did_you_mean(r, RUNNERS)}"
                    f"runners: {', '.join(RUNNERS)})")
    for d in axes["dtype"]:
        if d not in DTYPES:
            return f"axes.dtype: unknown dtype '{d}' ({', '.join(DTYPES)})"
    for d in axes["device"]:
        if d not in DEVICES:
            return (f"axes.device: '{d}' is not cpu or cuda (a cuda cell gets one whole GPU; "
                    "the executor picks which)")
    problem = _names_problem(plan.together, "together", allow_empty=True)
    odd = [t for t in _names(plan.together) if t not in TOGETHER_AXES]
    if problem is None and odd:
        problem = f"together: '{odd[0]}' cannot share a run (only {', '.join(TOGETHER_AXES)})"
    return problem


def _run_problem(plan: PlanDeclaration) -> str | None:
    run = plan.run
    if run.cases is not None and plan.axes.case is not None:
        return "give cases either as run.cases or as axes.case, not both"
    if run.baseline is not None:
        if "runner" not in _names(plan.together):
            return "run.baseline needs together = [\"runner\"] (runners compared in one run)"
        if run.baseline not in plan.axis_values()["runner"]:
            return f"run.baseline '{run.baseline}' is not in axes.runner"
    return None


def _options_problem(plan: PlanDeclaration) -> str | None:
    runners = plan.axis_values()["runner"]
    for r, opts in plan.runner_options.items():
        at = f"runner_options.{r}"
        if r not in runners:
            return f"{at}: '{r}' is not in axes.runner ({', '.join(runners)})"
        for k, v in opts.items():
            kind = _STRUCTURED_OPTIONS.get((r, k))
            if kind is list:
                problem = _names_problem(v, f"{at}.{k}", allow_empty=True) if isinstance(v, list) \
                    else f"{at}.{k}: must be a list of non-empty strings"
            elif kind is dict:
                problem = _scalars_problem(v, f"{at}.{k}") if isinstance(v, dict) \
                    else f"{at}: '{k}' must be a table"
            else:
                problem = _scalars_problem({k: v}, at)
            if problem is not None:
                return problem
    return None


def _exclude_problem(plan: PlanDeclaration) -> str | None:
    together, axes = _names(plan.together), plan.axis_values()
    for i, e in enumerate(plan.exclude):
        for axis in AXES:
            value = getattr(e, axis)
            if value is None:
                continue
            if axis in together:
                return f"exclude[{i}]: axis '{axis}' is measured together, so it cannot be excluded per value"
            problem = _names_problem(value, f"exclude[{i}].{axis}")
            unknown = [x for x in _names(value) if x not in axes[axis]]
            if problem is None and unknown:
                problem = f"exclude[{i}].{axis}: '{unknown[0]}' is not in axes.{axis}"
            if problem is not None:
                return problem
    return None


def _coords(axes: dict[str, tuple[str, ...]], together: tuple[str, ...], fixed_cases: tuple[str, ...],
            where: str) -> dict[str, list[tuple[str, ...]]]:
    """Each axis's coordinates; an axis measured together is one coordinate holding all its values."""
    coords: dict[str, list[tuple[str, ...]]] = {}
    for axis in AXES:
        values = axes[axis]
        if axis == "case" and not values:
            coords[axis] = [fixed_cases]
        elif axis in together:
            coords[axis] = [values]
        else:
            coords[axis] = [(v,) for v in values]
    n = 1
    for v in coords.values():
        n *= len(v)
    if n > MAX_CELLS:
        raise _fail(where, f"the plan expands to {n} cells, over the limit of {MAX_CELLS}")
    return coords


def parse_plan(data: dict[str, Any], where: str = "plan", base: Path = Path("."), name: str = "plan",
               sha256: str = "", path: Path = Path("plan.toml")) -> Plan:
    """Validate a parsed plan and expand it into cells (see docs/matrix.md for the format)."""
    plan: PlanDeclaration = decode(PlanDeclaration, data, where, "plan")
    axes = plan.axis_values()
    contracts = _contracts(axes["contract"], base, f"{where}: axes.contract")
    together, run, res = _names(plan.together), plan.run, plan.resources
    coords = _coords(axes, together, _names(run.cases), where)
    excludes = [{a: _names(getattr(e, a)) for a in AXES if getattr(e, a) is not None} for e in plan.exclude]
    used = [0] * len(excludes)
    cells: list[Cell] = []
    for combo in itertools.product(*coords.values()):
        point = dict(zip(AXES, combo))
        hits = [i for i, e in enumerate(excludes) if all(point[a][0] in v for a, v in e.items())]
        for i in hits:
            used[i] += 1
        if hits:
            continue
        cells.append(Cell(
            task=point["task"][0], size=point["size"][0], dtype=point["dtype"][0],
            device=point["device"][0], runners=point["runner"],
            contracts=tuple(contracts[c] for c in point["contract"]), cases=point["case"],
            sampling=run.sampling(), threads=run.threads if run.threads is not None else res.cpus,
            cpus=res.cpus, pin_cpus=res.pin_cpus, timeout_s=float(res.timeout_s), baseline=run.baseline,
            task_options=dict(run.task_options), gates=dict(run.gates),
            runner_options={r: dict(o) for r, o in plan.runner_options.items() if r in point["runner"]}))
    for i, u in enumerate(used):
        if u == 0:
            raise _fail(where, f"exclude[{i}] matches no cell (a misspelt value?)")
    if not cells:
        raise _fail(where, "every cell is excluded: nothing to run")
    return Plan(name=(plan.name or name).strip(), path=path, sha256=sha256, cells=tuple(cells),
                ray=dict(data["ray"]) if "ray" in data else {}, description=plan.description)
