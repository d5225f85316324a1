"""benchbox.fileio: the one home of atomic writes, and the writers that use it."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

import benchbox
from benchbox import fileio

PACKAGE = Path(benchbox.__file__).parent


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_write_atomic_replaces_whole_with_a_plain_files_mode_and_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b"old")
    fileio.write_atomic(path, "new ü")
    assert path.read_bytes() == "new ü".encode()
    assert _mode(path) == 0o666 & ~fileio.umask()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_write_atomic_syncs_the_file_and_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    fileio.write_atomic(tmp_path / "a.bin", b"x")
    assert len(synced) == 2 and synced[0].endswith(".tmp") and synced[1] == str(tmp_path)


def test_exclusive_refuses_an_existing_file_and_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    fileio.write_atomic(path, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        fileio.write_atomic(path, b"second", exclusive=True)
    assert path.read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_parents_creates_folders_and_without_it_a_missing_folder_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        fileio.write_atomic(tmp_path / "x" / "a", b"1")
    fileio.write_atomic(tmp_path / "x" / "y" / "a", b"1", parents=True)
    assert (tmp_path / "x" / "y" / "a").read_bytes() == b"1"


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    path.write_bytes(b"old")

    def write(tmp: str) -> None:
        Path(tmp).write_bytes(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        fileio.write_atomic_with(path, write)
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


def test_replace_dir_swaps_a_folder_in_and_removes_the_old_one(tmp_path: Path) -> None:
    out, new = tmp_path / "site", tmp_path / ".site.new"
    out.mkdir()
    (out / "old.html").write_text("old")
    new.mkdir()
    (new / "index.html").write_text("new")
    fileio.replace_dir(new, out)
    assert [p.name for p in out.iterdir()] == ["index.html"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
    new.mkdir()
    fileio.replace_dir(new, tmp_path / "other")  # nothing there yet
    assert (tmp_path / "other").is_dir() and not new.exists()


def test_fileio_imports_nothing_of_benchbox() -> None:
    tree = ast.parse((PACKAGE / "fileio.py").read_text())
    names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert names and not [n for n in names if n.startswith("benchbox")]


def test_no_module_renames_a_file_into_place_but_fileio() -> None:
    """One home: ``os.replace`` appears only in benchbox/fileio.py."""
    users = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                   if "os.replace(" in p.read_text() and p.name != "fileio.py")
    assert users == []


def test_folder_problem_says_why_a_folder_cannot_be_made_or_written(tmp_path: Path) -> None:
    assert fileio.folder_problem(tmp_path / "a" / "b") is None  # can be made
    (tmp_path / "f").write_text("x")
    assert fileio.folder_problem(tmp_path / "f" / "b") == f"{tmp_path / 'f'} is not a directory"
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.access(locked, os.W_OK):  # root writes anywhere
        return
    assert fileio.folder_problem(locked / "sub") == f"{locked} is not writable"


def test_the_runner_caches_word_folder_problems_as_before(tmp_path: Path) -> None:
    from benchbox.runners.compile_artifact import output_problem
    from benchbox.runners.compile_pin import unusable_reason

    (tmp_path / "f").write_text("x")
    assert unusable_reason(tmp_path / "f" / "x") == f"{tmp_path / 'f'} is not a directory"
    assert output_problem(str(tmp_path / "f" / "a.zip")) == f"{tmp_path / 'f'} is not a directory"
    assert output_problem(str(tmp_path)) == "is a directory"
    assert unusable_reason(tmp_path / "new") is None and output_problem(str(tmp_path / "n" / "a")) is None
