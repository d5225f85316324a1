"""No module in benchbox/ is over 500 lines: a file that grows past it is split by concept."""

from __future__ import annotations

from pathlib import Path

import benchbox

PACKAGE = Path(benchbox.__file__).parent
MAX_LINES = 500


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_file_in_benchbox_is_over_500_lines() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := line_count(p)) > MAX_LINES}
    assert long == {}, f"over {MAX_LINES} lines (split by concept): {long}"


def test_the_count_is_of_lines(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("a = 1\n" * (MAX_LINES + 1))
    assert line_count(f) == MAX_LINES + 1
    f.write_text("a = 1\n" * MAX_LINES)
    assert line_count(f) == MAX_LINES
