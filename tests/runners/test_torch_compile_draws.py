"""torch-compile ``draws``: N fresh compiles, each timed by the harness, the fastest pinned.

Fresh compiles on this machine would differ by whatever the machine's load does to them, so
the draws' speeds come from a fake compile (a test stand-in, no inductor): each fresh compile
writes a marker naming its draw into its cache directory, and the model it leaves in place
advances a virtual clock, the run's host clock, by that draw's cost per call. Everything else
is the runner's real code: the throw-away directories, the harness's trial measurement, the
rounds, the choice, the copy of the winner's caches into the key's pinned directory, the warm
compile from there, the picks record and the report. A real inductor compile with draws is
checked in test_torch_compile_artifact.py.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchbox.errors import UsageError
from benchbox.receipts.model import decode_receipt
from benchbox.render import results_table
from benchbox.run import RunConfig, RunnerClasses, run
from benchbox.runners import compile_report as cr
from benchbox.runners.torch_compile import TorchCompileRunner
from tests.support import loaded

MATMUL = "tests.compile_tasks:matmul_factory"
TICK = 1_000
#: each fresh compile's cost per call (ns): the second is fastest, the first ×3 slower
COSTS = {1: 3_000_000, 2: 1_000_000, 3: 2_000_000}
MARKER = "stand-in-draw"


class VirtualClock:
    """Nanoseconds that pass only by declaration: ``TICK`` per read, and each call's cost."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        self.now += TICK
        return self.now


class _Costly:
    """The eager model, charging ``cost`` ns of virtual time per call (``scale`` spoils its output)."""

    def __init__(self, model: Any, clock: VirtualClock, cost: int, scale: float = 1.0) -> None:
        self.model, self.clock, self.cost, self.scale = model, clock, cost, scale

    def __call__(self, *xs: Any) -> Any:
        self.clock.now += self.cost
        out = self.model(*xs)
        return tuple(o * self.scale for o in out) if self.scale != 1.0 else out


def stand_in(clock: VirtualClock, wrong: frozenset[int] = frozenset()) -> type[TorchCompileRunner]:
    """The torch-compile runner with its compile replaced by a fake compile stand-in."""
    fresh = itertools.count(1)

    class FakeCompileStandIn(TorchCompileRunner):
        name = "torch-compile"
        fresh_compiles: list[int] = []

        def _compile(self, phase: str, cache_dir: str, example: tuple[np.ndarray, ...], phases: Any,
                     capture: bool = False) -> cr.PhaseRecord:
            marker = Path(cache_dir) / MARKER
            hit = marker.exists()  # populated caches: as inductor would, count a graph-cache hit
            if not hit:  # empty caches: a fresh compile, the next draw
                n = next(fresh)
                marker.write_text(str(n))
                self.fresh_compiles.append(n)
            draw = int(marker.read_text())
            model = getattr(self.forward, "model", None) or self.forward._orig_mod
            with phases(phase):
                self.forward = _Costly(model, clock, COSTS[draw], 3.0 if draw in wrong else 1.0)
            site = {"op": "bmm", "input_shapes": [["4", "16", "8"], ["4", "8", "32"]],
                    "chosen": f"kernel_{'xyz'[draw - 1]}", "chosen_kind": "aten", "chosen_key": str(draw),
                    "chosen_ms": 0.01, "alternatives": [], "n_choices": 3}
            if capture:  # what save_cache_artifacts would return for it
                self._captured = (f"stand-in caches of draw {draw}".encode(), {"inductor": 1})
            counter = "fxgraph_cache_hit" if hit else "fxgraph_cache_miss"
            record = cr.PhaseRecord(autotune=[] if hit else [site], counters={"inductor": {counter: 1}})
            self.records[phase] = record
            return record

    return FakeCompileStandIn


def _run(tmp: Path, name: str, clock: VirtualClock, runner: type, **options: Any) -> dict:
    cfg = RunConfig(task=MATMUL, cases=("v0",), runners=("torch-compile",), samples=5, warmup=1,
                    out=tmp / f"{name}.json",
                    runner_options={"torch-compile": {"cache_dir": str(tmp / "cache"), "draws": 3,
                                                      "draw_samples": 4, **options}})
    outcome = run(cfg, clock=clock, runner_factory=RunnerClasses({"torch-compile": runner}))
    return loaded(outcome.path)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, type]:
    """Two runs on one cache directory: the first draws and pins, the second reuses."""
    tmp = tmp_path_factory.mktemp("draws")
    clock = VirtualClock()
    runner = stand_in(clock)
    first = _run(tmp, "first", clock, runner)
    second = _run(tmp, "second", clock, runner)
    return first, second, runner


def _report(receipt: dict) -> dict:
    (row,) = receipt["results"]
    assert row["status"] == "valid", row["reasons"]
    return row["runner_report"]


def test_draws_give_n_entries_and_pin_the_fastest_of_a_fake_compile_stand_in(drawn: tuple) -> None:
    first, _, runner = drawn
    rep = _report(first)
    draws = rep["compile"]["draws"]
    assert draws["n"] == 3 and [e["draw"] for e in draws["entries"]] == [1, 2, 3]
    region = {d: c + 8 * TICK for d, c in COSTS.items()}  # public_task_call_wall: eight stages of a tick
    assert [e["p50_ns"] for e in draws["entries"]] == [region[1], region[2], region[3]]
    # two rounds of four samples each; the second round reloaded each draw from its own caches
    assert all(e["samples"] == 8 and e["rounds"] == 2 for e in draws["entries"])
    assert all(f"compile_draw_{d}_reload" in rep["prepare_s"] for d in COSTS)
    assert draws["fastest"] == 2 and [e["fastest"] for e in draws["entries"]] == [False, True, False]
    assert draws["spread"] == pytest.approx(region[1] / region[2])
    assert draws["entries"][0]["ratio_to_fastest"] == pytest.approx(region[1] / region[2])
    assert (draws["measured_by"]["contract"], draws["measured_by"]["case"]) == ("public_task_call_wall", "v0")
    assert all(e["accuracy_passed"] is True for e in draws["entries"])
    # the picks of each draw, compared with the kept one's
    assert [e["picks"][0]["chosen"] for e in draws["entries"]] == ["kernel_x", "kernel_y", "kernel_z"]
    assert draws["entries"][0]["picks_vs_fastest"]["lines"] == ["bmm: kernel_y → kernel_x at 1 site"]
    assert draws["entries"][1]["picks_vs_fastest"]["same"] is True
    assert all(e["compile_s"] == TICK / 1e9 for e in draws["entries"])  # the harness's clock timed them
    # the measured compile is the fastest draw's, loaded from the key's pinned directory
    pin = rep["compile"]["pin"]
    assert pin["status"] == "fresh" and rep["compile"]["measured_artifact"] == "compile_warm"
    assert (Path(pin["dir"]) / "inductor" / MARKER).read_text() == "2"
    assert first["results"][0]["summary"]["p50_ns"] == region[2]
    assert runner.fresh_compiles == [1, 2, 3]  # the reused run (next test) compiled nothing fresh


def test_the_row_says_fastest_of_n_and_the_record_keeps_every_draw(drawn: tuple) -> None:
    first = drawn[0]
    rep = _report(first)
    pin = rep["compile"]["pin"]
    spread = rep["compile"]["draws"]["spread"]
    assert f"fastest of 3 fresh compiles, draws spread ×{spread:.3f}" in pin["summary"]
    assert pin["picks_from"] == "this run's compile_draw_2" and pin["selection"]["fastest"] == 2
    assert "fastest of 3 fresh compiles" in results_table(decode_receipt(first, "r"))
    picks = [f for f in rep["fallbacks"] if f["kind"] == "autotune_choice"]
    assert [(p["chosen"], p["phase"]) for p in picks] == [("kernel_y", "compile_draw_2")]
    record = json.loads(Path(pin["record"]).read_text())
    assert [(h["compile"], h["pinned"]) for h in record["history"]] == [
        ("compile_draw_1", False), ("compile_draw_2", True), ("compile_draw_3", False)]
    assert record["pinned"]["selection"]["draws"] == 3
    assert rep["options"]["draws"] == 3 and "artifact" not in rep["options"]
    assert pin["key_parts"]["compile"]["draws"] == 3


def test_a_second_run_reuses_the_pinned_fastest_draw_without_drawing_again(drawn: tuple) -> None:
    first, second, runner = drawn
    rep = _report(second)
    pin = rep["compile"]["pin"]
    assert pin["status"] == "reused" and pin["key"] == _report(first)["compile"]["pin"]["key"]
    assert "draws" not in rep["compile"] and not any(k.startswith("compile_draw") for k in rep["prepare_s"])
    assert second["results"][0]["summary"]["p50_ns"] == COSTS[2] + 8 * TICK
    assert "fastest of 3 fresh compiles" in pin["summary"] and rep["compile"]["selection"]["fastest"] == 2
    assert "compile_draw_2 of the run that pinned this key" in pin["picks_from"]
    assert runner.fresh_compiles == [1, 2, 3]


def test_a_draw_that_fails_the_accuracy_gates_is_not_kept_on_a_fake_compile_stand_in(tmp_path: Path) -> None:
    clock = VirtualClock()
    rep = _report(_run(tmp_path, "r", clock, stand_in(clock, wrong=frozenset({2})), draw_rounds=1))
    draws = rep["compile"]["draws"]
    assert [e["accuracy_passed"] for e in draws["entries"]] == [True, False, True]
    assert draws["entries"][1]["failed_gates"] and draws["failed_accuracy"] == [2]
    assert draws["fastest"] == 3  # draw 2 ran fastest but answered wrong
    assert all(e["rounds"] == 1 and e["samples"] == 4 for e in draws["entries"])


def test_draws_need_the_harness_to_time_them() -> None:
    from benchbox.harness import PhaseTimer
    from tests.compile_tasks import MatmulTask

    task = MatmulTask(size="tiny", dtype="float32")
    example = task.preprocess(task.parse(task.cases()[0].request))
    clock = VirtualClock()
    runner = stand_in(clock)(options={"draws": 2, "pin": False})
    with pytest.raises(UsageError, match="draws > 1 needs the harness to time each compile"):
        runner.prepare(task, task.build_model(), example, PhaseTimer(clock))


@pytest.mark.parametrize(("options", "message"), [
    ({"draws": 0}, "draws must be a whole number from 1 to 16"),
    ({"draws": True}, "draws must be a whole number"),
    ({"draws": 2.5}, "draws must be a whole number"),
    ({"draw_samples": 2}, "draw_samples must be a whole number from 3"),
    ({"draw_rounds": 11}, "draw_rounds must be a whole number from 1 to 10"),
    ({"draws": 2, "autotune_stability": True}, "autotune_stability and draws > 1 do not go together"),
])
def test_bad_draw_options_are_one_line_usage_errors(options: dict, message: str) -> None:
    with pytest.raises(UsageError) as e:
        TorchCompileRunner.check_options(options)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_draws_at_one_leave_the_key_and_the_reported_options_as_they_were() -> None:
    from benchbox.runners.compile_pin import key_of
    from tests.compile_tasks import MatmulTask

    task = MatmulTask(size="tiny", dtype="float32")
    example = task.preprocess(task.parse(task.cases()[0].request))

    def parts_with(**options: Any) -> dict:
        runner = TorchCompileRunner(options={"mode": "default", **options})
        return runner.key_parts(task, task.build_model(), example)

    parts, same, drawn = parts_with(), parts_with(draws=1), parts_with(draws=3)
    assert "draws" not in parts["compile"] and key_of(same) == key_of(parts)
    assert drawn["compile"]["draws"] == 3 and key_of(drawn) != key_of(parts)
    reported = TorchCompileRunner(options={"mode": "default"}).report()["options"]
    assert not {"draws", "draw_samples", "draw_rounds", "artifact", "artifact_out"} & set(reported)


def test_an_artifact_saved_from_the_reused_pin_keeps_how_it_was_chosen(drawn: tuple, tmp_path: Path) -> None:
    from benchbox.runners.compile_artifact import read_artifact

    first, _, runner = drawn
    cache = Path(_report(first)["compile"]["pin"]["dir"]).parent
    out = str(tmp_path / "a.artifact")
    receipt = _run(tmp_path, "r", VirtualClock(), runner, cache_dir=str(cache), artifact_out=out)
    rep = _report(receipt)
    art = read_artifact(str(tmp_path / "a.artifact"))
    assert rep["compile"]["pin"]["status"] == "reused" and art.payload == b"stand-in caches of draw 2"
    assert art.meta["selection"]["draws"] == 3 and art.meta["selection"]["fastest"] == 2
    assert art.meta["picks_phase"] == "compile_draw_2" and art.meta["picks"][0]["chosen"] == "kernel_y"
    assert rep["compile"]["artifact"]["sha256"] == art.sha256 and runner.fresh_compiles == [1, 2, 3]
