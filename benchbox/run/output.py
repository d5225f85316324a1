"""Where a run's receipts go: checked and claimed before anything is measured, kept when a write fails.

- A path where something other than a regular file is (a symbolic link, a device, a FIFO,
  a socket, a directory) is refused: writing the receipt would replace it. So is one where
  the run's log goes (``NAME.log``, appended to): it would write through a link or wait on a FIFO.
- An existing receipt is refused unless ``overwrite`` is set: a run never silently replaces
  another run's rows.
- A lock (``flock`` on ``.NAME.lock`` beside the receipt) is held for the whole run: a run on
  a path that another run is writing is refused, with ``overwrite`` too. The lock file is
  removed when the run ends (one left by a killed run holds no lock and is reused).
- Without ``out``, the receipt is ``receipts/run-STAMP.json``, or ``run-STAMP-2.json`` and so
  on: the first name that is free and not locked, so runs started in the same second differ.
- The first write creates the receipt exclusively (never replacing anything); later writes
  replace it atomically.
- When a write fails once measuring has begun (a full disk), the receipts go to a fresh
  folder in the temporary directory instead; if that fails too, they stay in memory. The
  run goes on; :attr:`Output.problem` says what happened and where the rows are.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchbox.errors import FieldError, UsageError
from benchbox.receipts.build import ReceiptSet
from benchbox.receipts.io import ReceiptWriteError, now_iso, write_receipt

_KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}


def out_paths(out: Path | None, names: Sequence[str]) -> list[Path]:
    """One receipt path per contract: ``out`` itself for one, ``stem.CONTRACT.json`` for several."""
    base = Path(out) if out is not None else default_out()
    if len(names) == 1:
        return [base]
    return [base.with_name(f"{base.stem}.{n}{base.suffix or '.json'}") for n in names]


def default_out() -> Path:
    stamp = now_iso().replace(":", "").replace("+0000", "Z").replace("-", "")
    return Path("receipts") / f"run-{stamp}.json"


def log_path(receipt: Path) -> Path:
    """The run's log of library output, beside its (first) receipt."""
    return receipt.with_suffix(".log")


def refuse_odd_path(path: Path, what: str = "receipt") -> bool:
    """FieldError (out) if something other than a regular file is at ``path``; whether a file is there.
    ``what``: the receipt, or the log beside it (which is appended to, never replaced)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot write receipt {path}: {getattr(e, 'strerror', None) or e}") from None
    if stat.S_ISREG(mode):
        return True
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    kind_is = "is a symbolic link" if stat.S_ISLNK(mode) else f"is not a regular file ({kind})"
    if what != "receipt":
        raise FieldError("out", f"{what} path {path} {kind_is}; the run's {what} never writes to it: remove "
                                "it or choose another receipt path")
    raise FieldError("out", f"receipt path {path} {kind_is}; a receipt never replaces it: "
                            "choose another path")


class PathBusy(FieldError):
    """Another run holds the lock of a receipt path."""


class PathLock:
    """An exclusive ``flock`` on ``.NAME.lock`` beside a receipt, held until :meth:`release`."""

    def __init__(self, path: Path, lock_path: Path, fd: int) -> None:
        self.path, self.lock_path, self.fd = path, lock_path, fd

    def release(self) -> None:
        if self.fd < 0:
            return
        try:
            os.unlink(self.lock_path)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = -1


def lock_receipt_path(path: Path) -> PathLock:
    """Lock a receipt path for one run; PathBusy if another run holds it."""
    lock_path = path.with_name(f".{path.name}.lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise PathBusy("out", f"another benchbox run is writing {path} (it holds {lock_path}); "
                                      "wait for it or choose another path") from None
            try:  # the holder may have removed the file between our open and our lock
                if os.fstat(fd).st_ino == os.stat(lock_path).st_ino:
                    return PathLock(path, lock_path, fd)
            except FileNotFoundError:
                pass
            os.close(fd)
    except OSError as e:
        raise UsageError(f"cannot write receipt {path}: {e.strerror or e}") from None


def _claim(paths: list[Path], overwrite: bool) -> list[PathLock] | None:
    """Locks on every path, or None (and nothing held) if one is busy or, without overwrite, exists."""
    locks: list[PathLock] = []
    try:
        for p in paths:
            locks.append(lock_receipt_path(p))
        existing = [p for p in paths if refuse_odd_path(p)]
        refuse_odd_path(log_path(paths[0]), "log")
    except BaseException:
        for lock in locks:
            lock.release()
        raise
    if existing and not overwrite:
        for lock in locks:
            lock.release()
        return None
    return locks


class Output(ReceiptSet):
    """A run's receipts on disk (one per contract), with the paths claimed for the run."""

    def __init__(self, paths: Sequence[Path], locks: Sequence[PathLock], overwrite: bool) -> None:
        super().__init__(paths, [])
        self.asked = list(paths)
        self.locks = list(locks)
        self.exclusive = not overwrite
        #: what went wrong with writing, and where the rows went instead (None: all is well)
        self.problem: str | None = None
        self.in_memory = False

    @classmethod
    def claim(cls, out: Path | None, names: Sequence[str], overwrite: bool,
              paths: Sequence[Path] | None = None) -> Output:
        """Check and lock the receipt paths of a run (UsageError before anything is measured).

        ``paths``: the receipt paths given one by one (a sweep's points), in place of ``out``.
        """
        if out is not None or paths is not None:
            paths = list(paths) if paths is not None else out_paths(out, names)
            for p in paths:
                refuse_odd_path(p)
            locks = _claim(paths, overwrite)
            if locks is None:
                there = ", ".join(str(p) for p in paths if p.exists())
                raise FieldError("overwrite", f"needed to replace the existing receipt {there} (or choose "
                                              "another receipt path)")
            return cls(paths, locks, overwrite)
        base = default_out()
        for n in itertools.count(1):
            candidate = base if n == 1 else base.with_name(f"{base.stem}-{n}{base.suffix}")
            paths = out_paths(candidate, names)
            try:
                locks = _claim(paths, overwrite=False)
            except PathBusy:
                continue
            if locks is not None:
                return cls(paths, locks, overwrite=False)
        raise AssertionError("unreachable")

    def release(self) -> None:
        for lock in self.locks:
            lock.release()

    @property
    def where(self) -> str:
        if self.in_memory:
            return "memory only (not written)"
        return ", ".join(str(p) for p in self.paths)

    def save(self) -> None:
        if self.in_memory:
            return
        try:
            for path, receipt, encoder in zip(self.paths, self.receipts, self.encoders):
                write_receipt(path, receipt, exclusive=self.exclusive and not self.opened, encoder=encoder)
        except ReceiptWriteError as e:
            if not self.opened:
                raise  # nothing is measured yet: the path is unusable
            self._divert(e)
        self.opened = True

    def _divert(self, e: ReceiptWriteError) -> None:
        """Write every receipt to a fresh temporary folder; failing that, keep them in memory."""
        cause = f"{e}" + (" (disk full)" if e.error.errno == errno.ENOSPC else "")
        if self.problem is None:
            folder: Path | None = None
            try:
                folder = Path(tempfile.mkdtemp(prefix="benchbox-rescued-"))
                paths = [folder / p.name for p in self.asked]
                for path, receipt, encoder in zip(paths, self.receipts, self.encoders):
                    write_receipt(path, receipt, exclusive=True, encoder=encoder)
            except (OSError, UsageError):
                if folder is not None:  # a rescue that failed leaves no folder (the results stay in memory)
                    shutil.rmtree(folder, ignore_errors=True)
            else:
                self.paths = paths
                self.problem = f"{cause}; the receipts were written to {folder} instead"
                return
        self.in_memory = True
        if self.problem is None:
            self.problem = f"{cause}; the receipts could not be written anywhere: the results are only in " \
                           "the table below"
        else:
            self.problem += f"; then {e}: the last results are only in the table below"
