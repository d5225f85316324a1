"""Stages and timing contracts: declared data with a content hash."""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from benchbox.contracts.shape import check_toml_shape
from benchbox.errors import UsageError, did_you_mean, first_line
from benchbox.typed import Declared, Range, decode, required, spec

#: The stages of one task call, in pipeline order.
STAGES: tuple[str, ...] = ("parse", "preprocess", "h2d", "compute", "d2h", "reduce", "answer", "serialize")
#: Stages owned by the runner; only these may be timed with the device clock.
DEVICE_STAGES: tuple[str, ...] = ("h2d", "compute", "d2h")
#: The wait of a request from its scheduled arrival to the start of its call (open-loop arrivals).
QUEUE = "queue"
#: Every stage a region may hold or a sample may record: ``queue``, then the pipeline.
TIMELINE: tuple[str, ...] = (QUEUE, *STAGES)
ArrivalKind = Literal["back_to_back", "gap", "poisson"]
IdleMode = Literal["sleep", "busy"]
ClockName = Literal["host", "device"]
SyncRule = Literal["none", "stream", "device"]
EventFloor = Literal["keep", "subtract"]
State = Literal["warm", "first_call"]
ARRIVALS: tuple[str, ...] = get_args(ArrivalKind)
IDLE_MODES: tuple[str, ...] = get_args(IdleMode)
#: how waits are spent where neither the contract nor the run says
DEFAULT_IDLE = "sleep"
CLOCKS: tuple[str, ...] = get_args(ClockName)
SYNC_RULES: tuple[str, ...] = get_args(SyncRule)
EVENT_FLOORS: tuple[str, ...] = get_args(EventFloor)
STATES: tuple[str, ...] = get_args(State)


@dataclass(frozen=True)
class Arrival:
    """How calls arrive: back to back, after a fixed idle gap, or open-loop Poisson at a rate.

    ``gap_ms`` (gap) and ``rate_per_s`` (poisson; 0 = given at run time) and ``seed`` (the
    poisson schedule) matter only to their kind; ``idle`` says how the harness spends a wait
    (``sleep`` or ``busy``-waiting on the clock).
    """

    kind: str = "back_to_back"
    gap_ms: float = 0.0
    rate_per_s: float = 0.0
    idle: str = DEFAULT_IDLE
    seed: int = 0
    #: the fields given at run time (``--gap``, ``--rate``, ``--idle``) rather than declared
    set_at_run: tuple[str, ...] = ()

    @property
    def open_loop(self) -> bool:
        """Arrivals scheduled independently of completions (a request can wait: ``queue``)."""
        return self.kind == "poisson"

    @property
    def paced(self) -> bool:
        return self.kind != "back_to_back"

    def canonical(self) -> dict[str, Any]:
        """The fields that matter to this kind (they enter the contract's hash)."""
        if self.kind == "gap":
            return {"kind": "gap", "gap_ms": self.gap_ms, "idle": self.idle}
        if self.kind == "poisson":
            return {"kind": "poisson", "rate_per_s": self.rate_per_s, "idle": self.idle, "seed": self.seed}
        return {"kind": self.kind}

    def describe(self) -> dict[str, Any]:
        """The canonical fields, and which of them were given at run time."""
        d = self.canonical()
        if self.set_at_run:
            d["set_at_run"] = list(self.set_at_run)
        return d

    def label(self) -> str:
        """One short phrase: ``back to back``, ``gap 1 ms (sleep)``, ``poisson 50/s (sleep)``."""
        if self.kind == "gap":
            return f"gap {self.gap_ms:g} ms ({self.idle})"
        if self.kind == "poisson":
            rate = f"{self.rate_per_s:g}/s" if self.rate_per_s > 0 else "rate given at run time"
            return f"poisson {rate} ({self.idle}, seed {self.seed})"
        return "back to back"


@dataclass(frozen=True)
class Policy:
    """State and input policy, and everything else that changes a number's meaning."""

    state: str = "warm"
    fresh_request: bool = True
    cuda_graphs: bool = True
    sync_at_close: str = "none"
    hold_stream: bool = False
    #: device clock: "subtract" removes the median empty event pair (measured the same way)
    event_floor: str = "keep"
    #: the region of one request re-run back to back with the device kept busy; each sample is
    #: one batch of calls between consecutive clock reads, divided by the batch size
    saturated: bool = False
    #: how calls arrive (back to back by default)
    arrival: Arrival = field(default_factory=Arrival)


#: Policy fields that enter a contract's canonical form (and hash) only when not at their default.
_LATER_POLICY_FIELDS = ("saturated", "arrival")


@dataclass(frozen=True)
class Contract:
    """A timing contract: which contiguous stages are timed, and with which clock."""

    name: str
    version: int
    description: str
    stages: tuple[str, ...]
    clock: str
    policy: Policy = field(default_factory=Policy)
    source: str = "builtin"

    @property
    def first(self) -> str:
        return self.stages[0]

    @property
    def last(self) -> str:
        return self.stages[-1]

    @property
    def includes_queue(self) -> bool:
        """The region opens at the scheduled arrival (``queue`` is its first stage)."""
        return self.stages[0] == QUEUE

    @property
    def first_index(self) -> int:
        """Index in STAGES of the region's first pipeline stage (``parse`` when it opens at ``queue``)."""
        return STAGES.index(self.stages[1] if self.includes_queue else self.first)

    @property
    def last_index(self) -> int:
        return STAGES.index(self.last)

    def canonical(self) -> dict[str, Any]:
        """The fields that define the meaning of a number (description and source excluded)."""
        policy = asdict(self.policy)
        policy["arrival"] = self.policy.arrival.canonical()
        # fields added after version 1 of the format enter the hash only when set, so the
        # contracts declared before them keep their hashes (and their receipts stay comparable)
        defaults = asdict(Policy())
        defaults["arrival"] = Arrival().canonical()
        for key in _LATER_POLICY_FIELDS:
            if policy[key] == defaults[key]:
                del policy[key]
        return {
            "name": self.name,
            "version": self.version,
            "stages": list(self.stages),
            "clock": self.clock,
            "policy": policy,
        }

    @property
    def hash(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """The full declaration as embedded in a receipt."""
        d = self.canonical()
        d.update(description=self.description, first=self.first, last=self.last,
                 hash=self.hash, source=self.source, arrival=self.policy.arrival.describe())
        return d

    @property
    def arrival(self) -> Arrival:
        return self.policy.arrival

    def with_arrival(self, *, gap_ms: float | None = None, rate_per_s: float | None = None,
                     idle: str | None = None) -> Contract:
        """This contract under an arrival given at run time (it becomes part of the hash).

        A gap of 0 is back to back. UsageError on values that cannot be run.
        """
        a = self.policy.arrival
        where = f"contract {self.name}"
        if gap_ms is not None and rate_per_s is not None:
            raise UsageError(f"{where}: give a gap or a rate, not both")
        if idle is not None and idle not in IDLE_MODES:
            raise UsageError(f"{where}: idle must be one of {', '.join(IDLE_MODES)}, got {_short(idle)}")
        given = tuple(k for k, v in (("gap_ms", gap_ms), ("rate_per_s", rate_per_s), ("idle", idle))
                      if v is not None)
        if gap_ms is not None:
            _check_number(gap_ms, "gap", where, zero_ok=True)
            a = Arrival() if gap_ms == 0 else Arrival(kind="gap", gap_ms=float(gap_ms), idle=idle or a.idle)
        elif rate_per_s is not None:
            _check_number(rate_per_s, "rate", where, zero_ok=False)
            a = Arrival(kind="poisson", rate_per_s=float(rate_per_s), idle=idle or a.idle, seed=a.seed)
        elif idle is not None:
            if not a.paced:
                raise UsageError(f"{where}: an idle mode needs paced arrivals (a gap or a rate)")
            a = replace(a, idle=idle)
        if given and a.paced:
            a = replace(a, set_at_run=tuple(dict.fromkeys(a.set_at_run + given)))
        return replace(self, policy=replace(self.policy, arrival=a))


#: Longest contract name, and largest contract file read.
MAX_NAME = 128
MAX_CONTRACT_BYTES = 1024 * 1024


def _short(value: Any) -> str:
    """A value for an error message: its repr, cut to one short line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_number(value: Any, what: str, where: str, zero_ok: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (value == 0 and not zero_ok):
        raise UsageError(f"{where}: {what} must be a {'non-negative' if zero_ok else 'positive'} "
                         f"finite number, got {_short(value)}")


# -- the declarations, as typed records (decoded by benchbox.typed) -------------------------

ArrivalField = Literal["kind", "gap_ms", "rate_per_s", "idle", "seed", "set_at_run"]
#: the fields each arrival kind takes (beyond ``kind`` and ``set_at_run``)
_ARRIVAL_FIELDS: dict[str, set[str]] = {"back_to_back": set(), "gap": {"gap_ms", "idle"},
                                         "poisson": {"rate_per_s", "idle", "seed"}}


@dataclass(frozen=True, kw_only=True)
class ArrivalDeclaration(Declared):
    """A ``[policy.arrival]`` table, or the ``arrival`` a receipt's contract carries."""

    kind: ArrivalKind = spec(default="back_to_back")
    gap_ms: Annotated[float, Range(0)] = spec(default=0.0)
    rate_per_s: Annotated[float, Range(0)] = spec(default=0.0, description="0: given at run time")
    idle: IdleMode = spec(default=DEFAULT_IDLE)
    seed: Annotated[int, Range(0, 2**63 - 1)] = spec(default=0)
    set_at_run: tuple[ArrivalField, ...] = spec(default=())

    def check(self, raw: Mapping[str, Any], fail: Callable[[str], None]) -> None:
        stray = sorted(k for k in set(raw) - {"kind", "set_at_run"} - _ARRIVAL_FIELDS[self.kind])
        if stray:
            fail(f"{stray[0]} does not apply to kind = {self.kind!r}")
        if self.kind == "gap" and self.gap_ms == 0:
            fail(f"gap_ms must be a positive finite number, got {_short(self.gap_ms)}")

    def arrival(self) -> Arrival:
        return Arrival(kind=self.kind, gap_ms=float(self.gap_ms), rate_per_s=float(self.rate_per_s),
                       idle=self.idle, seed=self.seed, set_at_run=tuple(self.set_at_run))


@dataclass(frozen=True, kw_only=True)
class PolicyDeclaration(Declared):
    """The ``[policy]`` table; every field at :class:`Policy`'s default when left out."""

    state: State = spec(default="warm")
    fresh_request: bool = spec(default=True)
    cuda_graphs: bool = spec(default=True)
    sync_at_close: SyncRule = spec(default="none")
    hold_stream: bool = spec(default=False)
    event_floor: EventFloor = spec(default="keep")
    saturated: bool = spec(default=False)
    arrival: ArrivalDeclaration = spec(default_factory=ArrivalDeclaration)

    def policy(self) -> Policy:
        return Policy(state=self.state, fresh_request=self.fresh_request, cuda_graphs=self.cuda_graphs,
                      sync_at_close=self.sync_at_close, hold_stream=self.hold_stream,
                      event_floor=self.event_floor, saturated=self.saturated, arrival=self.arrival.arrival())


@dataclass(frozen=True, kw_only=True)
class ContractDeclaration(Declared):
    """A contract as declared in TOML, or as embedded in a receipt (``first``, ``last``, ``hash``,
    ``source`` and the top-level ``arrival`` then come along)."""

    name: str = required()
    version: Annotated[int, Range(1)] = required()
    description: str = spec(default="")
    stages: tuple[str, ...] = required()
    clock: ClockName = required()
    policy: PolicyDeclaration = spec(default_factory=PolicyDeclaration)
    first: str | None = spec()
    last: str | None = spec()
    hash: Any = spec()
    source: Any = spec()
    arrival: ArrivalDeclaration | None = spec()

    def check(self, raw: Mapping[str, Any], fail: Callable[[str], None]) -> None:
        name = self.name
        if not name or len(name) > MAX_NAME or not name.replace("_", "").replace("-", "").isalnum():
            fail(f"name must be 1-{MAX_NAME} letters, digits, '_' or '-', got {name[:60]!r}")
        problem = _region_problem(list(self.stages), self.clock)
        if problem is None:
            for key, value in (("first", self.stages[0]), ("last", self.stages[-1])):
                if key in raw and getattr(self, key) != value:
                    problem = f"'{key}' is {_short(getattr(self, key))} but the stages say {value!r}"
        if problem is None and self.arrival is not None \
                and self.arrival.arrival().canonical() != self.policy.arrival.arrival().canonical():
            problem = "'arrival' does not match policy.arrival"
        problem = problem or _policy_problem(self.policy, self.clock, self.stages)
        if problem is not None:
            fail(problem)

    def contract(self, source: str) -> Contract:
        policy = self.policy.policy()
        if self.arrival is not None:  # as written in a receipt: what was set at run time too
            policy = replace(policy, arrival=self.arrival.arrival())
        return Contract(name=self.name, version=self.version, description=self.description,
                        stages=tuple(self.stages), clock=self.clock, policy=policy, source=source)


def _region_problem(stages: list[str], clock: str) -> str | None:
    """What is wrong with a region's stages under its clock (None: nothing)."""
    if not stages:
        return "'stages' is empty; the region needs at least one stage"
    for s in stages:
        if s not in TIMELINE:
            return f"unknown stage {_short(s)} (stages are {', '.join(TIMELINE)})"
    if len(set(stages)) != len(stages):
        return f"stage list repeats a stage: {', '.join(stages)}"
    idx = [TIMELINE.index(s) for s in stages]
    if idx != sorted(idx):
        return f"stages are out of pipeline order: {', '.join(stages)}"
    if idx != list(range(idx[0], idx[-1] + 1)):
        missing = [TIMELINE[i] for i in range(idx[0], idx[-1] + 1) if i not in idx]
        return f"stages are not contiguous: {', '.join(stages)} skips {', '.join(missing)}"
    host_only = [s for s in stages if s not in DEVICE_STAGES]
    if clock == "device" and host_only:
        return (f"the device clock cannot time host stage(s) {', '.join(host_only)}; "
                f"device-clock regions must lie inside {DEVICE_STAGES[0]}..{DEVICE_STAGES[-1]}")
    if stages == [QUEUE]:
        return "a region cannot be 'queue' alone; it opens at queue and runs on through parse at least"
    return None


def _policy_problem(policy: PolicyDeclaration, clock: str, stages: tuple[str, ...]) -> str | None:
    """What is wrong with a policy for its region and clock (None: nothing)."""
    paced = policy.arrival.kind != "back_to_back"
    if paced and (policy.saturated or policy.state != "warm"):
        return ("paced arrivals need warm calls, one request per call "
                "(not policy.saturated, and state = \"warm\")")
    if policy.event_floor == "subtract" and clock != "device":
        return "policy.event_floor applies only to the device clock"
    if policy.hold_stream and clock != "device":
        return "policy.hold_stream applies only to the device clock"
    if not policy.saturated:
        return None
    if clock != "device" or list(stages) != ["compute"]:
        return ("policy.saturated needs clock = \"device\" and stages = [\"compute\"] "
                "(only compute can be re-run back to back)")
    if policy.fresh_request:
        return "policy.saturated re-runs one request's inputs; declare policy.fresh_request = false"
    if policy.event_floor != "keep":
        return ("policy.saturated keeps the event floor (one pair per batch, divided by the batch size); "
                "declare event_floor = \"keep\"")
    if policy.hold_stream or policy.sync_at_close != "none" or policy.state != "warm":
        return ("policy.saturated keeps the device busy: it needs hold_stream = false, "
                "sync_at_close = \"none\" and state = \"warm\"")
    return None


def contract_from_dict(data: Any, where: str = "contract", source: str = "builtin") -> Contract:
    """Validate a declaration and build a Contract; raise UsageError naming the problem."""
    declared: ContractDeclaration = decode(ContractDeclaration, data, where, "contract")
    return declared.contract(source)


def parse_contract_toml(text: str, where: str) -> Contract:
    """Parse a contract declaration written in TOML; UsageError with one line on any problem."""
    if len(text) > MAX_CONTRACT_BYTES:
        raise UsageError(f"{where}: contract is over the {MAX_CONTRACT_BYTES}-byte limit")
    check_toml_shape(text, where)
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise UsageError(f"{where}: not valid TOML: nested too deeply") from None
    except ValueError as e:  # TOMLDecodeError, and integers too long to convert
        raise UsageError(f"{where}: not valid TOML: {first_line(e, 200)}") from None
    return contract_from_dict(data, where=where, source=where)


_BUILTIN_DIR = Path(__file__).parent / "builtin"


def builtin_names() -> list[str]:
    return sorted(p.stem for p in _BUILTIN_DIR.glob("*.toml"))


def builtin_contracts() -> list[Contract]:
    return [load_contract(n) for n in builtin_names()]


def load_contract(name_or_path: str) -> Contract:
    """A built-in contract by name, or a user's TOML file by path."""
    p = _BUILTIN_DIR / f"{name_or_path}.toml"
    if name_or_path in builtin_names():
        c = parse_contract_toml(p.read_text(), where=name_or_path)
        return Contract(**{**c.__dict__, "source": "builtin"})
    path = Path(name_or_path)
    try:
        exists = path.exists()
    except (OSError, ValueError):  # a name too long for a path, or one with a NUL byte
        exists = False
    if path.suffix == ".toml" or exists:
        try:
            if not path.is_file():
                raise UsageError(f"contract file not found: {_short(name_or_path)}")
            if path.stat().st_size > MAX_CONTRACT_BYTES:
                raise UsageError(f"{path}: contract is over the {MAX_CONTRACT_BYTES}-byte limit")
            text = path.read_text(encoding="utf-8")
        except (OSError, ValueError) as e:  # ValueError: undecodable bytes, or a NUL in the path
            raise UsageError(f"cannot read contract {_short(name_or_path)}: "
                             f"{getattr(e, 'strerror', None) or e}") from None
        return parse_contract_toml(text, where=str(path))
    raise UsageError(
        f"unknown contract {_short(name_or_path)} ({did_you_mean(name_or_path, builtin_names())}"
        f"built-in: {', '.join(builtin_names())}; "
        "or give a path to a .toml file)")


