"""torch.compile: the compiled reference runner.

Options (``runner_options["torch-compile"]``):

- ``mode``: torch.compile mode (default ``max-autotune``); its resolved inductor
  options (``torch._inductor.list_mode_options``) are recorded.
- ``inductor_options``: inductor config ``KEY: VALUE`` pairs, applied through
  ``torch.compile(options=...)`` on top of the mode's.
- ``aten_fallbacks``: operators that must run as ATen kernels (``layer_norm``,
  ``masked_scatter``, ``aten.native_layer_norm.default``): their decompositions are
  removed and any inductor lowering is replaced by a fallback kernel, for this
  runner's compiles only; the generated code then shows whether they ran in ATen.
- ``cold_warm`` (default true): compile twice, ``compile_cold`` on fresh inductor and
  Triton caches (so autotuning really runs) and, after ``torch._dynamo.reset()``,
  ``compile_warm`` on the caches the cold compile populated. False compiles once, cold.
- ``transfer``, ``d2h``, ``stream``: how data moves (``benchbox.runners.transfer``).

Compile phases are timed by the harness (``phases``), never inside any contract.
The report records the options applied, each phase's cache counters, and the
fallbacks read from the compiler's structures (see ``compile_report``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import numpy as np
import torch

from benchbox.errors import UsageError
from benchbox.runners import compile_report as cr
from benchbox.runners import transfer
from benchbox.runners.base import Phases
from benchbox.runners.torch_runner import TorchRunner

OPTION_KEYS = ("mode", "inductor_options", "aten_fallbacks", "cold_warm", *transfer.OPTION_KEYS)
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
    from torch._inductor.decomposition import select_decomp_table
    from torch._inductor.lowering import lowerings

    spec = name.strip().removeprefix("torch.ops.").removeprefix("aten.")
    base, _, overload = spec.partition(".")
    if not base.isidentifier():
        raise UsageError(f"--aten-fallback {name!r}: not an operator name (e.g. layer_norm)")
    aten = torch.ops.aten
    packets = [getattr(aten, n) for n in (base, f"native_{base}") if hasattr(aten, n)]
    ops = [getattr(p, o) for p in packets for o in p.overloads() if not overload or o == overload]
    if not ops:
        raise UsageError(f"--aten-fallback {name!r}: no ATen operator aten.{spec}")
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


class TorchCompileRunner(TorchRunner):
    """torch.compile with inductor; cold and warm compile time reported apart."""

    name = "torch-compile"
    OPTION_KEYS: tuple[str, ...] | None = OPTION_KEYS
    TRANSFERS = transfer.TRANSFERS
    STATIC_INPUTS = False
    SIDE_STREAM = False

    def __init__(self, device: str = "cpu", options: dict[str, Any] | None = None) -> None:
        options = {"mode": "max-autotune", "inductor_options": {}, "aten_fallbacks": [],
                   "cold_warm": True, **(options or {})}
        super().__init__(device, options)
        unknown = [k for k in self.options if k not in OPTION_KEYS]
        if unknown:
            raise UsageError(f"torch-compile: unknown option '{unknown[0]}' "
                             f"(options: {', '.join(OPTION_KEYS)})")
        if not isinstance(self.options["cold_warm"], bool):
            raise UsageError("torch-compile: cold_warm must be true or false")
        from torch._inductor import config as inductor_config
        from torch._inductor import list_mode_options

        mode = self.options["mode"]
        try:
            self.mode_options: dict[str, Any] = dict(list_mode_options(mode)) \
                if mode != "default" else {}
        except RuntimeError as e:
            raise UsageError(f"--compile-mode {mode!r}: {cr._first_line(str(e))}") from None
        user = self.options["inductor_options"]
        if not isinstance(user, dict):
            raise UsageError("torch-compile: inductor_options must be KEY=VALUE pairs")
        known = inductor_config.get_config_copy()
        for key in user:
            if key.replace("-", "_") not in known:
                raise UsageError(f"--compile-option {key}: not an inductor option "
                                 "(see torch._inductor.config)")
        self.inductor_options = {k.replace("-", "_"): v for k, v in user.items()}
        fallbacks = self.options["aten_fallbacks"]
        if isinstance(fallbacks, str):
            fallbacks = [fallbacks]
        self.forced: dict[str, list[str]] = {}
        self._forced_ops: list[Any] = []
        for req in fallbacks:
            ops = resolve_aten_op(str(req))
            self.forced[str(req)] = [str(op) for op in ops]
            self._forced_ops += ops
        self.records: dict[str, cr.PhaseRecord] = {}
        self._force_facts: dict[str, list[str]] = {}
        self._cache_dir = ""
        self._after: tuple[dict[str, Any], set[int]] = ({}, set())

    def apply_policy(self, policy: Any) -> None:
        """A contract with ``cuda_graphs = false`` turns inductor's CUDA graphs off."""
        super().apply_policy(policy)
        if not policy.cuda_graphs and self.applied_config.get("triton.cudagraphs", False):
            self.inductor_options["triton.cudagraphs"] = False
            self.facts["policy_applied"]["changed"].append("triton.cudagraphs=False")

    @property
    def applied_config(self) -> dict[str, Any]:
        """The inductor options torch.compile receives: the mode's, then the user's."""
        return {**self.mode_options, **self.inductor_options}

    def versions(self) -> dict[str, str]:
        v = super().versions()
        if self._cuda:
            try:
                import triton

                v["triton"] = str(triton.__version__)
            except ImportError:
                pass
        return v

    @contextmanager
    def _compile_scope(self) -> Iterator[cr.CompileObserver]:
        """Caches in this runner's directory, remote caches off, forced ops, an observer."""
        from torch._inductor import config as inductor_config
        from torch._inductor.utils import clear_caches

        env = {"TORCHINDUCTOR_CACHE_DIR": self._cache_dir,
               "TRITON_CACHE_DIR": os.path.join(self._cache_dir, "triton")}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        clear_caches()  # in-memory caches too: each phase starts as a fresh process would
        try:
            with ExitStack() as stack:
                stack.enter_context(inductor_config.patch(CACHE_CONFIG))
                if self._forced_ops:
                    self._force_facts = stack.enter_context(force_aten(self._forced_ops))
                yield stack.enter_context(cr.CompileObserver())
        finally:
            for k, old in saved.items():
                if old is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = old

    def prepare(self, task: Any, model: Any, example: tuple[np.ndarray, ...], phases: Phases) -> None:
        with phases("load"):
            model = model.to(self.model_device)
            self.input_names = tuple(task.input_names)
            self.output_names = task.output_names
            self._allocate(example)
        self._cache_dir = tempfile.mkdtemp(prefix="benchbox-inductor-")
        weakref.finalize(self, shutil.rmtree, self._cache_dir, True)
        torch._dynamo.reset()
        try:
            self.forward = torch.compile(model, backend="inductor",
                                         options=self.applied_config or None)
        except RuntimeError as e:
            raise UsageError(f"--compile-option: {cr._first_line(str(e))}") from None
        order = ["compile_cold", "compile_warm"] if self.options["cold_warm"] else ["compile_cold"]
        for i, phase in enumerate(order):
            if i:
                torch._dynamo.reset()  # forget the compiled code; the disk caches stay
            with self._compile_scope() as observer:
                with phases(phase):
                    # compilation happens on the first call; outside any contract
                    self.d2h(self.compute(self.h2d(example)))
            self.records[phase] = observer.record
        self._after = (cr.counters_snapshot(), cr.metric_ids())
        self._summarize(order[-1])

    def _summarize(self, last: str) -> None:
        from torch._inductor.lowering import fallbacks as registry

        cold = self.records["compile_cold"]
        self.fallbacks = cr.fallback_entries(
            self.records[last], forced=self.forced, registry={str(op) for op in registry},
            device=self.device, phase=last, autotune_from=cold, autotune_phase="compile_cold")
        verified = {req: any(f["op"] in ops and f["calls"] > 0 for f in self.fallbacks
                             if f["kind"] == "aten_fallback")
                    for req, ops in self.forced.items()}
        self.facts["applied_options"] = {
            "backend": "inductor", "mode": self.options["mode"],
            "mode_options": dict(self.mode_options),
            "inductor_options": dict(self.inductor_options),
            "torch_compile_options": self.applied_config,
            "aten_fallbacks": [{"requested": req, "ops": ops, "in_generated_code": verified[req]}
                               for req, ops in self.forced.items()],
            "aten_fallback_patch": self._force_facts,
            "cache": dict(CACHE_CONFIG)}
        self.facts["compile"] = {
            "cold_warm": self.options["cold_warm"], "cache_dir": self._cache_dir,
            "measured_artifact": last,
            "phases": {name: {**rec.summary(), "cache_counters": rec.cache_counters()}
                       for name, rec in self.records.items()}}

    def report(self) -> dict[str, Any]:
        rep = super().report()
        if self.records:
            rep["fallbacks"] = list(self.fallbacks) + cr.run_entries(*self._after)
        return rep
