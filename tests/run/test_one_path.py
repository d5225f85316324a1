"""A one-round run and ``--repeats K`` in one process take one measuring path
(:mod:`benchbox.run.rounds`); what they write stayed as it was when they were two paths.

``tests/run/one_path.json`` was written by this file run as a script against the code of the two
paths (``python tests/run/test_one_path.py --write`` with that code first on the path). Each
scenario is a real run of a user task that misbehaves on request (``tests/hostile_tasks.py``): the
rows (status, reasons, samples, rounds, stop reason, the runner report's keys) in the order the
receipt holds them, the receipt's completeness and settings, the exit code and the lines the run
printed, with timings and paths masked.

One change is on purpose (:func:`_changed`): a case that a BaseException ends in a later round
keeps the samples that round took before it (as a case of a one-round run keeps them) and says
what ended its sampling, and its line is one per contract, as a one-round run's.

Calls of ``serialize`` in these runs: the references 1-2, then for each case two validation
calls, a warm-up call and its samples (with rounds, each round again a warm-up and its share).
"""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURE = Path(__file__).with_name("one_path.json")
BASE = ["run", "--task", "tests.hostile_tasks:factory", "--runner", "torch-eager", "--warmup", "1",
        "--contract", "public_task_call_wall", "--contract", "model_io_wall"]
ROUNDS = ["--repeats", "2", "--in-process"]
#: a command line, or a RunConfig's fields
SCENARIOS: dict[str, list[str] | dict[str, Any]] = {
    "one round": ["--samples", "5"],
    "one round, settle": {"task": "tests.hostile_tasks:factory", "runners": ("torch-eager",), "warmup": 1,
                          "contracts": ("public_task_call_wall", "model_io_wall"), "samples": 5,
                          "settle_s": 0.05},
    "one round, sys.exit in alpha's samples": ["--samples", "5", "--task-option", "exit_in=serialize",
                                              "--task-option", "at_call=8"],
    "one round, reduce abandons a validation call": ["--samples", "5", "--task-option", "raise_in=reduce",
                                                     "--task-option", "at_call=12"],
    "one round, Ctrl-C in beta's samples": ["--samples", "5", "--task-option", "signal_in=serialize",
                                           "--task-option", "at_call=15"],
    "rounds": ["--samples", "10", *ROUNDS],
    "rounds, sys.exit in alpha's second round": ["--samples", "10", *ROUNDS, "--task-option",
                                                 "exit_in=serialize", "--task-option", "at_call=21"],
    "rounds, Ctrl-C in alpha's second round": ["--samples", "10", *ROUNDS, "--task-option",
                                               "signal_in=serialize", "--task-option", "at_call=21"],
}
_NUMBER = re.compile(r"\d+\.\d+|\d+(?= ?(?:ms|s|µs|us)\b)|\d+(?= untimed)")
#: reasons that follow the timings (noise, drift), not what the run did
_TIMED = ("noise:", "unsettled:")
#: lines that name the receipt or follow the machine's state as a run starts, not the code path
_MACHINE = ("receipt:", "warning: the machine is busy")


_ETA = re.compile(r" \(run: [^)]*\)$")
#: the time left that a later round's line adds (added after the fixture was written; tested in
#: tests/run/test_run_eta.py)
_ROUNDS_LEFT = re.compile(r" · ≈[\d:]+ left for \d+ rounds?$")


def _masked(text: str, tmp: Path) -> str:
    text = _ROUNDS_LEFT.sub("", text)
    return _NUMBER.sub("#", _ETA.sub(" (run: ETA)", text.replace(str(tmp), "TMP")))


def _rows(receipt: dict[str, Any], tmp: Path) -> list[dict[str, Any]]:
    return [{"runner": r["runner"], "case": r["case"], "status": r["status"], "partial": r.get("partial"),
             "reasons": [_masked(x, tmp) for x in r["reasons"] if not x.startswith(_TIMED)],
             "samples": len(r["samples_ns"]),
             "round_sizes": r["round_sizes"], "stop_reason": _masked(r.get("stop_reason") or "", tmp),
             "round_process": r.get("round_process"), "warmup": r.get("warmup"),
             "accuracy": (r.get("accuracy") or {}).get("passed"),
             "report": sorted(k for k in r["runner_report"] if k != "log")}
            for r in receipt["results"]]


def _settings(receipt: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in receipt["settings"].items() if k not in ("rounds",)}


def observed(tmp: Path) -> dict[str, Any]:
    """Every scenario run here, as the fixture holds it."""
    from click.testing import CliRunner

    from benchbox.cli import main
    from benchbox.receipts import load_receipt
    from benchbox.run import RunConfig, run

    out: dict[str, Any] = {}
    for n, (name, args) in enumerate(SCENARIOS.items()):
        stem = tmp / f"s{n}"
        if isinstance(args, dict):
            lines: list[str] = []
            run(RunConfig(**args, out=stem.with_suffix(".json")), lines.append)
            exit_code, stderr = 0, "\n".join(lines)
        else:
            handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
            try:  # an interrupted run ignores further signals: give the caller its own back
                result = CliRunner().invoke(main, [*BASE, *args, "--out", str(stem.with_suffix(".json"))])
            finally:
                for s, h in handlers.items():
                    signal.signal(s, h)
            exit_code, stderr = result.exit_code, result.stderr
        receipts = {}
        for contract in ("public_task_call_wall", "model_io_wall"):
            path = next(tmp.glob(f"s{n}*{contract}*.json"), None) or stem.with_suffix(".json")
            doc = load_receipt(path).to_json()
            receipts[contract] = {"complete": doc["complete"], "interrupted": doc.get("interrupted"),
                                  "settings": _settings(doc), "rows": _rows(doc, tmp)}
        out[name] = {"exit_code": exit_code,
                     "stderr": [_masked(line, tmp) for line in stderr.splitlines()
                                if not line.startswith(_MACHINE)],
                     "receipts": receipts}
    return out


def _changed(expected: dict[str, Any]) -> dict[str, Any]:
    """The fixture with what the one path changes on purpose (see the module's docstring)."""
    scenario = expected["rounds, sys.exit in alpha's second round"]
    for receipt in scenario["receipts"].values():
        alpha = receipt["rows"][0]
        assert alpha["case"] == "alpha" and alpha["round_sizes"] == [5]
        alpha.update(samples=6, round_sizes=[5, 1], round_process=[0, 0],  # call 21: round 2's 2nd sample
                     stop_reason="sampling ended by SystemExit after 6 sample(s) in 2 round(s)")
    lines = scenario["stderr"]
    said = "torch-eager × alpha: failed: SystemExit: sys.exit(3) called by task or runner code"
    i = lines.index(f"{said} (run: ETA)")
    per_contract = [said.replace("alpha:", f"alpha [{c}]:")
                    for c in ("public_task_call_wall", "model_io_wall")]
    lines[i:i + 1] = [per_contract[0], f"{per_contract[1]} (run: ETA)"]
    return expected


def test_one_path_writes_what_the_two_paths_wrote(tmp_path: Path) -> None:
    expected = _changed(json.loads(FIXTURE.read_text()))
    got = json.loads(json.dumps(observed(tmp_path)))
    assert list(got) == list(expected)
    for name in expected:
        assert got[name] == expected[name], name


def test_a_ctrl_c_in_the_first_round_keeps_what_was_measured_and_no_empty_row(tmp_path: Path) -> None:
    """Call 8 of ``serialize`` is alpha's third sample in round 1; beta has not been sampled. (With
    two paths, beta was written as a valid row of no samples, and the run ended in a TypeError.)"""
    from click.testing import CliRunner

    from benchbox.cli import main
    from tests.support import loaded

    out = tmp_path / "r.json"
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = CliRunner().invoke(main, [*BASE[:-4], "--samples", "10", *ROUNDS, "--out", str(out),
                                           "--task-option", "signal_in=serialize",
                                           "--task-option", "at_call=8"])
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    assert result.exit_code == 130, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("benchbox: interrupted (SIGINT): 1 result(s) kept"), last
    (row,) = loaded(out)["results"]
    assert (row["case"], row["status"], row["partial"], row["round_sizes"]) == ("alpha", "invalid", True, [3])


def test_a_runner_report_that_exits_fails_its_case_and_the_reporter_hears_the_runners_run_name(
        tmp_path: Path) -> None:
    """The rows are made (the runner's report read) where the case's failures are contained, as
    they were in a one-round run; ``case_finished`` names the runner as the run names it. A user's
    runner class is loaded under another name (``RunnerClasses``); its report calls sys.exit once,
    after alpha's samples."""
    from benchbox.run import RunConfig, RunnerClasses, run
    from benchbox.run.progress import Reporter
    from benchbox.runners.torch_eager import TorchEagerRunner
    from tests.support import loaded

    class ExitsInReport(TorchEagerRunner):
        name = "exits-in-report"
        calls = 0

        def compute(self, inputs: Any) -> Any:
            self.calls += 1
            return super().compute(inputs)

        def report(self) -> dict[str, Any]:
            if self.calls >= 8 and not getattr(self, "exited", False):  # 2 validation calls, 1 + 5 sampled
                self.exited = True
                sys.exit(5)
            return super().report()

    class Heard(Reporter):
        def __init__(self) -> None:
            self.finished: list[tuple[str, str]] = []

        def case_finished(self, runner: str, case: str, line: str) -> None:
            self.finished.append((runner, case))

    heard = Heard()
    out = tmp_path / "r.json"
    run(RunConfig(task="tests.hostile_tasks:factory", runners=("under-my-name",), warmup=1, samples=5,
                  out=out), reporter=heard, runner_factory=RunnerClasses({"under-my-name": ExitsInReport}))
    rows = {r["case"]: r for r in loaded(out)["results"]}
    assert rows["alpha"]["status"] == "failed" and "sys.exit(5)" in rows["alpha"]["reasons"][0]
    assert rows["beta"]["status"] == "valid"
    assert heard.finished == [("under-my-name", "alpha"), ("under-my-name", "beta")]


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        FIXTURE.write_text(json.dumps(observed(Path(d)), indent=1, ensure_ascii=False) + "\n")
elif __name__ == "__main__":
    pytest.main([__file__])
