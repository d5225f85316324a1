"""The harness's per-sample host-clock overhead against a bare loop (null task; no GPU needed).

The same measurement as the overhead part of truth.py, repeated; prints JSON per repeat.
Run:  OMP_NUM_THREADS=1 python benchmarks/overhead.py [repeats]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.truth import harness_overhead  # noqa: E402

if __name__ == "__main__":
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
        print(json.dumps(harness_overhead()), flush=True)
