"""Failures are contained: a runner that fails gets failed rows, the others stay valid; SIGINT in a run.

The runners registered here are real runners (subclasses of the eager runner) that fail
the way real ones do. Only what cannot happen on this CPU machine is simulated, and the
names say so (an out-of-memory error, a failed engine build).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from benchbox.cli import main
from benchbox.run import Interrupted, RunConfig, RunnerClasses, run
from benchbox.runners import RUNNERS
from benchbox.runners.torch_eager import TorchEagerRunner
from tests.support import loaded

TWO_CASES = ("invoice", "outage")


# -- runners that fail the way real runners do ----------------------------------------------

class _Counting(TorchEagerRunner):
    """Eager, counting compute calls since prepare (validation, warm-up and samples)."""

    def prepare(self, task: Any, model: Any, example: tuple[np.ndarray, ...], phases: Any) -> None:
        super().prepare(task, model, example, phases)
        self.calls = 0

    def compute(self, inputs: Any) -> Any:
        self.calls += 1
        self.on_call(self.calls)
        return super().compute(inputs)

    def on_call(self, n: int) -> None:
        """What happens at the n-th compute call."""


class SimulatedBuildFailure(TorchEagerRunner):
    name = "bb-build-fails"

    def prepare(self, task: Any, model: Any, example: Any, phases: Any) -> None:
        with phases("build"):
            raise RuntimeError("engine build failed: simulated parser error at layer 3")


class SimulatedOomMidRun(_Counting):
    """Out of memory part way through the second case's samples (calls: 2 validation + samples)."""

    name = "bb-oom-mid"
    OPTION_KEYS = ("fail_at",)

    def on_call(self, n: int) -> None:
        if n == int(self.options.get("fail_at", 10**9)):
            import torch

            raise torch.OutOfMemoryError("simulated: CUDA out of memory. Tried to allocate 2.00 GiB")


class SimulatedParseFailureAfterFacts(TorchEagerRunner):
    """Records what its parser found (facts, a fallback), then fails the build, as an engine
    build that rejects an unsupported node would on a GPU."""

    name = "bb-parse-fails"

    def prepare(self, task: Any, model: Any, example: Any, phases: Any) -> None:
        with phases("export"):
            self.facts["parser"] = {"unsupported_nodes": [{"node": "/attn/Einsum", "op": "Einsum"}]}
            self.facts["build"] = {"options": {"tf32": False}}
            self.fallbacks.append({"kind": "precision", "count": 3, "precision": "float32"})
        with phases("build"):
            raise RuntimeError("simulated: engine build failed: 1 unsupported node")


class NanOutputs(TorchEagerRunner):
    name = "bb-nan"

    def d2h(self, outputs: Any) -> dict[str, np.ndarray]:
        host = super().d2h(outputs)
        return {k: np.full_like(v, np.nan) for k, v in host.items()}


class ValidationRaises(TorchEagerRunner):
    name = "bb-h2d-raises"

    def h2d(self, host: Any) -> Any:
        raise ValueError("input 0 has shape (1, 128), the engine was built for (1, 64)")


class AvailabilityRaises(TorchEagerRunner):
    name = "bb-availability-raises"

    @classmethod
    def availability(cls, device: str) -> str | None:
        raise OSError("libnvinfer.so.10: cannot open shared object file")


class ReportRaises(TorchEagerRunner):
    name = "bb-report-raises"

    def report(self) -> dict[str, Any]:
        raise KeyError("inspector")


class SigintAt(_Counting):
    """Sends SIGINT to this process at a chosen compute call (as a user's Ctrl-C would)."""

    name = "bb-sigint"
    OPTION_KEYS = ("at", "times")

    def on_call(self, n: int) -> None:
        if n == int(self.options["at"]):
            for _ in range(int(self.options.get("times", 1))):
                os.kill(os.getpid(), signal.SIGINT)


#: the library takes these runners from the factory it is given
SIGINT_RUNNERS = RunnerClasses({SigintAt.name: SigintAt})


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register this module's runners in the runner registry, as a plugin would (the command
    line has no other way to reach them)."""
    for cls in (SimulatedBuildFailure, SimulatedParseFailureAfterFacts, SimulatedOomMidRun, NanOutputs,
                ValidationRaises, AvailabilityRaises, ReportRaises):
        monkeypatch.setitem(RUNNERS, cls.name, f"{__name__}:{cls.__name__}")


def _calls_per_case(samples: int, warmup: int) -> int:
    return 2 + warmup + samples  # two validation calls, warm-up, samples


# -- failures contained ----------------------------------------------------------------------

def test_failing_runners_get_failed_rows_and_the_others_stay_valid(registered: None,
                                                                   tmp_path: Path) -> None:
    samples, warmup = 20, 1
    # out of memory in the middle of the second case's samples
    fail_at = _calls_per_case(samples, warmup) + 2 + warmup + samples // 2
    out = tmp_path / "r.json"
    args = ["run", "--samples", str(samples), "--warmup", str(warmup), "--out", str(out),
            "--runner-option", f"bb-oom-mid:fail_at={fail_at}"]
    for r in ("bb-build-fails", "bb-oom-mid", "bb-nan", "bb-h2d-raises", "bb-availability-raises",
              "bb-report-raises", "torch-eager"):
        args += ["--runner", r]
    for c in TWO_CASES:
        args += ["--case", c]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # no exception escaped as a traceback
    assert "Traceback" not in result.output
    receipt = loaded(out)
    assert receipt["complete"] is True
    rows = {(r["runner"], r["case"]): r for r in receipt["results"]}
    assert len(rows) == 7 * len(TWO_CASES)

    for case in TWO_CASES:
        build = rows[("bb-build-fails", case)]
        assert build["status"] == "failed"
        assert build["reasons"] == ["preparation failed: RuntimeError: engine build failed: "
                                    "simulated parser error at layer 3"]
        h2d = rows[("bb-h2d-raises", case)]
        assert h2d["status"] == "failed" and h2d["reasons"][0].startswith("ValueError: input 0 has shape")
        avail = rows[("bb-availability-raises", case)]
        assert avail["status"] == "failed"
        assert "availability check failed: OSError: libnvinfer.so.10" in avail["reasons"][0]
        nan = rows[("bb-nan", case)]
        assert nan["status"] == "invalid" and nan["accuracy"]["passed"] is False
        assert any("NaN" in reason for reason in nan["reasons"])
        rep = rows[("bb-report-raises", case)]
        assert rep["status"] == "valid" and "KeyError" in rep["runner_report"]["report_error"]
        eager = rows[("torch-eager", case)]
        assert eager["status"] == "valid" and eager["summary"]["n"] == samples
        assert len(eager["samples_ns"]) == samples and eager["accuracy"]["passed"] is True

    first, second = rows[("bb-oom-mid", "invoice")], rows[("bb-oom-mid", "outage")]
    assert first["status"] == "valid" and first["summary"]["n"] == samples
    assert second["status"] == "failed"
    assert second["reasons"] == ["OutOfMemoryError: simulated: CUDA out of memory. "
                                 "Tried to allocate 2.00 GiB"]
    assert "OutOfMemoryError" in second["runner_report"]["traceback"]
    # the eager rows measured after the failures are compared; failed/invalid ones are excluded
    excluded = {(e["runner"], e["case"]) for e in receipt["comparisons"]["excluded"]}
    assert ("bb-oom-mid", "outage") in excluded and ("torch-eager", "invoice") not in excluded


def test_failed_preparation_keeps_what_the_runner_reported_before_failing(registered: None,
                                                                           tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run(RunConfig(runners=("bb-parse-fails",), cases=TWO_CASES, samples=5, warmup=1, out=out))
    for row in loaded(out)["results"]:
        assert row["status"] == "failed"
        assert row["reasons"] == ["preparation failed: RuntimeError: simulated: engine build failed: "
                                  "1 unsupported node"]
        report = row["runner_report"]
        assert report["parser"]["unsupported_nodes"] == [{"node": "/attn/Einsum", "op": "Einsum"}]
        assert report["build"] == {"options": {"tf32": False}}
        assert report["fallbacks"] == [{"kind": "precision", "count": 3, "precision": "float32"}]
        assert set(report["prepare_s"]) == {"export", "build"}
        assert "RuntimeError" in report["traceback"] and "engine build failed" in report["error"]


# -- SIGINT ----------------------------------------------------------------------------------

def test_sigint_mid_case_keeps_finished_rows_and_the_partial_case(tmp_path: Path) -> None:
    samples, warmup = 30, 1
    at = _calls_per_case(samples, warmup) + 2 + warmup + 7  # the 7th sample of the second case
    out = tmp_path / "r.json"
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(Interrupted) as info:
        run(RunConfig(runners=("bb-sigint",), cases=TWO_CASES, samples=samples, warmup=warmup,
                      out=out, runner_options={"bb-sigint": {"at": at}}), runner_factory=SIGINT_RUNNERS)
    assert info.value.exit_code == 130 and info.value.path == out
    assert signal.getsignal(signal.SIGINT) is before  # the handler is put back
    receipt = loaded(out)
    assert receipt["complete"] is False and receipt["interrupted"] is True
    assert "SIGINT" in receipt["interrupt_reason"]
    done, partial = receipt["results"]
    assert done["case"] == "invoice" and done["status"] == "valid" and done["summary"]["n"] == samples
    assert partial["case"] == "outage" and partial["partial"] is True and partial["status"] == "invalid"
    n = partial["summary"]["n"]
    assert 1 <= n < samples and len(partial["samples_ns"]) == n
    assert all(len(v) == n for v in partial["stages_ns"].values())
    assert partial["reasons"][0].startswith("partial: interrupted by SIGINT")


def test_second_sigint_stops_at_once_and_keeps_finished_rows(tmp_path: Path) -> None:
    samples, warmup = 20, 1
    at = _calls_per_case(samples, warmup) + 2 + warmup + 3
    out = tmp_path / "r.json"
    with pytest.raises(Interrupted):
        run(RunConfig(runners=("bb-sigint",), cases=TWO_CASES, samples=samples, warmup=warmup,
                      out=out, runner_options={"bb-sigint": {"at": at, "times": 2}}),
            runner_factory=SIGINT_RUNNERS)
    receipt = loaded(out)
    assert receipt["complete"] is False and receipt["interrupted"] is True
    assert [r["case"] for r in receipt["results"]] == ["invoice"]  # the cut case is dropped
    assert receipt["results"][0]["summary"]["n"] == samples
