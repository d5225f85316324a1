"""Durations as text: the one home of the formats a receipt's times are shown in. Imports
nothing of benchbox."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def duration_text(ns: float | None, *, digits: tuple[int, int] = (3, 2), signed: bool = False,
                  missing: str = "–") -> str:
    """Nanoseconds in the most readable unit: ``1.234 ms``, ``12.50 µs``, ``800 ns``.

    ``digits``: decimals for ms and µs (ns has none); ``signed``: always show the sign
    (``+1.2 ms``); ``missing``: the text for None.
    """
    if ns is None:
        return missing
    sign = "+" if signed else ""
    a = abs(ns)
    if a >= 1e6:
        return f"{ns / 1e6:{sign}.{digits[0]}f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:{sign}.{digits[1]}f} µs"
    return f"{ns:{sign}.0f} ns"


def ms_number(ns: Any, spec: str = ".3f", missing: str = "-") -> str:
    """Nanoseconds as a number of milliseconds without the unit (``format`` ``spec``);
    ``missing`` for anything that is not a number."""
    if isinstance(ns, (int, float)) and not isinstance(ns, bool):
        return f"{ns / 1e6:{spec}}"
    return missing


def clock_text(seconds: float | None) -> str:
    """Seconds as a clock: ``75`` → ``1:15``, ``3725`` → ``1:02:05``; None → ``?``."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def left_text(walls: Sequence[float], left: int, what: str) -> str:
    """`` · ≈3:20 left for 4 cells`` at the mean of ``walls`` (the wall times of the ``what``
    done so far, in seconds), or ``""`` before any or when none is left."""
    if not walls or left <= 0:
        return ""
    plural = "s" if left != 1 else ""
    return f" · ≈{clock_text(sum(walls) / len(walls) * left)} left for {left} {what}{plural}"
