"""Where a run's receipts go: never replacing what is not a receipt, never another run's rows.

An existing ``--out`` that is not a regular file (a symbolic link, a FIFO, a directory) is
refused before anything is measured; an existing receipt is refused unless ``--overwrite``;
a run on a path another run is writing is refused; default names never collide.
"""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox.cli import main
from benchbox.errors import FieldError
from benchbox.run import RunConfig, run
from tests.support import loaded, one_line_exit_2

QUICK = ["run", "--runner", "torch-eager", "--case", "invoice", "--samples", "3", "--warmup", "1"]


def _quick_config(**kw: object) -> RunConfig:
    return RunConfig(**{"runners": ("torch-eager",), "cases": ("invoice",), "samples": 3, "warmup": 1,
                        **kw})  # type: ignore[arg-type]


def test_a_symlink_out_is_refused_before_measuring_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("not a receipt\n")
    link = tmp_path / "r.json"
    link.symlink_to(target)
    line = one_line_exit_2([*QUICK, "--out", str(link)])  # one line: nothing was measured
    assert "symbolic link" in line and str(link) in line
    assert link.is_symlink() and target.read_text() == "not a receipt\n"


def test_a_fifo_out_is_refused_before_measuring_and_left_alone(tmp_path: Path) -> None:
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    line = one_line_exit_2([*QUICK, "--out", str(fifo)])
    assert "not a regular file" in line and "FIFO" in line
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
def test_the_library_refuses_any_receipt_path_that_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    # two contracts: the second receipt's path (r.model_io_wall.json) is the odd one
    odd = tmp_path / "r.model_io_wall.json"
    if kind == "symlink":
        odd.symlink_to(tmp_path / "elsewhere.json")
    elif kind == "fifo":
        os.mkfifo(odd)
    else:
        odd.mkdir()
    said: list[str] = []
    with pytest.raises(FieldError, match="r.model_io_wall.json") as e:
        run(_quick_config(contracts=("public_task_call_wall", "model_io_wall"), out=tmp_path / "r.json"),
            progress=said.append)
    assert e.value.field == "out" and "--" not in str(e.value)  # the library names the field, not a flag
    assert said == []  # refused before anything else happened
    assert not (tmp_path / "r.public_task_call_wall.json").exists()
    assert not (tmp_path / "elsewhere.json").exists()


def test_a_second_run_on_the_same_out_is_refused_and_the_first_rows_are_kept(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    first = CliRunner().invoke(main, [*QUICK, "--out", str(out)])
    assert first.exit_code == 0, first.output
    before = out.read_bytes()
    assert len(loaded(out)["results"]) == 1
    line = one_line_exit_2([*QUICK, "--case", "outage", "--out", str(out)])
    assert "--overwrite" in line and str(out) in line
    assert out.read_bytes() == before
    with pytest.raises(FieldError) as e:
        run(_quick_config(cases=("outage",), out=out))
    assert e.value.field == "overwrite" and "--" not in str(e.value) and str(out) in str(e.value)
    again = CliRunner().invoke(main, [*QUICK, "--case", "outage", "--out", str(out), "--overwrite"])
    assert again.exit_code == 0, again.output
    assert [r["case"] for r in loaded(out)["results"]] == ["invoice", "outage"]


def test_a_run_on_an_out_another_run_is_writing_is_refused_even_with_overwrite(tmp_path: Path) -> None:
    from benchbox.run.output import lock_receipt_path

    out = tmp_path / "r.json"
    held = lock_receipt_path(out)  # what a run in progress on this path holds
    try:
        line = one_line_exit_2([*QUICK, "--out", str(out), "--overwrite"])
        assert line.startswith("benchbox: error: --out: another benchbox run")
        assert not out.exists()
    finally:
        held.release()
    assert CliRunner().invoke(main, [*QUICK, "--out", str(out)]).exit_code == 0


class _FrozenClock(datetime):
    """Every run of the test starts in the same second."""

    @classmethod
    def now(cls, tz: object = None) -> datetime:  # type: ignore[override]
        return datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_default_names_of_two_runs_in_the_same_second_differ(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import benchbox.receipts.io as io

    monkeypatch.setattr(io, "datetime", _FrozenClock)
    monkeypatch.chdir(tmp_path)
    a = run(_quick_config(cases=("invoice",)))
    b = run(_quick_config(cases=("outage",)))
    assert a.path != b.path
    files = sorted((tmp_path / "receipts").glob("run-*.json"))
    assert [p.name for p in files] == sorted([a.path.name, b.path.name])
    assert [r["case"] for r in loaded(a.path)["results"]] == ["invoice"]
    assert [r["case"] for r in loaded(b.path)["results"]] == ["outage"]
    assert all(p.name.startswith("run-20260102T030405Z") for p in files)


def _disk_full_mock(monkeypatch: pytest.MonkeyPatch, full: Path, once: Path) -> None:
    """fsync of any file under ``full`` fails with ENOSPC once ``once`` exists (a simulated full disk:
    a full disk cannot be made here). Other files sync for real."""
    import errno

    real = os.fsync

    def fsync(fd: int) -> None:
        where = os.readlink(f"/proc/self/fd/{fd}")
        if once.exists() and Path(where).is_relative_to(full):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_disk_full_mock_keeps_the_rows_in_a_fallback_folder_and_says_where(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    out = tmp_path / "out" / "r.json"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    _disk_full_mock(monkeypatch, tmp_path / "out", once=out)
    result = CliRunner().invoke(main, [*QUICK, "--case", "outage", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("benchbox: error: cannot write receipt ") and "disk full" in last
    rescued = list((tmp_path / "tmp").glob("benchbox-rescued-*/r.json"))
    assert len(rescued) == 1 and str(rescued[0].parent) in last
    receipt = loaded(rescued[0])
    assert receipt["complete"] is True
    rows = [(r["case"], r["status"]) for r in receipt["results"]]
    assert rows == [("invoice", "valid"), ("outage", "valid")]
    assert "invoice" in result.stdout and "outage" in result.stdout  # the table
    assert f"receipt written to {rescued[0]}" in result.stdout
    assert loaded(out)["results"] == []  # what the full disk held is still a receipt


def test_disk_full_mock_everywhere_keeps_the_results_in_the_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    out = tmp_path / "r.json"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    _disk_full_mock(monkeypatch, tmp_path, once=out)  # the fallback folder is full too
    result = CliRunner().invoke(main, [*QUICK, "--out", str(out)])
    assert result.exit_code == 1, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("benchbox: error: ") and "only in the table" in last
    assert "invoice" in result.stdout and "valid" in result.stdout
    assert "receipt NOT written" in result.stdout
    assert loaded(out)["results"] == []
    assert not list((tmp_path / "tmp").glob("benchbox-rescued-*"))  # the failed rescue left nothing


def test_disk_full_mock_everywhere_then_sigint_shows_the_results_kept_in_memory_in_the_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The task sends SIGINT in beta's second sample (``serialize`` calls: 1-2 references, 3-4
    validate alpha, 5 its warm-up, 6-10 its samples, 11-12 validate beta, 13 its warm-up)."""
    import signal
    import tempfile

    out = tmp_path / "r.json"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    _disk_full_mock(monkeypatch, tmp_path, once=out)  # the fallback folder is full too
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:  # the command line ignores further signals once interrupted: give pytest its own back
        result = CliRunner().invoke(main, [
            "run", "--task", "tests.hostile_tasks:factory", "--runner", "torch-eager", "--samples", "5",
            "--warmup", "1", "--task-option", "signal_in=serialize", "--task-option", "at_call=15",
            "--out", str(out)])
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    assert result.exit_code == 130, result.output
    assert "Traceback" not in result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("benchbox: interrupted (SIGINT): 2 result(s)") and "memory only" in last, last
    table = result.stdout
    assert "alpha" in table and "valid" in table and "beta" in table, table
    assert loaded(out)["results"] == []  # nothing reached the disk


def test_a_symlink_where_the_log_goes_is_refused_before_measuring_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("not a log\n")
    (tmp_path / "r.log").symlink_to(target)
    line = one_line_exit_2([*QUICK, "--out", str(tmp_path / "r.json")])
    assert "symbolic link" in line and "r.log" in line, line
    assert target.read_text() == "not a log\n"
    assert not (tmp_path / "r.json").exists()  # refused before the receipt was opened


def test_a_fifo_where_the_log_goes_is_refused_before_measuring(tmp_path: Path) -> None:
    """In a child process with a timeout: a run that opened the FIFO would wait for a reader forever."""
    import subprocess
    import sys

    from tests.support import REPO

    os.mkfifo(tmp_path / "r.log")
    done = subprocess.run([sys.executable, "-m", "benchbox", *QUICK, "--out", str(tmp_path / "r.json")],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchbox: error: ") and "FIFO" in lines[0], lines
    assert not (tmp_path / "r.json").exists()


def test_the_log_never_writes_through_a_symlink_or_into_a_fifo_that_appears_during_the_run(
        tmp_path: Path) -> None:
    """Put there after the paths were checked: the log is a convenience and stops, the run goes on.
    The FIFO in a child process with a timeout: opening it for writing would wait for a reader."""
    import subprocess
    import sys

    from tests.support import REPO

    target = tmp_path / "precious.txt"
    target.write_text("not a log\n")
    (tmp_path / "r.log").symlink_to(target)
    code = ("import sys; from pathlib import Path; from benchbox.run.capture import OutputLog\n"
            "log = OutputLog(Path(sys.argv[1]))\n"
            "with log.capture('phase'): print('library noise', file=sys.stderr)\n"
            "print(log.path)\n")
    os.mkfifo(tmp_path / "f.log")
    for name in ("r.log", "f.log"):
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / name)], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.strip() == "None", (name, done.stdout, done.stderr)
    assert target.read_text() == "not a log\n"
    assert stat.S_ISFIFO(os.lstat(tmp_path / "f.log").st_mode)
