"""The Task interface: host stages, cases, the model and accuracy gates."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np


@dataclass(frozen=True)
class Case:
    """One fixture request."""

    name: str
    request: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.request).hexdigest()


@dataclass(frozen=True)
class InputShape:
    """The shapes one model input may take: ``min`` ≤ ``opt`` ≤ ``max`` in every dimension.

    All three equal: a fixed shape. A runner that compiles for shapes (an optimization
    profile of a TensorRT engine) builds for this range and tunes for ``opt``.
    """

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    @classmethod
    def fixed(cls, shape: tuple[int, ...] | list[int]) -> InputShape:
        s = tuple(int(d) for d in shape)
        return cls(s, s, s)

    @property
    def dynamic_axes(self) -> tuple[int, ...]:
        """The dimensions whose size may vary (``min != max``)."""
        return tuple(i for i, (lo, hi) in enumerate(zip(self.min, self.max)) if lo != hi)

    def problem(self) -> str | None:
        """Why the declaration is inconsistent, or None."""
        if not (len(self.min) == len(self.opt) == len(self.max)):
            ranks = ", ".join(str(len(s)) for s in (self.min, self.opt, self.max))
            return f"min, opt and max have different ranks ({ranks})"
        for i, (lo, mid, hi) in enumerate(zip(self.min, self.opt, self.max)):
            if not 0 <= lo <= mid <= hi:
                return f"dimension {i}: expected 0 ≤ min ≤ opt ≤ max, got {lo}, {mid}, {hi}"
        return None

    def admits(self, shape: tuple[int, ...]) -> bool:
        """Whether ``shape`` lies within [min, max]."""
        return len(shape) == len(self.min) and all(
            lo <= int(d) <= hi for d, lo, hi in zip(shape, self.min, self.max))


@dataclass
class CallTrace:
    """What one untimed validation call produced at each stage boundary."""

    outputs: dict[str, np.ndarray]
    reduced: Any
    answer: Any
    response: bytes


@dataclass(frozen=True)
class GateResult:
    """One accuracy gate: the measured value, its threshold and the verdict."""

    name: str
    value: float | bool | None
    threshold: float | bool | None
    passed: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "threshold": self.threshold,
                "passed": self.passed, "detail": self.detail}


#: Starting thresholds for a task that declares none of its own (max |logit error|, max
#: |probability error| per model dtype): what :meth:`Task.default_gates` gives a user's task.
#: A task should declare thresholds measured on its own model (``default_gates``). The
#: built-in decision task does (``benchbox.tasks.decision.task.GATES``, the only gates it
#: reads), so the two tables differ on purpose: these generic ones are looser, for a model
#: nobody has measured yet.
GENERIC_GATES: dict[str, dict[str, float]] = {
    "float32": {"logit_max_abs": 1e-3, "prob_max_abs": 1e-4},
    "float16": {"logit_max_abs": 3e-2, "prob_max_abs": 5e-3},
    "bfloat16": {"logit_max_abs": 1.5e-1, "prob_max_abs": 2e-2},
}


@dataclass
class Task(ABC):
    """A task: request bytes in, response bytes out, with a model in the middle.

    Subclasses implement the host stages (parse, preprocess, reduce, answer,
    serialize), the cases and the model. The harness calls them; they never read
    a clock. ``preprocess`` returns the model's inputs as numpy arrays in the order
    of ``input_names``; the model's ``forward`` takes them positionally (as torch
    tensors) and returns a tuple in the order of ``output_names``.
    """

    size: str = "tiny"
    dtype: str = "float32"
    options: dict[str, Any] = field(default_factory=dict)
    gate_overrides: dict[str, float] = field(default_factory=dict)

    name: ClassVar[str] = "task"
    input_names: ClassVar[tuple[str, ...]] = ()
    output_names: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        """Subclasses validate options and derive state here."""

    # -- the host stages -------------------------------------------------------
    @abstractmethod
    def parse(self, request: bytes) -> Any:
        """Request bytes → request object; raise ValueError on an invalid request."""

    @abstractmethod
    def preprocess(self, request: Any) -> tuple[np.ndarray, ...]:
        """Request → host input arrays, in ``input_names`` order."""

    @abstractmethod
    def reduce(self, outputs: dict[str, np.ndarray], request: Any) -> Any:
        """Host model outputs → reduced outputs (e.g. probabilities)."""

    @abstractmethod
    def answer(self, reduced: Any, request: Any) -> Any:
        """Reduced outputs → the response object."""

    @abstractmethod
    def serialize(self, answer: Any) -> bytes:
        """Response object → response bytes."""

    # -- cases and model -------------------------------------------------------
    @abstractmethod
    def cases(self) -> list[Case]:
        """The fixture requests."""

    @abstractmethod
    def build_model(self) -> Any:
        """A torch.nn.Module in eval mode at ``self.dtype`` (float32 for the reference)."""

    def input_shapes(self) -> dict[str, InputShape]:
        """The shapes each input may take, by input name (a runner builds for this range).

        Default: the fixed shapes of the first case's inputs. A task whose inputs vary in
        size (e.g. sequence length) returns ``InputShape(min, opt, max)`` per input.
        """
        host = self.preprocess(self.parse(self.cases()[0].request))
        return {n: InputShape.fixed(tuple(a.shape)) for n, a in zip(self.input_names, host)}

    def sizes(self) -> list[str]:
        return [self.size]

    def parameter_count(self) -> int:
        """Parameters of the model at ``self.size`` (builds it; a task may count without allocating)."""
        return sum(int(p.numel()) for p in self.build_model().parameters())

    def info(self) -> dict[str, Any]:
        """Task facts for the receipt (the run adds model hash and parameter count)."""
        return {"name": self.name, "size": self.size, "dtype": self.dtype,
                "options": dict(self.options)}

    # -- accuracy --------------------------------------------------------------
    def probabilities(self, reduced: Any) -> np.ndarray | None:
        """The probabilities inside a reduced output, if the task has them."""
        return None

    def answer_key(self, answer: Any) -> Any:
        """What must be equal between a runner's answer and the reference's."""
        return answer

    def default_gates(self) -> dict[str, float]:
        """Gate thresholds for ``self.dtype`` before overrides: the generic ones unless the task
        declares its own."""
        return dict(GENERIC_GATES.get(self.dtype, GENERIC_GATES["float32"]))

    def gate_thresholds(self) -> dict[str, float]:
        base = self.default_gates()
        base.update(self.gate_overrides)
        return base

    def gates(self, reference: CallTrace, first: CallTrace, second: CallTrace) -> list[GateResult]:
        """Check a runner's two validation calls against the float32 reference."""
        th = self.gate_thresholds()
        out: list[GateResult] = []
        worst = 0.0
        finite = True
        for name, ref in reference.outputs.items():
            got = first.outputs.get(name)
            if got is None or got.shape != ref.shape:
                out.append(GateResult("logit_max_abs", None, th["logit_max_abs"], False,
                                      f"output {name!r} missing or of another shape"))
                return out
            g = got.astype(np.float64)
            finite = finite and bool(np.isfinite(g).all())
            worst = max(worst, float(np.max(np.abs(g - ref.astype(np.float64)), initial=0.0)))
        if not finite:
            out.append(GateResult("logit_max_abs", None, th["logit_max_abs"], False,
                                  "outputs hold NaN or infinity"))
        else:
            out.append(GateResult("logit_max_abs", worst, th["logit_max_abs"],
                                  worst <= th["logit_max_abs"]))
        p_ref, p_got = self.probabilities(reference.reduced), self.probabilities(first.reduced)
        if p_ref is not None:
            if p_got is None or np.shape(p_got) != np.shape(p_ref) or not np.isfinite(p_got).all():
                out.append(GateResult("prob_max_abs", None, th["prob_max_abs"], False,
                                      "probabilities missing, misshapen or not finite"))
            else:
                err = float(np.max(np.abs(np.asarray(p_got, np.float64) - p_ref), initial=0.0))
                out.append(GateResult("prob_max_abs", err, th["prob_max_abs"],
                                      err <= th["prob_max_abs"]))
        same = self.answer_key(first.answer) == self.answer_key(reference.answer)
        out.append(GateResult("answer_equal", same, True, same,
                              "" if same else f"got {self.answer_key(first.answer)!r}, "
                              f"reference {self.answer_key(reference.answer)!r}"))
        rep = first.response == second.response
        out.append(GateResult("repeatable", rep, True, rep,
                              "" if rep else "two calls of the same request gave different bytes"))
        return out
