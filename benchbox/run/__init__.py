"""``benchbox run`` as a library call.

:func:`run` measures a :class:`RunConfig` and returns a :class:`RunOutcome` (the receipts
and where they were written); :class:`Interrupted` says a signal stopped it. Importing
this package is cheap: the run sequence loads on first use.

The package itself is callable: ``benchbox.run(...)`` runs :func:`benchbox.run.call.run`, as
:func:`benchbox.api.run` does (fields of RunConfig as keywords), whether or not this package
was imported before.
"""

import inspect
import sys
import types
from typing import Any

from benchbox.run.call import run as _call
from benchbox.run.config import DEFAULT_RUNNERS, RunConfig
from benchbox.run.factory import RunnerClasses, RunnerFactory

__all__ = ["DEFAULT_RUNNERS", "Interrupted", "RunConfig", "RunOutcome", "RunnerClasses", "RunnerFactory",
           "model_facts", "out_paths", "run"]



def __getattr__(name: str) -> Any:
    if name == "Interrupted":
        from benchbox.run import interrupt

        return interrupt.Interrupted
    if name == "out_paths":
        from benchbox.run import output

        return output.out_paths
    if name == "RunOutcome":
        from benchbox.run import outcome

        return outcome.RunOutcome
    if name == "model_facts":
        from benchbox.run import reference

        return reference.model_facts
    if name == "run":
        from benchbox.run import sequence

        return getattr(sequence, name)
    raise AttributeError(f"module 'benchbox.run' has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    """``benchbox.run`` is this package once imported; calling it runs :func:`benchbox.run.call.run`,
    whose signature it has (``inspect.signature``, ``help``)."""

    __signature__ = inspect.signature(_call)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call(*args, **kwargs)


__doc__ = f"{__doc__}\nbenchbox.run{inspect.signature(_call)}\n\n{inspect.getdoc(_call)}\n"
sys.modules[__name__].__class__ = _CallableModule
