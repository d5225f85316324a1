"""The Runner interface: device stages, preparation, and a report."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from benchbox.errors import Setting, UsageError


class Phases(Protocol):
    """Handed to ``Runner.prepare`` by the harness, which owns the clock.

    A runner marks its preparation phases (``with phases("compile"): ...``); the
    harness times them and records the seconds in the runner report.
    """

    def __call__(self, name: str) -> AbstractContextManager[None]: ...


class TrialResult(Protocol):
    """A trial's outcome (:class:`benchbox.harness.trials.Trial`)."""

    samples_ns: tuple[int, ...]
    clock_used: str
    passed: bool | None
    failed_gates: tuple[str, ...]


class Trials(Protocol):
    """The harness's trial measurement, handed to ``prepare`` as ``phases.trials`` by a run.

    ``trials(runner, samples, warmup)`` checks the runner's current build against the
    reference and has the harness time it; a runner choosing between builds of its own
    compares them by these samples, never by a clock of its own.
    """

    def __call__(self, runner: Any, samples: int, warmup: int) -> TrialResult: ...

    def describe(self) -> dict[str, Any]: ...


def trials_of(phases: Phases) -> Trials | None:
    """The trial measurement the run handed over with ``phases`` (None when the caller gave none)."""
    return getattr(phases, "trials", None)


def refuse_unknown_options(runner: str, keys: tuple[str, ...] | None, options: dict[str, Any]) -> None:
    """A one-line UsageError for the first option not in ``keys`` (None: any key is taken)."""
    if keys is None:
        return
    unknown = sorted(str(k) for k in options if k not in keys)
    if unknown:
        known = ", ".join(keys) or "none"
        raise UsageError(f"{runner}: unknown option '{unknown[0][:60]}' (options: {known})")


class RunnerUnavailable(Exception):
    """The runner cannot run here; the message says precisely why."""

    def __init__(self, reason: str, facts: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.facts = facts or {}


class Runner(ABC):
    """Owns h2d, compute and d2h for one model on one device.

    Runners never read a clock: the harness stamps every stage boundary and, for
    the device clock, records events on ``stream``.
    """

    name = "runner"
    #: the option keys this runner understands; None: it checks its options itself
    OPTION_KEYS: tuple[str, ...] | None = None
    #: the settings its availability reasons may suggest (``device=cuda``): the command line shows
    #: them under their flags
    SUGGESTS: tuple[Setting, ...] = ()

    def __init__(self, device: str = "cpu", options: dict[str, Any] | None = None) -> None:
        self.check_options(options or {})
        self.device = device
        self.options: dict[str, Any] = dict(options or {})
        self.fallbacks: list[dict[str, Any]] = []
        self.facts: dict[str, Any] = {}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Refuse an option this runner does not know, in one line (before anything runs)."""
        refuse_unknown_options(cls.name, cls.OPTION_KEYS, options)

    @classmethod
    def check_options_for(cls, device: str, options: dict[str, Any]) -> None:
        """``check_options``, and the checks of options that name the run's device (e.g. a build
        for "the GPU of this run"); a run calls it before anything is measured."""
        cls.check_options(options)

    @classmethod
    def availability(cls, device: str) -> str | None:
        """None when the runner can run on ``device``, else the reason it cannot."""
        return None

    @classmethod
    def availability_for(cls, device: str, options: dict[str, Any] | None) -> str | None:
        """Like ``availability``, for these runner options (e.g. a chosen backend flavour)."""
        return cls.availability(device)

    def apply_policy(self, policy: Any) -> None:
        """Honour the contract's policy before preparation (e.g. ``cuda_graphs = false``).

        A runner that can replay CUDA graphs must switch them off when the policy forbids
        them and record that in ``self.facts["policy_applied"]``; the default has none.
        """
        self.facts["policy_applied"] = {"cuda_graphs_allowed": policy.cuda_graphs,
                                        "changed": []}

    def gather_facts(self, task: Any, example: tuple[np.ndarray, ...], phases: Phases) -> dict[str, Any]:
        """For a runner that cannot run here: the build facts it can still gather (never timings).

        The run puts them in the runner report of its ``failed`` rows. The default has none.
        """
        return {}

    @abstractmethod
    def prepare(self, task: Any, model: Any, example: tuple[np.ndarray, ...], phases: Phases) -> None:
        """Build or compile; never inside any contract."""

    @property
    def stream(self) -> Any:
        """The device stream the runner enqueues on (None on the CPU)."""
        return None

    def synchronize(self) -> None:
        """Wait for everything enqueued on the runner's stream."""

    @abstractmethod
    def h2d(self, host: tuple[np.ndarray, ...]) -> Any:
        """Host inputs → device inputs (enqueue the copies)."""

    @abstractmethod
    def compute(self, inputs: Any) -> Any:
        """Enqueue the model."""

    @abstractmethod
    def d2h(self, outputs: Any) -> dict[str, np.ndarray]:
        """Device outputs → host arrays, including the synchronization."""

    def versions(self) -> dict[str, str]:
        return {}

    def report(self) -> dict[str, Any]:
        """Options, versions, fallbacks and build facts for the receipt."""
        return {"options": dict(self.options), "versions": self.versions(),
                "fallbacks": list(self.fallbacks), **self.facts}
