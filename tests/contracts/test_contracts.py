"""Contracts are data: built-ins load, bad declarations are refused with one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchbox.contracts import STAGES, builtin_names, contract_from_dict, load_contract, parse_contract_toml
from benchbox.errors import UsageError
from tests.support import BUILTIN_CONTRACTS, one_line_exit_2

GOOD = {"name": "x", "version": 1, "stages": ["h2d", "compute", "d2h"], "clock": "host"}


def test_builtins_declare_the_documented_regions() -> None:
    assert {"public_task_call_wall", "model_io_wall", "device_compute", "device_span"} <= set(builtin_names())
    pub = load_contract("public_task_call_wall")
    assert (pub.first, pub.last, pub.clock) == ("parse", "serialize", "host")
    assert pub.stages == STAGES
    io = load_contract("model_io_wall")
    assert io.stages == ("h2d", "compute", "d2h") and io.clock == "host"
    dev = load_contract("device_compute")
    assert dev.stages == ("compute",) and dev.clock == "device" and dev.policy.hold_stream
    assert not load_contract("device_span").policy.hold_stream


def test_hash_is_sha256_of_canonical_form_and_tracks_meaning() -> None:
    a = contract_from_dict(GOOD)
    assert len(a.hash) == 64 and int(a.hash, 16) >= 0
    assert contract_from_dict({**GOOD, "description": "other words"}).hash == a.hash
    assert contract_from_dict({**GOOD, "clock": "device"}).hash != a.hash
    assert contract_from_dict({**GOOD, "policy": {"sync_at_close": "stream"}}).hash != a.hash
    hashes = {load_contract(n).hash for n in builtin_names()}
    assert len(hashes) == len(builtin_names())


@pytest.mark.parametrize(("patch", "needle"), [
    ({"stages": ["parse", "compute"]}, "not contiguous"),
    ({"stages": ["compute", "h2d"]}, "out of pipeline order"),
    ({"stages": ["h2d", "warp"]}, "unknown stage 'warp'"),
    ({"stages": []}, "empty"),
    ({"stages": ["compute", "compute"]}, "repeats"),
    ({"clock": "device", "stages": ["d2h", "reduce"]}, "cannot time host stage(s) reduce"),
    ({"clock": "sundial"}, "clock: 'sundial' is not one of host, device"),
    ({"version": "1"}, "version: is string, not an integer"),
    ({"policy": {"sync_at_close": "maybe"}}, "sync_at_close"),
    ({"policy": {"hold_stream": True}}, "hold_stream applies only to the device clock"),
    ({"policy": {"bogus": 1}}, "unknown policy field 'bogus'"),
    ({"policy": {"event_floor": "subtract"}}, "event_floor applies only to the device clock"),
    ({"clock": "device", "policy": {"event_floor": "maybe"}}, "event_floor: 'maybe' is not one of keep"),
    ({"extra": 1}, "unknown field 'extra'"),
])
def test_invalid_declarations_name_the_problem(patch: dict, needle: str) -> None:
    with pytest.raises(UsageError) as e:
        contract_from_dict({**GOOD, **patch})
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("missing", ["name", "version", "stages", "clock"])
def test_missing_field_is_refused(missing: str) -> None:
    d = dict(GOOD)
    del d[missing]
    with pytest.raises(UsageError, match=f"^contract: invalid contract: {missing}: is missing$"):
        contract_from_dict(d)


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchbox", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.mark.parametrize("body", [
    'name = "gap"\nversion = 1\nstages = ["parse", "compute"]\nclock = "host"\n',
    'name = "broken"\nversion = 1\nstages = ["parse"\n',
    'name = "devhost"\nversion = 1\nstages = ["parse"]\nclock = "device"\n',
])
def test_cli_refuses_bad_contract_files_with_one_line_and_exit_2(tmp_path: Path, body: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(body)
    for args in (["contracts", str(f)], ["run", "--contract", str(f), "--out", str(tmp_path / "r.json")]):
        r = _cli(*args)
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith("benchbox: error:") and r.stderr.count("\n") == 1, r.stderr
        assert "Traceback" not in r.stderr
    assert not (tmp_path / "r.json").exists()


def test_cli_unknown_contract_exit_2() -> None:
    r = _cli("run", "--contract", "no_such_contract")
    assert r.returncode == 2
    assert "unknown contract 'no_such_contract'" in r.stderr and r.stderr.count("\n") == 1


def test_cli_lists_and_shows_contracts() -> None:
    r = _cli("contracts")
    assert r.returncode == 0 and "public_task_call_wall" in r.stdout and "model_io_wall" in r.stdout
    r = _cli("contracts", "model_io_wall")
    lines = r.stdout.splitlines()
    inside = [ln.split()[-1] for ln in lines if ln.strip().startswith("[x]")]
    outside = [ln.split()[-1] for ln in lines if ln.strip().startswith("[ ]")]
    assert inside == ["h2d", "compute", "d2h"]
    assert outside == ["parse", "preprocess", "reduce", "answer", "serialize"]


def test_user_contract_file_loads(tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text('name = "mine"\nversion = 2\nstages = ["preprocess", "h2d"]\nclock = "host"\n')
    c = load_contract(str(f))
    assert (c.first, c.last, c.version, c.source) == ("preprocess", "h2d", 2, str(f))


# -- arrival ------------------------------------------------------------------------------

#: the hashes of the built-in contracts declared before arrivals existed: receipts carry them, so a
#: new policy field at its default must leave every one unchanged
HASHES_BEFORE_ARRIVAL = {
    "device_compute": "cc69a0d1d044813031c5061336c9b5d2792ba4185e7ac272ba1ff24d2b79933c",
    "device_span": "a195cc6111e6ce009977a6cc332c9191d126cff68740c7f0d6a99b2a4aa7cde6",
    "device_throughput": "69cc79807d9ab5395761187929af94660b31c7e0b4abb8599884ecfbee11ab01",
    "model_io_wall": "123996606f8b7d4d93424627b2a3c763c7cfc89a9a4f3c412aab6908e9cb7519",
    "public_task_call_wall": "51c4c7001a6a8170a213d825e2c7bb86b3bec77c4f7667d5a4af49d4fe25ab15",
}


def test_back_to_back_default_leaves_existing_hashes_unchanged() -> None:
    for name, h in HASHES_BEFORE_ARRIVAL.items():
        c = load_contract(name)
        assert c.arrival.kind == "back_to_back" and c.hash == h, name
        assert "arrival" not in c.canonical()["policy"]
        # declaring the default explicitly is the same contract
        d = {k: v for k, v in c.to_dict().items() if k not in ("hash", "source")}
        d["policy"] = {**d["policy"], "arrival": {"kind": "back_to_back"}}
        assert contract_from_dict(d).hash == h


def test_arrival_enters_the_hash_and_survives_the_receipt_round_trip() -> None:
    base = contract_from_dict(GOOD)
    gap = contract_from_dict({**GOOD, "policy": {"arrival": {"kind": "gap", "gap_ms": 1}}})
    busy = contract_from_dict({**GOOD, "policy": {"arrival": {"kind": "gap", "gap_ms": 1, "idle": "busy"}}})
    poisson = contract_from_dict({**GOOD, "policy": {"arrival": {"kind": "poisson", "rate_per_s": 50}}})
    seeded = contract_from_dict({**GOOD, "policy": {"arrival": {"kind": "poisson", "rate_per_s": 50,
                                                                "seed": 3}}})
    assert len({base.hash, gap.hash, busy.hash, poisson.hash, seeded.hash}) == 5
    assert gap.arrival.gap_ms == 1.0 and poisson.arrival.rate_per_s == 50.0
    for c in (gap, busy, poisson, seeded):
        d = c.to_dict()
        assert d["arrival"] == c.arrival.canonical()
        assert contract_from_dict(d).hash == c.hash


def test_a_rate_given_at_run_time_is_part_of_the_identity() -> None:
    c = load_contract("public_task_call_poisson")
    assert c.arrival.open_loop and c.arrival.rate_per_s == 0 and c.includes_queue
    at50, at60 = c.with_arrival(rate_per_s=50), c.with_arrival(rate_per_s=60)
    assert len({c.hash, at50.hash, at60.hash}) == 3
    assert at50.to_dict()["arrival"]["set_at_run"] == ["rate_per_s"]
    back = contract_from_dict(at50.to_dict())
    assert back.hash == at50.hash and back.arrival.set_at_run == ("rate_per_s",)
    io = load_contract("model_io_wall")
    assert io.with_arrival(gap_ms=0).hash == io.hash  # a gap of 0 is back to back
    g = io.with_arrival(gap_ms=0.2, idle="busy")
    assert (g.arrival.kind, g.arrival.gap_ms, g.arrival.idle) == ("gap", 0.2, "busy") and g.hash != io.hash
    assert load_contract("public_task_call_50rps").arrival.rate_per_s == 50.0


@pytest.mark.parametrize(("kw", "needle"), [
    ({"gap_ms": 1, "rate_per_s": 2}, "not both"),
    ({"gap_ms": -1}, "gap must be"),
    ({"rate_per_s": 0}, "rate must be a positive"),
    ({"rate_per_s": float("inf")}, "rate must be"),
    ({"idle": "busy"}, "needs paced arrivals"),
    ({"gap_ms": 1, "idle": "nap"}, "idle must be one of"),
])
def test_run_time_arrivals_refuse_bad_values(kw: dict, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        load_contract("model_io_wall").with_arrival(**kw)


@pytest.mark.parametrize(("patch", "needle"), [
    ({"policy": {"arrival": {"kind": "burst"}}}, "policy.arrival.kind: 'burst' is not one of back_to_back"),
    ({"policy": {"arrival": {"kind": "gap"}}}, "gap_ms must be a positive"),
    ({"policy": {"arrival": {"kind": "gap", "gap_ms": 1, "seed": 2}}}, "seed does not apply"),
    ({"policy": {"arrival": {"kind": "poisson", "rate_per_s": -3}}}, "rate_per_s"),
    ({"policy": {"arrival": {"kind": "poisson", "idle": "nap"}}}, "policy.arrival.idle: 'nap' is not one of"),
    ({"policy": {"arrival": {"kind": "poisson", "seed": True}}}, "policy.arrival.seed: is boolean, not an"),
    ({"policy": {"arrival": {"kind": "poisson", "when": 1}}}, "unknown policy.arrival field"),
    ({"policy": {"arrival": "poisson"}}, "policy.arrival: is string, not an object"),
    ({"stages": ["queue"]}, "cannot be 'queue' alone"),
    ({"stages": ["queue", "preprocess"]}, "not contiguous"),
    ({"stages": ["parse", "queue"]}, "out of pipeline order"),
    ({"clock": "device", "stages": ["queue", "parse"]}, "cannot time host stage(s) queue"),
    ({"policy": {"state": "first_call", "arrival": {"kind": "gap", "gap_ms": 1}}}, "paced arrivals need"),
])
def test_invalid_arrivals_name_the_problem(patch: dict, needle: str) -> None:
    with pytest.raises(UsageError) as e:
        contract_from_dict({**GOOD, **patch})
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_cli_shows_the_arrival_and_the_queue_stage() -> None:
    r = _cli("contracts", "public_task_call_poisson")
    assert r.returncode == 0
    assert "[x] queue" in r.stdout and "arrival: poisson rate given at run time" in r.stdout
    listing = _cli("contracts").stdout
    assert "gap 20 ms (sleep)" in listing and "public_task_call_50rps" in listing and "arrival" in listing


# -- resource bombs: refused by a pre-scan, before the TOML parser sees them -----------------

BOMBS = {
    # a dotted key costs tomllib time and memory quadratic in its parts (40 KB of it: seconds
    # and gigabytes); 8 KB is enough to show the refusal
    "dotted key": "a" + ".a" * 4_000 + " = 1\n",
    "quoted dotted key": '"a"' + '."a"' * 4_000 + " = 1\n",
    "dotted table header": "[" + "a." * 2_000 + "a]\n",
    "nested arrays": "stages = " + "[" * 100 + "]" * 100 + "\n",
    "nested inline tables": "policy = " + "{a = " * 100 + "1" + "}" * 100 + "\n",
    "many keys": "".join(f"k{i} = 1\n" for i in range(20_000)),
    "many values": "stages = [" + "1," * 200_000 + "]\n",
    # a table header is a key too: 20,000 headers of 16 parts (768 KB) name 320,000 tables
    "many table headers": "".join(f"[{'a.' * 14}a.k{i}]\n" for i in range(20_000)),
    "many array-of-tables headers": "".join(f"[[{'a.' * 14}k{i}]]\n" for i in range(20_000)),
}


@pytest.mark.parametrize("kind", list(BOMBS))
def test_toml_bombs_are_refused_by_the_prescan(kind: str, tmp_path: Path) -> None:
    from benchbox.contracts.model import MAX_CONTRACT_BYTES

    text = BOMBS[kind]
    assert len(text) <= MAX_CONTRACT_BYTES  # under the size limit: the shape is what is refused
    with pytest.raises(UsageError) as e:
        parse_contract_toml(text, "bomb")
    msg = str(e.value)
    assert msg.startswith("bomb: ") and "limit" in msg and "\n" not in msg, msg
    path = tmp_path / "bomb.toml"
    path.write_text(text)
    assert "limit" in one_line_exit_2(["contracts", str(path)])


def test_the_prescan_accepts_every_builtin_contract_and_strings_full_of_brackets() -> None:
    from benchbox.contracts.shape import check_toml_shape

    for p in sorted(BUILTIN_CONTRACTS.glob("*.toml")):
        check_toml_shape(p.read_text(), p.name)
    text = 'name = "x"\ndescription = "' + "[{." * 5_000 + '"\n' + "# [[[[. . . .\n" + \
           "literal = '''" + "[[[..." * 1_000 + "'''\n"
    check_toml_shape(text, "strings")


def test_the_declaration_is_one_typed_record_whose_schema_and_constants_agree() -> None:
    """The contract declaration is decoded by benchbox.typed: its JSON Schema closes every table
    and its enumerations are the module's constants (one declaration each, no second validator)."""
    from benchbox.contracts import model
    from benchbox.typed.schema import json_schema

    schema = json_schema(model.ContractDeclaration)
    defs = schema["$defs"]
    assert schema["additionalProperties"] is False
    assert all(d["additionalProperties"] is False for d in defs.values())
    assert tuple(schema["properties"]["clock"]["enum"]) == model.CLOCKS
    policy = defs["PolicyDeclaration"]["properties"]
    assert tuple(policy["state"]["enum"]) == model.STATES
    assert tuple(policy["sync_at_close"]["enum"]) == model.SYNC_RULES
    assert tuple(policy["event_floor"]["enum"]) == model.EVENT_FLOORS
    arrival = defs["ArrivalDeclaration"]["properties"]
    assert tuple(arrival["kind"]["enum"]) == model.ARRIVALS
    assert tuple(arrival["idle"]["enum"]) == model.IDLE_MODES
    assert set(model._ARRIVAL_FIELDS) == set(model.ARRIVALS)
    assert not hasattr(model, "arrival_from_dict") and not hasattr(model, "_policy_from_dict")
