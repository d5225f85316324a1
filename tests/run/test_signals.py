"""Signals to a real `benchbox run` process: SIGKILL and SIGINT keep every finished result."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support import loaded


def _benchbox(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "benchbox", *args], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_for_rows(out: Path, proc: subprocess.Popen[bytes], rows: int,
                   timeout: float = 300.0) -> dict[str, Any]:
    """Poll the receipt until it holds ``rows`` results; every read must load (atomic writes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if out.exists():
            receipt = loaded(out)  # raises if a reader ever sees a torn file
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
    receipt = loaded(out)
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
    receipt = loaded(out)
    assert receipt["complete"] is False and receipt["interrupted"] is True
    assert receipt["results"][0] == seen["results"][0]
    for row in receipt["results"][1:]:  # the case cut by the interrupt, if it had begun sampling
        assert row["partial"] is True and row["status"] == "invalid" and row["summary"]["n"] >= 1
