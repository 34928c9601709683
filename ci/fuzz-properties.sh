#!/usr/bin/env bash
# Runs every property of outside input (conformance --test checks parsers:: and the
# kwok provider's properties in autoscaler's unit tests) for SECONDS each
# (600 by default), in rounds of fresh random cases, and prints a line per
# property: cases run, seconds, and pass or the failure log's path.
#   ci/fuzz-properties.sh [SECONDS] [CASES_PER_ROUND]
# SHARD=i/n runs the i-th of n interleaved shares of the properties (i from
# 0), so n runs, one a core, cover them all.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-600}
round=${2:-200000}
shard=${SHARD:-0/1}
shard_i=${shard%/*}
shard_n=${shard#*/}
if ! [[ $shard =~ ^[0-9]+/[0-9]+$ ]] || [ "$shard_n" -eq 0 ] || [ "$shard_i" -ge "$shard_n" ]; then
  echo "SHARD=$shard: expected i/n with 0 <= i < n, as 0/2 and 1/2" >&2
  exit 2
fi
test_binary() { # the test executable cargo builds for these arguments
  cargo test --locked "$@" --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable"): print(m["executable"])' | tail -1
}
parsers=$(test_binary -p conformance --features aws --test checks)
autoscaler=$(test_binary -p autoscaler --lib)
run() { # binary test
  local bin=$1 t=$2 start cases=0 log
  start=$(date +%s)
  log=$(mktemp)
  while [ $(( $(date +%s) - start )) -lt "$limit" ]; do
    if ! PROPTEST_CASES=$round "$bin" --exact "$t" -q >"$log" 2>&1; then
      echo "$t: FAILED after $cases cases in $(( $(date +%s) - start )) s: $log"
      return 1
    fi
    cases=$((cases + round))
  done
  rm -f "$log"
  echo "$t: $cases cases in $(( $(date +%s) - start )) s, no failure"
}
status=0
k=0
while read -r bin t; do
  if [ $((k % shard_n)) -eq "$shard_i" ]; then run "$bin" "$t" || status=1; fi
  k=$((k + 1))
done < <(
  "$parsers" --list 2>/dev/null | sed -n "s|: test$||p" | grep '^parsers::' | sed "s|^|$parsers |"
  "$autoscaler" --list 2>/dev/null | sed -n "s|: test$||p" | grep 'kwok::tests::properties::' \
    | sed "s|^|$autoscaler |"
)
exit "$status"
