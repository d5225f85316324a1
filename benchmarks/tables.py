"""Print the markdown tables of BENCHMARKS.md from the committed results.

Run:  python benchmarks/tables.py
Reads receipts/h200-*.json, benchmarks/results-h200-truth.json (and, for the one model
the latest truth run did not compile, benchmarks/results-h200-truth-earlier.json) and
benchmarks/results-h200-clocks.json; needs no GPU and no torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = ("public_task_call_wall", "model_io_wall", "device_span", "device_compute", "device_throughput")


def ms(ns: Any) -> str:
    return f"{ns / 1e6:.3f}" if isinstance(ns, (int, float)) else "–"


def receipts_table(stem: str) -> str:
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for c in CONTRACTS:
        p = ROOT / "receipts" / f"{stem}.{c}.json"
        r = json.loads(p.read_text())
        for row in r["results"]:
            s = row["summary"]
            flag = "" if row["status"] == "valid" else " (invalid)"
            cell = "failed" if row["status"] == "failed" else (
                f"{ms(s.get('p50_ns'))} / {ms(s.get('p99_ns'))}{flag}")
            rows.setdefault((row["case"], row["runner"]), {})[c] = cell
    out = ["| case | runner | " + " | ".join(CONTRACTS) + " |", "|---|---|" + "---|" * len(CONTRACTS)]
    for (case, runner), cells in rows.items():
        out.append(f"| {case} | {runner} | " + " | ".join(cells.get(c, "not run") for c in CONTRACTS) + " |")
    return "\n".join(out)


def _gap(value: float, truth: float) -> str:
    return f"{(value - truth) / 1e3:+.2f} µs ({(value / truth - 1) * 100:+.1f}%)"


def truth_table() -> str:
    t = json.loads((ROOT / "benchmarks" / "results-h200-truth.json").read_text())
    earlier = json.loads((ROOT / "benchmarks" / "results-h200-truth-earlier.json").read_text())
    us = lambda v: f"{v / 1e3:.2f}" if isinstance(v, (int, float)) else "–"  # noqa: E731
    out = ["| workload | ground truth (graph replay / K) | benchbox device_compute | gap | "
           "benchbox device_throughput | gap | benchbox device_compute, floor kept | hand events, held | "
           "plain events | torch Timer | triton do_bench | benchbox device_span |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, w in t["workloads"].items():
        truth = w["ground_truth_graph_ns"]
        dc = w["benchbox_device_compute"]["p50_ns"]
        dt = w["benchbox_device_throughput"]["p50_ns"]
        out.append(f"| {name} | {us(truth)} (before {us(w['ground_truth_before_ns'])}, after "
                   f"{us(w['ground_truth_after_ns'])}) | {us(dc)} | {_gap(dc, truth)} | {us(dt)} | "
                   f"{_gap(dt, truth)} | "
                   f"{us(w['benchbox_device_compute_raw']['p50_ns'])} | {us(w['event_loop_held_ns'])} | "
                   f"{us(w['event_loop_plain_ns'])} | {us(w['torch_timer_ns'])} | {us(w['do_bench_ns'])} | "
                   f"{us(w['benchbox_device_span']['p50_ns'])} |")
    out.append("")
    out.append("| compiled model | run | benchbox device_compute (floor kept) | "
               "hand-written loop, same method | ratio |")
    out.append("|---|---|---|---|---|")
    runs = [("this run", t), ("earlier run", earlier)]
    seen = set()
    for label, res in runs:
        for name, c in res["compile_runner"].items():
            if name in seen:
                continue
            seen.add(name)
            out.append(f"| {name} | {label} | {us(c['benchbox_device_compute_raw_ns'])} µs | "
                       f"{us(c['hand_loop_held_ns'])} µs | {c['runner_vs_hand']:.4f} |")
    out.append("")
    out.append("| region (null task, host clock) | bare loop p50 | benchbox p50 | overhead per sample |")
    out.append("|---|---|---|---|")
    for name, o in t["harness_overhead"].items():
        out.append(f"| {name} | {o['bare_p50_ns']:.0f} ns | {o['harness_p50_ns']:.0f} ns | "
                   f"{o['overhead_ns']:.0f} ns |")
    return "\n".join(out)


def clocks_table() -> str:
    c = json.loads((ROOT / "benchmarks" / "results-h200-clocks.json").read_text())
    out = ["| 4096³ fp16 matmul | SM clock (median) | power (median) |", "|---|---|---|"]
    for p in c:
        out.append(f"| {p['phase']} | {p['sm_clock_mhz_median']:.0f} MHz | {p['power_w_median']:.0f} W |")
    return "\n".join(out)


if __name__ == "__main__":
    print("## truth\n")
    print(truth_table())
    print("\n## clocks\n")
    print(clocks_table())
    for stem in ("h200-tiny-fp32", "h200-large-bf16"):
        print(f"\n## {stem}: p50 / p99 ms\n")
        print(receipts_table(stem))
