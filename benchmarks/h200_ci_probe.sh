#!/usr/bin/env bash
# The CI recipe's design on one H200, with the process probe: +10% on HEAD, then identical code,
# each side 5 alternating one-round fresh processes, the recipe's defaults (80 samples a
# process: --samples 400 over --repeats 5, --threads 1, --warmup 10). Results and the kept receipts (one tarball each) into $OUT.
# Usage: OUT=dir bash benchmarks/h200_ci_probe.sh
set -u
OUT=${OUT:-.}
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.csv"
common="--device cuda --runner torch-eager --case invoice --case image --samples 400 --repeats 5
        --threads 1 --warmup 10 --reps ${REPS:-1}"
for scen in rest+slow rest; do
  name=${scen/+/-}
  # shellcheck disable=SC2086
  python3 -m benchmarks.ci_false_alarms $common --scenario "$scen" --slowdown-us 194 \
    --keep "/tmp/keep-$name" --out "$OUT/ci-$name.json" 2>&1 | tail -5
  tar czf "$OUT/keep-$name.tgz" -C /tmp "keep-$name"
  echo "$scen done at $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
done
