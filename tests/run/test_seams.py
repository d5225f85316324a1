"""`run()`'s seams: a runner factory and a clock given to the run, no module global touched."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from benchbox.errors import FieldError
from benchbox.run import RunConfig, RunnerClasses, run
from benchbox.runners import RUNNERS
from benchbox.runners.torch_eager import TorchEagerRunner
from tests.support import loaded


class EagerUnderAnotherName(TorchEagerRunner):
    """A real runner known only to the factory a test gives the run."""

    name = "bb-eager-copy"
    OPTION_KEYS = ("note",)


class CountedReference(TorchEagerRunner):
    """The reference runner, counting how many were made (the run needs exactly one)."""

    made: list[str] = []

    def __init__(self, device: str = "cpu", options: dict[str, Any] | None = None) -> None:
        super().__init__(device, options)
        CountedReference.made.append(device)


def _config(tmp_path: Path, **kw: Any) -> RunConfig:
    base: dict[str, Any] = dict(runners=(EagerUnderAnotherName.name,), cases=("invoice",), samples=6,
                                warmup=1, out=tmp_path / "r.json")
    return RunConfig(**{**base, **kw})


def test_a_runner_known_only_to_the_given_factory_runs_and_is_validated_by_it(tmp_path: Path) -> None:
    factory = RunnerClasses({EagerUnderAnotherName.name: EagerUnderAnotherName})
    outcome = run(_config(tmp_path), runner_factory=factory)
    (row,) = loaded(outcome.path)["results"]
    assert (row["runner"], row["status"], len(row["samples_ns"])) == (EagerUnderAnotherName.name, "valid", 6)
    assert EagerUnderAnotherName.name not in RUNNERS  # nothing was registered globally
    # the factory's option check is the one that runs, before anything is measured
    bad = _config(tmp_path, out=tmp_path / "bad.json",
                  runner_options={EagerUnderAnotherName.name: {"no_such_option": 1}})
    with pytest.raises(Exception, match="unknown option 'no_such_option'"):
        run(bad, runner_factory=factory)
    assert not (tmp_path / "bad.json").exists()


def test_without_the_factory_the_runner_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(FieldError, match=f"unknown runner '{EagerUnderAnotherName.name}'"):
        run(_config(tmp_path))


def test_the_reference_comes_from_the_given_factory(tmp_path: Path) -> None:
    CountedReference.made.clear()
    factory = RunnerClasses({EagerUnderAnotherName.name: EagerUnderAnotherName},
                            reference_class=CountedReference)
    outcome = run(_config(tmp_path, cases=("invoice", "outage")), runner_factory=factory)
    assert CountedReference.made == ["cpu"]
    assert [r["status"] for r in loaded(outcome.path)["results"]] == ["valid", "valid"]


def test_availability_comes_from_the_given_factory(tmp_path: Path) -> None:
    class NotHere(EagerUnderAnotherName):
        name = "bb-not-here"

        @classmethod
        def availability(cls, device: str) -> str | None:
            return "simulated: this machine lacks what the runner needs"

    factory = RunnerClasses({NotHere.name: NotHere})
    outcome = run(_config(tmp_path, runners=(NotHere.name,)), runner_factory=factory)
    (row,) = loaded(outcome.path)["results"]
    assert row["status"] == "failed" and row["reasons"] == ["simulated: this machine lacks what the runner "
                                                            "needs"]


def _ticking(step_ns: int) -> Any:
    """A host clock that advances ``step_ns`` at every read."""
    ticks = itertools.count(0, step_ns)
    return lambda: next(ticks)


def test_a_fake_clock_gives_the_same_samples_through_the_whole_run_into_the_receipt(tmp_path: Path) -> None:
    step = 1000
    rows = []
    for n in (1, 2):
        outcome = run(RunConfig(runners=("torch-eager",), cases=("invoice",), samples=7, warmup=1,
                                out=tmp_path / f"r{n}.json"), clock=_ticking(step))
        rows.append(loaded(outcome.path)["results"][0])
    first, second = rows
    # public_task_call_wall spans the eight stages of a call; the clock is read once per boundary
    assert first["samples_ns"] == [8 * step] * 7
    assert all(v == [step] * 7 for v in first["stages_ns"].values()) and len(first["stages_ns"]) == 8
    assert first["summary"]["p50_ns"] == 8 * step and first["summary"]["n"] == 7
    # preparation phases are timed with the same clock: one tick each
    assert set(first["runner_report"]["prepare_s"].values()) == {step / 1e9}
    assert (second["samples_ns"], second["stages_ns"], second["summary"]) == (
        first["samples_ns"], first["stages_ns"], first["summary"])


def test_a_sweep_takes_its_runners_from_the_given_factory(tmp_path: Path) -> None:
    from benchbox.sweep import SweepConfig, sweep

    factory = RunnerClasses({EagerUnderAnotherName.name: EagerUnderAnotherName})
    cfg = SweepConfig(run=_config(tmp_path, out=None, contract="model_io_wall"),
                      out_dir=tmp_path / "sweep", gaps_ms=(0.0,), settle_s=0.0)
    outcome = sweep(cfg, runner_factory=factory)
    rows = [r for p in sorted((tmp_path / "sweep").glob("*.json")) if p.name != "sweep.json"
            for r in loaded(p)["results"]]
    assert rows and {r["runner"] for r in rows} == {EagerUnderAnotherName.name}, outcome
    with pytest.raises(FieldError, match=f"unknown runner '{EagerUnderAnotherName.name}'"):
        sweep(SweepConfig(run=_config(tmp_path, out=None), out_dir=tmp_path / "other", gaps_ms=(0.0,)))


class AbsentButTalkative(TorchEagerRunner):
    """A runner that cannot run here and whose build facts come with library output (as an ONNX
    export's warnings do): on stderr, on file descriptor 2 and as a Python warning."""

    name = "bb-absent-talkative"

    @classmethod
    def availability_for(cls, device: str, options: dict[str, Any] | None = None) -> str | None:
        return "it needs a device this machine lacks"

    def gather_facts(self, task: Any, example: Any, phases: Any) -> dict[str, Any]:
        import os
        import sys
        import warnings

        sys.stderr.write("library says: stderr\n")
        os.write(2, b"library says: fd 2\n")
        warnings.warn("library says: a warning", UserWarning, stacklevel=1)
        return {"built": True}


def test_what_a_runner_that_cannot_run_prints_while_its_build_facts_are_gathered_goes_to_the_log(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    factory = RunnerClasses({AbsentButTalkative.name: AbsentButTalkative})
    outcome = run(_config(tmp_path, runners=(AbsentButTalkative.name,)), runner_factory=factory)
    printed = capfd.readouterr()
    assert "library says" not in printed.err + printed.out
    (row,) = loaded(outcome.path)["results"]
    report = row["runner_report"]
    assert row["status"] == "failed" and report["built"] is True
    for said in ("stderr", "fd 2", "a warning"):
        assert f"library says: {said}" in report["log"]["text"]
        assert f"library says: {said}" in (tmp_path / "r.log").read_text()
