"""examples/ci/bench.sh: interleaved base/head runs, combined into rounds, a report on every path."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.support import REPO

SCRIPT = REPO / "examples" / "ci" / "bench.sh"
RUN = ["--runner", "torch-eager", "--case", "invoice", "--samples", "12", "--warmup", "1"]


def _bench(out: Path, *args: str, rounds: int = 2,
           extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BENCHBOX": f"{shlex.quote(sys.executable)} -m benchbox",
           "BENCHBOX_ROUNDS": str(rounds), "PYTHONPATH": str(REPO), **(extra_env or {})}
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(["bash", str(SCRIPT), str(REPO), str(REPO), str(out), *args],
                          env=env, capture_output=True, text=True, timeout=600)


def test_base_and_head_runs_alternate_and_become_rounds_of_one_receipt_each(tmp_path: Path) -> None:
    p = _bench(tmp_path, *RUN)
    assert p.returncode == 0, p.stderr
    for side in ("base", "head"):
        row = json.loads((tmp_path / f"{side}.json").read_text())["results"][0]
        assert row["round_sizes"] == [12, 12]
    # base first in round 1, head first in round 2
    made = sorted(tmp_path.glob("*-[0-9].json"), key=lambda f: f.stat().st_mtime_ns)
    assert [f.stem for f in made] == ["base-1", "head-1", "head-2", "base-2"]
    report = (tmp_path / "diff.md").read_text()
    assert report.startswith("<!-- benchbox-diff -->\n") and "torch-eager" in report
    assert "base.json → head.json" in report and str(tmp_path) not in report  # relative names
    assert (tmp_path / "diff-exit").read_text().strip() in {"0", "1", "3", "4"}


def test_a_failed_run_still_writes_a_report_saying_why(tmp_path: Path) -> None:
    p = _bench(tmp_path, "--runner", "no-such-runner", rounds=1)
    assert p.returncode == 0, p.stderr
    report = (tmp_path / "diff.md").read_text()
    assert "no comparison" in report and "base run 1 of 1 failed" in report and "no-such-runner" in report
    assert (tmp_path / "diff-exit").read_text().strip() == "2"


def test_a_committed_baseline_is_used_and_only_head_runs(tmp_path: Path) -> None:
    first = tmp_path / "first"
    assert _bench(first, *RUN, rounds=1).returncode == 0
    second = tmp_path / "second"
    second.mkdir()
    (second / "baseline.json").write_bytes((first / "head.json").read_bytes())
    assert _bench(second, *RUN, rounds=1).returncode == 0
    assert not list(second.glob("base-*.json"))
    assert (second / "base.json").read_bytes() == (first / "head.json").read_bytes()
    assert (second / "diff.md").read_text().startswith("<!-- benchbox-diff -->")


#: a small real compile (a matmul) for the artifact hand-off
COMPILED = ["--task", "tests.compile_tasks:matmul_factory", "--case", "v0", "--runner", "torch-compile",
            "--samples", "3", "--warmup", "1"]


def test_a_compiled_artifact_beside_the_baseline_is_loaded_by_the_head_runs(tmp_path: Path) -> None:
    first = tmp_path / "first"
    art = tmp_path / "torch-compile.artifact"
    env_cache = {"BENCHBOX_CACHE": str(tmp_path / "cache-first")}
    assert _bench(first, *COMPILED, "--runner-option", f"torch-compile:artifact_out={art}", rounds=1,
                  extra_env=env_cache).returncode == 0
    second = tmp_path / "second"
    second.mkdir()
    (second / "baseline.json").write_bytes((first / "head.json").read_bytes())
    (second / "torch-compile.artifact").write_bytes(art.read_bytes())
    p = _bench(second, *COMPILED, rounds=1, extra_env={"BENCHBOX_CACHE": str(tmp_path / "cache-second")})
    assert p.returncode == 0, p.stderr
    (row,) = json.loads((second / "head-1.json").read_text())["results"]
    comp = row["runner_report"]["compile"]
    assert comp["artifact"]["used"] == "loaded", comp.get("artifact")
    assert comp["pin"]["summary"].startswith("reused from artifact")
