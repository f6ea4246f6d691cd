#!/usr/bin/env bash
# Runs the concurrency stress tests (reliability, stress_cycle, backpressure, shutdown) under
# ThreadSanitizer on the nightly toolchain, with the standard library rebuilt instrumented
# (-Zbuild-std), installing the components it needs. Fails on any reported race or if no test ran.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
t0=$SECONDS
rustup toolchain install nightly --profile minimal --component rust-src >/dev/null
target=$(rustc -vV | sed -n 's/^host: //p')
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Halt on the first report so that a race fails the run rather than scrolling past.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}"
RUSTFLAGS="-Zsanitizer=thread --cfg tsan" RUSTDOCFLAGS="-Zsanitizer=thread" \
  cargo +nightly test -Zbuild-std --target "$target" --target-dir target/tsan --release \
  -p correlator --test reliability --test stress_cycle --test backpressure --test shutdown_errors \
  2>&1 | tee "$log"
if grep -q "WARNING: ThreadSanitizer" "$log"; then
  echo "tsan: data race reported" >&2
  exit 1
fi
passed=$(passed_tests "$log")
if [ "$passed" -lt 1 ]; then
  echo "tsan: no test ran" >&2
  exit 1
fi
echo "tsan: $passed tests passed in $((SECONDS - t0)) s"
