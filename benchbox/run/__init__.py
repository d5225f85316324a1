"""``benchbox run`` as a library call.

:func:`run` measures a :class:`RunConfig` and returns a :class:`RunOutcome` (the receipts
and where they were written); :class:`Interrupted` says a signal stopped it. Importing
this package is cheap: the run sequence loads on first use.
"""

from typing import Any

from benchbox.run.config import DEFAULT_RUNNERS, RunConfig

__all__ = ["DEFAULT_RUNNERS", "Interrupted", "RunConfig", "RunOutcome", "model_facts", "out_paths", "run"]



def __getattr__(name: str) -> Any:
    if name == "Interrupted":
        from benchbox.run import interrupt

        return interrupt.Interrupted
    if name == "out_paths":
        from benchbox.run import output

        return output.out_paths
    if name in ("RunOutcome", "model_facts", "run"):
        from benchbox.run import sequence

        return getattr(sequence, name)
    raise AttributeError(f"module 'benchbox.run' has no attribute {name!r}")
