"""benchbox sweep: the points, one receipt per point, relative rates, overload, the index and its figure."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchbox.contracts import load_contract
from benchbox.errors import FieldError
from benchbox.receipts import load_receipt
from benchbox.run import RunConfig
from benchbox.sweep import INDEX, SweepConfig, expand_index, parse_rate, sweep
from tests.harness.test_accounting import LightTask
from tests.support import one_line_exit_2


def test_rates_and_points_parse_or_name_the_problem(tmp_path: Path) -> None:
    assert parse_rate("50") == (50.0, None) and parse_rate("50/s") == (50.0, None)
    assert parse_rate("0.3x") == (None, 0.3)
    for bad in ("fast", "0", "-2x", "nanx", "inf"):
        with pytest.raises(FieldError):
            parse_rate(bad)
    cfg = SweepConfig(run=RunConfig(), out_dir=tmp_path, gaps_ms=(0.0, 1.0), rates=("0.5x",),
                      idles=("sleep", "busy"))
    assert [p.slug for p in cfg.points()] == ["gap-1ms-sleep", "rate-0.5x-sleep", "gap-1ms-busy",
                                              "rate-0.5x-busy"]
    with pytest.raises(FieldError, match="at least one gap or one rate"):
        SweepConfig(run=RunConfig(), out_dir=tmp_path).points()


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep")
    run = RunConfig(contracts=("public_task_call_poisson", "model_io_wall"), runners=("torch-eager",),
                    cases=("a",), samples=60, warmup=2)
    cfg = SweepConfig(run=run, out_dir=out, gaps_ms=(0.0, 0.5), rates=("0.1x", "50x", "100"))
    sweep(cfg, task=LightTask())
    return out


def test_one_receipt_per_point_with_the_point_in_the_contract_identity(swept: Path) -> None:
    index = json.loads((swept / INDEX).read_text())
    points = index["points"]
    # per contract: back to back, gap 0.5 ms, 100/s, and the two relative rates (per runner)
    assert len(points) == 2 * 5
    hashes = {p["hash"] for p in points}
    assert len(hashes) == len(points)
    pub = load_contract("public_task_call_poisson")
    for p in points:
        r = load_receipt(swept / p["receipt"])
        assert r.contract.hash == p["hash"] and r.contract.name == p["contract"]
        assert r.contract.arrival is not None and r.contract.arrival.kind == p["arrival"]["kind"]
    b2b = [p for p in points if p["point"] == "back-to-back" and p["contract"] == pub.name][0]
    assert b2b["hash"] == pub.with_arrival(gap_ms=0).hash
    thr = index["throughput_per_s"]["torch-eager"]
    assert thr > 0
    rel = [p for p in points if p["fraction"] == 0.1 and p["contract"] == pub.name][0]
    assert rel["arrival"]["rate_per_s"] == pytest.approx(0.1 * thr)
    assert rel["receipt"].endswith(".torch-eager.json")


def test_an_offered_rate_beyond_the_throughput_is_marked_overloaded(swept: Path) -> None:
    index = json.loads((swept / INDEX).read_text())
    over = [p for p in index["points"] if p["fraction"] == 50.0]
    assert over and all(p["overloaded"] == ["torch-eager"] for p in over)
    row = load_receipt(swept / over[0]["receipt"]).results[0]
    assert row.status == "invalid" and row.load is not None and row.load.overloaded
    assert len(row.samples_ns) < 60 and "bound of 200" in row.stop_reason
    assert any(r.startswith("overloaded:") for r in row.reasons)
    # a tenth of the throughput: overloaded only if the machine stalled the server for ~200 arrivals
    light = [p for p in index["points"] if p["fraction"] == 0.1]
    assert all(p["overloaded"] == [] for p in light)


def test_the_sweep_figure_draws_the_curves_and_names_overload(swept: Path) -> None:
    from benchbox.plots import figure, label_receipts

    paths = expand_index([swept / INDEX])
    assert len(paths) == 10 and all(p.exists() for p in paths)
    fig = figure(label_receipts(paths, [load_receipt(p) for p in paths]), "sweep")
    marks = _overload_marks(fig)
    assert "overloaded:bound" in marks and "overloaded:util" not in marks
    assert any("stopped at the bound" in t for t in _legend(fig))
    xlabels = {ax.get_xlabel() for ax in fig.axes}
    # each axis says its scale: rates on a log axis (they span more than 8×), gaps log above 0.1 ms
    assert xlabels == {"offered load (requests/s), log scale",
                       "idle gap before each call (ms), log scale above 0.1"}
    from benchbox.plots import render

    out = render([swept / INDEX], swept / "sweep.png", "sweep")
    assert out.read_bytes()[:4] == b"\x89PNG"


def _caption(fig: object) -> str:
    return " ".join(t.get_text() for t in fig.texts)  # type: ignore[attr-defined]


def _overload_marks(fig: object) -> set[str]:
    """The kinds of red overload marks drawn (``overloaded:bound``, ``overloaded:util``)."""
    return {ln.get_gid() for ax in fig.axes for ln in ax.lines  # type: ignore[attr-defined]
            if ln.get_gid() in ("overloaded:bound", "overloaded:util")}


def _legend(fig: object) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend()  # type: ignore[attr-defined]
            for t in ax.get_legend().get_texts()]


def test_the_sweep_caption_says_how_each_overloaded_point_was_found(swept: Path) -> None:
    """A point stopped at the bound and one that ran all samples at utilisation ≥ 1 are told apart."""
    import dataclasses

    from benchbox.plots import figure, label_receipts

    paths = expand_index([swept / INDEX])
    receipts = [load_receipt(p) for p in paths]
    fig = figure(label_receipts(paths, receipts), "sweep")
    assert "stopped at bound': the backlog or one wait passed the declared bound" in _caption(fig)
    assert "util ≥ 1'" not in _caption(fig)

    def flagged(rec: object) -> object:  # every point ran all its samples, at a utilisation of 1.3
        rows = []
        for row in rec.results:  # type: ignore[attr-defined]
            load = row.load
            if load is not None and load.offered_per_s:
                load = dataclasses.replace(load, overloaded=True, utilisation=1.3, max_backlog=3,
                                           max_queue_ns=1_000_000, overload="measured utilisation 1.30 ≥ 1")
            rows.append(dataclasses.replace(row, load=load))
        return dataclasses.replace(rec, results=tuple(rows))

    fig = figure(label_receipts(paths, [flagged(r) for r in receipts]), "sweep")
    marks = _overload_marks(fig)
    assert "overloaded:util" in marks and "overloaded:bound" not in marks
    assert any("util ≥ 1" in t for t in _legend(fig)) and not any("stopped" in t for t in _legend(fig))
    cap = _caption(fig)
    assert "'util ≥ 1': all samples ran" in cap and "the declared bound was not reached" in cap
    assert "'stopped at bound'" not in cap


def test_cli_sweep_refuses_bad_input_with_one_line(tmp_path: Path) -> None:
    out = tmp_path / "s"
    one_line_exit_2(["sweep", "--out-dir", str(out)])  # no point
    one_line_exit_2(["sweep", "--rate", "fast", "--out-dir", str(out)])
    one_line_exit_2(["sweep", "--gap", "soon", "--out-dir", str(out)])
    one_line_exit_2(["sweep", "--rate", "0.3x", "--out-dir", str(out)])  # a fraction needs one case
    one_line_exit_2(["sweep", "--rate", "5", "--runner", "nope", "--out-dir", str(out)])
    assert not (out / INDEX).exists()


def test_a_runner_s_own_relative_rates_run_with_only_its_options_and_no_foreign_baseline() -> None:
    from benchbox.sweep import _for_runners

    cfg = RunConfig(runners=("torch-eager", "torch-compile"), baseline="torch-compile",
                    runner_options={"torch-compile": {"mode": "default"}})
    eager = _for_runners(cfg, ("torch-eager",))
    assert eager.runners == ("torch-eager",) and eager.runner_options == {} and eager.baseline is None
    eager.validate()  # the per-runner run is a valid configuration (a foreign option was refused before)
    compiled = _for_runners(cfg, ("torch-compile",))
    assert compiled.runner_options == {"torch-compile": {"mode": "default"}}
    assert compiled.baseline == "torch-compile"


class _CountingTask(LightTask):
    """LightTask that counts the requests it parses (every call, timed or not, parses one)."""

    parsed = 0

    def parse(self, request: bytes) -> object:
        type(self).parsed += 1
        return super().parse(request)


def test_a_declared_settle_phase_runs_untimed_calls_before_the_reference_and_is_recorded(
        tmp_path: Path) -> None:
    import re

    lines: list[str] = []
    run = RunConfig(contracts=("public_task_call_poisson",), runners=("torch-eager",), cases=("a",),
                    samples=5, warmup=2)
    cfg = SweepConfig(run=run, out_dir=tmp_path, gaps_ms=(0.0, 1.0), settle_s=0.2)
    _CountingTask.parsed = 0
    sweep(cfg, lines.append, task=_CountingTask())
    settled = [ln for ln in lines if "settled with" in ln]
    assert len(settled) == 1, lines  # one (runner, case) in the one run: one settle, before its points
    calls = int(re.search(r"settled with (\d+) untimed", settled[0]).group(1))  # type: ignore[union-attr]
    assert calls >= 1 and "over 0.2 s" in settled[0]
    # the request check at load, the example and the reference call (3), validation (2), the settle,
    # then per point (back to back, gap 1 ms) its warm-up and samples
    assert _CountingTask.parsed == 3 + 2 + calls + 2 * (2 + 5)
    index = json.loads((tmp_path / INDEX).read_text())
    assert index["settle_s"] == 0.2
    for p in index["points"]:
        assert load_receipt(tmp_path / p["receipt"]).settings["settle_s"] == 0.2  # type: ignore[index]


def test_the_settle_phase_defaults_to_two_seconds_and_refuses_bad_values(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from benchbox.cli import main
    from benchbox.sweep import DEFAULT_SETTLE_S

    assert DEFAULT_SETTLE_S == 2.0 and SweepConfig(run=RunConfig(), out_dir=tmp_path).settle_s == 2.0
    help_text = CliRunner().invoke(main, ["sweep", "--help"]).output
    assert "--settle-s" in help_text and "default: 2.0" in help_text
    for bad in ("-1", "nan", "inf"):
        line = one_line_exit_2(["sweep", "--gap", "1", "--settle-s", bad, "--out-dir", str(tmp_path / "s")])
        assert "--settle-s" in line
    with pytest.raises(FieldError, match="below the per-case time limit"):  # it would fail every case
        RunConfig(settle_s=10.0, case_time_limit_s=10.0).validate()
    RunConfig(settle_s=10.0, case_time_limit_s=0.0).validate()  # no limit
    assert not (tmp_path / "s" / INDEX).exists()


def _markers_at(fig: object, x: float) -> list[tuple[str, object]]:
    """(marker, face colour) of the single-point markers drawn at ``x``, on every panel."""
    from matplotlib.colors import to_hex

    out = []
    for ax in fig.axes:  # type: ignore[attr-defined]
        for line in ax.lines:
            xs = list(line.get_xdata())
            if len(xs) == 1 and xs[0] == x and line.get_marker() not in ("x", "None", None, ""):
                out.append((line.get_marker(), to_hex(line.get_markerfacecolor())))
    return out


def test_a_flagged_point_gets_its_flag_marker_and_busy_waits_are_hollow(swept: Path) -> None:
    """Shapes follow the other figures' flag markers (square = unsettled); idle mode is the fill."""
    import dataclasses

    from benchbox.plots import figure, label_receipts
    from benchbox.plots._common import FLAG_MARKERS

    paths = expand_index([swept / INDEX])

    def with_reasons(rec: object, reasons: tuple[str, ...]) -> object:
        """The receipt with its rows' noise/unsettled flags (as this machine gave them) replaced."""
        rows = tuple(dataclasses.replace(r, reasons=tuple(x for x in r.reasons  # type: ignore[attr-defined]
                                                          if not x.startswith(("noise:", "unsettled:")))
                                         + reasons).derive()  # its flags as a receipt of them loads
                     for r in rec.results)  # type: ignore[attr-defined]
        return dataclasses.replace(rec, results=rows)

    receipts = [with_reasons(load_receipt(p), ()) for p in paths]

    plain = figure(label_receipts(paths, receipts), "sweep")
    assert {m for m, _ in _markers_at(plain, 100.0)} == {FLAG_MARKERS[()]}
    flagged = [with_reasons(r, ("unsettled: first and second halves' medians differ by 9%",))
               if r.contract.arrival is not None and r.contract.arrival.rate_per_s == 100.0 else r
               for r in receipts]
    fig = figure(label_receipts(paths, flagged), "sweep")
    marks = _markers_at(fig, 100.0)
    assert marks and {m for m, _ in marks} == {FLAG_MARKERS[("unsettled",)]} != {FLAG_MARKERS[()]}
    legend = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("unsettled") for t in legend)
    # the y axes carry labelled ticks between the decades (2×, 3× or 5×), at least four in view
    fig.canvas.draw()
    ax = next(a for a in fig.axes if a.lines)
    lo, hi = ax.get_ylim()
    ticks = [float(t) for t in ax.yaxis.get_majorticklocs() if lo <= t <= hi]
    mantissas = {round(t / 10 ** math.floor(math.log10(t)), 6) for t in ticks}
    assert ax.get_yscale() == "log" and {2.0, 3.0, 5.0} & mantissas and len(ticks) >= 4, ticks
    assert all(t.get_text() for t in ax.get_yticklabels() if lo <= t.get_position()[1] <= hi)


def test_busy_waited_points_are_hollow_and_slept_ones_filled(tmp_path: Path) -> None:
    from benchbox.plots import figure, label_receipts

    run = RunConfig(contracts=("model_io_wall",), runners=("torch-eager",), cases=("a",), samples=5, warmup=1)
    sweep(SweepConfig(run=run, out_dir=tmp_path, gaps_ms=(0.5,), idles=("sleep", "busy"), settle_s=0.0),
          task=LightTask())
    paths = expand_index([tmp_path / INDEX])
    fig = figure(label_receipts(paths, [load_receipt(p) for p in paths]), "sweep")
    faces = {face for _, face in _markers_at(fig, 0.5)}
    assert "#ffffff" in faces and len(faces) == 2  # one hollow series (busy), one filled (sleep)
