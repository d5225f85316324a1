"""benchmarks/runner_overhead.py end to end on the CPU with tiny counts (the script's GPU run is
made on a GPU machine): it writes a complete result file, every method answers alike, and the
table renders from the file alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import runner_overhead as ro


def test_runner_overhead_writes_results_and_renders_them_on_the_cpu(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "ro.json"
    assert ro.main(["--device", "cpu", "--sizes", "linear", "--runners", "torch-eager,tensorrt",
                    "--rounds", "3", "--samples", "8", "--min-samples", "4", "--warmup", "2",
                    "--budget-s", "60", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["environment"]["git"] and res["environment"]["device"] == "cpu"
    assert len(res["loadavg_before"]) == 3 and len(res["loadavg_after"]) == 3
    (w,) = res["workloads"]
    assert w["workload"] == "linear" and w["rounds"] == 3 and w["responses_agree"] == {"torch-eager": True}
    assert "tensorrt" in w["unavailable"]
    methods = {m["method"]: m for m in w["methods"]}
    assert set(methods) == {"torch-eager (auto)", "hand-plain"}  # no variants or staged loops on the CPU
    runner = methods["torch-eager (auto)"]
    assert len(runner["rounds"]) == 3 and all(r["n"] == w["samples_per_round"] for r in runner["rounds"])
    p = runner["public"]
    assert p["round_min_ns"] <= p["p50_ns"] <= p["round_max_ns"]
    assert runner["io"]["p50_ns"] < p["p50_ns"]  # model I/O lies inside the public call
    assert methods["hand-plain"]["public"]["vs_fastest_hand"] == 1.0
    assert runner["transfer"]["h2d"] == "none"
    table = capsys.readouterr().out
    assert table == ro.render([res]) + "\n"
    assert "| linear (float32, " in table and "hand-plain ★" in table and "tensorrt | not run:" in table
