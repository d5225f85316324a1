"""What a process does against noise, and the record of it.

Run-to-run variance comes from what each process draws once: where its memory lands, its
hash seed, which cores its threads run on, when the garbage collector runs. Each remedy is a
condition of the number, so the receipt records the ones in effect for every process
(``processes[i].quieting``): the CPUs it may run on, the hash seed, the collector's mode while
sampling and torch's thread count. Which of them help was measured, not assumed
(BENCHMARKS.md §6, ``benchmarks/noise_remedies.py``).
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: How the garbage collector runs while a (runner, case) is sampled: ``on`` as Python decides;
#: ``off``: a full collection and ``gc.freeze()`` before the samples, collection disabled during
#: them, and both undone after (what survives is not scanned again).
GC_MODES = ("on", "off")


@contextmanager
def gc_paused(mode: str) -> Iterator[None]:
    """The collector as ``mode`` says for the samples taken inside the block."""
    if mode != "off":
        yield
        return
    was = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was:
            gc.enable()


def quieting(gc_mode: str, threads: int | None) -> dict[str, Any]:
    """The remedies in effect in this process, for the receipt."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = None
    seed = os.environ.get("PYTHONHASHSEED")
    return {"cpus": cpus, "cpu_count": os.cpu_count(),
            "hash_seed": seed if seed not in (None, "random") else "random",
            "hash_randomization": bool(sys.flags.hash_randomization),
            "gc": gc_mode, "threads": threads}
