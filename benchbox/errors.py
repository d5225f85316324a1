"""Errors that the CLI turns into one line and an exit code."""

from __future__ import annotations


class BenchboxError(Exception):
    """An error with a one-line message and the exit code the CLI should use."""

    exit_code = 1


class UsageError(BenchboxError):
    """Unusable input: a bad file, option, contract, receipt or task (exit 2)."""

    exit_code = 2


class MissingExtraError(UsageError):
    """An optional package is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(f"{package} is not installed: pip install 'benchbox[{extra}]'")
        self.package = package
        self.extra = extra
