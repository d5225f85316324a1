#!/usr/bin/env bash
# Does a fixed memory layout (`run --layout fixed`: address randomisation off, PYTHONHASHSEED=0)
# quieten the H200 host between processes? Variance components of four configurations, 8 fresh
# processes each, interleaved; then the CI recipe's design on identical code with --layout fixed.
# Results and kept receipts into $OUT.
# Usage: OUT=dir bash benchmarks/h200_layout.sh
set -u
OUT=${OUT:-.}
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.csv"
echo "start $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null)"
python3 -m benchmarks.noise_remedies --device cuda --runner torch-eager --case invoice --case image \
  --processes ${PROCS:-8} --config default --config layout_fixed --config threads1 \
  --config threads1_layout_fixed --keep /tmp/keep-layout --out "$OUT/noise-remedies-layout-h200.json" 2>&1 | tail -20
tar czf "$OUT/keep-layout.tgz" -C /tmp keep-layout
echo "remedies done at $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 -m benchmarks.ci_false_alarms --device cuda --runner torch-eager --case invoice --case image \
  --samples 400 --repeats 5 --threads 1 --warmup 10 --layout fixed --copy-head --reps ${REPS:-2} --scenario rest \
  --keep /tmp/keep-ci-layout --out "$OUT/ci-rest-layout-fixed.json" 2>&1 | tail -5
tar czf "$OUT/keep-ci-layout.tgz" -C /tmp keep-ci-layout
echo "ci done at $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
