#!/usr/bin/env bash
# Instructions per event on the engine's single-thread paths, counted by callgrind at two sizes
# and differenced, so that start-up and shutdown cancel out. Instruction counts are stable on a
# noisy VM, where timings are not. Needs valgrind.
#
#   scripts/callgrind.sh [route] [short] [long]   the context thread of benches/examples/route_chain
#                                                 (route/dispatch's path: each event routes the next)
#   scripts/callgrind.sh send [short] [long]      benches/examples/send_burst: the sending thread
#                                                 (reserve and commit into an inbox nobody takes from
#                                                 yet) and the context thread (take, dispatch, give
#                                                 places back), stream/*/engine's two sides without
#                                                 contention
#   scripts/callgrind.sh send-batch [short] [long]  benches/examples/send_batch_burst: the same with
#                                                 the burst sent in batches of 64 (send_batch_to):
#                                                 instructions per event sent
#
# Sizes default to 1000000 and 2000000 (route), 200000 and 400000 (send). Leaves the profiles in
# target/callgrind/ for callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=route
batch=
case "${1:-}" in
  route | send) mode=$1; shift ;;
  send-batch) mode=send batch=64; shift ;;
esac
if [ "$mode" = route ]; then
  example=route_chain short=${1:-1000000} long=${2:-2000000}
elif [ -n "$batch" ]; then
  example=send_batch_burst short=${1:-200000} long=${2:-400000}
else
  example=send_burst short=${1:-200000} long=${2:-400000}
fi
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed" >&2; exit 1; }
cargo build --release -q -p correlator-benches --example "$example"
out=target/callgrind
rm -rf "$out" && mkdir -p "$out"
# Prints the instruction count of every thread of one run, largest first.
thread_irs() {
  local n=$1
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/cg.$n" \
    "target/release/examples/$example" "$n" $batch >/dev/null 2>"$out/valgrind.$n.log"
  for f in "$out"/cg."$n"-*; do
    awk '/^summary:/ {print $2}' "$f"
  done | sort -rn
}
mapfile -t a < <(thread_irs "$short")
mapfile -t b < <(thread_irs "$long")
per_event() {
  awk -v a="$1" -v b="$2" -v s="$short" -v l="$long" 'BEGIN { printf "%.1f", (b - a) / (l - s) }'
}
if [ "$mode" = route ]; then
  # The context thread is the one that executed the most instructions.
  echo "context thread: ${a[0]} Ir at $short events, ${b[0]} Ir at $long events: $(per_event "${a[0]}" "${b[0]}") instructions per routed event"
else
  # The two busiest threads are the sender (main) and the context; tell them apart by name.
  main_ir() { awk '/^summary:/ {print $2}' "$out/cg.$1-01"; }
  ma=$(main_ir "$short") mb=$(main_ir "$long")
  ctx_ir() {
    local best=0
    for f in "$out"/cg."$1"-*; do
      [ "$f" = "$out/cg.$1-01" ] && continue
      local ir
      ir=$(awk '/^summary:/ {print $2}' "$f")
      [ "$ir" -gt "$best" ] && best=$ir
    done
    echo "$best"
  }
  ca=$(ctx_ir "$short") cb=$(ctx_ir "$long")
  how="per send"
  [ -n "$batch" ] && how="per event sent in batches of $batch"
  echo "sending thread: $(per_event "$ma" "$mb") instructions $how; context thread: $(per_event "$ca" "$cb") instructions per received event"
fi
