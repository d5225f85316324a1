"""``benchbox selfcheck``: the TensorRT runner checked end to end on the ``decision`` task.

For the first user with a GPU the runner supports, per TensorRT flavour present: the
back-to-back built-in contracts at each dtype (float32 and bfloat16 by default; ``--dtype``,
``--size``), a dynamic-shape run and a run under a contract with ``cuda_graphs = false``, then
the checks only execution shows — the accuracy gates, the engine inspector's report (every
layer's precision understood), the device clock against the host span that contains it,
``model_io_wall`` below ``public_task_call_wall``, the JIT warm-up phase, RTX's runtime cache,
CUDA graphs, the per-layer profile, TF32 off for float32, a timing sanity check (the device
clock against TensorRT's own per-layer times: a region that brackets no work fails it) and,
where ``trtexec`` is on PATH, trtexec's GPU compute median beside ``device_throughput`` — and a
short verdict, run by run, to attach to a bug report next to the receipts. The paced
built-ins time the same stages with requests arriving on a schedule: no check here reads them,
so they would add run time only (``benchbox sweep`` measures served traffic).

Where the runner cannot execute (no GPU, one the flavour does not support, no package)
the verdict says so and why; it reports the build facts that need no GPU and never a
measured result.
"""

from __future__ import annotations

from benchbox.selfcheck.checks import (
    DEVICE_CONTRACTS,
    EXECUTION_CHECKS,
    Check,
    check_accuracy,
    check_build,
    check_clock,
    check_dynamic,
    check_executed,
    check_inspector,
    check_no_graphs,
    check_preparation,
    check_region_order,
    check_run,
    check_tf32,
    check_timing,
)
from benchbox.selfcheck.sequence import (
    EXIT_FAILED,
    EXIT_NOT_EXECUTED,
    EXIT_PASSED,
    NO_GRAPHS,
    RUNNERS,
    CheckedRun,
    FlavourOutcome,
    RunPlan,
    SelfCheckConfig,
    SelfCheckResult,
    plan_runs,
    run_selfcheck,
    write_no_graphs_contract,
)

__all__ = [
    "DEVICE_CONTRACTS", "EXECUTION_CHECKS", "EXIT_FAILED", "EXIT_NOT_EXECUTED", "EXIT_PASSED", "NO_GRAPHS",
    "RUNNERS", "Check", "CheckedRun", "FlavourOutcome", "RunPlan", "SelfCheckConfig", "SelfCheckResult",
    "check_accuracy", "check_build", "check_clock", "check_dynamic", "check_executed", "check_inspector",
    "check_no_graphs", "check_preparation", "check_region_order", "check_run", "check_tf32", "check_timing",
    "plan_runs", "run_selfcheck", "write_no_graphs_contract",
]
