"""``benchbox matrix``: a declared plan of runs, executed locally or on a Ray cluster, into a store."""

from benchbox.matrix.driver import (
    CellOutcome,
    MatrixInterrupted,
    MatrixResult,
    current_revision,
    preview,
    render_preview,
    render_result,
    run_matrix,
)
from benchbox.matrix.plan import Cell, ContractRef, Plan, load_plan, parse_plan

__all__ = ["Cell", "CellOutcome", "ContractRef", "MatrixInterrupted", "MatrixResult", "Plan",
           "current_revision", "load_plan", "parse_plan", "preview", "render_preview", "render_result",
           "run_matrix"]
