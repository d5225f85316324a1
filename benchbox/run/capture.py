"""Library output during a run — warnings, compiler logs — kept out of the terminal.

torch's warnings and inductor's AUTOTUNE blocks write to stderr while a runner compiles
or runs. :class:`OutputLog` captures them per phase (Python warnings, ``sys.stderr`` and
file descriptor 2 alike), appends them to a log file next to the receipt, and gives each
runner's text for its runner report (bounded: :data:`REPORT_CHARS`).
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: the most characters of captured output a runner report keeps (the log file keeps all)
REPORT_CHARS = 4000


class OutputLog:
    """Captured output of a run, by phase; each phase's is written to ``path`` (and echoed) when
    the phase ends."""

    def __init__(self, path: Path | None, echo: Callable[[str], None] | None = None) -> None:
        self.path, self.echo = path, echo
        self.by_key: dict[str, list[str]] = {}

    @contextlib.contextmanager
    def capture(self, label: str, key: str = "") -> Iterator[list[str]]:
        """Capture what the block writes to stderr or warns; yields the list the text is added to."""
        out: list[str] = []
        box: list[str] = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            try:
                with _stderr_to_file(box):
                    yield out
            finally:
                lines = [f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}" for w in caught]
                text = "\n".join(filter(None, [*lines, "".join(box).rstrip("\n")]))
                if text:
                    out.append(text)
                    self._add(label, key, text)

    def _add(self, label: str, key: str, text: str) -> None:
        self.by_key.setdefault(key, []).append(f"[{label}]\n{text}")
        if self.echo is not None:
            self.echo(f"[{label}]\n{text}")
        if self.path is None:
            return
        try:
            with _open_log(self.path) as f:
                f.write(f"== {label}\n{text}\n")
        except OSError:
            self.path = None  # the log is a convenience: a run never fails for it

    def report(self, key: str) -> dict[str, Any] | None:
        """The runner report's ``log`` entry for ``key`` (a runner), bounded; None when nothing came."""
        parts = self.by_key.get(key)
        if not parts:
            return None
        text = "\n".join(parts)
        entry: dict[str, Any] = {"lines": text.count("\n") + 1, "chars": len(text)}
        if len(text) > REPORT_CHARS:
            entry["text"] = "…" + text[-(REPORT_CHARS - 1):]
            entry["truncated"] = True
        else:
            entry["text"] = text
        if self.path is not None:
            entry["file"] = str(self.path)
        return entry


def _open_log(path: Path) -> io.TextIOWrapper:
    """``path`` opened to append, never through a symbolic link nor waiting on a FIFO (OSError:
    a link, a FIFO without reader, anything that is not a regular file)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return open(fd, "a", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def _stderr_to_file(into: list[str]) -> Iterator[None]:
    """Send ``sys.stderr`` and descriptor 2 to a temporary file; append what came to ``into``."""
    buf = io.StringIO()
    tmp = tempfile.TemporaryFile()
    with contextlib.suppress(AttributeError, ValueError, OSError):
        sys.stderr.flush()
    try:
        saved: int | None = os.dup(2)
        os.dup2(tmp.fileno(), 2)
    except OSError:
        saved = None
    try:
        with contextlib.redirect_stderr(buf):
            yield
    finally:
        if saved is not None:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        raw = tmp.read().decode("utf-8", errors="replace")
        tmp.close()
        into.append(buf.getvalue() + raw)
