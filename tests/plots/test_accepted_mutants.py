"""Receipts the loader accepts that once made `plot` or `export` fail with an internal error."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox.cli import main
from benchbox.receipts import load_receipt
from tests.support import GOLDEN


def _names(doc: dict, name: str) -> None:
    for row in doc["results"]:
        row["runner"] = row["runner"] + name
        row["case"] = name + row["case"]
    doc["comparisons"] = {"baseline": None, "rows": [], "excluded": []}


def _zeros(doc: dict) -> None:
    for row in doc["results"]:
        n = len(row["samples_ns"])
        row["samples_ns"] = [0] * n
        row["stages_ns"] = {k: [0] * len(v) for k, v in row["stages_ns"].items()}
        s = row["summary"]
        for k in ("p50_ns", "p90_ns", "p99_ns", "mean_ns", "min_ns", "max_ns", "std_ns"):
            if k in s:
                s[k] = 0
        for k in ("p50_ci_ns", "p90_ci_ns", "p99_ci_ns"):
            if s.get(k) is not None:
                s[k] = [0, 0]


def _long_names(doc: dict, length: int) -> None:
    for row in doc["results"]:
        row["runner"] = (row["runner"] + "n" * length)[:length]


def _duplicate(doc: dict) -> None:
    doc["results"].append(json.loads(json.dumps(doc["results"][0])))


def _p50_outside(doc: dict) -> None:
    s = doc["results"][0]["summary"]
    s["p50_ci_ns"] = [s["p50_ns"] * 3, s["p50_ns"] * 4]


MUTANTS: dict[str, Callable[[dict], None]] = {
    "mathtext in names": lambda d: _names(d, "$\\foo$ $a^$ "),
    "a lone dollar and a brace": lambda d: _names(d, "$}{\\"),
    "all-zero samples": _zeros,
    "duplicate rows": _duplicate,
    "p50 outside its own interval": _p50_outside,
    "a name at the 200-character limit": lambda d: _long_names(d, 200),  # 5 MB is refused on load
}


@pytest.fixture(scope="module", params=list(MUTANTS))
def mutant(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    doc = json.loads(GOLDEN.read_text())
    MUTANTS[request.param](doc)
    path = tmp_path_factory.mktemp(request.param.replace(" ", "-")) / "m.json"
    path.write_text(json.dumps(doc))
    load_receipt(path)  # accepted by the loader
    return path


def _ok_or_one_line(args: list[str]) -> int:
    r = CliRunner().invoke(main, args)
    assert "unexpected" not in r.output and "Traceback" not in r.output, (args[:3], r.output[-2000:])
    if r.exit_code == 2:
        assert len(r.stderr.strip().splitlines()) == 1 and len(r.stderr) < 2000, r.stderr[:500]
    return r.exit_code


@pytest.mark.parametrize("kind", ["quantiles", "stages", "ecdf", "diff"])
def test_plot_draws_every_accepted_mutant(mutant: Path, kind: str, tmp_path: Path) -> None:
    args = [str(GOLDEN), str(mutant)] if kind == "diff" else [str(mutant)]
    code = _ok_or_one_line(["plot", *args, "--kind", kind, "-o", str(tmp_path / f"{kind}.png")])
    assert code == 0 or (kind == "diff" and code == 2)
    if code == 0:
        assert (tmp_path / f"{kind}.png").stat().st_size > 0


@pytest.mark.parametrize("fmt", ["pyperf", "csv", "parquet"])
def test_export_writes_every_accepted_mutant(mutant: Path, fmt: str, tmp_path: Path) -> None:
    out = tmp_path / f"out.{fmt}"
    code = _ok_or_one_line(["export", str(mutant), "--format", fmt, "-o", str(out)])
    if code == 2:  # pyperf cannot hold a zero duration: refused in one line
        assert fmt == "pyperf" and mutant.parent.name.startswith("all-zero")
        return
    assert code == 0 and out.stat().st_size > 0
