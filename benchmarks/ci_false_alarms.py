"""Does `benchbox diff` raise false alarms in CI, and does it catch a real +10%?

Identical code is run as BASE and HEAD on this machine in six scenarios, each repeated
``--reps`` times; every run is a ``benchbox run`` process of its own, as in CI. ``--design
interleaved`` (the default) is what the CI recipe (``examples/ci/bench.sh``) does:
``--repeats`` single-round runs a side, alternating base, head, head, base, base, head, …, each
side's runs joined as rounds (``benchbox combine``), then diffed. ``--design sequential`` runs
BASE, then HEAD, each one run of ``--repeats`` rounds in one process (``benchbox run --repeats
K``).

- ``rest``: nothing else runs;
- ``load``: a busy process on every core while HEAD runs (BASE at rest), during each of
  HEAD's runs when interleaved;
- ``shared-load``: a busy process on every core for the whole pair (BASE and HEAD under the
  same load, as on a CI machine busy with other jobs);
- ``rest+slow`` / ``load+slow`` / ``shared-load+slow``: the same, with HEAD slowed by the
  ``slowdown_us`` option of the test task ``tests.faulty_decision`` (the decision task whose
  serialize sleeps that long; set to ``--slowdown`` × BASE's p50 of a first calibration run,
  so about +10% on the whole call;
  calibrated under the busy processes for ``shared-load+slow``, at rest otherwise).

For each scenario it counts the diffs by exit code (0 ok, 1 regression, 3 unreliable
rows) and the rows judged slower. The bar: identical code never exits 1; the +10%
slowdown is reported slower in ≥ 18 of 20 at rest and under the same load on both sides.
Under load on one side only the diff is designed to say ``unreliable (load)`` (exit 3), never
``slower``, whatever the code did: the conditions differ, so no timing is judged.

    python benchmarks/ci_false_alarms.py --out benchmarks/results-ci-false-alarms.json

Defaults are the CI recipe's: five rounds a side (``--repeats 5``) of 80 samples
(``--samples 400`` in all), torch-eager, tiny size.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

SCENARIOS = ("rest", "load", "rest+slow", "load+slow", "shared-load", "shared-load+slow")
REPO = Path(__file__).resolve().parent.parent


def _spin() -> None:  # pragma: no cover - runs in a child process
    while True:
        pass


class Busy:
    """A busy process on every core for the duration of a ``with`` block."""

    def __init__(self, on: bool) -> None:
        self.on, self.procs = on, []

    def __enter__(self) -> Busy:
        if self.on:
            ctx = mp.get_context("spawn")
            self.procs = [ctx.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 1)]
            for p in self.procs:
                p.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.join()


#: the decision task with a deliberate slowdown, HEAD's task in the ``+slow`` scenarios
SLOW_TASK = "tests.faulty_decision:FaultyDecisionTask"


def _run(out: Path, args: argparse.Namespace, slowdown_us: int = 0, *, rounds: int | None = None,
         samples: int | None = None, repo: Path = REPO) -> Path:
    """One ``benchbox run`` in a process of its own, as the CI recipe runs it (``python -m benchbox``
    with this checkout first on the path)."""
    import subprocess

    cmd = [sys.executable, "-m", "benchbox", "run", "--size", args.size, "--device", args.device,
           "--samples", str(samples or args.samples), "--repeats", str(rounds or args.repeats),
           "--warmup", str(args.warmup), "--contract", args.contract, "--out", str(out), "--overwrite",
           "--quiet"]
    for r in args.runner or ["torch-eager"]:
        cmd += ["--runner", r]
    for c in args.case:
        cmd += ["--case", c]
    if getattr(args, "threads", None):
        cmd += ["--threads", str(args.threads)]
    if getattr(args, "layout", None):
        cmd += ["--layout", args.layout]
    if slowdown_us:
        cmd += ["--task", SLOW_TASK, "--task-option", f"slowdown_us={slowdown_us}"]
    path = os.pathsep.join([str(repo), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout, cwd=repo)
    if p.returncode not in (0, 1) or not out.exists():
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [f"exit {p.returncode}"]
        raise RuntimeError(f"benchbox run failed ({p.returncode}): {tail[0]}")
    return out


def _busy(name: str, side: str) -> bool:
    """Whether the busy processes run during one ``side`` run of scenario ``name``."""
    return name.startswith("shared-load") or (name.startswith("load") and side == "head")


def _slowdown_us(tmp: Path, args: argparse.Namespace, *, loaded: bool = False) -> int:
    """``--slowdown`` of the median p50 over the cases of a calibration run, in microseconds
    (``loaded``: the calibration run under a busy process on every core)."""
    from benchbox.receipts import load_receipt

    with Busy(loaded):
        path = _run(tmp / f"calibration{'-loaded' if loaded else ''}.json", args)
    r = load_receipt(path)
    p50s = sorted(row.summary.p50_ns for row in r.results if row.summary.p50_ns)
    return max(1, int(args.slowdown * p50s[len(p50s) // 2] / 1000))


def diff_files(base: Path, head: Path, options: Any) -> Any:
    """The library diff of two receipt files, loaded as `benchbox diff` loads them."""
    from benchbox.receipts import load_receipt
    from benchbox.receipts.diff import diff_receipts

    return diff_receipts(load_receipt(base), load_receipt(head), options, str(base), str(head))


def scenario(name: str, rep: int | str, tmp: Path, args: argparse.Namespace, slow_us: int) -> dict[str, Any]:
    """One BASE/HEAD pair of a scenario and the diff's exit code and verdicts."""

    slow = slow_us if "slow" in name else 0
    if args.design == "sequential":
        with Busy(_busy(name, "base")):
            base = _run(tmp / f"{name}-{rep}-base.json", args)
        with Busy(_busy(name, "head")):
            head = _run(tmp / f"{name}-{rep}-head.json", args, slow)
    else:
        with Busy(name.startswith("shared-load")):  # one load for the whole pair
            base, head = _interleaved(name, rep, tmp, args, slow)
    first = diff_files(base, head, _options(args))
    if first.exit_code != 1 or not args.recheck or args.design != "interleaved":
        return _judged(first)
    # the recipe's recheck: a second, independent set of processes; a row fails only if both find it
    with Busy(name.startswith("shared-load")):
        base2, head2 = _interleaved(name, f"{rep}-recheck", tmp, args, slow)
    return _rechecked(first, diff_files(base2, head2, _options(args)))


def _rechecked(first: Any, second: Any) -> dict[str, Any]:
    """A first set's exit-1 diff judged again with a second set's, by the recipe's rule."""
    code, lines = recipe_recheck().confirmed(first.to_dict(), second.to_dict())
    return {**_judged(first), "exit_code": code, "first_exit_code": 1,
            "recheck": {**_judged(second), "lines": lines}}


def recipe_recheck() -> Any:
    """The CI recipe's recheck rule (``examples/ci/recheck.py``), the one file both use."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("recheck", REPO / "examples" / "ci" / "recheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _interleaved(name: str, rep: int | str, tmp: Path, args: argparse.Namespace,
                 slow: int) -> tuple[Path, Path]:
    """The CI recipe's design: single-round runs alternating base, head, head, base, …; each
    side's runs combined into one receipt of ``--repeats`` rounds."""
    per_run = max(1, args.samples // args.repeats)
    paths: dict[str, list[Path]] = {"base": [], "head": []}
    for i in range(args.repeats):
        for side in (("base", "head") if i % 2 == 0 else ("head", "base")):
            out = tmp / f"{name}-{rep}-{side}-{i}.json"
            with Busy(name.startswith("load") and side == "head"):
                paths[side].append(_run(out, args, slow if side == "head" else 0, rounds=1, samples=per_run,
                                        repo=head_checkout(args) if side == "head" else REPO))
    return _joined(paths["base"], tmp / f"{name}-{rep}-base.json"), \
        _joined(paths["head"], tmp / f"{name}-{rep}-head.json")


def head_checkout(args: argparse.Namespace) -> Path:
    """Where HEAD's runs start: this checkout, or with ``--copy-head`` a copy of it at another path
    (as in CI, where base and head are two checkouts: the paths differ, the code does not)."""
    if not args.copy_head:
        return REPO
    if args.copy_head_dir is None:
        import shutil

        copy = Path(tempfile.mkdtemp(prefix="benchbox-ci-false-alarms-head-checkout-")) / "head"
        skip = shutil.ignore_patterns(".git", ".venv", "__pycache__", "kept", "*.tgz")

        def ignore(folder: str, names: list[str]) -> set[str]:  # the top-level receipts/ only:
            top = Path(folder) == REPO  # benchbox/receipts is a package
            return set(skip(folder, names)) | ({"receipts"} & set(names) if top else set())

        shutil.copytree(REPO, copy, ignore=ignore)
        args.copy_head_dir = str(copy)
    return Path(args.copy_head_dir)


def _joined(runs: list[Path], out: Path) -> Path:
    """One side's runs as the rounds of one receipt (``benchbox combine``), written to ``out``."""
    from benchbox.receipts import load_receipt
    from benchbox.receipts.combine import combine
    from benchbox.receipts.io import write_receipt

    if len(runs) == 1:
        out.write_bytes(runs[0].read_bytes())
    else:
        out.unlink(missing_ok=True)
        write_receipt(out, combine([load_receipt(p) for p in runs], [p.name for p in runs]))
    return out


def _options(args: argparse.Namespace) -> Any:
    """The diff's options: ``--metric`` and the condition kinds ``--accept`` names."""
    from benchbox.receipts.diff import DiffOptions

    return DiffOptions(metric=args.metric, accept=frozenset(args.accept))


def _judged(d: Any) -> dict[str, Any]:
    """A diff's exit code, verdicts, unreliable reasons, and what its unresolved rows said they
    could detect and how many processes a side they named (``None``: more than is practical)."""
    unresolved = [m for r in d.rows if r.verdict == "unresolved" for m in r.metrics if not m.advisory]
    return {"exit_code": d.exit_code, "verdicts": dict(Counter(r.verdict for r in d.rows)),
            "reasons": sorted({r.reason.split(":")[0] for r in d.rows if r.verdict == "unreliable"}),
            "detectable": [round(m.detectable, 4) for m in unresolved if m.detectable is not None],
            "needed": [m.needed for m in unresolved]}


def named_count(runs: list[dict[str, Any]]) -> int | None:
    """The processes a side the unresolved runs named: the median over those runs of the largest
    count one of its rows named, a row that named none (more than is practical) counting as
    infinitely many (None: no run was unresolved, or that median is more than practical)."""
    largest = sorted(math.inf if any(n is None for n in r["needed"]) else max(r["needed"])
                     for r in runs if r["exit_code"] != 1 and r.get("needed"))
    if not largest or largest[len(largest) // 2] == math.inf:
        return None
    return int(largest[len(largest) // 2])


def with_processes(args: argparse.Namespace, count: int) -> argparse.Namespace:
    """The settings with ``count`` single-round processes a side, each as many samples as before."""
    per_run = args.samples // args.repeats
    return argparse.Namespace(**{**vars(args), "repeats": count, "samples": count * per_run})


def confirm(name: str, runs: list[dict[str, Any]], tmp: Path, args: argparse.Namespace,
            slow_us: int) -> dict[str, Any]:
    """Run scenario ``name`` again with as many processes a side as its unresolved diffs named,
    ``--confirm`` times: does that many detect what the recipe's five could not?"""
    count = named_count(runs)
    if count is None:
        return {"named": None, "note": "no unresolved run named a practical count"}
    sub = with_processes(args, count)
    done = [scenario(name, f"confirm{count}x{i}", tmp, sub, slow_us) for i in range(args.confirm)]
    return {"named": count, **summarize(done)}


def rediff(folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The scenarios judged again from kept receipts (NAME-REP-base/head.json) by this benchbox,
    with the recipe's recheck where a pair's first set exits 1 and its recheck receipts were kept."""
    from benchbox.receipts.diff import ComparisonRefused

    out: dict[str, Any] = {}
    joined = Path(tempfile.mkdtemp(prefix="rediff-"))
    for name in args.scenario or SCENARIOS:
        runs = []
        for rep in range(args.reps):
            pair = _kept_pair(folder, f"{name}-{rep}", joined)
            if pair is None:
                continue
            try:
                first = diff_files(*pair, _options(args))
                again = _kept_pair(folder, f"{name}-{rep}-recheck", joined) if first.exit_code == 1 else None
                runs.append(_judged(first) if again is None
                            else _rechecked(first, diff_files(*again, _options(args))))
            except ComparisonRefused:  # a receipt kept before its run finished: not a pair
                continue
        if runs:
            out[name] = summarize(runs)
    return out


def _kept_pair(folder: Path, stem: str, joined: Path) -> tuple[Path, Path] | None:
    """BASE and HEAD receipts of one kept set (STEM-base/head.json): an interleaved set's runs
    joined again with this benchbox, or the joined receipts as kept; None when there are none."""
    base, head = folder / f"{stem}-base.json", folder / f"{stem}-head.json"
    per_run = {side: sorted(folder.glob(f"{stem}-{side}-[0-9]*.json"),
                            key=lambda p: int(p.stem.rsplit("-", 1)[1])) for side in ("base", "head")}
    if per_run["base"] and per_run["head"]:  # interleaved: join the runs again with this benchbox
        try:
            base = _joined(per_run["base"], joined / base.name)
            head = _joined(per_run["head"], joined / head.name)
        except Exception:  # noqa: BLE001 - a run copied before it finished: not a pair
            return None
    return (base, head) if base.exists() and head.exists() else None


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    codes = Counter(r["exit_code"] for r in runs)
    return {"reps": len(runs), "exit_1": codes.get(1, 0), "exit_3": codes.get(3, 0),
            "exit_0": codes.get(0, 0), "rechecked": sum(1 for r in runs if "recheck" in r),
            "runs_with_a_slower_row": sum(1 for r in runs if r["verdicts"].get("slower")), "runs": runs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads of every run (default: torch's own), as `run --threads`")
    ap.add_argument("--layout", default=None, choices=["random", "fixed"],
                    help="memory layout of every run (as `run --layout`; default: the run's own, random)")
    ap.add_argument("--copy-head", action="store_true",
                    help="run HEAD from a copy of this checkout at another path, as CI's two checkouts")
    ap.add_argument("--runner", action="append", default=[], help="runner (repeatable; default torch-eager)")
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--contract", default="public_task_call_wall")
    ap.add_argument("--timeout", type=float, default=900, help="seconds one run may take")
    ap.add_argument("--case", action="append", default=[], help="cases (default: all)")
    ap.add_argument("--metric", default="p50", choices=["p50", "p99", "both"])
    ap.add_argument("--accept", action="append", default=[], metavar="KIND",
                    help="judge rows anyway under this condition kind (as `diff --accept`; repeatable)")
    ap.add_argument("--slowdown", type=float, default=0.10, help="injected slowdown, fraction of p50")
    ap.add_argument("--slowdown-us", type=int, default=None, metavar="US",
                    help="the injected slowdown in microseconds, instead of --slowdown × a calibration "
                         "run's p50 (saves the calibration run)")
    ap.add_argument("--design", default="interleaved", choices=["interleaved", "sequential"],
                    help="interleaved: the CI recipe's alternating single-round runs, combined; "
                         "sequential: base then head, each one run of --repeats rounds")
    ap.add_argument("--keep", type=Path, default=None, metavar="DIR",
                    help="keep every receipt in DIR (for --rediff later)")
    ap.add_argument("--scenario", action="append", choices=SCENARIOS, default=[])
    ap.add_argument("--no-recheck", dest="recheck", action="store_false",
                    help="judge a pair by its first diff alone (the recipe with BENCHBOX_RECHECK=0); by "
                         "default a regression is measured again with a second set of processes and "
                         "fails only if that finds it too, as the recipe does")
    ap.add_argument("--confirm", type=int, default=0, metavar="N",
                    help="after each +slow scenario, run it N times more with the processes a side its "
                         "unresolved diffs named (the median of their largest), and count detections")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results-ci-false-alarms.json"))
    ap.add_argument("--rediff", type=Path, default=None, metavar="DIR",
                    help="measure nothing: judge the receipts kept in DIR (NAME-REP-base/head.json, "
                         "joined again from NAME-REP-SIDE-I.json where kept) again")
    args = ap.parse_args(argv)
    args.copy_head_dir = None
    if args.rediff is not None:
        results = {"command": ["python", "benchmarks/ci_false_alarms.py",
                               *(argv if argv is not None else sys.argv[1:])], **rediff(args.rediff, args)}
        for name in SCENARIOS:
            if name in results:
                r = results[name]
                print(f"{name}: exit 1 in {r['exit_1']}/{r['reps']}, exit 3 in {r['exit_3']}, "
                      f"a slower row in {r['runs_with_a_slower_row']}", file=sys.stderr)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        return 0
    if args.reps < 1 or args.samples < args.repeats:
        print("ci_false_alarms: --reps must be ≥ 1 and --samples ≥ --repeats", file=sys.stderr)
        return 2
    command = ["python", "benchmarks/ci_false_alarms.py", *(argv if argv is not None else sys.argv[1:])]
    results: dict[str, Any] = {"command": command,
                               "settings": {k: (str(v) if isinstance(v, Path) else v)
                                            for k, v in vars(args).items()}}
    results["machine"] = {"cpu_count": os.cpu_count(), "loadavg_before": list(os.getloadavg())}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        tmp = args.keep or Path(d)
        tmp.mkdir(parents=True, exist_ok=True)
        names = args.scenario or SCENARIOS
        slow_us = args.slowdown_us or _slowdown_us(tmp, args)
        results["slowdown_us"] = slow_us
        if "shared-load+slow" in names:
            results["slowdown_us_loaded"] = _slowdown_us(tmp, args, loaded=True)
        for name in names:
            runs = []
            for i in range(args.reps):
                slow = results["slowdown_us_loaded"] if name == "shared-load+slow" else slow_us
                runs.append(scenario(name, i, tmp, args, slow))
                results[name] = summarize(runs)
                results["machine"]["loadavg_after"] = list(os.getloadavg())
                args.out.write_text(json.dumps(results, indent=1) + "\n")  # a stopped run keeps its pairs
            print(f"{name}: exit 1 in {results[name]['exit_1']}/{args.reps}, exit 3 in "
                  f"{results[name]['exit_3']}, a slower row in {results[name]['runs_with_a_slower_row']}",
                  file=sys.stderr)
            if args.confirm and name.endswith("+slow"):
                slow = results["slowdown_us_loaded"] if name == "shared-load+slow" else slow_us
                results[name]["confirmed"] = confirm(name, runs, tmp, args, slow)
                args.out.write_text(json.dumps(results, indent=1) + "\n")
                c = results[name]["confirmed"]
                print(f"{name} with the named {c['named']} processes a side: "
                      + (f"exit 1 in {c['exit_1']}/{c['reps']}" if c["named"] else c["note"]),
                      file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
