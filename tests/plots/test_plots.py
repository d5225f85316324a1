"""Figures drawn from real receipts produced in the test run (eager runs: seconds)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import make_receipt

from benchbox.cli import main
from benchbox.errors import UsageError
from benchbox.plots import figure, label_receipts, render
from benchbox.plots._common import runner_colour
from benchbox.receipts import load_receipt
from tests.support import loaded

KINDS_ONE = ("quantiles", "stages", "ecdf")


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plots")


@pytest.fixture(scope="module")
def bad_receipt_path(tmp: Path) -> Path:
    """bfloat16 against the float32 reference with gates at 1e-9 (→ invalid rows), and a
    TensorRT runner on the CPU (→ failed rows: it needs a CUDA device)."""
    make_receipt(tmp, "bad.json", dtype="bfloat16", cases=("invoice", "outage"),
                 runners=("torch-eager", "tensorrt"),
                 gates={"logit_max_abs": 1e-9, "prob_max_abs": 1e-9})
    return tmp / "bad.json"


@pytest.fixture(scope="module")
def two_runner_path(tmp: Path) -> Path:
    """Eager and torch.compile (default mode), both valid, so a ratio to the baseline exists."""
    make_receipt(tmp, "two.json", cases=("invoice",), samples=30,
                 runners=("torch-eager", "torch-compile"),
                 runner_options={"torch-compile": {"mode": "default"}})
    return tmp / "two.json"


@pytest.fixture(scope="module")
def io_receipt_path(tmp: Path) -> Path:
    make_receipt(tmp, "io.json", contract="model_io_wall", cases=("invoice",), samples=30)
    return tmp / "io.json"


@pytest.fixture(scope="module")
def head_receipt_path(tmp: Path) -> Path:
    make_receipt(tmp, "head.json")
    return tmp / "head.json"


def _fig(paths: list[Path], kind: str = "quantiles", threshold: float = 0.05) -> Any:
    return figure(label_receipts(paths, [load_receipt(p) for p in paths]), kind, threshold)


def _texts(fig: Any) -> list[str]:
    """Every text a reader sees: figure texts, titles, tick labels, annotations, legends."""
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def _png_size(path: Path) -> tuple[int, int]:
    blob = path.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert blob[12:16] == b"IHDR"
    return struct.unpack(">II", blob[16:24])


def _check_png(path: Path) -> None:
    import matplotlib.image as mpimg

    w, h = _png_size(path)
    assert 900 <= w <= 5000 and 400 <= h <= 5000, (w, h)
    assert path.stat().st_size > 20_000
    img = mpimg.imread(path)
    assert img.shape[:2] == (h, w)
    assert float(np.std(img[..., :3])) > 0.02, "blank image"


def _check_svg(path: Path) -> None:
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    assert path.stat().st_size > 20_000


@pytest.mark.parametrize("kind", KINDS_ONE)
@pytest.mark.parametrize("ext", ["png", "svg"])
def test_every_single_receipt_kind_renders_a_valid_image(eager_receipt_path: Path, tmp: Path,
                                                         kind: str, ext: str) -> None:
    out = render([eager_receipt_path], tmp / f"{kind}.{ext}", kind)
    (_check_png if ext == "png" else _check_svg)(out)


@pytest.mark.parametrize("kind", KINDS_ONE)
def test_title_carries_contract_task_size_and_device(eager_receipt_path: Path, kind: str) -> None:
    texts = _texts(_fig([eager_receipt_path], kind))
    r = loaded(eager_receipt_path)
    line = next(t for t in texts if t.startswith("contract "))
    assert r["contract"]["name"] in line
    assert f"{r['task']['name']}/{r['task']['size']}" in line
    assert f"device {r['environment']['device']} ({r['environment']['cpu']})" in line


def test_quantiles_labels_invalid_and_failed_rows(bad_receipt_path: Path) -> None:
    r = loaded(bad_receipt_path)
    assert {row["status"] for row in r["results"]} == {"invalid", "failed"}
    fig = _fig([bad_receipt_path])
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks.count("torch-eager [invalid]") == 2
    # a runner that measured nothing in any case is a note, not rows of empty panels
    assert not any(t.startswith("tensorrt") for t in ticks)
    texts = _texts(fig)
    assert texts.count("invalid: accuracy gates logit_max_abs, prob_max_abs") == 2
    assert any("Not drawn, as they measured nothing in any case: tensorrt (failed: TensorRT needs a CUDA "
               "device" in t for t in texts)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.startswith("invalid:") for t in legend) and not any(t.startswith("failed:") for t in legend)
    # the invalid rows are still drawn (grey), never as a ratio
    assert not any("×" in t for t in texts)


@pytest.mark.parametrize("kind", ["stages", "ecdf"])
def test_other_kinds_do_not_drop_invalid_or_failed_rows(bad_receipt_path: Path, kind: str) -> None:
    text = "\n".join(_texts(_fig([bad_receipt_path], kind)))
    assert "invalid" in text
    assert "failed: TensorRT needs a CUDA device" in text


def test_ratio_against_baseline_annotated(two_runner_path: Path) -> None:
    r = loaded(two_runner_path)
    assert r["comparisons"]["baseline"] == "torch-compile"
    row = next(c for c in r["comparisons"]["rows"] if c["runner"] == "torch-eager")
    texts = _texts(_fig([two_runner_path]))
    assert f"{row['p50_ratio']:.2f}× torch-compile" in " | ".join(texts)
    assert f"{row['p99_ratio']:.2f}× torch-compile" in " | ".join(texts)
    assert any("baseline" in t.split(" · ") for t in texts)


def test_unresolved_interval_drawn_hollow_and_noted(eager_receipt_path: Path) -> None:
    r = loaded(eager_receipt_path)
    assert all(row["summary"]["p99_ci_ns"] is None for row in r["results"])  # 40 samples: too few
    fig = _fig([eager_receipt_path])
    p99_ax = fig.axes[1]
    hollow = [ln for ln in p99_ax.get_lines() if ln.get_markerfacecolor() == "white"]
    assert len(hollow) == len(r["results"])
    notes = [t for t in _texts(fig) if t.split(" · ")[0] == "CI unresolved"]  # beside the p99 points
    assert len(notes) == len(r["results"])
    # p50 intervals are resolved at 40 samples and drawn as error bars, not hollow markers
    assert not [ln for ln in fig.axes[0].get_lines() if ln.get_markerfacecolor() == "white"]


def test_stages_outline_the_contract_region(io_receipt_path: Path) -> None:
    from matplotlib.patches import Rectangle

    r = loaded(io_receipt_path)
    stages = r["results"][0]["stages_ns"]
    med = {s: float(np.median(v)) for s, v in stages.items()}
    start = (med["parse"] + med["preprocess"]) / 1e6
    width = (med["h2d"] + med["compute"] + med["d2h"]) / 1e6
    fig = _fig([io_receipt_path], "stages")
    ax = fig.axes[0]
    assert ax.get_xlabel().startswith("median time per stage (ms)")
    outlines = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert len(outlines) == 1
    assert outlines[0].get_x() == pytest.approx(start, rel=1e-9)
    assert outlines[0].get_width() == pytest.approx(width, rel=1e-9)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "timed by model_io_wall: h2d..d2h" in legend
    assert "serialize (outside)" in legend and "compute" in legend


def test_diff_kind_matches_the_diff_library(eager_receipt_path: Path, head_receipt_path: Path,
                                            tmp: Path) -> None:
    from matplotlib.patches import Polygon, Rectangle

    from benchbox.receipts.diff import DiffOptions, diff_receipts

    out = render([eager_receipt_path, head_receipt_path], tmp / "diff.png", "diff", 0.10)
    _check_png(out)
    res = diff_receipts(load_receipt(eager_receipt_path), load_receipt(head_receipt_path),
                        DiffOptions(threshold=0.10))  # the plot judges what benchbox diff judges
    fig = _fig([eager_receipt_path, head_receipt_path], "diff", 0.10)
    texts = _texts(fig)
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    for row in res.rows:
        assert f"{row.runner} [{row.verdict}]" in ticks
        p50 = next((m for m in row.metrics if m.metric == "p50"), None)
        assert p50 is None or any(t.startswith(f"{p50.ratio:.2f}×") for t in texts)
    band = [p for p in fig.axes[0].patches if isinstance(p, (Polygon, Rectangle))
            and p.get_facecolor()[:3] == pytest.approx((0xdf / 255, 0xe8 / 255, 0xf2 / 255))]
    assert band, "no threshold band"
    xs = band[0].get_path().transformed(band[0].get_patch_transform()).vertices[:, 0] \
        if isinstance(band[0], Rectangle) else band[0].get_xy()[:, 0]
    assert min(xs) == pytest.approx(0.9) and max(xs) == pytest.approx(1.1)
    assert "±10% threshold band" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_several_receipts_are_rows_labelled_by_receipt(eager_receipt_path: Path,
                                                       bad_receipt_path: Path) -> None:
    fig = _fig([eager_receipt_path, bad_receipt_path])
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "r · torch-eager" in ticks and "bad · torch-eager [invalid]" in ticks


def test_runner_colour_is_the_same_in_every_kind(eager_receipt_path: Path) -> None:
    from matplotlib.colors import to_hex

    want = runner_colour("torch-eager")
    q = _fig([eager_receipt_path])
    assert to_hex(q.axes[0].get_yticklabels()[1].get_color()) == want.lower()
    e = _fig([eager_receipt_path], "ecdf")
    steps = [ln for ln in e.axes[0].get_lines() if len(ln.get_xdata()) > 2]
    assert steps and all(to_hex(ln.get_color()) == want.lower() for ln in steps)


def test_different_contracts_are_refused(eager_receipt_path: Path, io_receipt_path: Path,
                                         tmp: Path) -> None:
    for kind in ("quantiles", "stages", "ecdf", "diff"):
        with pytest.raises(UsageError, match="different contracts"):
            render([eager_receipt_path, io_receipt_path], tmp / "x.png", kind)
    res = CliRunner().invoke(main, ["plot", str(eager_receipt_path), str(io_receipt_path),
                                    "-o", str(tmp / "x.png")])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "different contracts" in res.output
    assert not (tmp / "x.png").exists()


@pytest.mark.parametrize("args,message", [
    (["-o", "{tmp}/out.pdf"], "use .png or .svg"),
    (["-o", "{tmp}/out"], "use .png or .svg"),
    (["-o", "{tmp}/missing/out.png"], "does not exist"),
    (["-o", "{tmp}/d.png", "--kind", "diff"], "exactly two receipts"),
    (["-o", "{tmp}/d.png", "--threshold", "five"], "--threshold expects a percentage"),
])
def test_bad_input_is_one_line_and_exit_2(eager_receipt_path: Path, tmp: Path, args: list[str],
                                          message: str) -> None:
    args = [a.replace("{tmp}", str(tmp)) for a in args]
    res = CliRunner().invoke(main, ["plot", str(eager_receipt_path), *args])
    assert res.exit_code == 2, res.output
    assert message in res.output and res.output.count("\n") == 1
    assert "Traceback" not in res.output


def test_cli_writes_the_file(eager_receipt_path: Path, tmp: Path) -> None:
    out = tmp / "cli.svg"
    res = CliRunner().invoke(main, ["plot", str(eager_receipt_path), "-o", str(out), "--kind", "stages"])
    assert res.exit_code == 0, res.output
    _check_svg(out)


def test_plots_render_headless_without_importing_torch(eager_receipt_path: Path,
                                                       head_receipt_path: Path, tmp: Path) -> None:
    code = (
        "import sys, json\n"
        "from benchbox.plots import render\n"
        f"a, b, d = {str(eager_receipt_path)!r}, {str(head_receipt_path)!r}, {str(tmp)!r}\n"
        "for k in ('quantiles', 'stages', 'ecdf'):\n"
        "    render([a], d + '/sub-' + k + '.png', k)\n"
        "render([a, b], d + '/sub-diff.png', 'diff')\n"
        "print(json.dumps({'torch': 'torch' in sys.modules,\n"
        "                  'pyplot': 'matplotlib.pyplot' in sys.modules}))\n")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("DISPLAY", "MPLBACKEND")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["torch"] is False
    assert facts["pyplot"] is False
    for k in ("quantiles", "stages", "ecdf", "diff"):
        _check_png(tmp / f"sub-{k}.png")


@pytest.mark.parametrize("kind", ["quantiles", "stages"])
def test_the_readme_figures_leave_out_a_runner_that_never_ran_and_say_so(kind: str) -> None:
    """The committed H200 receipts hold tensorrt rows that failed before a sample (no runtime
    installed there): the README's figures draw the runners that ran and name tensorrt in a note."""
    from tests.support import REPO

    path = REPO / "receipts" / ("h200-tiny-fp32.public_task_call_wall.json" if kind == "quantiles"
                                else "h200-tiny-fp32.model_io_wall.json")
    assert {(r.runner, r.measured) for r in load_receipt(path).results} >= {("tensorrt", False)}
    fig = _fig([path], kind)
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "torch-compile" in ticks and not any("tensorrt" in t for t in ticks)
    notes = [t for t in _texts(fig) if "Not drawn" in t]
    assert len(notes) == 1 and "tensorrt (failed: neither tensorrt nor tensorrt_rtx_bindings is installed)" \
        in notes[0] and "pip install" not in notes[0]


def test_a_receipt_where_nothing_measured_still_draws_its_rows(bad_receipt_path: Path) -> None:
    import dataclasses

    r = load_receipt(bad_receipt_path)
    failed_only = dataclasses.replace(r, results=tuple(x for x in r.results if x.runner == "tensorrt"))
    fig = figure(label_receipts([bad_receipt_path], [failed_only]), "quantiles")
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert ticks.count("tensorrt [failed]") == 2 and not any("Not drawn" in t for t in _texts(fig))
