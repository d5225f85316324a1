"""Paths and small helpers shared by the tests (importable as ``tests.support``)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
#: a receipt of the current schema version, written by
#: ``benchbox run --runner torch-eager --case invoice --case outage --samples 10 --warmup 1``
GOLDEN = TESTS / "golden" / "receipt-v2.json"
#: the same command's receipt from schema version 1 (migrated on load)
GOLDEN_V1 = TESTS / "golden" / "receipt-v1.json"
BUILTIN_CONTRACTS = REPO / "benchbox" / "contracts" / "builtin"


def one_line_exit_2(args: list[str]) -> str:
    """Run the CLI in-process; assert exit 2 with exactly one ``benchbox: error:`` line; return it."""
    from click.testing import CliRunner

    from benchbox.cli import main

    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, (args, result.output)
    assert isinstance(result.exception, SystemExit), (args, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchbox: error: "), (args, result.stderr)
    assert "Traceback" not in result.output
    return lines[0]


def loaded(path: object) -> dict:
    """A receipt through the real loader (checked by the model), as its JSON document."""
    from benchbox.receipts import load_receipt

    return load_receipt(path).to_json()  # type: ignore[arg-type]
