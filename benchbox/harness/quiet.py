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
            "aslr": aslr_enabled(), "layout": layout_in_effect(),
            "gc": gc_mode, "threads": threads}


#: Where a process's memory lands and how its dicts hash: ``random`` as the OS and Python decide
#: (address-space randomisation on, a random hash seed: every process draws its own layout);
#: ``fixed``: address-space randomisation off for the process (Linux ``personality``) and
#: ``PYTHONHASHSEED=0``, so every process of the same code and command line lays out alike.
LAYOUTS = ("random", "fixed")
#: ``ADDR_NO_RANDOMIZE`` of Linux's ``personality(2)``
_ADDR_NO_RANDOMIZE = 0x0040000
#: set in a process that ``benchbox run --layout fixed`` started again under the fixed layout
REEXEC_VARIABLE = "BENCHBOX_LAYOUT_REEXEC"


def _libc() -> Any:
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def aslr_enabled() -> bool | None:
    """Whether address-space randomisation is on for this process (None off Linux or unreadable)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        persona = _libc().personality(0xFFFFFFFF)
    except (OSError, AttributeError):
        return None
    return None if persona < 0 else not (persona & _ADDR_NO_RANDOMIZE)


def layout_in_effect() -> str:
    """``fixed`` when this process runs without address randomisation and with hash seed 0."""
    fixed = aslr_enabled() is False and os.environ.get("PYTHONHASHSEED") == "0"
    return "fixed" if fixed else "random"


def layout_problem() -> str | None:
    """Why this process cannot be started again under the fixed layout (None: it can)."""
    if not sys.platform.startswith("linux"):
        return f"needs Linux (address-space randomisation is switched per process there), not {sys.platform}"
    if aslr_enabled() is None:
        return "this process cannot read its personality(2)"
    return None


def check_layout(layout: str) -> None:
    """Raise when a run asks for the fixed layout in a process that does not have it."""
    from benchbox.errors import FieldError

    if layout != "fixed" or layout_in_effect() == "fixed":
        return
    why = layout_problem() or ("address randomisation is on" if aslr_enabled() else
                               f"PYTHONHASHSEED is {os.environ.get('PYTHONHASHSEED', 'unset')}, not 0")
    raise FieldError("layout", f"fixed: this process does not have it ({why}); `benchbox run` starts itself "
                               "again for it, a program must be started so (setarch -R env PYTHONHASHSEED=0 "
                               "python ...)")


def exec_fixed_layout() -> None:
    """Start this very command again with the fixed layout; returns only when it cannot.

    Called before anything is measured. The new process inherits the personality, so worker
    processes it starts lay out alike too. A process that is already fixed returns at once;
    one that was started again and still is not fixed (the kernel refused) returns too, and
    the caller says so.
    """
    if layout_in_effect() == "fixed" or os.environ.get(REEXEC_VARIABLE):
        return
    libc = _libc()
    persona = libc.personality(0xFFFFFFFF)
    if persona < 0 or libc.personality(persona | _ADDR_NO_RANDOMIZE) < 0:
        return
    env = {**os.environ, "PYTHONHASHSEED": "0", REEXEC_VARIABLE: "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
