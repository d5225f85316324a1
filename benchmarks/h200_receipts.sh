#!/usr/bin/env bash
# The baseline receipts under receipts/: one device call on an H200 (see BENCHMARKS.md).
# Each size runs every built-in contract in one process (runners prepared once).
# Usage: OUT=dir bash benchmarks/h200_receipts.sh
set -u
OUT=${OUT:-.}
common=(--device cuda --runner torch-eager --runner torch-compile --runner tensorrt
        --contract public_task_call_wall --contract model_io_wall --contract device_compute
        --contract device_span --case invoice --case image --case video
        --samples 400 --warmup 20 --runner-option torch-compile:cold_warm=false)
timeout -s INT -k 30 "${LARGE_S:-330}" python3 -m benchbox run --size large --dtype bfloat16 \
  "${common[@]}" --out "$OUT/h200-large-bf16.json" > "$OUT/large.log" 2>&1
echo "large exit $?"
timeout -s INT -k 30 "${TINY_S:-200}" python3 -m benchbox run --size tiny --dtype float32 \
  "${common[@]}" --out "$OUT/h200-tiny-fp32.json" > "$OUT/tiny.log" 2>&1
echo "tiny exit $?"
