"""Truth of the numbers: benchbox against peers and ground truth on one GPU.

For three single-kernel workloads (see kernel_task.py) this measures, in one process:
  ground truth  CUDA-graph replay of K back-to-back calls, divided by K
  events        a hand-written CUDA-event loop (plain event pair per call)
  bench.Timer   torch.utils.benchmark.Timer.blocked_autorange (host wall per call)
  do_bench      triton.testing.do_bench, median
  benchbox      device_compute (stream held), device_span (plain events), device_throughput
                (saturated: back-to-back batches), model_io_wall
and, for the matmul, benchbox's torch-compile runner against a hand-written loop over the
same compiled callable. It also measures the harness's host-clock overhead against a bare
loop timing the same (null) region. Results go to $OUT/truth.json (or --out) and a table.

Run:  python benchmarks/truth.py --out truth.json      (needs a CUDA device)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from benchbox.contracts import contract_from_dict, load_contract  # noqa: E402
from benchbox.harness import Harness, PhaseTimer  # noqa: E402
from benchbox.harness.calibration import NullRunner, NullTask, event_pair_ns  # noqa: E402
from benchbox.runners import make_runner  # noqa: E402
from benchbox.tasks import load_task  # noqa: E402
from benchmarks.kernel_task import KernelTask  # noqa: E402


def med(xs: list[float]) -> float:
    return float(statistics.median(xs))


def graph_truth_ns(f: Any, k: int, reps: int = 30) -> float:
    """CUDA-graph replay of k back-to-back calls, per call (the ground truth)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            f()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(k):
            f()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e6 / k)
    return med(out)


def event_loop_ns(f: Any, n: int, hold_cycles: int = 0) -> float:
    """A hand-written event pair around each call; optionally behind a blocking kernel."""
    out = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if hold_cycles:
            torch.cuda._sleep(hold_cycles)
        a.record()
        f()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e6)
    return med(out)


def timer_ns(f: Any) -> float:
    from torch.utils.benchmark import Timer

    m = Timer(stmt="f()", globals={"f": f}).blocked_autorange(min_run_time=1.0)
    return float(m.median * 1e9)


def do_bench_ns(f: Any) -> float | None:
    try:
        from triton.testing import do_bench
    except ImportError:
        return None
    return float(do_bench(f, warmup=50, rep=300, return_mode="median") * 1e6)


def cycles_per_ns() -> float:
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1_000_000)
    a.record()
    torch.cuda._sleep(10_000_000)
    b.record()
    b.synchronize()
    return 10_000_000 / (a.elapsed_time(b) * 1e6)


#: device_compute with the empty-pair floor kept: the same method as a hand-written held loop
RAW = contract_from_dict({"name": "device_compute_raw", "version": 1, "stages": ["compute"],
                          "clock": "device", "policy": {"hold_stream": True}})


def benchbox_ns(task: Any, runner: Any, contract: str, n: int) -> dict[str, Any]:
    c = RAW if contract == RAW.name else load_contract(contract)
    m = Harness(c).measure(task, runner, task.cases()[0].request, samples=n, warmup=20)
    return {"p50_ns": med(m.samples_ns), "clock_used": m.clock_used, "note": m.clock_note,
            "compute_enqueue_p50_ns": med(m.stages_ns["compute"])}


def spin(f: Any, seconds: float = 1.0) -> None:
    """Run the workload for a while so the GPU's clocks settle before a measurement."""
    torch.cuda.synchronize()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(10):
            f()
        torch.cuda.synchronize()


def harness_overhead(n: int = 20_000) -> dict[str, float]:
    """Per-sample host-clock overhead of the harness against a bare loop over the same region."""
    task, runner = NullTask(), NullRunner()
    req = b"{}"
    c = time.perf_counter_ns
    out: dict[str, float] = {}
    for name in ("model_io_wall", "public_task_call_wall"):
        contract = load_contract(name)
        bare = []
        for _ in range(n):
            if name == "model_io_wall":
                r = task.parse(req)
                h = task.preprocess(r)
                t0 = c()
                y = runner.d2h(runner.compute(runner.h2d(h)))
                t1 = c()
                task.serialize(task.answer(task.reduce(y, r), r))
            else:
                t0 = c()
                r = task.parse(req)
                y = runner.d2h(runner.compute(runner.h2d(task.preprocess(r))))
                task.serialize(task.answer(task.reduce(y, r), r))
                t1 = c()
            bare.append(t1 - t0)
        m = Harness(contract).measure(task, runner, req, samples=n, warmup=1000)
        out[name] = {"bare_p50_ns": med(bare), "harness_p50_ns": med(m.samples_ns),
                     "overhead_ns": med(m.samples_ns) - med(bare)}
    return out


def compile_vs_hand(task: Any, n: int, cpn: float) -> dict[str, Any]:
    """The runner's device_compute against the same compiled callable in a hand-written loop."""
    runner = make_runner("torch-compile", "cuda", {"mode": "max-autotune", "cold_warm": False})
    phases = PhaseTimer()
    example = task.preprocess(task.parse(task.cases()[0].request))
    runner.prepare(task, task.build_model(), example, phases)
    stream = runner.stream
    xin = runner.h2d(example)
    torch.cuda.synchronize()

    def g() -> Any:
        with torch.cuda.stream(stream), torch.inference_mode():
            return runner.forward(*xin)

    spin(g, 1.0)
    out: dict[str, Any] = {"prepare_s": phases.seconds}
    for contract in ("device_compute", RAW.name, "device_span"):
        out[f"benchbox_{contract}_ns"] = benchbox_ns(task, runner, contract, n)["p50_ns"]
    hand = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            torch.cuda._sleep(int(cpn * 2_000_000))
        a.record(stream)
        g()
        b.record(stream)
        b.synchronize()
        hand.append(a.elapsed_time(b) * 1e6)
    out["hand_loop_held_ns"] = med(hand)
    out["runner_vs_hand"] = out[f"benchbox_{RAW.name}_ns"] / out["hand_loop_held_ns"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "truth.json"))
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--compile-models", default="kernel_matmul,decision_small",
                    help="comma-separated: which models the compile-runner comparison compiles")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True
    from benchbox.environment import git_state

    res: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "cuda": torch.version.cuda, "git": git_state(),
                           "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "workloads": {}}
    try:
        res["gpu_uuid"] = str(torch.cuda.get_device_properties(0).uuid)
    except Exception as e:  # an older torch without the field
        res["gpu_uuid"] = f"unavailable: {type(e).__name__}"
    try:
        import triton

        res["triton"] = triton.__version__
    except ImportError:
        res["triton"] = None
    res["event_pair_floor_ns"] = event_pair_ns(torch.cuda.current_stream())
    cpn = cycles_per_ns()
    res["sleep_cycles_per_ns"] = cpn
    for size in ("add", "mid", "matmul"):
        task = KernelTask(size=size)
        runner = make_runner("torch-eager", "cuda")
        model = task.build_model()
        runner.prepare(task, model, task.preprocess(None), PhaseTimer())
        x = torch.from_numpy(task.preprocess(None)[0]).cuda()
        mod = model.cuda()

        def f(mod: Any = mod, x: Any = x) -> Any:
            return mod(x)

        k = 200 if size == "add" else 20
        spin(f, 2.0)
        w: dict[str, Any] = {"ground_truth_before_ns": graph_truth_ns(f, k)}
        w["event_loop_plain_ns"] = event_loop_ns(f, args.samples)
        w["event_loop_held_ns"] = event_loop_ns(f, args.samples, hold_cycles=int(cpn * 200_000))
        w["torch_timer_ns"] = timer_ns(f)
        w["do_bench_ns"] = do_bench_ns(f)
        for contract in ("device_compute", RAW.name, "device_span", "device_throughput", "model_io_wall"):
            spin(f, 0.5)
            w[f"benchbox_{contract}"] = benchbox_ns(task, runner, contract, args.samples)
        spin(f, 0.5)
        w["ground_truth_after_ns"] = graph_truth_ns(f, k)
        w["ground_truth_graph_ns"] = (w["ground_truth_before_ns"] + w["ground_truth_after_ns"]) / 2
        res["workloads"][size] = w
        print(size, json.dumps(w), flush=True)

    # the torch-compile runner against a hand-written loop over the same compiled callable
    res["compile_runner"] = {}
    models = {"kernel_matmul": lambda: KernelTask(size="matmul"),
              "decision_small": lambda: load_task("decision", size="small")}
    chosen = [m for m in args.compile_models.split(",") if m]
    unknown = [m for m in chosen if m not in models]
    if unknown:
        sys.exit(f"--compile-models: unknown {unknown[0]!r} (choose from {', '.join(models)})")
    for label in chosen:
        task = models[label]()
        res["compile_runner"][label] = compile_vs_hand(task, args.samples, cpn)
        print("compile", label, json.dumps(res["compile_runner"][label]), flush=True)
    res["harness_overhead"] = harness_overhead()
    print("overhead", json.dumps(res["harness_overhead"]), flush=True)
    Path(args.out).write_text(json.dumps(res, indent=1))
    table(res)


def table(res: dict[str, Any]) -> None:
    us = lambda v: f"{v / 1e3:9.2f}" if isinstance(v, (int, float)) else "      n/a"  # noqa: E731
    print(f"\n{'workload':<8} {'truth':>9} {'bb dev_c':>9} {'bb raw':>9} {'bb span':>9} {'bb thru':>9} "
          f"{'events':>9} {'ev held':>9} {'Timer':>9} {'do_bench':>9} {'bb io':>9}   (µs)")
    for size, w in res["workloads"].items():
        print(f"{size:<8} {us(w['ground_truth_graph_ns'])} {us(w['benchbox_device_compute']['p50_ns'])} "
              f"{us(w['benchbox_device_compute_raw']['p50_ns'])} "
              f"{us(w['benchbox_device_span']['p50_ns'])} "
              f"{us(w.get('benchbox_device_throughput', {}).get('p50_ns'))} {us(w['event_loop_plain_ns'])} "
              f"{us(w['event_loop_held_ns'])} {us(w['torch_timer_ns'])} {us(w['do_bench_ns'])} "
              f"{us(w['benchbox_model_io_wall']['p50_ns'])}")


if __name__ == "__main__":
    main()
