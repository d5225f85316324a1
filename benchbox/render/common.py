"""Formatting shared by every rendering: durations, intervals, device labels, escaping."""

from __future__ import annotations

from typing import Any

from benchbox.receipts.model import Receipt


def ms(ns: Any) -> str:
    """Nanoseconds as milliseconds with three decimals ("-" when missing)."""
    return f"{ns / 1e6:.3f}" if isinstance(ns, (int, float)) and not isinstance(ns, bool) else "-"


def ci_ms(ci: Any) -> str:
    """An interval of nanoseconds as "[lo, hi]" in ms ("unresolved" when missing)."""
    return f"[{ms(ci[0])}, {ms(ci[1])}]" if isinstance(ci, (list, tuple)) and len(ci) == 2 else "unresolved"


def ratio_ci(ci: Any) -> str:
    """A ratio interval as "[lo, hi]" ("" when missing)."""
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if isinstance(ci, (list, tuple)) and len(ci) == 2 else ""


def contract_label(r: Receipt) -> str:
    c = r.contract
    return f"{c.name} ({c.first}..{c.last}, {c.clock} clock, hash {c.hash[:12]})"


def md(text: Any) -> str:
    """Text for a markdown table cell: pipes escaped, on one line."""
    return str(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")
