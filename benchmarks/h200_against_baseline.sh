#!/usr/bin/env bash
# The committed tiny baseline (receipts/h200-tiny-fp32.*.json) measured again at this commit, in
# one device call, and diffed against it contract by contract; then the tiny run as three rounds,
# each in a fresh process, with the compile pinned by the first run of this call.
# Usage: OUT=dir COMMIT=sha bash benchmarks/h200_against_baseline.sh   (TINY_S, ROUNDS_S: time limits)
set -u
OUT=${OUT:-.}
cd "$(dirname "$0")/.."
export BENCHBOX_CACHE=${BENCHBOX_CACHE:-$(mktemp -d)}   # outside OUT: the caches do not come back
{
  echo "commit ${COMMIT:-unknown}"
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} > "$OUT/machine.txt" 2>&1
SIZES=tiny TINY_S=${TINY_S:-300} OUT="$OUT" bash benchmarks/h200_receipts.sh
for base in receipts/h200-tiny-fp32.*.json; do
  name=$(basename "$base")
  [[ -f "$OUT/$name" ]] || { echo "no $name"; continue; }
  python3 -m benchbox diff "$base" "$OUT/$name" --format json > "$OUT/diff-$name" 2>> "$OUT/diff.log"
  echo "diff $name exit $?"
  python3 -m benchbox diff "$base" "$OUT/$name" --format markdown > "$OUT/diff-${name%.json}.md" 2>> "$OUT/diff.log"
done
timeout -s INT -k 30 "${ROUNDS_S:-200}" python3 -m benchbox run --size tiny --dtype float32 --device "${DEVICE:-cuda}" \
  --runner torch-eager --runner torch-compile --contract device_compute --contract public_task_call_wall \
  --case invoice --case video --samples 300 --warmup 20 --repeats 3 --fresh-processes \
  --runner-option torch-compile:cold_warm=false --out "$OUT/rounds.json" > "$OUT/rounds.log" 2>&1
echo "rounds exit $?"
