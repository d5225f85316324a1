"""Writing a file so that a reader, or a crash at any instant, sees the old file or the new one
whole, never a mixture: a temporary file beside it (``.NAME.XXXX.tmp``), fsync, rename, fsync
the folder. The one home of atomic writes; it imports nothing of benchbox and raises the
operating system's ``OSError``, which each caller words for its own files."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def umask() -> int:
    """The process's file-mode creation mask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable, where the file system can sync a folder."""
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


def _publish(tmp: str, path: Path, exclusive: bool) -> None:
    """Put the written temporary file at ``path``: replacing it, or only where nothing is."""
    if not exclusive:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # atomic, and fails with EEXIST where anything is at ``path``
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links: claim the name, then replace
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def write_atomic_with(path: Path | str, write: Callable[[str], None], *, exclusive: bool = False,
                      parents: bool = False) -> None:
    """Atomically put at ``path`` the file that ``write(name)`` writes at a temporary name.

    ``exclusive``: only where nothing is yet (FileExistsError otherwise), never replacing
    anything. ``parents``: create the missing folders above ``path``. The file gets the mode
    a plain write would (0o666 less the umask). Raises OSError; nothing is left behind.
    """
    path = Path(path)
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    left: str | None = tmp
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~umask())
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        _publish(tmp, path, exclusive)
        left = None
        fsync_dir(path.parent)
    finally:
        if left is not None:
            try:
                os.unlink(left)
            except OSError:
                pass


def write_atomic(path: Path | str, data: bytes | str, *, exclusive: bool = False,
                 parents: bool = False) -> None:
    """Atomically write ``data`` (text is written as UTF-8) at ``path``; as :func:`write_atomic_with`."""
    blob = data.encode() if isinstance(data, str) else data

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(blob)

    write_atomic_with(path, write, exclusive=exclusive, parents=parents)


def replace_dir(new: Path, out: Path) -> None:
    """Put the folder ``new`` (built beside ``out``) at ``out``: a folder already there is moved
    aside into a hidden one beside ``new``, ``new`` renamed into place, then the old one
    removed. A reader sees the old folder or the new one whole; between the two renames, none.
    Raises OSError."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=new.parent))
        os.replace(out, old / out.name)
    os.replace(new, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


#: what :func:`folder_problem` says when not even the root exists
NO_PARENT = "no existing parent directory"


def folder_problem(folder: Path) -> str | None:
    """None when ``folder`` is, or can be made, a writable directory; else why not (nothing is
    created): :data:`NO_PARENT`, ``P is not a directory`` or ``P is not writable``, where ``P`` is
    ``folder`` or the nearest folder above it that exists."""
    p = folder
    while not p.exists():
        if p.parent == p:
            return NO_PARENT
        p = p.parent
    if not p.is_dir():
        return f"{p} is not a directory"
    if not os.access(p, os.W_OK | os.X_OK):
        return f"{p} is not writable"
    return None
