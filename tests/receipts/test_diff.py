"""benchbox diff: real receipts from real runs, verdicts, refusals, explanations, exit codes."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from benchbox import stats
from benchbox.cli import main
from benchbox.errors import UsageError
from benchbox.receipts.diff import ComparisonRefused, DiffOptions, diff_receipts
from benchbox.receipts.io import load_receipt
from tests.conftest import make_receipt
from tests.support import loaded

TASK = "tests.diff_tasks:factory"
#: 50 ms sleep per call; the slowed case sleeps 20 ms (40%) more, in serialize (one process per
#: receipt: judged against the run-to-run spread DRIFT).
SLOW = {"slow_case": "beta", "extra_ms": 20}
#: Sleeps on a shared machine are often flagged noisy, and a run may start while the machine is busy
#: (a load condition even when both sides were busy), and the control workload moves with what
#: else shares the machine between one receipt and the next; tests of the statistics accept these.
#: The conditions have tests of their own (test_compare.py).
CONDITIONS = frozenset({"noisy", "unsettled", "load", "machine"})
#: Each receipt here is one process, so the tests give a run-to-run spread (as a user gives a
#: measured one with --drift) instead of the largest ever measured: a sleep's, on a busy machine.
DRIFT = 0.08


@pytest.fixture(scope="session")
def receipts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real receipts of the sleepy task: two plain runs, one slowed on 'beta', one under model_io_wall."""
    tmp = tmp_path_factory.mktemp("diff")
    kw = {"task": TASK, "samples": 30}
    make_receipt(tmp, "base.json", **kw)
    make_receipt(tmp, "base2.json", **kw)
    make_receipt(tmp, "slow.json", task_options=SLOW, **kw)
    make_receipt(tmp, "mio.json", contract="model_io_wall", **kw)
    return {n: tmp / f"{n}.json" for n in ("base", "base2", "slow", "mio")}


def _cli(*args: str, env: dict[str, str] | None = None, conditions: bool = True) -> tuple[int, str]:
    """The CLI; a diff accepts noisy/unsettled rows unless ``conditions`` is False, and is given the
    sleep's run-to-run spread."""
    extra = [f"--accept={k}" for k in sorted(CONDITIONS)] if args[0] == "diff" and conditions else []
    extra += [f"--drift={DRIFT:.0%}"] if args[0] == "diff" and "--drift" not in " ".join(args) else []
    r = CliRunner().invoke(main, [*args, *extra], env=env)
    return r.exit_code, r.output


def _diff_files(base: Path, head: Path, options: DiffOptions) -> Any:
    """The library diff of two receipt files, loaded as the CLI loads them."""
    return diff_receipts(load_receipt(base), load_receipt(head), options, str(base), str(head))


def diff_files(base: Path, head: Path, options: DiffOptions | None = None) -> Any:
    """The library diff, accepting noisy/unsettled rows as the CLI helper does."""
    o = options or DiffOptions()
    o = dataclasses.replace(o, drift=DRIFT) if o.drift is None else o
    return _diff_files(base, head, dataclasses.replace(o, accept=o.accept | CONDITIONS))


def _verdicts(out: str) -> dict[str, str]:
    return {row["case"]: row["verdict"] for row in json.loads(out)["rows"]}


def _mutated(src: Path, dst: Path, edit) -> Path:
    r = json.loads(src.read_text())
    edit(r)
    dst.write_text(json.dumps(r))
    return dst


# -- acceptance ----------------------------------------------------------------------------

def test_same_receipt_twice_is_unchanged_or_unresolved(receipts: dict[str, Path]) -> None:
    code, out = _cli("diff", str(receipts["base"]), str(receipts["base"]), "--format", "json")
    assert code == 0, out
    v = _verdicts(out)
    assert set(v) == {"alpha", "beta"}
    assert set(v.values()) <= {"unchanged", "unresolved"}


def test_two_separate_runs_are_unchanged_or_unresolved(receipts: dict[str, Path]) -> None:
    code, out = _cli("diff", str(receipts["base"]), str(receipts["base2"]), "--format", "json")
    assert code == 0, out
    assert set(_verdicts(out).values()) <= {"unchanged", "unresolved"}


def test_one_row_20_percent_slower_is_slower_on_exactly_that_row(receipts: dict[str, Path]) -> None:
    code, out = _cli("diff", str(receipts["base"]), str(receipts["slow"]), "--format", "json")
    assert code == 1, out
    v = _verdicts(out)
    assert v["beta"] == "slower"
    assert v["alpha"] in ("unchanged", "unresolved")
    beta = next(r for r in json.loads(out)["rows"] if r["case"] == "beta")
    assert beta["regression"] is True
    assert 1.25 < beta["metrics"][0]["ratio"] < 1.6


def test_markdown_names_the_slower_row_and_the_slowed_stage(receipts: dict[str, Path]) -> None:
    code, out = _cli("diff", str(receipts["base"]), str(receipts["slow"]), "--format", "markdown")
    assert code == 1
    beta_line = next(line for line in out.splitlines() if "| beta |" in line)
    assert "slower" in beta_line and "serialize +" in beta_line
    alpha_line = next(line for line in out.splitlines() if "| alpha |" in line)
    assert "slower" not in alpha_line
    assert "regression" in out.splitlines()[0]


def test_explanation_names_the_slowed_stage_first(receipts: dict[str, Path]) -> None:
    d = diff_files(receipts["base"], receipts["slow"])
    beta = next(r for r in d.rows if r.case == "beta")
    assert beta.explanation[0][0] == "serialize"
    assert 17e6 < beta.explanation[0][1] < 25e6  # ~ +20 ms
    assert beta.explain().startswith("serialize +")


def test_different_contracts_refuse_with_one_message(receipts: dict[str, Path]) -> None:
    r = CliRunner().invoke(main, ["diff", str(receipts["base"]), str(receipts["mio"])])
    assert r.exit_code == 2
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1, r.output
    msg = lines[0]
    assert "public_task_call_wall" in msg and "model_io_wall" in msg
    assert "only BASE times parse, preprocess, reduce, answer, serialize" in msg
    assert "Traceback" not in r.output


def test_refusal_is_written_to_the_github_step_summary(receipts: dict[str, Path], tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    code, _ = _cli("diff", str(receipts["mio"]), str(receipts["base"]),
                   env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert code == 2
    assert "refused" in summary.read_text() and "model_io_wall" in summary.read_text()


def test_github_step_summary_gets_the_markdown(receipts: dict[str, Path], tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    code, out = _cli("diff", str(receipts["base"]), str(receipts["slow"]),
                     env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert code == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n")
    assert "| beta |" in text and "**slower**" in text
    assert "REGRESSION" in out  # the terminal table went to stdout


# -- comparability (receipts edited to stand for a device / model / option change
#    that cannot be produced on this machine) -----------------------------------------------

def test_mutated_other_gpu_is_not_comparable_unless_accepted(receipts: dict[str, Path],
                                                             tmp_path: Path) -> None:
    other = _mutated(receipts["base2"], tmp_path / "gpu.json",
                     lambda r: r["environment"].update(gpu={"name": "NVIDIA H200"}))
    code, out = _cli("diff", str(receipts["base"]), str(other), "--format", "json")
    assert code == 3  # no row could be judged: CI must not stay green on it
    rows = json.loads(out)["rows"]
    assert {r["verdict"] for r in rows} == {"not comparable"}
    assert all("device: cpu → NVIDIA H200" in r["reason"] for r in rows)
    code, out = _cli("diff", str(receipts["base"]), str(other), "--format", "json", "--accept", "device")
    d = json.loads(out)
    assert set(_verdicts(out).values()) <= {"unchanged", "unresolved"}
    assert "device" in d["options"]["accept"]
    assert any("accepted: device differs" in n for n in d["notes"])


def test_mutated_model_hash_and_size_are_not_comparable(receipts: dict[str, Path], tmp_path: Path) -> None:
    other = _mutated(receipts["base2"], tmp_path / "model.json",
                     lambda r: r["task"].update(model_sha256="0" * 64, size="large"))
    d = diff_files(receipts["base"], other)
    assert {r.verdict for r in d.rows} == {"not comparable"}
    assert "model:" in d.rows[0].reason and "size" in d.rows[0].reason
    # another task: its rows are other rows (new, removed), and the notes say why
    renamed = _mutated(receipts["base2"], tmp_path / "task.json",
                       lambda r: r["task"].update(name="sentiment"))
    d = diff_files(receipts["base"], renamed)
    assert {r.verdict for r in d.rows} == {"new", "removed"}
    assert any(n.startswith('not comparable: model differs (task "sleepy" → "sentiment")') for n in d.notes)
    d = diff_files(receipts["base"], other, DiffOptions(accept=frozenset({"model"})))
    assert {r.verdict for r in d.rows} <= {"unchanged", "unresolved"}
    assert all(r.accepted for r in d.rows)


def test_mutated_task_options_are_a_model_difference(receipts: dict[str, Path], tmp_path: Path) -> None:
    """The built-in task's precision options and dynamic shapes change the model measured while its
    weights' hash stays the same: a diff declares them as it declares the weights."""
    other = _mutated(receipts["base2"], tmp_path / "opts.json",
                     lambda r: r["task"].update(options={"softmax_fp32": False}))
    d = diff_files(receipts["base"], other)
    assert {r.verdict for r in d.rows} == {"not comparable"}
    assert d.rows[0].reason.startswith('model: options {} → {"softmax_fp32":false}'), d.rows[0].reason
    accepted = diff_files(receipts["base"], other, DiffOptions(accept=frozenset({"model"})))
    assert {r.verdict for r in accepted.rows} <= {"unchanged", "unresolved"}


def test_a_runner_library_that_moved_is_named_in_the_row_and_one_recorded_once_in_the_notes(
        receipts: dict[str, Path], tmp_path: Path) -> None:
    def versions(name: str, v: dict[str, str]) -> Path:
        def edit(r: dict) -> None:
            for row in r["results"]:
                row["runner_report"]["versions"] = v
        return _mutated(receipts["base2"], tmp_path / name, edit)

    old, new, more = (versions("old.json", {"triton": "3.6.0"}), versions("new.json", {"triton": "3.7.0"}),
                      versions("more.json", {"triton": "3.6.0", "onnx_parser": "10.1"}))
    d = _diff_files(old, new, DiffOptions(drift=DRIFT, accept=CONDITIONS))
    assert {r.verdict for r in d.rows} == {"unreliable"}
    assert d.rows[0].reason == "versions: triton 3.6.0 → 3.7.0 (pass accept=versions to judge anyway)"
    d = _diff_files(old, more, DiffOptions(drift=DRIFT, accept=CONDITIONS))
    assert "unreliable" not in {r.verdict for r in d.rows}
    assert f"not compared: runner library versions recorded by one side only: onnx_parser ({more})" in d.notes


def test_mutated_runner_options_refuse_and_fallbacks_are_causes(receipts: dict[str, Path],
                                                             tmp_path: Path) -> None:
    def edit(r: dict) -> None:
        for row in r["results"]:
            if row["case"] == "beta":
                row["runner_report"]["options"] = {"mode": "max-autotune"}
                row["runner_report"]["fallbacks"] = [{"kind": "graph_break", "where": "forward:3"}]

    other = _mutated(receipts["slow"], tmp_path / "opts.json", edit)
    d = diff_files(receipts["base"], other)
    beta = next(r for r in d.rows if r.case == "beta")
    assert beta.verdict == "not comparable"
    assert "options: mode null → \"max-autotune\"" in beta.reason
    assert "fallbacks" not in beta.reason
    assert d.exit_code == 0
    d = diff_files(receipts["base"], other, DiffOptions(accept=frozenset({"options"})))
    beta = next(r for r in d.rows if r.case == "beta")
    assert beta.verdict == "slower"
    assert beta.causes and "graph break" in beta.causes[0]
    assert d.exit_code == 1
    code, out = _cli("diff", str(receipts["base"]), str(other), "--accept", "options")
    assert "probable causes: " in out and "graph break" in out


def test_where_a_compile_comes_from_is_not_a_declared_option(receipts: dict[str, Path],
                                                             tmp_path: Path) -> None:
    """`pin`, `autotune_stability` and `cache_dir` decide where torch-compile's compile comes from
    (reused or fresh, checked or not, which folder), not what is measured; receipts written before
    `pin` and `autotune_stability` existed lack them. `mode` still decides what is measured."""
    def edit(mode: str) -> Any:
        def apply(r: dict) -> None:
            for row in r["results"]:
                row["runner_report"]["options"] = {"mode": mode, "pin": True, "autotune_stability": False,
                                                   "cache_dir": "/ci/cache"}
        return apply

    def old(r: dict) -> None:
        for row in r["results"]:
            row["runner_report"]["options"] = {"mode": "max-autotune"}

    base = _mutated(receipts["base"], tmp_path / "old.json", old)
    d = diff_files(base, _mutated(receipts["base2"], tmp_path / "new.json", edit("max-autotune")))
    assert d.rows and {r.verdict for r in d.rows} <= {"unchanged", "unresolved"}
    d = diff_files(base, _mutated(receipts["base2"], tmp_path / "other.json", edit("default")))
    assert {r.verdict for r in d.rows} == {"not comparable"}
    assert all(r.reason.startswith('options: mode "max-autotune" → "default"') for r in d.rows), d.rows[0]


def test_mutated_newly_invalid_row_fails_and_new_removed_rows(receipts: dict[str, Path],
                                                               tmp_path: Path) -> None:
    def edit(r: dict) -> None:
        r["results"][0].update(status="invalid", reasons=["answer_equal: got 'no'"])
        extra = dict(r["results"][1], runner="torch-compile")
        r["results"].append(extra)
        r["results"] = [x for x in r["results"] if not (x["case"] == "beta" and x["runner"] == "torch-eager")]

    other = _mutated(receipts["base2"], tmp_path / "inv.json", edit)
    code, out = _cli("diff", str(receipts["base"]), str(other), "--format", "json")
    assert code == 1
    rows = {(r["runner"], r["case"]): r for r in json.loads(out)["rows"]}
    assert rows[("torch-eager", "alpha")]["verdict"] == "invalid"
    assert rows[("torch-eager", "alpha")]["newly_invalid"] is True
    assert "answer_equal" in rows[("torch-eager", "alpha")]["reason"]
    assert rows[("torch-eager", "beta")]["verdict"] == "removed"
    assert rows[("torch-compile", "beta")]["verdict"] == "new"
    # invalid on both sides is reported but is not a new failure
    code, _ = _cli("diff", str(other), str(other))
    assert code == 0


def test_p99_from_too_few_samples_per_process_is_advisory(receipts: dict[str, Path]) -> None:
    d = diff_files(receipts["base"], receipts["slow"], DiffOptions(metric="p99", drift=DRIFT))
    assert {r.verdict for r in d.rows} == {"unresolved"} and d.exit_code == 3  # nothing judged
    assert all("advisory: a verdict needs ≥ 200 samples per process (fewest here 30)" in r.reason
               for r in d.rows)
    d = diff_files(receipts["base"], receipts["slow"], DiffOptions(metric="both", drift=DRIFT))
    beta = next(r for r in d.rows if r.case == "beta")
    assert beta.verdict == "slower" and [m.metric for m in beta.metrics] == ["p50", "p99"]
    assert [m.advisory for m in beta.metrics] == [False, True]


def test_change_inside_a_wider_threshold_is_unchanged(receipts: dict[str, Path]) -> None:
    code, out = _cli("diff", str(receipts["base"]), str(receipts["slow"]), "--threshold", "90%",
                     "--format", "json")
    assert code == 0
    assert _verdicts(out)["beta"] == "unchanged"


def test_mutated_one_process_change_is_judged_against_the_run_to_run_spread(
        receipts: dict[str, Path], tmp_path: Path) -> None:
    """Every sample of beta ×1.10, one process a side: beyond a measured 1% spread it is slower;
    against the largest spread measured between processes (none given) it is unresolved, and
    the row says what it could detect."""
    def edit(r: dict) -> None:
        for row in r["results"]:
            if row["case"] == "beta":
                row["samples_ns"] = [int(v * 1.10) for v in row["samples_ns"]]
                row["summary"] = stats.summarize(row["samples_ns"])  # the loader checks it agrees

    other = _mutated(receipts["base"], tmp_path / "edge.json", edit)
    d = diff_files(receipts["base"], other, DiffOptions(drift=0.01))
    beta = next(r for r in d.rows if r.case == "beta")
    lo, hi = beta.metrics[0].ci
    assert 1.0 < lo <= hi < 1.25 and beta.verdict == "slower" and beta.metrics[0].spread == ("prior", "prior")
    d = _diff_files(receipts["base"], other, DiffOptions(accept=CONDITIONS))
    beta = next(r for r in d.rows if r.case == "beta")
    assert beta.verdict == "unresolved" and "spread assumed at the largest measured" in beta.reason
    assert beta.detectable > 0.5 and d.exit_code == 0


@pytest.mark.parametrize("args, needle", [
    (["--threshold", "abc"], "--threshold"),
    (["--threshold", "0"], "threshold"),
    (["--accept", "weather"], "weather"),
])
def test_bad_options_give_one_line_exit_2(receipts: dict[str, Path], args: list[str], needle: str) -> None:
    code, out = _cli("diff", str(receipts["base"]), str(receipts["base"]), *args)
    assert code == 2
    assert needle in out and len(out.strip().splitlines()) == 1


def test_unusable_receipt_exit_2(tmp_path: Path, receipts: dict[str, Path]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, out = _cli("diff", str(bad), str(receipts["base"]))
    assert code == 2 and "not a receipt" in out


def test_refusal_is_a_usage_error_in_the_library(receipts: dict[str, Path]) -> None:
    with pytest.raises(ComparisonRefused) as e:
        diff_files(receipts["base"], receipts["mio"])
    assert isinstance(e.value, UsageError) and e.value.exit_code == 2


def test_show_prints_several_receipts_side_by_side(receipts: dict[str, Path]) -> None:
    code, out = _cli("show", str(receipts["base"]), str(receipts["slow"]), str(receipts["mio"]))
    assert code == 0, out
    beta = next(line for line in out.splitlines() if " beta " in line)
    p50s = [float(x) for x in beta.split()[3:6]]
    slow = loaded(receipts["slow"])
    want = next(r for r in slow["results"] if r["case"] == "beta")["summary"]["p50_ns"] / 1e6
    assert p50s[1] == pytest.approx(want, abs=1e-3)
    assert "DIFFERENT contract" in out


def test_diff_never_imports_torch_or_tensorrt(receipts: dict[str, Path]) -> None:
    code = (
        "import sys\n"
        "from benchbox.cli import main\n"
        "try:\n"
        f"    main(['diff', {str(receipts['base'])!r}, {str(receipts['slow'])!r}, '--format', 'json'])\n"
        "except SystemExit as e:\n"
        "    rc = e.code\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'tensorrt', 'tensorrt_rtx_bindings', 'polars', 'matplotlib')]\n"
        "print('RC', rc, 'HEAVY', heavy, file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in r.stderr and re.search(r"RC [013] ", r.stderr), r.stderr


# -- the two-sample statistics -------------------------------------------------------------

def test_holm_matches_hand_computation() -> None:
    assert stats.holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert stats.holm([]) == []
    assert stats.holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])


def test_min_n_for_p99_is_368() -> None:
    assert stats.min_n_for_ci(0.99, 0.95) == 368


def test_holm_across_rows_keeps_false_alarms_down() -> None:
    """50 rows of identical distributions: Holm at 0.05 flags almost no run; uncorrected flags most."""
    from scipy.stats import ttest_ind

    rng = np.random.default_rng(11)
    holm_alarm = raw_alarm = 0
    for _ in range(40):
        ps = [float(ttest_ind(rng.normal(0, 0.3, 5), rng.normal(0, 0.3, 5), equal_var=False).pvalue)
              for _ in range(50)]
        raw_alarm += min(ps) < 0.05
        holm_alarm += min(stats.holm(ps)) < 0.05
    assert holm_alarm <= 6 and raw_alarm >= 25


def test_an_incomplete_receipt_is_refused_unless_accepted(eager_receipt_path: Path, tmp_path: Path) -> None:
    """A crashed or interrupted HEAD run must not pass CI as 'rows removed'."""
    r = json.loads(eager_receipt_path.read_text())
    r["results"] = r["results"][:1]
    r.update(complete=False, interrupted=True, interrupt_reason="SIGINT after 1 result(s)")
    head = tmp_path / "head.json"
    head.write_text(json.dumps(r))
    p = subprocess.run([sys.executable, "-m", "benchbox", "diff", str(eager_receipt_path), str(head)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert f"{head} is an incomplete receipt (SIGINT after 1 result(s))" in p.stderr
    p = subprocess.run([sys.executable, "-m", "benchbox", "diff", str(eager_receipt_path), str(head),
                        "--accept", "incomplete"], capture_output=True, text=True)
    assert p.returncode in (0, 1, 3) and "removed" in p.stdout
