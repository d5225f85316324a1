"""A local store of receipts: the receipts as written, plus Parquet tables of their rows.

Layout of a store directory::

    ROOT/store.json          marks the directory as a store (format and version)
    ROOT/receipts/<id>.json  every receipt, byte for byte as it was written
    ROOT/receipts.parquet    one row per receipt (identity, commit, task, contract, device, labels, ...)
    ROOT/rows.parquet        one row per (receipt, runner, case): status and summary statistics

``<id>`` is :func:`receipt_identity`, so adding a receipt twice stores it once. The
Parquet tables are derived from the receipts and rewritten atomically; a table that
is missing, unreadable or behind the receipts directory (a crash between the two writes,
a damaged file, a file copied in by hand) is rebuilt from ``receipts/`` on the next read,
:meth:`Store.add` or :meth:`Store.sync`.

Faults it survives: a store is created whole (built in a hidden folder beside it, then
renamed into place), so a crash leaves either no store or a usable one, and concurrent first
writers all find the same store; every write holds the store's lock, under which temporary
files a killed writer left are removed; the index records each receipt file's sha256, and
:meth:`Store.verify` (run by ``benchbox report``) refuses a stored receipt edited since.

Receipts measured under different contracts, tasks, sizes, dtypes or devices never share a
series: ``series`` in the rows table names all of them.

Nothing here imports torch; polars is imported by the methods that read or write Parquet.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchbox.errors import UsageError
from benchbox.receipts.io import NotAReceipt, load_receipt, parse_receipt, read_receipt_bytes
from benchbox.receipts.model import Receipt
from benchbox.store.files import MARKER, STORE_VERSION, TMP, atomic_parquet, atomic_write, read_marker
from benchbox.store.tables import (
    MATRIX_CELL,
    RECEIPTS_DIR,
    parse_time,
    polars,
    receipt_facts,
    result_rows,
    schemas,
)

__all__ = ["INDEX_FILE", "MARKER", "MATRIX_CELL", "RECEIPTS_DIR", "ROWS_FILE", "VOLATILE_KEYS", "AddEntry",
           "AddResult", "Store", "StoredReceipt", "canonical_json", "receipt_identity"]

ROWS_FILE = "rows.parquet"
INDEX_FILE = "receipts.parquet"
#: Top-level keys left out of a receipt's identity. Schema v1 has none: formatting and key
#: order are normalised by the canonical JSON, and an older schema version by migrating
#: on load, so a receipt and any re-encoded or migrated copy of it share one identity.
VOLATILE_KEYS: frozenset[str] = frozenset()
_ID = re.compile(r"[0-9a-f]{64}")


def canonical_json(receipt: dict[str, Any]) -> bytes:
    """Sorted keys, no whitespace, UTF-8: one byte string per receipt content."""
    body = {k: v for k, v in receipt.items() if k not in VOLATILE_KEYS}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()


def receipt_identity(receipt: Receipt | dict[str, Any]) -> str:
    """sha256 (hex) over the receipt's canonical JSON, volatile keys left out.

    Pass a receipt as loaded (``load_receipt(path).to_json()``), so that an older schema
    version is identified by what it migrates to.
    """
    doc = receipt.to_json() if isinstance(receipt, Receipt) else receipt
    return hashlib.sha256(canonical_json(doc)).hexdigest()


@dataclass(frozen=True)
class StoredReceipt:
    """One stored receipt: its identity, where it lies, and the facts the index holds."""

    identity: str
    path: Path
    created_at: str | None
    commit: str | None
    dirty: bool | None
    task: str
    size: str | None
    dtype: str | None
    contract: str
    contract_hash: str
    device: str
    complete: bool
    n_results: int
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def matrix_cell(self) -> str | None:
        return self.labels.get(MATRIX_CELL)


@dataclass(frozen=True)
class AddEntry:
    """A receipt given to :meth:`Store.add` and the identity it was stored under."""

    source: Path
    identity: str


@dataclass(frozen=True)
class AddResult:
    """What :meth:`Store.add` did: receipts added, receipts the store already held, files skipped
    as not receipts (with why), and the incomplete receipts among those given."""

    added: tuple[AddEntry, ...]
    present: tuple[AddEntry, ...]
    skipped: tuple[tuple[Path, str], ...] = ()
    incomplete: tuple[Path, ...] = ()

    @property
    def identities(self) -> tuple[str, ...]:
        return tuple(e.identity for e in (*self.added, *self.present))


class Store:
    """A directory of receipts with Parquet tables of their facts and rows."""

    def __init__(self, root: Path) -> None:
        """Open the store at ``root``, creating it (and its parents) when it does not exist."""
        self.root = Path(root)
        version = read_marker(self.root).get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version > STORE_VERSION:
            raise UsageError(f"{self.root}: store version {version!r} is newer than this benchbox "
                             f"understands ({STORE_VERSION}); upgrade benchbox")
        try:
            (self.root / RECEIPTS_DIR).mkdir(exist_ok=True)
        except OSError as e:
            raise UsageError(f"{self.root}: cannot open the store: {e.strerror or e}") from None

    # -- paths ---------------------------------------------------------------------------

    @property
    def receipts_dir(self) -> Path:
        return self.root / RECEIPTS_DIR

    @property
    def rows_path(self) -> Path:
        return self.root / ROWS_FILE

    @property
    def index_path(self) -> Path:
        return self.root / INDEX_FILE

    def receipt_path(self, identity: str) -> Path:
        """Where the receipt of ``identity`` lies (whether or not it is stored)."""
        if not _ID.fullmatch(identity):
            raise UsageError(f"{identity!r} is not a receipt identity (64 hex digits)")
        return self.receipts_dir / f"{identity}.json"

    # -- reading ---------------------------------------------------------------------------

    def identities(self) -> set[str]:
        """Identities of the stored receipts (the receipt files themselves are the truth)."""
        try:
            names = os.listdir(self.receipts_dir)
        except OSError as e:
            raise UsageError(f"{self.receipts_dir}: cannot list: {e.strerror or e}") from None
        return {n[:-5] for n in names if n.endswith(".json") and _ID.fullmatch(n[:-5])}

    def load(self, identity: str) -> Receipt:
        """The stored receipt of ``identity``, loaded (validated, migrated)."""
        return load_receipt(self.receipt_path(identity))

    def index(self) -> Any:
        """The receipts table (polars DataFrame), one row per stored receipt."""
        return self._current()[0]

    def rows(self) -> Any:
        """The rows table (polars DataFrame), one row per (receipt, runner, case)."""
        return self._current()[1]

    def receipts(self) -> list[StoredReceipt]:
        """Every stored receipt with its facts, oldest first (by ``created_at``, then identity)."""
        df = self.index()
        out = []
        for r in df.iter_rows(named=True):
            labels = json.loads(r["labels"]) if r["labels"] else {}
            out.append(StoredReceipt(
                identity=r["identity"], path=self.root / r["path"], created_at=r["created_at"],
                commit=r["commit"], dirty=r["dirty"], task=r["task"], size=r["size"], dtype=r["dtype"],
                contract=r["contract"], contract_hash=r["contract_hash"], device=r["device"],
                complete=bool(r["complete"]), n_results=int(r["n_results"]), labels=labels))
        far = datetime.min.replace(tzinfo=UTC)
        out.sort(key=lambda s: (parse_time(s.created_at) or far, s.identity))
        return out

    def cells(self) -> set[str]:
        """Every stored receipt's ``settings.labels["matrix_cell"]``, where it has one."""
        df = self.index()
        return {c for c in df.get_column("matrix_cell").to_list() if c is not None}

    def verify(self) -> int:
        """Re-hash every stored receipt; UsageError naming the first one edited since it was stored.

        A file whose bytes are those indexed passes at once; one whose bytes differ (re-encoded,
        or edited) is loaded and passes only if its content still has its identity. Returns how
        many receipts were checked.
        """
        self._tidy()
        index = self.index()
        for ident, digest in zip(index.get_column("identity").to_list(),
                                 index.get_column("file_sha256").to_list()):
            path = self.receipt_path(ident)
            try:
                blob = path.read_bytes()
            except OSError as e:
                raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None
            if hashlib.sha256(blob).hexdigest() == digest:
                continue
            if receipt_identity(parse_receipt(blob, str(path))) != ident:
                raise UsageError(f"{path}: edited after it was stored (its content no longer has its "
                                 f"identity); restore it, or remove it: benchbox store rm {ident[:16]}")
        return index.height

    # -- writing ---------------------------------------------------------------------------

    def add(self, paths: Iterable[Path]) -> AddResult:
        """Store receipts; a receipt already stored (same identity) is not stored again.

        A file that is not a receipt at all (not JSON, not an object, no ``schema_version``) is
        skipped and listed in the result's ``skipped``; an incomplete receipt (a run stopped, or
        still writing it) is stored and listed in ``incomplete``. Every other file is loaded and
        checked before anything is written, so one bad receipt (UsageError, naming it) leaves
        the store as it was.
        """
        pl = polars()
        loaded, skipped = _load_all(paths)
        if not loaded:
            raise UsageError(f"no receipts to add: none of the {len(skipped)} files given is a receipt"
                             if skipped else "no receipts to add")
        added: list[AddEntry] = []
        present: list[AddEntry] = []
        with self._lock():
            have = self.identities()
            new: dict[str, tuple[Receipt, str]] = {}
            for p, blob, receipt, ident in loaded:
                entry = AddEntry(p, ident)
                if ident in have or ident in new:
                    present.append(entry)
                    continue
                atomic_write(self.receipt_path(ident), blob)
                new[ident] = (receipt, hashlib.sha256(blob).hexdigest())
                added.append(entry)
            self._sync(pl, fresh=new)
        incomplete = tuple(p for p, _, r, _ in loaded if not r.is_complete)
        return AddResult(tuple(added), tuple(present), tuple(skipped), incomplete)

    def remove(self, refs: Iterable[str]) -> list[str]:
        """Remove stored receipts, each named by its identity or a unique prefix of it (at least
        8 hex digits); every name is resolved before anything is removed. Returns the identities."""
        pl = polars()
        with self._lock():
            have = self.identities()
            gone = list(dict.fromkeys(_resolve(ref, have) for ref in refs))
            for ident in gone:
                try:
                    os.unlink(self.receipt_path(ident))
                except OSError as e:
                    raise UsageError(f"cannot remove {self.receipt_path(ident)}: {e.strerror or e}") from None
            self._sync(pl, fresh={})
        return gone

    def sync(self) -> int:
        """Bring the Parquet tables up to date with the receipts directory (rebuilt from it when
        unreadable). Returns how many receipts were indexed or dropped from the tables."""
        pl = polars()
        with self._lock():
            return self._sync(pl, fresh={})

    def _current(self) -> tuple[Any, Any]:
        """The two tables as they stand, brought up to date first when they are not."""
        pl = polars()
        tables = self._tables(pl)
        if tables is None or tables[2] != self.identities():
            with self._lock():
                self._sync(pl, fresh={})
                tables = self._tables(pl)
        if tables is None:  # pragma: no cover - just written under the lock
            raise UsageError(f"{self.root}: cannot read the store's tables")
        return tables[0], tables[1]

    def _tables(self, pl: Any) -> tuple[Any, Any, set[str]] | None:
        """(index, rows, indexed identities) as on disk; None when either table is missing,
        unreadable, of another layout, or the two disagree (then they are rebuilt)."""
        if not self.index_path.exists() or not self.rows_path.exists():
            return None
        index_schema, rows_schema = schemas(pl)
        try:
            index, rows = pl.read_parquet(self.index_path), pl.read_parquet(self.rows_path)
        except Exception:  # any damage: the receipts are the truth, the tables are rebuilt from them
            return None
        if dict(index.schema) != index_schema or dict(rows.schema) != rows_schema:
            return None
        ids = set(index.get_column("identity").to_list())
        with_rows = set(index.filter(pl.col("n_results") > 0).get_column("identity").to_list())
        if len(ids) != index.height or set(rows.get_column("identity").unique().to_list()) != with_rows:
            return None
        return index, rows, ids

    def _sync(self, pl: Any, fresh: dict[str, tuple[Receipt, str]]) -> int:
        self._clean_tmp()
        index_schema, rows_schema = schemas(pl)
        on_disk = self.identities()
        tables = self._tables(pl)
        if tables is None:
            index, rows, indexed = pl.DataFrame(schema=index_schema), pl.DataFrame(schema=rows_schema), set()
        else:
            index, rows, indexed = tables
        gone, missing = indexed - on_disk, sorted(on_disk - indexed)
        if tables is not None and not gone and not missing:
            return 0
        if gone:
            index = index.filter(~pl.col("identity").is_in(sorted(gone)))
            rows = rows.filter(~pl.col("identity").is_in(sorted(gone)))
        new_index: list[dict[str, Any]] = []
        new_rows: list[dict[str, Any]] = []
        for ident in missing:
            receipt, digest = fresh.get(ident) or self._load_stored(ident)
            new_index.append(receipt_facts(ident, receipt, digest))
            new_rows += result_rows(ident, receipt)
        index = pl.concat([index, pl.DataFrame(new_index, schema=index_schema)], how="vertical")
        rows = pl.concat([rows, pl.DataFrame(new_rows, schema=rows_schema)], how="vertical")
        index = index.sort(["created", "identity"], nulls_last=False)
        rows = rows.sort(["created", "identity", "runner", "case"], nulls_last=False)
        # rows first: a reader that finds an identity in the index finds its rows too
        atomic_parquet(rows, self.rows_path)
        atomic_parquet(index, self.index_path)
        return len(missing) + len(gone)

    def _load_stored(self, ident: str) -> tuple[Receipt, str]:
        """A stored receipt read for the tables, and its file's sha256; refused if its content
        no longer has its identity."""
        path = self.receipt_path(ident)
        try:
            blob = path.read_bytes()
        except OSError as e:
            raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None
        receipt = parse_receipt(blob, str(path))
        if receipt_identity(receipt) != ident:
            raise UsageError(f"{path}: its content does not match its identity (edited after it was "
                             f"stored?); restore it, or remove it: benchbox store rm {ident[:16]}")
        return receipt, hashlib.sha256(blob).hexdigest()

    def _tidy(self) -> None:
        """Remove a killed writer's temporary files now, if the store can be locked (a read-only
        store is left as it is)."""
        try:
            with self._lock():
                self._clean_tmp()
        except UsageError:
            pass

    def _clean_tmp(self) -> None:
        """Remove temporary files a killed writer left (called under the lock: no writer is active)."""
        for folder in (self.root, self.receipts_dir):
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for n in names:
                if TMP.fullmatch(n):
                    try:
                        os.unlink(folder / n)
                    except OSError:
                        pass

    @contextmanager
    def _lock(self) -> Iterator[None]:
        """An exclusive lock on the store while it is written (POSIX; none elsewhere)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        try:
            fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise UsageError(f"{self.root}: cannot lock the store: {e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _load_all(paths: Iterable[Path]) -> tuple[list[tuple[Path, bytes, Receipt, str]], list[tuple[Path, str]]]:
    """Each receipt with its bytes and identity, and each file that is not a receipt with why."""
    loaded: list[tuple[Path, bytes, Receipt, str]] = []
    skipped: list[tuple[Path, str]] = []
    for p in map(Path, paths):
        try:
            blob = read_receipt_bytes(p)
            receipt = parse_receipt(blob, str(p))
        except NotAReceipt as e:
            skipped.append((p, str(e)))
            continue
        loaded.append((p, blob, receipt, receipt_identity(receipt)))
    return loaded, skipped


def _resolve(ref: str, have: set[str]) -> str:
    """The stored identity ``ref`` names (all of it, or a unique prefix of 8 or more hex digits)."""
    ref = ref.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{8,64}", ref):
        raise UsageError(f"{ref!r:.80} is not a receipt identity (8 to 64 hex digits; benchbox store list "
                         "shows them)")
    hits = sorted(i for i in have if i.startswith(ref))
    if not hits:
        raise UsageError(f"{ref}: no stored receipt has this identity")
    if len(hits) > 1:
        raise UsageError(f"{ref}: names {len(hits)} stored receipts ({hits[0][:16]}, {hits[1][:16]}, ...); "
                         "give more digits")
    return hits[0]


