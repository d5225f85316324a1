"""benchbox.durations: the one home of duration text, checked against the formatters it replaced
(copied here as they were), so every output that shows a time stays byte for byte the same."""

from __future__ import annotations

import math
from typing import Any

import pytest

from benchbox.durations import clock_text, duration_text, ms_number
from benchbox.receipts.judge import fmt_delta
from benchbox.render.common import ms
from benchbox.report.html import ms as site_ms
from benchbox.runners.compile_draws import _ms as draws_ms

NS = [0, 1, 999, 999.4, 999.6, 1000, 1234.5, 12_345, 999_999, 1e6, 1_234_567, 9.87654e9, 1.5e12]
VALUES = [*NS, *(-v for v in NS), 0.5, -0.5, 1e-9]
SECONDS = [0, 0.4, 0.6, 59.5, 75, 3599.4, 3599.6, 3600, 3725, 86_400 * 2 + 5]


def _old_site_ms(ns: float | None) -> str:
    if ns is None:
        return "–"
    a = abs(ns)
    if a >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def _old_fmt_delta(ns: float) -> str:
    a = abs(ns)
    if a >= 1e6:
        return f"{ns / 1e6:+.1f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:+.1f} µs"
    return f"{ns:+.0f} ns"


def _old_render_ms(ns: Any) -> str:
    return f"{ns / 1e6:.3f}" if isinstance(ns, (int, float)) and not isinstance(ns, bool) else "-"


def _old_draws_ms(ns: float | None) -> str:
    return "?" if ns is None else f"{ns / 1e6:.4g}"


def _old_clock_text(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


@pytest.mark.parametrize("ns", VALUES)
def test_every_duration_format_is_what_it_was(ns: float) -> None:
    assert site_ms(ns) == _old_site_ms(ns)
    assert fmt_delta(ns) == _old_fmt_delta(ns)
    assert ms(ns) == _old_render_ms(ns)
    assert draws_ms(ns) == _old_draws_ms(ns)


def test_missing_values_read_as_they_did() -> None:
    assert site_ms(None) == "–" and draws_ms(None) == "?"
    for odd in (None, True, "12", [1]):
        assert ms(odd) == "-"


@pytest.mark.parametrize("seconds", [*SECONDS, None])
def test_clock_text_is_what_it_was(seconds: float | None) -> None:
    assert clock_text(seconds) == _old_clock_text(seconds)


def test_the_formats_by_example() -> None:
    assert duration_text(1_234_567) == "1.235 ms" and duration_text(12_345) == "12.35 µs"
    assert duration_text(-800, signed=True) == "-800 ns" and duration_text(800, signed=True) == "+800 ns"
    assert duration_text(2.5e6, digits=(1, 1), signed=True) == "+2.5 ms"
    assert ms_number(1_234_567) == "1.235" and ms_number(1_234_567, ".4g") == "1.235"
    assert ms_number(math.nan) == "nan" and clock_text(3725) == "1:02:05"
