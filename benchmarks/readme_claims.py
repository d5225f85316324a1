"""The figures README.md and docs/ state, each checked against what it comes from.

Run: python -m benchmarks.readme_claims [--rerun] [--list]

Every claim names its file, the sentence it is stated in (a pattern whose groups are the
figures), and its source: a committed result (a receipt, a benchmarks/results-*.json), a
constant or function of the code, or a command to rerun. Without ``--rerun`` only the cheap
claims are checked (seconds; tests/test_readme_claims.py runs them in CI); ``--rerun`` also
reruns the benchmarks behind the others (minutes to hours; timings are compared only at the
load they were stated at). Exit 1 when a figure and its source disagree, or a claim's
sentence is no longer in its file (so an edited figure cannot drop out of the check); each
problem on one line. ``--list`` prints every claim and its source.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Claim:
    """Figures stated in ``file`` (the groups of ``pattern``) and how to get them from the source."""

    name: str
    file: str
    pattern: str
    source: str
    actual: Callable[[], tuple[str, ...]]
    #: needs a rerun of something slow (not checked in CI)
    rerun: bool = False
    #: the figures are numbers compared as such (``1e-3`` states ``0.001``)
    numeric: bool = False


def text_of(file: str) -> str:
    """A file's text with runs of whitespace as one space (sentences wrap across lines)."""
    return re.sub(r"\s+", " ", (REPO / file).read_text())


def stated(claim: Claim) -> tuple[str, ...] | None:
    m = re.search(claim.pattern, text_of(claim.file))
    return None if m is None else m.groups()


def problem(claim: Claim) -> str | None:
    """Why the text and the source disagree, or None."""
    said = stated(claim)
    if said is None:
        return f"{claim.name}: its sentence is not in {claim.file} any more (pattern {claim.pattern!r})"
    try:
        got = claim.actual()
    except Exception as e:  # a source that cannot be read is a failed check, said in one line
        return f"{claim.name}: cannot read {claim.source}: {type(e).__name__}: {e}"
    same = (len(said) == len(got) and all(float(a) == float(b) for a, b in zip(said, got))
            if claim.numeric else tuple(said) == tuple(got))
    if not same:
        return f"{claim.name}: {claim.file} says {', '.join(said)}; {claim.source} gives {', '.join(got)}"
    return None


# -- sources ------------------------------------------------------------------------------------

def _json(path: str) -> dict:
    return json.loads((REPO / path).read_text())


def _p50s_ms(path: str, runner: str) -> list[float]:
    return [r["summary"]["p50_ns"] / 1e6 for r in _json(path)["results"]
            if r["runner"] == runner and r["status"] == "valid"]


def _range(values: list[float], digits: int) -> tuple[str, str]:
    return f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"


def compiled_model_and_call() -> tuple[str, ...]:
    io = _p50s_ms("receipts/h200-tiny-fp32.model_io_wall.json", "torch-compile")
    call = _p50s_ms("receipts/h200-tiny-fp32.public_task_call_wall.json", "torch-compile")
    return (*_range(io, 2), *_range(call, 2))


def arrival_sweep() -> tuple[str, ...]:
    def p50_us(name: str) -> float:
        (row,) = _json(f"receipts/h200-sweep/gap/cuda/{name}.json")["results"]
        return row["summary"]["p50_ns"] / 1e3

    return (f"{p50_us('model_io_wall.back-to-back'):.0f}", f"{p50_us('model_io_wall.gap-20ms-sleep'):.0f}",
            f"{p50_us('device_compute.back-to-back'):.0f}")


def autotune_flips() -> tuple[str, ...]:
    compiles = _json("benchmarks/results-h200-autotune-flips.json")["compiles"]
    changed = {sum(a != b for a, b in zip(prev["picks"], this["picks"]))
               for prev, this in zip(compiles, compiles[1:])}
    if len(changed) != 1:  # the sentence says "each ... at N sites": one count for every compile
        return (str(len(compiles) - 1), "/".join(map(str, sorted(changed))), str(len(compiles[0]["picks"])))
    return str(len(compiles) - 1), str(changed.pop()), str(len(compiles[0]["picks"]))


def diff_simulation() -> tuple[str, ...]:
    cells = _json("benchmarks/results-diff-calibration.json")["cells"]
    old2 = max(c["old_rule"]["false_alarm"] for c in cells if c["K"] == 2)
    old3 = max(c["old_rule"]["false_alarm"] for c in cells if c["K"] == 3)
    old_cov = min(c["old_rule"]["coverage"] for c in cells if c.get("old_rule"))
    new = max(c["false_alarm"] for c in cells)
    # percentages rounded half up, as the text writes them (18.5% is "19%"; format() rounds to even)
    return tuple(str(int(100 * v + 0.5 + 1e-9)) for v in (old2, old3, old_cov, new))


def ci_recipe_detects() -> tuple[str, ...]:
    cells = {c["sigma"]: c for c in _json("benchmarks/results-diff-calibration.json")["cells"] if c["K"] == 5}
    return tuple(f"{100 * cells[s]['detectable_median']:.0f}" for s in (0.02, 0.05, 0.10))


def ci_recipe_on_two_cores() -> tuple[str, ...]:
    d = _json("benchmarks/results-ci-false-alarms-processes.json")
    again = d["rediff_of_kept_receipts"]
    rest, slow = d["rest"], d["rest+slow"]
    unresolved = sum(r["verdicts"].get("unresolved", 0) == sum(r["verdicts"].values()) for r in rest["runs"])
    return (f"{again['sd_log_p50_between_processes_rest']['median']:.2f}",
            f"{again['sd_log_control_p50_between_processes_rest']['median']:.2f}",
            f"{100 * again['rest']['detectable_change_median']:.0f}",
            str(slow["runs_with_a_slower_row"]), str(slow["reps"]), str(unresolved), str(rest["reps"]))


def ci_recheck_at_rest() -> tuple[str, ...]:
    """Pairs at rest whose first set exited 1, and those that still exit 1 with the recheck."""
    sets = [_json(f)["rest"] for f in ("benchmarks/results-ci-false-alarms-processes.json",
                                       "benchmarks/results-ci-false-alarms-rest-load-cpu.json",
                                       "benchmarks/results-ci-false-alarms-recheck-cpu.json")]
    runs = [r for s in sets for r in s["runs"]]
    first = sum(r.get("first_exit_code", r["exit_code"]) == 1 for r in runs)
    # pairs measured before the recheck existed: an alarm counts as confirmed if any other pair at
    # rest (an independent set of processes of identical code) judged a row slower too
    slower = [i for i, r in enumerate(runs) if r["verdicts"].get("slower", 0)]
    after = sum(r["exit_code"] == 1 and ("recheck" in r or any(j != i for j in slower))
                for i, r in enumerate(runs))
    return str(first), str(len(runs)), str(after), str(len(runs))


def noise_remedies_cpu() -> tuple[str, ...]:
    c = _json("benchmarks/results-noise-remedies-cpu.json")["configs"]
    return tuple(f"{c[n]['components']['public_task_call_wall']['between_processes']:.2f}"
                 for n in ("default", "threads1"))


def h200_resolution() -> tuple[str, ...]:
    """benchbox diff on the kept receipts of the H200 +10% call: the detectable change it states."""
    from benchbox.receipts import load_receipt
    from benchbox.receipts.diff import DiffOptions, diff_receipts

    kept = REPO / "benchmarks" / "kept" / "h200-ci-slow"
    base, head = (load_receipt(kept / f"rest+slow-0-{side}.json") for side in ("base", "head"))
    # the slowdown stands for a code change; these receipts were written when the test task put it
    # among its options, which a diff now declares (model), so it is accepted, as
    # `benchbox diff --accept model` does: the statistics are the same
    d = diff_receipts(base, head, DiffOptions(accept=frozenset({"model"})))
    return (f"{100 * d.rows[0].metrics[0].detectable:.1f}",)


def noise_remedies_h200() -> tuple[str, ...]:
    c = _json("benchmarks/results-noise-remedies-h200.json")["configs"]

    def sd(name: str) -> float:
        return c[name]["components"]["public_task_call_wall"]["between_processes"]

    others = [sd(n) for n in ("threads1", "one_core", "hash_seed", "gc_off")]
    return (f"{sd('default'):.2f}", f"{sd('warmup50'):.2f}", f"{min(others):.2f}", f"{max(others):.2f}")


def matmul_isolated_and_saturated() -> tuple[str, ...]:
    w = _json("benchmarks/results-h200-truth.json")["workloads"]["matmul"]
    keys = ("benchbox_device_compute", "benchbox_device_throughput")
    return tuple(f"{w[k]['p50_ns'] / 1e3:.0f}" for k in keys)


def _changepoint_figures(result: dict) -> tuple[str, ...]:
    """The change-point paragraph's figures, from a run of benchmarks/changepoints.py (its runs)."""
    from benchmarks.changepoints import summarize

    s = summarize(result["runs"])
    n = s["histories"]
    count = [str(round(s[k] * n)) for k in ("step_found_at_its_commit", "step_found_exactly_and_alone",
                                            "step_found_within_one_commit",
                                            "change_point_at_the_step_judged_slower",
                                            "no_step_histories_with_a_change_point")]
    return (*count, str(s["no_step_change_points"]), str(s["no_step_change_points_judged_slower_or_faster"]),
            str(round(s["single_run_diff_says_slower_at_the_step"] * n)),
            str(sum(s["single_run_step_verdicts_without_a_step"].values())))


def changepoint_histories() -> tuple[str, ...]:
    return _changepoint_figures(_json("benchmarks/results-changepoints.json"))


def decision_inputs() -> tuple[str, ...]:
    from benchbox.tasks.decision.task import DecisionTask

    return (str(len(DecisionTask.input_names)),)


def per_process_minimum() -> tuple[str, ...]:
    from benchbox.stats import MIN_PER_REPLICATE

    return str(MIN_PER_REPLICATE[0.5]), str(MIN_PER_REPLICATE[0.99])


def plausible_drift() -> tuple[str, ...]:
    from benchbox.receipts.judge import PLAUSIBLE_DRIFT

    return f"{PLAUSIBLE_DRIFT['host']:.0%}", f"{PLAUSIBLE_DRIFT['device']:.0%}"


def noise_flags() -> tuple[str, ...]:
    from benchbox.stats import NOISE_CV, NOISE_OUTLIER_FRACTION

    return f"{NOISE_CV:.0%}", f"{NOISE_OUTLIER_FRACTION:.0%}"


def run_defaults() -> tuple[str, ...]:
    from benchbox.run.config import default

    return (str(default("samples")), str(default("warmup")), f"{default('case_time_limit_s'):.0f}")


def diff_defaults() -> tuple[str, ...]:
    from benchbox.receipts.diff import DiffOptions
    from benchbox.stats import FLOOR_MULTIPLE

    return f"{DiffOptions().threshold:.0%}", f"{FLOOR_MULTIPLE:g}"


def parameter_counts() -> tuple[str, ...]:
    from benchbox.tasks.decision.spec import SIZES, parameter_count

    return tuple(f"{parameter_count(SIZES[s]):,}" for s in ("tiny", "small", "base", "large"))


def receipt_budget() -> tuple[str, ...]:
    from benchbox.receipts.io import max_samples_per_row

    return tuple(f"{max_samples_per_row(n):,}" for n in (1, 100, 200))


def p99_samples() -> tuple[str, ...]:
    from benchbox.stats import min_n_for_ci

    return str(min_n_for_ci(0.99)), str(min_n_for_ci(0.99, alternative="less"))


def gates() -> tuple[str, ...]:
    from benchbox.tasks.decision.task import GATES

    return tuple(f"{GATES[d][g]:g}" for d in ("float32", "float16", "bfloat16")
                 for g in ("logit_max_abs", "prob_max_abs"))


def fuzz_examples() -> tuple[str, ...]:
    m = re.search(r'BENCHBOX_FUZZ_EXAMPLES", "(\d+)"', (REPO / "tests" / "test_fuzz.py").read_text())
    n = int(m.group(1)) if m else -1
    return f"{n:,}", f"{2 * n:,}"


def log_tail() -> tuple[str, ...]:
    from benchbox.run.capture import REPORT_CHARS

    return (f"{REPORT_CHARS:,}",)


def changepoints_rerun() -> tuple[str, ...]:
    """Rerun benchmarks/changepoints.py over 100 histories (seeded: any machine gives the same)."""
    with_out = REPO / "benchmarks" / ".readme-claims-changepoints.json"
    subprocess.run([sys.executable, "-m", "benchmarks.changepoints", "--histories", "100", "--out",
                    str(with_out)], cwd=REPO, check=True, capture_output=True)
    result = json.loads(with_out.read_text())
    with_out.unlink()
    return _changepoint_figures(result)


def _parse_memory_figures(r: dict) -> tuple[str, ...]:
    return (f"{r['ascii']['file_bytes'] / 1e6:.0f}", f"{r['ascii']['peak_over_start_bytes'] / 1e9:.1f}",
            f"{r['outside_bmp']['peak_over_start_bytes'] / 1e9:.1f}")


def parse_memory_committed() -> tuple[str, ...]:
    return _parse_memory_figures(_json("benchmarks/results-parse-memory.json"))


def parse_memory_rerun() -> tuple[str, ...]:
    out = subprocess.run([sys.executable, "-m", "benchmarks.parse_memory", "--mb", "250"], cwd=REPO,
                         check=True, capture_output=True, text=True)
    return _parse_memory_figures(json.loads(out.stdout))


def parse_memory_bound() -> tuple[str, ...]:
    """The stated bound (about 15×) holds for the committed measurement."""
    r = _json("benchmarks/results-parse-memory.json")
    worst = max(r[k]["peak_over_start_bytes"] / r[k]["file_bytes"] for k in ("ascii", "outside_bmp"))
    return ("15",) if worst <= 15 else (f"{worst:.0f}",)


def first_run_busy() -> tuple[str, ...]:
    r = _json("benchmarks/results-first-run-busy.json")
    loads = [r[run][k][0] for run in ("cold", "warm") for k in ("loadavg_before", "loadavg_after")]
    return (f"{min(loads):.1f}", f"{max(loads):.1f}", str(r["nice"]), f"{r['cold']['wall_s']:.0f}",
            f"{r['warm']['wall_s']:.0f}")


def first_run_quiet() -> tuple[str, ...]:
    r = _json("benchmarks/results-first-run-quiet.json")
    loads = [r[run][k][0] for run in ("cold", "warm") for k in ("loadavg_before", "loadavg_after")]
    return (f"{r['cold']['wall_s']:.0f}", f"{r['warm']['wall_s']:.0f}",
            f"{min(loads):.1f}", f"{max(loads):.1f}")


def tensorrt_bfloat16_islands() -> tuple[str, ...]:
    """Builds the tiny bfloat16 engine with TensorRT for RTX as the README's command does (no GPU
    needed: the build runs, the rows fail for want of one) and reads its runner report."""
    import tempfile

    benchbox = str(Path(sys.executable).with_name("benchbox"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        subprocess.run([benchbox, "run", "--runner", "tensorrt", "--dtype", "bfloat16", "--case", "invoice",
                        "--quiet", "--out", str(out)], cwd=tmp, capture_output=True,
                       env={**os.environ, "BENCHBOX_CACHE": str(Path(tmp) / "cache")})
        (row,) = json.loads(out.read_text())["results"]
    report = row["runner_report"]
    islands = report["declared_precision_islands"]
    fp32 = sum(1 for layer in report["engine_report"]["layers"] if layer["precision"] == "FP32")
    return (str(len(islands)), str(sum(i["count"] for i in islands)),
            "no" if not report["fallbacks"] else str(len(report["fallbacks"])), str(fp32))


def first_run_time() -> tuple[str, ...]:
    """Times the main job again; compared only on a quiet machine (load average ≤ 1.5)."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.first_run_time"], cwd=REPO, check=True,
                         capture_output=True, text=True)
    r = json.loads(out.stdout)
    load = max(r["cold"]["loadavg_before"][0], r["cold"]["loadavg_after"][0])
    if load > 1.5:
        raise RuntimeError(f"load average {load:.1f} is above the 1.5 the figure was stated at; "
                           f"measured {r['cold']['wall_s']:.0f} s cold, {r['warm']['wall_s']:.0f} s warm")
    said = stated(CLAIMS_BY_NAME["first run time"]) or ("0", "0")
    cold, warm = r["cold"]["wall_s"], r["warm"]["wall_s"]
    near = [abs(float(s) - m) <= 0.25 * float(s) for s, m in zip(said, (cold, warm))]
    return tuple(s if ok else f"{m:.0f}" for s, m, ok in zip(said, (cold, warm), near))


def process_probe_sets(key: str = "process_probe") -> tuple[str, ...]:
    rows = _json("benchmarks/results-process-probe-cpu.json")[key]["rows"]
    ratios = [r["probe_ratio"] for r in rows]
    n = len(rows) if all(r.get("verdict") == "slower" for r in rows) else -1
    return f"{min(ratios):.2f}", f"{max(ratios):.2f}", str(n)


def h200_process_probe(version: str | None = None) -> tuple[str, ...]:
    data = _json("benchmarks/results-ci-h200-process-probe.json")
    rows = (data[version] if version else data)["probe_tracking"]["rows"]
    med = [statistics.median(r[k] for r in rows) for k in ("corr_base", "sd_raw", "sd_adjusted")]
    return f"{med[0]:.2f}", f"{med[1]:.3f}", f"{med[2]:.3f}"


# -- the claims ---------------------------------------------------------------------------------

#: the paragraph benchmarks/changepoints.py writes (``--readme``); it checks the whole text too
CHANGEPOINTS = (r"found as a change point at exactly its commit in (\d+) of \d+ histories \(and nowhere else "
                r"in (\d+) of \d+\), within one commit in (\d+) of \d+, and benchbox diff on up to 10 runs "
                r"either side judged it `slower` in (\d+) of \d+\. (\d+) of \d+ histories without a step had "
                r"a change point \((\d+) in all, (\d+) of them judged slower or faster.*?said `slower` at "
                r"the step in (\d+) of \d+, and without a step gave, of (\d+) steps")
CLAIMS: tuple[Claim, ...] = (
    Claim("process probe does not move with the code", "README.md",
          r"timed before the first call it was ×([\d.]+)–([\d.]+) \(no direction\) in (\d+) such sets, "
          r"all judged `slower`", "benchmarks/results-process-probe-cpu.json (process_probe rows)",
          process_probe_sets),
    Claim("process probe v3 does not move with the code", "README.md",
          r"timed before the task loads \(as now\) ×([\d.]+)–([\d.]+) in (\d+) more, all judged `slower` too",
          "benchmarks/results-process-probe-cpu.json (process_probe_v3 rows)",
          lambda: process_probe_sets("process_probe_v3")),
    Claim("H200 process probe tracking", "README.md",
          r"timed before the first call it still tracks that host, more weakly \(median correlation ([\d.]+) "
          r"against 0\.76–0\.83; spread between processes ([\d.]+) → ([\d.]+)\),",
          "benchmarks/results-ci-h200-process-probe.json (probe_tracking rows, medians)", h200_process_probe),
    Claim("H200 process probe v3 tracking", "README.md",
          r"timed before the task loads \(as now\) less again \(median correlation ([\d.]+) in one "
          r"session of 2 runs, spread ([\d.]+) → ([\d.]+);",
          "benchmarks/results-ci-h200-process-probe.json (v3 probe_tracking rows, medians)",
          lambda: h200_process_probe("v3")),
    Claim("H200 recipe with the row probe", "README.md",
          r"a \+10% slowdown was `slower` in (\d+) of (\d+) runs, identical code exit 0 in (\d+) of (\d+)",
          "benchmarks/results-ci-h200-probe.json",
          lambda: (str(_json("benchmarks/results-ci-h200-probe.json")["rest+slow"]["rest+slow"]["exit_1"]),
                   str(_json("benchmarks/results-ci-h200-probe.json")["rest+slow"]["rest+slow"]["reps"]),
                   str(_json("benchmarks/results-ci-h200-probe.json")["rest"]["rest"]["exit_0"]),
                   str(_json("benchmarks/results-ci-h200-probe.json")["rest"]["rest"]["reps"]))),
    Claim("compiled model vs public call", "README.md",
          r"under `model_io_wall` the compiled model takes ([\d.]+)–([\d.]+) ms, but the complete public "
          r"call it belongs to takes ([\d.]+)–([\d.]+) ms",
          "receipts/h200-tiny-fp32.{model_io_wall,public_task_call_wall}.json (torch-compile p50s)",
          compiled_model_and_call),
    Claim("arrival changes model_io_wall", "README.md",
          r"`model_io_wall` p50 went from (\d+) µs back to back to (\d+) µs with 20 ms of sleep between "
          r"calls, while `device_compute` stayed at (\d+) µs",
          "receipts/h200-sweep/gap/cuda/ (back-to-back and gap-20ms-sleep p50s)", arrival_sweep),
    Claim("autotune flips", "README.md",
          r"each of the (\d+) later fresh compiles of identical code picked another Triton launch "
          r"configuration than the compile before at (\d+) of the (\d+) batched-matmul sites",
          "benchmarks/results-h200-autotune-flips.json", autotune_flips),
    Claim("diff engine against the rule it replaced", "README.md",
          r"raised false alarms in up to (\d+)% of identical diffs with 2 rounds a side \((\d+)% with 3\) "
          r"and covered the true ratio in as few as (\d+)% of them; Welch's t on processes raised at most "
          r"(\d+)% in every cell", "benchmarks/results-diff-calibration.json (cells)", diff_simulation),
    Claim("CI recipe's detectable change", "README.md",
          r"with 5 processes a side a change of (\d+)% is detected \(80% power\) at 2% drift between "
          r"processes, (\d+)% at 5%, (\d+)% at 10%",
          "benchmarks/results-diff-calibration.json (K = 5, detectable_median)", ci_recipe_detects),
    Claim("CI recipe on the 2-core machine", "README.md",
          r"the sd of log p50 between processes was ([\d.]+) \(median over rows, at rest; the control "
          r"workload's ([\d.]+)\), so the recipe's 5 processes a side detect changes of about (\d+)% .*?"
          r"a \+10% slowdown was judged `slower` in (\d+) of (\d+) pairs and `unresolved` in the rest, "
          r"identical code `unresolved` in (\d+) of (\d+)",
          "benchmarks/results-ci-false-alarms-processes.json (rest, rest+slow, kept receipts diffed again)",
          ci_recipe_on_two_cores),
    Claim("the CI recipe's recheck at rest", "README.md",
          r"identical code failed the first set in (\d+) of (\d+) pairs at rest and the job, with the "
          r"recheck[^,]*, in (\d+) of (\d+)",
          "benchmarks/results-ci-false-alarms-{processes,rest-load-cpu,recheck-cpu}.json (rest)",
          ci_recheck_at_rest),
    Claim("quietening remedies on the 2-core machine", "README.md",
          r"one intra-op thread brought that sd from ([\d.]+) to ([\d.]+)",
          "benchmarks/results-noise-remedies-cpu.json (between_processes)", noise_remedies_cpu),
    Claim("resolution line on an H200", "README.md", r"could detect changes of ([\d.]+)%",
          "benchbox diff of benchmarks/kept/h200-ci-slow/rest+slow-0-{base,head}.json", h200_resolution),
    Claim("quietening remedies on an H200", "README.md",
          r"processes of the tiny task's public call was ([\d.]+) by default, ([\d.]+) with a longer warm-up "
          r"\(`--warmup 50`\), and ([\d.]+)–([\d.]+) with one thread",
          "benchmarks/results-noise-remedies-h200.json (between_processes)", noise_remedies_h200),
    Claim("matmul isolated vs saturated", "README.md",
          r"a 4096³ matmul on an H200: (\d+) µs isolated, (\d+) µs saturated",
          "benchmarks/results-h200-truth.json (matmul: device_compute, device_throughput p50)",
          matmul_isolated_and_saturated),
    Claim("the decision task's inputs", "README.md", r"the decision task's (\d+) inputs are packed",
          "benchbox.tasks.decision.task.DecisionTask.input_names", decision_inputs),
    Claim("samples a process for a verdict", "README.md",
          r"A p50 needs ≥ (\d+) samples per process and a p99 ≥ (\d+) for a verdict",
          "benchbox.stats.MIN_PER_REPLICATE", per_process_minimum),
    Claim("spread assumed for one process", "README.md",
          r"the largest spread measured between processes for its clock \(host (\d+%): the tiny task's "
          r"public call on the H200 host; device (\d+%)\)",
          "benchbox.receipts.judge.PLAUSIBLE_DRIFT", plausible_drift),
    Claim("noise flags (figures)", "README.md", r"noisy \(CV over (\d+%) or over (\d+%) outliers\)",
          "benchbox.stats.NOISE_CV, NOISE_OUTLIER_FRACTION", noise_flags),
    Claim("noise flags (statistics)", "README.md",
          r"A CV over (\d+%), over (\d+%) outliers, an unsettled run",
          "benchbox.stats.NOISE_CV, NOISE_OUTLIER_FRACTION", noise_flags),
    Claim("run defaults", "README.md",
          r"`--samples N` \(default (\d+),.*?`--warmup N` \(default (\d+)\)",
          "benchbox.run.config.RunConfig defaults", lambda: run_defaults()[:2]),
    Claim("time limit per case", "README.md", r"Time limit per case: (\d+) s by default",
          "benchbox.run.config.RunConfig.case_time_limit_s", lambda: run_defaults()[2:]),
    Claim("diff defaults", "README.md",
          r"the ratio is beyond ±`--threshold` \((\d+%)\) and the change is at least (\d+)× the harness "
          r"floor",
          "benchbox.receipts.diff.DiffOptions, benchbox.stats.FLOOR_MULTIPLE", diff_defaults),
    Claim("parameter counts", "README.md",
          r"\| `tiny` \| ([\d,]+) \|.*?\| `small` \| ([\d,]+) \|.*?\| `base` \| ([\d,]+) \|.*?"
          r"\| `large` \| ([\d,]+) \|",
          "benchbox.tasks.decision.spec.parameter_count (from the shapes)", parameter_counts),
    Claim("receipt size budget", "README.md",
          r"at most ([\d,]+) samples for 1 \(runner, case\) row, ([\d,]+) per row for 100 rows, "
          r"([\d,]+) per row for 200 rows",
          "benchbox.receipts.io.max_samples_per_row", receipt_budget),
    Claim("receipt size budget (reliability)", "README.md",
          r"e\.g\. at most ([\d,]+) samples per row for 100 rows",
          "benchbox.receipts.io.max_samples_per_row(100)", lambda: (receipt_budget()[1],)),
    Claim("p99 interval sample counts", "README.md",
          r"a two-sided 95% p99 interval needs (\d+) samples.*?from (\d+) samples `p99_upper_ns`",
          "benchbox.stats.min_n_for_ci", p99_samples),
    Claim("accuracy gates", "README.md",
          r"float32 ([\de.-]+) / ([\de.-]+), float16 ([\de.-]+) / ([\de.-]+), bfloat16 ([\d.]+) / ([\d.]+)",
          "benchbox.tasks.decision.task.GATES", gates, numeric=True),
    Claim("fuzz examples in CI", "README.md",
          r"CI feeds ([\d,]+) mutants per loader \(([\d,]+) in all",
          "tests/test_fuzz.py (BENCHBOX_FUZZ_EXAMPLES default)", fuzz_examples),
    Claim("log tail in the runner report", "README.md",
          r"each runner report's `log` \(the last ([\d,]+) characters",
          "benchbox.run.capture.REPORT_CHARS", log_tail),
    Claim("log tail in the runner report (API)", "docs/api.md",
          r"the last ([\d,]+) characters in `text`", "benchbox.run.capture.REPORT_CHARS", log_tail),
    Claim("change points: committed result", "README.md", CHANGEPOINTS,
          "benchmarks/results-changepoints.json (runs)", changepoint_histories),
    Claim("change points: rerun", "README.md", CHANGEPOINTS,
          "python -m benchmarks.changepoints --histories 100", changepoints_rerun, rerun=True),
    Claim("TensorRT bfloat16 precision islands", "README.md",
          r"lists (\d+) `declared_precision_islands` entries \((\d+) layers: .*?\) and (no) fallback: "
          r"each of the engine's (\d+) float32 kernels",
          "benchbox run --runner tensorrt --dtype bfloat16 --case invoice (the engine's build; needs the "
          "tensorrt-rtx extra, no GPU)", tensorrt_bfloat16_islands, rerun=True),
    Claim("memory of a large receipt's parse", "README.md",
          r"a (\d+) MB file of 3-digit numbers: ([\d.]+) GB, ([\d.]+) GB with one character outside the BMP",
          "benchmarks/results-parse-memory.json", parse_memory_committed),
    Claim("memory of a large receipt's parse: rerun", "README.md",
          r"a (\d+) MB file of 3-digit numbers: ([\d.]+) GB, ([\d.]+) GB with one character outside the BMP",
          "python -m benchmarks.parse_memory --mb 250 (about 4 GB of memory)", parse_memory_rerun,
          rerun=True),
    Claim("memory bound while parsing", "README.md",
          r"what passes takes at most about (\d+)× the file's size in memory while parsing",
          "benchmarks/results-parse-memory.json (peak over file size)", parse_memory_bound),
    Claim("first run time on a busy machine", "README.md",
          r"busy with other work \(load average ([\d.]+)–([\d.]+), the run under `nice -n (\d+)`\) it took "
          r"(\d+) s and (\d+) s",
          "benchmarks/results-first-run-busy.json (python -m benchmarks.first_run_time)", first_run_busy),
    Claim("first run time (committed)", "README.md",
          r"Its run took (\d+) s with an empty compile cache and (\d+) s with it warm on a 2-core "
          r"machine at load average ([\d.]+)–([\d.]+)",
          "benchmarks/results-first-run-quiet.json (python -m benchmarks.first_run_time)", first_run_quiet),
    Claim("first run time", "README.md",
          r"Its run took (\d+) s with an empty compile cache and (\d+) s with it warm on a 2-core "
          r"machine at load average [\d.]+–[\d.]+",
          "python -m benchmarks.first_run_time (at load average ≤ 1.5)", first_run_time, rerun=True),
)
CLAIMS_BY_NAME = {c.name: c for c in CLAIMS}


def _layout_spread() -> tuple[str, ...]:
    configs = _json("benchmarks/results-noise-remedies-layout-cpu.json")["configs"]
    return tuple(f"{configs[c]['components']['public_task_call_wall']['between_processes']:.3f}"
                 for c in ("threads1", "threads1_layout_fixed"))


CLAIMS = (*CLAIMS, Claim(
    "fixed layout: spread between processes", "README.md",
    r"it brought the sd of log p50 between\s+8 processes of the tiny task's public call "
    r"from ([\d.]+) to ([\d.]+)",
    "benchmarks/results-noise-remedies-layout-cpu.json", _layout_spread))
CLAIMS_BY_NAME = {c.name: c for c in CLAIMS}


def _confirm_figures() -> tuple[str, ...]:
    d = _json("benchmarks/results-ci-confirm-cpu.json")
    runs = d["five_a_side"]["rest+slow"]["runs"]
    unresolved = [r for r in runs if r["exit_code"] != 1]
    named = sorted(n for r in unresolved for n in r["needed"] if n is not None)
    rows = d["with_155_a_side_diff_accept_load"]["rows"]
    out = [str(len(unresolved)), str(len(runs)), str(named[0]), str(max(named)), str(d["named_a_side"])]
    for r in rows:
        m = next(m for m in r["metrics"] if m["metric"] == "p50")
        out += [f"{m['ratio']:.3f}", f"{m['ci'][0]:.3f}", f"{m['ci'][1]:.3f}"]
    return tuple(out)


CLAIMS = (*CLAIMS, Claim(
    "named count, run", "README.md",
    r"5 processes a side left a \+10% slowdown `unresolved` in (\d+) of (\d+) pairs, naming (\d+)–(\d+) "
    r"processes a side for ±5%; run again with the median of those, (\d+) a side \(24 minutes\), the diff "
    r"judged both rows `slower`: ×([\d.]+) \[([\d.]+), ([\d.]+)\] and ×([\d.]+) \[([\d.]+), ([\d.]+)\]",
    "benchmarks/results-ci-confirm-cpu.json", _confirm_figures))
CLAIMS_BY_NAME = {c.name: c for c in CLAIMS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rerun", action="store_true", help="also rerun the slow sources (minutes to hours)")
    ap.add_argument("--list", action="store_true", help="print every claim and its source, check nothing")
    args = ap.parse_args()
    if args.list:
        for c in CLAIMS:
            print(f"{c.file}: {c.name} ← {c.source}{' (rerun)' if c.rerun else ''}")
        return
    checked = [c for c in CLAIMS if args.rerun or not c.rerun]
    problems = [p for p in (problem(c) for c in checked) if p]
    for p in problems:
        print(p)
    print(f"{len(checked) - len(problems)} of {len(checked)} claims agree with their sources")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()

