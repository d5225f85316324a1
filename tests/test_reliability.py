"""Reliability: nothing measured is ever lost, failures are contained, bad input never crashes.

The runners registered here are real runners (subclasses of the eager runner) that fail
the way real ones do. Only what cannot happen on this CPU machine is simulated, and the
names say so (an out-of-memory error, a failed engine build).
"""

from __future__ import annotations

import ast
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import benchbox
from benchbox.cli import main
from benchbox.errors import UsageError
from benchbox.receipts import load_receipt
from benchbox.receipts.io import write_receipt
from benchbox.run import Interrupted, RunConfig, run
from benchbox.runners import RUNNERS
from benchbox.runners.torch_eager import TorchEagerRunner

TWO_CASES = ("invoice", "outage")


# -- runners that fail the way real runners do ----------------------------------------------

class _Counting(TorchEagerRunner):
    """Eager, counting compute calls since prepare (validation, warm-up and samples)."""

    def prepare(self, task: Any, model: Any, example: tuple[np.ndarray, ...], phases: Any) -> None:
        super().prepare(task, model, example, phases)
        self.calls = 0

    def compute(self, inputs: Any) -> Any:
        self.calls += 1
        self.on_call(self.calls)
        return super().compute(inputs)

    def on_call(self, n: int) -> None:
        """What happens at the n-th compute call."""


class SimulatedBuildFailure(TorchEagerRunner):
    name = "bb-build-fails"

    def prepare(self, task: Any, model: Any, example: Any, phases: Any) -> None:
        with phases("build"):
            raise RuntimeError("engine build failed: simulated parser error at layer 3")


class SimulatedOomMidRun(_Counting):
    """Out of memory part way through the second case's samples (calls: 2 validation + samples)."""

    name = "bb-oom-mid"
    OPTION_KEYS = ("fail_at",)

    def on_call(self, n: int) -> None:
        if n == int(self.options.get("fail_at", 10**9)):
            import torch

            raise torch.OutOfMemoryError("simulated: CUDA out of memory. Tried to allocate 2.00 GiB")


class NanOutputs(TorchEagerRunner):
    name = "bb-nan"

    def d2h(self, outputs: Any) -> dict[str, np.ndarray]:
        host = super().d2h(outputs)
        return {k: np.full_like(v, np.nan) for k, v in host.items()}


class ValidationRaises(TorchEagerRunner):
    name = "bb-h2d-raises"

    def h2d(self, host: Any) -> Any:
        raise ValueError("input 0 has shape (1, 128), the engine was built for (1, 64)")


class AvailabilityRaises(TorchEagerRunner):
    name = "bb-availability-raises"

    @classmethod
    def availability(cls, device: str) -> str | None:
        raise OSError("libnvinfer.so.10: cannot open shared object file")


class ReportRaises(TorchEagerRunner):
    name = "bb-report-raises"

    def report(self) -> dict[str, Any]:
        raise KeyError("inspector")


class SigintAt(_Counting):
    """Sends SIGINT to this process at a chosen compute call (as a user's Ctrl-C would)."""

    name = "bb-sigint"
    OPTION_KEYS = ("at", "times")

    def on_call(self, n: int) -> None:
        if n == int(self.options["at"]):
            for _ in range(int(self.options.get("times", 1))):
                os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register this module's runners in the runner registry, as a plugin would."""
    for cls in (SimulatedBuildFailure, SimulatedOomMidRun, NanOutputs, ValidationRaises,
                AvailabilityRaises, ReportRaises, SigintAt):
        monkeypatch.setitem(RUNNERS, cls.name, f"{__name__}:{cls.__name__}")


def _calls_per_case(samples: int, warmup: int) -> int:
    return 2 + warmup + samples  # two validation calls, warm-up, samples


# -- failures contained ----------------------------------------------------------------------

def test_failing_runners_get_failed_rows_and_the_others_stay_valid(registered: None,
                                                                   tmp_path: Path) -> None:
    samples, warmup = 20, 1
    # out of memory in the middle of the second case's samples
    fail_at = _calls_per_case(samples, warmup) + 2 + warmup + samples // 2
    out = tmp_path / "r.json"
    args = ["run", "--samples", str(samples), "--warmup", str(warmup), "--out", str(out),
            "--runner-option", f"bb-oom-mid:fail_at={fail_at}"]
    for r in ("bb-build-fails", "bb-oom-mid", "bb-nan", "bb-h2d-raises", "bb-availability-raises",
              "bb-report-raises", "torch-eager"):
        args += ["--runner", r]
    for c in TWO_CASES:
        args += ["--case", c]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # no exception escaped as a traceback
    assert "Traceback" not in result.output
    receipt = load_receipt(out)
    assert receipt["complete"] is True
    rows = {(r["runner"], r["case"]): r for r in receipt["results"]}
    assert len(rows) == 7 * len(TWO_CASES)

    for case in TWO_CASES:
        build = rows[("bb-build-fails", case)]
        assert build["status"] == "failed"
        assert build["reasons"] == ["preparation failed: RuntimeError: engine build failed: "
                                    "simulated parser error at layer 3"]
        h2d = rows[("bb-h2d-raises", case)]
        assert h2d["status"] == "failed" and h2d["reasons"][0].startswith("ValueError: input 0 has shape")
        avail = rows[("bb-availability-raises", case)]
        assert avail["status"] == "failed"
        assert "availability check failed: OSError: libnvinfer.so.10" in avail["reasons"][0]
        nan = rows[("bb-nan", case)]
        assert nan["status"] == "invalid" and nan["accuracy"]["passed"] is False
        assert any("NaN" in reason for reason in nan["reasons"])
        rep = rows[("bb-report-raises", case)]
        assert rep["status"] == "valid" and "KeyError" in rep["runner_report"]["report_error"]
        eager = rows[("torch-eager", case)]
        assert eager["status"] == "valid" and eager["summary"]["n"] == samples
        assert len(eager["samples_ns"]) == samples and eager["accuracy"]["passed"] is True

    first, second = rows[("bb-oom-mid", "invoice")], rows[("bb-oom-mid", "outage")]
    assert first["status"] == "valid" and first["summary"]["n"] == samples
    assert second["status"] == "failed"
    assert second["reasons"] == ["OutOfMemoryError: simulated: CUDA out of memory. "
                                 "Tried to allocate 2.00 GiB"]
    assert "OutOfMemoryError" in second["runner_report"]["traceback"]
    # the eager rows measured after the failures are compared; failed/invalid ones are excluded
    excluded = {(e["runner"], e["case"]) for e in receipt["comparisons"]["excluded"]}
    assert ("bb-oom-mid", "outage") in excluded and ("torch-eager", "invoice") not in excluded


# -- SIGINT ----------------------------------------------------------------------------------

def test_sigint_mid_case_keeps_finished_rows_and_the_partial_case(registered: None,
                                                                  tmp_path: Path) -> None:
    samples, warmup = 30, 1
    at = _calls_per_case(samples, warmup) + 2 + warmup + 7  # the 7th sample of the second case
    out = tmp_path / "r.json"
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(Interrupted) as info:
        run(RunConfig(runners=("bb-sigint",), cases=TWO_CASES, samples=samples, warmup=warmup,
                      out=out, runner_options={"bb-sigint": {"at": at}}))
    assert info.value.exit_code == 130 and info.value.path == out
    assert signal.getsignal(signal.SIGINT) is before  # the handler is put back
    receipt = load_receipt(out)
    assert receipt["complete"] is False and receipt["interrupted"] is True
    assert "SIGINT" in receipt["interrupt_reason"]
    done, partial = receipt["results"]
    assert done["case"] == "invoice" and done["status"] == "valid" and done["summary"]["n"] == samples
    assert partial["case"] == "outage" and partial["partial"] is True and partial["status"] == "invalid"
    n = partial["summary"]["n"]
    assert 1 <= n < samples and len(partial["samples_ns"]) == n
    assert all(len(v) == n for v in partial["stages_ns"].values())
    assert partial["reasons"][0].startswith("partial: interrupted by SIGINT")


def test_second_sigint_stops_at_once_and_keeps_finished_rows(registered: None, tmp_path: Path) -> None:
    samples, warmup = 20, 1
    at = _calls_per_case(samples, warmup) + 2 + warmup + 3
    out = tmp_path / "r.json"
    with pytest.raises(Interrupted):
        run(RunConfig(runners=("bb-sigint",), cases=TWO_CASES, samples=samples, warmup=warmup,
                      out=out, runner_options={"bb-sigint": {"at": at, "times": 2}}))
    receipt = load_receipt(out)
    assert receipt["complete"] is False and receipt["interrupted"] is True
    assert [r["case"] for r in receipt["results"]] == ["invoice"]  # the cut case is dropped
    assert receipt["results"][0]["summary"]["n"] == samples


def _benchbox(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "benchbox", *args], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_for_rows(out: Path, proc: subprocess.Popen[bytes], rows: int,
                   timeout: float = 300.0) -> dict[str, Any]:
    """Poll the receipt until it holds ``rows`` results; every read must load (atomic writes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if out.exists():
            receipt = load_receipt(out)  # raises if a reader ever sees a torn file
            if len(receipt["results"]) >= rows:
                return receipt
        if proc.poll() is not None:
            raise AssertionError(f"benchbox exited early ({proc.returncode}): "
                                 f"{proc.stderr.read().decode() if proc.stderr else ''}")
        time.sleep(0.05)
    raise AssertionError("no result was written in time")


def _signal_after_first_row(tmp_path: Path, sig: int, samples: int) -> tuple[int, bytes, dict, Path]:
    """Run benchbox and send ``sig`` once its first result is on disk.

    Returns the exit code, stderr, the receipt as first seen, and its path.
    """
    out = tmp_path / "r.json"
    proc = _benchbox(tmp_path, "run", "--runner", "torch-eager", "--samples", str(samples),
                     "--warmup", "1", "--out", str(out))
    try:
        seen = _wait_for_rows(out, proc, 1)
        assert proc.poll() is None, "the run ended before the signal could be sent"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err or b"", seen, out


def test_sigkill_after_the_first_result_leaves_it_intact(tmp_path: Path) -> None:
    samples = 200
    code, _, seen, out = _signal_after_first_row(tmp_path, signal.SIGKILL, samples)
    assert code == -signal.SIGKILL
    receipt = load_receipt(out)
    assert receipt["complete"] is False and "interrupted" not in receipt
    first = receipt["results"][0]
    assert first == seen["results"][0]  # the row is exactly what was written, intact
    assert first["status"] == "valid" and first["summary"]["n"] == samples
    assert len(first["samples_ns"]) == samples
    assert all(len(v) == samples for v in first["stages_ns"].values())
    assert len(receipt["results"]) < len(receipt["task"]["cases"])  # it was killed part way


def test_sigint_exits_130_with_one_line_and_an_incomplete_receipt(tmp_path: Path) -> None:
    code, err, seen, out = _signal_after_first_row(tmp_path, signal.SIGINT, 200)
    assert code == 130
    text = err.decode()
    assert "Traceback" not in text
    assert text.rstrip().splitlines()[-1].startswith("benchbox: interrupted (SIGINT)")
    receipt = load_receipt(out)
    assert receipt["complete"] is False and receipt["interrupted"] is True
    assert receipt["results"][0] == seen["results"][0]
    for row in receipt["results"][1:]:  # the case cut by the interrupt, if it had begun sampling
        assert row["partial"] is True and row["status"] == "invalid" and row["summary"]["n"] >= 1


# -- atomic writes ---------------------------------------------------------------------------

def test_write_receipt_replaces_atomically_and_leaves_no_temp_files(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "r.json"
    receipt = json.loads((Path(__file__).parent / "golden" / "receipt-v1.json").read_text())
    write_receipt(out, receipt)
    receipt["results"] = receipt["results"][:1]
    write_receipt(out, receipt)
    assert load_receipt(out)["results"] == receipt["results"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.json"]
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_write_receipt_keeps_values_json_cannot_hold(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    receipt = json.loads((Path(__file__).parent / "golden" / "receipt-v1.json").read_text())
    receipt["results"][0]["runner_report"]["odd"] = {"nan": float("nan"), "np": np.float32(1.5),
                                                      "arr": np.arange(3), "path": Path("/x")}
    write_receipt(out, receipt)
    odd = load_receipt(out)["results"][0]["runner_report"]["odd"]
    assert odd == {"nan": None, "np": 1.5, "arr": [0, 1, 2], "path": "/x"}


def test_unwritable_receipt_path_is_one_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UsageError, match="cannot write receipt"):
        write_receipt(blocker / "r.json", {"schema_version": 1})


# -- bad input: one line, exit 2 -------------------------------------------------------------

def _one_line_exit_2(args: list[str]) -> str:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, (args, result.output)
    assert isinstance(result.exception, SystemExit), (args, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchbox: error: "), (args, result.stderr)
    assert "Traceback" not in result.output
    return lines[0]


GOLDEN = Path(__file__).parent / "golden" / "receipt-v1.json"


def _golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


def _extra(text: str, literal: str) -> bytes:
    """The receipt text with one more top-level field holding ``literal`` as written."""
    assert '"schema_version": 1' in text
    return text.replace('"schema_version": 1', f'"schema_version": 1, "x": {literal}', 1).encode()


def _bad_receipts() -> dict[str, bytes]:
    text = GOLDEN.read_text()
    cases: dict[str, bytes] = {
        "truncated": text[: len(text) // 2].encode(),
        "empty": b"",
        "not-json": b"\x00\xff\xfe garbage \x89PNG",
        "top-level-list": b"[1, 2, 3]",
        "nan": text.replace('"complete": true', '"complete": NaN', 1).encode(),
        "infinity": _extra(text, "-Infinity"),
        "overflowing-float": _extra(text, "1e999"),
        "huge-int-literal": _extra(text, "1" + "0" * 5000),
        "deep-nesting": b'{"schema_version": 1, "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
        "moderate-nesting": b'{"schema_version": 1, "x": ' + b"[" * 500 + b"]" * 500 + b"}",
        "invalid-utf8": text.encode()[:100] + b"\xc3\x28" + text.encode()[100:],
    }
    mutations = {
        "newer-schema": lambda r: r.__setitem__("schema_version", 99),
        "schema-zero": lambda r: r.__setitem__("schema_version", 0),
        "schema-string": lambda r: r.__setitem__("schema_version", "1"),
        "schema-bool": lambda r: r.__setitem__("schema_version", True),
        "no-contract": lambda r: r.pop("contract"),
        "no-results": lambda r: r.pop("results"),
        "results-string": lambda r: r.__setitem__("results", "none"),
        "row-not-object": lambda r: r["results"].__setitem__(0, 7),
        "row-no-runner": lambda r: r["results"][0].pop("runner"),
        "bad-status": lambda r: r["results"][0].__setitem__("status", "great"),
        "sample-string": lambda r: r["results"][0]["samples_ns"].__setitem__(0, "12"),
        "sample-negative": lambda r: r["results"][0]["samples_ns"].__setitem__(0, -1),
        "sample-float": lambda r: r["results"][0]["samples_ns"].__setitem__(0, 1.5),
        "sample-too-big": lambda r: r["results"][0]["samples_ns"].__setitem__(0, 2**70),
        "unknown-stage": lambda r: r["results"][0]["stages_ns"].__setitem__("warp", [1]),
        "summary-string": lambda r: r["results"][0]["summary"].__setitem__("p50_ns", "fast"),
        "ci-triple": lambda r: r["results"][0]["summary"].__setitem__("p50_ci_ns", [1, 2, 3]),
        "reasons-ints": lambda r: r["results"][0].__setitem__("reasons", [1]),
        "contract-hash-int": lambda r: r["contract"].__setitem__("hash", 5),
        "contract-no-stages": lambda r: r["contract"].__setitem__("stages", []),
        "task-name-null": lambda r: r["task"].__setitem__("name", None),
        "complete-string": lambda r: r.__setitem__("complete", "yes"),
        "comparison-ratio-string": lambda r: r.__setitem__(
            "comparisons", {"baseline": "a", "rows": [{"runner": "a", "case": "b", "p50_ratio": "x"}]}),
    }
    for name, mutate in mutations.items():
        r = _golden()
        mutate(r)
        cases[name] = json.dumps(r).encode()
    return cases


BAD_RECEIPTS = _bad_receipts()


@pytest.mark.parametrize("name", sorted(BAD_RECEIPTS))
def test_bad_receipt_is_one_line_exit_2(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.json"
    path.write_bytes(BAD_RECEIPTS[name])
    line = _one_line_exit_2(["show", str(path)])
    assert str(path) in line
    if name == "newer-schema":
        assert "newer than this benchbox understands" in line
    with pytest.raises(UsageError):
        load_receipt(path)


def test_receipt_files_that_are_not_files(tmp_path: Path) -> None:
    _one_line_exit_2(["show", str(tmp_path / "missing.json")])
    _one_line_exit_2(["show", str(tmp_path)])
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert "not a regular file" in _one_line_exit_2(["show", str(fifo)])  # and does not block


def test_huge_receipt_file_is_refused_before_reading(tmp_path: Path) -> None:
    from benchbox.receipts.io import MAX_RECEIPT_BYTES

    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:  # sparse: no disk used
        f.truncate(MAX_RECEIPT_BYTES + 1)
    assert "limit" in _one_line_exit_2(["show", str(huge)])


def test_large_arrays_within_the_limit_load(tmp_path: Path) -> None:
    r = _golden()
    n = 300_000
    r["results"][0]["samples_ns"] = list(range(n))
    path = tmp_path / "big.json"
    path.write_text(json.dumps(r))
    assert len(load_receipt(path)["results"][0]["samples_ns"]) == n


def test_bad_contract_files_are_one_line_exit_2(tmp_path: Path) -> None:
    good = (Path(benchbox.__file__).parent / "contracts" / "builtin" / "model_io_wall.toml").read_text()
    bad = {
        "malformed.toml": "name = 'x\nstages = [",
        "not-contiguous.toml": good.replace('["h2d", "compute", "d2h"]', '["h2d", "d2h"]'),
        "device-host-stage.toml": good.replace('clock = "host"', 'clock = "device"').replace(
            '["h2d", "compute", "d2h"]', '["parse", "preprocess"]'),
        "huge-int.toml": good.replace("version = 1", "version = 1" + "0" * 5000),
        "deep.toml": "x = " + "[" * 50_000 + "]" * 50_000,
        "wrong-type.toml": good.replace("version = 1", 'version = "one"'),
        "first-mismatch.toml": good + '\nfirst = "parse"\n',
        "empty.toml": "",
    }
    assert '"h2d", "compute", "d2h"' in good and "version = 1" in good and 'clock = "host"' in good
    for name, text in bad.items():
        path = tmp_path / name
        path.write_text(text)
        _one_line_exit_2(["contracts", str(path)])
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00name")
    _one_line_exit_2(["contracts", str(binary)])
    _one_line_exit_2(["contracts", str(tmp_path / "missing.toml")])
    _one_line_exit_2(["contracts", "x" * 5000])
    _one_line_exit_2(["contracts", "bad\x00name"])
    # through `run` too, before anything heavy happens
    _one_line_exit_2(["run", "--contract", str(tmp_path / "not-contiguous.toml"),
                      "--out", str(tmp_path / "r.json")])


TASK_MODULES = {
    "missing_factory": "X = 1\n",
    "raises_on_import": "raise RuntimeError('configuration file not found')\n",
    "syntax_error": "def broken(:\n",
    "returns_non_task": "def make(**kw):\n    return object()\n",
    "factory_raises": "def make(**kw):\n    raise RuntimeError('weights missing')\n",
    "abstract_task": ("from benchbox.tasks import Task\n"
                      "class Half(Task):\n    name = 'half'\n"
                      "def make(**kw):\n    return Half(**kw)\n"),
    "no_cases": ("from benchbox.tasks.decision.task import DecisionTask\n"
                 "class NoCases(DecisionTask):\n    def cases(self):\n        return []\n"
                 "def make(**kw):\n    return NoCases(**kw)\n"),
    "bad_request": ("from benchbox.tasks import Case\n"
                    "from benchbox.tasks.decision.task import DecisionTask\n"
                    "class BadRequest(DecisionTask):\n"
                    "    def cases(self):\n"
                    "        good = super().cases()[0].request\n"
                    "        return [Case('ok', good), Case('broken', b'{\"document\": 1}')]\n"
                    "def make(**kw):\n    return BadRequest(**kw)\n"),
}


@pytest.mark.parametrize("kind", sorted(TASK_MODULES))
def test_bad_task_is_one_line_exit_2(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = f"bbx_task_{kind}_{os.getpid()}"
    (tmp_path / f"{module}.py").write_text(TASK_MODULES[kind])
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    line = _one_line_exit_2(["run", "--task", f"{module}:make", "--runner", "torch-eager",
                             "--out", str(tmp_path / "r.json")])
    if kind == "bad_request":
        assert "case broken: invalid request" in line


def test_bad_task_spec_and_requests(tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / "r.json")]
    _one_line_exit_2(["run", "--task", "no_such_module_anywhere:make", *out])
    _one_line_exit_2(["run", "--task", "nonsense", *out])
    _one_line_exit_2(["run", "--size", "galactic", *out])
    _one_line_exit_2(["run", "--case", "no-such-case", "--runner", "torch-eager", *out])
    _one_line_exit_2(["run", "--runner", "no-such-runner", *out])
    _one_line_exit_2(["run", "--samples", "0", *out])


def test_click_usage_errors_are_one_line_exit_2() -> None:
    for args in (["run", "--no-such-option"], ["no-such-command"], ["run", "--samples", "many"],
                 ["show"], ["run", "--dtype", "float8"]):
        line = _one_line_exit_2(args)
        assert "--help" in line


def test_unexpected_exception_in_a_command_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    import benchbox.receipts as receipts

    def explode(path: Any) -> Any:
        raise ZeroDivisionError("division by zero deep inside a loader")

    monkeypatch.setattr(receipts, "load_receipt", explode)
    line = _one_line_exit_2(["show", str(GOLDEN)])
    assert "ZeroDivisionError: division by zero deep inside a loader" in line


# -- migrations ------------------------------------------------------------------------------

def test_golden_v1_receipt_keeps_loading_and_rendering() -> None:
    from benchbox.render import results_table

    r = load_receipt(GOLDEN)
    assert r["schema_version"] == 1 and r["results"]
    assert "invoice" in results_table(r)


def test_migration_chain_runs_in_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from benchbox.receipts import io

    seen: list[int] = []

    def v1_to_v2(r: dict[str, Any]) -> dict[str, Any]:
        seen.append(1)
        return {**r, "schema_version": 2, "settings": {**r.get("settings", {}), "migrated": [1]}}

    def v2_to_v3(r: dict[str, Any]) -> dict[str, Any]:
        seen.append(2)
        return {**r, "schema_version": 3,
                "settings": {**r["settings"], "migrated": r["settings"]["migrated"] + [2]}}

    monkeypatch.setattr(io, "SCHEMA_VERSION", 3)
    monkeypatch.setitem(io.MIGRATIONS, 1, v1_to_v2)
    monkeypatch.setitem(io.MIGRATIONS, 2, v2_to_v3)
    r = load_receipt(GOLDEN)
    assert seen == [1, 2] and r["schema_version"] == 3 and r["settings"]["migrated"] == [1, 2]


def test_broken_or_missing_migrations_are_usage_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchbox.receipts import io

    monkeypatch.setattr(io, "SCHEMA_VERSION", 2)
    with pytest.raises(UsageError, match="no migration from version 1"):
        load_receipt(GOLDEN)
    monkeypatch.setitem(io.MIGRATIONS, 1, lambda r: r["no such key"])
    with pytest.raises(UsageError, match="cannot migrate receipt from schema_version 1: KeyError"):
        load_receipt(GOLDEN)
    monkeypatch.setitem(io.MIGRATIONS, 1, lambda r: r)  # forgets to advance the version
    with pytest.raises(UsageError, match="did not advance"):
        load_receipt(GOLDEN)


# -- safety: data only, no code from receipts or contracts, no network -----------------------

def test_package_source_never_evaluates_or_unpickles() -> None:
    root = Path(benchbox.__file__).parent
    banned_modules = {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "yaml"}
    banned_calls = {"eval", "exec", "__import__"}
    # modules the package imports by name: only from fixed tables, a runner registry, or --task
    import_module_allowed = {"tasks/__init__.py", "runners/__init__.py", "runners/tensorrt.py",
                             "plots/__init__.py"}
    problems = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
            if isinstance(node, ast.Import):
                problems += [f"{rel}: import {a.name}" for a in node.names
                             if a.name.split(".")[0] in banned_modules]
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] in banned_modules:
                    problems.append(f"{rel}: from {node.module} import")
            elif isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Name) and f.id in banned_calls:
                    problems.append(f"{rel}: {f.id}()")
                if isinstance(f, ast.Attribute) and f.attr in ("load", "loads") and \
                        isinstance(f.value, ast.Name) and f.value.id in ("pickle", "yaml", "torch"):
                    problems.append(f"{rel}: {f.value.id}.{f.attr}()")
                if isinstance(f, ast.Attribute) and f.attr == "import_module" and \
                        rel not in import_module_allowed:
                    problems.append(f"{rel}: import_module outside the registries")
    assert problems == []


def test_loading_a_receipt_runs_nothing_from_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = tmp_path / "ran"
    module = f"bbx_evil_{os.getpid()}"
    (tmp_path / f"{module}.py").write_text(f"open({str(sentinel)!r}, 'w').write('x')\n"
                                           "def make(**kw):\n    raise SystemExit(9)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    strange = [f"__import__('os').system('touch {sentinel}')", f"{module}:make", "{{7*7}}", "${HOME}",
               "!!python/object/apply:os.system ['true']", "\u202e\u0000\ud7ff"]
    r = _golden()
    r["task"]["name"] = f"{module}:make"
    r["contract"]["source"] = f"{module}.py"
    r["results"][0]["runner"] = f"{module}:Runner"
    r["results"][0]["reasons"] = strange
    r["environment"]["note"] = strange
    path = tmp_path / "strange.json"
    path.write_text(json.dumps(r))
    loaded = load_receipt(path)
    assert loaded["results"][0]["reasons"] == strange  # kept as plain strings
    result = CliRunner().invoke(main, ["show", str(path)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["diff", str(path), str(path)])
    assert result.exit_code in (0, 1, 2) and isinstance(result.exception, SystemExit | None)
    assert not sentinel.exists() and module not in sys.modules


def test_run_makes_no_network_calls_with_socket_mocked(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    attempts: list[str] = []

    def refuse(name: str) -> Any:
        def _refuse(*args: Any, **kwargs: Any) -> Any:
            attempts.append(name)
            raise OSError(f"network use during a benchbox run: {name}")
        return _refuse

    # a mock of the network: every way to open a connection or resolve a name is refused
    monkeypatch.setattr(socket, "socket", refuse("socket"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    out = tmp_path / "r.json"
    outcome = run(RunConfig(runners=("torch-eager",), cases=("invoice",), samples=5, warmup=1, out=out))
    assert outcome.ok and load_receipt(out)["complete"] is True
    assert attempts == []
