"""``--repeats K --fresh-processes``: each round in a worker process of its own, joined as rounds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchbox.errors import FieldError, Setting, UsageError
from benchbox.receipts import load_receipt
from benchbox.run import RunConfig, run
from benchbox.run.workers import rounds_folder
from tests.support import REPO, loaded, one_line_exit_2

TASK = "tests.diff_tasks:factory"


def _cfg(tmp_path: Path, **kw: object) -> RunConfig:
    fields = {"task": TASK, "runners": ("torch-eager",), "samples": 12, "repeats": 3, "warmup": 1,
              "fresh_processes": True, "task_options": {"sleep_ms": 1}, "out": tmp_path / "r.json", **kw}
    return RunConfig(**fields)  # type: ignore[arg-type]


def test_each_round_runs_in_a_fresh_process_and_the_rounds_join_into_one_receipt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pids = tmp_path / "pids"
    monkeypatch.setenv("BENCHBOX_TEST_PID_FILE", str(pids))
    lines: list[str] = []
    out = run(_cfg(tmp_path), progress=lines.append)
    seen = pids.read_text().split()
    assert len(seen) == 3 and len(set(seen)) == 3 and str(os.getpid()) not in seen  # three fresh processes
    r = load_receipt(out.path)
    assert out.path == tmp_path / "r.json" and r.is_complete and not r.interrupted
    assert r.settings["repeats"] == 3 and r.settings["samples"] == 12
    assert r.settings["fresh_processes"] is True
    assert [c["receipt"] for c in r.settings["combined_from"]] == [f"r.rounds/round-{i}.json"
                                                                   for i in (1, 2, 3)]
    assert len(r.results) == 2 and all(row.round_sizes == (4, 4, 4) for row in r.results)
    assert all(row.round_process == (0, 1, 2) for row in r.results)  # three replications
    assert [str(p.pid) for p in r.processes] == seen and all(p.control for p in r.processes)
    assert all(len(row.samples_ns) == 12 and row.status == "valid" for row in r.results)
    assert r.comparisons is not None
    for i in (1, 2, 3):  # every round's own receipt is kept, one round of 4 samples
        one = load_receipt(tmp_path / "r.rounds" / f"round-{i}.json")
        assert one.settings["repeats"] == 1 and [len(row.samples_ns) for row in one.results] == [4, 4]
    assert sum(1 for line in lines if line.startswith("round 3 of 3 (fresh process, 4 samples)")) >= 1


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh-processes", "in-process"])
def test_a_settle_phase_with_rounds_settles_every_process_once_per_case(tmp_path: Path, fresh: bool) -> None:
    """Fresh processes: each (runner, case) settles again in every round's process, since a new
    process starts from an idle device. In process: once, before its first round."""
    lines: list[str] = []
    r = load_receipt(run(_cfg(tmp_path, repeats=2, settle_s=0.1, fresh_processes=fresh),
                         progress=lines.append).path)
    settled = [ln for ln in lines if "settled with" in ln and "over 0.1 s" in ln]
    assert len(settled) == (4 if fresh else 2), lines  # two cases, two processes or one
    for case in ("alpha", "beta"):
        assert sum(f"× {case}: settled" in ln for ln in settled) == (2 if fresh else 1), settled
    assert r.settings["settle_s"] == 0.1 and r.settings["repeats"] == 2
    assert all(row.round_sizes == (6, 6) and row.status == "valid" for row in r.results)


def test_several_contracts_in_fresh_processes_join_round_by_round_into_one_receipt_each(
        tmp_path: Path) -> None:
    contracts = ("public_task_call_wall", "model_io_wall")
    out = run(_cfg(tmp_path, repeats=2, contracts=contracts))
    assert [o.path.name for o in out.all] == [f"r.{c}.json" for c in contracts]
    folder = tmp_path / "r.rounds"  # named after the run's receipt path, as for one contract
    assert sorted(p.name for p in folder.glob("round-*.json")) == sorted(
        f"round-{i}.{c}.json" for i in (1, 2) for c in contracts)
    for c in contracts:
        r = load_receipt(tmp_path / f"r.{c}.json")
        assert r.is_complete and r.contract.name == c
        assert all(row.round_sizes == (6, 6) and row.status == "valid" for row in r.results)
        assert [x["receipt"] for x in r.settings["combined_from"]] == [f"r.rounds/round-{i}.{c}.json"
                                                                       for i in (1, 2)]


def test_uneven_rounds_join(tmp_path: Path) -> None:
    r = load_receipt(run(_cfg(tmp_path, samples=7, repeats=2)).path)
    assert [row.round_sizes for row in r.results] == [(4, 3), (4, 3)]
    assert r.settings["samples"] == 7 and r.settings["sampling"]["samples"] == 7


def test_fresh_processes_need_a_task_found_by_name(tmp_path: Path) -> None:
    from tests.diff_tasks import factory

    with pytest.raises(FieldError, match="finds its task and runners by name.*fresh_processes = false") as e:
        run(_cfg(tmp_path), task=factory())
    assert e.value.field == "fresh_processes" and not (tmp_path / "r.json").exists()
    line = one_line_exit_2(["run", "--repeats", "2", "--gc", "sometimes", "--out", str(tmp_path / "x.json")])
    assert line.startswith("benchbox: error:") and "--gc" in line


def test_repeats_run_in_fresh_processes_by_default(tmp_path: Path) -> None:
    cfg = RunConfig(repeats=3)
    assert cfg.fresh_processes and cfg.in_workers
    assert not RunConfig(repeats=1).in_workers and not RunConfig(repeats=3, fresh_processes=False).in_workers


def test_the_configuration_reaches_a_worker_as_json_and_back_unchanged(tmp_path: Path) -> None:
    import json

    cfg = _cfg(tmp_path, contracts=("public_task_call_wall", "model_io_wall"), cases=("alpha",),
               runner_options={"torch-eager": {"x": 1}}, labels={"k": "v"}, command=("benchbox", "run"))
    assert RunConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg
    with pytest.raises(FieldError, match="must be JSON data") as e:
        run(_cfg(tmp_path, task_options={"sleep_ms": 1, "where": object()}))
    assert e.value.field == "fresh_processes" and not (tmp_path / "r.rounds").exists()


def test_a_failed_round_ends_the_rounds_and_keeps_the_earlier_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHBOX_TEST_PID_FILE", str(tmp_path / "pids"))
    monkeypatch.setenv("BENCHBOX_TEST_FAIL_LOAD", "1")  # the second round's task fails to load
    with pytest.raises(UsageError, match=r"^round 2 failed: .*fails on purpose.*incomplete receipt") as e:
        run(_cfg(tmp_path))
    assert "r.rounds/round-2.out" in str(e.value)
    r = load_receipt(tmp_path / "r.json")
    assert not r.is_complete and r.settings["fresh_processes"] is True
    assert [len(row.samples_ns) for row in r.results] == [4, 4]  # round 1, whole
    assert not (tmp_path / "r.rounds" / "round-3.json").exists()  # no round after the failed one


def test_a_task_that_cannot_load_is_one_error_and_no_receipt(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHBOX_TEST_PID_FILE", str(tmp_path / "pids"))
    monkeypatch.setenv("BENCHBOX_TEST_FAIL_LOAD", "0")
    with pytest.raises(UsageError, match="fails on purpose") as e:
        run(_cfg(tmp_path))
    assert not (tmp_path / "r.json").exists()
    assert e.value.settings == (Setting("task", TASK),)  # from the worker, for the flag it names
    assert f"task={TASK}: this load fails" in str(e.value)


def test_existing_rounds_are_not_replaced_without_overwrite(tmp_path: Path) -> None:
    folder = rounds_folder(tmp_path / "r.json")
    folder.mkdir()
    (folder / "round-2.json").write_text("{}")
    with pytest.raises(FieldError, match="round-2.json, a round of an earlier run"):
        run(_cfg(tmp_path))
    assert (folder / "round-2.json").read_text() == "{}" and not (tmp_path / "r.json").exists()
    assert run(_cfg(tmp_path, overwrite=True)).receipt.is_complete


def test_a_rounds_folder_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    folder = rounds_folder(tmp_path / "r.json")
    folder.write_text("not a folder")
    with pytest.raises(FieldError, match="is not a directory") as e:
        run(_cfg(tmp_path))
    assert e.value.field == "out" and folder.read_text() == "not a folder"
    folder.unlink()
    folder.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(FieldError, match="is not a directory"):
        run(_cfg(tmp_path))
    assert not any((tmp_path / "elsewhere").iterdir())


def _cli(tmp_path: Path, *args: str, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "benchbox", "run", "--task", TASK,
                             "--runner", "torch-eager", "--warmup", "1", "--fresh-processes",
                             "--out", str(tmp_path / "r.json"), *args],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO), **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_until(ok: object, proc: subprocess.Popen[bytes], timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ok():  # type: ignore[operator]
                return
        except Exception:  # noqa: BLE001 - a receipt being written: look again
            pass
        assert proc.poll() is None, f"benchbox exited early ({proc.returncode})"
        time.sleep(0.05)
    raise AssertionError("timed out")


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie waiting to be reaped has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_reaches_the_round_in_progress_and_the_rounds_so_far_are_joined(
        tmp_path: Path, sig: int, code: int) -> None:
    proc = _cli(tmp_path, "--samples", "600", "--repeats", "2", "--task-option", "sleep_ms=10")
    second = tmp_path / "r.rounds" / "round-2.json"
    try:
        _wait_until(lambda: loaded(tmp_path / "r.rounds" / "round-1.json")["complete"] and second.exists(),
                    proc)
        time.sleep(1.0)  # round 2 is preparing or sampling its first case
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code
    lines = [x for x in err.decode().splitlines() if x.startswith("benchbox:")]
    assert lines and "interrupted" in lines[-1] and "in round 2 of 2" in lines[-1], err.decode()[-2000:]
    two = loaded(second)  # the worker stopped as a run stops: its receipt says so
    assert two["interrupted"] is True and two["complete"] is False
    r = loaded(tmp_path / "r.json")  # round 1, whole, marked interrupted
    assert r["interrupted"] is True and r["complete"] is False
    assert [len(x["samples_ns"]) for x in r["results"]] == [300, 300]


def _gone_within(pid: int, seconds: float) -> float | None:
    """Seconds until ``pid`` ended, or None if it still runs after ``seconds``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if not _alive(pid):
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def _kill_worker(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _kill_parent_and_time_its_worker(proc: subprocess.Popen[bytes], pids: Path,
                                     ready: object) -> float | None:
    """Once ``ready()``, SIGKILL the run (the parent) and wait up to 20 s for its worker to end:
    the seconds it took, or None if it outlived the parent. Nothing is left running."""
    try:
        _wait_until(ready, proc)
        [worker] = pids.read_text().split()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return _gone_within(int(worker), 20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if pids.exists():
            _kill_worker(int(pids.read_text().split()[0]))


def test_a_killed_parents_worker_stops_and_keeps_what_it_measured(tmp_path: Path) -> None:
    """A round of 2 × 3,000 samples of 5 ms takes 30 s; the parent is SIGKILLed as it starts
    sampling: the worker stops within seconds (its parent-death signal), as a run stops."""
    pids = tmp_path / "pids"
    proc = _cli(tmp_path, "--samples", "6000", "--repeats", "2", "--task-option", "sleep_ms=5",
                "--case-time-limit", "0", BENCHBOX_TEST_PID_FILE=str(pids))
    first = tmp_path / "r.rounds" / "round-1.json"
    took = _kill_parent_and_time_its_worker(proc, pids, first.exists)
    assert took is not None, "the worker outlived its SIGKILLed parent by 20 s"
    r = loaded(first)  # what it measured is kept, marked as an interrupted run's
    assert r["complete"] is False and r["interrupted"] is True
    assert not (tmp_path / "r.json").exists()  # the rounds were never joined: `benchbox combine` can


def test_a_worker_hanging_in_task_code_dies_with_its_parent(tmp_path: Path) -> None:
    """Task code that hangs and swallows exceptions, with no case time limit: the worker still
    ends once its parent is SIGKILLed."""
    pids, mark = tmp_path / "pids", tmp_path / "hanging"
    proc = subprocess.Popen([sys.executable, "-m", "benchbox", "run", "--task", "tests.hostile_tasks:factory",
                             "--runner", "torch-eager", "--warmup", "1", "--fresh-processes",
                             "--repeats", "2", "--samples", "4", "--case-time-limit", "0",
                             "--task-option", "hang_in=parse", "--task-option", "swallow=true",
                             "--task-option", f"mark={mark}",
                             "--out", str(tmp_path / "r.json")],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO),
                                               "BENCHBOX_TEST_PID_FILE": str(pids)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = _kill_parent_and_time_its_worker(proc, pids, mark.exists)
    assert took is not None, "a hanging worker outlived its SIGKILLed parent"


def test_a_worker_that_ignores_sigterm_is_killed_when_its_lifeline_closes() -> None:
    """The lifeline alone (the parent's end closed, as its death closes it): a worker that
    ignores SIGTERM is killed PARENT_GONE_GRACE_S seconds later."""
    from benchbox.run.lifeline import LIFELINE_VARIABLE, PARENT_GONE_GRACE_S, PARENT_VARIABLE

    r, w = os.pipe()
    code = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "from benchbox.run.lifeline import die_with_parent\ndie_with_parent()\n"
            "print('ready', flush=True)\ntime.sleep(600)\n")
    child = subprocess.Popen([sys.executable, "-c", code], pass_fds=(r,), stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO), LIFELINE_VARIABLE: str(r),
                                  PARENT_VARIABLE: str(os.getpid())})
    os.close(r)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        assert child.poll() is None  # the lifeline holds while its other end is open
        os.close(w)
        t0 = time.monotonic()
        child.wait(timeout=PARENT_GONE_GRACE_S + 20)
        took = time.monotonic() - t0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL and took >= PARENT_GONE_GRACE_S - 0.5


def test_a_worker_without_a_parent_to_die_with_runs_as_before() -> None:
    """Outside a fresh-processes run (no parent named), the worker arms nothing."""
    code = ("import os, threading\nfrom benchbox.run.lifeline import die_with_parent\n"
            "os.environ.pop('BENCHBOX_WORKER_PARENT', None)\ndie_with_parent()\n"
            "print(sorted(t.name for t in threading.enumerate()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "['MainThread']", out.stderr
