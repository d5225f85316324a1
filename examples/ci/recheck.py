"""A regression found by one set of processes, checked by a second, independent set.

    python examples/ci/recheck.py FIRST.json SECOND.json

FIRST.json and SECOND.json are ``benchbox diff --format json`` of two independent sets of
alternating base/head processes (the CI recipe runs the second set only when the first found a
regression). A row is a regression only when both sets judge it one (``slower``, or newly
invalid), so identical code fails the job with about α² (0.05² = 0.0025) instead of α, and a
regression both sets can resolve still fails it. Prints a markdown section saying what the
second set found, row by row, and exits with the gate's code:

- 1: a row is a regression in both sets;
- 2: the second set's comparison was refused;
- 3: a row is ``unreliable`` in either set, or the second set could judge no row (as
  ``benchbox diff`` exits 3: the job cannot say there is no regression);
- 0: otherwise (what the first set found was not found again).

With a committed baseline (bench.sh's OUT_DIR/baseline.json) both sets compare against the same
baseline, so only HEAD's side is measured twice: an unlucky baseline is found again.

Names from the receipts (task, case, runner) are escaped, so nothing in them renders as markdown
or HTML where the report is shown. Standard library only: the verdict job runs it from the base
revision's checkout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: the verdicts that judged a row (as benchbox.receipts.diff_result.JUDGED)
JUDGED = ("slower", "faster", "unchanged", "unresolved")
#: what could open markdown (code, emphasis, a link, a heading, a table cell, math) in a line
_MD_SPECIAL = set("\\`*_{}[]()#!|~$")


def _name(text: object) -> str:
    """A name from a receipt for one markdown line: control characters and line breaks as
    spaces, markdown and HTML punctuation backslash-escaped (``<``, ``>``, ``&`` as entities)."""
    out = []
    for ch in str(text)[:200]:
        if ch in "<>&":
            out.append({"<": "&lt;", ">": "&gt;", "&": "&amp;"}[ch])
        elif ch in _MD_SPECIAL:
            out.append("\\" + ch)
        elif ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 or ch in "\u2028\u2029":
            out.append(" ")
        else:
            out.append(ch)
    # no bare URL is autolinked
    return "".join(out).replace("://", ":\\/\\/").replace("www.", "www\\.")


def _key(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["task"], row["case"], row["runner"]


def _judged(row: dict[str, Any]) -> dict[str, Any] | None:
    """The row's first metric judged with an interval (not advisory), as the diff reports it."""
    return next((m for m in row.get("metrics", []) if m.get("ci") and not m.get("advisory")), None)


def _said(row: dict[str, Any] | None) -> str:
    """A row's verdict with its judged metric's ratio and interval: ``slower ×1.282 [1.089, 1.510]``."""
    if row is None:
        return "not in the second set"
    judged = _judged(row)
    if judged is None or judged.get("ratio") is None:
        return _name(row["verdict"])
    low, high = judged["ci"]
    return f"{_name(row['verdict'])} ×{judged['ratio']:.3f} [{low:.3f}, {high:.3f}]"


def confirmed(first: dict[str, Any], second: dict[str, Any]) -> tuple[int, list[str]]:
    """The gate's exit code and one markdown line a row the first set found a regression."""
    found = [r for r in first["rows"] if r.get("regression")]
    if "rows" not in second or int(second.get("exit_code", 2)) == 2:
        return 2, [f"- {_name(r['runner'])} × {_name(r['case'])}: first {_said(r)}; the second set's "
                   "comparison was refused" for r in found]
    again = {_key(r): r for r in second["rows"]}
    both = [r for r in found if again.get(_key(r), {}).get("regression")]
    task = len({r["task"] for r in found}) > 1
    lines = [f"- {_name(r['task']) + ' · ' if task else ''}{_name(r['runner'])} × {_name(r['case'])}: "
             f"first {_said(r)}; second {_said(again.get(_key(r)))}"
             + (" — **confirmed**" if r in both else " — not confirmed") for r in found]
    if both:
        return 1, lines
    # not confirmed: what remains is what benchbox diff would say without the regression found
    # once; an unreliable row in either set, or a second set that judged nothing, is exit 3
    if any(r.get("verdict") == "unreliable" for r in [*first["rows"], *second["rows"]]):
        return 3, lines
    judged = any(r.get("verdict") in JUDGED and _judged(r) is not None for r in second["rows"])
    return (0 if judged else 3), lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: recheck.py FIRST.json SECOND.json (benchbox diff --format json of each set)",
              file=sys.stderr)
        return 2
    try:
        first, second = (json.loads(Path(p).read_text()) for p in argv)
        code, lines = confirmed(first, second)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"recheck: cannot read the two diffs: {e}", file=sys.stderr)
        return 2
    processes = second.get("processes") or []
    size = f" ({processes[0]} and {processes[1]} processes)" if len(processes) == 2 else ""
    print("#### Rechecked by a second, independent set of processes" + size + "\n")
    print("A row fails only when both sets judge it a regression (identical code: about α², "
          "not α).\n")
    print("\n".join(lines))
    print(f"\nVerdict after the recheck: exit {code}"
          + (" (regression confirmed)" if code == 1 else " (no regression confirmed)"))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
