#!/usr/bin/env bash
# Runs every test suite of the workspace: the README's test command, and what .ci/run runs.
#   format, lints and docs of the whole workspace; unit, integration and doc tests of every crate
#   (engine behaviour, differential property tests, reliability and stress tests, harness unit and
#   end-to-end tests, loom scenarios on real threads), and the engine's again in a debug build (its
#   debug assertions); the engine's outputs, async sends and tokio example with its `async`
#   feature; its status export with its `serde` and `metrics` features, its checkpoints with its
#   `checkpoint` feature (and clippy and docs with all its features); benches in test mode; the
#   seed example; the NATS connector against a real nats-server (installed if absent) and its
#   two-process example; the harness smoke run; the loom models; miri on the inbox and route
#   stack; ThreadSanitizer on the stress tests.
# Each stage prints its duration; the script stops at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

stage() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "==> $name"
  "$@"
  echo "<== $name: $((SECONDS - t0)) s"
}

# Rust components the lint stage needs (present on a rustup default install, added if missing).
rustup component add rustfmt clippy >/dev/null 2>&1 || true

stage "format" cargo fmt --all --check
stage "engine modules: no import circle, imports as each module doc says" bash -c 'python3 scripts/module-cycles.py --self-test && python3 scripts/module-cycles.py'
stage "clippy (workspace, all targets)" cargo clippy --workspace --all-targets -- -D warnings
stage "docs (warnings are errors)" env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
# No crate of the workspace turns on the engine's `serde` and `metrics` features: lint and
# document the engine once with every feature on.
stage "clippy (engine, all features)" cargo clippy -p correlator --all-targets --all-features -- -D warnings
stage "docs (engine, all features)" env RUSTDOCFLAGS="-D warnings" cargo doc -p correlator --no-deps --all-features
# The engine alone with its default features (a user's `cargo doc`), and with its private items
# (the links in the module docs that describe the design).
stage "docs (engine, default features; private items)" bash -c '
  RUSTDOCFLAGS="-D warnings" cargo doc -p correlator --no-deps &&
  RUSTDOCFLAGS="-D warnings" cargo doc -p correlator --no-deps --all-features --document-private-items'
# The NATS connector's tests and the harness's nats/loopback run against a real nats-server
# (Debian package), installed here if absent; each test starts and stops its own server.
stage "nats-server (install if absent)" scripts/nats-server.sh install
# The optimized stages build with the `ci` profile (Cargo.toml: release without its single codegen
# unit, thin LTO and debug info, which triple a fresh build's time and change nothing a test checks).
stage "tests (workspace: unit, integration, doc)" cargo test --workspace --profile ci
# The optimized run skips `debug_assert!`: run the engine's tests once more with them on.
stage "engine tests with debug assertions" cargo test -p correlator
# The harness turns the engine's `async` feature on in the workspace build; the engine alone
# (`-p correlator`) builds without it, so its receivers' tests, the async sends, `SharedInput`,
# `shutdown_async` and the tokio service (both runtime flavours) run here with it.
stage "engine outputs and async sends with the async feature" cargo test -p correlator --profile ci \
  --features async --lib --test outputs --test async_send --test async_service
stage "tokio examples (the service, and the quick start the README and the rustdoc show)" bash -c '
  cargo run -q --profile ci -p correlator --features async --example tokio_service &&
  cargo run -q --profile ci -p correlator --features async --example quick_start'
stage "engine status export with the serde and metrics features" \
  cargo test -p correlator --profile ci --features serde,metrics --lib --test status_export
# The `checkpoint` feature (serde and postcard) is off in the workspace build: the checkpoint and
# recovery tests and the rustdoc examples of `Persistent` and `checkpoints` run here.
stage "engine checkpoints and recovery with the checkpoint feature" bash -c '
  cargo test -p correlator --profile ci --features checkpoint --lib --test checkpoint_recover --test checkpoint_cut --test checkpoint_queries --test checkpoint_store &&
  cargo test -p correlator --profile ci --features checkpoint --doc Persistent &&
  cargo test -p correlator --profile ci --features checkpoint --doc ::checkpoints'
# The `quantiles` feature (the `histogram` crate) is off in the workspace build: its aggregate's
# unit tests (its checkpointed state's too) and rustdoc example run here.
stage "engine stream queries with the quantiles feature" bash -c '
  cargo test -p correlator --profile ci --features quantiles,checkpoint --lib query:: &&
  cargo test -p correlator --profile ci --features quantiles --doc Quantile'
# `cargo test --benches` runs each criterion benchmark once, as `cargo bench -- --test` does.
stage "benches (test mode)" cargo test -p correlator-benches --benches --profile ci
stage "seed example" bash -c '
  out=$(cargo run -q --profile ci -p correlator --example seed_order)
  echo "$out"
  [ "$out" = "E1 R1 R3 R5 R4 R2 E2 E3 E4 En1 En2" ]'
stage "nats example (two correlator processes, one server)" env PROFILE=ci scripts/nats-example.sh 16 200
stage "harness smoke" cargo run -q --profile ci -p harness -- run --smoke --out target/smoke-results
stage "loom models" scripts/loom.sh
stage "miri (inbox, route stack, monitor state, listener table)" scripts/miri.sh
stage "thread sanitizer (stress tests)" scripts/tsan.sh
echo "all test suites passed"
