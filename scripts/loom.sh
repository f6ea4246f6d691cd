#!/usr/bin/env bash
# Runs the loom models of the engine's protocols (release, own target dir) and fails if fewer than
# the expected number of models ran.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
log=$(mktemp)
RUSTFLAGS="--cfg loom" cargo test -p loom-tests --release --target-dir target/loom 2>&1 | tee "$log"
passed=$(grep -Eo 'test result: ok\. [0-9]+ passed' "$log" | awk '{s+=$4} END {print s+0}')
rm -f "$log"
min="${LOOM_MIN_MODELS:-6}"
if [ "$passed" -lt "$min" ]; then
  echo "loom: only $passed models ran (expected at least $min)" >&2
  exit 1
fi
echo "loom: $passed models passed with LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS in $((SECONDS - t0)) s"
