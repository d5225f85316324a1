"""Stages and timing contracts: declared data with a content hash."""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from benchbox.errors import UsageError, did_you_mean, first_line

#: The stages of one task call, in pipeline order.
STAGES: tuple[str, ...] = ("parse", "preprocess", "h2d", "compute", "d2h", "reduce", "answer", "serialize")
#: Stages owned by the runner; only these may be timed with the device clock.
DEVICE_STAGES: tuple[str, ...] = ("h2d", "compute", "d2h")
#: The wait of a request from its scheduled arrival to the start of its call (open-loop arrivals).
QUEUE = "queue"
#: Every stage a region may hold or a sample may record: ``queue``, then the pipeline.
TIMELINE: tuple[str, ...] = (QUEUE, *STAGES)
ARRIVALS = ("back_to_back", "gap", "poisson")
IDLE_MODES = ("sleep", "busy")
#: how waits are spent where neither the contract nor the run says
DEFAULT_IDLE = "sleep"
CLOCKS = ("host", "device")
SYNC_RULES = ("none", "stream", "device")
EVENT_FLOORS = ("keep", "subtract")
STATES = ("warm", "first_call")


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


def _require(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise UsageError(f"{where}: missing field '{key}'")
    value = data[key]
    if isinstance(value, bool) and kind is int:
        raise UsageError(f"{where}: field '{key}' must be an integer, not a boolean")
    if not isinstance(value, kind):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise UsageError(f"{where}: field '{key}' must be {want}, got {type(value).__name__}")
    return value


def _check_number(value: Any, what: str, where: str, zero_ok: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (value == 0 and not zero_ok):
        raise UsageError(f"{where}: {what} must be a {'non-negative' if zero_ok else 'positive'} "
                         f"finite number, got {_short(value)}")


def arrival_from_dict(data: Any, where: str) -> Arrival:
    """Validate a ``[policy.arrival]`` table; UsageError naming the problem."""
    if not isinstance(data, dict):
        raise UsageError(f"{where}: policy.arrival must be a table")
    known = {"kind", "gap_ms", "rate_per_s", "idle", "seed", "set_at_run"}
    extra = sorted(str(k) for k in set(data) - known)
    if extra:
        raise UsageError(f"{where}: unknown policy.arrival field {_short(extra[0])}")
    kind = data.get("kind", "back_to_back")
    if kind not in ARRIVALS:
        raise UsageError(f"{where}: policy.arrival.kind must be one of {', '.join(ARRIVALS)}, "
                         f"got {_short(kind)}")
    allowed = {"back_to_back": set(), "gap": {"gap_ms", "idle"}, "poisson": {"rate_per_s", "idle", "seed"}}
    stray = sorted(k for k in set(data) - {"kind", "set_at_run"} - allowed[kind])
    if stray:
        raise UsageError(f"{where}: policy.arrival.{stray[0]} does not apply to kind = {kind!r}")
    idle = data.get("idle", DEFAULT_IDLE)
    if idle not in IDLE_MODES:
        raise UsageError(f"{where}: policy.arrival.idle must be one of {', '.join(IDLE_MODES)}, "
                         f"got {_short(idle)}")
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise UsageError(f"{where}: policy.arrival.seed must be a non-negative integer, got {_short(seed)}")
    gap, rate = data.get("gap_ms", 0.0), data.get("rate_per_s", 0.0)
    _check_number(gap, "policy.arrival.gap_ms", where, zero_ok=False if kind == "gap" else True)
    _check_number(rate, "policy.arrival.rate_per_s (0: given at run time)", where, zero_ok=True)
    set_at_run = data.get("set_at_run", [])
    if not isinstance(set_at_run, (list, tuple)) or not all(k in known for k in set_at_run):
        raise UsageError(f"{where}: policy.arrival.set_at_run must list arrival fields")
    return Arrival(kind=kind, gap_ms=float(gap), rate_per_s=float(rate), idle=idle, seed=seed,
                   set_at_run=tuple(set_at_run))


def contract_from_dict(data: Any, where: str = "contract", source: str = "builtin") -> Contract:
    """Validate a declaration and build a Contract; raise UsageError naming the problem."""
    if not isinstance(data, dict):
        raise UsageError(f"{where}: a contract must be a table, got {type(data).__name__}")
    known = {"name", "version", "description", "stages", "clock", "policy",
             "first", "last", "hash", "source", "arrival"}
    unknown = sorted(str(k) for k in set(data) - known)
    if unknown:
        raise UsageError(f"{where}: unknown field {_short(unknown[0])}")
    name = _require(data, "name", str, where)
    if not name or len(name) > MAX_NAME or not name.replace("_", "").replace("-", "").isalnum():
        raise UsageError(f"{where}: name must be 1-{MAX_NAME} letters, digits, '_' or '-', "
                         f"got {name[:60]!r}")
    version = _require(data, "version", int, where)
    if version < 1:
        raise UsageError(f"{where}: version must be ≥ 1, got {version}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise UsageError(f"{where}: field 'description' must be str")
    stages = _require(data, "stages", list, where)
    if not stages:
        raise UsageError(f"{where}: 'stages' is empty; the region needs at least one stage")
    for s in stages:
        if not isinstance(s, str) or s not in TIMELINE:
            raise UsageError(f"{where}: unknown stage {_short(s)} (stages are {', '.join(TIMELINE)})")
    if len(set(stages)) != len(stages):
        raise UsageError(f"{where}: stage list repeats a stage: {', '.join(stages)}")
    idx = [TIMELINE.index(s) for s in stages]
    if idx != sorted(idx):
        raise UsageError(f"{where}: stages are out of pipeline order: {', '.join(stages)}")
    if idx != list(range(idx[0], idx[-1] + 1)):
        missing = [TIMELINE[i] for i in range(idx[0], idx[-1] + 1) if i not in idx]
        raise UsageError(
            f"{where}: stages are not contiguous: {', '.join(stages)} skips {', '.join(missing)}")
    for key, value in (("first", stages[0]), ("last", stages[-1])):
        if key in data and data[key] != value:
            raise UsageError(f"{where}: '{key}' is {_short(data[key])} but the stages say {value!r}")
    clock = _require(data, "clock", str, where)
    if clock not in CLOCKS:
        raise UsageError(f"{where}: clock must be one of {', '.join(CLOCKS)}, got {_short(clock)}")
    if clock == "device":
        host_only = [s for s in stages if s not in DEVICE_STAGES]
        if host_only:
            raise UsageError(
                f"{where}: the device clock cannot time host stage(s) {', '.join(host_only)}; "
                f"device-clock regions must lie inside {DEVICE_STAGES[0]}..{DEVICE_STAGES[-1]}")
    if stages == [QUEUE]:
        raise UsageError(f"{where}: a region cannot be 'queue' alone; it opens at queue and runs on "
                         "through parse at least")
    policy = _policy_from_dict(data, clock, stages, where)
    return Contract(name=name, version=version, description=description,
                    stages=tuple(stages), clock=clock, policy=policy, source=source)


def _policy_from_dict(data: dict[str, Any], clock: str, stages: list[str], where: str) -> Policy:
    """The policy table (and a receipt's top-level ``arrival``), checked against the region."""
    pol = data.get("policy", {})
    if not isinstance(pol, dict):
        raise UsageError(f"{where}: 'policy' must be a table")
    defaults = Policy()
    kw: dict[str, Any] = {}
    if "arrival" in pol:
        kw["arrival"] = arrival_from_dict(pol["arrival"], where)
    for key, default in asdict(defaults).items():
        if key in pol and key != "arrival":
            value = pol[key]
            if type(value) is not type(default):
                raise UsageError(
                    f"{where}: policy.{key} must be {type(default).__name__}, got {type(value).__name__}")
            kw[key] = value
    extra = sorted(str(k) for k in set(pol) - set(asdict(defaults)))
    if extra:
        raise UsageError(f"{where}: unknown policy field {_short(extra[0])}")
    policy = Policy(**kw)
    if "arrival" in data:  # as written in a receipt: the same arrival, and what was set at run time
        top = arrival_from_dict(data["arrival"], where)
        if top.canonical() != policy.arrival.canonical():
            raise UsageError(f"{where}: 'arrival' does not match policy.arrival")
        policy = replace(policy, arrival=top)
    if policy.arrival.paced and (policy.saturated or policy.state != "warm"):
        raise UsageError(f"{where}: paced arrivals need warm calls, one request per call "
                         "(not policy.saturated, and state = \"warm\")")
    if policy.state not in STATES:
        raise UsageError(f"{where}: policy.state must be one of {', '.join(STATES)}")
    if policy.sync_at_close not in SYNC_RULES:
        raise UsageError(f"{where}: policy.sync_at_close must be one of {', '.join(SYNC_RULES)}")
    if policy.event_floor not in EVENT_FLOORS:
        raise UsageError(f"{where}: policy.event_floor must be one of {', '.join(EVENT_FLOORS)}")
    if policy.event_floor == "subtract" and clock != "device":
        raise UsageError(f"{where}: policy.event_floor applies only to the device clock")
    if policy.hold_stream and clock != "device":
        raise UsageError(f"{where}: policy.hold_stream applies only to the device clock")
    if policy.saturated:
        if clock != "device" or list(stages) != ["compute"]:
            raise UsageError(f"{where}: policy.saturated needs clock = \"device\" and stages = "
                             "[\"compute\"] (only compute can be re-run back to back)")
        if policy.fresh_request:
            raise UsageError(f"{where}: policy.saturated re-runs one request's inputs; declare "
                             "policy.fresh_request = false")
        if policy.event_floor != "keep":
            raise UsageError(f"{where}: policy.saturated keeps the event floor (one pair per batch, "
                             "divided by the batch size); declare event_floor = \"keep\"")
        if policy.hold_stream or policy.sync_at_close != "none" or policy.state != "warm":
            raise UsageError(f"{where}: policy.saturated keeps the device busy: it needs "
                             "hold_stream = false, sync_at_close = \"none\" and state = \"warm\"")
    return policy

#: Shape limits a TOML document must keep before it is parsed (``tomllib`` spends time and
#: memory quadratic in a dotted key's parts, and recurses on nesting): arrays and inline
#: tables nested at most this deep, a dotted key of at most this many parts, at most this
#: many keys (``key = value`` pairs and ``[table]`` or ``[[array of tables]]`` headers, whose
#: dotted parts are bounded as a key's) and this many array elements.
MAX_TOML_NESTING = 16
MAX_TOML_KEY_PARTS = 16
MAX_TOML_KEYS = 1_000
MAX_TOML_VALUES = 10_000

_TOML_TOKEN = re.compile(r"""\"\"\"|'''|["'#\[\]{}=,.\n]""")
_TOML_STRING_END = {'"': re.compile(r'(?:[^"\\\n]|\\.)*"'), "'": re.compile(r"[^'\n]*'"),
                    '"""': re.compile(r'(?:[^"\\]|\\.|"(?!""))*"""(?:"{0,2})', re.S),
                    "'''": re.compile(r"(?:[^']|'(?!''))*'''(?:'{0,2})", re.S)}


def _toml_limit(kind: str, n: int, where: str) -> UsageError:
    return UsageError(f"{where}: {kind} over the limit of {n}")


def check_toml_shape(text: str, where: str) -> None:
    """Refuse (one-line UsageError) a TOML document over the shape limits, in one linear scan
    that skips strings and comments; what passes is left to the parser to judge."""
    depth = keys = values = parts = 0
    at = 0
    line_start = True  # no token yet on this line: a ``[`` here at depth 0 opens a table header
    while (m := _TOML_TOKEN.search(text, at)) is not None:
        tok, at = m.group(), m.end()
        header = tok == "[" and depth == 0 and line_start
        line_start = tok == "\n"
        if header:
            keys += 1
            if keys > MAX_TOML_KEYS:
                raise _toml_limit("keys", MAX_TOML_KEYS, where)
        if tok in _TOML_STRING_END:
            end = _TOML_STRING_END[tok].match(text, at)
            if end is None:
                return  # an unterminated string: the parser says so
            at = end.end()
            continue  # a quoted key is one part of a dotted key
        if tok == "#":
            nl = text.find("\n", at)
            at = len(text) if nl < 0 else nl
            continue
        if tok == ".":
            parts += 1
            if parts >= MAX_TOML_KEY_PARTS:
                raise _toml_limit("a dotted key with parts", MAX_TOML_KEY_PARTS, where)
            continue
        elif tok in "[{":
            depth += 1
            if depth > MAX_TOML_NESTING:
                raise _toml_limit("arrays or tables nested levels", MAX_TOML_NESTING, where)
        elif tok in "]}":
            depth = max(0, depth - 1)
        elif tok == "=":
            keys += 1
            if keys > MAX_TOML_KEYS:
                raise _toml_limit("keys", MAX_TOML_KEYS, where)
        elif tok == ",":
            values += 1
            if values > MAX_TOML_VALUES:
                raise _toml_limit("values", MAX_TOML_VALUES, where)
        parts = 0


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


