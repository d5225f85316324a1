#!/usr/bin/env bash
# Latency under load, measured by benchbox itself (see BENCHMARKS.md, "Latency under load").
#
#   bash benchmarks/sweep_evidence.sh OUT_DIR
#
# 1. load/<size>/: `benchbox sweep` of the decision task (each size) for torch-eager and
#    torch-compile, one case, under the public call from the scheduled arrival
#    (public_task_call_poisson: queue..serialize; queue is 0 when calls do not overlap) and
#    model_io_wall (read from the same calls): back to back, idle gaps (slept and
#    busy-waited) and Poisson rates stated as fractions of each runner's back-to-back
#    throughput.
# 2. gap/<device>/: the gap effect with a small task through the public Task API (two
#    512-wide linear layers, benchmarks/linear_task.py), torch-eager: model_io_wall,
#    device_compute and the complete call (every stage) under the same gaps, on the GPU and
#    on the CPU. Every receipt keeps every stage of every sample, so the per-stage table
#    (benchmarks/sweep_table.py) says where a gap's cost lands.
#
# Budget: about 6 minutes of wall time on one H200 with 16 cores (each step has its own
# time limit; SIGINT at the limit keeps every receipt written so far). Knobs (environment):
#   DEVICE=cuda  SIZES="tiny large"  RUNNERS="torch-eager torch-compile"  CASE=invoice
#   GAPS="0 0.2 1 5 20" (ms)  RATES="0.3x 0.6x 0.9x 1.2x"  IDLES="sleep busy"
#   TINY_SAMPLES=300 LARGE_SAMPLES=150 SAMPLES=300 (the gap/ steps)  WARMUP=20
#     (a p99 with a two-sided 95% interval needs ≥ 368 samples: give 400 and raise the time limits)
#   SETTLE_S=2 (untimed back-to-back calls before each runner's first point, after its compile)
#   COMPILE_MODE=default (max-autotune compiles far longer)
#   TINY_S=110 LARGE_S=150 GAP_S=50 CPU_GAP_S=45  (time limits per step, seconds)
# A Poisson point takes samples / (fraction × throughput): low fractions of a slow size cost most.
#   GAP_DEVICES="cuda cpu"
# Receipts: OUT_DIR/load/<size>/*.json and OUT_DIR/gap/<device>/*.json, each folder with its
# sweep.json index; logs beside them; tables in OUT_DIR/tables.md.
set -u
if [ $# -ne 1 ]; then
  echo "usage: bash benchmarks/sweep_evidence.sh OUT_DIR" >&2
  exit 2
fi
OUT=$1
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p "$OUT"
DEVICE=${DEVICE:-cuda}
CASE=${CASE:-invoice}
SAMPLES=${SAMPLES:-300}
WARMUP=${WARMUP:-20}
SETTLE=${SETTLE_S:-2}
MODE=${COMPILE_MODE:-default}

repeat() {  # repeat FLAG VALUES...: FLAG V1 FLAG V2 ...
  local flag=$1; shift
  for v in "$@"; do printf '%s\n%s\n' "$flag" "$v"; done
}
mapfile -t gaps < <(repeat --gap ${GAPS:-0 0.2 1 5 20})
mapfile -t rates < <(repeat --rate ${RATES:-0.3x 0.6x 0.9x 1.2x})
mapfile -t idles < <(repeat --idle ${IDLES:-sleep busy})
mapfile -t runners < <(repeat --runner ${RUNNERS:-torch-eager torch-compile})
compile_opts=()
case " ${RUNNERS:-torch-compile} " in
  *" torch-compile "*) compile_opts=(--runner-option "torch-compile:mode=$MODE"
                                     --runner-option torch-compile:cold_warm=false) ;;
esac

start=$(date +%s)
for size in ${SIZES:-tiny large}; do
  dtype=float32; limit=${TINY_S:-110}; n=${TINY_SAMPLES:-300}
  if [ "$size" = large ]; then dtype=bfloat16; limit=${LARGE_S:-150}; n=${LARGE_SAMPLES:-150}; fi
  dir="$OUT/load/$size"
  mkdir -p "$dir"
  timeout -s INT -k 20 "$limit" "$PY" -m benchbox sweep --device "$DEVICE" --size "$size" --dtype "$dtype" \
    "${runners[@]}" --case "$CASE" --samples "$n" --warmup "$WARMUP" --settle-s "$SETTLE" \
    --contract public_task_call_poisson --contract model_io_wall \
    "${gaps[@]}" "${rates[@]}" "${idles[@]}" \
    "${compile_opts[@]}" --out-dir "$dir" > "$dir/sweep.log" 2>&1
  echo "load/$size exit $? after $(( $(date +%s) - start )) s"
done

for dev in ${GAP_DEVICES:-$DEVICE cpu}; do
  limit=${GAP_S:-50}
  if [ "$dev" = cpu ]; then limit=${CPU_GAP_S:-45}; fi
  dir="$OUT/gap/$dev"
  mkdir -p "$dir"
  timeout -s INT -k 20 "$limit" "$PY" -m benchbox sweep --device "$dev" \
    --task benchmarks.linear_task:make_task --case x0 --runner torch-eager --samples "$SAMPLES" --warmup "$WARMUP" \
    --settle-s "$SETTLE" \
    --contract public_task_call_wall --contract model_io_wall --contract device_compute \
    "${gaps[@]}" "${idles[@]}" --out-dir "$dir" > "$dir/sweep.log" 2>&1
  echo "gap/$dev exit $? after $(( $(date +%s) - start )) s"
done

"$PY" -m benchmarks.sweep_table "$OUT"/load/* "$OUT"/gap/* > "$OUT/tables.md" 2> "$OUT/tables.log"
echo "tables exit $?"
for d in "$OUT"/load/* "$OUT"/gap/*; do  # figures where matplotlib is installed (the analysis extra)
  [ -f "$d/sweep.json" ] && "$PY" -m benchbox plot --kind sweep "$d/sweep.json" -o "$d/sweep.png" \
    >> "$OUT/tables.log" 2>&1
done
echo "done after $(( $(date +%s) - start )) s"
