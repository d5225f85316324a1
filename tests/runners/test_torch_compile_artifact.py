"""torch-compile artifacts and draws with real inductor compiles on the CPU.

One run of the matmul task (max-autotune: the CPU autotuner chooses at three call sites)
draws two fresh compiles, pins the faster and saves it as an artifact; a second process
with empty caches (``BENCHBOX_CACHE``, ``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR``
pointing at new directories) loads it and must not compile the graph again: inductor's own
counters say so (an FX graph cache hit, no miss) and the autotuner is never called.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from benchbox.fallbacks import kernel_label
from benchbox.receipts import load_receipt
from benchbox.receipts.diff import DiffOptions, compiler_causes, diff_receipts
from benchbox.receipts.model import decode_receipt
from benchbox.render import results_table
from benchbox.run import RunConfig, run
from benchbox.runners import compile_artifact as cart
from tests.support import REPO, loaded, one_line_exit_2

MATMUL = "tests.compile_tasks:matmul_factory"
VECTOR = "tests.compile_tasks:factory"
#: the draw options both sides of a comparison declare
DRAWS = {"draws": 2, "draw_rounds": 1, "draw_samples": 3}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Two real fresh compiles, the faster pinned and saved as an artifact."""
    tmp = tmp_path_factory.mktemp("saved")
    cfg = RunConfig(task=MATMUL, cases=("v0",), runners=("torch-compile",), samples=3, warmup=1,
                    out=tmp / "saved.json",
                    runner_options={"torch-compile": {"cache_dir": str(tmp / "cache"), **DRAWS,
                                                      "artifact_out": str(tmp / "mm.artifact")}})
    outcome = run(cfg)
    return tmp, loaded(outcome.path)


@pytest.fixture(scope="module")
def reloaded(saved: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The artifact loaded by ``benchbox run`` in a fresh process whose caches are all empty."""
    tmp = tmp_path_factory.mktemp("loaded")
    caches = {name: tmp / name for name in ("benchbox", "inductor", "triton")}
    env = {**os.environ, "PYTHONPATH": str(REPO), "BENCHBOX_CACHE": str(caches["benchbox"]),
           "TORCHINDUCTOR_CACHE_DIR": str(caches["inductor"]), "TRITON_CACHE_DIR": str(caches["triton"])}
    cmd = [sys.executable, "-m", "benchbox", "run", "--task", MATMUL, "--case", "v0", "--runner",
           "torch-compile", "--samples", "3", "--warmup", "1", "--out", str(tmp / "loaded.json"),
           "--runner-option", f"torch-compile:artifact={saved[0] / 'mm.artifact'}",
           *[a for k, v in DRAWS.items() for a in ("--runner-option", f"torch-compile:{k}={v}")]]
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (caches["benchbox"] / "inductor").exists()  # no pinned caches read or written
    return tmp / "loaded.json", loaded(tmp / "loaded.json")


def _report(receipt: dict) -> dict:
    (row,) = receipt["results"]
    assert row["status"] == "valid", row["reasons"]
    return row["runner_report"]


def _picks(receipt: dict) -> list[tuple[str, str]]:
    return sorted((json.dumps(f["input_shapes"]), kernel_label(f["chosen"]))
                  for f in _report(receipt)["fallbacks"] if f["kind"] == "autotune_choice")


def test_real_draws_autotune_afresh_and_the_pinned_copy_of_the_fastest_loads_warm(saved: tuple) -> None:
    rep = _report(saved[1])
    draws = rep["compile"]["draws"]
    assert [e["autotuned_call_sites"] for e in draws["entries"]] == [3, 3]
    phases = rep["compile"]["phases"]
    for d in (1, 2):
        assert phases[f"compile_draw_{d}"]["cache_counters"]["inductor"]["fxgraph_cache_miss"] == 1
    warm = phases["compile_warm"]
    assert warm["cache_counters"]["inductor"].get("fxgraph_cache_hit", 0) >= 1
    assert warm["cache_counters"]["inductor"].get("fxgraph_cache_miss", 0) == 0 and warm["autotuned_ops"] == 0
    pin = rep["compile"]["pin"]
    assert pin["status"] == "fresh" and pin["picks_from"] == f"this run's compile_draw_{draws['fastest']}"
    fastest = draws["entries"][draws["fastest"] - 1]
    assert sorted((json.dumps(p["input_shapes"]), kernel_label(p["chosen"])) for p in fastest["picks"]) \
        == _picks(saved[1])


def test_the_artifact_records_its_key_picks_and_sha256(saved: tuple) -> None:
    tmp, receipt = saved
    rep = _report(receipt)
    art = cart.read_artifact(str(tmp / "mm.artifact"))
    assert rep["compile"]["artifact"]["saved"]["sha256"] == art.sha256 == rep["compile"]["artifact"]["sha256"]
    assert art.meta["key"] == rep["compile"]["pin"]["key"] and art.meta["key_parts"]["compile"]["draws"] == 2
    assert art.meta["selection"]["draws"] == 2 and art.meta["picks_phase"].startswith("compile_draw_")
    assert len(art.meta["picks"]) == 3 and art.meta["entries"]["inductor"] >= 1
    assert f"saved as artifact {art.short}" in rep["compile"]["pin"]["summary"]
    assert rep["compile"]["artifact"]["options"] == {"artifact_out": str(tmp / "mm.artifact")}
    assert "artifact_out" not in rep["options"]


def test_artifact_loaded_in_a_fresh_process_with_empty_caches_is_not_compiled_again(
        saved: tuple, reloaded: tuple) -> None:
    receipt = reloaded[1]
    rep = _report(receipt)
    sha = _report(saved[1])["compile"]["artifact"]["sha256"]
    comp = rep["compile"]
    assert comp["artifact"]["sha256"] == sha and comp["artifact"]["used"] == "loaded"
    assert comp["pin"]["status"] == "artifact"
    assert comp["pin"]["summary"].startswith(f"reused from artifact {sha[:12]}")
    assert "fastest of 2 fresh compiles" in comp["pin"]["summary"]
    assert list(comp["phases"]) == ["compile_warm"] and "draws" not in comp
    warm = comp["phases"]["compile_warm"]
    inductor = warm["cache_counters"]["inductor"]
    assert inductor.get("fxgraph_cache_hit", 0) >= 1 and inductor.get("fxgraph_cache_miss", 0) == 0
    assert warm["autotuned_ops"] == 0 and comp["pin"]["graphs"]["autotuned_call_sites"] == 0
    assert comp["artifact"]["loaded_entries"]["inductor"] >= 1
    assert _picks(receipt) == _picks(saved[1])  # listed from the artifact's record of the pinned compile
    assert f"compile: reused from artifact {sha[:12]}" in results_table(decode_receipt(receipt, "r"))


def test_the_same_artifact_on_both_sides_diffs_as_today_and_another_names_the_shas(
        saved: tuple, reloaded: tuple) -> None:
    base, head = saved[0] / "saved.json", reloaded[0]
    opts = DiffOptions(accept=frozenset({"noisy", "unsettled", "load", "machine"}))
    d = diff_receipts(load_receipt(base), load_receipt(head), opts, str(base), str(head))
    (row,) = d.rows
    assert row.verdict not in ("not comparable", "invalid"), row.reason
    assert row.causes == ()  # one artifact: the same kernels, nothing to name
    other = json.loads(json.dumps(reloaded[1]))
    other["results"][0]["runner_report"]["compile"]["artifact"]["sha256"] = "f" * 64
    b, h = decode_receipt(saved[1], "b").results[0], decode_receipt(other, "h").results[0]
    sha = _report(saved[1])["compile"]["artifact"]["sha256"]
    assert compiler_causes(b, h)[0] == f"compiled artifact {sha[:12]} → ffffffffffff"


def _edited(src: Path, dst: Path, edit: dict) -> Path:
    """A copy of the artifact whose recorded key parts are changed (its payload untouched)."""
    with zipfile.ZipFile(src) as z:
        meta, payload = json.loads(z.read(cart.META)), z.read(cart.PAYLOAD)
    for path, value in edit.items():
        node = meta["key_parts"]
        *parents, leaf = path.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = value
    with zipfile.ZipFile(dst, "w") as z:
        z.writestr(cart.META, json.dumps(meta))
        z.writestr(cart.PAYLOAD, payload)
    return dst


@pytest.mark.parametrize(("task", "edit", "expect"), [
    (VECTOR, {}, "model.structure_sha256"),
    (MATMUL, {"versions.torch": "2.11.0+cu128"}, 'versions.torch "2.11.0+cu128" → '),
    (MATMUL, {"device.type": "cuda", "device.model": "NVIDIA H200"}, 'device.type "cuda" → "cpu"'),
])
def test_a_mismatched_artifact_is_refused_in_one_line_before_sampling(
        saved: tuple, tmp_path: Path, task: str, edit: dict, expect: str) -> None:
    art = saved[0] / "mm.artifact"
    if edit:
        art = _edited(art, tmp_path / "x.artifact", edit)
    from click.testing import CliRunner

    from benchbox.cli import main

    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["run", "--task", task, "--case", "v0", "--runner", "torch-compile",
                                       "--runner-option", f"torch-compile:artifact={art}", "--out", str(out)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    # the progress lines of the run so far, then the refusal: one line
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("benchbox: error: ")]
    assert len(errors) == 1 and result.stderr.rstrip().endswith(errors[0]), result.stderr
    assert "Traceback" not in result.output
    assert "was compiled for another key" in errors[0] and expect in errors[0], errors[0]
    assert not json.loads(out.read_text())["results"]  # nothing was sampled


def test_a_mismatched_artifact_can_be_set_aside_and_the_runner_compiles(saved: tuple, tmp_path: Path) -> None:
    receipt = loaded(run(RunConfig(
        task=VECTOR, cases=("v0",), runners=("torch-compile",), samples=3, warmup=1, out=tmp_path / "r.json",
        task_options={"graph_break": False},
        runner_options={"torch-compile": {"mode": "default", "cold_warm": False, "pin": False,
                                          "artifact": str(saved[0] / "mm.artifact"),
                                          "artifact_mismatch": "compile"}})).path)
    comp = _report(receipt)["compile"]
    assert comp["artifact"]["used"] == "not used" and "sha256" not in comp["artifact"]
    assert "model.structure_sha256" in comp["artifact"]["not_used"]
    summary = comp["pin"]["summary"]
    assert summary.startswith("artifact ") and "compiled instead: not pinned" in summary
    assert list(comp["phases"]) == ["compile_cold"]


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    (b"not a zip", "not a benchbox torch-compile artifact"),
    ("damaged", "damaged: its payload's sha256 is"),
])
def test_an_unusable_artifact_is_refused_before_anything_runs(
        saved: tuple, tmp_path: Path, content: object, message: str) -> None:
    path = tmp_path / "bad.artifact"
    if content == "damaged":
        with zipfile.ZipFile(saved[0] / "mm.artifact") as z:
            meta, payload = z.read(cart.META), z.read(cart.PAYLOAD)
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(cart.META, meta)
            z.writestr(cart.PAYLOAD, payload + b"x")
    elif isinstance(content, bytes):
        path.write_bytes(content)
    out = tmp_path / "r.json"
    line = one_line_exit_2(["run", "--task", MATMUL, "--runner", "torch-compile",
                            "--runner-option", f"torch-compile:artifact={path}", "--out", str(out)])
    assert message in line and not out.exists(), line
