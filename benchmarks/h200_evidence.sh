#!/usr/bin/env bash
# Everything BENCHMARKS.md reports from the H200, in one go, into $OUT:
# truth.json (benchbox vs peers vs ground truth), clocks.json (SM clock and power),
# then the baseline receipts (benchmarks/h200_receipts.sh). Logs beside them.
# Usage: OUT=dir [COMPILE_MODELS=kernel_matmul,decision_small] bash benchmarks/h200_evidence.sh
set -u
OUT=${OUT:-.}
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.csv"
python3 benchmarks/truth.py --out "$OUT/truth.json" \
  --compile-models "${COMPILE_MODELS:-kernel_matmul,decision_small}" > "$OUT/truth.log" 2>&1
echo "truth exit $?"
python3 benchmarks/clocks_probe.py > "$OUT/clocks.json" 2> "$OUT/clocks.log"
echo "clocks exit $?"
OUT="$OUT" bash benchmarks/h200_receipts.sh
