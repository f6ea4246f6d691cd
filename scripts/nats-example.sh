#!/usr/bin/env bash
# The scale-out example: one NATS server, two correlator processes that each own half of the
# partitions of one stream, and a publisher. Every key's events are processed, in order, by
# exactly one process; the script checks that and prints each process's status line.
#   scripts/nats-example.sh [KEYS] [EVENTS_PER_KEY]     (defaults 16 and 500)
#   PROFILE  the cargo profile the worker is built with (default release; the test command: ci)
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-16}
per_key=${2:-500}

profile=${PROFILE:-release}
cargo build -q --profile "$profile" -p correlator-nats --bin correlator-nats-worker
worker=target/$profile/correlator-nats-worker
eval "$(scripts/nats-server.sh start --map 'ev.*=evp.{{partition(4,1)}}.{{wildcard(1)}}')"
logs=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  scripts/nats-server.sh stop "$NATS_DIR"
  rm -rf "$logs"
}
trap cleanup EXIT
echo "server $NATS_URL (partitions: ev.KEY -> evp.{{partition(4,1)}}.KEY)"

for i in 0 1; do
  "$worker" run --url "$NATS_URL" --process "$i" --processes 2 --partitions 4 \
    --log "$logs/worker-$i.log" --idle-exit 2 &
  pids+=($!)
done
"$worker" publish --url "$NATS_URL" --partitions 4 --keys "$keys" --per-key "$per_key"
for pid in "${pids[@]}"; do wait "$pid"; done
pids=()

# Check: every key in exactly one log, its events 1..N in order.
for i in 0 1; do
  echo "worker $i processed $(wc -l <"$logs/worker-$i.log") events, keys:" \
    "$(cut -d' ' -f1 "$logs/worker-$i.log" | sort -u | tr '\n' ' ')"
done
awk -v n="$per_key" -v keys="$keys" '
  { f = FILENAME; if (!(($1) in owner)) owner[$1] = f
    else if (owner[$1] != f) { print "key " $1 " in two processes"; bad = 1 }
    if ($2 != last[$1] + 1) { print "key " $1 ": " $2 " after " last[$1]; bad = 1 }
    last[$1] = $2 }
  END { for (k in last) { seen++; if (last[k] != n) { print "key " k " ends at " last[k]; bad = 1 } }
        if (seen != keys) { print seen " keys of " keys; bad = 1 }
        if (bad) exit 1; print "every key in order, none lost" }' "$logs"/worker-*.log
