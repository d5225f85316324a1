"""`benchbox.run.run` as a library: several contracts in one run, and nothing measured is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchbox.contracts import load_contract
from benchbox.receipts import build
from benchbox.run import RunConfig, out_paths, run
from tests.support import loaded


def test_out_paths_one_and_several() -> None:
    assert out_paths(Path("d/r.json"), ["a"]) == [Path("d/r.json")]
    assert out_paths(Path("d/r.json"), ["a", "b"]) == [Path("d/r.a.json"), Path("d/r.b.json")]


def test_several_contracts_give_one_receipt_each_from_one_preparation(tmp_path: Path) -> None:
    outcome = run(RunConfig(contracts=("public_task_call_wall", "model_io_wall", "device_compute"),
                            runners=("torch-eager",), cases=("invoice", "video"), samples=30, warmup=2,
                            out=tmp_path / "r.json"))
    names = [o.receipt.to_json()["contract"]["name"] for o in outcome.all]
    assert names == ["public_task_call_wall", "model_io_wall", "device_compute"]
    for o in outcome.all:
        r = loaded(o.path)
        assert o.path == tmp_path / f"r.{r['contract']['name']}.json"
        assert r["complete"] is True
        assert r["contract"]["hash"] == load_contract(r["contract"]["name"]).hash
        assert r["settings"]["contracts_in_run"] == names
        assert [(x["runner"], x["case"], x["status"]) for x in r["results"]] == [
            ("torch-eager", "invoice", "valid"), ("torch-eager", "video", "valid")]
        assert all(len(x["samples_ns"]) == 30 for x in r["results"])
    pub, io, dev = (json.loads(o.path.read_text()) for o in outcome.all)
    # host-clock contracts without hooks share the calls: model I/O is read from the same stamps
    for a, b in zip(pub["results"], io["results"]):
        assert a["stages_ns"] == b["stages_ns"]
        per_sample = [sum(b["stages_ns"][s][i] for s in ("h2d", "compute", "d2h"))
                      for i in range(len(b["samples_ns"]))]
        assert b["samples_ns"] == per_sample
        assert all(x < y for x, y in zip(b["samples_ns"], a["samples_ns"]))
        assert "samples shared with public_task_call_wall" in b["clock_note"]
        assert "model_io_wall" in a["stop_reason"]
    # a device-clock contract samples on its own (on the CPU it falls back to the host clock)
    assert dev["results"][0]["stages_ns"] != pub["results"][0]["stages_ns"]
    for a, b in zip(pub["results"], io["results"]):
        assert b["summary"]["p50_ns"] < a["summary"]["p50_ns"]
    # validated once: the same gates in every receipt
    assert pub["results"][0]["accuracy"] == io["results"][0]["accuracy"]


def test_duplicate_contract_is_refused(tmp_path: Path) -> None:
    from benchbox.errors import UsageError

    with pytest.raises(UsageError, match="named twice"):
        run(RunConfig(contracts=("model_io_wall", "model_io_wall"), out=tmp_path / "r.json"))


def test_samples_survive_a_simulated_statistics_failure(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(samples: object, *a: object, **k: object) -> None:
        raise ArithmeticError("simulated failure in the statistics")

    monkeypatch.setattr(build, "summarize", broken)
    outcome = run(RunConfig(runners=("torch-eager",), cases=("invoice",), samples=25, warmup=1,
                            out=tmp_path / "r.json"))
    row = loaded(outcome.path)["results"][0]
    assert row["status"] == "failed" and "statistics failed" in row["reasons"][0]
    assert len(row["samples_ns"]) == 25 and len(row["stages_ns"]["compute"]) == 25
    assert not outcome.ok


NO_GRAPHS = """name = "model_io_no_graphs"
version = 1
stages = ["h2d", "compute", "d2h"]
clock = "host"

[policy]
cuda_graphs = false
"""


def test_contract_forbidding_cuda_graphs_switches_them_off_in_the_compiled_runner(tmp_path: Path) -> None:
    contract = tmp_path / "c.toml"
    contract.write_text(NO_GRAPHS)
    outcome = run(RunConfig(contract=str(contract), runners=("torch-compile",), cases=("invoice",),
                            samples=5, warmup=1, out=tmp_path / "r.json",
                            runner_options={"torch-compile": {"mode": "reduce-overhead",
                                                              "cold_warm": False}}))
    rep = loaded(outcome.path)["results"][0]["runner_report"]
    assert rep["policy_applied"] == {"cuda_graphs_allowed": False, "changed": ["triton.cudagraphs=False"]}
    assert rep["applied_options"]["torch_compile_options"]["triton.cudagraphs"] is False


def test_contracts_disagreeing_on_cuda_graphs_cannot_share_a_run(tmp_path: Path) -> None:
    from benchbox.errors import UsageError

    contract = tmp_path / "c.toml"
    contract.write_text(NO_GRAPHS)
    with pytest.raises(UsageError, match="cuda_graphs"):
        run(RunConfig(contracts=("model_io_wall", str(contract)), out=tmp_path / "r.json"))


def test_tensorrt_runner_drops_graph_capture_when_the_contract_forbids_it() -> None:
    pytest.importorskip("tensorrt_rtx_bindings", reason="needs the tensorrt-rtx extra")
    from benchbox.contracts import Policy
    from benchbox.runners.tensorrt import TensorRTRunner

    r = TensorRTRunner("cpu", {"cuda_graph": True})
    r.apply_policy(Policy(cuda_graphs=True))
    assert r.options["cuda_graph"] is True
    r.apply_policy(Policy(cuda_graphs=False))
    assert r.options["cuda_graph"] is False
    assert r.facts["policy_applied"]["changed"] == ["cuda_graph=False"]


def test_sigint_during_compilation_stops_at_once_and_keeps_finished_rows(tmp_path: Path) -> None:
    """No sample is in progress while a runner compiles, so one SIGINT ends the run there."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "r.json"
    p = subprocess.Popen([sys.executable, "-m", "benchbox", "run", "--runner", "torch-eager",
                          "--runner", "torch-compile", "--case", "invoice", "--samples", "20",
                          "--warmup", "1", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    for line in p.stderr:
        if "torch-compile: preparing" in line:
            break
    time.sleep(2.0)  # inside torch.compile by now (it takes tens of seconds here)
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err[-2000:]
    assert time.monotonic() - sent < 30
    r = loaded(out)
    assert r["complete"] is False and r["interrupted"] is True
    assert [(x["runner"], x["status"]) for x in r["results"]] == [("torch-eager", "valid")]


@pytest.mark.parametrize(("args", "needle"), [
    (["--baseline", "nosuch"], "--baseline: 'nosuch' is not one of the runners"),
    (["--gate", "logit_error=1"], "--gate: 'logit_error'"),
    (["--gate", "prob_max_abs=abc"], "the threshold must be a number"),
    (["--gate", "prob_max_abs=-1"],
     "--gate: prob_max_abs=-1: the threshold is a largest error, a number ≥ 0"),
    (["--gate", "logit_max_abs=nan"], "--gate: logit_max_abs=nan: the threshold is a largest error"),
    (["--device", "cuda:x"], "unknown device 'cuda:x'"),
    (["--runner-option", "torch-eager:threads=2"],
     "torch-eager: unknown option 'threads' (options: transfer, d2h, stream)"),
    (["--runner-option", "torch-eager:transfer=pinned"],
     "torch-eager option transfer: expected auto, direct, packed, staged, got 'pinned'"),
])
def test_run_refuses_bad_options_with_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "benchbox", "run", "--runner", "torch-eager", *args,
                        "--out", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert needle in r.stderr
    assert not (tmp_path / "r.json").exists()  # refused before anything was measured


def test_contracts_the_harness_cannot_honour_are_refused(tmp_path: Path) -> None:
    from benchbox.errors import UsageError

    for policy in ('state = "first_call"', "fresh_request = false"):
        f = tmp_path / "c.toml"
        f.write_text(f'name = "c"\nversion = 1\nstages = ["compute"]\nclock = "host"\n[policy]\n{policy}\n')
        with pytest.raises(UsageError, match="warm calls from fresh request bytes only"):
            run(RunConfig(contract=str(f), runners=("torch-eager",), out=tmp_path / "r.json"))
