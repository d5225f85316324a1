"""A regression found by one set of processes, checked by a second, independent set.

    python examples/ci/recheck.py FIRST.json SECOND.json

FIRST.json and SECOND.json are ``benchbox diff --format json`` of two independent sets of
alternating base/head processes (the CI recipe runs the second set only when the first found a
regression). A row is a regression only when both sets judge it one (``slower``, or newly
invalid), so identical code fails the job with about α² (0.05² = 0.0025) instead of α, and a
regression both sets can resolve still fails it. Prints a markdown section saying what the
second set found, row by row, and exits with the gate's code:

- 1: a row is a regression in both sets;
- 2 or 3: the second set's own code when it is 2 (refused) or 3 (rows unreliable there);
- 0: otherwise (what the first set found was not found again).

Standard library only: the verdict job runs it from the base revision's checkout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _key(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["task"], row["case"], row["runner"]


def _said(row: dict[str, Any] | None) -> str:
    """A row's verdict with its judged metric's ratio and interval: ``slower ×1.282 [1.089, 1.510]``."""
    if row is None:
        return "not in the second set"
    judged = next((m for m in row.get("metrics", []) if m.get("ci") and not m.get("advisory")), None)
    if judged is None or judged.get("ratio") is None:
        return row["verdict"]
    low, high = judged["ci"]
    return f"{row['verdict']} ×{judged['ratio']:.3f} [{low:.3f}, {high:.3f}]"


def confirmed(first: dict[str, Any], second: dict[str, Any]) -> tuple[int, list[str]]:
    """The gate's exit code and one markdown line a row the first set found a regression."""
    found = [r for r in first["rows"] if r.get("regression")]
    again = {_key(r): r for r in second.get("rows", [])}
    both = [r for r in found if again.get(_key(r), {}).get("regression")]
    lines = [f"- {r['runner']} × {r['case']}: first {_said(r)}; second {_said(again.get(_key(r)))}"
             + (" — **confirmed**" if r in both else " — not confirmed") for r in found]
    if both:
        return 1, lines
    code = int(second.get("exit_code", 2))
    return (code if code in (2, 3) else 0), lines


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
