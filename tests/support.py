"""Paths and small helpers shared by the tests (importable as ``tests.support``)."""

from __future__ import annotations

import subprocess
import sys
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


def cli_without_torch(args: list[str], exit_code: int = 0) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a fresh interpreter (a bare environment: PYTHONPATH and PATH only); assert
    that it exits with ``exit_code`` and has not imported torch; return the finished process."""
    code = ("import sys\nfrom benchbox.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            f"    assert e.code == {exit_code}, e.code\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\nprint('ok')\n")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr
    return r


def loaded(path: object) -> dict:
    """A receipt through the real loader (checked by the model), as its JSON document."""
    from benchbox.receipts import load_receipt

    return load_receipt(path).to_json()  # type: ignore[arg-type]



def synthetic_receipt(rows: dict, *, repeats: int = 1, environment: dict | None = None,
                      calibration: dict | None = None, fallbacks: dict | None = None,
                      in_process: bool = False, processes: list[dict] | None = None,
                      probes: dict | None = None):
    """A receipt (the golden one's header) whose rows hold the given samples.

    ``rows`` maps (runner, case) to a list of rounds (each a sequence of nanoseconds). Each
    round is taken by a process of its own (as ``--repeats K`` does by default), or, with
    ``in_process``, all by one process. ``processes``: the process records (default one bare
    record per process). ``fallbacks`` maps (runner, case) to that row's fallback entries.
    Statistics and caveats are derived as a run derives them.
    """
    import json

    import numpy as np

    from benchbox import stats
    from benchbox.harness import control
    from benchbox.receipts.model import decode_receipt

    doc = json.loads(GOLDEN.read_text())
    template = doc["results"][0]
    doc["settings"] = {**(doc.get("settings") or {}), "repeats": repeats,
                       "fresh_processes": repeats > 1 and not in_process}
    if environment:
        doc["environment"].update(environment)
    if calibration is not None:
        doc["calibration"] = calibration
    cases = {c["name"]: c for c in doc["task"]["cases"]}
    results = []
    most = 1
    for (runner, case), rounds in rows.items():
        samples = [int(v) for r in rounds for v in np.asarray(r).round()]
        if case not in cases:
            cases[case] = {"name": case, "request_sha256": "0" * 64}
        procs = [0] * len(rounds) if in_process else list(range(len(rounds)))
        most = max(most, max(procs) + 1)
        row = dict(template, runner=runner, case=case, request_sha256=cases[case]["request_sha256"],
                   samples_ns=samples, round_sizes=[len(r) for r in rounds], round_process=procs,
                   stages_ns={"parse": samples}, reasons=[], summary=stats.summarize(samples),
                   steady_state=stats.steady_state(samples) if len(rounds) < 2
                   else stats.steady_state_rounds([np.asarray(r).round().astype(int) for r in rounds]))
        row.pop("process_probe_ns", None)
        if probes and (runner, case) in probes:
            row["process_probe_ns"] = [int(v) for v in probes[(runner, case)]]
        row["runner_report"] = dict(template["runner_report"],
                                    fallbacks=(fallbacks or {}).get((runner, case), []))
        results.append(row)
    doc["task"]["cases"] = list(cases.values())
    doc["results"] = results
    named = {"control": {"name": "json-sort-v1", "row_probe": control.PROBE}} if probes else {}
    bare = [{"pid": 1000 + i, **named} for i in range(most)]
    doc["processes"] = processes if processes is not None else bare
    return decode_receipt(doc, "synthetic")
