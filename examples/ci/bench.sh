#!/usr/bin/env bash
# Measure base and head on this machine, in interleaved runs, and diff them.
#
#   examples/ci/bench.sh BASE_DIR HEAD_DIR OUT_DIR [benchbox run options...]
#
# BASE_DIR and HEAD_DIR are checkouts of the code under test (the directory each run starts
# in, so a --task path is read from that checkout). $BENCHBOX is the command (default
# `benchbox`, the installed one); where the code under test is benchbox itself (its built-in
# task, its runners), set BENCHBOX="python -m benchbox" so each run imports its checkout's. Runs alternate base, head, head, base,
# base, head, ... ($BENCHBOX_ROUNDS pairs, default 5) so both sides see the same conditions;
# each side's runs are then joined as rounds (`benchbox combine`) and diffed, so drift
# between runs widens the interval instead of looking like a change. When
# OUT_DIR/baseline.json exists already (a committed baseline), only head is run; a
# torch-compile artifact beside it (OUT_DIR/torch-compile.artifact) is loaded by the head runs.
#
# A regression is checked before it is reported: when the diff finds one, the same number of
# alternating runs is made again (a second, independent set: base-recheck.json and
# head-recheck.json) and a row is a regression only when both sets judge it one
# (examples/ci/recheck.py), so identical code fails with about α² instead of α. Set
# BENCHBOX_RECHECK=0 to report the first set's verdict alone. With a committed baseline both
# sets compare against it, so only head is measured twice. If a recheck run fails, the first
# set's report and verdict (exit 1) stand, with the failure appended.
#
# Writes OUT_DIR/base.json, OUT_DIR/head.json, OUT_DIR/diff.md (always: the report, or why
# there is none) and OUT_DIR/diff-exit (the verdict's exit code: 0 no regression,
# 1 regression, 2 refused or unusable input, 3 nothing judged or unreliable). Exits 0 when
# diff.md was written, whatever the verdict: the workflow decides what fails the job.
#
# Text from logs (a failed run's last lines, a refusal) goes into diff.md inside a fenced code
# block, with absolute paths made relative to the checkouts and OUT_DIR and backticks replaced,
# so nothing in it is rendered as markdown or HTML where the report is shown.
set -uo pipefail

base_dir=$1 head_dir=$2 out=$3
shift 3
rounds=${BENCHBOX_ROUNDS:-5}
benchbox=${BENCHBOX:-benchbox}
mkdir -p "$out"
out=$(cd "$out" && pwd)
base_abs=$(cd "$base_dir" && pwd)
head_abs=$(cd "$head_dir" && pwd)

fenced() {  # text on stdin -> a fenced code block: paths relative, no backticks, at most 40 lines
  local sed_args=(-e "s#$out/##g" -e "s#$base_abs/#base/#g" -e "s#$head_abs/#head/#g")
  [ -n "${GITHUB_WORKSPACE:-}" ] && sed_args+=(-e "s#${GITHUB_WORKSPACE%/}/##g")
  [ -n "${HOME:-}" ] && sed_args+=(-e "s#${HOME%/}/#~/#g")
  echo '```text'
  # any other absolute path (one a message cut short, say) keeps only its last part
  sed_args+=(-E -e "s#(^|[[:space:]'\"(=])/([^[:space:]'\"/]+/)+#\\1.../#g" -e 's/`/'"'"'/g')
  tr -d '\000-\010\013-\037\177' | sed "${sed_args[@]}" | tail -n 40 | cut -c1-400
  echo '```'
}

report_failure() {  # why, log text: the step summary and the PR comment say why there is no diff
  printf '%s\n' "$2" > "$out/failure.txt"
  if [ -n "${rechecking:-}" ]; then  # the first set's report and verdict stand, unconfirmed
    { printf '\n#### The recheck did not complete\n\n%s The first set'"'"'s verdict stands.\n\n' "$1"
      printf '%s\n' "$2" | fenced; } >> "$out/diff.body"
    { echo '<!-- benchbox-diff -->'; cat "$out/diff.body"; } > "$out/diff.md"
    echo 1 > "$out/diff-exit"
    exit 0
  fi
  { printf '<!-- benchbox-diff -->\n### benchbox: no comparison\n\n%s\n\n' "$1"
    printf '%s\n' "$2" | fenced; } > "$out/diff.md"
  echo 2 > "$out/diff-exit"
  exit 0
}

one_run() {  # side, name of the run (1, 2, ... or recheck-1, ...)
  local dir=$1_dir
  (cd "${!dir}" && $benchbox run --out "$out/$1-$2.json" "${run_args[@]}") > "$out/$1-$2.log" 2>&1 \
    || report_failure "The $1 run $2 of $rounds failed; the last lines of its log:" "$(tail -n 5 "$out/$1-$2.log")"
}

run_args=("$@")
sides=(base head)
[ -f "$out/baseline.json" ] && sides=(head)
# A compiled artifact kept beside the baseline (OUT_DIR/torch-compile.artifact): head runs the
# baseline's kernels, unless the change under test changed the compile's key (then it compiles
# its own, and the report says why).
if [ -f "$out/baseline.json" ] && [ -f "$out/torch-compile.artifact" ]; then
  run_args+=(--runner-option "torch-compile:artifact=$out/torch-compile.artifact"
             --runner-option "torch-compile:artifact_mismatch=compile")
fi
measure() {  # prefix of the runs' names ("" or "recheck-"), suffix of the joined receipts
  local i side order
  for i in $(seq 1 "$rounds"); do
    order=("${sides[@]}")
    # alternate which side goes first, so neither always runs on a warmer or cooler machine
    if [ $((i % 2)) -eq 0 ] && [ ${#sides[@]} -eq 2 ]; then order=(head base); fi
    for side in "${order[@]}"; do one_run "$side" "$1$i"; done
  done
  for side in "${sides[@]}"; do join "$side" "$1" "$2"; done
}

join() {  # side, prefix of its runs' names, suffix of the joined receipt
  local joined="$out/$1$3.json" runs=("$out/$1-$2"[0-9]*.json)
  if [ "$rounds" -eq 1 ]; then cp "${runs[0]}" "$joined"; return; fi
  rm -f "$joined"
  $benchbox combine "${runs[@]}" -o "$joined" > /dev/null 2> "$out/combine-$1.log" \
    || report_failure "Combining the $1 runs failed:" "$(tail -n 5 "$out/combine-$1.log")"
}

judge() {  # suffix of the receipts: writes diff$1.body (markdown, or why refused) and diff$1.json
  (cd "$out" && env -u GITHUB_STEP_SUMMARY $benchbox diff "base$1.json" "head$1.json" --format markdown \
    ${BENCHBOX_DIFF_ARGS:-}) > "$out/diff$1.body" 2> "$out/diff$1.err"
  local code=$?
  if [ ! -s "$out/diff$1.body" ]; then
    { printf '### benchbox: comparison refused\n\n'; fenced < "$out/diff$1.err"; } > "$out/diff$1.body"
  fi
  (cd "$out" && env -u GITHUB_STEP_SUMMARY $benchbox diff "base$1.json" "head$1.json" --format json \
    ${BENCHBOX_DIFF_ARGS:-}) > "$out/diff$1.json" 2> /dev/null
  return "$code"
}

measure "" ""
[ -f "$out/baseline.json" ] && cp "$out/baseline.json" "$out/base.json"

# the workflow writes diff.md to the step summary itself, on every path
# run in OUT_DIR, so the report names the receipts base.json and head.json, not runner paths
judge ""
code=$?
if [ "$code" -eq 1 ] && [ "${BENCHBOX_RECHECK:-1}" != 0 ]; then
  rechecking=1
  measure "recheck-" "-recheck"
  [ -f "$out/baseline.json" ] && cp "$out/baseline.json" "$out/base-recheck.json"
  judge "-recheck"
  python3 "$(dirname "${BASH_SOURCE[0]}")/recheck.py" "$out/diff.json" "$out/diff-recheck.json" \
    > "$out/recheck.md" 2> "$out/recheck.err"
  code=$?
  { echo; cat "$out/recheck.md"; [ -s "$out/recheck.err" ] && fenced < "$out/recheck.err"
    printf '\n<details><summary>The second set of processes</summary>\n\n'
    cat "$out/diff-recheck.body"; printf '\n</details>\n'; } >> "$out/diff.body"
fi
{ echo '<!-- benchbox-diff -->'; cat "$out/diff.body"; } > "$out/diff.md"
echo "$code" > "$out/diff-exit"
