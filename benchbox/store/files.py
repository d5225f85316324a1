"""The store's directory: created whole or not at all, its marker file, and the atomic writes of
its files."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchbox.errors import UsageError
from benchbox.fileio import umask, write_atomic, write_atomic_with
from benchbox.store.tables import RECEIPTS_DIR

STORE_FORMAT = "benchbox-store"
STORE_VERSION = 1
MARKER = "store.json"
#: Temporary files of the store's atomic writes (``.NAME.XXXX.tmp``), and the hidden folder a
#: store is built in before it is renamed into place.
TMP = re.compile(r"\..+\.tmp")
_NEW = ".new-"



def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _skeleton_only(folder: Path) -> bool:
    """Nothing in ``folder`` but what creating a store puts there first (an empty ``receipts/``, the
    marker, the lock, temporary files): a creation a crash interrupted."""
    try:
        names = set(os.listdir(folder))
        receipts = os.listdir(folder / RECEIPTS_DIR) if RECEIPTS_DIR in names else []
    except OSError:
        return False
    return not receipts and all(n in (RECEIPTS_DIR, MARKER, ".lock") or TMP.fullmatch(n) for n in names)


def _clean_stale_builds(parent: Path, name: str) -> None:
    """Remove the hidden build folders of stores whose creating process died before the rename."""
    prefix = f".{name}{_NEW}"
    try:
        names = [n for n in os.listdir(parent) if n.startswith(prefix)]
    except OSError:
        return
    for n in names:
        pid = n[len(prefix):].split("-", 1)[0]
        folder = parent / n
        if pid.isdigit() and not _alive(int(pid)) and _skeleton_only(folder):
            shutil.rmtree(folder, ignore_errors=True)


def _marker_blob() -> bytes:
    return json.dumps({"format": STORE_FORMAT, "version": STORE_VERSION}, indent=1).encode()


def _create(root: Path) -> None:
    """Make the store at ``root`` whole or not at all: built in a hidden folder beside it, then
    renamed into place. A directory left by an interrupted creation is finished in place."""
    if root.is_dir():
        if not _skeleton_only(root):
            raise UsageError(f"{root}: not a benchbox store (no {MARKER}) and not empty; "
                             "name a new or empty directory")
        (root / RECEIPTS_DIR).mkdir(exist_ok=True)
        atomic_write(root / MARKER, _marker_blob())
        return
    parent = root.parent
    parent.mkdir(parents=True, exist_ok=True)
    _clean_stale_builds(parent, root.name)
    build = Path(tempfile.mkdtemp(prefix=f".{root.name}{_NEW}{os.getpid()}-", dir=parent))
    try:
        (build / RECEIPTS_DIR).mkdir()
        atomic_write(build / MARKER, _marker_blob())
        os.chmod(build, 0o777 & ~umask())
        os.rename(build, root)
    except OSError:
        if not (root / MARKER).exists():  # not another writer's store, made as this one was built
            raise
    finally:
        if build.exists():
            shutil.rmtree(build, ignore_errors=True)


def read_marker(root: Path) -> dict[str, Any]:
    marker = root / MARKER
    try:
        if root.exists() and not root.is_dir():
            raise UsageError(f"{root}: not a directory, so not a receipt store")
        if not marker.exists():
            _create(root)
        meta = json.loads(marker.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"{root}: cannot open the store: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError):
        raise UsageError(f"{marker}: not a benchbox store marker (invalid JSON)") from None
    if not isinstance(meta, dict) or meta.get("format") != STORE_FORMAT:
        raise UsageError(f"{marker}: not a benchbox store marker")
    return meta


def atomic_write(path: Path, blob: bytes) -> None:
    try:
        write_atomic(path, blob)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


def atomic_parquet(df: Any, path: Path) -> None:
    try:
        write_atomic_with(path, df.write_parquet)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
