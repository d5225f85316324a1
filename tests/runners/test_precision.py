"""TF32 recorded for matmuls and convolutions on every runner (benchbox.runners.precision).

The torch settings are real (torch 2.13's ``fp32_precision`` API, read as they are; each test
puts back what it changed). No GPU here runs a TF32 kernel: what is checked is what each
runner's report says its settings allow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from benchbox.harness import PhaseTimer
from benchbox.runners import make_runner, precision
from benchbox.tasks.decision.task import DecisionTask


@pytest.fixture
def settings() -> Iterator[None]:
    saved = (torch.backends.fp32_precision, torch.backends.cuda.matmul.fp32_precision,
             torch.backends.cudnn.fp32_precision, torch.backends.cudnn.conv.fp32_precision,
             torch.backends.cudnn.rnn.fp32_precision)
    yield
    torch.backends.fp32_precision = saved[0]
    torch.backends.cuda.matmul.fp32_precision = saved[1]
    torch.backends.cudnn.fp32_precision = saved[2]
    torch.backends.cudnn.conv.fp32_precision = saved[3]
    torch.backends.cudnn.rnn.fp32_precision = saved[4]


def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in precision.OVERRIDES:
        monkeypatch.delenv(name, raising=False)


def test_torch_defaults_allow_tf32_in_convolutions_and_the_row_says_so(
        settings: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_env(monkeypatch)
    rec = precision.torch_tf32("cuda")
    # torch 2.13: matmuls true float32, cuDNN convolutions TF32, unless a program says otherwise
    assert (rec["matmul"], rec["conv"]) == ("ieee", "tf32")
    assert rec["settings"]["torch.backends.cudnn.conv.fp32_precision"] == "tf32"
    assert rec["true_float32"] is False and rec["applies"] is True
    assert rec["note"].startswith("TF32 allowed in float32 convolutions (torch fp32_precision settings")
    assert rec["environment"] == {"NVIDIA_TF32_OVERRIDE": None, "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": None}
    cpu = precision.torch_tf32("cpu")
    assert cpu["applies"] is False and cpu["true_float32"] is True and "does not apply" in cpu["note"]


def test_settings_and_overrides_are_read_as_they_are(settings: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_env(monkeypatch)
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    assert precision.torch_tf32("cuda")["conv"] == "ieee"
    note = precision.torch_tf32("cuda")["note"]
    assert note == "TF32 off in float32 matmuls and convolutions: true float32"
    torch.set_float32_matmul_precision("high")
    rec = precision.torch_tf32("cuda")
    assert rec["matmul"] == "tf32" and "matmuls" in rec["note"]
    torch.set_float32_matmul_precision("highest")
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
    assert precision.torch_tf32("cuda")["matmul"] == "tf32"
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")  # NVIDIA's libraries: no TF32, whatever is asked
    rec = precision.torch_tf32("cuda")
    assert (rec["matmul"], rec["conv"], rec["true_float32"]) == ("ieee", "ieee", True)
    assert rec["environment"]["NVIDIA_TF32_OVERRIDE"] == "0"


def test_tensorrt_records_its_builder_flag_for_both_and_the_override_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_env(monkeypatch)
    off = precision.tensorrt_tf32(False, "cuda")
    assert (off["matmul"], off["conv"], off["true_float32"]) == ("ieee", "ieee", True)
    on = precision.tensorrt_tf32(True, "cuda")
    assert (on["matmul"], on["conv"], on["true_float32"]) == ("tf32", "tf32", False)
    assert "matmuls and convolutions" in on["note"] and "builder flag" in on["note"]
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    rec = precision.tensorrt_tf32(False, "cuda")
    assert rec["note"].endswith("NVIDIA_TF32_OVERRIDE=0 is set (recorded, not judged)")


@pytest.mark.parametrize("runner", ["torch-eager", "torch-compile"])
def test_every_torch_runner_reports_tf32(runner: str, settings: None,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_env(monkeypatch)
    r = make_runner(runner, "cpu", {"mode": "default"} if runner == "torch-compile" else {})
    rep: dict[str, Any] = r.report()
    assert rep["tf32"] == precision.torch_tf32("cpu")
    if runner == "torch-eager":  # after preparing too (the compile runner's preparation compiles)
        task = DecisionTask()
        example = task.preprocess(task.parse(task.cases()[0].request))
        r.prepare(task, task.build_model(), example, PhaseTimer())
        assert r.report()["tf32"]["settings"]["torch.backends.cudnn.conv.fp32_precision"] == "tf32"
