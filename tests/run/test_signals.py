"""Signals to a real `benchbox run` process: SIGKILL, SIGINT and SIGTERM keep every finished result."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, loaded


def _env(**extra: str) -> dict[str, str]:
    """This tree's benchbox in the child, whatever directory it runs in."""
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def _benchbox(tmp_path: Path, *args: str, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "benchbox", *args], cwd=tmp_path, env=_env(**env),
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


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_sigint_and_sigterm_exit_with_one_line_and_an_incomplete_receipt(tmp_path: Path, sig: int,
                                                                         code: int) -> None:
    got, err, seen, out = _signal_after_first_row(tmp_path, sig, 200)
    assert got == code
    text = err.decode()
    assert "Traceback" not in text
    name = signal.Signals(sig).name
    assert text.rstrip().splitlines()[-1].startswith(f"benchbox: interrupted ({name})")
    receipt = loaded(out)
    assert receipt["complete"] is False and receipt["interrupted"] is True
    assert receipt["results"][0] == seen["results"][0]
    for row in receipt["results"][1:]:  # the case cut by the interrupt, if it had begun sampling
        assert row["partial"] is True and row["status"] == "invalid" and row["summary"]["n"] >= 1


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_sigterm_during_a_compile_leaves_no_compiler_process_and_no_temporary_folder(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "r.json"
    proc = _benchbox(tmp_path, "run", "--runner", "torch-compile", "--case", "invoice", "--samples", "5",
                     "--warmup", "1", "--out", str(out), TMPDIR=str(tmp))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(
        b.decode(errors="replace") for b in iter(proc.stderr.readline, b"")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 300
        while not seen and time.monotonic() < deadline and proc.poll() is None:
            if any("torch-compile: preparing" in line for line in lines):
                seen = _descendants(proc.pid)  # the compiler at work (g++ for the CPU)
            time.sleep(0.02)
        assert seen, f"no compiler process was seen: {''.join(lines)[-2000:]}"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    text = "".join(lines)
    assert code == 143, text[-2000:]
    assert "Traceback" not in text
    assert text.rstrip().splitlines()[-1].startswith("benchbox: interrupted (SIGTERM)")
    receipt = loaded(out)
    assert receipt["interrupted"] is True and receipt["complete"] is False
    time.sleep(1.0)  # a compiler process told to stop has a moment to go
    assert [p for p in seen if _alive(p)] == []
    assert sorted(p.name for p in tmp.glob("benchbox-*")) == []


@pytest.mark.parametrize(("hang", "sig"), [
    (["hang_in=factory"], signal.SIGTERM),  # while the task loads
    (["hang_in=serialize", "at_call=1"], signal.SIGTERM),  # in the first reference call
    # in code run by exec of a string, as torch.compile runs what it generates: the interrupt
    # passes through the exec, and CPython would end the process with SIGINT (-2) on its way out
    (["hang_in=factory", "hang_how=exec"], signal.SIGTERM),
    (["hang_in=factory", "hang_how=exec"], signal.SIGINT),
])
def test_a_signal_while_the_task_loads_or_the_reference_hangs_exits_128_plus_it_with_one_line(
        tmp_path: Path, hang: list[str], sig: signal.Signals) -> None:
    mark = tmp_path / "hanging"
    options = [a for o in [*hang, f"mark={mark}"] for a in ("--task-option", o)]
    proc = _benchbox(tmp_path, "run", "--task", "tests.hostile_tasks:factory", "--runner", "torch-eager",
                     "--samples", "3", "--warmup", "1", *options, "--out", str(tmp_path / "r.json"))
    try:
        deadline = time.monotonic() + 300
        while not mark.exists():
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the task never reached its hang"
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err.decode()
    assert proc.returncode == 128 + sig, text
    assert "Traceback" not in text
    said = [line for line in text.splitlines() if line.startswith("benchbox: ")]  # progress aside
    assert len(said) == 1 and said[0].startswith(f"benchbox: interrupted ({sig.name})"), text
    assert text.rstrip().splitlines()[-1] == said[0]
    if (tmp_path / "r.json").exists():  # the reference phase: the receipt was open
        assert loaded(tmp_path / "r.json")["interrupted"] is True


LIBRARY_CALLER = """
import os, signal, sys, threading, time
from pathlib import Path
from benchbox.run import RunConfig, run
from benchbox.run.interrupt import Interrupted

mark = Path(sys.argv[1])

def interrupt_once_hanging():
    while not mark.exists():
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt_once_hanging, daemon=True).start()
try:
    run(RunConfig(task="tests.hostile_tasks:factory", runners=("torch-eager",), samples=3, warmup=1,
                  task_options={"hang_in": "factory", "hang_how": "exec", "mark": str(mark)},
                  out=Path(sys.argv[2])))
except Interrupted as e:
    print("caught:", e, flush=True)
sys.exit(0)
"""


def test_a_library_caller_that_catches_the_interrupt_decides_its_exit_code(tmp_path: Path) -> None:
    """The signal lands in exec'd code (as in torch.compile) while the task loads; the caller of
    ``run`` catches Interrupted and exits 0, and a `python -m` process must end with that 0."""
    (tmp_path / "caller.py").write_text(LIBRARY_CALLER)
    args = [sys.executable, "-m", "caller", str(tmp_path / "hanging"), str(tmp_path / "r.json")]
    proc = subprocess.run(args, cwd=tmp_path, env=_env(PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}"),
                          capture_output=True, text=True, timeout=300)
    assert "caught: interrupted (SIGINT)" in proc.stdout, proc.stderr
    assert proc.returncode == 0, proc.stderr


def test_an_interrupt_during_the_settle_phase_is_said_as_such(tmp_path: Path) -> None:
    """SIGINT at the settle's fourth call (serialize calls: the two cases' references, alpha's two
    validation calls, then the settle): the settle stops there and says so, not 'settled'."""
    from benchbox.run import RunConfig, run
    from benchbox.run.interrupt import Interrupted

    lines: list[str] = []
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(Interrupted):
            run(RunConfig(task="tests.hostile_tasks:factory", runners=("torch-eager",), samples=5, warmup=1,
                          settle_s=60.0, task_options={"signal_in": "serialize", "at_call": 8},
                          out=tmp_path / "r.json"), progress=lines.append)
    finally:
        signal.signal(signal.SIGINT, previous)
    said = [ln for ln in lines if "settle" in ln]
    assert said == ["torch-eager × alpha: settle stopped by the interrupt after 4 untimed call(s)"], lines
