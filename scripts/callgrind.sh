#!/usr/bin/env bash
# Instructions per routed event on the context thread (the route/dispatch path), counted by
# callgrind: runs benches/examples/route_chain at two chain lengths and prints the difference per
# event, so that start-up and shutdown cancel out. Instruction counts are stable on a noisy VM,
# where timings are not. Needs valgrind.
#
# Usage: scripts/callgrind.sh [short] [long]   (defaults 1000000 2000000)
# Leaves the profiles in target/callgrind/ for callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/.."
short=${1:-1000000}
long=${2:-2000000}
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed" >&2; exit 1; }
cargo build --release -q -p correlator-benches --example route_chain
out=target/callgrind
rm -rf "$out" && mkdir -p "$out"
# The context thread is the one that executed the most instructions.
context_ir() {
  local n=$1
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/cg.$n" \
    target/release/examples/route_chain "$n" >/dev/null 2>"$out/valgrind.$n.log"
  local best=0
  for f in "$out"/cg."$n"-*; do
    local ir
    ir=$(awk '/^summary:/ {print $2}' "$f")
    [ "$ir" -gt "$best" ] && best=$ir
  done
  echo "$best"
}
a=$(context_ir "$short")
b=$(context_ir "$long")
awk -v a="$a" -v b="$b" -v s="$short" -v l="$long" \
  'BEGIN { printf "context thread: %d Ir at %d events, %d Ir at %d events: %.1f instructions per routed event\n", a, s, b, l, (b - a) / (l - s) }'
