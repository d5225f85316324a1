"""Errors that the CLI turns into one line and an exit code.

Library messages name configuration fields, never command-line flags: a :class:`FieldError`
leads with its field (``samples: must be ≥ 1``), and a setting a message suggests is a
:class:`Setting`, written ``field=value`` (``accept=incomplete``) and listed in the error's
``settings``. The command line shows both under their flags (``--samples: must be ≥ 1``,
``--accept incomplete``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    """A setting a message suggests: ``field=value`` in the library's wording; the command line
    shows it under the flag that sets the field (``--flag value``)."""

    field: str
    value: str

    def __str__(self) -> str:
        return f"{self.field}={self.value}"


class BenchboxError(Exception):
    """An error with a one-line message and the exit code the CLI should use; ``settings``: the
    settings its message names."""

    exit_code = 1
    #: receipts whose results no write reached (all writes failed): the command line shows them
    #: as tables before the error's line, the only place they then exist
    unsaved: tuple[Any, ...] = ()
    settings: tuple[Setting, ...] = ()

    def __init__(self, *args: Any, settings: Sequence[Setting] = ()) -> None:
        super().__init__(*args)
        self.settings = tuple(settings)


class UsageError(BenchboxError):
    """Unusable input: a bad file, option, contract, receipt or task (exit 2)."""

    exit_code = 2


class MissingExtraError(UsageError):
    """An optional package is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(f"{package} is not installed: pip install 'benchbox-contracts[{extra}]'")
        self.package = package
        self.extra = extra


def first_line(e: BaseException | str, limit: int = 500) -> str:
    """The first non-empty line of an error's message (its class name when there is none), cut to
    ``limit`` characters: how every caught error is shown in one line."""
    text = (e if isinstance(e, str) else str(e)).strip()
    line = text.splitlines()[0].strip() if text else ""
    if not line and not isinstance(e, str):
        line = type(e).__name__
    return line[:limit]


def last_line(text: str, limit: int = 500, empty: str = "no output") -> str:
    """The last non-empty line of a tool's output (where its final error stands), cut to ``limit``."""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return (lines[-1] if lines else empty)[:limit]


def error_line(e: BaseException, limit: int = 500) -> str:
    """``Class: first line`` of an error, for reasons recorded in receipts."""
    msg = first_line(e, limit) if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}"[:limit]


class FieldError(UsageError):
    """A configuration value is unusable; ``field`` names it (the CLI shows its flag instead)."""

    def __init__(self, field: str, message: str, settings: Sequence[Setting] = ()) -> None:
        super().__init__(f"{field}: {message}", settings=settings)
        self.field = field
        self.message = message


def did_you_mean(name: str, known: Any) -> str:
    """``did you mean 'x'? `` for the known name closest to a misspelt one (difflib), else ``""``:
    put before the list of known names in an "unknown ..." message."""
    import difflib

    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'? " if close else ""
