"""torch.compile: the compiled reference runner.

Options (``runner_options["torch-compile"]``) are declared and checked in ``compile_options``.

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
from benchbox.fallbacks import compare_picks
from benchbox.runners import compile_artifact as cart
from benchbox.runners import compile_draws as cd
from benchbox.runners import compile_options as co
from benchbox.runners import compile_pin as pin
from benchbox.runners import compile_report as cr
from benchbox.runners.base import Phases, trials_of
from benchbox.runners.compile_facts import pin_summary, reuse_facts, stability_facts
from benchbox.runners.torch_runner import ModuleRunner

_PARTLY = ("partly_reused", "artifact_partly_reused")


class TorchCompileRunner(ModuleRunner):
    """torch.compile with inductor; pinned decisions, cold and warm compile time reported apart."""

    name = "torch-compile"
    OPTION_KEYS: tuple[str, ...] | None = co.OPTION_KEYS

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Unknown keys, non-boolean switches and an unusable ``cache_dir``, in one line."""
        super().check_options(options)
        for key in co.BOOL_OPTIONS:
            if key in options and not isinstance(options[key], bool):
                raise UsageError(f"torch-compile: {key} must be true or false")
        cache_dir = options.get("cache_dir")
        if cache_dir is not None:
            if not isinstance(cache_dir, str) or not cache_dir.strip():
                raise UsageError("torch-compile: cache_dir must be a directory path")
            why = pin.unusable_reason(Path(cache_dir).expanduser())
            if why:
                raise UsageError(f"torch-compile: cache_dir {cache_dir!r} cannot hold the cache: {why}")
        co.check_draws_and_artifacts({**co.OPTION_DEFAULTS, **options})
        co.resolve_options({**co.OPTION_DEFAULTS, **options})  # mode, inductor options, ATen operators

    def __init__(self, device: str = "cpu", options: dict[str, Any] | None = None) -> None:
        options = {**co.OPTION_DEFAULTS, **(options or {})}
        super().__init__(device, options)
        resolved = co.resolve_options(self.options)
        self.mode_options, self.inductor_options, self.forced, self._forced_ops = resolved
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
                            "caches": dict(co.CACHE_CONFIG),
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
                stack.enter_context(inductor_config.patch(co.CACHE_CONFIG))
                if self._forced_ops:
                    self._force_facts = stack.enter_context(co.force_aten(self._forced_ops))
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
        reuse_facts(facts, pinned, self.records["compile_warm"])
        if pinned.get("selection"):  # kept with the compile: it travels on into a saved artifact
            self._selection = pinned["selection"]

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
            "cache": dict(co.CACHE_CONFIG),
            # how autotune candidates were benchmarked and how many kept, as the compiles saw it
            "autotune_settings": {k: applied.get(k, current[k]) for k in co.AUTOTUNE_SETTINGS
                                  if k in current}}

    def report(self) -> dict[str, Any]:
        rep = super().report()
        if self.records:
            rep["fallbacks"] = list(self.fallbacks) + cr.run_entries(*self._after)
        # where an artifact is read or written is not what is measured (its sha256 is, under
        # compile.artifact); options added since receipts first had options show only when set
        rep["options"] = {k: v for k, v in rep["options"].items() if k not in co.ARTIFACT_OPTIONS
                          and not (k in co.QUIET_OPTIONS and v == co.OPTION_DEFAULTS[k])}
        given = {k: self.options[k] for k in co.ARTIFACT_OPTIONS if self.options[k] not in (None, "refuse")}
        if given and isinstance(rep.get("compile"), dict):
            rep["compile"] = {**rep["compile"], "artifact": {**rep["compile"].get("artifact", {}),
                                                               "options": given}}
        return rep
