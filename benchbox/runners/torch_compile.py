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

What cold and warm mean under pinning: ``compile_cold`` always runs on empty caches and
``compile_warm`` always on populated ones, with in-memory caches cleared as in a fresh
process. The first run under a key compiles cold into the key's directory (status
``fresh``) and then warm from it; a later run finds the key pinned and compiles only warm
(status ``reused``, or ``partly_reused`` when inductor's FX graph cache missed some graph),
so its report has no ``compile_cold``: the cold compile behind its kernels belongs to the
run that pinned the key. Autotune picks are listed from the compile that benchmarked them
(``phase: compile_cold``, this run's or the pinning run's). With ``autotune_stability``
the stability compiles come first (``compile_stability_1``, and ``_2`` when the key is
pinned and reused, as this run then has no other fresh compile), so the measured artifact
is still the pinned one; ``compile_cold`` then follows another compile in the same process,
so its seconds leave out one-time costs of the process (imports, compiler start-up).

Compile phases are timed by the harness (``phases``), never inside any contract; so are
``cache_key`` (hashing the model) and ``cache_lock`` (waiting for another run using the
same key). The report records the options applied, each phase's cache counters, the
pinning facts (``compile.pin``), the stability facts (``compile.autotune_stability``) and
the fallbacks read from the compiler's structures (see ``compile_report``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchbox.errors import UsageError, first_line
from benchbox.fallbacks import compare_kernel_configs, compare_picks
from benchbox.runners import compile_artifact as cart
from benchbox.runners import compile_draws as cd
from benchbox.runners import compile_pin as pin
from benchbox.runners import compile_report as cr
from benchbox.runners import transfer
from benchbox.runners.base import Phases, trials_of
from benchbox.runners.torch_runner import TorchRunner

OPTION_KEYS = ("mode", "inductor_options", "aten_fallbacks", "cold_warm", "pin", "cache_dir",
               "autotune_stability", "draws", "draw_samples", "draw_rounds", "artifact", "artifact_out",
               "artifact_mismatch", *transfer.OPTION_KEYS)
OPTION_DEFAULTS: dict[str, Any] = {"mode": "max-autotune", "inductor_options": {}, "aten_fallbacks": [],
                                   "cold_warm": True, "pin": True, "cache_dir": None,
                                   "autotune_stability": False, "draws": 1, "draw_samples": 50,
                                   "draw_rounds": 2, "artifact": None, "artifact_out": None,
                                   "artifact_mismatch": "refuse"}
_BOOL_OPTIONS = ("cold_warm", "pin", "autotune_stability")
#: options reported only when set to other than their default (receipts written before they
#: existed then declare the same options)
_QUIET_OPTIONS = ("draws", "draw_samples", "draw_rounds")
_PARTLY = ("partly_reused", "artifact_partly_reused")
#: options naming artifact files: reported under ``compile.artifact``, not among the options
_ARTIFACT_OPTIONS = ("artifact", "artifact_out", "artifact_mismatch")
#: integer options: (lowest, highest)
_INT_OPTIONS = {"draws": (1, cd.MAX_DRAWS), "draw_samples": (3, 100_000), "draw_rounds": (1, cd.MAX_ROUNDS)}
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


def _check_draws_and_artifacts(opts: dict[str, Any]) -> None:
    """``draws``, ``draw_samples``, ``draw_rounds``, ``artifact``, ``artifact_out`` and
    ``artifact_mismatch``, in one line each; an artifact to load is read (and its sha256
    checked) here, before anything runs."""
    for key, (lo, hi) in _INT_OPTIONS.items():
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


def _resolve(opts: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[str]], list[Any]]:
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


class TorchCompileRunner(TorchRunner):
    """torch.compile with inductor; pinned decisions, cold and warm compile time reported apart."""

    name = "torch-compile"
    OPTION_KEYS: tuple[str, ...] | None = OPTION_KEYS
    TRANSFERS = transfer.TRANSFERS
    STATIC_INPUTS = False
    SIDE_STREAM = False

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Unknown keys, non-boolean switches and an unusable ``cache_dir``, in one line."""
        super().check_options(options)
        for key in _BOOL_OPTIONS:
            if key in options and not isinstance(options[key], bool):
                raise UsageError(f"torch-compile: {key} must be true or false")
        cache_dir = options.get("cache_dir")
        if cache_dir is not None:
            if not isinstance(cache_dir, str) or not cache_dir.strip():
                raise UsageError("torch-compile: cache_dir must be a directory path")
            why = pin.unusable_reason(Path(cache_dir).expanduser())
            if why:
                raise UsageError(f"torch-compile: cache_dir {cache_dir!r} cannot hold the cache: {why}")
        _check_draws_and_artifacts({**OPTION_DEFAULTS, **options})
        _resolve({**OPTION_DEFAULTS, **options})  # mode, inductor options, ATen operators

    def __init__(self, device: str = "cpu", options: dict[str, Any] | None = None) -> None:
        options = {**OPTION_DEFAULTS, **(options or {})}
        super().__init__(device, options)
        self.mode_options, self.inductor_options, self.forced, self._forced_ops = _resolve(self.options)
        self.records: dict[str, cr.PhaseRecord] = {}
        self._force_facts: dict[str, list[str]] = {}
        self._after: tuple[dict[str, Any], set[int]] = ({}, set())
        #: the compile phase the kept kernels were autotuned in (a draw's, with draws)
        self._chosen = "compile_cold"
        self._tuned = cr.PhaseRecord()
        self._draws: dict[str, Any] | None = None
        #: how the kept compile was chosen (draws), from this run, the pin or the artifact
        self._selection: dict[str, Any] | None = None
        #: the artifact loaded, set aside or saved (``compile.artifact``)
        self._artifact: dict[str, Any] = {}
        #: the portable cache artifacts of the measured compile: payload, entries per cache
        self._captured: tuple[bytes | None, dict[str, int]] = (None, {})

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

    def key_parts(self, task: Any, model: Any, example: tuple[np.ndarray, ...]) -> dict[str, Any]:
        """Everything the pinned decisions belong to; the key is the sha256 of this."""
        names = list(getattr(task, "input_names", ())) or [f"input{i}" for i in range(len(example))]
        return {"format": pin.KEY_FORMAT,
                "model": pin.model_fingerprint(model),
                "inputs": [{"name": n, "shape": [int(d) for d in a.shape], "dtype": str(a.dtype)}
                           for n, a in zip(names, example)],
                "device": pin.device_identity(self.device),
                "versions": pin.software_versions(self.device),
                "compile": {"backend": "inductor", "mode": self.options["mode"],
                            "options": self.applied_config,
                            "aten_fallbacks": sorted(str(op) for op in self._forced_ops),
                            "caches": dict(CACHE_CONFIG),
                            # how the kept compile is chosen: part of the key only when not the default
                            **({"draws": self.options["draws"]} if self.options["draws"] > 1 else {})}}

    @contextmanager
    def _compile_scope(self, cache_dir: str) -> Iterator[cr.CompileObserver]:
        """Caches in ``cache_dir``, remote caches off, forced ops, an observer."""
        from torch._inductor import config as inductor_config
        from torch._inductor.utils import clear_caches

        env = {"TORCHINDUCTOR_CACHE_DIR": cache_dir,
               "TRITON_CACHE_DIR": os.path.join(cache_dir, "triton")}
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

    def _compile(self, phase: str, cache_dir: str, example: tuple[np.ndarray, ...],
                 phases: Phases, capture: bool = False) -> cr.PhaseRecord:
        """One compile (the first call) on the caches in ``cache_dir``; with ``capture``, the
        portable cache artifacts it records are kept for ``artifact_out``."""
        torch._dynamo.reset()  # forget compiled code; the disk caches in cache_dir decide
        with self._compile_scope(cache_dir) as observer, cart.capture_cache_artifacts(capture) as box:
            with phases(phase):
                # compilation happens on the first call; outside any contract
                self.d2h(self.compute(self.h2d(example)))
        if capture:
            self._captured = (box[0], box[1])
        self.records[phase] = observer.record
        return observer.record

    def _scratch_compile(self, phase: str, example: tuple[np.ndarray, ...],
                         phases: Phases) -> tuple[cr.PhaseRecord, dict[str, Any]]:
        """A fresh compile in a throw-away directory; its record and Triton kernel configs."""
        scratch = tempfile.mkdtemp(prefix="benchbox-inductor-")
        try:
            return self._compile(phase, scratch, example, phases), pin.triton_best_configs(Path(scratch))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def prepare(self, task: Any, model: Any, example: tuple[np.ndarray, ...], phases: Phases) -> None:
        with phases("cache_key"):
            parts = self.key_parts(task, model, example)
        key = pin.key_of(parts)
        with phases("load"):
            model = model.to(self.model_device)
            self.input_names = tuple(task.input_names)
            self.output_names = task.output_names
            self._allocate(example)
        artifact = self._artifact_to_load(parts)  # a mismatched key is refused here, before compiling
        torch._dynamo.reset()
        try:
            self.forward = torch.compile(model, backend="inductor",
                                         options=self.applied_config or None)
        except RuntimeError as e:
            raise UsageError(f"torch-compile: inductor_options: {first_line(e)}") from None
        fresh: dict[str, tuple[cr.PhaseRecord, dict[str, Any]]] = {}
        if artifact is not None:
            last, cache_dir, facts, pinned = self._from_artifact(artifact, key, parts, example, phases)
        else:
            last, cache_dir, facts, pinned = self._from_caches(key, parts, example, phases, fresh)
        self._after = (cr.counters_snapshot(), cr.metric_ids())
        self._summarize(last, cache_dir, facts, fresh, pinned)
        if self.options["artifact_out"]:
            self._save_artifact(key, parts, cache_dir, phases)

    def _from_caches(self, key: str, parts: dict[str, Any], example: tuple[np.ndarray, ...], phases: Phases,
                     fresh: dict[str, tuple[cr.PhaseRecord, dict[str, Any]]]
                     ) -> tuple[str, str, dict[str, Any], dict[str, Any] | None]:
        """Compile on the key's pinned caches (or, unpinned, on temporary ones): reuse the pinned
        compile, or compile cold (or draw), then warm. Returns the measured phase, its cache
        directory, the pinning facts and the pinned entry reused (None when compiled here)."""
        named = self.options["cache_dir"]
        root = Path(named).expanduser() if named else pin.default_cache_root()
        unusable = None if named else pin.unusable_reason(root)
        pinning = bool(self.options["pin"]) and unusable is None
        store = pin.PinStore(root, key, parts) if unusable is None else None
        if self.options["autotune_stability"]:
            # a key already pinned gives this run no other fresh compile: make two
            peek = store is not None and pinning and store.pinned(store.load()) is not None
            for i in range(2 if peek else 1):
                name = f"compile_stability_{i + 1}"
                fresh[name] = self._scratch_compile(name, example, phases)

        with ExitStack() as held:
            if pinning and store is not None:
                with phases("cache_lock"):
                    held.enter_context(store.lock())
            doc = store.load() if store is not None else {}
            pinned = store.pinned(doc) if pinning and store is not None else None
            cache_dir = self._cache_dir(store if pinning else None, pinned)
            order = self._order(pinned, example, phases, cache_dir, fresh)
            for phase in order:
                self._compile(phase, cache_dir, example, phases,
                              capture=phase == order[-1] and bool(self.options["artifact_out"]))
            if "compile_cold" in self.records:
                fresh["compile_cold"] = (self.records["compile_cold"],
                                         pin.triton_best_configs(Path(cache_dir)))
            facts = self._pin_facts(store, doc, pinned, fresh, pinning, unusable, held, phases)
        return order[-1], cache_dir, facts, pinned

    def _cache_dir(self, store: pin.PinStore | None, pinned: dict[str, Any] | None) -> str:
        """The key's pinned caches (emptied when nothing is pinned yet), else a temporary directory."""
        if store is not None:
            if pinned is None:
                store.reset_caches()  # nothing pinned: leftovers of an unfinished compile go
            return str(store.inductor_dir)
        cache_dir = tempfile.mkdtemp(prefix="benchbox-inductor-")
        weakref.finalize(self, shutil.rmtree, cache_dir, True)
        return cache_dir

    def _order(self, pinned: dict[str, Any] | None, example: tuple[np.ndarray, ...], phases: Phases,
               cache_dir: str, fresh: dict[str, tuple[cr.PhaseRecord, dict[str, Any]]]) -> list[str]:
        """The compiles to make on ``cache_dir``; with draws, they are made first and the fastest
        one's caches copied into ``cache_dir``, so that only its warm load remains."""
        if pinned is not None:
            self._chosen = str(pinned.get("compile") or "compile_cold")
            return ["compile_warm"]
        if self.options["draws"] > 1:
            self._run_draws(example, phases, cache_dir, fresh)
            return ["compile_warm"]
        return ["compile_cold", "compile_warm"] if self.options["cold_warm"] else ["compile_cold"]

    def _run_draws(self, example: tuple[np.ndarray, ...], phases: Phases, cache_dir: str,
                   fresh: dict[str, tuple[cr.PhaseRecord, dict[str, Any]]]) -> None:
        """``draws`` fresh compiles, each in a directory of its own, timed by the harness in
        ``draw_rounds`` rounds (see ``compile_draws``); the fastest one's caches go to ``cache_dir``."""
        trials = trials_of(phases)
        if trials is None:
            raise UsageError("torch-compile: draws > 1 needs the harness to time each compile "
                             "(benchbox run gives it); this caller gave no trial measurement")
        n, samples, rounds = (int(self.options[k]) for k in ("draws", "draw_samples", "draw_rounds"))
        seconds = getattr(phases, "seconds", {})
        draws: list[cd.Draw] = []
        try:
            for i in range(1, n + 1):
                d = cd.Draw(i, tempfile.mkdtemp(prefix="benchbox-draw-"), cr.PhaseRecord(), {})
                draws.append(d)
                d.record = self._compile(d.phase, d.cache_dir, example, phases)
                d.kernel_configs = pin.triton_best_configs(Path(d.cache_dir))
                d.compile_s = seconds.get(d.phase)
                self._time_draw(d, trials, samples, phases)
            for r in range(2, rounds + 1):
                for d in draws[::-1] if r % 2 == 0 else draws:  # every other round in reverse order
                    again = self._compile(f"{d.phase}_reload", d.cache_dir, example, phases)
                    d.reload_misses += again.cache_counters()["inductor"].get("fxgraph_cache_miss", 0)
                    self._time_draw(d, trials, samples, phases)
            winner = cd.fastest(draws)
            shutil.copytree(winner.cache_dir, cache_dir, dirs_exist_ok=True)
        finally:
            cd.cleanup(draws)
        fresh.update({d.phase: (d.record, d.kernel_configs) for d in draws})
        self._chosen = winner.phase
        self._draws = cd.draws_facts(draws, winner, trials.describe(), samples, rounds)
        self._selection = cd.selection(draws, winner, trials.describe())

    def _time_draw(self, draw: cd.Draw, trials: Any, samples: int, phases: Phases) -> None:
        """The harness times the compile now in place (the runner reads no clock)."""
        with phases("time_draws"):
            draw.add(trials(self, samples, cd.DRAW_WARMUP))

    def _artifact_to_load(self, parts: dict[str, Any]) -> cart.Artifact | None:
        """The artifact named by ``artifact`` when its key matches this run's; a mismatch is refused
        in one line, or (``artifact_mismatch=compile``) set aside and recorded."""
        path = self.options["artifact"]
        if not path:
            return None
        art = cart.read_artifact(path)
        why = cart.mismatch(art, parts)
        if why is None:
            return art
        if self.options["artifact_mismatch"] == "refuse":
            raise UsageError(f"torch-compile: {why}")
        self._artifact = {"path": art.path, "offered_sha256": art.sha256, "used": "not used",
                          "not_used": why}
        return None

    def _from_artifact(self, art: cart.Artifact, key: str, parts: dict[str, Any],
                       example: tuple[np.ndarray, ...], phases: Phases
                       ) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
        """Load the artifact into empty temporary caches and compile warm from them."""
        cache_dir = tempfile.mkdtemp(prefix="benchbox-artifact-")
        weakref.finalize(self, shutil.rmtree, cache_dir, True)
        with self._compile_scope(cache_dir), phases("artifact_load"):
            info = torch.compiler.load_cache_artifacts(art.payload)
        self._compile("compile_warm", cache_dir, example, phases, capture=bool(self.options["artifact_out"]))
        recorded = {"sites": list(art.meta.get("picks") or []), "generation": None,
                    "compile": art.meta.get("picks_phase") or "compile_cold",
                    "selection": art.meta.get("selection")}
        self._chosen = str(recorded["compile"])
        facts: dict[str, Any] = {"enabled": False, "key": key, "key_parts": parts, "dir": None}
        self._reuse_facts(facts, recorded)
        facts["status"] = "artifact" if facts["status"] == "reused" else "artifact_partly_reused"
        facts["picks_from"] = f"the compile recorded in artifact {art.short}"
        facts["artifact_sha256"] = art.sha256
        self._artifact = {"sha256": art.sha256, "used": "loaded", "path": art.path,
                          "key": art.meta.get("key"), "created_at": art.meta.get("created_at"),
                          "loaded_entries": {k: len(v) for k, v in (info.artifacts if info else {}).items()}}
        facts["summary"] = pin_summary(facts)
        return "compile_warm", cache_dir, facts, recorded

    def _save_artifact(self, key: str, parts: dict[str, Any], cache_dir: str, phases: Phases) -> None:
        """Write the measured compile to ``artifact_out``; a failure is recorded, never raised (the
        run goes on and the summary says the artifact was not saved)."""
        path = Path(str(self.options["artifact_out"])).expanduser()
        payload, entries = self._captured
        saved: dict[str, Any] = {"path": str(path), "sha256": None, "entries": entries}
        if payload is None:
            saved["note"] = ("not saved: the compiler recorded no cache artifacts for the measured compile "
                             "(see the phase's cache_bypass_reasons)")
        else:
            meta = {"key": key, "key_parts": parts, "selection": self._selection,
                    "picks": list(self._tuned.autotune), "picks_phase": self._chosen,
                    "kernel_configs": pin.triton_best_configs(Path(cache_dir)), "entries": entries,
                    "created_at": datetime.now(UTC).isoformat(timespec="seconds")}
            try:
                with phases("artifact_save"):
                    saved["sha256"] = cart.write_artifact(path, payload, meta)
            except OSError as e:
                saved["note"] = f"not saved: {type(e).__name__}: {e}"[:300]
        comp = self.facts["compile"]
        art = comp.setdefault("artifact", {})
        art["saved"] = saved
        if saved["sha256"] and "sha256" not in art:
            art.update(sha256=saved["sha256"], used="saved")
        pin_facts = comp["pin"]
        pin_facts["summary"] += (f"; saved as artifact {saved['sha256'][:12]} ({path.name})"
                                 if saved["sha256"] else f"; artifact NOT saved: {saved['note']}")

    def _pin_facts(self, store: pin.PinStore | None, doc: dict[str, Any], pinned: dict[str, Any] | None,
                   fresh: dict[str, tuple[cr.PhaseRecord, dict[str, Any]]], pinning: bool,
                   unusable: str | None, held: ExitStack, phases: Phases) -> dict[str, Any]:
        """Record this run's fresh picks under the key and say what the compile reused."""
        facts: dict[str, Any] = {"enabled": pinning, "key": store.key if store else None,
                                 "key_parts": store.parts if store else None,
                                 "dir": str(store.dir) if store else None}
        if unusable:
            facts["note"] = f"not pinned: the default cache directory is unusable ({unusable})"
        if self._artifact.get("not_used"):
            facts["artifact_not_used"] = self._artifact["not_used"]
        if pinned is None:
            facts["status"] = "fresh" if pinning else "off"
            if self._selection:
                facts["selection"] = self._selection
        else:
            self._reuse_facts(facts, pinned)
        if store is not None:
            self._record_picks(facts, store, doc, fresh, pinning, held, phases)
        facts["summary"] = pin_summary(facts)
        return facts

    def _reuse_facts(self, facts: dict[str, Any], pinned: dict[str, Any]) -> None:
        """What the warm compile under a pinned key reused: its graph-cache counters and status."""
        warm = self.records["compile_warm"]
        counters = warm.cache_counters()
        ind, aot = counters["inductor"], counters["aot_autograd"]
        hits, misses = ind.get("fxgraph_cache_hit", 0), ind.get("fxgraph_cache_miss", 0)
        bypass = ind.get("fxgraph_cache_bypass", 0)
        facts["graphs"] = {"fx_graph_cache_hits": hits, "fx_graph_cache_misses": misses,
                           "fx_graph_cache_bypasses": bypass,
                           "aot_autograd_cache_hits": aot.get("autograd_cache_hit", 0),
                           "autotuned_call_sites": len(warm.autotune)}
        # an AOTAutograd cache hit serves inductor's cached graph without an FX-cache lookup
        served = hits or aot.get("autograd_cache_hit", 0)
        facts["status"] = ("reused" if served and not misses and not bypass and not warm.autotune
                           else "partly_reused")
        facts["picks_generation"] = pinned.get("generation")
        facts["picks_from"] = (f"{pinned.get('compile') or 'compile_cold'} of the run that pinned this key "
                               f"(generation {pinned.get('generation')})")
        if pinned.get("selection"):  # kept with the compile: it travels on into a saved artifact
            facts["selection"] = self._selection = pinned["selection"]
        if facts["status"] == "partly_reused":
            facts["note"] = "; ".join([
                f"inductor compiled {misses + bypass} of {hits + misses + bypass} graph(s) anew under "
                "the pinned key (its own cache key differs: code outside the model's classes, "
                "inductor settings or environment)", *warm.cache_bypass[:2]])
            if warm.autotune:
                facts["picks_vs_pinned"] = compare_picks(pinned["sites"], warm.autotune).to_dict()

    def _record_picks(self, facts: dict[str, Any], store: pin.PinStore, doc: dict[str, Any],
                      fresh: dict[str, tuple[cr.PhaseRecord, dict[str, Any]]], pinning: bool,
                      held: ExitStack, phases: Phases) -> None:
        """Add this run's fresh picks to the key's record (compared with the last recorded ones)."""
        try:
            if not pinning and fresh:
                with phases("cache_lock"):
                    held.enter_context(store.lock())
                doc = store.load()
            if store.unreadable:
                facts["record_note"] = f"picks record unreadable, started anew: {store.unreadable}"
            previous = doc["history"][-1] if doc.get("history") else None
            chosen = self._chosen  # compile_cold, or the fastest draw
            if chosen in fresh:
                facts["picks_vs_recorded"] = None if previous is None else {
                    "compared_with_generation": previous.get("generation"),
                    "compared_with": "pinned compile" if previous.get("pinned") else "unpinned compile",
                    **compare_picks(previous.get("sites") or [], fresh[chosen][0].autotune).to_dict()}
            for name, (record, configs) in fresh.items():
                entry = pin.add_fresh(doc, name, record.autotune, configs, pinned=pinning and name == chosen,
                                      selection=self._selection if name == chosen else None)
                if name == chosen:
                    facts["picks_generation"] = entry["generation"]
                    facts["picks_from"] = f"this run's {chosen}"
            if fresh or store.unreadable:
                store.save(doc)
            facts["record"] = str(store.record_path)
        except OSError as e:
            facts["record_note"] = f"picks not recorded: {type(e).__name__}: {e}"[:300]

    def _summarize(self, last: str, cache_dir: str, pin_facts: dict[str, Any],
                   fresh: dict[str, tuple[cr.PhaseRecord, dict[str, Any]]],
                   pinned: dict[str, Any] | None) -> None:
        from torch._inductor.lowering import fallbacks as registry

        if self._chosen in self.records:
            tuned = self.records[self._chosen]
        elif pin_facts["status"] in _PARTLY and self.records[last].autotune:
            tuned = self.records[last]
            pin_facts["picks_from"] = "this run's compile_warm (recompiled graphs only)"
            self._chosen = last
        else:
            tuned = cr.PhaseRecord(autotune=list((pinned or {}).get("sites") or []))
        self._tuned = tuned
        self.fallbacks = cr.fallback_entries(
            self.records[last], forced=self.forced, registry={str(op) for op in registry},
            device=self.device, phase=last, autotune_from=tuned, autotune_phase=self._chosen)
        verified = {req: any(f["op"] in ops and f["calls"] > 0 for f in self.fallbacks
                             if f["kind"] == "aten_fallback")
                    for req, ops in self.forced.items()}
        self.facts["applied_options"] = self._applied_options(verified)
        self.facts["compile"] = {
            "cold_warm": self.options["cold_warm"], "cache_dir": cache_dir,
            "measured_artifact": last,
            "phases": {name: {**rec.summary(), "cache_counters": rec.cache_counters()}
                       for name, rec in self.records.items()},
            "pin": pin_facts}
        if self.options["autotune_stability"]:
            self.facts["compile"]["autotune_stability"] = stability_facts(fresh, pinned)
        for name, value in (("draws", self._draws), ("selection", pin_facts.get("selection")),
                            ("artifact", self._artifact)):
            if value:
                self.facts["compile"][name] = dict(value)

    def _applied_options(self, verified: dict[str, bool]) -> dict[str, Any]:
        from torch._inductor import config as inductor_config

        current = inductor_config.get_config_copy()
        applied = self.applied_config
        return {
            "backend": "inductor", "mode": self.options["mode"],
            "mode_options": dict(self.mode_options),
            "inductor_options": dict(self.inductor_options),
            "torch_compile_options": applied,
            "aten_fallbacks": [{"requested": req, "ops": ops, "in_generated_code": verified[req]}
                               for req, ops in self.forced.items()],
            "aten_fallback_patch": self._force_facts,
            "cache": dict(CACHE_CONFIG),
            # how autotune candidates were benchmarked and how many kept, as the compiles saw it
            "autotune_settings": {k: applied.get(k, current[k]) for k in AUTOTUNE_SETTINGS if k in current}}

    def report(self) -> dict[str, Any]:
        rep = super().report()
        if self.records:
            rep["fallbacks"] = list(self.fallbacks) + cr.run_entries(*self._after)
        # where an artifact is read or written is not what is measured (its sha256 is, under
        # compile.artifact); options added since receipts first had options show only when set
        rep["options"] = {k: v for k, v in rep["options"].items() if k not in _ARTIFACT_OPTIONS
                          and not (k in _QUIET_OPTIONS and v == OPTION_DEFAULTS[k])}
        given = {k: self.options[k] for k in _ARTIFACT_OPTIONS if self.options[k] not in (None, "refuse")}
        if given and isinstance(rep.get("compile"), dict):
            rep["compile"] = {**rep["compile"], "artifact": {**rep["compile"].get("artifact", {}),
                                                               "options": given}}
        return rep


def stability_facts(fresh: dict[str, tuple[cr.PhaseRecord, dict[str, Any]]],
                    pinned: dict[str, Any] | None) -> dict[str, Any]:
    """Two fresh compiles' picks compared: the first stability compile against this run's
    cold compile, else against the second stability compile, else against the pinned picks
    (another run's fresh compile, when the key was pinned between the plan and the lock)."""
    first_name = "compile_stability_1"
    second_name = next((n for n in ("compile_cold", "compile_stability_2") if n in fresh), None)
    first, first_configs = fresh[first_name]
    if second_name is not None:
        second_sites, second_configs = fresh[second_name][0].autotune, fresh[second_name][1]
        against = f"this run's {second_name}"
    else:
        second_sites = list((pinned or {}).get("sites") or [])
        second_configs = dict((pinned or {}).get("kernel_configs") or {})
        against = f"the pinned fresh compile (generation {(pinned or {}).get('generation')})"
    picks = compare_picks(first.autotune, second_sites)
    out = {"compared": [f"this run's {first_name}", against], **picks.to_dict(),
           "kernel_configs": compare_kernel_configs(first_configs, second_configs)}
    out["summary"] = stability_summary(out)
    return out


def _key_text(facts: dict[str, Any]) -> str:
    return f"key {str(facts.get('key') or '')[:12]}"


def _picks_text(cmp: dict[str, Any] | None, what: str) -> str:
    if cmp is None:
        return f"no earlier picks recorded for this key to compare with {what}"
    if cmp.get("same"):
        return f"same picks as the last recorded (generation {cmp.get('compared_with_generation')})"
    lines = "; ".join(cmp.get("lines") or [])
    return (f"picks DIFFER from the last recorded (generation {cmp.get('compared_with_generation')}) "
            f"at {cmp.get('changed_sites', 0) + cmp.get('unmatched_sites', 0)} of {cmp.get('sites')} "
            f"call sites: {lines}")


def pin_summary(facts: dict[str, Any]) -> str:
    """One line on what the compile reused (and how it was chosen), for the terminal."""
    text = _reuse_text(facts)
    sel = facts.get("selection")
    if isinstance(sel, dict) and sel.get("draws") and facts.get("status") != "fresh":
        text += f"; {cd.selection_text(sel)}"
    if facts.get("artifact_not_used"):
        text = f"{facts['artifact_not_used']}; compiled instead: {text}"
    return text


def _reuse_text(facts: dict[str, Any]) -> str:
    status = facts.get("status")
    g = facts.get("graphs") or {}
    if status == "fresh":
        sel = facts.get("selection")
        how = f"the {cd.selection_text(sel)}" if isinstance(sel, dict) else "fresh compile"
        head = f"pinned, {how} ({_key_text(facts)}); its picks are now pinned"
        return f"{head}; {_picks_text(facts.get('picks_vs_recorded'), 'them')}"
    if status == "reused":
        return (f"pinned, reused the compile of generation {facts.get('picks_generation')} "
                f"({_key_text(facts)}): {g.get('fx_graph_cache_hits')} graph(s) from the cache, "
                "no autotuning")
    if status == "partly_reused":
        return f"pinned, PARTLY reused ({_key_text(facts)}): {facts.get('note', '')}"
    sha = str(facts.get("artifact_sha256") or "")[:12]
    if status == "artifact":
        return (f"reused from artifact {sha} ({_key_text(facts)}): {g.get('fx_graph_cache_hits')} graph(s) "
                "from the artifact, no autotuning")
    if status == "artifact_partly_reused":
        return f"PARTLY reused from artifact {sha} ({_key_text(facts)}): {facts.get('note', '')}"
    if facts.get("key") is None:
        return f"not pinned; picks not recorded ({facts.get('note', '')})"
    head = f"not pinned ({_key_text(facts)})"
    if "picks_vs_recorded" in facts:
        return f"{head}; {_picks_text(facts.get('picks_vs_recorded'), 'this compile')}"
    return head


def stability_summary(facts: dict[str, Any]) -> str:
    """One line on how much two fresh compiles' picks differ."""
    sites, changed = facts.get("sites", 0), facts.get("changed_sites", 0) + facts.get("unmatched_sites", 0)
    kc = facts.get("kernel_configs") or {}
    kernels = (f"; Triton kernel configs differ for {kc['changed']} of {kc['kernels']} kernels"
               if kc.get("kernels") else "")
    if not sites and not facts.get("unmatched_sites"):
        return "autotune stability: no autotuned call sites" + kernels
    if not changed:
        return f"autotune stability: two fresh compiles picked the same kernels at all {sites} call sites" \
               + kernels
    delta, pct = facts.get("estimated_delta_ms"), facts.get("estimated_delta_pct")
    est = (f", ≈ {delta:+.4f} ms per call ({pct:+.1f}% of the tuned operators) by the autotuner's own timings"
           if isinstance(delta, float) and isinstance(pct, float) else "")
    return (f"autotune stability: two fresh compiles differ at {changed} of {sites} call sites "
            f"({'; '.join(facts.get('lines') or [])}){est}" + kernels)
