"""torch.compile's options: declared, checked and resolved before anything is measured.

The options (``runner_options["torch-compile"]``):

- ``mode``: torch.compile mode (default ``max-autotune``); its resolved inductor
  options (``torch._inductor.list_mode_options``) are recorded.
- ``inductor_options``: inductor config ``KEY: VALUE`` pairs, applied through
  ``torch.compile(options=...)`` on top of the mode's.
- ``aten_fallbacks``: operators that must run as ATen kernels (``layer_norm``,
  ``masked_scatter``, ``aten.native_layer_norm.default``): their decompositions are
  removed and any inductor lowering is replaced by a fallback kernel, for this
  runner's compiles only; the generated code then shows whether they ran in ATen.
- ``cold_warm`` (default true): compile twice, ``compile_cold`` on empty inductor and
  Triton caches (so autotuning really runs) and, after ``torch._dynamo.reset()``,
  ``compile_warm`` on the caches the cold compile populated. False compiles once.
- ``pin`` (default true): keep inductor's caches (FX graph cache, autotune local cache,
  Triton cache) in a benchbox-managed directory per key (see ``compile_pin``), so a later
  run of the same model, shapes, dtypes, device model, software and compile options loads
  this compile's decisions instead of autotuning again. False compiles in a temporary
  directory every time; its picks are still recorded under the key and compared.
- ``cache_dir``: the root of the pinned caches (default ``$BENCHBOX_CACHE/inductor``, else
  ``~/.cache/benchbox/inductor``).
- ``autotune_stability`` (default false): add fresh compiles in throw-away directories
  and compare the picks of two fresh compiles, call site by call site.
- ``draws`` (default 1): when the key is not pinned yet, compile this many times afresh,
  each in a throw-away directory, have the harness time each one (``draw_samples`` calls
  per round, ``draw_rounds`` rounds, under the run's first contract and first case, after
  the accuracy gates) and keep the fastest: its caches become the key's pinned caches (or,
  with ``pin=false``, this run's), and the measured compile loads them warm. Every draw is
  reported (``compile.draws``: p50, picks, compile seconds); the choice travels with the
  pin and with artifacts (``selection``). A value above 1 is part of the key.
- ``artifact``: a file written by ``artifact_out``; the compile is loaded from it into
  empty caches (a temporary directory; the pinned caches are neither read nor written).
  Its key must match this run's (``draws`` aside), else the run is refused in one line
  saying what differs, or, with ``artifact_mismatch=compile``, the artifact is set aside
  (the report says why) and the runner compiles as without it.
- ``artifact_out``: write the measured compile to this file (``compile_artifact``), with
  its key, picks, selection and the sha256 that names it.
- ``transfer``, ``d2h``, ``stream``: how data moves (``benchbox.runners.transfer``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchbox.errors import UsageError, first_line
from benchbox.runners import compile_artifact as cart
from benchbox.runners import compile_draws as cd
from benchbox.runners import transfer

OPTION_KEYS = ("mode", "inductor_options", "aten_fallbacks", "cold_warm", "pin", "cache_dir",
               "autotune_stability", "draws", "draw_samples", "draw_rounds", "artifact", "artifact_out",
               "artifact_mismatch", *transfer.OPTION_KEYS)
OPTION_DEFAULTS: dict[str, Any] = {"mode": "max-autotune", "inductor_options": {}, "aten_fallbacks": [],
                                   "cold_warm": True, "pin": True, "cache_dir": None,
                                   "autotune_stability": False, "draws": 1, "draw_samples": 50,
                                   "draw_rounds": 2, "artifact": None, "artifact_out": None,
                                   "artifact_mismatch": "refuse"}
BOOL_OPTIONS = ("cold_warm", "pin", "autotune_stability")
#: options reported only when set to other than their default (receipts written before they
#: existed then declare the same options)
QUIET_OPTIONS = ("draws", "draw_samples", "draw_rounds")
#: options naming artifact files: reported under ``compile.artifact``, not among the options
ARTIFACT_OPTIONS = ("artifact", "artifact_out", "artifact_mismatch")
#: integer options: (lowest, highest)
INT_OPTIONS = {"draws": (1, cd.MAX_DRAWS), "draw_samples": (3, 100_000), "draw_rounds": (1, cd.MAX_ROUNDS)}
#: inductor settings that decide how autotune candidates are benchmarked and how many are kept;
#: their values for each compile are recorded (set them with ``inductor_options``)
AUTOTUNE_SETTINGS = ("max_autotune", "max_autotune_gemm", "max_autotune_pointwise",
                     "max_autotune_gemm_backends", "max_autotune_gemm_search_space",
                     "coordinate_descent_tuning",
                     "coordinate_descent_search_radius", "coordinate_descent_check_all_directions",
                     "benchmark_epilogue_fusion", "max_epilogue_benchmarked_choices", "benchmark_fusion",
                     "autotune_in_subproc", "autotune_fallback_to_aten", "use_experimental_benchmarker",
                     "inductor_default_autotune_warmup", "inductor_default_autotune_rep",
                     "triton.autotune_pointwise", "triton.cudagraphs")
#: cache settings for every compile: local caches on (the warm phase needs them), remote off
CACHE_CONFIG: dict[str, Any] = {"fx_graph_cache": True, "fx_graph_remote_cache": False,
                                "autotune_local_cache": True, "autotune_remote_cache": False,
                                "bundled_autotune_remote_cache": False}


def resolve_aten_op(name: str) -> list[Any]:
    """The ATen overloads that ``name`` (``layer_norm``, ``aten.masked_scatter``, ...) means.

    Both ``aten.NAME`` and ``aten.native_NAME`` are taken (``layer_norm`` is traced
    into ``native_layer_norm``); only overloads inductor would otherwise decompose or
    lower are kept, unless none is, then all of them.
    """
    import torch  # here, not at import: the option keys are read before torch loads
    from torch._inductor.decomposition import select_decomp_table
    from torch._inductor.lowering import lowerings

    spec = name.strip().removeprefix("torch.ops.").removeprefix("aten.")
    base, _, overload = spec.partition(".")
    if not base.isidentifier():
        raise UsageError(f"torch-compile: aten_fallbacks {name!r}: not an operator name (e.g. layer_norm)")
    aten = torch.ops.aten
    packets = [getattr(aten, n) for n in (base, f"native_{base}") if hasattr(aten, n)]
    ops = [getattr(p, o) for p in packets for o in p.overloads() if not overload or o == overload]
    if not ops:
        raise UsageError(f"torch-compile: aten_fallbacks {name!r}: no ATen operator aten.{spec}")
    table = select_decomp_table()
    relevant = [op for op in ops if op in table or op in lowerings]
    return relevant or ops


@contextmanager
def force_aten(ops: list[Any]) -> Iterator[dict[str, list[str]]]:
    """Make inductor call ``ops`` as ATen kernels inside the block; restore after.

    Removes their decompositions from inductor's tables and, where inductor has its
    own lowering that is not already a fallback, registers a user lowering that
    emits the ATen fallback kernel instead.
    """
    from torch._inductor import decomposition as dec
    from torch._inductor import lowering as low

    tables = [dec.decompositions, dec.fast_random_decomps()]
    removed: list[tuple[dict[Any, Any], Any, Any]] = []
    overridden: list[Any] = []
    registered: list[Any] = []
    for op in ops:
        for t in tables:
            if op in t:
                removed.append((t, op, t.pop(op)))
        if op in low.lowerings and op not in low.fallbacks and op not in low.user_lowerings:
            low.user_lowerings[op] = low.fallback_handler(op, add_to_fallback_set=False)
            overridden.append(op)
        elif op not in low.lowerings:
            # no lowering once its decomposition is gone: register the ATen fallback kernel
            # ourselves, as inductor's own implicit fallback refuses ops that have a core
            # decomposition when the CI environment variable is set
            low.make_fallback(op, warn=False, override_decomp=True)
            registered.append(op)
    try:
        yield {"decomposition_removed": sorted({str(op) for _, op, _ in removed}),
               "lowering_replaced": [str(op) for op in overridden],
               "fallback_registered": [str(op) for op in registered]}
    finally:
        for t, op, fn in removed:
            t[op] = fn
        for op in overridden:
            low.user_lowerings.pop(op, None)
        for op in registered:
            low.lowerings.pop(op, None)
            low.fallbacks.discard(op)
            low.needs_realized_inputs.discard(op)


def check_draws_and_artifacts(opts: dict[str, Any]) -> None:
    """``draws``, ``draw_samples``, ``draw_rounds``, ``artifact``, ``artifact_out`` and
    ``artifact_mismatch``, in one line each; an artifact to load is read (and its sha256
    checked) here, before anything runs."""
    for key, (lo, hi) in INT_OPTIONS.items():
        v = opts[key]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise UsageError(f"torch-compile: {key} must be a whole number from {lo} to {hi}")
    if opts["draws"] > 1 and opts["autotune_stability"]:
        raise UsageError("torch-compile: autotune_stability and draws > 1 do not go together "
                         "(the draws are fresh compiles compared call site by call site: compile.draws)")
    if opts["artifact_mismatch"] not in ("refuse", "compile"):
        raise UsageError("torch-compile: artifact_mismatch must be refuse or compile")
    for key in ("artifact", "artifact_out"):
        v = opts[key]
        if v is not None and (not isinstance(v, str) or not v.strip()):
            raise UsageError(f"torch-compile: {key} must be a file path")
    if opts["artifact"]:
        cart.read_artifact(opts["artifact"])
    if opts["artifact_out"]:
        why = cart.output_problem(opts["artifact_out"])
        if why:
            raise UsageError(f"torch-compile: artifact_out {opts['artifact_out']!r} cannot be written: {why}")


def resolve_options(opts: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[str]],
                                                  list[Any]]:
    """The mode's inductor options, the user's, and the forced ATen operators; UsageError when one is
    unknown (checked before anything is measured)."""
    from torch._inductor import config as inductor_config
    from torch._inductor import list_mode_options

    mode = opts["mode"]
    try:
        mode_options: dict[str, Any] = dict(list_mode_options(mode)) if mode != "default" else {}
    except RuntimeError as e:
        raise UsageError(f"torch-compile: mode {mode!r}: {first_line(e)}") from None
    user = opts["inductor_options"]
    if not isinstance(user, dict):
        raise UsageError("torch-compile: inductor_options must be KEY=VALUE pairs")
    known = inductor_config.get_config_copy()
    for key in user:
        if key.replace("-", "_") not in known:
            raise UsageError(f"torch-compile: inductor option {key!r} does not exist "
                             "(see torch._inductor.config)")
    fallbacks = opts["aten_fallbacks"]
    forced: dict[str, list[str]] = {}
    forced_ops: list[Any] = []
    for req in [fallbacks] if isinstance(fallbacks, str) else fallbacks:
        ops = resolve_aten_op(str(req))
        forced[str(req)] = [str(op) for op in ops]
        forced_ops += ops
    return mode_options, {k.replace("-", "_"): v for k, v in user.items()}, forced, forced_ops
