"""benchbox diff: real receipts from real runs, verdicts, refusals, explanations, exit codes."""

from __future__ import annotations

import dataclasses
import json
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
from benchbox.receipts.diff import ComparisonRefused, DiffOptions
from benchbox.receipts.diff import diff_files as _diff_files
from tests.conftest import make_receipt
from tests.support import loaded

TASK = "tests.diff_tasks:factory"
#: 50 ms sleep per call; the slowed case sleeps 20 ms (40%) more, in serialize (one round per
#: receipt: a change must exceed 25% when run-to-run variance is unknown).
SLOW = {"slow_case": "beta", "extra_ms": 20}
#: Sleeps on a shared machine are often flagged noisy, and a run may start while the machine is busy
#: (a load condition even when both sides were busy); tests of the statistics accept both. The
#: conditions have tests of their own (test_compare.py).
CONDITIONS = frozenset({"noisy", "unsettled", "load"})


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
    """The CLI; a diff accepts noisy/unsettled rows unless ``conditions`` is False."""
    extra = [f"--accept={k}" for k in sorted(CONDITIONS)] if args[0] == "diff" and conditions else []
    r = CliRunner().invoke(main, [*args, *extra], env=env)
    return r.exit_code, r.output


def diff_files(base: Path, head: Path, options: DiffOptions | None = None) -> Any:
    """The library diff, accepting noisy/unsettled rows as the CLI helper does."""
    o = options or DiffOptions()
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
    assert code == 0
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
    d = diff_files(receipts["base"], other, DiffOptions(accept=frozenset({"model"})))
    assert {r.verdict for r in d.rows} <= {"unchanged", "unresolved"}
    assert all(r.accepted for r in d.rows)


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


def test_p99_is_refused_below_the_resolvable_sample_count(receipts: dict[str, Path]) -> None:
    d = diff_files(receipts["base"], receipts["slow"], DiffOptions(metric="p99"))
    assert {r.verdict for r in d.rows} == {"unresolved"}
    assert all("368 samples" in r.reason for r in d.rows)
    d = diff_files(receipts["base"], receipts["slow"], DiffOptions(metric="both"))
    beta = next(r for r in d.rows if r.case == "beta")
    assert beta.verdict == "slower" and [m.metric for m in beta.metrics] == ["p50", "p99"]


def test_change_inside_a_wider_threshold_is_unchanged(receipts: dict[str, Path]) -> None:
    code, out = _cli("diff", str(receipts["base"]), str(receipts["slow"]), "--threshold", "60%",
                     "--format", "json")
    assert code == 0
    assert _verdicts(out)["beta"] == "unchanged"


def test_mutated_one_round_change_under_the_single_round_effect_is_unresolved(
        receipts: dict[str, Path], tmp_path: Path) -> None:
    def edit(r: dict) -> None:
        for row in r["results"]:
            if row["case"] == "beta":
                row["samples_ns"] = [int(v * 1.10) for v in row["samples_ns"]]

    other = _mutated(receipts["base"], tmp_path / "edge.json", edit)
    d = diff_files(receipts["base"], other)
    beta = next(r for r in d.rows if r.case == "beta")
    lo, hi = beta.metrics[0].ci
    assert 1.05 < lo <= hi < 1.25  # significant and beyond ±5%, but one round: the bar is ±25%
    assert beta.verdict == "unresolved" and "run-to-run variance unknown" in beta.reason
    assert d.exit_code == 0
    d = diff_files(receipts["base"], other, DiffOptions(single_round_effect=0.05))
    assert next(r for r in d.rows if r.case == "beta").verdict == "slower"


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
    assert "HEAVY []" in r.stderr and "RC 1" in r.stderr or "RC 3" in r.stderr, r.stderr


# -- the two-sample statistics -------------------------------------------------------------

def test_ratio_ci_agrees_with_scipy_bca() -> None:
    from scipy.stats import bootstrap

    rng = np.random.default_rng(3)
    a, b = rng.lognormal(0, 0.4, 300), rng.lognormal(0.1, 0.4, 300)
    ours = stats.ratio_ci(a, b, q=0.5, level=0.95, n_resamples=4000)
    ref = bootstrap((a, b), lambda x, y, axis: np.median(y, axis=axis) / np.median(x, axis=axis),
                    method="BCa", n_resamples=4000, random_state=0, vectorized=True).confidence_interval
    assert ours is not None
    assert ours[0] == pytest.approx(ref.low, rel=0.02)
    assert ours[1] == pytest.approx(ref.high, rel=0.02)
    assert ours[0] < np.median(b) / np.median(a) < ours[1]
    assert stats.ratio_ci(a, b) == stats.ratio_ci(a, b)  # fixed seed: reproducible


def test_ratio_ci_covers_the_true_ratio_about_95_percent() -> None:
    rng = np.random.default_rng(7)
    true = np.exp(0.1)  # median of lognormal(0.1, s) / median of lognormal(0, s)
    hits = 0
    for i in range(200):
        ci = stats.ratio_ci(rng.lognormal(0, 0.5, 60), rng.lognormal(0.1, 0.3, 60), seed=i,
                            n_resamples=1000)
        hits += ci is not None and ci[0] <= true <= ci[1]
    assert 0.88 <= hits / 200 <= 0.99


def test_ratio_ci_none_for_too_few_samples() -> None:
    assert stats.ratio_ci([1, 2, 3], [1, 2, 3]) is None
    assert stats.ratio_ci([0] * 10, [1] * 10) is None
    assert stats.ratio_ci([5] * 10, [5] * 10) == (1.0, 1.0)


def test_holm_matches_hand_computation() -> None:
    assert stats.holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert stats.holm([]) == []
    assert stats.holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])


def test_tail_test_sees_a_tail_only_change_that_the_rank_test_misses() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(100, 1, 2000)
    b = rng.normal(100, 1, 2000)
    b[rng.choice(2000, 60, replace=False)] += 50  # 3% of calls get much slower; the median does not move
    assert stats.brunner_munzel(a, b) > 0.01
    p, ea, eb, _ = stats.tail_test(a, b, 0.99)
    assert p < 1e-6 and eb > ea


def test_brunner_munzel_matches_scipy_with_ties_and_unequal_spreads() -> None:
    from scipy.stats import brunnermunzel

    rng = np.random.default_rng(5)
    for i in range(60):
        n1, n2 = (int(v) for v in rng.integers(5, 200, 2))
        if i % 2:
            a, b = rng.integers(0, 20, n1).astype(float), rng.integers(1, 25, n2).astype(float)
        else:
            a, b = rng.lognormal(0, 0.2, n1), rng.lognormal(0.05, 1.5, n2)
        assert stats.brunner_munzel(a, b) == pytest.approx(brunnermunzel(a, b).pvalue, abs=1e-12)


def test_brunner_munzel_degenerate_inputs() -> None:
    assert stats.brunner_munzel([3] * 10, [3] * 10) == 1.0
    assert stats.brunner_munzel(list(range(10)), list(range(100, 110))) < 0.001


def test_min_n_for_p99_is_368() -> None:
    assert stats.min_n_for_ci(0.99, 0.95) == 368


def test_holm_across_rows_keeps_false_alarms_down() -> None:
    """50 rows of identical distributions: Holm at 0.05 flags almost no run; uncorrected flags most."""
    rng = np.random.default_rng(11)
    holm_alarm = raw_alarm = 0
    for _ in range(40):
        ps = [stats.brunner_munzel(rng.lognormal(0, 0.3, 40), rng.lognormal(0, 0.3, 40)) for _ in range(50)]
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
