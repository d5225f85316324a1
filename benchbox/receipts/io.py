"""Receipts: build, write atomically, load with validation and migration."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchbox.contracts import STAGES
from benchbox.errors import UsageError

SCHEMA_VERSION = 1
#: Receipts larger than this are refused rather than read into memory.
MAX_RECEIPT_BYTES = 2 * 1024**3
STATUSES = ("valid", "invalid", "failed")

#: schema_version N → function that turns a version-N receipt into version N+1.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_receipt(path: Path, receipt: dict[str, Any]) -> None:
    """Write atomically: a temporary file in the same folder, fsync, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = json.dumps(receipt, indent=1, allow_nan=False).encode()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a receipt")


def parse_receipt(text: str | bytes, where: str) -> dict[str, Any]:
    """Parse, migrate and check a receipt; raise UsageError with one line on any problem."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise UsageError(f"{where}: not a receipt: JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"{where}: not a receipt: invalid JSON ({e})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: not a receipt: the top level is not an object")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise UsageError(f"{where}: not a receipt: 'schema_version' missing or not an integer")
    if version > SCHEMA_VERSION:
        raise UsageError(f"{where}: receipt schema_version {version} is newer than this benchbox "
                         f"understands ({SCHEMA_VERSION}); upgrade benchbox")
    if version < 1:
        raise UsageError(f"{where}: receipt schema_version {version} is not valid")
    while version < SCHEMA_VERSION:
        data = MIGRATIONS[version](data)
        version = data["schema_version"]
    check_receipt(data, where)
    return data


def load_receipt(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_RECEIPT_BYTES:
            raise UsageError(f"{p}: receipt is {size} bytes, over the {MAX_RECEIPT_BYTES}-byte limit")
        blob = p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{p}: no such receipt") from None
    except IsADirectoryError:
        raise UsageError(f"{p}: is a directory, not a receipt") from None
    except OSError as e:
        raise UsageError(f"{p}: cannot read: {e.strerror}") from None
    return parse_receipt(blob, str(p))


def _expect(cond: bool, where: str, msg: str) -> None:
    if not cond:
        raise UsageError(f"{where}: invalid receipt: {msg}")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _int_list(x: Any) -> bool:
    return isinstance(x, list) and all(_is_int(v) for v in x)


def check_receipt(r: dict[str, Any], where: str) -> None:
    """Structural checks on the v1 keys that tools rely on."""
    for key, kind in (("contract", dict), ("task", dict), ("results", list),
                      ("environment", dict), ("benchbox_version", str)):
        _expect(isinstance(r.get(key), kind), where, f"'{key}' missing or not a {kind.__name__}")
    c = r["contract"]
    for key in ("name", "first", "last", "clock", "hash"):
        _expect(isinstance(c.get(key), str), where, f"contract.{key} missing or not a string")
    _expect(isinstance(c.get("stages"), list) and all(s in STAGES for s in c["stages"]),
            where, "contract.stages missing or holds an unknown stage")
    _expect(isinstance(r["task"].get("name"), str), where, "task.name missing")
    for i, row in enumerate(r["results"]):
        at = f"results[{i}]"
        _expect(isinstance(row, dict), where, f"{at} is not an object")
        for key in ("runner", "case", "status"):
            _expect(isinstance(row.get(key), str), where, f"{at}.{key} missing or not a string")
        _expect(row["status"] in STATUSES, where, f"{at}.status {row['status']!r} is not one of "
                f"{', '.join(STATUSES)}")
        _expect(_int_list(row.get("samples_ns", [])), where, f"{at}.samples_ns is not a list of integers")
        stages = row.get("stages_ns", {})
        _expect(isinstance(stages, dict), where, f"{at}.stages_ns is not an object")
        for s, v in stages.items():
            _expect(s in STAGES and _int_list(v), where, f"{at}.stages_ns.{s} is not a stage's integer list")
        _expect(isinstance(row.get("reasons", []), list), where, f"{at}.reasons is not a list")
        _expect(isinstance(row.get("summary", {}), dict), where, f"{at}.summary is not an object")


def schema_path() -> Path:
    return Path(__file__).with_name("receipt.schema.json")
