"""benchbox export: pyperf files that pyperf's own tools read, CSV/Parquet with one row per sample."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox import stats
from benchbox.cli import main
from benchbox.contracts import STAGES
from tests.conftest import make_receipt


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two real receipts of the sleepy task (short sleeps), the second slowed on 'beta'.

    The slowdown is 40 ms on a 5 ms sleep: pyperf's pooled t-test lets one stalled sample hide a
    difference, and with 5 ms one stall of about 100 ms among 20 samples did (a CI run); 40 ms
    stays significant up to a stall of about 400 ms."""
    tmp = tmp_path_factory.mktemp("export")
    kw = {"task": "tests.diff_tasks:factory", "samples": 20}
    make_receipt(tmp, "a.json", task_options={"sleep_ms": 5}, **kw)
    make_receipt(tmp, "b.json", task_options={"sleep_ms": 5, "slow_case": "beta", "extra_ms": 40}, **kw)
    return tmp / "a.json", tmp / "b.json"


def _export(receipt: Path, fmt: str, out: Path) -> None:
    r = CliRunner().invoke(main, ["export", str(receipt), "--format", fmt, "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.is_file()


def test_pyperf_show_and_compare_to_read_the_export(pair: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _export(pair[0], "pyperf", a)
    _export(pair[1], "pyperf", b)
    show = subprocess.run([sys.executable, "-m", "pyperf", "show", str(a)], capture_output=True,
                          text=True, timeout=120)
    assert show.returncode == 0, show.stderr
    assert "sleepy/alpha/torch-eager" in show.stdout and "sleepy/beta/torch-eager" in show.stdout
    assert " ms" in show.stdout  # values in seconds, shown as milliseconds
    cmp = subprocess.run([sys.executable, "-m", "pyperf", "compare_to", str(a), str(b)],
                         capture_output=True, text=True, timeout=120)
    assert cmp.returncode == 0, cmp.stderr
    beta = next(line for line in cmp.stdout.splitlines() if "beta" in line)
    assert "slower" in beta


def test_pyperf_values_are_the_receipt_samples_in_seconds(pair: tuple[Path, Path], tmp_path: Path) -> None:
    import pyperf

    out = tmp_path / "a.json"
    _export(pair[0], "pyperf", out)
    suite = pyperf.BenchmarkSuite.load(str(out))
    receipt = json.loads(pair[0].read_text())
    for row in receipt["results"]:
        bench = suite.get_benchmark(f"sleepy/{row['case']}/{row['runner']}")
        assert bench.get_values() == pytest.approx([v / 1e9 for v in row["samples_ns"]])
        assert bench.get_metadata()["benchbox_contract_hash"] == receipt["contract"]["hash"]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_table_export_has_one_row_per_sample_and_every_stage(pair: tuple[Path, Path], tmp_path: Path,
                                                             fmt: str) -> None:
    import polars as pl

    out = tmp_path / f"a.{fmt}"
    _export(pair[0], fmt, out)
    df = pl.read_csv(out) if fmt == "csv" else pl.read_parquet(out)
    receipt = json.loads(pair[0].read_text())
    assert df.height == sum(len(r["samples_ns"]) for r in receipt["results"])
    assert {f"{s}_ns" for s in STAGES} <= set(df.columns)
    row = receipt["results"][1]
    sub = df.filter((pl.col("case") == row["case"]) & (pl.col("runner") == row["runner"])).sort("sample")
    assert sub["region_ns"].to_list() == row["samples_ns"]
    assert sub["serialize_ns"].to_list() == row["stages_ns"]["serialize"]


def test_default_output_path_is_next_to_the_receipt(pair: tuple[Path, Path], tmp_path: Path) -> None:
    src = tmp_path / "copy.json"
    src.write_bytes(pair[0].read_bytes())
    r = CliRunner().invoke(main, ["export", str(src), "--format", "csv"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "copy.csv").is_file()


@pytest.mark.parametrize("fmt, package", [("pyperf", "pyperf"), ("parquet", "polars")])
def test_missing_package_simulated_names_the_extra(pair: tuple[Path, Path], tmp_path: Path,
                                                    fmt: str, package: str) -> None:
    """The package is installed here, so its absence is simulated by blocking the import."""
    code = (f"import sys; sys.modules[{package!r}] = None\n"
            "from benchbox.cli import main\n"
            f"main(['export', {str(pair[0])!r}, '--format', {fmt!r}, '-o', {str(tmp_path / 'x')!r}])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    want = f"benchbox: error: {package} is not installed: pip install 'benchbox-contracts[analysis]'"
    assert r.stderr.strip() == want


def test_export_into_a_missing_folder_is_one_line(pair: tuple[Path, Path], tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["export", str(pair[0]), "--format", "csv", "-o",
                                  str(tmp_path / "no" / "x.csv")])
    assert r.exit_code == 2
    assert "does not exist" in r.output and len(r.output.strip().splitlines()) == 1


def test_export_to_an_unwritable_place_is_one_line_exit_2(eager_receipt_path: Path) -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "benchbox", "export", str(eager_receipt_path),
                        "--format", "csv", "-o", "/proc/benchbox-export.csv"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "cannot write" in r.stderr and "unexpected" not in r.stderr


@pytest.fixture(scope="module")
def rounds_receipt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two contracts sharing calls, 150 samples: sampled in interleaved rounds of 100 and 50."""
    tmp = tmp_path_factory.mktemp("rounds")
    make_receipt(tmp, "r.json", task="tests.diff_tasks:factory", task_options={"sleep_ms": 1}, samples=150,
                 contracts=("public_task_call_wall", "model_io_wall"))
    return tmp / "r.public_task_call_wall.json"


def test_pyperf_has_one_run_per_round_and_the_environment(rounds_receipt: Path, tmp_path: Path) -> None:
    import pyperf

    receipt = json.loads(rounds_receipt.read_text())
    assert receipt["results"][0]["round_sizes"] == [100, 50]
    out = tmp_path / "r.pyperf.json"
    _export(rounds_receipt, "pyperf", out)
    suite = pyperf.BenchmarkSuite.load(str(out))
    for row in receipt["results"]:
        bench = suite.get_benchmark(f"sleepy/{row['case']}/{row['runner']}")
        assert [len(run.values) for run in bench.get_runs()] == row["round_sizes"]
        assert bench.get_values() == pytest.approx([v / 1e9 for v in row["samples_ns"]])
        meta = bench.get_metadata()
        assert meta["benchbox_device"] == "cpu" and meta["benchbox_dtype"] == "float32"
        assert meta["cpu_count"] == receipt["environment"]["cpu_count"]
        commit = (receipt["environment"].get("git") or {}).get("commit")
        assert meta.get("benchbox_commit") == commit


def _compare_to(a: Path, b: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyperf", "compare_to", str(a), str(b)],
                          capture_output=True, text=True, timeout=120)


def _first_samples(receipt: Path, n: int, out: Path) -> None:
    """The receipt with each row cut to its first ``n`` samples: the same measurements, fewer."""
    doc = json.loads(receipt.read_text())
    for row in doc["results"]:
        row["samples_ns"] = row["samples_ns"][:n]
        row["stages_ns"] = {k: v[:n] for k, v in row["stages_ns"].items()}
        row["round_sizes"] = [n]
        row["summary"] = stats.summarize(row["samples_ns"])  # the loader checks it agrees
    out.write_text(json.dumps(doc))


SIGNIFICANCE_ERROR = "ERROR when testing if values are significant"


def test_pyperf_compare_to_calls_every_difference_of_unequal_counts_significant(
        pair: tuple[Path, Path], tmp_path: Path) -> None:
    """What README says of pyperf: its t-test needs equal counts; with unequal ones compare_to
    prints an error per benchmark, exits 0 and reports even the same samples as a change."""
    a, cut = tmp_path / "a.json", tmp_path / "cut.json"
    _export(pair[0], "pyperf", a)  # 20 samples per case
    _first_samples(pair[0], 15, tmp_path / "first15.json")
    _export(tmp_path / "first15.json", "pyperf", cut)  # 15 of those same samples
    same = _compare_to(a, a)  # equal counts: the t-test runs and hides both as not significant
    assert same.returncode == 0 and SIGNIFICANCE_ERROR not in same.stdout
    assert "hidden because not significant (2)" in same.stdout, same.stdout
    cmp = _compare_to(a, cut)
    assert cmp.returncode == 0, cmp.stderr
    assert cmp.stdout.count(SIGNIFICANCE_ERROR) == 2, cmp.stdout
    assert "not significant" not in cmp.stdout.lower(), cmp.stdout  # nothing hidden: all "significant"
    for case in ("alpha", "beta"):
        block = cmp.stdout.split(f"sleepy/{case}/torch-eager", 1)[1].split("\n\n", 2)[1]
        assert "slower" in block or "faster" in block, block


def test_pyperf_reads_exports_of_unequal_sample_counts(pair: tuple[Path, Path], rounds_receipt: Path,
                                                      tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _export(pair[0], "pyperf", a)        # 20 samples per case, one round
    _export(rounds_receipt, "pyperf", b)  # 150 samples per case, two rounds
    cmp = _compare_to(a, b)
    assert cmp.returncode == 0, cmp.stderr
    for case in ("alpha", "beta"):
        assert f"sleepy/{case}/torch-eager" in cmp.stdout
    assert cmp.stdout.count(SIGNIFICANCE_ERROR) == 2, cmp.stdout
    meta = subprocess.run([sys.executable, "-m", "pyperf", "metadata", str(b)], capture_output=True,
                          text=True, timeout=120)
    assert meta.returncode == 0 and "benchbox_device: cpu" in meta.stdout, meta.stdout[-2000:]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_table_export_has_environment_and_round_columns(rounds_receipt: Path, tmp_path: Path,
                                                         fmt: str) -> None:
    import polars as pl

    out = tmp_path / f"r.{fmt}"
    _export(rounds_receipt, fmt, out)
    df = pl.read_csv(out) if fmt == "csv" else pl.read_parquet(out)
    receipt = json.loads(rounds_receipt.read_text())
    assert set(df["device"].to_list()) == {"cpu"} and set(df["dtype"].to_list()) == {"float32"}
    assert set(df["cpu_count"].to_list()) == {receipt["environment"]["cpu_count"]}
    first = df.filter(pl.col("case") == receipt["results"][0]["case"])
    assert first.group_by("round").len().sort("round")["len"].to_list() == [100, 50]


def test_a_receipt_edited_to_a_numeric_commit_exports_it_as_text(tmp_path: Path) -> None:
    pytest.importorskip("polars")
    from benchbox.receipts import parse_receipt
    from benchbox.receipts.export import to_frame
    from tests.support import GOLDEN

    doc = json.loads(GOLDEN.read_text())
    doc["environment"]["git"] = {"commit": 2**64 + 1, "dirty": False}
    frame = to_frame(parse_receipt(json.dumps(doc).encode(), "edited"))
    assert set(frame["commit"].to_list()) == {str(2**64 + 1)}


def test_table_export_of_environment_facts_that_are_not_strings(tmp_path: Path) -> None:
    """An edited receipt may give a number where a string is expected (a hostname of 1e308): the
    string columns show it as text instead of failing to build."""
    from tests.support import GOLDEN

    doc = json.loads(GOLDEN.read_text())
    doc["environment"].update(hostname=1e308, python=3, torch=True)
    src = tmp_path / "numbers.json"
    src.write_text(json.dumps(doc))
    out = tmp_path / "numbers.csv"
    _export(src, "csv", out)
    header, first = out.read_text().splitlines()[:2]
    row = dict(zip(header.split(","), first.split(",")))
    assert (row["hostname"], row["python"], row["torch"]) == ("1e+308", "3", "True")


def test_table_export_of_a_lone_surrogate_in_a_receipt_string() -> None:
    """JSON may escape a lone surrogate (\\ud800), which is no UTF-8: the table shows U+FFFD
    in its place instead of failing the export."""
    pytest.importorskip("polars")
    from benchbox.receipts import parse_receipt
    from benchbox.receipts.export import to_frame
    from tests.support import GOLDEN

    doc = json.loads(GOLDEN.read_text())
    doc["environment"]["hostname"] = "\ud800host"
    frame = to_frame(parse_receipt(json.dumps(doc).encode(), "edited"))
    (shown,) = set(frame["hostname"].to_list())
    assert shown.startswith("\ufffd") and shown.endswith("host")
    shown.encode("utf-8")  # valid UTF-8


def test_csv_export_streams_one_row_at_a_time(tmp_path: Path) -> None:
    """The CSV export holds one result row's frame, never per-sample Python lists of the whole
    table: Python's own allocations while exporting 40 rows × 5,000 samples stay small (the
    whole table as lists took 65 MiB here). benchmarks/export_memory.py measures the process."""
    import tracemalloc

    from benchbox.receipts import load_receipt
    from benchbox.receipts.export import export_receipt
    from benchmarks.export_memory import make_receipt

    src = tmp_path / "big.json"
    make_receipt(src, rows=40, samples=5_000)
    receipt = load_receipt(src)
    tracemalloc.start()
    try:
        export_receipt(receipt, "csv", tmp_path / "out.csv")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, f"{peak / 2**20:.1f} MiB traced"
    with open(tmp_path / "out.csv") as f:
        header = f.readline()
        assert header.startswith("task,contract,contract_hash,runner,case,status,sample,round,region_ns,")
        assert sum(1 for _ in f) == 40 * 5_000


def test_export_never_replaces_the_receipt_and_replaces_a_file_only_when_told(pair: tuple[Path, Path],
                                                                             tmp_path: Path) -> None:
    src = tmp_path / "run.json"
    src.write_bytes(pair[0].read_bytes())
    kept = src.read_bytes()
    for extra in ([], ["--overwrite"]):
        r = CliRunner().invoke(main, ["export", str(src), "--format", "csv", "-o", str(src), *extra])
        assert r.exit_code == 2 and r.output.strip().splitlines() == [
            f"benchbox: error: {src} is the receipt itself: choose another --output"]
    assert src.read_bytes() == kept
    other = tmp_path / "run.csv"
    other.write_text("mine\n")
    r = CliRunner().invoke(main, ["export", str(src), "--format", "csv"])
    assert r.exit_code == 2 and r.output.strip().splitlines() == [
        f"benchbox: error: {other} exists: choose another --output, or pass --overwrite"]
    assert other.read_text() == "mine\n"
    r = CliRunner().invoke(main, ["export", str(src), "--format", "csv", "--overwrite"])
    assert r.exit_code == 0, r.output
    assert other.read_text() != "mine\n" and len(other.read_text().splitlines()) > 20
