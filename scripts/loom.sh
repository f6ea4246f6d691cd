#!/usr/bin/env bash
# Runs the loom models of the engine's protocols (release, own target dir) and fails if any model
# fails or if fewer than the expected number of models ran.
#   LOOM_MAX_PREEMPTIONS  preemption bound of the exploration (default 2)
#   LOOM_MIN_MODELS       models that must pass (default: the number in loom-tests/tests/model_*.rs)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
t0=$SECONDS
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# --no-fail-fast: a failing model does not hide the results of the other test binaries.
RUSTFLAGS="--cfg loom" cargo test -p loom-tests --release --target-dir target/loom --no-fail-fast \
  2>&1 | tee "$log"
passed=$(passed_tests "$log")
min="${LOOM_MIN_MODELS:-26}"
if [ "$passed" -lt "$min" ]; then
  echo "loom: only $passed models passed (expected at least $min)" >&2
  exit 1
fi
echo "loom: $passed models passed with LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS in $((SECONDS - t0)) s"
