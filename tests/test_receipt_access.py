"""Receipt data is read through its typed records (attributes), never by key with ``.get("...")``.

Receipts are decoded once (``benchbox.typed`` and the loader's front in ``benchbox.receipts.io``)
into frozen records; a reader that fetches a key by name would silently read ``None`` where a
field was renamed or never declared. Every ``.get("...")`` left in the package is listed below
with the number of them in its file and why it stays: a new one in any module fails this test,
and so does an entry that no longer matches its file (the list shrinks with the code).
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "benchbox"

#: ``.get(`` with a string literal key (either quote), as a reader of a JSON document writes it
KEYED_GET = re.compile(r"""\.get\(\s*["']""")

#: the decoder: it reads the raw document before there is a record
DECODER: dict[str, tuple[int, str]] = {
    "typed/__init__.py": (3, "the decoder itself: a record field's metadata (optional, omit_none)"),
    "typed/schema.py": (1, "the schema beside the decoder: a record field's description"),
    "receipts/io.py": (6, "the loader's front: the raw document (schema_version, samples) before it "
                          "is migrated and decoded, and a matrix cell's receipt bytes peeked at "
                          "(complete) and relabelled before they are decoded"),
}

#: not receipt data: environment variables, external tools' output, a user's TOML or options,
#: the files of other formats, and the dicts a run builds before its receipt exists
NOT_RECEIPT_DATA: dict[str, tuple[int, str]] = {
    "cli/app.py": (1, "os.environ (BENCHBOX_DEBUG)"),
    "cli/receipts.py": (1, "os.environ (GITHUB_STEP_SUMMARY)"),
    "harness/quiet.py": (3, "os.environ (PYTHONHASHSEED, the re-execution's marker)"),
    "harness/loop.py": (1, "a measurement's load, built by the loop as it samples (harness sits below "
                           "receipts)"),
    "run/rounds.py": (4, "the rounds' measurements' loads, joined before a result row exists"),
    "run/sequence.py": (1, "the environment collected from the machine, before the receipt is built"),
    "run/preflight.py": (5, "os.environ (CUDA_VISIBLE_DEVICES) and torch's build information"),
    "run/workers.py": (5, "os.environ, and the events a worker process sends (its own protocol)"),
    "receipts/build.py": (4, "nvidia-smi's readings and a measurement's load, as the row is built"),
    "receipts/judge.py": (9, "the diff's working dict of one metric, built in judge itself"),
    "receipts/diff.py": (1, "the diff's own dict of what the two sides declare differently"),
    "stats.py": (8, "the summary and steady-state dicts stats computes; stats imports nothing "
                    "(below receipts), so it cannot take the records"),
    "matrix/cell.py": (5, "the plan's sampling table (TOML), os.environ and the phase timer's seconds"),
    "matrix/driver.py": (3, "the plan's [ray] table (TOML) and the phase timer's seconds"),
    "matrix/executors.py": (7, "ray.nodes(), Ray's own report"),
    "matrix/host.py": (12, "the host's lease file (the matrix's own entries) and os.environ"),
    "store/__init__.py": (1, "the store's marker file"),
    "store/files.py": (1, "the store's marker file"),
    "sweep.py": (3, "the caller's seams (keyword options) and the sweep's own manifest of points"),
    "tasks/decision/task.py": (4, "a request's JSON, the task's input"),
    "tasks/decision/weights.py": (3, "a safetensors file's header"),
    # runners write the reports: they read torch's counters and config, TensorRT's inspector
    # JSON and logs, their own cache, pin and artifact files, and the dicts they build
    "runners/compile_artifact.py": (5, "a compiled artifact's metadata file"),
    "runners/compile_draws.py": (7, "the draws' selection record the runner builds"),
    "runners/compile_facts.py": (46, "torch's cache counters and the pin records the runner keeps"),
    "runners/compile_pin.py": (9, "os.environ and the pin record file"),
    "runners/compile_report.py": (14, "torch's counters, frames and autotune choices"),
    "runners/onnx_export.py": (1, "the exported model's metadata file"),
    "runners/tensorrt.py": (1, "the build options the runner assembles"),
    "runners/tensorrt_build.py": (3, "the build log's facts and the engine cache's side file"),
    "runners/tensorrt_cache.py": (4, "the engine cache's side file"),
    "runners/tensorrt_flavours.py": (4, "the installed packages' metadata"),
    "runners/tensorrt_options.py": (1, "os.environ (BENCHBOX_CACHE)"),
    "runners/tensorrt_report.py": (52, "TensorRT's engine inspector JSON and build log"),
    "runners/tensorrt_runtime.py": (4, "the facts the runner builds"),
    "runners/torch_compile.py": (19, "torch's config and counters, the pin and artifact records"),
}

#: receipt data still read by key, and why it is not a record yet (none: every reader takes records)
RECEIPT_DATA_LEFT: dict[str, tuple[int, str]] = {}

ALLOWED = {**DECODER, **NOT_RECEIPT_DATA, **RECEIPT_DATA_LEFT}


def keyed_gets(text: str) -> int:
    return len(KEYED_GET.findall(text))


def found() -> dict[str, int]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        n = keyed_gets(path.read_text(encoding="utf-8"))
        if n:
            out[path.relative_to(PACKAGE).as_posix()] = n
    return out


def test_the_pattern_finds_a_keyed_get_and_only_that() -> None:
    assert keyed_gets('x = receipt.environment.get("load")') == 1
    assert keyed_gets("y = row.get('status') or d.get( \"a\")") == 2
    assert keyed_gets("z = receipt.environment.load; labels.get(name)") == 0


def test_the_lists_do_not_overlap() -> None:
    assert not set(DECODER) & set(NOT_RECEIPT_DATA)
    assert not set(RECEIPT_DATA_LEFT) & (set(DECODER) | set(NOT_RECEIPT_DATA))


def test_no_keyed_get_outside_the_listed_modules_and_counts() -> None:
    got = found()
    new = {f: n for f, n in got.items() if f not in ALLOWED}
    assert not new, f"read receipt data through its records' attributes, not .get(\"...\"): {new}"
    more = {f: (n, ALLOWED[f][0]) for f, n in got.items() if n > ALLOWED[f][0]}
    assert not more, f"more keyed .get than listed (found, listed): {more}"


def test_the_list_matches_the_code() -> None:
    got = found()
    stale = {f: (got.get(f, 0), n) for f, (n, _) in ALLOWED.items() if got.get(f, 0) != n}
    assert not stale, f"lower the listed counts to what the code has now (found, listed): {stale}"


def test_receipt_readers_have_none() -> None:
    """The modules that read decoded receipts (render, report, plots, store tables, selfcheck
    checks, the receipt records, the fallbacks the diff compares) read attributes only."""
    got = found()
    readers = [f for f in got if f.startswith(("render/", "report/", "plots/", "selfcheck/", "api",
                                               "fallbacks/"))
               or f in ("store/tables.py", "receipts/model.py", "receipts/row.py", "receipts/machine.py",
                        "receipts/settings.py", "receipts/combine.py", "receipts/conditions.py",
                        "receipts/export.py")]
    assert readers == []
