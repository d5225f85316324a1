"""The runners' device stages against the fastest hand-written loops over the same model.

For each workload (``linear``: two 512-wide linear layers, batch 1, through the public Task
API — benchmarks/linear_task.py; ``tiny`` and ``large``: the built-in decision task) and each
model (the eager module; the torch-compile runner's compiled callable; a TensorRT engine where
the tensorrt runner can run), this times in one process, in interleaved rounds:

- the runner through benchbox's own harness (``Harness.measure``): its public call
  (``public_task_call_wall``, parse..serialize) and, from the same calls, ``model_io_wall``
  (h2d..d2h); with every option ``auto`` and (on CUDA, unless ``--no-variants``) with one
  option forced at a time: ``transfer=direct|packed|staged``, ``d2h=pinned``, ``stream=side``
  (the torch-compile variants share the compiled callable of the ``auto`` runner);
- hand-written loops doing the same work, with the task's host stages called exactly as the
  harness calls them, so only the device stages differ:
  ``hand-plain``   default stream, ``torch.from_numpy(a).to(device)``, model, ``.cpu()``;
  ``hand-staged``  pinned staging buffers, a side stream (one stream context per call),
                   non-blocking copies into static device buffers, non-blocking copies out,
                   one stream synchronization;
  ``hand-packed``  one pinned block, one non-blocking copy into one device block whose views
                   are the inputs, default stream, ``.cpu()``.
  On the CPU only ``hand-plain`` applies (``torch.from_numpy``, model, ``.numpy()``).

Every round runs every method (warm-up calls, then the samples), in an order rotated each
round; a method's number is the median of its per-round p50s, with the spread between rounds
(min–max of the round p50s) and its ratio to the fastest hand loop of the same model, taken
per round and summarized the same way. Hand loops enter ``torch.inference_mode`` once per
round (as a service would); the runners enter it per call.

Results: ``--out FILE.json`` (rewritten after every workload, so a stopped run keeps what it
measured) and the markdown table on stdout. Recorded: commit, device name and GPU UUID, torch
and CUDA versions, CPU model, time, load average before and after, and every setting.
``--budget-s`` bounds the whole command: preparation (compiles) counts, and the samples per
round are sized from a first timing pass so that the rounds fit what is left.

Run:  python benchmarks/runner_overhead.py --device cuda --out results.json
      python benchmarks/runner_overhead.py --device cpu --sizes linear,tiny --rounds 2 \\
          --samples 20 --budget-s 120 --out /tmp/ro.json          (a smoke run)
      python benchmarks/runner_overhead.py --render results.json [more.json ...]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchbox.contracts import STAGES, load_contract  # noqa: E402
from benchbox.harness import Harness, PhaseTimer  # noqa: E402
from benchbox.runners import transfer  # noqa: E402

clock = time.perf_counter_ns
IO = [STAGES.index(s) for s in ("h2d", "compute", "d2h")]
DEFAULT_DTYPE = {"linear": "float32", "tiny": "float32", "large": "bfloat16"}
#: the runner options forced one at a time next to ``auto`` (CUDA only)
VARIANTS = (*(("transfer", s) for s in transfer.TRANSFERS), ("d2h", "pinned"), ("stream", "side"))


# -- workloads and models ---------------------------------------------------------------------

def make_task(workload: str, dtype: str) -> Any:
    if workload == "linear":
        from benchmarks.linear_task import LinearTask

        return LinearTask(dtype=dtype)
    from benchbox.tasks import load_task

    return load_task("decision", size=workload, dtype=dtype)


def _shared_runner_class() -> type:
    from benchbox.runners.torch_runner import TorchRunner

    class SharedForward(TorchRunner):
        """The device stages of a PyTorch runner around an already prepared callable."""

        name = "shared-forward"
        OPTION_KEYS = transfer.OPTION_KEYS
        TRANSFERS = transfer.TRANSFERS
        STATIC_INPUTS = False
        SIDE_STREAM = False

        def __init__(self, forward: Any, device: str, options: dict[str, Any]) -> None:
            super().__init__(device, options)
            self._shared = forward

        def prepare(self, task: Any, model: Any, example: Any, phases: Any) -> None:
            self.forward = self._shared
            self.input_names = tuple(task.input_names)
            self.output_names = tuple(task.output_names)
            self._allocate(example)

    return SharedForward


# -- hand-written loops -------------------------------------------------------------------------

def hand_loops(fn: Callable[..., Any], example: tuple[np.ndarray, ...], names: tuple[str, ...],
               device: str, bound: list[Any] | None = None, stream: Any = None
               ) -> dict[str, Callable[[tuple[np.ndarray, ...]], dict[str, np.ndarray]]]:
    """The hand-written device stages over ``fn(*device_inputs) -> outputs``.

    ``bound``/``stream``: a model reading fixed device buffers on its own stream (an engine):
    the plain loop copies into those buffers, everything runs on that stream.
    """
    import torch

    if not device.startswith("cuda"):
        def cpu_plain(host: tuple[np.ndarray, ...]) -> dict[str, np.ndarray]:
            out = fn(*[torch.from_numpy(a) for a in host])
            return {n: o.numpy() for n, o in zip(names, out)}
        return {"hand-plain": cpu_plain}

    dev = torch.device(device)
    loops: dict[str, Callable[[tuple[np.ndarray, ...]], dict[str, np.ndarray]]] = {}
    if bound is None:
        def plain(host: tuple[np.ndarray, ...]) -> dict[str, np.ndarray]:
            out = fn(*[torch.from_numpy(a).to(dev) for a in host])
            return {n: o.cpu().numpy() for n, o in zip(names, out)}
    else:
        def plain(host: tuple[np.ndarray, ...]) -> dict[str, np.ndarray]:
            with torch.cuda.stream(stream):
                for b, a in zip(bound, host):
                    b.copy_(torch.from_numpy(a))
                out = fn(*bound)
                return {n: o.cpu().numpy() for n, o in zip(names, out)}
    loops["hand-plain"] = plain

    side = stream if stream is not None else torch.cuda.Stream(dev)
    pins = [torch.from_numpy(a).pin_memory() for a in example]
    views = [p.numpy() for p in pins]
    static = bound if bound is not None else [torch.empty_like(p, device=dev) for p in pins]

    def staged(host: tuple[np.ndarray, ...]) -> dict[str, np.ndarray]:
        with torch.cuda.stream(side):
            for v, a in zip(views, host):
                v[...] = a
            for d, p in zip(static, pins):
                d.copy_(p, non_blocking=True)
            out = fn(*static)
            back = [o.to("cpu", non_blocking=True) for o in out]
        side.synchronize()
        return {n: h.numpy() for n, h in zip(names, back)}
    loops["hand-staged"] = staged

    if bound is None:
        lay = transfer.pack_layout(example, chunk=1 << 62)  # one copy
        block = torch.empty(lay.total, dtype=torch.uint8).pin_memory()
        dblock = torch.empty(lay.total, dtype=torch.uint8, device=dev)
        hb = block.numpy()
        hviews = [hb[o:o + n].view(a.dtype).reshape(a.shape)
                  for a, o, n in zip(example, lay.offsets, lay.nbytes)]
        dviews = [dblock[o:o + n].view(transfer.torch_dtype(a.dtype)).view(a.shape)
                  for a, o, n in zip(example, lay.offsets, lay.nbytes)]

        def packed(host: tuple[np.ndarray, ...]) -> dict[str, np.ndarray]:
            for v, a in zip(hviews, host):
                v[...] = a
            dblock.copy_(block, non_blocking=True)
            out = fn(*dviews)
            return {n: o.cpu().numpy() for n, o in zip(names, out)}
        loops["hand-packed"] = packed
    return loops


# -- one method's samples -----------------------------------------------------------------------

class Method:
    """Something that takes n public calls of one request and returns (public, model_io) ns each."""

    def __init__(self, model: str, name: str, kind: str) -> None:
        self.model, self.name, self.kind = model, name, kind
        self.rounds: list[dict[str, float]] = []
        self.facts: dict[str, Any] = {}

    def run(self, task: Any, request: bytes, n: int, warmup: int) -> tuple[list[int], list[int]]:
        raise NotImplementedError

    def respond(self, task: Any, request: bytes) -> bytes:
        """One untimed call's response bytes."""
        raise NotImplementedError


class RunnerMethod(Method):
    def __init__(self, model: str, name: str, runner: Any) -> None:
        super().__init__(model, name, "runner")
        self.runner = runner
        self.harness = Harness(load_contract("public_task_call_wall"))

    def run(self, task: Any, request: bytes, n: int, warmup: int) -> tuple[list[int], list[int]]:
        m = self.harness.measure(task, self.runner, request, samples=n, warmup=warmup)
        io = [sum(m.stages_ns[STAGES[i]][k] for i in IO) for k in range(len(m.samples_ns))]
        return list(m.samples_ns), io

    def respond(self, task: Any, request: bytes) -> bytes:
        return bytes(self.harness.call(task, self.runner, request).response)


class HandMethod(Method):
    def __init__(self, model: str, name: str, device_stages: Callable[..., Any]) -> None:
        super().__init__(model, name, "hand")
        self.device_stages = device_stages

    def run(self, task: Any, request: bytes, n: int, warmup: int) -> tuple[list[int], list[int]]:
        import torch

        dev = self.device_stages
        parse, preprocess, reduce, answer, serialize = (task.parse, task.preprocess, task.reduce,
                                                        task.answer, task.serialize)
        pub: list[int] = []
        io: list[int] = []
        with torch.inference_mode():
            for k in range(warmup + n):
                t0 = clock()
                req = parse(request)
                host = preprocess(req)
                t1 = clock()
                out = dev(host)
                t2 = clock()
                serialize(answer(reduce(out, req), req))
                t3 = clock()
                if k >= warmup:
                    pub.append(t3 - t0)
                    io.append(t2 - t1)
        return pub, io

    def respond(self, task: Any, request: bytes) -> bytes:
        import torch

        with torch.inference_mode():
            req = task.parse(request)
            out = self.device_stages(task.preprocess(req))
            return bytes(task.serialize(task.answer(task.reduce(out, req), req)))


# -- preparing a workload ------------------------------------------------------------------------

def prepare_methods(task: Any, device: str, runners: list[str], variants: bool, compile_mode: str,
                    log: Callable[[str], None]) -> tuple[list[Method], dict[str, Any]]:
    import torch

    from benchbox.runners import availability, make_runner

    example = task.preprocess(task.parse(task.cases()[0].request))
    names = tuple(task.output_names)
    cuda = device.startswith("cuda")
    methods: list[Method] = []
    notes: dict[str, Any] = {"prepare_s": {}, "unavailable": {}}
    shared = _shared_runner_class()

    def add_hand(model: str, fn: Callable[..., Any], **kw: Any) -> None:
        for name, loop in hand_loops(fn, example, names, device, **kw).items():
            methods.append(HandMethod(model, name, loop))

    for rname in runners:
        reason = availability(rname, device)
        if reason is not None:
            notes["unavailable"][rname] = reason
            log(f"{rname}: cannot run here: {reason}")
            continue
        opts: dict[str, Any] = {}
        if rname == "torch-compile":
            opts = {"mode": compile_mode, "cold_warm": False}
        phases = PhaseTimer()
        t0 = time.perf_counter()
        runner = make_runner(rname, device, opts)
        runner.prepare(task, task.build_model(), example, phases)
        notes["prepare_s"][rname] = {"total": time.perf_counter() - t0, **phases.seconds}
        log(f"{rname}: prepared in {time.perf_counter() - t0:.1f} s")
        methods.append(RunnerMethod(rname, f"{rname} (auto)", runner))
        if rname == "tensorrt":
            # the engine reads the buffers it was bound to, on the runner's stream
            add_hand(rname, lambda *x, r=runner: r.compute(x), bound=list(runner._inputs),
                     stream=runner.stream)
            continue
        fn = runner.forward
        add_hand(rname, fn)
        if cuda and variants:
            for key, value in VARIANTS:
                if rname == "torch-eager":
                    v = make_runner(rname, device, {key: value})
                else:
                    v = shared(fn, device, {key: value})
                v.prepare(task, fn, example, PhaseTimer())  # the same module (eager) or callable
                methods.append(RunnerMethod(rname, f"{rname} ({key}={value})", v))
    if cuda:
        torch.cuda.synchronize()
    return methods, notes


# -- the measurement ---------------------------------------------------------------------------

def _med(xs: list[float]) -> float:
    return float(statistics.median(xs))


def _recompiles() -> int:
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return 0
    return int(sum(counters["stats"].values())) if "stats" in counters else 0


def measure_workload(workload: str, dtype: str, args: argparse.Namespace, deadline: float,
                     log: Callable[[str], None]) -> dict[str, Any]:
    import torch

    task = make_task(workload, dtype)
    case = args.case if args.case and workload != "linear" else task.cases()[0].name
    request = next(c.request for c in task.cases() if c.name == case)
    methods, notes = prepare_methods(task, args.device, args.runners, args.variants, args.compile_mode, log)
    # a first pass: every method answers the request (the same bytes within a model, or the
    # comparison is void), warms up and times its calls, to size the rounds
    per_call: dict[str, float] = {}
    responses: dict[str, set[bytes]] = {}
    for m in methods:
        responses.setdefault(m.model, set()).add(m.respond(task, request))
        t0 = time.perf_counter()
        m.run(task, request, max(1, args.warmup), 2)
        per_call[m.name] = (time.perf_counter() - t0) / (max(1, args.warmup) + 2)
    notes["responses_agree"] = {model: len(r) == 1 for model, r in responses.items()}
    per_round_call_s = sum(per_call.values())
    left = max(0.0, deadline - time.perf_counter())
    fit = int(left * 0.85 / max(1, args.rounds) / max(per_round_call_s, 1e-9)) - args.warmup
    n = max(args.min_samples, min(args.samples, fit))
    rounds = args.rounds
    log(f"{workload}: {len(methods)} methods, {n} samples × {rounds} rounds "
        f"(≈ {per_round_call_s * (n + args.warmup) * rounds:.0f} s)")
    graphs_before = _recompiles()
    done = 0
    for r in range(rounds):
        if r and time.perf_counter() > deadline:
            log(f"{workload}: time budget reached after {r} rounds")
            break
        k = r % len(methods)
        for m in methods[k:] + methods[:k]:
            gc.collect()
            pub, io = m.run(task, request, n, args.warmup)
            m.rounds.append({"public_p50_ns": _med(pub), "io_p50_ns": _med(io),
                             "public_p90_ns": float(np.quantile(pub, 0.9)), "n": len(pub)})
        done += 1
    out: dict[str, Any] = {"workload": workload, "task": task.name, "size": task.size, "dtype": dtype,
                           "case": case, "samples_per_round": n, "warmup": args.warmup, "rounds": done,
                           "dynamo_stats_change_while_measuring": _recompiles() - graphs_before,
                           **notes, "methods": []}
    for model in dict.fromkeys(m.model for m in methods):
        mine = [m for m in methods if m.model == model]
        hands = [m for m in mine if m.kind == "hand"]
        for m in mine:
            row: dict[str, Any] = {"model": model, "method": m.name, "kind": m.kind, "rounds": m.rounds}
            for key in ("public", "io"):
                vals = [x[f"{key}_p50_ns"] for x in m.rounds]
                best = [min(h.rounds[i][f"{key}_p50_ns"] for h in hands) for i in range(len(vals))]
                ratios = [v / b for v, b in zip(vals, best)]
                row[key] = {"p50_ns": _med(vals), "round_min_ns": min(vals), "round_max_ns": max(vals),
                            "vs_fastest_hand": _med(ratios), "vs_fastest_hand_min": min(ratios),
                            "vs_fastest_hand_max": max(ratios)}
            if m.kind == "runner":
                rep = m.runner.report()  # type: ignore[attr-defined]
                row["transfer"] = rep.get("transfer")
            out["methods"].append(row)
        fastest = min(hands, key=lambda h: _med([x["public_p50_ns"] for x in h.rounds]))
        out.setdefault("fastest_hand", {})[model] = fastest.name
    del methods
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out


def environment(device: str) -> dict[str, Any]:
    import torch

    from benchbox.environment import cpu_model, git_state

    env: dict[str, Any] = {"git": git_state(), "python": platform.python_version(),
                           "torch": torch.__version__, "cpu": cpu_model(), "cpu_count": os.cpu_count(),
                           "device": device}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        env.update(gpu=torch.cuda.get_device_name(torch.device(device)), cuda=torch.version.cuda)
        try:
            env["gpu_uuid"] = str(props.uuid)
        except Exception as e:  # an older torch without the field
            env["gpu_uuid"] = f"unavailable: {type(e).__name__}"
    return env


# -- the table ---------------------------------------------------------------------------------

def _us(ns: float) -> str:
    return f"{ns / 1e3:.1f}"


def _ratio(r: dict[str, float]) -> str:
    return (f"{(r['vs_fastest_hand'] - 1) * 100:+.1f}% "
            f"({(r['vs_fastest_hand_min'] - 1) * 100:+.1f}…{(r['vs_fastest_hand_max'] - 1) * 100:+.1f})")


def _transfer(t: dict[str, Any] | None) -> str:
    if not t:
        return ""
    if t.get("h2d") == "none":
        return "cpu: none"
    return f"{t['h2d']} ({t['copies_per_call']} copies) / {t.get('d2h', '?')} / {t['stream']}"


def render(results: list[dict[str, Any]]) -> str:
    """Markdown: one table per result file."""
    out = []
    for res in results:
        env = res["environment"]
        where = env.get("gpu") or env.get("cpu")
        out.append(f"**{where}** ({env['device']}, {env.get('gpu_uuid', 'no GPU')}), commit "
                   f"{(env['git'] or {}).get('commit', '?')}, {res['measured_at']}, load average "
                   f"{res['loadavg_before'][0]:.2f} → {res['loadavg_after'][0]:.2f}; torch {env['torch']}.")
        out.append("")
        out.append("| workload | model | method | public call p50 µs (rounds) | vs fastest hand | "
                   "model_io p50 µs (rounds) | vs fastest hand | transfer (h2d / d2h / stream) |")
        out.append("|---|---|---|---|---|---|---|---|")
        for w in res["workloads"]:
            label = f"{w['workload']} ({w['dtype']}, {w['samples_per_round']}×{w['rounds']})"
            for m in w["methods"]:
                p, io = m["public"], m["io"]
                star = " ★" if m["method"] == w["fastest_hand"].get(m["model"]) else ""
                out.append(f"| {label} | {m['model']} | {m['method']}{star} | {_us(p['p50_ns'])} "
                           f"({_us(p['round_min_ns'])}–{_us(p['round_max_ns'])}) | {_ratio(p)} | "
                           f"{_us(io['p50_ns'])} ({_us(io['round_min_ns'])}–{_us(io['round_max_ns'])}) | "
                           f"{_ratio(io)} | {_transfer(m.get('transfer'))} |")
            for name, why in (w.get("unavailable") or {}).items():
                out.append(f"| {label} | {name} | not run: {why} | | | | | |")
            for model, same in (w.get("responses_agree") or {}).items():
                if not same:
                    out.append(f"| {label} | {model} | **responses differ between methods** | | | | | |")
        out.append("")
    out.append("★ the fastest hand loop of that model (median of round p50s); ratios are per round "
               "against the fastest hand loop of the round, median (min…max).")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sizes", default="linear,tiny,large", help="comma-separated: linear, tiny, large")
    ap.add_argument("--runners", default="torch-eager,torch-compile,tensorrt")
    ap.add_argument("--dtype", default="auto", help="model dtype; auto: linear/tiny float32, large bfloat16")
    ap.add_argument("--case", default="invoice", help="decision case to send (linear has its own)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--samples", type=int, default=300, help="samples per method per round, at most")
    ap.add_argument("--min-samples", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--budget-s", type=float, default=540.0, help="wall-time bound for the whole command")
    ap.add_argument("--compile-mode", default="max-autotune")
    ap.add_argument("--no-variants", dest="variants", action="store_false",
                    help="only the auto options for the runners (no forced strategies)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "runner-overhead.json"))
    ap.add_argument("--render", nargs="+", metavar="JSON", help="only print the table of these result files")
    args = ap.parse_args(argv)
    if args.render:
        print(render([json.loads(Path(p).read_text()) for p in args.render]))
        return 0
    sizes = [s for s in args.sizes.split(",") if s]
    bad = [s for s in sizes if s not in DEFAULT_DTYPE]
    if bad or not sizes:
        ap.error(f"--sizes: unknown {bad[0] if bad else 'none'} (linear, tiny, large)")
    args.runners = [r for r in args.runners.split(",") if r]
    if args.rounds < 1 or args.samples < 1 or args.warmup < 0 or args.min_samples < 1:
        ap.error("--rounds, --samples, --min-samples must be ≥ 1 and --warmup ≥ 0")
    start = time.perf_counter()
    deadline = start + args.budget_s

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    res: dict[str, Any] = {"benchmark": "runner_overhead", "command": ["python", *sys.argv],
                           "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "loadavg_before": list(os.getloadavg()), "environment": environment(args.device),
                           "settings": {k: v for k, v in vars(args).items() if k != "render"},
                           "transfer_constants": {"align_bytes": transfer.ALIGN_BYTES,
                                                  "pack_chunk_bytes": transfer.PACK_CHUNK_BYTES,
                                                  "d2h_blocking_max_bytes": transfer.D2H_BLOCKING_MAX_BYTES},
                           "workloads": []}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for i, size in enumerate(sizes):
        dtype = DEFAULT_DTYPE[size] if args.dtype == "auto" else args.dtype
        # an equal share of what is left for each workload still to run
        share = (deadline - time.perf_counter()) / (len(sizes) - i)
        if share <= 0:
            log(f"{size}: skipped, no time left")
            res["workloads"].append({"workload": size, "skipped": "time budget spent"})
            continue
        res["workloads"].append(measure_workload(size, dtype, args, time.perf_counter() + share, log))
        res["loadavg_after"] = list(os.getloadavg())
        res["wall_s"] = time.perf_counter() - start
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1))
        os.replace(tmp, out)
    res["workloads"] = [w for w in res["workloads"] if "methods" in w] + \
        [w for w in res["workloads"] if "methods" not in w]
    out.write_text(json.dumps(res, indent=1))
    print(render([{**res, "workloads": [w for w in res["workloads"] if "methods" in w]}]))
    log(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
