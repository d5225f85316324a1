#!/usr/bin/env bash
# Recompute the verdict from the measuring job's receipts, with this checkout's benchbox.
#
#   examples/ci/verdict.sh RECEIPTS_DIR [benchbox diff options...]
#
# RECEIPTS_DIR holds base.json and head.json (the measuring job's artifact). The verdict is
# `benchbox diff`'s own, computed here: nothing the measuring job wrote decides it (its
# diff-exit and diff.md are ignored), and no code from the pull request runs here.
#
# Writes RECEIPTS_DIR/verdict.md (the report for the step summary and the PR comment; text
# from the artifact appears only in a fenced code block, relative paths, no backticks) and
# exits with the gate's code: benchbox diff's (0 no regression, 1 regression, 2 refused or
# unusable input, 3 nothing judged or a row unreliable), or 2 when there are no receipts.
# Where the measuring job rechecked a regression (base-recheck.json and head-recheck.json, a
# second independent set of processes), a row fails only when both sets judge it a regression
# (examples/ci/recheck.py, as bench.sh decides it). $BENCHBOX_DIFF_ARGS (set it for the whole
# workflow) is passed to every diff here as bench.sh passes it, so both jobs judge alike.
set -uo pipefail

out=$1
shift
benchbox=${BENCHBOX:-benchbox}
report="$out/verdict.md"

fenced() {  # text on stdin -> a fenced code block: no backticks or control characters, 40 lines
  echo '```text'
  tr -d '\000-\010\013-\037\177' | sed -e 's/`/'"'"'/g' | tail -n 40 | cut -c1-400
  echo '```'
}

if [ ! -f "$out/base.json" ] || [ ! -f "$out/head.json" ]; then
  { printf '<!-- benchbox-diff -->\n### benchbox: no comparison\n\n'
    printf 'The measuring job left no receipts to compare; its log says why.\n\n'
    if [ -f "$out/failure.txt" ]; then fenced < "$out/failure.txt"; fi; } > "$report"
  exit 2
fi

# run in RECEIPTS_DIR, so the report names the receipts base.json and head.json, not runner paths
(cd "$out" && env -u GITHUB_STEP_SUMMARY $benchbox diff base.json head.json --format markdown \
  ${BENCHBOX_DIFF_ARGS:-} "$@") \
  > "$out/verdict.body" 2> "$out/verdict.err"
code=$?
if [ ! -s "$out/verdict.body" ]; then
  { printf '### benchbox: comparison refused\n\n'; fenced < "$out/verdict.err"; } > "$out/verdict.body"
fi
if [ "$code" -eq 1 ] && [ -f "$out/base-recheck.json" ] && [ -f "$out/head-recheck.json" ]; then
  for suffix in "" "-recheck"; do
    (cd "$out" && env -u GITHUB_STEP_SUMMARY $benchbox diff "base$suffix.json" "head$suffix.json" \
      --format json ${BENCHBOX_DIFF_ARGS:-} "$@") > "$out/verdict$suffix.json" 2> /dev/null
  done
  python3 "$(dirname "${BASH_SOURCE[0]}")/recheck.py" "$out/verdict.json" "$out/verdict-recheck.json" \
    > "$out/verdict-recheck.md" 2> "$out/verdict-recheck.err"
  code=$?
  { echo; cat "$out/verdict-recheck.md"; [ -s "$out/verdict-recheck.err" ] && fenced < "$out/verdict-recheck.err"
    } >> "$out/verdict.body"
fi
if [ -s "$out/failure.txt" ] && [ ! -f "$out/head-recheck.json" ]; then  # a recheck that did not complete
  { printf '\n#### The measuring job'"'"'s recheck did not complete; the last lines of its log:\n\n'
    fenced < "$out/failure.txt"; } >> "$out/verdict.body"
fi
{ echo '<!-- benchbox-diff -->'; cat "$out/verdict.body"; } > "$report"
exit "$code"
