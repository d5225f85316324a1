"""Receipts on disk: write atomically, load with migration and the model's checks.

A receipt is data only: it is read with ``json`` (never pickle, eval or a
loader that can build objects), decoded into :class:`benchbox.receipts.model.Receipt`,
and every problem with one gives a :class:`~benchbox.errors.UsageError` with one
line, never a traceback.
"""

from __future__ import annotations

import json
import math
import stat
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchbox.errors import FieldError, UsageError, first_line
from benchbox.fileio import write_atomic
from benchbox.receipts.model import SCHEMA_VERSION, Receipt, ResultRow, decode_receipt
from benchbox.typed import encode, plain

#: Receipts larger than this are refused rather than read into memory.
MAX_RECEIPT_BYTES = 256 * 1024**2
#: Deepest nesting of arrays and objects a receipt may have (real ones stay under 10).
MAX_DEPTH = 64
#: Before parsing, a receipt may hold at most this many ``[``, ``{``, ``:`` and pairs of ``"``
#: (each becomes a Python list, dict, key or string; counted inside strings too, so the count
#: is an upper bound), plus one per ``BYTES_PER_ITEM`` bytes. Numbers are not counted (a
#: sample is one): the costliest, such as ``1.5,``, take about 10x their bytes as Python
#: objects, so parsing takes memory in proportion to the file.
MAX_ITEMS = 500_000
BYTES_PER_ITEM = 64
#: The run's bound on its receipt (see :func:`check_receipt_budget`): the widest a number can
#: be written ("9223372036854775807,"), numbers per sample (the region and each stage, with
#: room for one more), and room for everything else: per row and once.
WIDEST_NUMBER = 20
NUMBERS_PER_SAMPLE = 10
ROW_ALLOWANCE = 256 * 1024
RECEIPT_ALLOWANCE = 1024**2

Migration = Callable[[dict[str, Any]], dict[str, Any]]
#: schema_version N → function that turns a version-N document into version N+1. The loader
#: walks the chain from a receipt's version up to SCHEMA_VERSION before decoding it.
MIGRATIONS: dict[int, Migration] = {}


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 records each row's rounds; version 1 did not, so its samples count as one round."""
    results = data.get("results")
    for row in results if isinstance(results, list) else []:
        if isinstance(row, dict) and "round_sizes" not in row:
            samples = row.get("samples_ns")
            row["round_sizes"] = [len(samples)] if isinstance(samples, list) and samples else []
    return {**data, "schema_version": 2}


MIGRATIONS[1] = _v1_to_v2


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def encode_receipt(receipt: Receipt | dict[str, Any]) -> bytes:
    """The receipt as compact JSON bytes (no indentation: a sample costs its digits and a comma);
    values JSON cannot hold are made plain rather than lost."""
    doc = receipt.to_json() if isinstance(receipt, Receipt) else receipt
    try:
        return _compact(doc)
    except (TypeError, ValueError):
        return _compact(plain(doc))


#: stands for the rows while the rest of a receipt is encoded; its JSON (with its NULs escaped)
#: is checked to occur once, else the receipt is encoded whole
_ROWS_MARK = "\x00benchbox-rows\x00"
_ROWS_MARK_JSON = json.dumps(_ROWS_MARK).encode()


def _compact(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()


class ReceiptEncoder:
    """:func:`encode_receipt` for a receipt written again and again as rows are added (a run's,
    after every row): each row's JSON is made once and kept while the row is in the receipt, so
    a write encodes the new row and the rest of the receipt, not every sample so far. The bytes
    are ``encode_receipt``'s, to the byte. A row is a frozen record and is never changed once
    added; a changed row is a new object and is encoded afresh."""

    def __init__(self) -> None:
        self._rows: dict[int, tuple[ResultRow, bytes]] = {}

    def __call__(self, receipt: Receipt | dict[str, Any]) -> bytes:
        if not isinstance(receipt, Receipt):
            return encode_receipt(receipt)
        try:
            head = encode(replace(receipt, results=()))
            head["results"] = _ROWS_MARK
            before, mark, after = _compact(head).partition(_ROWS_MARK_JSON)
            rows = [self._row(r) for r in receipt.results]
        except (TypeError, ValueError):  # a value JSON cannot hold: encode_receipt makes it plain
            return encode_receipt(receipt)
        if not mark or _ROWS_MARK_JSON in after:
            return encode_receipt(receipt)
        self._rows = {id(r): self._rows[id(r)] for r in receipt.results}
        return b"".join((before, b"[", b",".join(rows), b"]", after))

    def _row(self, row: ResultRow) -> bytes:
        kept = self._rows.get(id(row))
        if kept is None or kept[0] is not row:
            kept = self._rows[id(row)] = (row, _compact(row.to_json()))
        return kept[1]


def relabel_receipt(blob: bytes, labels: dict[str, str]) -> bytes:
    """The receipt ``blob`` with ``labels`` added to its settings.labels, before it is decoded
    (a matrix cell's end-of-run labels); a blob that does not parse is kept as it is."""
    try:
        receipt = json.loads(blob)
        settings = receipt.setdefault("settings", {})
        settings["labels"] = {**(settings.get("labels") or {}), **labels}
    except (ValueError, AttributeError, TypeError):
        return blob
    return encode_receipt(receipt)


def receipt_is_complete(blob: bytes) -> bool:
    """Whether the receipt ``blob`` says it is complete, peeked at before it is decoded (False
    when it does not parse)."""
    try:
        return json.loads(blob).get("complete") is True
    except (ValueError, AttributeError):
        return False


def max_samples_per_row(rows: int) -> int:
    """The most samples per row a run of ``rows`` (runner, case) rows may take so that its
    receipt stays under the read limit, with every number as wide as a sample can be."""
    room = MAX_RECEIPT_BYTES - RECEIPT_ALLOWANCE - rows * ROW_ALLOWANCE
    return max(0, room // (max(1, rows) * NUMBERS_PER_SAMPLE * WIDEST_NUMBER))


def check_receipt_budget(rows: int, samples: int, field: str = "samples") -> None:
    """Refuse (FieldError on ``field``) a run whose receipt could outgrow what loads."""
    most = max_samples_per_row(rows)
    if samples > most:
        raise FieldError(field, f"{rows} (runner, case) rows × {samples} samples could write a receipt "
                                f"over the {MAX_RECEIPT_BYTES // 1024**2} MiB read limit; at most {most} "
                                "samples per row for this many rows (or run fewer cases or runners)")


class NotAReceipt(UsageError):
    """The file is not a receipt at all (not JSON, not an object, no ``schema_version``), as
    opposed to a receipt with a fault: ``benchbox store add`` skips such files."""


class ReceiptWriteError(UsageError):
    """A receipt could not be written; ``error`` is the operating system's error (errno)."""

    def __init__(self, path: Path, error: OSError) -> None:
        why = "it already exists" if isinstance(error, FileExistsError) else (error.strerror or str(error))
        super().__init__(f"cannot write receipt {path}: {why}")
        self.path = path
        self.error = error


def write_receipt(path: Path, receipt: Receipt | dict[str, Any], *, exclusive: bool = False,
                  readable: bool = False, encoder: ReceiptEncoder | None = None) -> None:
    """Write atomically: a temporary file in the same folder, fsync, rename, fsync the folder.

    A reader (or a crash at any instant) sees either the previous receipt or the
    new one, never a mixture. ``exclusive``: only where nothing is yet (a run's first
    write), never replacing anything. ``readable``: refuse (UsageError, nothing written) a
    receipt over the read limit, which no command could load. ``encoder``: the run's, which keeps
    the JSON of the rows it has written. An unwritable path raises ReceiptWriteError (a
    UsageError).
    """
    path = Path(path)
    blob = (encoder or encode_receipt)(receipt)
    if readable and len(blob) > MAX_RECEIPT_BYTES:
        raise UsageError(f"{path}: the receipt would take {len(blob):,} bytes, over the read limit of "
                         f"{MAX_RECEIPT_BYTES:,} bytes (no command could load it); nothing was written")
    try:
        write_atomic(path, blob, exclusive=exclusive, parents=True)
    except OSError as e:
        raise ReceiptWriteError(path, e) from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a receipt")


#: the parsed values that hold no container and no number that could be out of range
_NO_CONTAINER_NO_FLOAT = frozenset({int, str, bool, type(None)})


def _check_tree(data: Any, where: str) -> None:
    """Depth and number checks over the whole document, without recursion."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise UsageError(f"{where}: not a receipt: nested deeper than {MAX_DEPTH} levels")
        items = node.values() if isinstance(node, dict) else node
        if _NO_CONTAINER_NO_FLOAT.issuperset(map(type, items)):  # sample lists: nothing to check
            continue
        for v in items:
            if isinstance(v, (dict, list)):
                stack.append((v, depth + 1))
            elif isinstance(v, float) and not math.isfinite(v):
                raise UsageError(f"{where}: invalid receipt: a number is out of range (infinite)")


def _check_items(text: str | bytes, where: str) -> None:
    """Refuse, before parsing, a document with more containers, keys and strings than its size
    allows."""
    marks = (b"[", b"{", b":") if isinstance(text, bytes) else ("[", "{", ":")
    quote = b'"' if isinstance(text, bytes) else '"'
    items = sum(text.count(m) for m in marks) + text.count(quote) // 2  # type: ignore[arg-type]
    limit = MAX_ITEMS + len(text) // BYTES_PER_ITEM
    if items > limit:
        raise UsageError(f"{where}: not a receipt: {items} arrays, objects, keys and strings, over the "
                         f"limit of {limit} for its size")


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


def parse_receipt(text: str | bytes, where: str) -> Receipt:
    """Parse, migrate and check a receipt; raise UsageError with one line on any problem."""
    if len(text) > MAX_RECEIPT_BYTES:
        raise UsageError(f"{where}: receipt is over the {MAX_RECEIPT_BYTES}-byte limit")
    _check_items(text, where)
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise UsageError(f"{where}: not a receipt: JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise NotAReceipt(f"{where}: not a receipt: invalid JSON ({first_line(e, 200)})") from None
    if not isinstance(data, dict):
        raise NotAReceipt(f"{where}: not a receipt: the top level is not an object")
    _check_tree(data, where)
    version = data.get("schema_version")
    if isinstance(version, float) and version.is_integer():  # an integer, as the schema reads 2.0
        version = data["schema_version"] = int(version)
    if "schema_version" not in data:
        raise NotAReceipt(f"{where}: not a receipt: no 'schema_version'")
    if not isinstance(version, int) or isinstance(version, bool):
        raise UsageError(f"{where}: not a receipt: 'schema_version' missing or not an integer")
    if version > SCHEMA_VERSION:
        raise UsageError(f"{where}: receipt schema_version {version} is newer than this benchbox "
                         f"understands ({SCHEMA_VERSION}); upgrade benchbox")
    if version < 1:
        raise UsageError(f"{where}: receipt schema_version {version} is not valid")
    return decode_receipt(migrate(data, where), where)


def load_receipt(path: str | Path) -> Receipt:
    """Read, parse, migrate and check the receipt at ``path`` (UsageError on any problem)."""
    p = Path(path)
    return parse_receipt(read_receipt_bytes(p), str(p))


def read_receipt_bytes(p: Path) -> bytes:
    """The bytes of the receipt file at ``p``, refused (UsageError) when it is not a regular file
    or over the read limit."""
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
            return f.read(MAX_RECEIPT_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"{p}: no such receipt") from None
    except IsADirectoryError:
        raise UsageError(f"{p}: is a directory, not a receipt") from None
    except (OSError, ValueError) as e:  # ValueError: a path with a NUL byte
        raise UsageError(f"{p}: cannot read: {getattr(e, 'strerror', None) or e}") from None


def schema_path() -> Path:
    """The JSON Schema (draft 2020-12) of the receipt, shipped with the package."""
    return Path(__file__).with_name("receipt.schema.json")
