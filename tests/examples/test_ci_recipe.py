"""examples/ci/bench.sh: interleaved base/head runs, combined into rounds, a report on every path."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

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


#: a checkout's own task: the decision task whose serialize sleeps SLOWDOWN_US more per call
SLOW_CASE = '''from benchbox.tasks.decision.task import OPTIONS
from tests.faulty_decision import TEST_OPTIONS, FaultyDecisionTask


class Task(FaultyDecisionTask):
    declared_options = {{**OPTIONS, **TEST_OPTIONS, "slowdown_us": (int, {us}, "this checkout's")}}
'''
RECHECK = REPO / "examples" / "ci" / "recheck.py"
#: head's slowdown in the recheck tests (see ``slowed``)
SLOWDOWN_US = 60000


@pytest.fixture(scope="module")
def slowed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recipe on two checkouts whose task differs: head's serialize sleeps 60 ms more.

    Far more than the call (4–11 ms a call here), so that the verdict holds on a busy machine: the
    diff is adjusted for the process probe, timed before the code under test runs (BENCHMARKS §4),
    which a 20 ms slowdown left at ×0.86–1.25 in 8 sets, all judged slower."""
    root = tmp_path_factory.mktemp("recheck")
    for side, us in (("base", 0), ("head", SLOWDOWN_US)):
        (root / side).mkdir()
        (root / side / "slowcase.py").write_text(SLOW_CASE.format(us=us))
    # three processes a side: with two, Welch's t has about one degree of freedom and even ×6 can
    # stay unresolved on a busy machine
    env = {**os.environ, "BENCHBOX": f"{shlex.quote(sys.executable)} -m benchbox", "BENCHBOX_ROUNDS": "3",
           "PYTHONPATH": str(REPO)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    p = subprocess.run(["bash", str(SCRIPT), str(root / "base"), str(root / "head"), str(root / "out"),
                        "--task", "slowcase:Task", "--runner", "torch-eager", "--case", "invoice",
                        "--samples", "30", "--warmup", "1"], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    return root / "out"


def test_a_regression_is_measured_again_and_fails_when_the_second_set_finds_it_too(slowed: Path) -> None:
    assert sorted(f.name for f in slowed.glob("*-recheck-[0-9].json")) == [
        f"{side}-recheck-{i}.json" for side in ("base", "head") for i in (1, 2, 3)]
    first = json.loads((slowed / "diff.json").read_text())
    second = json.loads((slowed / "diff-recheck.json").read_text())
    assert first["exit_code"] == 1 and second["exit_code"] == 1
    assert second["head"] == "head-recheck.json"
    report = (slowed / "diff.md").read_text()
    assert "Rechecked by a second, independent set of processes" in report
    assert "torch-eager × invoice: first slower ×" in report and "— **confirmed**" in report
    assert (slowed / "diff-exit").read_text().strip() == "1"


def test_a_regression_the_second_set_does_not_find_is_not_reported(slowed: Path, tmp_path: Path) -> None:
    # a second set that did not find it: base's second set against itself (identical, ratio 1)
    p = subprocess.run([sys.executable, "-m", "benchbox", "diff", "base-recheck.json", "base-recheck.json",
                        "--format", "json"], cwd=slowed, capture_output=True, text=True)
    (tmp_path / "none.json").write_text(p.stdout)
    assert json.loads(p.stdout)["exit_code"] in (0, 3)
    r = subprocess.run([sys.executable, str(RECHECK), str(slowed / "diff.json"), str(tmp_path / "none.json")],
                       capture_output=True, text=True)
    assert r.returncode == json.loads(p.stdout)["exit_code"] and "— not confirmed" in r.stdout
    assert "no regression confirmed" in r.stdout


def test_the_verdict_job_applies_the_same_recheck(slowed: Path, tmp_path: Path) -> None:
    receipts = tmp_path / "receipts"
    receipts.mkdir()
    for name in ("base.json", "head.json", "base-recheck.json", "head-recheck.json"):
        (receipts / name).write_bytes((slowed / name).read_bytes())
    env = {**os.environ, "BENCHBOX": f"{shlex.quote(sys.executable)} -m benchbox", "PYTHONPATH": str(REPO)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    verdict = REPO / "examples" / "ci" / "verdict.sh"
    p = subprocess.run(["bash", str(verdict), str(receipts)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 1 and "— **confirmed**" in (receipts / "verdict.md").read_text()
    # the second set's head replaced by its base (identical code): the first set's finding stands alone
    (receipts / "head-recheck.json").write_bytes((slowed / "base-recheck.json").read_bytes())
    p = subprocess.run(["bash", str(verdict), str(receipts)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode in (0, 3) and "— not confirmed" in (receipts / "verdict.md").read_text()


@pytest.mark.parametrize("args", [[], ["nothing.json", "nothing.json"]])
def test_recheck_says_in_one_line_what_it_cannot_read(args: list[str], tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(RECHECK), *args], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_a_recheck_that_fails_leaves_the_first_report_and_its_regression_standing(tmp_path: Path) -> None:
    # head's task fails to load in any run whose receipt is a recheck's: the second set never completes
    fails = ("import sys\nif any('-recheck-' in a for a in sys.argv):\n"
             "    raise RuntimeError('no recheck here')\n")
    for side, us in (("base", 0), ("head", SLOWDOWN_US)):
        (tmp_path / side).mkdir()
        text = (fails if side == "head" else "") + SLOW_CASE.format(us=us)
        (tmp_path / side / "slowcase.py").write_text(text)
    env = {**os.environ, "BENCHBOX": f"{shlex.quote(sys.executable)} -m benchbox", "BENCHBOX_ROUNDS": "3",
           "PYTHONPATH": str(REPO)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    out = tmp_path / "out"
    p = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "base"), str(tmp_path / "head"), str(out),
                        "--task", "slowcase:Task", "--runner", "torch-eager", "--case", "invoice",
                        "--samples", "30", "--warmup", "1"], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    assert json.loads((out / "diff.json").read_text())["exit_code"] == 1
    report = (out / "diff.md").read_text()
    assert "slower" in report and "The recheck did not complete" in report and "no recheck here" in report
    assert (out / "diff-exit").read_text().strip() == "1" and not (out / "head-recheck.json").exists()
    # the verdict job: the first set's regression, and that the recheck did not complete
    v = subprocess.run(["bash", str(REPO / "examples" / "ci" / "verdict.sh"), str(out)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert v.returncode == 1 and "recheck did not complete" in (out / "verdict.md").read_text()
