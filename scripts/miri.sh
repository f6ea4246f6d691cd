#!/usr/bin/env bash
# Runs the unit tests of the inbox, route stack, monitor state and listener table under
# miri on the nightly toolchain, installing the toolchain and the components it needs, and fails if
# a test fails or if no test ran. The threaded tests shrink their iteration counts under cfg(miri).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
t0=$SECONDS
rustup toolchain install nightly --profile minimal --component miri,rust-src >/dev/null
cargo +nightly miri setup >/dev/null
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Only the unit tests of the modules with unsafe code or its users: `inbox::`, `route::`, `state::`,
# `listener::`.
MIRIFLAGS="${MIRIFLAGS:-}" cargo +nightly miri test -p correlator --lib --target-dir target/miri \
  -- inbox:: route:: state:: listener:: 2>&1 | tee "$log"
passed=$(passed_tests "$log")
if [ "$passed" -lt 1 ]; then
  echo "miri: no test ran" >&2
  exit 1
fi
echo "miri: $passed tests passed in $((SECONDS - t0)) s"
