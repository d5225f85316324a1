"""The built-in decision task, its gates, custom tasks and ``benchbox tasks``."""

from __future__ import annotations

import base64
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from benchbox.cli import main
from benchbox.errors import UsageError
from benchbox.run import RunConfig, run
from benchbox.tasks import describe_tasks, load_task
from benchbox.tasks.decision import media
from benchbox.tasks.decision.model import SIZES, build, count_parameters
from benchbox.tasks.decision.task import CASE_NAMES, GATES, DecisionTask
from benchbox.tasks.decision.weights import load_safetensors, save_safetensors
from tests.support import REPO, one_line_exit_2

FIXTURES = REPO / "benchbox" / "tasks" / "decision" / "fixtures"
#: the decision task with the test-only options fault and slowdown_us (tests/faulty_decision.py)
FAULTY = "tests.faulty_decision:FaultyDecisionTask"


def _run(tmp: Path, name: str, **kw: object) -> dict:
    cfg = {"runners": ("torch-eager",), "samples": 5, "warmup": 1, "out": tmp / f"{name}.json"}
    cfg.update(kw)
    outcome = run(RunConfig(**cfg))
    return json.loads(Path(outcome.path).read_text())


def _rows(receipt: dict) -> dict[tuple[str, str], dict]:
    return {(r["runner"], r["case"]): r for r in receipt["results"]}


# -- acceptance: both runners, video and invoice, under the public call contract ----------


@pytest.fixture(scope="module")
def both_runners(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One real run (eager and torch.compile max-autotune) of video and invoice on the CPU."""
    tmp = tmp_path_factory.mktemp("both")
    return _run(tmp, "both", runners=("torch-eager", "torch-compile"), samples=15, warmup=2,
                contract="public_task_call_wall", cases=("video", "invoice"))


def test_both_runners_valid_on_video_and_invoice(both_runners: dict) -> None:
    rows = _rows(both_runners)
    assert set(rows) == {(r, c) for r in ("torch-eager", "torch-compile") for c in ("video", "invoice")}
    for key, row in rows.items():
        assert row["status"] == "valid", (key, row["reasons"])
        gates = {g["name"]: g for g in row["accuracy"]["gates"]}
        assert set(gates) == {"logit_max_abs", "prob_max_abs", "answer_equal", "repeatable"}
        assert all(g["passed"] for g in gates.values())
        assert gates["logit_max_abs"]["threshold"] == GATES["float32"]["logit_max_abs"]
        assert 0.0 <= gates["logit_max_abs"]["value"] <= gates["logit_max_abs"]["threshold"]
    assert both_runners["contract"]["name"] == "public_task_call_wall"


def test_video_preprocess_is_real_work(both_runners: dict) -> None:
    """Decode, resize, normalize, patches and positions: several times the text case's preprocess."""
    rows = _rows(both_runners)
    for runner in ("torch-eager", "torch-compile"):
        video = statistics.median(rows[(runner, "video")]["stages_ns"]["preprocess"])
        invoice = statistics.median(rows[(runner, "invoice")]["stages_ns"]["preprocess"])
        assert video > 3 * invoice, (runner, video, invoice)
        parse_v = statistics.median(rows[(runner, "video")]["stages_ns"]["parse"])
        parse_i = statistics.median(rows[(runner, "invoice")]["stages_ns"]["parse"])
        assert parse_v > parse_i  # base64 decoding of the frames


def test_receipt_records_task_precision_and_cases(both_runners: dict) -> None:
    task = both_runners["task"]
    assert task["name"] == "decision" and task["size"] == "tiny"
    assert task["precision"] == {"softmax_fp32": True, "layernorm_fp32": True, "logits_fp32": True,
                                 "pos_interp_round": True}
    assert task["weights"] == "seeded" and task["seed"] == SIZES["tiny"].seed
    assert [c["name"] for c in task["cases"]] == ["invoice", "video"]
    assert task["parameters"] == SIZES["tiny"].parameters


# -- every gate can fail; the honest configuration passes ---------------------------------


def test_wrong_dtype_fails_the_logit_and_probability_gates(tmp_path: Path) -> None:
    strict = {"logit_max_abs": GATES["float32"]["logit_max_abs"],
              "prob_max_abs": GATES["float32"]["prob_max_abs"]}
    bad = _run(tmp_path, "bf16-strict", dtype="bfloat16", cases=("invoice", "image"), gates=strict)
    for row in bad["results"]:
        assert row["status"] == "invalid"
        failed = {g["name"] for g in row["accuracy"]["gates"] if not g["passed"]}
        assert "logit_max_abs" in failed
        assert any("logit_max_abs" in r for r in row["reasons"])
    assert {(e["runner"], e["case"]) for e in bad["comparisons"]["excluded"]} == {
        ("torch-eager", "invoice"), ("torch-eager", "image")}
    # the same bfloat16 run under the bfloat16 defaults is valid
    ok = _run(tmp_path, "bf16", dtype="bfloat16", cases=("invoice", "image"))
    for row in ok["results"]:
        assert row["status"] == "valid", row["reasons"]
        assert row["accuracy"]["gates"][0]["threshold"] == GATES["bfloat16"]["logit_max_abs"]


@pytest.mark.parametrize(("fault", "gate"), [("unrepeatable", "repeatable"),
                                             ("flip_answer", "answer_equal")])
def test_deliberate_fault_fails_exactly_its_gate(tmp_path: Path, fault: str, gate: str) -> None:
    receipt = _run(tmp_path, fault, cases=("outage", "video"), task=FAULTY, task_options={"fault": fault})
    assert receipt["task"]["fault"] == fault and receipt["task"]["name"] == "decision"
    for row in receipt["results"]:
        assert row["status"] == "invalid"
        failed = [g["name"] for g in row["accuracy"]["gates"] if not g["passed"]]
        assert failed == [gate]
        assert any(gate in r for r in row["reasons"])


def test_prob_gate_alone_can_fail(tmp_path: Path) -> None:
    """bfloat16 with the logit gate loosened and a probability threshold below the measured error."""
    r = _run(tmp_path, "prob", dtype="bfloat16", cases=("receipt",),
             gates={"logit_max_abs": 10.0, "prob_max_abs": 1e-7})
    row = r["results"][0]
    assert row["status"] == "invalid"
    assert [g["name"] for g in row["accuracy"]["gates"] if not g["passed"]] == ["prob_max_abs"]


# -- the task's pieces ------------------------------------------------------------------------


def test_all_cases_have_one_fixed_shape_per_size() -> None:
    for size in ("tiny", "small"):
        task = DecisionTask(size=size)
        shapes = set()
        for case in task.cases():
            arrays = task.preprocess(task.parse(case.request))
            assert len(arrays) == len(task.input_names)
            shapes.add(tuple((a.shape, a.dtype.str) for a in arrays))
        assert len(shapes) == 1


def test_dynamic_tokens_leave_the_tokens_unpadded_with_the_padded_answers() -> None:
    """The task option that gives runners a dynamic-shape input (benchbox selfcheck uses it)."""
    fixed, dynamic = DecisionTask(), DecisionTask(options={"dynamic_tokens": True})
    shapes = dynamic.input_shapes()
    assert shapes["tokens"].min == (1, 1) and shapes["tokens"].max == (1, fixed.spec.max_tokens)
    assert shapes["token_mask"] == shapes["tokens"] and shapes["tokens"].dynamic_axes == (1,)
    assert all(shapes[n].dynamic_axes == () for n in dynamic.input_names[2:])
    assert dynamic.info()["dynamic_tokens"] is True and "dynamic_tokens" not in fixed.info()
    widths = set()
    m_fixed, m_dynamic = fixed.build_model(), dynamic.build_model()
    for case in fixed.cases():
        a = fixed.preprocess(fixed.parse(case.request))
        b = dynamic.preprocess(dynamic.parse(case.request))
        widths.add(b[0].shape[1])
        assert b[0].shape == b[1].shape and bool(b[1].all()) and int(a[1].sum()) == b[1].shape[1]
        assert all(shapes[n].admits(x.shape) for n, x in zip(dynamic.input_names, b))
        with torch.inference_mode():
            la = m_fixed(*[torch.from_numpy(x) for x in a])[0].numpy()
            lb = m_dynamic(*[torch.from_numpy(x) for x in b])[0].numpy()
        np.testing.assert_allclose(lb, la, atol=1e-5)  # the padding was masked out anyway
    assert len(widths) >= 3  # the cases take several shapes


def test_preprocess_media_and_text() -> None:
    task = DecisionTask(size="tiny")
    s = task.spec
    cases = {c.name: task.preprocess(task.parse(c.request)) for c in task.cases()}
    names = task.input_names
    invoice = dict(zip(names, cases["invoice"]))
    assert invoice["patch_mask"].sum() == 0 and invoice["token_mask"].sum() > 50
    video = dict(zip(names, cases["video"]))
    n = int(video["patch_mask"].sum())
    assert 0 < n <= s.max_patches and video["token_mask"].sum() < 50
    assert sorted(set(video["frame"][0, :n].tolist())) == list(range(8))
    assert np.allclose(video["pos_weight"][0, :n].sum(-1), 1.0)
    image = dict(zip(names, cases["image"]))
    # 96×64 upscaled to a 12×8 grid of 16-pixel patches (96 patches) for tiny
    assert int(image["patch_mask"].sum()) == 96
    assert abs(float(image["patches"][0, :96].mean())) < 3.0


def test_resize_and_positions() -> None:
    rng = np.random.default_rng(0)
    px = rng.integers(0, 256, (2, 12, 20, 3), dtype=np.uint8)
    assert np.array_equal(media.resize(px, 12, 20), px)            # same size: identity
    flat = np.full((1, 7, 5, 3), 200, np.uint8)
    assert np.all(media.resize(flat, 16, 32) == 200)                # constant stays constant
    m = media.interp_matrix(7, 3)
    assert np.allclose(m.sum(1), 1.0) and (m >= 0).all()
    idx, w = media.position_weights(4, 4, 4, rounded=True)          # native grid: the table itself
    assert np.array_equal(idx[:, 0], np.arange(16)) and np.array_equal(w[:, 0], np.ones(16))
    idx, w = media.position_weights(3, 7, 4, rounded=True)
    assert np.allclose(w.sum(1), 1.0) and idx.max() < 16
    assert np.array_equal(w * 65536, np.round(w * 65536))            # rounded: exact multiples
    _, w_raw = media.position_weights(3, 7, 5, rounded=False)
    _, w_rnd = media.position_weights(3, 7, 5, rounded=True)
    assert not np.array_equal(w_raw, w_rnd) and np.allclose(w_raw, w_rnd, atol=1 / 256)
    assert media.fit_grid(96, 64, 96) == (8, 12)
    assert media.fit_grid(4000, 10, 16) == (1, 16)
    assert media.fit_grid(1, 4096, 12) == (12, 1)
    for w, h, budget in ((3, 4096, 96), (4096, 7, 12), (17, 13, 1), (640, 480, 256)):
        rows, cols = media.fit_grid(w, h, budget)
        assert 1 <= rows * cols <= budget


def test_media_fixtures_are_generated_and_small(tmp_path: Path) -> None:
    media.write_fixtures(tmp_path)
    for name in ("image", "video"):
        assert (tmp_path / f"{name}.json").read_bytes() == (FIXTURES / f"{name}.json").read_bytes()
    for name in CASE_NAMES:
        assert (FIXTURES / f"{name}.json").stat().st_size < 200_000


def test_precision_options_change_reduced_precision_numerics() -> None:
    case = DecisionTask().cases()[3]
    outs = {}
    for fp32 in (True, False):
        opts = {"softmax_fp32": fp32, "layernorm_fp32": fp32, "logits_fp32": fp32}
        task = DecisionTask(dtype="bfloat16", options=opts)
        assert task.info()["precision"]["softmax_fp32"] is fp32
        x = [torch.from_numpy(a) for a in task.preprocess(task.parse(case.request))]
        with torch.inference_mode():
            outs[fp32] = task.build_model()(*x)[0]
    assert not torch.equal(outs[True], outs[False])
    with pytest.raises(UsageError, match="unknown task option 'softmax'"):
        load_task("decision", options={"softmax": True})
    with pytest.raises(UsageError, match="fault: 'sometimes' is not one of none, flip_answer, unrepeatable"):
        load_task(FAULTY, options={"fault": "sometimes"})
    with pytest.raises(UsageError, match="slowdown_us: must be ≥ 0"):
        load_task(FAULTY, options={"slowdown_us": -1})


def test_the_built_in_task_takes_no_test_only_option() -> None:
    for option in ("fault", "slowdown_us"):
        with pytest.raises(UsageError, match=f"unknown task option '{option}'"):
            load_task("decision", options={option: 1})


def test_the_receipt_names_the_task_options_as_understood_and_leaves_out_defaults() -> None:
    """Naming a default (or the size's own seed) asks what leaving it out asks: the receipt's task
    options are the same, so a diff of the two runs declares no model change."""
    seed = DecisionTask().spec.seed
    named = DecisionTask(options={"softmax_fp32": True, "seed": seed, "dynamic_tokens": 0})
    assert named.info()["options"] == {}
    assert DecisionTask(options={"softmax_fp32": 0, "seed": seed + 1}).info()["options"] == {
        "seed": seed + 1, "softmax_fp32": False}
    assert load_task(FAULTY, options={"slowdown_us": 7}).info()["options"] == {}


def test_the_test_task_without_its_options_is_the_built_in_task() -> None:
    plain, faulty = DecisionTask(), load_task(FAULTY)
    assert faulty.info() == plain.info() and faulty.name == "decision"
    case = plain.cases()[0]
    request = plain.parse(case.request)
    rng = np.random.default_rng(0)
    outputs = {"logits": rng.standard_normal((1, 64)).astype(np.float32)}
    for task in (plain, faulty):
        reduced = task.reduce(outputs, request)
        assert task.serialize(task.answer(reduced, request)) == plain.serialize(
            plain.answer(plain.reduce(outputs, request), request))
    slow = load_task(FAULTY, options={"slowdown_us": 7, "dynamic_tokens": True})
    assert list(slow.info())[-2:] == ["slowdown_us", "dynamic_tokens"] and slow.info()["slowdown_us"] == 7


def test_tiny_model_exports_to_onnx(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    task = DecisionTask()
    model = task.build_model()
    args = tuple(torch.from_numpy(a) for a in task.preprocess(task.parse(task.cases()[4].request)))
    path = tmp_path / "tiny.onnx"
    torch.onnx.export(model, args, str(path), dynamo=True, input_names=list(task.input_names),
                      output_names=list(task.output_names))
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto)
    assert [o.name for o in proto.graph.output] == ["logits"]
    assert [i.name for i in proto.graph.input] == list(task.input_names)


# -- weights from safetensors -----------------------------------------------------------------


def test_weights_round_trip_and_mismatches(tmp_path: Path) -> None:
    task = DecisionTask()
    state = {k: v.clone() for k, v in task.build_model().state_dict().items()}
    state["score.bias"] = torch.tensor([3.5])
    good = tmp_path / "good.safetensors"
    save_safetensors(state, good)
    loaded = load_task("decision", options={"weights": str(good)})
    assert loaded.info()["weights"]["sha256"]
    assert loaded.build_model().state_dict()["score.bias"].item() == 3.5

    missing = dict(state)
    del missing["embed.weight"]
    save_safetensors(missing, tmp_path / "missing.safetensors")
    shaped = dict(state, **{"score.bias": torch.zeros(2)})
    save_safetensors(shaped, tmp_path / "shape.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 40)
    for name, match in (("missing", "missing 1 tensor"), ("shape", "score.bias"),
                        ("junk", "not a safetensors"), ("absent", "cannot read")):
        with pytest.raises(UsageError, match=match) as e:
            load_task("decision", options={"weights": str(tmp_path / f"{name}.safetensors")})
        assert "\n" not in str(e.value)
    save_safetensors(dict(state, extra=torch.zeros(1)), tmp_path / "extra.safetensors")
    with pytest.raises(UsageError, match="1 unexpected tensor"):
        load_task("decision", options={"weights": str(tmp_path / "extra.safetensors")})
    with pytest.raises(UsageError, match="missing 24 tensor"):
        load_task("decision", size="small", options={"weights": str(good)})


def test_weights_reader_agrees_with_the_safetensors_package(tmp_path: Path) -> None:
    st_torch = pytest.importorskip("safetensors.torch")
    tensors = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3),
               "b": torch.tensor([1.5, -2.0], dtype=torch.bfloat16), "c": torch.ones(1, dtype=torch.float16)}
    st_torch.save_file(tensors, str(tmp_path / "x.safetensors"))
    ours = load_safetensors(tmp_path / "x.safetensors")
    assert all(torch.equal(ours[k], tensors[k]) for k in tensors)
    save_safetensors(tensors, tmp_path / "y.safetensors")
    theirs = st_torch.load_file(str(tmp_path / "y.safetensors"))
    assert all(torch.equal(theirs[k], tensors[k]) for k in tensors)


# -- parse errors -------------------------------------------------------------------------------


def _video() -> dict:
    return json.loads((FIXTURES / "video.json").read_text())


def _bad_requests() -> list[tuple[bytes, str]]:
    out: list[tuple[bytes, str]] = [(b"\xff\xfe", "not JSON"), (b"[1, 2]", "JSON object"),
                                    (b"{}", "missing 'document'")]

    def mutate(path: tuple[str, ...], value: object, match: str) -> None:
        obj = _video()
        node = obj
        for k in path[:-1]:
            node = node[k]
        if value is KeyError:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        out.append((json.dumps(obj).encode(), match))

    mutate(("document", "type"), "audio", "not supported")
    mutate(("document", "data"), "@@not base64@@", "not base64")
    mutate(("document", "data"), base64.b64encode(b"\0" * 99).decode(), "expected 8×48×64×3")
    mutate(("document", "frames"), 0, "frames: must be in 1..")
    mutate(("document", "width"), True, "width: expected int")
    mutate(("document", "height"), KeyError, "missing 'height'")
    mutate(("document", "encoding"), "png", "encoding")
    mutate(("document", "caption"), 7, "caption")
    mutate(("schema", "choices"), [{"label": "a"}], "need 2..")
    mutate(("schema", "choices"), [{"label": "a"}] * 9, "need 2..")
    mutate(("schema", "choices"), [{"label": "a"}, {"label": "a"}], "unique")
    mutate(("schema", "choices"), [{"label": "a"}, "b"], "expected object")
    mutate(("schema", "question"), ["q"], "question")
    return out


@pytest.mark.parametrize(("request_bytes", "match"), _bad_requests())
def test_invalid_requests_raise_one_line_value_errors(request_bytes: bytes, match: str) -> None:
    with pytest.raises(ValueError, match=match) as e:
        DecisionTask().parse(request_bytes)
    assert "\n" not in str(e.value)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(["document", "schema", "type", "text", "choices",
                                                        "label", "data", "width", "height", "frames",
                                                        "encoding", "caption", "question"]),
                                       inner, max_size=4), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(_json)
def test_parse_accepts_or_refuses_with_value_error(obj: object) -> None:
    task = DecisionTask()
    try:
        req = task.parse(json.dumps(obj).encode())
    except ValueError as e:
        assert str(e) and "\n" not in str(e)
        return
    arrays = task.preprocess(req)  # anything parse accepts, preprocess handles
    assert len(arrays) == len(task.input_names)


# -- benchbox tasks and custom tasks ---------------------------------------------------------------


def test_tasks_command_counts_match_the_built_models() -> None:
    result = CliRunner().invoke(main, ["tasks"])
    assert result.exit_code == 0, result.output
    info = {d.name: d for d in describe_tasks()}["decision"]
    assert info.cases == CASE_NAMES
    listed = {s.name: s.parameters for s in info.sizes}
    assert list(listed) == ["tiny", "small", "base", "large"]
    for size, spec in SIZES.items():
        assert listed[size] == spec.parameters                      # the stated count is the built one
        line = next(ln for ln in result.output.splitlines() if ln.split()[:1] == [size])
        assert line.split()[1] == f"{spec.parameters:,}"
        if size in ("tiny", "small"):
            assert count_parameters(build(spec, 0, torch.float32)) == listed[size]
    assert listed["large"] > 300_000_000 and SIZES["large"].sequence == 1024


def test_example_task_runs_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "sentiment.json"
    env = {**os.environ, "PYTHONPATH": ""}
    proc = subprocess.run([sys.executable, "-m", "benchbox", "run", "--task",
                           "examples.sentiment_task:make_task", "--runner", "torch-eager",
                           "--samples", "5", "--warmup", "1", "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    receipt = json.loads(out.read_text())
    assert receipt["task"]["name"] == "sentiment"
    assert {r["case"]: r["status"] for r in receipt["results"]} == {"praise": "valid",
                                                                     "complaint": "valid"}
    monkeypatch.chdir(REPO)
    listing = CliRunner().invoke(main, ["tasks", "--task", "examples.sentiment_task:make_task"])
    assert listing.exit_code == 0 and "65,602" in listing.output


def test_example_task_refuses_an_unknown_size() -> None:
    with pytest.raises(UsageError, match="one size"):
        load_task("examples.sentiment_task:make_task", size="large")


@pytest.mark.parametrize(("kind", "frames", "width", "height"),
                         [("image", 1, 1, 300), ("image", 1, 500, 2), ("video", 20, 30, 20),
                          ("video", 3, 17, 9)])
def test_any_media_shape_fits_the_fixed_inputs(kind: str, frames: int, width: int, height: int) -> None:
    task = DecisionTask()
    px = (np.arange(frames * height * width * 3) % 251).astype(np.uint8)
    doc = {"type": kind, "encoding": "rgb8", "width": width, "height": height,
           "data": base64.b64encode(px.tobytes()).decode()}
    if kind == "video":
        doc["frames"] = frames
    req = {"document": doc, "schema": {"choices": [{"label": "a"}, {"label": "b"}]}}
    arrays = dict(zip(task.input_names, task.preprocess(task.parse(json.dumps(req).encode()))))
    n = int(arrays["patch_mask"].sum())
    assert 1 <= n <= task.spec.max_patches
    assert int(arrays["frame"][0, :n].max()) == min(frames, task.spec.max_frames) - 1
    assert arrays["pos_index"].max() < task.spec.native_grid ** 2


@pytest.mark.parametrize("size", ["base", "large"])
def test_large_sizes_run_shape_only_on_meta(size: str) -> None:
    """base/large: preprocess for real, the forward on the meta device (shapes only, no memory)."""
    task = DecisionTask(size=size)
    model = task.build_model(device="meta")
    for case in (task.cases()[0], task.cases()[4]):
        arrays = task.preprocess(task.parse(case.request))
        assert arrays[4].max() < task.spec.native_grid ** 2
        (logits,) = model(*[torch.from_numpy(a).to("meta") for a in arrays])
        assert tuple(logits.shape) == (1, task.spec.max_choices) and logits.dtype == torch.float32


def test_parameter_counts_come_from_shapes_and_equal_the_built_models() -> None:
    from benchbox.tasks.decision.spec import parameter_count

    for size in ("tiny", "small"):
        assert parameter_count(SIZES[size]) == count_parameters(build(SIZES[size], 0, torch.float32))
    assert count_parameters(build(SIZES["large"], 0, torch.float32, device="meta")) == \
        parameter_count(SIZES["large"])


def test_listing_tasks_builds_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchbox.tasks.decision import model

    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("benchbox tasks built a model")

    monkeypatch.setattr(model.DecisionModel, "__init__", refuse)
    with pytest.raises(AssertionError):
        build(SIZES["tiny"], 0, torch.float32)  # the patch is in force
    info = {d.name: d for d in describe_tasks()}["decision"]
    assert {s.name: s.parameters for s in info.sizes} == {k: v.parameters for k, v in SIZES.items()}


def test_listing_tasks_does_not_import_torch() -> None:
    code = ("import sys\nfrom benchbox.cli import main\ntry:\n    main(['tasks', '--format', 'json'])\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\nassert 'torch' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)[0]["sizes"][3]["parameters"] == SIZES["large"].parameters


def test_the_decision_task_reads_its_own_gates_and_a_users_task_the_looser_generic_ones() -> None:
    from benchbox.tasks import GENERIC_GATES
    from examples.sentiment_task import make_task

    for dtype, gates in GATES.items():
        assert DecisionTask(dtype=dtype).default_gates() == gates
        assert make_task(dtype=dtype).default_gates() == GENERIC_GATES[dtype]
        assert set(GENERIC_GATES[dtype]) == set(gates)
        assert all(GENERIC_GATES[dtype][g] >= v for g, v in gates.items()), dtype


_BUILD_EXITS = ("import sys\nfrom tests.diff_tasks import SleepTask\n\n"
                "class Exits(SleepTask):\n    def build_model(self):\n        sys.exit(0)\n\n"
                "def factory(**kw):\n    return Exits(**kw)\n")


@pytest.mark.parametrize("body, said", [
    ("import sys\nsys.exit(0)\n", "sys.exit(0)"),  # was a silent exit 0
    ("class Boom(BaseException):\n    pass\n\nraise Boom('at import')\n", "Boom: at import"),  # a traceback
    (_BUILD_EXITS, "sys.exit(0)"),  # in build_model, while counting parameters
])
def test_tasks_contains_task_code_that_leaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str,
                                              said: str) -> None:
    name = f"lists_and_leaves_{abs(hash(body))}"
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.chdir(tmp_path)
    line = one_line_exit_2(["tasks", "--task", f"{name}:factory"])
    assert said in line and f"{name}:factory" in line


@pytest.mark.parametrize("factory, said", [("int_case", "case name must be a non-empty string"),
                                           ("dup_cases", "twice"), ("int_name", "task name")])
def test_tasks_validates_metadata_as_run_does(factory: str, said: str) -> None:
    line = one_line_exit_2(["tasks", "--task", f"tests.evil_tasks:{factory}", "--format", "json"])
    assert said in line


def test_names_longer_than_the_bound_are_refused_at_load(tmp_path: Path) -> None:
    from benchbox.tasks import MAX_NAME_LENGTH, check_task_metadata
    from tests.evil_tasks import long_name

    assert MAX_NAME_LENGTH == 200  # the number README states
    out = tmp_path / "r.json"
    line = one_line_exit_2(["run", "--task", "tests.evil_tasks:long_name", "--runner", "torch-eager",
                            "--samples", "3", "--warmup", "1", "--out", str(out)])
    assert "200 characters" in line and len(line) < 400, line  # the name itself is not repeated
    assert not out.exists()
    assert "200 characters" in one_line_exit_2(["tasks", "--task", "tests.evil_tasks:long_name"])
    for length, refused in ((MAX_NAME_LENGTH, False), (MAX_NAME_LENGTH + 1, True)):
        task = long_name(options={"length": length})
        try:
            check_task_metadata(task, task.cases(), "long")
        except UsageError:
            assert refused, length
        else:
            assert not refused, length
