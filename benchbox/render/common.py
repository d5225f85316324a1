"""Formatting shared by every rendering: durations, intervals, the contract label, escaping."""

from __future__ import annotations

import json
import re
from typing import Any

from benchbox.durations import ms_number
from benchbox.receipts.model import Receipt


def ms(ns: Any) -> str:
    """Nanoseconds as milliseconds with three decimals ("-" when missing)."""
    return ms_number(ns)


def ci_ms(ci: Any) -> str:
    """An interval of nanoseconds as "[lo, hi]" in ms ("unresolved" when missing)."""
    return f"[{ms(ci[0])}, {ms(ci[1])}]" if isinstance(ci, (list, tuple)) and len(ci) == 2 else "unresolved"


def ratio_ci(ci: Any) -> str:
    """A ratio interval as "[lo, hi]" ("" when missing)."""
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if isinstance(ci, (list, tuple)) and len(ci) == 2 else ""


def contract_label(r: Receipt) -> str:
    c = r.contract
    return f"{c.name} ({c.first}..{c.last}, {c.clock} clock, hash {c.hash[:12]})"


#: Characters that control a terminal or reorder text: C0 (tab and newline included), DEL, C1 (so
#: every ESC/CSI/OSC sequence loses its introducer), line and paragraph separators, and the
#: bidirectional marks, embeddings, overrides and isolates.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: Line breaks (for markdown: one space each, so a value stays on its line).
#: :data:`_CONTROL` but C0, which JSON escapes itself (and whose newlines indent JSON output).
_JSON_CONTROL = re.compile("[\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_BREAKS = re.compile("\r\n|[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
#: ASCII punctuation that means something to CommonMark/GFM (code, emphasis, links, images,
#: headings, tables, strikethrough, GitHub's ``$…$`` math): each is backslash-escaped; ``_``
#: only where it could open or close emphasis (an ``_`` between letters or digits never does,
#: so ``model_io_wall`` stays); the ``:`` of ``://`` and the ``.`` of ``www.``, so no bare URL
#: becomes a link (GFM autolinks).
_MD_PUNCT = re.compile(r"([\\`*\[\]()#|~!{}$]|:(?=//)|(?<=[wW]{3})\.|(?<![^\W_])_|_(?![^\W_]))")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def _visible(ch: str) -> str:
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def terminal(text: Any) -> str:
    """Text from a receipt, contract or task made safe to print: every control character
    (C0 including newline, DEL, C1, line separators, bidi controls) is shown as a visible
    escape such as ``\\x1b``, so no escape sequence (OSC 52 clipboard writes, CSI screen
    clears, colours) reaches the terminal and one value stays on one line."""
    return _CONTROL.sub(lambda m: _visible(m.group()), str(text))


def terminal_lines(text: str) -> str:
    """Rendered output made safe to print: as :func:`terminal`, line by line (newlines kept)."""
    return "\n".join(terminal(line) for line in str(text).split("\n"))


def json_text(value: Any, indent: int = 2) -> str:
    """``value`` as JSON for tools, safe to print as it is: non-ASCII text stays readable, but
    every control character (DEL, C1, line separators, bidi controls; C0 is escaped by JSON
    itself) is written as a ``\\uXXXX`` escape. Such characters only occur inside strings, so
    the result is the same JSON value and always parses; it is printed as is, never through
    :func:`terminal`."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    return _JSON_CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def md(text: Any) -> str:
    """Text from a receipt for markdown (a table cell, a heading, a quote): on one line, with
    HTML (``<``, ``>``, ``&``: comments, tags, entities) as entities, every markdown
    punctuation that could open code, emphasis, a link, a heading, a table cell or math
    backslash-escaped, bare URLs broken (``https\\://``, ``www\\.``) so none is autolinked,
    and the remaining control characters shown as escapes."""
    s = terminal(_BREAKS.sub(" ", str(text)))
    s = _MD_PUNCT.sub(r"\\\1", s)
    return "".join(_HTML.get(ch, ch) for ch in s)
