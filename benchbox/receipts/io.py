"""Receipts: build, write atomically, load with validation and migration.

A receipt is data only: it is read with ``json`` (never pickle, eval or a
loader that can build objects), and every problem with one gives a
:class:`~benchbox.errors.UsageError` with one line, never a traceback.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchbox.contracts import STAGES
from benchbox.errors import UsageError

SCHEMA_VERSION = 1
#: Receipts larger than this are refused rather than read into memory.
MAX_RECEIPT_BYTES = 256 * 1024**2
#: Deepest nesting of arrays and objects a receipt may have (real ones stay under 10).
MAX_DEPTH = 64
#: Sample values are nanoseconds in a signed 64-bit integer.
MAX_NS = 2**63 - 1
STATUSES = ("valid", "invalid", "failed")

Migration = Callable[[dict[str, Any]], dict[str, Any]]
#: schema_version N → function that turns a version-N receipt into version N+1.
#: Version 1 is the first and current version, so the chain is empty today; the
#: loader walks it whenever SCHEMA_VERSION moves on (tests register one to prove it).
MIGRATIONS: dict[int, Migration] = {}


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _plain(x: Any) -> Any:
    """A JSON-ready copy: numpy values become Python ones, NaN/±inf become null."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    if hasattr(x, "tolist"):  # numpy scalars and arrays
        return _plain(x.tolist())
    return str(x)


def encode_receipt(receipt: dict[str, Any]) -> bytes:
    """The receipt as JSON bytes; values JSON cannot hold are made plain rather than lost."""
    try:
        return json.dumps(receipt, indent=1, allow_nan=False).encode()
    except (TypeError, ValueError):
        return json.dumps(_plain(receipt), indent=1, allow_nan=False).encode()


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync a directory; the rename is still atomic
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_receipt(path: Path, receipt: dict[str, Any]) -> None:
    """Write atomically: a temporary file in the same folder, fsync, rename, fsync the folder.

    A reader (or a crash at any instant) sees either the previous receipt or the
    new one, never a mixture. An unwritable path raises UsageError.
    """
    path = Path(path)
    blob = encode_receipt(receipt)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        _fsync_dir(path.parent)
    except OSError as e:
        raise UsageError(f"cannot write receipt {path}: {e.strerror or e}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a receipt")


def _check_tree(data: Any, where: str) -> None:
    """Depth and number checks over the whole document, without recursion."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise UsageError(f"{where}: not a receipt: nested deeper than {MAX_DEPTH} levels")
        items = node.values() if isinstance(node, dict) else node
        for v in items:
            if isinstance(v, (dict, list)):
                stack.append((v, depth + 1))
            elif isinstance(v, float) and not math.isfinite(v):
                raise UsageError(f"{where}: invalid receipt: a number is out of range (infinite)")


def migrate(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Walk the migration chain from the receipt's schema_version up to SCHEMA_VERSION."""
    version = data["schema_version"]
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise UsageError(f"{where}: receipt schema_version {version} cannot be migrated "
                             f"(no migration from version {version})")
        try:
            data = step(data)
        except Exception as e:  # an old receipt malformed in a way its migration trips on
            raise UsageError(f"{where}: cannot migrate receipt from schema_version {version}: "
                             f"{type(e).__name__}: {e}") from None
        new = data.get("schema_version") if isinstance(data, dict) else None
        if not isinstance(new, int) or isinstance(new, bool) or new <= version:
            raise UsageError(f"{where}: the migration from schema_version {version} did not "
                             "advance the version")
        version = new
    return data


def parse_receipt(text: str | bytes, where: str) -> dict[str, Any]:
    """Parse, migrate and check a receipt; raise UsageError with one line on any problem."""
    if len(text) > MAX_RECEIPT_BYTES:
        raise UsageError(f"{where}: receipt is over the {MAX_RECEIPT_BYTES}-byte limit")
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise UsageError(f"{where}: not a receipt: JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"{where}: not a receipt: invalid JSON ({_first_line(e)})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: not a receipt: the top level is not an object")
    _check_tree(data, where)
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise UsageError(f"{where}: not a receipt: 'schema_version' missing or not an integer")
    if version > SCHEMA_VERSION:
        raise UsageError(f"{where}: receipt schema_version {version} is newer than this benchbox "
                         f"understands ({SCHEMA_VERSION}); upgrade benchbox")
    if version < 1:
        raise UsageError(f"{where}: receipt schema_version {version} is not valid")
    data = migrate(data, where)
    check_receipt(data, where)
    return data


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:200]


def load_receipt(path: str | Path) -> dict[str, Any]:
    """Read, parse, migrate and check the receipt at ``path`` (UsageError on any problem)."""
    p = Path(path)
    try:
        st = p.stat()
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{p}: is a directory, not a receipt")
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{p}: not a regular file")
        if st.st_size > MAX_RECEIPT_BYTES:
            raise UsageError(f"{p}: receipt is {st.st_size} bytes, over the "
                             f"{MAX_RECEIPT_BYTES}-byte limit")
        with open(p, "rb") as f:
            blob = f.read(MAX_RECEIPT_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"{p}: no such receipt") from None
    except IsADirectoryError:
        raise UsageError(f"{p}: is a directory, not a receipt") from None
    except (OSError, ValueError) as e:  # ValueError: a path with a NUL byte
        raise UsageError(f"{p}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    return parse_receipt(blob, str(p))


def _expect(cond: bool, where: str, msg: str) -> None:
    if not cond:
        raise UsageError(f"{where}: invalid receipt: {msg}")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _ns_list(x: Any) -> bool:
    return isinstance(x, list) and all(_is_int(v) and 0 <= v <= MAX_NS for v in x)


def _str_list(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(v, str) for v in x)


def _opt(d: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> bool:
    """True when ``key`` is absent or holds a ``kind`` (booleans are never numbers)."""
    if key not in d:
        return True
    v = d[key]
    if isinstance(v, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        return False
    return isinstance(v, kind)


_SUMMARY_NS = ("p50_ns", "p90_ns", "p99_ns", "mean_ns", "min_ns", "max_ns")
_SUMMARY_CI = ("p50_ci_ns", "p90_ci_ns", "p99_ci_ns")


def _check_summary(s: dict[str, Any], where: str, at: str) -> None:
    _expect(_opt(s, "n", int) and s.get("n", 0) >= 0, where, f"{at}.summary.n is not a count")
    for key in _SUMMARY_NS:
        v = s.get(key)
        _expect(v is None or (_is_int(v) and 0 <= v <= MAX_NS), where,
                f"{at}.summary.{key} is not a non-negative integer")
    for key in _SUMMARY_CI:
        v = s.get(key)
        _expect(v is None or (_ns_list(v) and len(v) == 2), where,
                f"{at}.summary.{key} is not null or a [lo, hi] pair of integers")


def _check_row(row: Any, where: str, at: str) -> None:
    _expect(isinstance(row, dict), where, f"{at} is not an object")
    for key in ("runner", "case", "status"):
        _expect(isinstance(row.get(key), str), where, f"{at}.{key} missing or not a string")
    _expect(row["status"] in STATUSES, where, f"{at}.status {row['status'][:40]!r} is not one of "
            f"{', '.join(STATUSES)}")
    _expect(_ns_list(row.get("samples_ns", [])), where,
            f"{at}.samples_ns is not a list of non-negative 64-bit integers")
    stages = row.get("stages_ns", {})
    _expect(isinstance(stages, dict), where, f"{at}.stages_ns is not an object")
    for s, v in stages.items():
        _expect(s in STAGES and _ns_list(v), where,
                f"{at}.stages_ns.{s[:40]} is not a stage's integer list")
    _expect(_str_list(row.get("reasons", [])), where, f"{at}.reasons is not a list of strings")
    summary = row.get("summary", {})
    _expect(isinstance(summary, dict), where, f"{at}.summary is not an object")
    _check_summary(summary, where, at)
    _expect(_opt(row, "runner_report", dict), where, f"{at}.runner_report is not an object")
    report = row.get("runner_report") or {}
    _expect(_opt(report, "options", dict) and _opt(report, "versions", dict), where,
            f"{at}.runner_report.options/versions is not an object")
    fallbacks = report.get("fallbacks", [])
    _expect(isinstance(fallbacks, list) and all(isinstance(f, dict) and _opt(f, "count", int)
                                                for f in fallbacks),
            where, f"{at}.runner_report.fallbacks is not a list of objects")
    acc = row.get("accuracy")
    _expect(acc is None or isinstance(acc, dict), where, f"{at}.accuracy is not null or an object")
    if isinstance(acc, dict):
        _expect(_opt(acc, "passed", bool), where, f"{at}.accuracy.passed is not a boolean")
        _expect(_opt(acc, "gates", list), where, f"{at}.accuracy.gates is not a list")


def _check_comparisons(comp: Any, where: str) -> None:
    _expect(isinstance(comp, dict), where, "comparisons is not an object")
    _expect(_opt(comp, "baseline", (str, type(None))), where, "comparisons.baseline is not a string")
    _expect(_opt(comp, "rows", list) and _opt(comp, "excluded", list), where,
            "comparisons.rows/excluded is not a list")
    _expect(not comp.get("rows") or isinstance(comp.get("baseline"), str), where,
            "comparisons.baseline missing")
    for i, row in enumerate(comp.get("rows", [])):
        _expect(isinstance(row, dict) and isinstance(row.get("runner"), str)
                and isinstance(row.get("case"), str) and _is_num(row.get("p50_ratio"))
                and _opt(row, "p99_ratio", (int, float))
                and all(row.get(k) is None or (isinstance(row[k], list) and len(row[k]) == 2
                                               and all(_is_num(v) for v in row[k]))
                        for k in ("p50_ratio_ci", "p99_ratio_ci"))
                and _opt(row, "p50_verdict", (str, type(None))), where,
                f"comparisons.rows[{i}] needs runner, case, numeric ratios and [lo, hi] intervals")
    for i, ex in enumerate(comp.get("excluded", [])):
        _expect(isinstance(ex, dict) and all(isinstance(ex.get(k), str)
                                             for k in ("runner", "case", "status")),
                where, f"comparisons.excluded[{i}] needs runner, case and status strings")


def check_receipt(r: dict[str, Any], where: str) -> None:
    """Structural checks on the v1 keys that tools rely on (others may add fields freely)."""
    for key, kind in (("contract", dict), ("task", dict), ("results", list),
                      ("environment", dict), ("benchbox_version", str)):
        _expect(isinstance(r.get(key), kind), where, f"'{key}' missing or not a {kind.__name__}")
    _expect(_opt(r, "created_at", str), where, "created_at is not a string")
    _expect(_str_list(r.get("command", [])), where, "command is not a list of strings")
    _expect(_opt(r, "complete", bool) and _opt(r, "interrupted", bool), where,
            "complete/interrupted is not a boolean")
    _expect(_opt(r, "calibration", dict) and _opt(r, "settings", dict), where,
            "calibration/settings is not an object")
    _expect(_opt(r.get("calibration") or {}, "floors", dict), where, "calibration.floors is not an object")
    c = r["contract"]
    for key in ("name", "first", "last", "clock", "hash"):
        _expect(isinstance(c.get(key), str), where, f"contract.{key} missing or not a string")
    _expect(isinstance(c.get("stages"), list) and bool(c["stages"])
            and all(isinstance(s, str) and s in STAGES for s in c["stages"]),
            where, "contract.stages missing, empty or holds an unknown stage")
    _expect(_opt(c, "version", int), where, "contract.version is not an integer")
    t = r["task"]
    _expect(isinstance(t.get("name"), str), where, "task.name missing or not a string")
    cases = t.get("cases", [])
    _expect(isinstance(cases, list) and all(isinstance(x, dict) and isinstance(x.get("name"), str)
                                            for x in cases), where, "task.cases is not a list of named cases")
    for i, row in enumerate(r["results"]):
        _check_row(row, where, f"results[{i}]")
    if "comparisons" in r:
        _check_comparisons(r["comparisons"], where)


def schema_path() -> Path:
    """The JSON Schema (draft 2020-12) of the receipt, shipped with the package."""
    return Path(__file__).with_name("receipt.schema.json")
