"""Peak memory of loading a large receipt-sized file through benchbox's receipt loader.

Run: python -m benchmarks.parse_memory [--mb 250]

Writes a JSON file of about ``--mb`` MB of 3-digit numbers above 256 (CPython shares the
objects of smaller ones), what the item limit lets through
uncounted: numbers are not items), once in ASCII and once with one character outside the
Basic Multilingual Plane (which makes Python hold the decoded text at 4 bytes a character),
and loads each with ``benchbox.receipts.load_receipt`` in a fresh process. Prints the file
size, the process's peak resident memory over its resident memory before the load, and their
ratio, as JSON. The loader refuses the document once parsed (it is not a receipt): the peak
is the parse's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import resource, sys
from benchbox.errors import UsageError
from benchbox.receipts import load_receipt
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    load_receipt(sys.argv[1])
except UsageError:
    pass
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def write(path: Path, mb: int, wide: bool) -> int:
    # about 1 MB of numbers from 257 to 999 (CPython shares one object for each of -5..256)
    chunk = ",".join(str(257 + i % 743) for i in range(250_000))
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"schema_version": 2, "note": "' + ("\U0001F600" if wide else "a") + '", "results": [')
        f.write(",".join([chunk] * mb))
        f.write("]}")
    return path.stat().st_size


def measure(mb: int) -> dict:
    import platform

    out: dict = {"python": platform.python_version(),
                 "command": f"python -m benchmarks.parse_memory --mb {mb}"}
    with tempfile.TemporaryDirectory(prefix="benchbox-parse-memory-") as tmp:
        for name, wide in (("ascii", False), ("outside_bmp", True)):
            path = Path(tmp) / f"{name}.json"
            size = write(path, mb, wide)
            child = subprocess.run([sys.executable, "-c", CHILD, str(path)], check=True, capture_output=True,
                                   text=True)
            peak = int(child.stdout.strip())
            path.unlink()
            out[name] = {"file_bytes": size, "peak_over_start_bytes": peak, "ratio": round(peak / size, 1)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=250, help="file size in MB (default 250)")
    print(json.dumps(measure(ap.parse_args().mb), indent=1))


if __name__ == "__main__":
    main()
