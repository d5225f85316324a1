"""The parts of a runner report that ``benchbox.fallbacks`` reads, as typed records (torch-free).

- :class:`FallbackEntry`: one entry of a report's ``fallbacks`` (and one autotune call site as
  the torch-compile runner records it): its kind and count, the keys that name what it is
  (operator, reason, name, node, TensorRT layer type, precision and level), an ATen fallback's
  calls and whether it was forced, and an autotune pick (input shapes, the chosen kernel, its
  timing, the alternatives). Whatever else a runner writes stays in ``extra``.
- :class:`CompileChoice`: the parts of the torch-compile runner's ``compile`` section that say
  how its kernels were chosen: the artifact, the pinned compile, the draws' selection.

They sit below the receipts, which decode a row's fallbacks into them, and below the runners,
which write the reports; ``entries`` and ``CompileChoice.read`` take the dicts a runner builds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

from benchbox.errors import UsageError
from benchbox.typed import Range, Record, spec

Count = Annotated[int, Range(0)]
#: the keys a receipt writes first in each fallback entry (then the runner's own order)
LEADING = ("kind", "count")


def _given(description: str = "") -> Any:
    """A field a runner may leave out: absent, it is not written back (a null is)."""
    return spec(omit_none=True, description=description)


@dataclass(frozen=True, kw_only=True)
class Open(Record):
    """A part of a runner report: keys it does not declare in ``extra``, explicit nulls in
    ``nulls``, the document's key order in ``order`` (written back in that order)."""

    extra: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    nulls: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def given(self, name: str) -> bool:
        """Whether the document gave the declared field ``name`` (a null counts)."""
        return getattr(self, name) is not None or name in self.nulls


@dataclass(frozen=True, kw_only=True)
class Alternative(Open):
    """A kernel the autotuner timed for a call site."""

    kernel: str | None = _given()
    ms: float | None = _given()


@dataclass(frozen=True, kw_only=True)
class FallbackEntry(Open):
    """One thing a runner did other than the plain path (graph break, ATen op, autotune pick...)."""

    kind: str | None = _given("graph_break, recompile, aten_fallback, autotune_choice, "
                              "cudagraph_skip, plugin_layer, ...")
    count: Count | None = _given("how many it stands for (call sites, layers, breaks)")
    op: str | None = _given("the operator (an ATen fallback, an autotune pick, an ONNX node)")
    name: str | None = _given()
    reason: str | None = _given("why (a graph break, recompile or CUDA-graph skip), first line")
    node_name: str | None = _given("the ONNX node (a parser error)")
    layer_type: str | None = _given("TensorRT's layer type")
    precision: str | None = _given("TensorRT's precision of the layers")
    level: str | None = _given("where TensorRT's layers were found (network definition or engine)")
    calls: Count | None = _given("an ATen fallback's calls in the generated code")
    forced: bool | None = _given("an ATen fallback the runner's options asked for")
    input_shapes: tuple[tuple[str, ...], ...] | None = _given("an autotune pick's input shapes")
    chosen: str | None = _given("the kernel an autotune pick chose")
    chosen_ms: float | None = _given("the autotuner's timing of the chosen kernel (ms)")
    alternatives: tuple[Alternative, ...] | None = _given("the other kernels the autotuner timed")

    def derive(self) -> FallbackEntry:
        """Kind and count first, then the other keys in the runner's order (as receipts write them)."""
        if not self.order:
            return self
        return replace(self, order=(*LEADING, *(k for k in self.order if k not in LEADING)))

    @property
    def present(self) -> bool:
        """Whether it is in the generated code: an ATen fallback forced but never called is not."""
        return not self.given("calls") or bool(self.calls)


def entries(items: Iterable[Any]) -> tuple[FallbackEntry, ...]:
    """Fallback entries (or autotune call sites) as records: records as they are, the dicts a
    runner builds decoded (UsageError if unfit), anything else left out."""
    return tuple(x if isinstance(x, FallbackEntry) else FallbackEntry.of(x)
                 for x in items if isinstance(x, FallbackEntry | Mapping))


@dataclass(frozen=True, kw_only=True)
class CompiledArtifact(Open):
    """The compiled artifact a run loaded or saved."""

    sha256: str | None = _given()


@dataclass(frozen=True, kw_only=True)
class PinnedCompile(Open):
    """The pinned compile: its key, directory and generation of picks, and whether it was reused."""

    enabled: bool | None = _given()
    status: str | None = _given()
    key: str | None = _given()
    dir: str | None = _given()
    picks_generation: int | None = _given()
    summary: str | None = _given()


@dataclass(frozen=True, kw_only=True)
class DrawSelection(Open):
    """The fastest of several fresh compiles (draws), and how far apart the draws measured."""

    draws: int | None = _given()
    spread: float | None = _given()


@dataclass(frozen=True, kw_only=True)
class CompileChoice(Open):
    """How a compiling runner's kernels were chosen: artifact, pinned compile, draws."""

    artifact: CompiledArtifact | None = _given()
    pin: PinnedCompile | None = _given()
    selection: DrawSelection | None = _given()

    @classmethod
    def read(cls, section: Any) -> CompileChoice | None:
        """The parts of a ``compile`` section this record declares (the rest is not read); None
        where there is no section or a part does not fit."""
        if isinstance(section, CompileChoice) or section is None:
            return section
        if not isinstance(section, Mapping):
            return None
        try:
            return cls.of({k: section[k] for k in ("artifact", "pin", "selection") if k in section})
        except UsageError:
            return None
