"""benchbox: benchmark ML inference tasks under explicit timing contracts.

The Python API (``docs/api.md`` has the whole page)::

    import benchbox

    outcome = benchbox.run(runners=("torch-eager",), samples=100, out="r.json")   # measure
    receipt = benchbox.load_receipt("r.json")                                   # load, checked
    result = benchbox.diff("base.json", "head.json", threshold=0.05)            # compare
    benchbox.plot("r.json", "r.png", kind="quantiles")                         # draw
    benchbox.export("r.json", "pyperf")                                         # for other tools

- ``run(config=None, /, *, reporter=None, progress=None, **fields)`` → ``RunOutcome``
- ``load_receipt(path)`` → ``Receipt``
- ``diff(base, head, *, threshold, metric, alpha, accept)`` → ``DiffResult``
- ``plot(receipts, output, kind, threshold, *, metric, accept)`` → ``Path``
- ``export(receipt, fmt, output=None)`` → ``Path``
- ``Task``, ``Case`` (write a task), ``Runner`` (write a runner), ``RunConfig``,
  ``Receipt``, ``Reporter`` (follow a run's phases), ``load_contract``, ``UsageError``

Importing benchbox is cheap: nothing heavy (torch, numpy, matplotlib, polars) is
imported until a function needs it. ``benchbox.run`` is also the package of the run
sequence; calling it runs :func:`benchbox.api.run`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from benchbox.api import diff, export, load_receipt, plot, run
    from benchbox.contracts import Contract, load_contract
    from benchbox.errors import UsageError
    from benchbox.receipts.diff import DiffResult
    from benchbox.receipts.model import Receipt
    from benchbox.run.config import RunConfig
    from benchbox.run.outcome import RunOutcome
    from benchbox.run.progress import Reporter
    from benchbox.runners.base import Runner
    from benchbox.tasks.base import Case, Task

#: public name → module it comes from
_LAZY = {
    "diff": "benchbox.api", "export": "benchbox.api", "load_receipt": "benchbox.api", "plot": "benchbox.api",
    "Contract": "benchbox.contracts", "load_contract": "benchbox.contracts", "UsageError": "benchbox.errors",
    "DiffResult": "benchbox.receipts.diff", "Receipt": "benchbox.receipts.model",
    "RunConfig": "benchbox.run.config", "Reporter": "benchbox.run.progress",
    "RunOutcome": "benchbox.run.outcome", "Runner": "benchbox.runners.base",
    "Case": "benchbox.tasks.base", "Task": "benchbox.tasks.base",
}

__all__ = ["Case", "Contract", "DiffResult", "Receipt", "Reporter", "RunConfig", "RunOutcome", "Runner",
           "Task", "UsageError", "__version__", "diff", "export", "load_contract", "load_receipt", "plot",
           "run"]


def __getattr__(name: str) -> Any:
    if name == "run":
        return importlib.import_module("benchbox.run")  # the package, callable as benchbox.api.run
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'benchbox' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
