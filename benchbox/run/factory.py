"""Where a run gets its runners: the names it may measure, their option checks, their
availability, the instances, and the float32 eager CPU runner that computes the reference.

:func:`benchbox.run.run` and :meth:`RunConfig.validate <benchbox.run.config.RunConfig.validate>`
take a :class:`RunnerFactory`; the default, :data:`REGISTERED`, is the runner registry of
:mod:`benchbox.runners` (read when used). :class:`RunnerClasses` runs runner classes of one's
own (a test's fakes, a program's runners) without registering them anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from benchbox.errors import UsageError, did_you_mean

if TYPE_CHECKING:
    from benchbox.runners.base import Runner

#: the runner, on the CPU, that computes every case's reference outputs
REFERENCE_RUNNER = "torch-eager"


class RunnerFactory(Protocol):
    """What a run needs to know about runners, and how it gets one.

    A factory may also have ``check_option_keys(name, options)``: a check of the option keys
    that needs no runner code, which a run makes for every runner before ``check_options``
    (the registry's refuses a mistyped key before torch is imported).
    """

    def names(self) -> Sequence[str]:
        """The runners a run may name."""
        ...

    def check_options(self, name: str, options: dict[str, Any], device: str | None = None) -> None:
        """Refuse options the runner does not accept (UsageError), before anything runs; with
        ``device``, also those it cannot honour on that device."""
        ...

    def availability(self, name: str, device: str, options: dict[str, Any]) -> str | None:
        """None when the runner can run on ``device``, else why it cannot."""
        ...

    def make(self, name: str, device: str, options: dict[str, Any]) -> Runner:
        """A new, unprepared runner."""
        ...

    def reference(self) -> Runner:
        """A new, unprepared runner for the float32 reference outputs on the CPU."""
        ...


class _Registered:
    """The runners registered in :mod:`benchbox.runners`."""

    def names(self) -> Sequence[str]:
        from benchbox.runners import RUNNERS

        return tuple(RUNNERS)

    def check_option_keys(self, name: str, options: dict[str, Any]) -> None:
        from benchbox.runners import check_option_keys

        check_option_keys(name, options)

    def check_options(self, name: str, options: dict[str, Any], device: str | None = None) -> None:
        from benchbox.runners import runner_class

        cls = runner_class(name)
        if device is None:
            cls.check_options(options)
        else:
            cls.check_options_for(device, options)

    def availability(self, name: str, device: str, options: dict[str, Any]) -> str | None:
        from benchbox.runners import availability

        return availability(name, device, options)

    def make(self, name: str, device: str, options: dict[str, Any]) -> Runner:
        from benchbox.runners import make_runner

        return make_runner(name, device, options)

    def reference(self) -> Runner:
        return self.make(REFERENCE_RUNNER, "cpu", {})


#: the default: the runner registry of :mod:`benchbox.runners`
REGISTERED: RunnerFactory = _Registered()


@dataclass(frozen=True)
class RunnerClasses:
    """Runners from classes given by name; the reference from ``reference_class`` (default: the
    registered eager PyTorch runner)."""

    classes: Mapping[str, type[Runner]]
    reference_class: type[Runner] | None = None

    def names(self) -> Sequence[str]:
        return tuple(self.classes)

    def _class(self, name: str) -> type[Runner]:
        if name not in self.classes:
            raise UsageError(f"unknown runner '{name}' ({did_you_mean(name, self.classes)}"
                             f"runners: {', '.join(self.classes)})")
        return self.classes[name]

    def check_options(self, name: str, options: dict[str, Any], device: str | None = None) -> None:
        cls = self._class(name)
        if device is None:
            cls.check_options(options)
        else:
            cls.check_options_for(device, options)

    def availability(self, name: str, device: str, options: dict[str, Any]) -> str | None:
        return self._class(name).availability_for(device, options)

    def make(self, name: str, device: str, options: dict[str, Any]) -> Runner:
        return self._class(name)(device=device, options=options)

    def reference(self) -> Runner:
        if self.reference_class is not None:
            return self.reference_class(device="cpu", options={})
        return REGISTERED.reference()
