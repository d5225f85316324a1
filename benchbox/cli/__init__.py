"""The command line: parse options, call the library, render, pick the exit code.

:mod:`benchbox.cli.app` holds the ``benchbox`` group and its error handling; the commands live
in :mod:`benchbox.cli.measure` (run, sweep, matrix, selfcheck, tasks, runners) and
:mod:`benchbox.cli.receipts` (show, combine, diff, export, plot, contracts, store, report),
which add themselves to the group when imported here.
"""

from __future__ import annotations

from benchbox.cli import measure, receipts
from benchbox.cli.app import _flagged, _flags, main
from benchbox.cli.measure import _run_config, _sweep_config
from benchbox.cli.receipts import _percent, _threshold

__all__ = ["_flagged", "_flags", "_percent", "_run_config", "_sweep_config", "_threshold", "main", "measure",
           "receipts"]
