"""examples/ci/benchbox.yml: the pull request cannot decide its own gate, holds no token, and the
job is cheap to run often; examples/ci/verdict.sh recomputes the verdict from the receipts."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchbox import stats
from tests.support import GOLDEN, REPO

yaml = pytest.importorskip("yaml", reason="PyYAML (a dependency of ray, in the dev extra) reads the workflow")

WORKFLOW = REPO / "examples" / "ci" / "benchbox.yml"
VERDICT = REPO / "examples" / "ci" / "verdict.sh"


@pytest.fixture(scope="module")
def wf() -> dict[str, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def _steps(wf: dict[str, Any], job: str) -> list[dict[str, Any]]:
    return wf["jobs"][job]["steps"]


def _uses(step: dict[str, Any], action: str) -> bool:
    return str(step.get("uses", "")).startswith(f"{action}@")


def _runs(wf: dict[str, Any], job: str) -> str:
    return "\n".join(str(s.get("run", "")) for s in _steps(wf, job))


def test_every_checkout_leaves_no_token_behind(wf: dict[str, Any]) -> None:
    checkouts = [s for job in wf["jobs"] for s in _steps(wf, job) if _uses(s, "actions/checkout")]
    assert len(checkouts) == 3
    assert all(s.get("with", {}).get("persist-credentials") is False for s in checkouts)


def test_permissions_are_read_only_but_the_verdicts_comment(wf: dict[str, Any]) -> None:
    assert wf["permissions"] == {"contents": "read"}
    assert wf["jobs"]["measure"]["permissions"] == {"contents": "read"}
    assert wf["jobs"]["verdict"]["permissions"] == {"contents": "read", "pull-requests": "write"}


def test_the_measuring_job_runs_the_base_revisions_script(wf: dict[str, Any]) -> None:
    trusted = wf["env"]["TRUSTED_SHA"]
    assert trusted == "${{ github.event.pull_request.base.sha || github.sha }}"
    base = [s for s in _steps(wf, "measure") if _uses(s, "actions/checkout") and s["with"]["path"] == "base"]
    assert len(base) == 1 and base[0]["with"]["ref"] == "${{ env.TRUSTED_SHA }}"
    runs = _runs(wf, "measure")
    assert "bash base/examples/ci/bench.sh base head out" in runs
    # nothing from the pull request's checkout is executed as a script, in either job
    assert not re.search(r"head/\S+\.(sh|py)", runs + _runs(wf, "verdict"))
    uploads = [s for s in _steps(wf, "measure") if _uses(s, "actions/upload-artifact")]
    assert len(uploads) == 1 and uploads[0]["if"] == "always()"


def test_the_measuring_runs_import_each_checkouts_benchbox_and_the_verdict_the_installed_one(
        wf: dict[str, Any], tmp_path: Path) -> None:
    """This repository measures itself: started in a checkout, the measuring step's command imports
    that checkout's benchbox (the installed `benchbox` command would time the base's code on both
    sides); the verdict job names no command of its own, so it judges with the installed one."""
    (step,) = [s for s in _steps(wf, "measure") if "bench.sh" in str(s.get("run", ""))]
    command = shlex.split(step["env"]["BENCHBOX"])
    assert command[:2] == ["python", "-m"]
    package = tmp_path / "head" / "benchbox"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text("import benchbox, sys; print(benchbox.__file__, sys.argv[1:])\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, *command[1:], "run", "--out", "x.json"], cwd=package.parent,
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.stdout.strip() == f"{package / '__init__.py'} ['run', '--out', 'x.json']", p.stderr
    assert "BENCHBOX" not in {**wf.get("env", {}), **wf["jobs"]["verdict"].get("env", {})}
    assert not any("BENCHBOX" in s.get("env", {}) for s in _steps(wf, "verdict"))


def test_the_verdict_job_runs_no_pull_request_code_and_gates_on_its_own_diff(wf: dict[str, Any]) -> None:
    job = wf["jobs"]["verdict"]
    assert job["needs"] == "measure"
    checkouts = [s for s in job["steps"] if _uses(s, "actions/checkout")]
    assert [c["with"]["ref"] for c in checkouts] == ["${{ env.TRUSTED_SHA }}"]  # the base only
    assert any(_uses(s, "actions/download-artifact") for s in job["steps"])
    runs = _runs(wf, "verdict")
    assert "bash base/examples/ci/verdict.sh out" in runs
    assert "diff-exit" not in runs and "diff.md" not in runs  # the measuring job's own verdict is ignored
    gate = job["steps"][-1]
    assert gate["env"]["CODE"] == "${{ steps.diff.outputs.code }}"
    assert "exit 1" in gate["run"] and "exit 2" in gate["run"] and "exit 3" in gate["run"]
    # the comment is the only step with the token, and it only reads the report file
    with_token = [s for s in job["steps"] if "GH_TOKEN" in s.get("env", {})]
    assert len(with_token) == 1 and "out/verdict.md" in with_token[0]["run"]
    assert not any("GH_TOKEN" in s.get("env", {}) for s in _steps(wf, "measure"))


def test_benchbox_is_installed_from_the_base_checkout_never_by_name(wf: dict[str, Any]) -> None:
    for job in ("measure", "verdict"):
        installs = [ln.strip() for ln in _runs(wf, job).splitlines() if "pip install" in ln]
        assert "python -m pip install ./base" in installs
        assert not [ln for ln in installs if re.search(r"pip install\s+['\"]?benchbox", ln)]


def test_cache_concurrency_and_timeouts(wf: dict[str, Any]) -> None:
    assert wf["on"]["push"]["branches"] == ["main"] and "pull_request" in wf["on"]
    cache = [s for s in _steps(wf, "measure") if _uses(s, "actions/cache")]
    assert len(cache) == 1 and cache[0]["with"]["path"] == ".benchbox-cache"
    assert "${{ github.sha }}" in cache[0]["with"]["key"]  # saved per push to main ...
    assert cache[0]["with"]["key"].startswith(cache[0]["with"]["restore-keys"])  # ... restored by prefix
    for job in ("measure", "verdict"):
        setup = [s for s in _steps(wf, job) if _uses(s, "actions/setup-python")]
        assert setup and all(s["with"].get("cache") == "pip" for s in setup)
        assert 0 < wf["jobs"][job]["timeout-minutes"] <= 120
    assert wf["concurrency"]["cancel-in-progress"] is True
    assert "github.event.pull_request.number" in wf["concurrency"]["group"]


# -- verdict.sh ---------------------------------------------------------------------------------

def _slower(doc: dict[str, Any], factor: float) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    for row in doc["results"]:
        row["samples_ns"] = [int(v * factor) for v in row["samples_ns"]]
        row["stages_ns"] = {k: [int(v * factor) for v in vs] for k, vs in row["stages_ns"].items()}
        row["summary"] = stats.summarize(row["samples_ns"])
    return doc


def _verdict(out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BENCHBOX": f"{shlex.quote(sys.executable)} -m benchbox", "PYTHONPATH": str(REPO)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(["bash", str(VERDICT), str(out)], env=env, capture_output=True, text=True,
                          timeout=300)


def test_verdict_sh_recomputes_the_diff_and_ignores_what_the_measuring_job_wrote(tmp_path: Path) -> None:
    golden = json.loads(GOLDEN.read_text())
    (tmp_path / "base.json").write_text(json.dumps(golden))
    (tmp_path / "head.json").write_text(json.dumps(_slower(golden, 3.0)))
    direct = subprocess.run([sys.executable, "-m", "benchbox", "diff", str(tmp_path / "base.json"),
                             str(tmp_path / "head.json")], capture_output=True, text=True, cwd=REPO)
    forged = "0" if direct.returncode else "1"
    (tmp_path / "diff-exit").write_text(forged + "\n")  # what an edited bench.sh could write
    (tmp_path / "diff.md").write_text("<!-- benchbox-diff -->\nno regression\n")
    p = _verdict(tmp_path)
    assert p.returncode == direct.returncode != int(forged), p.stderr
    report = (tmp_path / "verdict.md").read_text()
    assert report.startswith("<!-- benchbox-diff -->\n") and "torch" in report
    assert "base.json → head.json" in report and str(tmp_path) not in report  # relative names


def test_verdict_sh_without_receipts_fails_and_fences_the_failure_text(tmp_path: Path) -> None:
    (tmp_path / "failure.txt").write_text("boom <img src=x onerror=alert(1)><!-- ``` closing\n")
    p = _verdict(tmp_path)
    assert p.returncode == 2
    report = (tmp_path / "verdict.md").read_text()
    outside, inside = _split_fence(report)
    assert "<img" not in outside and "<img" in inside and "```" not in inside


def _split_fence(md: str) -> tuple[str, str]:
    """(the markdown outside fenced code blocks, the text inside them)."""
    outside, inside, fenced = [], [], False
    for line in md.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        (inside if fenced else outside).append(line)
    assert not fenced, "an unclosed fence"
    return "\n".join(outside), "\n".join(inside)


# -- bench.sh's failure path ---------------------------------------------------------------------

def _bench(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BENCHBOX": f"{shlex.quote(sys.executable)} -m benchbox", "BENCHBOX_ROUNDS": "1",
           "PYTHONPATH": str(REPO)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(["bash", str(REPO / "examples" / "ci" / "bench.sh"), str(REPO), str(REPO), str(out),
                           *args], env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("args", [["--runner", "<img src=x onerror=alert(1)><!--`x`"],
                                  ["--contract", "{out}/c.toml"],
                                  ["--contract", "/no/such/place/a/long/folder/name/to/be/cut/c.toml"]])
def test_a_failed_runs_log_is_fenced_with_relative_paths(tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "out"
    p = _bench(out, *[a.replace("{out}", str(out)) for a in args])
    assert p.returncode == 0, p.stderr
    report = (out / "diff.md").read_text()
    outside, inside = _split_fence(report)
    assert report.startswith("<!-- benchbox-diff -->\n### benchbox: no comparison")
    assert "failed" in outside and "<" not in outside.replace("<!-- benchbox-diff -->", "")
    assert "error" in inside and "`" not in inside, report  # the log line, as text
    assert ("<img" in inside) == ("--runner" in args)
    assert str(tmp_path) not in report and str(REPO) not in report and "/no/such" not in report
    assert (out / "diff-exit").read_text().strip() == "2"
