#!/usr/bin/env bash
# A local NATS server with JetStream for the connector's tests, examples and the loopback bench.
#
#   scripts/nats-server.sh install
#       Installs `nats-server` (Debian package) if it is not on PATH. Fails if it cannot.
#   scripts/nats-server.sh start [--port P] [--dir D] [--map SRC=DST]...
#       Installs the server if absent, then starts it in the background on 127.0.0.1, on a free
#       port (or P), with JetStream storing in a new temporary directory (or D, kept if it exists,
#       so that a server restarted on the same P and D finds its streams again). Each --map adds a
#       subject mapping of the global account, e.g. --map 'ev.*=evp.{{partition(4,1)}}.{{wildcard(1)}}'.
#       Waits until the server accepts connections, then prints three shell assignments:
#         NATS_URL=nats://127.0.0.1:PORT  NATS_PID=PID  NATS_DIR=DIR
#   scripts/nats-server.sh stop DIR [--keep]
#       Stops the server started with that DIR and removes DIR (unless --keep).
set -euo pipefail

die() {
  echo "nats-server.sh: $*" >&2
  exit 1
}

install_server() {
  command -v nats-server >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null 2>&1 || die "nats-server is not installed and apt-get is missing; install nats-server (2.9 or later) by hand"
  echo "nats-server.sh: installing nats-server (Debian package)" >&2
  local sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo -n)
  if ! "${sudo[@]}" apt-get install -y -q nats-server >&2; then
    "${sudo[@]}" apt-get update -q >&2 || true
    "${sudo[@]}" apt-get install -y -q nats-server >&2 || die "could not install nats-server with apt-get"
  fi
  command -v nats-server >/dev/null 2>&1 || die "nats-server is still not on PATH after installing it"
}

# A port nobody listens on now: the kernel's choice for an ephemeral bind.
free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
    return
  fi
  local port
  for _ in $(seq 1 100); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  die "found no free port"
}

start_server() {
  local port="" dir="" maps=()
  while [ $# -gt 0 ]; do
    case $1 in
      --port) port=$2; shift 2 ;;
      --dir) dir=$2; shift 2 ;;
      --map) maps+=("$2"); shift 2 ;;
      *) die "unknown option $1 (see the usage at the top of this script)" ;;
    esac
  done
  install_server
  [ -n "$dir" ] || dir=$(mktemp -d -t nats-server.XXXXXX)
  mkdir -p "$dir/js"
  [ -n "$port" ] || port=$(free_port)
  {
    echo "listen: 127.0.0.1:$port"
    echo "jetstream { store_dir: \"$dir/js\" }"
    if [ ${#maps[@]} -gt 0 ]; then
      echo "mappings = {"
      local m
      for m in "${maps[@]}"; do
        echo "  \"${m%%=*}\": \"${m#*=}\""
      done
      echo "}"
    fi
  } >"$dir/server.conf"
  nats-server -c "$dir/server.conf" >>"$dir/server.log" 2>&1 &
  local pid=$!
  echo "$pid" >"$dir/pid"
  # Ready once the port accepts a connection and JetStream has started (both logged before
  # "Server is ready"); bounded so that a server that cannot start fails the caller.
  for _ in $(seq 1 200); do
    if ! kill -0 "$pid" 2>/dev/null; then
      cat "$dir/server.log" >&2
      die "nats-server exited at start (log above)"
    fi
    if grep -q "Server is ready" "$dir/server.log" 2>/dev/null; then
      echo "NATS_URL=nats://127.0.0.1:$port"
      echo "NATS_PID=$pid"
      echo "NATS_DIR=$dir"
      return 0
    fi
    sleep 0.05
  done
  kill "$pid" 2>/dev/null || true
  cat "$dir/server.log" >&2
  die "nats-server did not become ready within 10 s (log above)"
}

stop_server() {
  local dir=${1:-}
  [ -n "$dir" ] && [ -f "$dir/pid" ] || die "usage: stop DIR [--keep] (DIR as printed by start)"
  local pid
  pid=$(cat "$dir/pid")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  [ "${2:-}" = "--keep" ] || rm -rf "$dir"
}

case ${1:-} in
  install) install_server ;;
  start) shift; start_server "$@" ;;
  stop) shift; stop_server "$@" ;;
  *) die "usage: $0 install | start [--port P] [--dir D] [--map SRC=DST]... | stop DIR [--keep]" ;;
esac
