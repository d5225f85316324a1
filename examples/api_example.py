"""benchbox from Python: measure, follow the phases, compare two runs, draw and export.

    python examples/api_example.py --samples 100 --out-dir /tmp/benchbox-api

Two runs of eager PyTorch on two cases of the built-in task, the second with one torch
thread; then the diff of the two, a figure and a pyperf export of each. Everything the
command line does goes through these same calls.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import benchbox


class Phases(benchbox.Reporter):
    """Prints each phase as the run reaches it (a Reporter may implement any subset)."""

    def phase(self, phase: str, runner: str | None = None, case: str | None = None) -> None:
        where = " × ".join(x for x in (runner, case) if x)
        print(f"  {phase}{': ' + where if where else ''}")

    def case_finished(self, runner: str, case: str, line: str) -> None:
        print(f"  {line}")


def main(samples: int, out_dir: Path) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    common = dict(runners=("torch-eager",), cases=("invoice", "outage"), samples=samples, warmup=2)
    print("base run")
    base = benchbox.run(out=out_dir / "base.json", reporter=Phases(), **common)
    print("head run (one torch thread)")
    head = benchbox.run(out=out_dir / "head.json", threads=1, reporter=Phases(), **common)

    receipt = benchbox.load_receipt(base.path)
    for row in receipt.results:
        s = row.summary
        print(f"{row.runner} × {row.case}: p50 {s.p50_ns / 1e6:.3f} ms over {s.n} samples")

    result = benchbox.diff(base.path, head.path, threshold=0.05)
    for d in result.rows:
        print(f"diff {d.runner} × {d.case}: {d.verdict}")

    figure = benchbox.plot([base.path, head.path], out_dir / "diff.png", kind="diff")
    exported = [benchbox.export(o.path, "pyperf") for o in (base, head)]
    print(f"wrote {figure}, {', '.join(str(p) for p in exported)}")
    return 0 if base.ok and head.ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100, help="samples per (runner, case)")
    parser.add_argument("--out-dir", type=Path, default=Path("receipts/api-example"),
                        help="where the receipts, the figure and the exports go")
    args = parser.parse_args()
    try:
        raise SystemExit(main(args.samples, args.out_dir))
    except benchbox.UsageError as e:  # bad input (a receipt already there, say): one line, exit 2
        print(f"api_example: {e}", file=sys.stderr)
        raise SystemExit(2) from None
