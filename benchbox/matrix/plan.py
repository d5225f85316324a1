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
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbox.contracts.shape import check_toml_shape
from benchbox.errors import UsageError, did_you_mean

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
_TOP_KEYS = {"name", "description", "task", "axes", "exclude", "together", "run", "runner_options",
             "resources", "ray"}
_RUN_KEYS = {"cases": list, "samples": int, "warmup": int, "target_ci": (int, float),
             "max_samples": int, "max_time": (int, float), "threads": int, "baseline": str,
             "task_options": dict, "gates": dict}
_RESOURCE_KEYS = {"cpus": int, "timeout_s": (int, float), "pin_cpus": bool}
#: runner options that are lists or tables, and the ``benchbox run`` flag each maps to
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


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {list: "a list", dict: "a table", int: "an integer", float: "a number", str: "a string",
             bool: "true or false"}
    return " or ".join(dict.fromkeys(names[k] for k in kinds))


def _is(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool):
        return bool in kinds
    return isinstance(value, kinds)


def _check_keys(table: dict[str, Any], allowed: dict[str, Any] | set[str], where: str) -> None:
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise _fail(where, f"unknown key '{unknown[0]}' (keys: {', '.join(sorted(allowed))})")


def _check_types(table: dict[str, Any], kinds: dict[str, Any], where: str) -> None:
    _check_keys(table, kinds, where)
    for key, kind in kinds.items():
        if key in table and not _is(table[key], kind):
            raise _fail(where, f"'{key}' must be {_kind_name(kind)}, got {table[key]!r:.60}")


def _str_list(value: Any, where: str, allow_empty: bool = False) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(where, "must be a list of non-empty strings")
    if not value and not allow_empty:
        raise _fail(where, "must not be empty")
    if len(set(value)) != len(value):
        dup = next(v for v in value if value.count(v) > 1)
        raise _fail(where, f"'{dup}' is listed twice")
    return tuple(value)


def _scalars(table: dict[str, Any], where: str) -> dict[str, Scalar]:
    for k, v in table.items():
        if not _is(v, (str, int, float, bool)):
            raise _fail(where, f"'{k}' must be a string, number or boolean, got {type(v).__name__}")
    return dict(table)


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


def _header(data: dict[str, Any], where: str, name: str) -> tuple[str, str]:
    plan_name = data.get("name", name)
    if not isinstance(plan_name, str) or not plan_name.strip():
        raise _fail(where, "'name' must be a non-empty string")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise _fail(where, "'description' must be a string")
    return plan_name.strip(), description


def _axes(data: dict[str, Any], where: str) -> dict[str, tuple[str, ...]]:
    from benchbox.runners import RUNNERS

    axes_in = data.get("axes", {})
    if not isinstance(axes_in, dict):
        raise _fail(where, "[axes] must be a table")
    _check_keys(axes_in, AXES, f"{where}: [axes]")
    if "task" in data:
        if "task" in axes_in:
            raise _fail(where, "give the task either as 'task' or as axes.task, not both")
        if not isinstance(data["task"], str) or not data["task"]:
            raise _fail(where, "'task' must be a task name or package.module:factory")
        axes_in = {**axes_in, "task": [data["task"]]}
    axes: dict[str, tuple[str, ...]] = {}
    for axis, default in AXES.items():
        axes[axis] = _str_list(axes_in[axis], f"{where}: axes.{axis}") if axis in axes_in else default
    for r in axes["runner"]:
        if r not in RUNNERS:
            raise _fail(where, f"axes.runner: unknown runner '{r}' ({did_you_mean(r, RUNNERS)}"
                                f"runners: {', '.join(RUNNERS)})")
    for d in axes["dtype"]:
        if d not in DTYPES:
            raise _fail(where, f"axes.dtype: unknown dtype '{d}' ({', '.join(DTYPES)})")
    for d in axes["device"]:
        if d not in DEVICES:
            raise _fail(where, f"axes.device: '{d}' is not cpu or cuda (a cuda cell gets one whole GPU; "
                               "the executor picks which)")
    return axes


def _together(data: dict[str, Any], where: str) -> tuple[str, ...]:
    together = _str_list(data.get("together", []), f"{where}: together", allow_empty=True)
    for t in together:
        if t not in TOGETHER_AXES:
            raise _fail(where, f"together: '{t}' cannot share a run (only {', '.join(TOGETHER_AXES)})")
    return together


def _table(data: dict[str, Any], key: str, where: str, what: str = "a table") -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise _fail(where, f"[{key}] must be {what}")
    return value


def _sampling(run: dict[str, Any], where: str) -> dict[str, Any]:
    sampling: dict[str, Any] = {"samples": run.get("samples", 400), "warmup": run.get("warmup", 5),
                                "target_ci": run.get("target_ci"),
                                "max_samples": run.get("max_samples", 10_000),
                                "max_time": run.get("max_time", 60.0)}
    if sampling["samples"] < 1 or sampling["warmup"] < 0 or sampling["max_samples"] < 1:
        raise _fail(where, "run.samples and run.max_samples must be ≥ 1, run.warmup ≥ 0")
    if sampling["target_ci"] is not None and not 0 < sampling["target_ci"] < 100:
        raise _fail(where, "run.target_ci is a percentage between 0 and 100")
    if sampling["max_time"] <= 0:
        raise _fail(where, "run.max_time must be > 0 seconds")
    return sampling


def _run_section(data: dict[str, Any], where: str, axes: dict[str, tuple[str, ...]],
                 together: tuple[str, ...]) -> dict[str, Any]:
    """[run]: fixed cases, sampling, task options, gates, baseline (threads: see _resources)."""
    run = _table(data, "run", where)
    _check_types(run, _RUN_KEYS, f"{where}: [run]")
    if "cases" in run and axes["case"]:
        raise _fail(where, "give cases either as run.cases or as axes.case, not both")
    gates = run.get("gates", {})
    for g, v in gates.items():
        if not _is(v, (int, float)):
            raise _fail(where, f"run.gates.{g} must be a number")
    baseline = run.get("baseline")
    if baseline is not None:
        if "runner" not in together:
            raise _fail(where, "run.baseline needs together = [\"runner\"] (runners compared in one run)")
        if baseline not in axes["runner"]:
            raise _fail(where, f"run.baseline '{baseline}' is not in axes.runner")
    return {"run": run, "baseline": baseline, "gates": dict(gates), "sampling": _sampling(run, where),
            "fixed_cases": _str_list(run["cases"], f"{where}: run.cases") if "cases" in run else (),
            "task_options": _scalars(run.get("task_options", {}), f"{where}: run.task_options")}


def _resources(data: dict[str, Any], run: dict[str, Any], where: str) -> dict[str, Any]:
    res = _table(data, "resources", where)
    _check_types(res, _RESOURCE_KEYS, f"{where}: [resources]")
    cpus = res.get("cpus", 1)
    timeout_s = float(res.get("timeout_s", 3600))
    if cpus < 1 or timeout_s <= 0:
        raise _fail(where, "resources.cpus must be ≥ 1 and resources.timeout_s > 0")
    threads = run.get("threads", cpus)
    if threads < 1:
        raise _fail(where, "run.threads must be ≥ 1")
    return {"cpus": cpus, "timeout_s": timeout_s, "threads": threads, "pin_cpus": res.get("pin_cpus", True)}


def _runner_options(data: dict[str, Any], where: str, runners: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    ropts_in = _table(data, "runner_options", where, "a table of tables, one per runner")
    runner_options: dict[str, dict[str, Any]] = {}
    for r, opts in ropts_in.items():
        at = f"{where}: runner_options.{r}"
        if r not in runners:
            raise _fail(at, f"'{r}' is not in axes.runner ({', '.join(runners)})")
        if not isinstance(opts, dict):
            raise _fail(at, "must be a table")
        for k, v in opts.items():
            kind = _STRUCTURED_OPTIONS.get((r, k))
            if kind is list:
                _str_list(v, f"{at}.{k}", allow_empty=True)
            elif kind is dict:
                if not isinstance(v, dict):
                    raise _fail(at, f"'{k}' must be a table")
                _scalars(v, f"{at}.{k}")
            elif not _is(v, (str, int, float, bool)):
                raise _fail(at, f"'{k}' must be a string, number or boolean")
        runner_options[r] = dict(opts)
    return runner_options


def _ray(data: dict[str, Any], where: str) -> dict[str, Any]:
    ray = _table(data, "ray", where)
    _check_keys(ray, {"runtime_env"}, f"{where}: [ray]")
    if not isinstance(ray.get("runtime_env", {}), dict):
        raise _fail(where, "ray.runtime_env must be a table")
    return dict(ray)


def _excludes(data: dict[str, Any], where: str, axes: dict[str, tuple[str, ...]],
              together: tuple[str, ...]) -> list[dict[str, Any]]:
    excludes = data.get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(e, dict) and e for e in excludes):
        raise _fail(where, "exclude must be [[exclude]] tables, each naming axis = value(s)")
    for i, e in enumerate(excludes):
        _check_keys(e, AXES, f"{where}: exclude[{i}]")
        for axis, v in e.items():
            if axis in together:
                raise _fail(where, f"exclude[{i}]: axis '{axis}' is measured together, so it cannot "
                                   "be excluded per value")
            vals = _str_list(v, f"{where}: exclude[{i}].{axis}")
            unknown = [x for x in vals if x not in axes[axis]]
            if unknown:
                raise _fail(where, f"exclude[{i}].{axis}: '{unknown[0]}' is not in axes.{axis}")
    return excludes


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
    _check_keys(data, _TOP_KEYS, where)
    plan_name, description = _header(data, where, name)
    axes = _axes(data, where)
    contracts = _contracts(axes["contract"], base, f"{where}: axes.contract")
    together = _together(data, where)
    run = _run_section(data, where, axes, together)
    res = _resources(data, run["run"], where)
    runner_options = _runner_options(data, where, axes["runner"])
    ray = _ray(data, where)
    excludes = _excludes(data, where, axes, together)
    coords = _coords(axes, together, run["fixed_cases"], where)
    used = [0] * len(excludes)
    cells: list[Cell] = []
    for combo in itertools.product(*coords.values()):
        point = dict(zip(AXES, combo))
        hits = [i for i, e in enumerate(excludes)
                if all(point[a][0] in _str_list(v, "") for a, v in e.items())]
        for i in hits:
            used[i] += 1
        if hits:
            continue
        cells.append(Cell(
            task=point["task"][0], size=point["size"][0], dtype=point["dtype"][0],
            device=point["device"][0], runners=point["runner"],
            contracts=tuple(contracts[c] for c in point["contract"]), cases=point["case"],
            sampling=run["sampling"], threads=res["threads"], cpus=res["cpus"], pin_cpus=res["pin_cpus"],
            timeout_s=res["timeout_s"], baseline=run["baseline"], task_options=run["task_options"],
            runner_options={r: runner_options[r] for r in point["runner"] if r in runner_options},
            gates=dict(run["gates"])))
    for i, u in enumerate(used):
        if u == 0:
            raise _fail(where, f"exclude[{i}] matches no cell (a misspelt value?)")
    if not cells:
        raise _fail(where, "every cell is excluded: nothing to run")
    return Plan(name=plan_name, path=path, sha256=sha256, cells=tuple(cells), ray=ray,
                description=description)
