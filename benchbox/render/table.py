"""Terminal tables with rich, rendered to plain text.

On a terminal a table fits the terminal's width (long cells wrap inside their column);
elsewhere it takes its natural width up to :data:`PLAIN_WIDTH` characters, so piped
output and tests see the same lines wherever they run. No colour codes: the text is the
same wherever it goes. Cells are text, never markup, so a name from a receipt prints as
it is.
"""

from __future__ import annotations

import io
import shutil
import sys
from collections.abc import Sequence
from typing import Any

#: the widest a table may be measured at
NATURAL_WIDTH = 400
#: the width of a table when stdout is not a terminal and the table is wider than that
PLAIN_WIDTH = 120


def terminal_width() -> int | None:
    """The terminal's width when stdout is one; None otherwise (natural width)."""
    try:
        if sys.stdout.isatty():
            return shutil.get_terminal_size().columns
    except (AttributeError, ValueError, OSError):
        pass
    return None


def _console(width: int) -> Any:
    from rich.console import Console

    return Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False,
                   no_color=True, highlight=False, emoji=False, markup=False, legacy_windows=False)


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[str] = (),
          wrap: Sequence[str] = (), width: int | None = None) -> str:
    """A table of ``rows`` under ``columns`` as text; ``right`` columns right-aligned (numbers).

    ``wrap`` columns may wrap at a narrow width; the others keep their content on one line.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from benchbox.render.common import terminal, terminal_lines

    # cells come from receipts, contracts and tasks: control characters are shown, never sent;
    # a cell's own line breaks are kept (callers pass names through terminal() first, so a name
    # cannot break a line)
    columns = [terminal(c) for c in columns]
    right = [terminal(c) for c in right]
    wrap = [terminal(c) for c in wrap]
    rows = [["" if v is None else terminal_lines(str(v)) for v in r] for r in rows]
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    for c in columns:
        # ``wrap`` columns may break between words; the others keep a cell on one line
        t.add_column(Text(c), justify="right" if c in right else "left", no_wrap=c not in wrap,
                     overflow="fold")
    for r in rows:
        t.add_row(*(Text("" if v is None else str(v)) for v in r))
    w = width or terminal_width()
    if w is not None and _console(NATURAL_WIDTH).measure(t).minimum > w:
        return records(columns, rows, w)
    return render(t, w)


def records(columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int) -> str:
    """Rows too wide for the width as records: the first two cells as a heading, then the rest."""
    import textwrap

    out = []
    for r in rows:
        cells = ["" if v is None else str(v) for v in r]
        out += textwrap.wrap(" · ".join(x for x in cells[:2] if x), width) or [""]
        rest = " · ".join(f"{c} {v}" for c, v in zip(columns[2:], cells[2:]) if v)
        out += textwrap.wrap(rest, width, initial_indent="  ", subsequent_indent="  ") if rest else []
    return "\n".join(out)


def render(renderable: Any, width: int | None = None) -> str:
    """Any rich renderable as text: at ``width``, else the terminal's, else its natural width."""
    w = width or terminal_width()
    console = _console(w or NATURAL_WIDTH)
    if w is None:
        console = _console(min(PLAIN_WIDTH, max(20, console.measure(renderable).maximum)))
    console.print(renderable)
    text = console.file.getvalue()
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def wrapped(text: str, indent: int = 0, width: int | None = None) -> str:
    """A long line wrapped at the terminal's width (unchanged when not a terminal); control
    characters in it (from a receipt, a contract, a task) shown as escapes."""
    from benchbox.render.common import terminal

    text = terminal(text)
    w = width or terminal_width()
    if w is None or len(text) + indent <= w:
        return " " * indent + text
    import textwrap

    return textwrap.fill(text, width=w, initial_indent=" " * indent, subsequent_indent=" " * (indent + 2))
