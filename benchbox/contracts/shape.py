"""The shape limits a TOML declaration (a contract, a matrix plan) keeps before it is parsed."""

from __future__ import annotations

import re

from benchbox.errors import UsageError

#: Shape limits a TOML document must keep before it is parsed (``tomllib`` spends time and
#: memory quadratic in a dotted key's parts, and recurses on nesting): arrays and inline
#: tables nested at most this deep, a dotted key of at most this many parts, at most this
#: many keys (``key = value`` pairs and ``[table]`` or ``[[array of tables]]`` headers, whose
#: dotted parts are bounded as a key's) and this many array elements.
MAX_TOML_NESTING = 16
MAX_TOML_KEY_PARTS = 16
MAX_TOML_KEYS = 1_000
MAX_TOML_VALUES = 10_000

_TOML_TOKEN = re.compile(r"""\"\"\"|'''|["'#\[\]{}=,.\n]""")
_TOML_STRING_END = {'"': re.compile(r'(?:[^"\\\n]|\\.)*"'), "'": re.compile(r"[^'\n]*'"),
                    '"""': re.compile(r'(?:[^"\\]|\\.|"(?!""))*"""(?:"{0,2})', re.S),
                    "'''": re.compile(r"(?:[^']|'(?!''))*'''(?:'{0,2})", re.S)}


def _toml_limit(kind: str, n: int, where: str) -> UsageError:
    return UsageError(f"{where}: {kind} over the limit of {n}")


def check_toml_shape(text: str, where: str) -> None:
    """Refuse (one-line UsageError) a TOML document over the shape limits, in one linear scan
    that skips strings and comments; what passes is left to the parser to judge."""
    depth = keys = values = parts = 0
    at = 0
    line_start = True  # no token yet on this line: a ``[`` here at depth 0 opens a table header
    while (m := _TOML_TOKEN.search(text, at)) is not None:
        tok, at = m.group(), m.end()
        header = tok == "[" and depth == 0 and line_start
        line_start = tok == "\n"
        if header:
            keys += 1
            if keys > MAX_TOML_KEYS:
                raise _toml_limit("keys", MAX_TOML_KEYS, where)
        if tok in _TOML_STRING_END:
            end = _TOML_STRING_END[tok].match(text, at)
            if end is None:
                return  # an unterminated string: the parser says so
            at = end.end()
            continue  # a quoted key is one part of a dotted key
        if tok == "#":
            nl = text.find("\n", at)
            at = len(text) if nl < 0 else nl
            continue
        if tok == ".":
            parts += 1
            if parts >= MAX_TOML_KEY_PARTS:
                raise _toml_limit("a dotted key with parts", MAX_TOML_KEY_PARTS, where)
            continue
        elif tok in "[{":
            depth += 1
            if depth > MAX_TOML_NESTING:
                raise _toml_limit("arrays or tables nested levels", MAX_TOML_NESTING, where)
        elif tok in "]}":
            depth = max(0, depth - 1)
        elif tok == "=":
            keys += 1
            if keys > MAX_TOML_KEYS:
                raise _toml_limit("keys", MAX_TOML_KEYS, where)
        elif tok == ",":
            values += 1
            if values > MAX_TOML_VALUES:
                raise _toml_limit("values", MAX_TOML_VALUES, where)
        parts = 0
