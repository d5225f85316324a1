#!/usr/bin/env bash
# The baseline receipts under receipts/: one device call on an H200 (see BENCHMARKS.md).
# Each size runs every built-in contract in one process (runners prepared once); tiny first,
# so the short run is done before the long one's cold max-autotune compile.
# Usage: OUT=dir bash benchmarks/h200_receipts.sh      (TINY_S, LARGE_S: time limits in s;
#        CONTRACTS="a b": only these contracts, default every built-in back-to-back one; the
#        served-traffic contracts are swept by benchmarks/sweep_evidence.sh; SIZES="tiny":
#        only these sizes, default "tiny large"; COMPILE_DRAWS=3: torch-compile pins the
#        fastest of 3 fresh compiles, each timed by the harness, default 1; DEVICE=cpu: a smoke
#        test of the script on a machine without a GPU)
set -u
OUT=${OUT:-.}
contracts=()
for c in ${CONTRACTS:-$(python3 -c "from benchbox.contracts import builtin_contracts as b
print(*(c.name for c in b() if not c.arrival.paced))")}; do
  contracts+=(--contract "$c")
done
common=(--device "${DEVICE:-cuda}" --runner torch-eager --runner torch-compile --runner tensorrt "${contracts[@]}"
        --case invoice --case image --case video
        --samples 400 --warmup 20 --runner-option torch-compile:cold_warm=false
        --runner-option "torch-compile:draws=${COMPILE_DRAWS:-1}")
sizes=" ${SIZES:-tiny large} "
if [[ $sizes == *" tiny "* ]]; then
  timeout -s INT -k 30 "${TINY_S:-240}" python3 -m benchbox run --size tiny --dtype float32 \
    "${common[@]}" --out "$OUT/h200-tiny-fp32.json" > "$OUT/tiny.log" 2>&1
  echo "tiny exit $?"
fi
if [[ $sizes == *" large "* ]]; then
  timeout -s INT -k 30 "${LARGE_S:-900}" python3 -m benchbox run --size large --dtype bfloat16 \
    "${common[@]}" --out "$OUT/h200-large-bf16.json" > "$OUT/large.log" 2>&1
  echo "large exit $?"
fi
